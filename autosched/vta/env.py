"""``vta.get_env()``: the VTA environment, read from a ``vta_config.json``-style file.

As in TVM, the environment holds the hardware configuration (``env.BATCH``, ``env.BLOCK_IN``,
``env.WGT_WIDTH``, ...), the targets (``env.target`` is ``ext_dev -device=vta``,
``env.target_host`` the CPU that drives it) and the names of the on-chip buffer scopes. Only
``TARGET: "sim"`` exists here: the accelerator is simulated (runtime/vta).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from codegen.target import Target
from runtime.vta.spec import DEFAULT_CONFIG, VTASpec
from runtime.vta.timing import TimingModel

TARGETS = ("sim",)


@dataclass(frozen=True)
class Environment:
    """The VTA hardware configuration and its targets (TVM's ``vta.Environment``).

    Parameters
    ----------
    config : dict
        ``vta_config.json`` fields; missing ones take ``DEFAULT_CONFIG``'s values.
    timing : TimingModel
        The simulator's cycle costs and clock.
    """

    config: dict = field(default_factory=lambda: dict(DEFAULT_CONFIG))
    timing: TimingModel = field(default_factory=TimingModel)

    def __post_init__(self):
        unknown = sorted(set(self.config) - set(DEFAULT_CONFIG))
        if unknown:
            raise ValueError(
                f"VTA config: unknown fields {unknown}; the known ones are {sorted(DEFAULT_CONFIG)}"
            )
        merged = {**DEFAULT_CONFIG, **self.config}
        if merged["TARGET"] not in TARGETS:
            raise ValueError(
                f"VTA config: TARGET={merged['TARGET']!r} is not available; only the simulator "
                f'({TARGETS}) exists here: set "TARGET": "sim"'
            )
        object.__setattr__(self, "config", merged)
        object.__setattr__(self, "spec", VTASpec.from_config(merged))

    # TVM's attribute names.
    TARGET = property(lambda self: self.config["TARGET"])
    HW_VER = property(lambda self: self.config["HW_VER"])
    LOG_INP_WIDTH = property(lambda self: self.config["LOG_INP_WIDTH"])
    LOG_WGT_WIDTH = property(lambda self: self.config["LOG_WGT_WIDTH"])
    LOG_ACC_WIDTH = property(lambda self: self.config["LOG_ACC_WIDTH"])
    LOG_BATCH = property(lambda self: self.config["LOG_BATCH"])
    LOG_BLOCK = property(lambda self: self.config["LOG_BLOCK"])
    LOG_UOP_BUFF_SIZE = property(lambda self: self.config["LOG_UOP_BUFF_SIZE"])
    LOG_INP_BUFF_SIZE = property(lambda self: self.config["LOG_INP_BUFF_SIZE"])
    LOG_WGT_BUFF_SIZE = property(lambda self: self.config["LOG_WGT_BUFF_SIZE"])
    LOG_ACC_BUFF_SIZE = property(lambda self: self.config["LOG_ACC_BUFF_SIZE"])
    BATCH = property(lambda self: self.spec.BATCH)
    BLOCK_IN = property(lambda self: self.spec.BLOCK_IN)
    BLOCK_OUT = property(lambda self: self.spec.BLOCK_OUT)
    INP_WIDTH = property(lambda self: self.spec.INP_WIDTH)
    WGT_WIDTH = property(lambda self: self.spec.WGT_WIDTH)
    ACC_WIDTH = property(lambda self: self.spec.ACC_WIDTH)
    OUT_WIDTH = property(lambda self: self.spec.OUT_WIDTH)
    INP_BUFF_SIZE = property(lambda self: 1 << self.LOG_INP_BUFF_SIZE)
    WGT_BUFF_SIZE = property(lambda self: 1 << self.LOG_WGT_BUFF_SIZE)
    ACC_BUFF_SIZE = property(lambda self: 1 << self.LOG_ACC_BUFF_SIZE)
    UOP_BUFF_SIZE = property(lambda self: 1 << self.LOG_UOP_BUFF_SIZE)

    # dtypes and buffer scopes, as TVM names them.
    inp_dtype = "int8"
    wgt_dtype = "int8"
    acc_dtype = "int32"
    out_dtype = "int8"
    inp_scope = "local.inp_buffer"
    wgt_scope = "local.wgt_buffer"
    acc_scope = "local.acc_buffer"
    dma_copy = "dma_copy"
    alu = "alu"
    gemm = "gemm"

    @property
    def target(self) -> Target:
        """The accelerator's target, ``ext_dev -device=vta``, with ``target_host`` as its host."""
        return Target("ext_dev -device=vta", host=self.target_host)

    @property
    def target_host(self) -> Target:
        """The CPU that drives the accelerator and runs the layers it does not (this host)."""
        return Target("llvm")

    @property
    def target_vta_cpu(self) -> Target:
        """The target to run the whole network on the CPU instead (seed: ``device="arm_cpu"``)."""
        return Target("llvm")


_DEFAULT: Environment | None = None


def get_env(config: str | Path | dict | None = None) -> Environment:
    """The VTA environment.

    Parameters
    ----------
    config : str, Path or dict, optional
        A ``vta_config.json`` file or its fields. Without it, TVM's defaults (the Pynq
        configuration with ``TARGET: "sim"``).
    """
    global _DEFAULT
    if config is None:
        if _DEFAULT is None:
            _DEFAULT = Environment()
        return _DEFAULT
    if isinstance(config, dict):
        return Environment(dict(config))
    path = Path(config)
    try:
        fields = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"VTA config {str(path)!r}: cannot read it as JSON ({e})") from None
    if not isinstance(fields, dict):
        raise ValueError(f"VTA config {str(path)!r}: must hold a JSON object of fields")
    return Environment(fields)
