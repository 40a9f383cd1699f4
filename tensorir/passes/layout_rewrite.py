"""Layout rewrite of constant weights: the kernel reads them in the order its loops walk them.

Ansor's ``REWRITE_FOR_PRE_TRANSFORMED`` (ansor-notes section 10.4). A conv or dense kernel
tiled for registers walks its weight in tile order, e.g. ``w[ry, rx, rc, ff]`` of a 3x3x512x512
HWIO weight is read as ``32 ff`` for one ``rc``, then the next ``rc`` 2 KiB further on. From
memory that is a strided stream that the prefetchers follow poorly. The weight is a constant of
the network, so it can be stored, once at build time, with one dimension per loop that indexes
it, in loop order: the kernel then reads it as one contiguous stream.

Here the rewrite works on the lowered program. Every read of the weight has a flat index that is
a linear sum ``offset + sum(coef_j * atom_j)`` where each atom is a loop variable or a digit of
one (``v // d``, ``v % m``). The new layout has one dimension per atom, ordered by the depth of
the atom's loop (outer digits of one variable first); the read becomes ``sum(stride_j *
atom_j)`` with row-major strides of the atoms' extents. :class:`ParamLayout` records the map,
and :meth:`ParamLayout.transform` builds the new array from the original:
``new[i_1, ..., i_k] = w.flat[offset + sum(coef_j * i_j)]`` (0 where that is outside ``w``,
which only guarded reads would reach).

Reads that are not of this form, weights read with two different indices, a new layout equal
to the old one, or one more than 4x larger (overlapping tiles) leave the weight as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..arith import const_bound, linear_form
from ..expr import Binary, Const, Expr, Var, equal, walk, walk_distinct
from ..loops import Allocate, Buffer, For, If, Load, Program, Seq, Stmt, Store, row_major_strides
from ..transform import rewrite

MAX_GROWTH = 4  # a new layout may hold at most this many times the original elements

__all__ = ["ParamLayout", "rewrite_layouts"]


@dataclass(frozen=True)
class ParamLayout:
    """How a weight parameter is stored for one kernel.

    Attributes
    ----------
    param : str
        The parameter's name.
    orig_size : int
        Elements of the original (row-major) array.
    offset : int
        Flat offset added to every original index.
    coefs : tuple of int
        Original flat stride of each new dimension.
    shape : tuple of int
        Extent of each new dimension (outermost first).
    """

    param: str
    orig_size: int
    offset: int
    coefs: tuple[int, ...]
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def source_index(self) -> np.ndarray:
        """The original flat index each new element comes from (int64, new shape)."""
        idx = np.full(self.shape, self.offset, dtype=np.int64)
        for axis, (coef, ext) in enumerate(zip(self.coefs, self.shape, strict=True)):
            view = [1] * len(self.shape)
            view[axis] = ext
            idx = idx + (np.arange(ext, dtype=np.int64) * coef).reshape(view)
        return idx

    def transform(self, array: np.ndarray) -> np.ndarray:
        """The weight in this layout (a new C-contiguous array of ``shape``)."""
        flat = np.ascontiguousarray(array).reshape(-1)
        if flat.size != self.orig_size:
            raise ValueError(
                f"layout of {self.param}: expected {self.orig_size} elements, got {flat.size}"
            )
        idx = self.source_index()
        inside = (idx >= 0) & (idx < flat.size)
        out = np.zeros(self.shape, dtype=flat.dtype)
        out[inside] = flat[idx[inside]]
        return out

    def as_tuple(self) -> tuple:
        """Plain values (for ``Source`` / the runtime, which do not import tensorir)."""
        return (self.param, self.orig_size, self.offset, self.coefs, self.shape)

    @classmethod
    def from_tuple(cls, t) -> ParamLayout:
        param, orig_size, offset, coefs, shape = t
        return cls(param, int(orig_size), int(offset), tuple(coefs), tuple(shape))


def rewrite_layouts(program: Program, names) -> tuple[Program, tuple[ParamLayout, ...]]:
    """Store each parameter in ``names`` in the order the program's loops read it.

    Parameters
    ----------
    program : Program
        A simplified program (loops may be marked unrolled; they are still loops).
    names : iterable of str
        Parameters that may change layout (constant weights: their values are known at build
        time, so the caller transforms them once with :meth:`ParamLayout.transform`).

    Returns
    -------
    program : Program
        The same program with those parameters' buffers reshaped and their reads re-indexed.
    layouts : tuple of ParamLayout
        One per rewritten parameter (none for those left as they are).
    """
    wanted = {p.name: p for p in program.params if p.name in set(names)}
    if not wanted:
        return program, ()
    reads: dict[str, list] = {n: [] for n in wanted}
    written: set[str] = set()
    _collect_reads(program.body, {}, reads, written)
    new_bufs: dict[str, Buffer] = {}
    new_index: dict[str, tuple] = {}
    layouts = []
    for name, buf in wanted.items():
        if name in written or not reads[name]:
            continue
        plan = _plan(buf, reads[name])
        if plan is None:
            continue
        layout, index_of = plan
        new_bufs[name] = Buffer(buf.name, layout.shape, buf.dtype, buf.scope)
        new_index[name] = index_of
        layouts.append(layout)
    if not layouts:
        return program, ()

    def fix(e: Expr):
        if isinstance(e, Load) and e.buffer.name in new_bufs and e.buffer is wanted[e.buffer.name]:
            return Load(new_bufs[e.buffer.name], new_index[e.buffer.name][1], e.dtype)
        return None

    body = _map_exprs(program.body, lambda e: rewrite(e, fix))
    params = tuple(new_bufs.get(p.name, p) if p is wanted.get(p.name) else p
                   for p in program.params)  # fmt: skip
    layouts = tuple(layouts)
    return Program(program.name, params, program.workspaces, body, layouts), layouts


def _collect_reads(s: Stmt, loops: dict, reads: dict, written: set) -> None:
    """Record ``(index, loops)`` of every Load of a wanted param (``loops``: var -> (depth,
    extent)) and the params that are stored to."""

    def visit_expr(e: Expr) -> None:
        # A sub-expression object met again (the simplifier shares them) adds the same
        # (index, loops) pairs again, which changes no plan: each is walked once.
        for node in walk_distinct(e):
            if isinstance(node, Load) and node.buffer.name in reads:
                reads[node.buffer.name].append((node.index, dict(loops)))

    if isinstance(s, For):
        inner = dict(loops)
        inner[s.var] = (len(loops), s.extent)
        _collect_reads(s.body, inner, reads, written)
    elif isinstance(s, Seq):
        for x in s.stmts:
            _collect_reads(x, loops, reads, written)
    elif isinstance(s, Allocate):
        _collect_reads(s.body, loops, reads, written)
    elif isinstance(s, If):
        visit_expr(s.cond)
        _collect_reads(s.then, loops, reads, written)
        if s.else_ is not None:
            _collect_reads(s.else_, loops, reads, written)
    elif isinstance(s, Store):
        if s.buffer.name in reads:
            written.add(s.buffer.name)
        visit_expr(s.index)
        visit_expr(s.value)


def _plan(buf: Buffer, found: list):
    """``(ParamLayout, (old_index, new_index))`` for a param read at ``found``, or None."""
    index, loops = found[0]
    if any(not equal(i, index) for i, _ in found[1:]):
        return None  # read with different indices: one layout cannot serve both
    lf = linear_form(index)
    if lf is None:
        return None
    terms, offset = lf
    ranges = {v: (0, ext - 1) for v, (_, ext) in loops.items()}
    dims = []  # (depth, -coef, atom, coef, extent)
    for atom, coef in terms.items():
        free = {n for n in walk(atom) if isinstance(n, Var)}
        if len(free) != 1 or coef <= 0:
            return None
        (v,) = free
        if v not in loops or not _is_digit(atom, v):
            return None
        lo, hi = const_bound(atom, ranges)
        if lo < 0 or hi == float("inf"):
            return None
        hi = int(hi)
        if hi == 0:
            continue
        dims.append((loops[v][0], -coef, atom, coef, hi + 1))
    dims.sort(key=lambda d: (d[0], d[1]))
    shape = tuple(d[4] for d in dims)
    coefs = tuple(d[3] for d in dims)
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if size > MAX_GROWTH * buf.size:
        return None
    strides = row_major_strides(shape)
    if offset == 0 and size == buf.size and coefs == strides:
        return None  # already the order the loops read it in
    new_index: Expr | None = None
    for (_, _, atom, _, _), stride in zip(dims, strides, strict=True):
        term = atom if stride == 1 else Binary("*", atom, Const(stride, "int32"), "int32")
        new_index = term if new_index is None else Binary("+", new_index, term, "int32")
    if new_index is None:
        new_index = Const(0, "int32")
    layout = ParamLayout(buf.name, buf.size, int(offset), coefs, shape)
    return layout, (index, new_index)


def _is_digit(atom: Expr, v: Var) -> bool:
    """``v``, or ``v`` under floordiv / floormod by positive constants."""
    if atom is v:
        return True
    if isinstance(atom, Binary) and atom.op in ("floordiv", "floormod"):
        return (isinstance(atom.b, Const) and int(atom.b.value) > 0
                and _is_digit(atom.a, v))  # fmt: skip
    return False


def _map_exprs(s: Stmt, f) -> Stmt:
    if isinstance(s, For):
        return For(s.var, s.extent, _map_exprs(s.body, f), s.kind, s.thread_tag, s.annotations)
    if isinstance(s, Seq):
        return Seq(tuple(_map_exprs(x, f) for x in s.stmts))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _map_exprs(s.body, f))
    if isinstance(s, If):
        els = None if s.else_ is None else _map_exprs(s.else_, f)
        return If(f(s.cond), _map_exprs(s.then, f), els)
    if isinstance(s, Store):
        return Store(s.buffer, f(s.index), f(s.value))
    return s
