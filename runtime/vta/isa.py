"""The VTA instruction set: five instructions, micro-ops, and their 128-bit encoding.

A VTA program is a stream of instructions plus a table of micro-ops (uops). Three modules run
the stream in parallel, each with its own queue (docs/vta.md has the picture):

* the **load** module runs ``LOAD`` into the input and weight buffers;
* the **compute** module runs ``LOAD`` into the uop and accumulator buffers, ``GEMM``, ``ALU``
  and ``FINISH``;
* the **store** module runs ``STORE`` from the accumulator to DRAM.

Modules synchronize with dependence tokens. Each instruction has four flags: it pops a token from
the queue of its previous / next module before it starts (``pop_prev``, ``pop_next``) and pushes
one to them when it ends (``push_prev``, ``push_next``). Load's next is compute; compute's
previous is load and its next is store; store's previous is compute.

The ISA follows TVM's VTA (``vta/include/vta/hw_spec.h``) with these simplifications: every
field has a fixed width in a 128-bit word (VTA derives some widths from the buffer sizes); the
ALU has MIN, MAX, ADD and SHR (a clip is a MAX then a MIN, as on VTA); STORE reads the
accumulator and keeps its low 8 bits (VTA keeps an int8 copy of the accumulator, the "out"
buffer, written by GEMM and ALU; the result is the same).

The code generator (codegen/vta) may not import the runtime (tests/test_layering.py), so it
emits instructions as plain dicts with these dataclasses' field names; ``from_dict`` turns them
into instructions here, checking every field.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, fields

import numpy as np

OPCODES = ("LOAD", "STORE", "GEMM", "FINISH", "ALU")
#: DRAM <-> SRAM memory types: the buffer a LOAD fills (or, for STORE, ``"out"``).
MEMORY_TYPES = ("uop", "wgt", "inp", "acc", "out")
ALU_OPCODES = ("MIN", "MAX", "ADD", "SHR")


class VTAError(RuntimeError):
    """A VTA program is malformed, overflows a buffer, or deadlocks on its tokens."""


@dataclass(frozen=True)
class Deps:
    """Dependence-token flags of one instruction (see the module docstring)."""

    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False


@dataclass(frozen=True)
class MemInsn:
    """``LOAD`` / ``STORE``: a 2-D strided DMA between DRAM and an on-chip buffer.

    The DRAM side is ``y_size`` rows of ``x_size`` consecutive entries, row ``y`` starting at entry
    ``dram_base + y * x_stride`` (entries of the buffer's element, e.g. a 1x16 int8 input tile).
    The SRAM side is dense: ``(y_pad_0 + y_size + y_pad_1)`` rows of ``(x_pad_0 + x_size +
    x_pad_1)`` entries from ``sram_base``, the pad entries filled with zeros (LOAD only).
    """

    opcode: str
    memory_type: str
    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0
    deps: Deps = Deps()

    @property
    def sram_rows(self) -> int:
        return self.y_pad_0 + self.y_size + self.y_pad_1

    @property
    def sram_cols(self) -> int:
        return self.x_pad_0 + self.x_size + self.x_pad_1


@dataclass(frozen=True)
class GemmInsn:
    """``GEMM``: for i < iter_out, j < iter_in, uop u in [uop_bgn, uop_end)::

        acc[dst] += inp[src] @ wgt[w].T      (or acc[dst] = 0 when ``reset``)
        dst = u.dst + i * dst_factor_out + j * dst_factor_in
        src = u.src + i * src_factor_out + j * src_factor_in
        w   = u.wgt + i * wgt_factor_out + j * wgt_factor_in

    ``inp[src]`` is BATCH x BLOCK_IN int8, ``wgt[w]`` BLOCK_OUT x BLOCK_IN int8, ``acc[dst]``
    BATCH x BLOCK_OUT int32 (wrapping, as the hardware's adders).
    """

    reset: bool
    uop_bgn: int
    uop_end: int
    iter_out: int
    iter_in: int
    dst_factor_out: int
    dst_factor_in: int
    src_factor_out: int
    src_factor_in: int
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    deps: Deps = Deps()
    opcode: str = "GEMM"


@dataclass(frozen=True)
class AluInsn:
    """``ALU``: the same loops as GEMM over the accumulator, elementwise::

        acc[dst] = op(acc[dst], imm if use_imm else acc[src])

    ``op`` in MIN, MAX, ADD, SHR (arithmetic shift right; a negative amount shifts left).
    ``imm`` is a signed 16-bit immediate.
    """

    alu_opcode: str
    use_imm: bool
    imm: int
    uop_bgn: int
    uop_end: int
    iter_out: int
    iter_in: int
    dst_factor_out: int
    dst_factor_in: int
    src_factor_out: int
    src_factor_in: int
    deps: Deps = Deps()
    opcode: str = "ALU"


@dataclass(frozen=True)
class FinishInsn:
    """``FINISH``: the end of the program (run by the compute module)."""

    deps: Deps = Deps()
    opcode: str = "FINISH"


Instruction = MemInsn | GemmInsn | AluInsn | FinishInsn


@dataclass(frozen=True, eq=False)
class Program:
    """An instruction stream and its micro-op table.

    Attributes
    ----------
    insns : tuple of Instruction
    uops : numpy.ndarray
        ``(n, 3)`` int32: each row a micro-op's (dst, src, wgt) buffer indices. ``LOAD uop``
        copies rows of this table into the uop buffer; GEMM/ALU use the uop buffer's rows.
    """

    insns: tuple
    uops: np.ndarray

    def __post_init__(self):
        uops = np.asarray(self.uops, dtype=np.int32).reshape(-1, 3)
        object.__setattr__(self, "uops", uops)
        object.__setattr__(self, "insns", tuple(self.insns))


def module_of(insn) -> str:
    """The module that runs ``insn``: ``"load"``, ``"compute"`` or ``"store"``."""
    if isinstance(insn, MemInsn):
        if insn.opcode == "STORE":
            return "store"
        return "load" if insn.memory_type in ("inp", "wgt") else "compute"
    return "compute"


# ----------------------------------------------------------------------------- plain-dict form

_CLASSES = {
    "LOAD": MemInsn,
    "STORE": MemInsn,
    "GEMM": GemmInsn,
    "ALU": AluInsn,
    "FINISH": FinishInsn,
}


_FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")
# The 16 flag combinations, shared between instructions (they are immutable).
_DEPS = {flags: Deps(*flags) for flags in itertools.product((False, True), repeat=4)}
_FIELDS = {cls: frozenset(f.name for f in fields(cls)) - {"deps"} for cls in set(_CLASSES.values())}


def from_dict(d: dict) -> Instruction:
    """An instruction from its plain-dict form (what codegen/vta emits), checked."""
    d = dict(d)
    op = d.get("opcode")
    if op not in _CLASSES:
        raise VTAError(f"instruction {d!r}: opcode must be one of {OPCODES}")
    cls = _CLASSES[op]
    deps = _DEPS[tuple(bool(d.pop(k, False)) for k in _FLAGS)]
    unknown = d.keys() - _FIELDS[cls]
    if unknown:
        raise VTAError(
            f"{op} instruction: unknown fields {sorted(unknown)}; known: {sorted(_FIELDS[cls])}"
        )
    if cls is not MemInsn:
        d.pop("opcode")
    insn = cls(**d, deps=deps)
    _check(insn)
    return insn


def to_dict(insn: Instruction) -> dict:
    """The plain-dict form of ``insn`` (deps flattened), inverse of ``from_dict``."""
    d = asdict(insn)
    d.update(d.pop("deps"))
    return d


def _check(insn) -> None:
    if isinstance(insn, MemInsn):
        if insn.opcode == "STORE" and insn.memory_type != "out":
            raise VTAError(f"STORE: memory_type must be 'out', got {insn.memory_type!r}")
        if insn.opcode == "LOAD" and insn.memory_type not in ("uop", "wgt", "inp", "acc"):
            raise VTAError(f"LOAD: memory_type must be uop/wgt/inp/acc, got {insn.memory_type!r}")
    if isinstance(insn, AluInsn) and insn.alu_opcode not in ALU_OPCODES:
        raise VTAError(f"ALU: alu_opcode must be one of {ALU_OPCODES}, got {insn.alu_opcode!r}")


# ----------------------------------------------------------------------------- 128-bit encoding

# (field, bits) in order from bit 0 after the 3-bit opcode and the 4 dependence flags.
_MEM_LAYOUT = (
    ("memory_type", 3), ("sram_base", 16), ("dram_base", 32), ("y_size", 16), ("x_size", 16),
    ("x_stride", 16), ("y_pad_0", 4), ("y_pad_1", 4), ("x_pad_0", 4), ("x_pad_1", 4),
)  # fmt: skip
_LOOPS = (
    ("uop_bgn", 13), ("uop_end", 14), ("iter_out", 14), ("iter_in", 14),
    ("dst_factor_out", 11), ("dst_factor_in", 11), ("src_factor_out", 11), ("src_factor_in", 11),
)  # fmt: skip
_GEMM_LAYOUT = (("reset", 1), *_LOOPS, ("wgt_factor_out", 10), ("wgt_factor_in", 10))
_ALU_LAYOUT = (("alu_opcode", 2), ("use_imm", 1), ("imm", 16), *_LOOPS)
_LAYOUTS = {"LOAD": _MEM_LAYOUT, "STORE": _MEM_LAYOUT, "GEMM": _GEMM_LAYOUT, "ALU": _ALU_LAYOUT}
_SIGNED = {"imm"}
_ENUMS = {"memory_type": MEMORY_TYPES, "alu_opcode": ALU_OPCODES}


def encode(insn: Instruction) -> int:
    """The 128-bit word of ``insn`` as a Python int (a field that does not fit is an error)."""
    d = to_dict(insn)
    word = OPCODES.index(d["opcode"])
    pos = 3
    for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
        word |= int(d[flag]) << pos
        pos += 1
    for name, bits in _LAYOUTS.get(d["opcode"], ()):
        value = d[name]
        if name in _ENUMS:
            value = _ENUMS[name].index(value)
        value = int(value)
        lo, hi = (
            (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if name in _SIGNED else (0, (1 << bits) - 1)
        )
        if not lo <= value <= hi:
            raise VTAError(f"{d['opcode']}: field {name}={value} does not fit its {bits} bits")
        word |= (value & ((1 << bits) - 1)) << pos
        pos += bits
    assert pos <= 128, (d["opcode"], pos)
    return word


def decode(word: int) -> Instruction:
    """The instruction of a 128-bit word (inverse of ``encode``)."""
    opcode = OPCODES[word & 7]
    d = {"opcode": opcode}
    pos = 3
    for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
        d[flag] = bool((word >> pos) & 1)
        pos += 1
    for name, bits in _LAYOUTS.get(opcode, ()):
        value = (word >> pos) & ((1 << bits) - 1)
        pos += bits
        if name in _SIGNED and value >= 1 << (bits - 1):
            value -= 1 << bits
        if name in _ENUMS:
            value = _ENUMS[name][value]
        elif name in ("reset", "use_imm"):
            value = bool(value)
        d[name] = value
    return from_dict(d)


def encode_program(program: Program) -> np.ndarray:
    """The instruction stream as VTA's DRAM holds it: ``(n, 2)`` uint64, low word first."""
    words = [encode(i) for i in program.insns]
    return np.array([(w & (2**64 - 1), w >> 64) for w in words], dtype=np.uint64).reshape(-1, 2)


def decode_program(words: np.ndarray, uops: np.ndarray) -> Program:
    """A Program from ``encode_program``'s array and the uop table."""
    return Program(tuple(decode(int(lo) | (int(hi) << 64)) for lo, hi in words), uops)
