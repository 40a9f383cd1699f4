"""The simulated VTA's hardware parameters: tensor shapes, data widths and on-chip buffer sizes.

These are the fields of TVM's ``vta_config.json`` (``LOG_*``: base-2 logarithms), turned into the
numbers the simulator and the code generator work with. ``autosched.vta.get_env()`` builds one
from a JSON file; the runtime takes it as a plain value (it imports nothing from autosched).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The defaults of TVM's 3rdparty/vta-hw/config/vta_config.json (the Pynq configuration).
DEFAULT_CONFIG = {
    "TARGET": "sim",
    "HW_VER": "0.0.2",
    "LOG_INP_WIDTH": 3,
    "LOG_WGT_WIDTH": 3,
    "LOG_ACC_WIDTH": 5,
    "LOG_BATCH": 0,
    "LOG_BLOCK": 4,
    "LOG_UOP_BUFF_SIZE": 15,
    "LOG_INP_BUFF_SIZE": 15,
    "LOG_WGT_BUFF_SIZE": 18,
    "LOG_ACC_BUFF_SIZE": 17,
}

#: Bytes of one micro-op in the uop buffer and in DRAM (VTA packs dst/src/wgt into 32 bits).
UOP_BYTES = 4


@dataclass(frozen=True)
class VTASpec:
    """The shape of one VTA instance.

    Parameters
    ----------
    log_inp_width, log_wgt_width, log_acc_width : int
        log2 of the bit widths of input, weight and accumulator elements (3, 3, 5: int8, int8,
        int32). The output (what STORE writes) has the input's width.
    log_batch, log_block : int
        log2 of the GEMM core's shape: it multiplies a ``BATCH x BLOCK_IN`` input tile by a
        ``BLOCK_OUT x BLOCK_IN`` weight tile each cycle (BLOCK_IN == BLOCK_OUT == 2**log_block).
    log_uop_buff_size, log_inp_buff_size, log_wgt_buff_size, log_acc_buff_size : int
        log2 of the on-chip buffer sizes in bytes.
    """

    log_inp_width: int = 3
    log_wgt_width: int = 3
    log_acc_width: int = 5
    log_batch: int = 0
    log_block: int = 4
    log_uop_buff_size: int = 15
    log_inp_buff_size: int = 15
    log_wgt_buff_size: int = 18
    log_acc_buff_size: int = 17

    def __post_init__(self):
        if (self.log_inp_width, self.log_wgt_width, self.log_acc_width) != (3, 3, 5):
            raise ValueError(
                "VTASpec: this simulator models int8 inputs/weights and int32 accumulators "
                "(LOG_INP_WIDTH=3, LOG_WGT_WIDTH=3, LOG_ACC_WIDTH=5); got "
                f"{self.log_inp_width}, {self.log_wgt_width}, {self.log_acc_width}"
            )

    # ------------------------------------------------------------------ shapes and widths
    @property
    def BATCH(self) -> int:  # noqa: N802 (TVM's names)
        return 1 << self.log_batch

    @property
    def BLOCK_IN(self) -> int:  # noqa: N802
        return 1 << self.log_block

    @property
    def BLOCK_OUT(self) -> int:  # noqa: N802
        return 1 << self.log_block

    @property
    def INP_WIDTH(self) -> int:  # noqa: N802
        return 1 << self.log_inp_width

    @property
    def WGT_WIDTH(self) -> int:  # noqa: N802
        return 1 << self.log_wgt_width

    @property
    def ACC_WIDTH(self) -> int:  # noqa: N802
        return 1 << self.log_acc_width

    @property
    def OUT_WIDTH(self) -> int:  # noqa: N802
        return self.INP_WIDTH

    # ------------------------------------------------------------------ one buffer entry
    @property
    def inp_elem_bytes(self) -> int:
        """Bytes of one input-buffer entry: a BATCH x BLOCK_IN int8 tile."""
        return self.BATCH * self.BLOCK_IN * self.INP_WIDTH // 8

    @property
    def wgt_elem_bytes(self) -> int:
        """Bytes of one weight-buffer entry: a BLOCK_OUT x BLOCK_IN int8 tile."""
        return self.BLOCK_OUT * self.BLOCK_IN * self.WGT_WIDTH // 8

    @property
    def acc_elem_bytes(self) -> int:
        """Bytes of one accumulator entry: a BATCH x BLOCK_OUT int32 tile."""
        return self.BATCH * self.BLOCK_OUT * self.ACC_WIDTH // 8

    @property
    def out_elem_bytes(self) -> int:
        """Bytes of one output entry as STORE writes it: a BATCH x BLOCK_OUT int8 tile."""
        return self.BATCH * self.BLOCK_OUT * self.OUT_WIDTH // 8

    # ------------------------------------------------------------------ buffer depths (entries)
    @property
    def uop_depth(self) -> int:
        return (1 << self.log_uop_buff_size) // UOP_BYTES

    @property
    def inp_depth(self) -> int:
        return (1 << self.log_inp_buff_size) // self.inp_elem_bytes

    @property
    def wgt_depth(self) -> int:
        return (1 << self.log_wgt_buff_size) // self.wgt_elem_bytes

    @property
    def acc_depth(self) -> int:
        return (1 << self.log_acc_buff_size) // self.acc_elem_bytes

    def depth(self, buffer: str) -> int:
        """Entries of the on-chip buffer ``"uop"``, ``"inp"``, ``"wgt"`` or ``"acc"``."""
        return getattr(self, f"{buffer}_depth")

    @classmethod
    def from_config(cls, config: dict) -> VTASpec:
        """A spec from ``vta_config.json``-style fields (missing ones take the defaults)."""
        merged = {**DEFAULT_CONFIG, **config}
        return cls(**{k.lower(): int(v) for k, v in merged.items() if k.startswith("LOG_")})
