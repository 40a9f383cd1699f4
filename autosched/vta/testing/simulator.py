"""The simulator's process-wide counters, as TVM's ``vta.testing.simulator`` reads them::

    simulator.clear_stats()
    timer()
    sim_stats = simulator.stats()
    for k, v in sim_stats.items():
        print("\\t{:<16}: {:>16}".format(k, v // (num * rep + 1)))

Every run of a network built by ``vta.build`` (its packed conv2d layers on the simulator)
adds to them (:mod:`autosched.vta.graph_module`).
"""

from __future__ import annotations

from ..graph_module import clear_total_stats, total_stats

#: The counters ``stats()`` reports: TVM's simulator's, in its order.
TVM_COUNTERS = (
    "inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
    "out_store_nbytes", "gemm_counter", "alu_counter",
)  # fmt: skip


def stats() -> dict:
    """The simulator's counters summed over every run since :func:`clear_stats`: bytes each
    DMA moved (``inp_load_nbytes`` ... ``out_store_nbytes``) and GEMM / ALU instructions'
    micro-op counts (``gemm_counter``, ``alu_counter``). The simulated cycles are in
    ``module.stats["cycles"]`` of a module's last run."""
    totals = total_stats()
    return {name: int(totals[name]) for name in TVM_COUNTERS}


def clear_stats() -> None:
    """Zero the counters."""
    clear_total_stats()


__all__ = ["clear_stats", "stats"]
