"""What codegen/vta compiles: a packed conv2d workload and its tile configuration.

A workload is in *blocks*: the input ``NCHW1n16c`` (TVM's packed layout, ``(N//BATCH,
C//BLOCK_IN, H, W, BATCH, BLOCK_IN)``), the weights ``OIHW16o16i`` (``(CO//BLOCK_OUT,
CI//BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN)``) and the int8 output ``(N//BATCH, CO//BLOCK_OUT,
OH, OW, BATCH, BLOCK_OUT)``. Dense is the 1x1 case with H = W = 1.

The tile configuration has the knobs of the seed's AutoTVM template (TVM's
``schedule_conv2d_packed``): inner tile sizes of the batch, output-height, output-width,
input-channel-block and output-channel-block axes, and the number of virtual threads over height
and output channels. ``check_config`` says why a configuration cannot run (a tile that does not
divide its axis, or buffers that overflow): such configs are refused, never miscompiled.

``spec`` arguments are the runtime's ``VTASpec`` (duck-typed: codegen does not import runtime).
"""

from __future__ import annotations

from dataclasses import dataclass


class VTAConfigError(ValueError):
    """A tile configuration that cannot compile its workload (the message says why)."""


class VTALowerError(ValueError):
    """A loop nest that does not map onto VTA (the message names the buffer / stage and what
    to change in the schedule)."""


@dataclass(frozen=True)
class Conv2dWorkload:
    """A packed int8 conv2d with requantization, in units of BATCH / BLOCK blocks.

    Parameters
    ----------
    batch_blocks, in_blocks, height, width : int
        Input shape ``(N//BATCH, CI//BLOCK_IN, H, W)``.
    out_blocks, kernel_h, kernel_w : int
        Weight shape ``(CO//BLOCK_OUT, CI//BLOCK_IN, KH, KW)``.
    stride_h, stride_w, pad_h, pad_w : int
    shift, clip_min, clip_max : int
        Requantization on the ALU: ``out = clip(acc >> shift, clip_min, clip_max)`` as int8.
    requantize : bool
        False: the output is the int32 accumulator itself (``nn.conv2d`` with out_dtype int32
        in a graph), stored as four int8 byte planes since STORE writes 8 bits.
    """

    batch_blocks: int
    in_blocks: int
    height: int
    width: int
    out_blocks: int
    kernel_h: int = 1
    kernel_w: int = 1
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    shift: int = 8
    clip_min: int = -127
    clip_max: int = 127
    requantize: bool = True

    @property
    def out_height(self) -> int:
        return (self.height + 2 * self.pad_h - self.kernel_h) // self.stride_h + 1

    @property
    def out_width(self) -> int:
        return (self.width + 2 * self.pad_w - self.kernel_w) // self.stride_w + 1

    @property
    def gemm_uops(self) -> int:
        """Block multiplies the conv needs: the GEMM-bound cycle count at one per cycle."""
        return (
            self.batch_blocks * self.out_blocks * self.out_height * self.out_width
            * self.in_blocks * self.kernel_h * self.kernel_w
        )  # fmt: skip


@dataclass(frozen=True)
class TileConfig:
    """Inner tile sizes (in blocks for ci / co) and virtual threads, the seed's knobs."""

    tile_b: int = 1
    tile_h: int = 1
    tile_w: int = 1
    tile_ci: int = 1
    tile_co: int = 1
    h_threading: int = 1
    oc_threading: int = 1

    @property
    def threads(self) -> int:
        return self.h_threading * self.oc_threading


@dataclass(frozen=True)
class Footprint:
    """On-chip entries one virtual thread's tile needs, and the input tile's shape."""

    inp: int
    wgt: int
    acc: int
    gemm_uops: int
    elem_uops: int
    in_h: int
    in_w: int


def footprint(wkl: Conv2dWorkload, cfg: TileConfig) -> Footprint:
    th, tco = cfg.tile_h // cfg.h_threading, cfg.tile_co // cfg.oc_threading
    in_h = (th - 1) * wkl.stride_h + wkl.kernel_h
    in_w = (cfg.tile_w - 1) * wkl.stride_w + wkl.kernel_w
    acc = cfg.tile_b * tco * th * cfg.tile_w
    return Footprint(
        inp=cfg.tile_b * cfg.tile_ci * in_h * in_w,
        wgt=tco * cfg.tile_ci * wkl.kernel_h * wkl.kernel_w,
        acc=acc,
        gemm_uops=acc * cfg.tile_ci,
        elem_uops=acc,
        in_h=in_h,
        in_w=in_w,
    )


def check_config(wkl: Conv2dWorkload, cfg: TileConfig, spec) -> str | None:
    """Why ``cfg`` cannot compile ``wkl`` on ``spec`` (one line), or None when it can."""
    axes = (
        ("tile_b", cfg.tile_b, wkl.batch_blocks),
        ("tile_h", cfg.tile_h, wkl.out_height),
        ("tile_w", cfg.tile_w, wkl.out_width),
        ("tile_ci", cfg.tile_ci, wkl.in_blocks),
        ("tile_co", cfg.tile_co, wkl.out_blocks),
    )
    for name, tile, extent in axes:
        if tile < 1 or extent % tile:
            return f"{name}={tile} does not divide its axis of extent {extent}"
    for name, threads, tile in (
        ("h_threading", cfg.h_threading, cfg.tile_h),
        ("oc_threading", cfg.oc_threading, cfg.tile_co),
    ):
        if threads < 1 or tile % threads:
            return f"{name}={threads} does not divide its tile of {tile}"
    if max(wkl.pad_h, wkl.pad_w) > 15:
        return f"padding {wkl.pad_h}x{wkl.pad_w} exceeds the 4-bit pad fields of LOAD"
    fp, n = footprint(wkl, cfg), cfg.threads
    for buffer, need in (
        ("inp", fp.inp * n),
        ("wgt", fp.wgt * n),
        ("acc", fp.acc * n),
        ("uop", (fp.gemm_uops + fp.elem_uops) * n),
    ):
        if need > spec.depth(buffer):
            return (
                f"the tiles need {need} {buffer} buffer entries, more than its "
                f"{spec.depth(buffer)}; use smaller tiles or fewer threads"
            )
    return None


def describe(wkl: Conv2dWorkload, cfg: TileConfig) -> str:
    """``(in ..., out ...): config tile_b=..`` for error messages."""
    return f"{_shape(wkl)}: config {_knobs(cfg)}"


def _shape(wkl: Conv2dWorkload) -> str:
    return (
        f"(in {wkl.batch_blocks}x{wkl.in_blocks}x{wkl.height}x{wkl.width}, "
        f"out {wkl.out_blocks} blocks, kernel {wkl.kernel_h}x{wkl.kernel_w}, "
        f"stride {wkl.stride_h}, pad {wkl.pad_h})"
    )


def _knobs(cfg: TileConfig) -> str:
    return ", ".join(f"{k}={v}" for k, v in vars(cfg).items())
