"""The simulated VTA's timing model: how many cycles each instruction takes.

Deliberately simple, so that one can predict a schedule's cycles by hand (docs/vta.md):

* a DMA (LOAD or STORE) takes ``dma_latency`` cycles to start, then moves ``dram_bytes_per_cycle``
  bytes per cycle; each padding entry a LOAD writes costs one more cycle;
* GEMM and ALU issue one micro-op iteration per cycle (``gemm_ii``, ``alu_ii``) after a pipeline
  fill of ``pipeline_depth`` cycles;
* FINISH takes one cycle;
* the three modules run in parallel: an instruction starts when its module is free and the tokens
  it pops have been pushed (a token is pushed when the pushing instruction ends).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TimingModel:
    """Cycle costs of the simulated VTA (defaults: a Pynq-like 64-bit DRAM port).

    Parameters
    ----------
    dram_bytes_per_cycle : int
        DMA bandwidth in bytes per cycle (8: a 64-bit AXI port).
    dma_latency : int
        Cycles from issuing a DMA to its first byte.
    gemm_ii, alu_ii : int
        Cycles per GEMM / ALU micro-op iteration (the initiation interval).
    pipeline_depth : int
        Cycles to fill the GEMM/ALU pipeline, paid once per instruction.
    clock_mhz : float
        The clock that converts cycles to seconds (VTA on a Pynq runs at 100 MHz).
    """

    dram_bytes_per_cycle: int = 8
    dma_latency: int = 64
    gemm_ii: int = 1
    alu_ii: int = 1
    pipeline_depth: int = 4
    clock_mhz: float = 100.0

    def dma_cycles(self, nbytes: int, pad_entries: int = 0) -> int:
        return self.dma_latency + -(-nbytes // self.dram_bytes_per_cycle) + pad_entries

    def gemm_cycles(self, iterations: int) -> int:
        return self.pipeline_depth + iterations * self.gemm_ii

    def alu_cycles(self, iterations: int) -> int:
        return self.pipeline_depth + iterations * self.alu_ii

    def seconds(self, cycles: int) -> float:
        return cycles / (self.clock_mhz * 1e6)
