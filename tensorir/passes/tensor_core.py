"""Warp-level matrix fragments in loop IR: which loop nests a GPU runs as ``wmma`` calls.

The tensor-core sketch (:mod:`autosched.search.sketch_rules_tensor_core`) marks loops with the
``("pragma", "tensor_core")`` annotation. Read as plain loops they are correct scalar code in
which every lane of a warp computes the same 16x16 tiles; a CUDA backend may instead run them
as the warp-collective fragment operations, whose result is the same. This module finds, per
kernel, the three kinds of nests involved (target-independent analysis shared by the GPU
validity check and :mod:`codegen.cuda`):

- **mma** (marked): ``for i, j, k in 16x16xK: acc[c] = acc[c] + a * b`` where ``a`` and ``b``
  are loads of one :data:`FRAGMENT_SHAPES` dtype (maybe cast to the accumulator's dtype) from
  shared or global memory, ``K`` that dtype's fragment K (16 for fp16 / bf16, 8 for float32
  run as TF32), ``acc`` a local buffer; ``a`` reads ``(i, k)``, ``b`` reads ``(k, j)``, each
  row- or column-major with a leading dimension that is a multiple of 16 bytes and a 32-byte
  aligned start; ``acc`` reads ``(i, j)`` row-major in 16x16 tiles;
- **fill** (the reduction's init, unmarked): ``for i, j in 16x16: acc[c] = constant``;
- **store** (marked): ``for i, j in 16x16: out[o] = f(acc[c])``, any elementwise ``f``, maybe
  under ``if`` conditions inside the nest (rows or columns past a padded GEMM's real ones).

A :class:`FragmentPlan` holds them when every access to each accumulator is one of those, the
nests are warp-uniform (the block has exactly 32 ``threadIdx.x`` lanes and no nest is inside a
``threadIdx.x`` loop: the lanes of a warp run the same iterations) and none is under a
guard; otherwise :func:`fragment_plan` says why, and the loops stay scalar.

The fragment shape of each operand dtype, and the compute capability it needs, is
:data:`FRAGMENT_SHAPES`: the one table the sketch rule, this analysis and the CUDA backend read.
A float32 nest is only ever marked by the sketch rule for a target with ``-allow_tf32=1``, and
the CUDA backend keeps it scalar without that option (:func:`codegen.cuda.build_cuda`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..arith import linear_form, simplify_expr
from ..dtype import itemsize
from ..expr import Binary, Cast, Const, Expr, Var, walk
from ..loops import (
    Allocate,
    Barrier,
    Buffer,
    For,
    If,
    Load,
    Stmt,
    Store,
    stmt_children,
    walk_stmts,
)
from ..transform import substitute
from .double_buffer import shared_memory_limit
from .warpgroup import WARPGROUP_LANES, is_warpgroup_kernel, warpgroup_tile

__all__ = [
    "FRAGMENT",
    "FRAGMENT_DIMS",
    "FRAGMENT_SHAPES",
    "TF32_TENSOR_CORES",
    "LANES",
    "FragmentFill",
    "FragmentMma",
    "FragmentPlan",
    "FragmentShape",
    "FragmentStore",
    "Operand",
    "fragment_plan",
    "fragment_shape",
    "has_tensor_core_pragma",
    "store_staging_bytes",
    "tensor_core_errors",
]


@dataclass(frozen=True)
class FragmentShape:
    """The warp-level fragments of one operand dtype: an ``m x k`` by ``k x n`` product added
    to an ``m x n`` accumulator, on compute capability ``min_arch`` (70: sm_70) or newer."""

    m: int
    n: int
    k: int
    min_arch: int


FRAGMENT_SHAPES: dict[str, FragmentShape] = {
    "float16": FragmentShape(16, 16, 16, 70),
    "bfloat16": FragmentShape(16, 16, 16, 80),
    # TF32 (sm_80+): float32 operands rounded to a 10-bit mantissa, float32 accumulators.
    "float32": FragmentShape(16, 16, 8, 80),
}
"""Operand dtype -> its fragment shape (``wmma`` m16n16k16 for fp16 / bf16, m16n16k8 TF32)."""
TF32_TENSOR_CORES = True
"""Whether ``-allow_tf32=1`` runs float32 GEMMs on TF32 fragments. False makes the option a no-op
again: the sketch rule never takes float32, the CUDA backend keeps float32 nests scalar."""

FRAGMENT = 16
"""The accumulator tile's M and N: the same for every shape of :data:`FRAGMENT_SHAPES`."""
assert all(s.m == s.n == FRAGMENT for s in FRAGMENT_SHAPES.values())
FRAGMENT_DIMS = frozenset(d for s in FRAGMENT_SHAPES.values() for d in (s.m, s.n, s.k))
"""Every fragment side length (the splits the sketch fixes are among them)."""
LANES = 32
OPERAND_ALIGN_BYTES = 32  # load_matrix_sync: a 256-bit aligned start
OPERAND_LDM_BYTES = 16  # ... and a leading dimension that is a multiple of 16 bytes
_KINDS = ("serial", "unrolled")


def fragment_shape(dtype: str) -> FragmentShape | None:
    """The fragment shape of operand ``dtype`` (:data:`FRAGMENT_SHAPES`), or None."""
    return FRAGMENT_SHAPES.get(dtype)


@dataclass(frozen=True)
class Operand:
    """A 16x16 matrix operand in memory: ``buffer[base + row * ldm + col]`` (row_major) or
    ``buffer[base + col * ldm + row]`` (col_major)."""

    buffer: Buffer
    base: Expr
    ldm: int
    layout: str


@dataclass(frozen=True)
class FragmentMma:
    loop: For
    acc: Buffer
    acc_base: Expr
    acc_ldm: int
    a: Operand
    b: Operand


@dataclass(frozen=True)
class FragmentFill:
    loop: For
    acc: Buffer
    acc_base: Expr
    acc_ldm: int
    value: Expr


@dataclass(frozen=True)
class FragmentStore:
    """``out[index(i, j)] = f(acc[acc_base + i * acc_ldm + j])`` over a 16x16 tile, only where
    ``guard`` holds when given (an implicit-GEMM conv's output rows past the real pixels)."""

    loop: For
    acc: Buffer
    acc_base: Expr
    acc_ldm: int
    i: Var
    j: Var
    store: Store
    acc_load: Load
    guard: Expr | None = None  # ``if`` conditions inside the nest (masked rows / columns)


@dataclass
class FragmentPlan:
    """The fragment nests of one kernel, keyed by ``id(loop)``."""

    mma: dict = field(default_factory=dict)
    fill: dict = field(default_factory=dict)
    store: dict = field(default_factory=dict)
    accumulators: dict = field(default_factory=dict)  # id(Buffer) -> Buffer
    operands: dict = field(default_factory=dict)  # id(Buffer) -> Buffer read into fragments
    unroll: set = field(default_factory=set)  # id(For) of loops around nests (no barrier)
    chains: dict = field(default_factory=dict)  # id(mma loop) -> the unrolled loops around it
    warps: int = 1  # warps, or warpgroups (threadIdx.y x threadIdx.z)
    warpgroup: bool = False  # 128 threadIdx.x lanes: wgmma tiles (tensorir.passes.warpgroup)

    @property
    def dtype(self) -> str:
        """The operand dtype (float16, bfloat16, or float32 run as TF32)."""
        return next(iter(self.mma.values())).a.buffer.dtype

    @property
    def shape(self) -> FragmentShape:
        """The fragment shape of the operand dtype."""
        return FRAGMENT_SHAPES[self.dtype]

    @property
    def staging_bytes(self) -> int:
        """Shared memory for the store nests: one 16x16 accumulator tile per warp (none for
        warpgroups, which store from their registers)."""
        if not self.store or self.warpgroup:
            return 0
        acc = next(iter(self.accumulators.values()))
        return store_staging_bytes(self.warps, acc.dtype)


def store_staging_bytes(warps: int, acc_dtype: str) -> int:
    """The shared memory of the store nests of a kernel of ``warps`` warps: one 16x16 tile of
    the accumulator dtype per warp (``store_matrix_sync`` writes it, the epilogue reads it)."""
    return warps * FRAGMENT * FRAGMENT * itemsize(acc_dtype)


# ----------------------------------------------------------------------------- matching


def has_tensor_core_pragma(s: For) -> bool:
    return ("pragma", "tensor_core") in s.annotations


def _nest(s: For, extents: tuple[int, ...]):
    """``(vars, body)`` of a perfect nest of loops of these ``extents`` starting at ``s``, or
    None."""
    out = []
    for extent in extents:
        if not (isinstance(s, For) and s.extent == extent and s.kind in _KINDS):
            return None
        out.append(s.var)
        s = s.body
    return out, s


def _multiple_of(e: Expr, m: int) -> bool:
    form = linear_form(e)
    if form is None:
        return False
    terms, const = form
    return const % m == 0 and all(c % m == 0 for c in terms.values())


def _affine(index: Expr, vars_: list) -> tuple[list[int], Expr] | None:
    """Coefficients of ``vars_`` in ``index`` and its value with them 0 (the base), when the
    index is linear in them and the rest does not depend on them."""
    form = linear_form(index)
    if form is None:
        return None
    terms, _ = form
    coefs = [terms.get(v, 0) for v in vars_]
    for atom in terms:
        if atom not in vars_ and any(n in vars_ for n in walk(atom)):
            return None
    base = simplify_expr(substitute(index, {v: Const(0, "int32") for v in vars_}))
    return coefs, base


def _acc_tile(index: Expr, i: Var, j: Var, others=()) -> tuple[Expr, int] | None:
    """``(base, ldm)`` of a row-major 16x16 accumulator tile read at ``index``."""
    got = _affine(index, [i, j, *others])
    if got is None:
        return None
    (ci, cj, *rest), base = got
    if cj != 1 or any(rest) or ci % FRAGMENT or not _multiple_of(base, FRAGMENT):
        return None
    return base, ci


def _operand_load(e: Expr, acc_dtype: str) -> Load | None:
    if isinstance(e, Cast) and e.dtype == acc_dtype:
        e = e.value
    in_memory = isinstance(e, Load) and e.buffer.scope in ("shared", "global")
    if in_memory and e.dtype in FRAGMENT_SHAPES:
        return e
    return None


def _operand(load: Load, row: Var, col: Var, zero: Var) -> Operand | None:
    got = _affine(load.index, [row, col, zero])
    if got is None:
        return None
    (cr, cc, cz), base = got
    if cz:
        return None
    size = itemsize(load.dtype)
    ldm_unit, align = OPERAND_LDM_BYTES // size, OPERAND_ALIGN_BYTES // size
    if cc == 1 and cr % ldm_unit == 0 and cr > 0:
        ldm, layout = cr, "row_major"
    elif cr == 1 and cc % ldm_unit == 0 and cc > 0:
        ldm, layout = cc, "col_major"
    else:
        return None
    if not _multiple_of(base, align):  # a 32-byte aligned start
        return None
    return Operand(load.buffer, base, ldm, layout)


def match_mma(s: For) -> FragmentMma | None:
    """The mma nest starting at the marked loop ``s`` (module docstring), or None."""
    got = _nest(s, (FRAGMENT, FRAGMENT))
    k_loop = None if got is None else got[1]
    k_extents = {sh.k for sh in FRAGMENT_SHAPES.values()}
    if not (isinstance(k_loop, For) and k_loop.extent in k_extents):
        return None
    inner = _nest(k_loop, (k_loop.extent,))
    if inner is None or not isinstance(inner[1], Store):
        return None
    (i, j), ((k,), st) = got[0], inner
    v, acc = st.value, st.buffer
    if acc.scope != "local" or acc.dtype not in ("float32", "float16"):
        return None
    if not (isinstance(v, Binary) and v.op == "+"):
        return None
    for acc_load, prod in ((v.a, v.b), (v.b, v.a)):
        if not (isinstance(acc_load, Load) and acc_load.buffer is acc):
            continue
        if acc_load.index is not st.index and str(acc_load.index) != str(st.index):
            continue
        if not (isinstance(prod, Binary) and prod.op == "*"):
            continue
        x, y = _operand_load(prod.a, acc.dtype), _operand_load(prod.b, acc.dtype)
        if x is None or y is None or x.dtype != y.dtype:
            continue
        if acc.dtype == "float16" and x.dtype != "float16":
            continue
        if FRAGMENT_SHAPES[x.dtype].k != k_loop.extent:  # K is the operand dtype's
            return None
        tile = _acc_tile(st.index, i, j, (k,))
        if tile is None:
            return None
        for p, q in ((x, y), (y, x)):
            a, b = _operand(p, i, k, j), _operand(q, k, j, i)
            if a is not None and b is not None:
                return FragmentMma(s, acc, tile[0], tile[1], a, b)
    return None


def _match_fill(s: For, accs: dict) -> FragmentFill | None:
    got = _nest(s, (FRAGMENT, FRAGMENT))
    if got is None or not isinstance(got[1], Store):
        return None
    (i, j), st = got
    if id(st.buffer) not in accs or not isinstance(st.value, Const):
        return None
    tile = _acc_tile(st.index, i, j)
    return None if tile is None else FragmentFill(s, st.buffer, tile[0], tile[1], st.value)


def _guarded_nest(s: For, depth: int):
    """``(vars, body, guard)``: :func:`_nest` that also steps through ``if`` statements without
    an ``else`` between and inside the loops, and-ing their conditions into ``guard``."""
    out, conds = [], []
    for k in range(depth + 1):
        while isinstance(s, If) and s.else_ is None:
            conds.append(s.cond)
            s = s.then
        if k == depth:
            break
        if not (isinstance(s, For) and s.extent == FRAGMENT and s.kind in _KINDS):
            return None
        out.append(s.var)
        s = s.body
    guard = None
    for c in conds:
        guard = c if guard is None else Binary("&&", guard, c, "bool")
    return out, s, guard


def _match_store(s: For, accs: dict, ranges: dict | None = None) -> FragmentStore | None:
    """The store nest at ``s``; ``ranges`` (the enclosing loops' ``{Var: (lo, hi)}``), when
    given, simplify an accumulator index that is affine only under them: an implicit-GEMM
    conv2d's epilogue reads its tile at ``(n*OH + oh)*OW + ow`` of a fused loop, whose
    div/mod terms cancel only with the loop bounds (the GPU check lowers unsimplified)."""
    got = _guarded_nest(s, 2)
    if got is None or not isinstance(got[1], Store):
        return None
    (i, j), st, guard = got
    if id(st.buffer) in accs:
        return None
    loads = [n for n in walk(st.value) if isinstance(n, Load) and id(n.buffer) in accs]
    loads += [n for n in walk(st.index) if isinstance(n, Load) and id(n.buffer) in accs]
    if not loads or len({(id(n.buffer), str(n.index)) for n in loads}) != 1:
        return None
    tile = _acc_tile(loads[0].index, i, j)
    if tile is None and ranges is not None:
        inner = {i: (0, FRAGMENT - 1), j: (0, FRAGMENT - 1)}
        tile = _acc_tile(simplify_expr(loads[0].index, {**ranges, **inner}), i, j)
    if tile is None:
        return None
    if guard is not None and any(isinstance(n, Load) and id(n.buffer) in accs for n in walk(guard)):
        return None
    return FragmentStore(s, loads[0].buffer, tile[0], tile[1], i, j, st, loads[0], guard)


def _loop_ranges(path) -> dict:
    """``{Var: (0, extent - 1)}`` of the loops among ``path`` with constant extents."""
    return {f.var: (0, f.extent - 1) for f in path
            if isinstance(f, For) and isinstance(f.extent, int)}  # fmt: skip


def _thread_x_loops(stmt: Stmt) -> set:
    """ids of statements inside a threadIdx.x loop."""
    inside: set = set()
    for s in walk_stmts(stmt):
        if isinstance(s, For) and s.thread_tag == "threadIdx.x":
            inside.update(id(x) for x in walk_stmts(s.body))
    return inside


def fragment_plan(stmt: Stmt, extents: dict) -> tuple[FragmentPlan | None, str]:
    """The fragment nests of kernel ``stmt`` (launch ``extents``: tag -> extent).

    Returns ``(plan, "")``, ``(None, "")`` when nothing is marked, or ``(None, reason)`` when a
    marked nest cannot run on fragments (it then runs as scalar loops)."""
    marked = [s for s in walk_stmts(stmt) if isinstance(s, For) and has_tensor_core_pragma(s)]
    if not marked:
        return None, ""
    plan = FragmentPlan()
    for s in marked:
        m = match_mma(s)
        if m is not None:
            plan.mma[id(s)] = m
            plan.accumulators[id(m.acc)] = m.acc
            for op in (m.a, m.b):
                plan.operands[id(op.buffer)] = op.buffer
    if not plan.mma:
        return None, (
            "no marked loop nest is a fragment multiply-accumulate (16x16x16 fp16 / bf16, "
            "16x16x8 float32 as TF32)"
        )
    if len({m.a.buffer.dtype for m in plan.mma.values()}) != 1:
        return None, "the fragment operands mix dtypes"
    if len({a.dtype for a in plan.accumulators.values()}) != 1:
        return None, "the accumulators mix dtypes"
    paths = None
    for s in marked:
        if id(s) not in plan.mma:
            m = _match_store(s, plan.accumulators)
            if m is None:
                paths = paths or _ancestors(stmt, {id(x) for x in marked})
                m = _match_store(s, plan.accumulators, _loop_ranges(paths.get(id(s), ())))
            if m is None:
                return None, f"loop {s.var.name} is marked but is no fragment mma or store nest"
            plan.store[id(s)] = m
    for s in walk_stmts(stmt):
        if isinstance(s, For) and id(s) not in plan.mma and id(s) not in plan.store:
            m = _match_fill(s, plan.accumulators)
            if m is not None:
                plan.fill[id(s)] = m
    # Every access of an accumulator must be inside one of the nests.
    covered: set = set()
    for group in (plan.mma, plan.fill, plan.store):
        for m in group.values():
            covered.update(id(x) for x in walk_stmts(m.loop))
    for s in walk_stmts(stmt):
        if isinstance(s, Store) and id(s) not in covered:
            touched = [s.buffer, *(n.buffer for e in (s.index, s.value) for n in walk(e)
                                   if isinstance(n, Load))]  # fmt: skip
            if any(id(b) in plan.accumulators for b in touched):
                return None, f"accumulator {s.buffer.name} is accessed outside a fragment nest"
        if isinstance(s, If) and id(s) not in covered:
            for x in walk_stmts(s):
                if id(x) in plan.mma or id(x) in plan.store or id(x) in plan.fill:
                    return None, "a fragment nest is under a condition"
    if extents.get("threadIdx.x", 1) not in (LANES, WARPGROUP_LANES):
        return None, (
            f"the block has {extents.get('threadIdx.x', 1)} threadIdx.x lanes, not {LANES} "
            f"(warps) or {WARPGROUP_LANES} (warpgroups): they must be whole threadIdx.x rows"
        )
    plan.warpgroup = is_warpgroup_kernel(extents)
    inside_x = _thread_x_loops(stmt)
    if any(k in inside_x for group in (plan.mma, plan.fill, plan.store) for k in group):
        return None, "a fragment nest is inside a threadIdx.x loop (its lanes would differ)"
    plan.warps = extents.get("threadIdx.y", 1) * extents.get("threadIdx.z", 1)
    nests = {k for group in (plan.mma, plan.fill, plan.store) for k in group}
    for s in walk_stmts(stmt):
        if isinstance(s, For) and s.kind in _KINDS and id(s) not in nests:
            inner = list(walk_stmts(s.body))
            if any(id(x) in nests for x in inner) and not any(
                isinstance(x, Barrier) for x in inner
            ):
                plan.unroll.add(id(s))
    for key, path in _ancestors(stmt, set(plan.mma)).items():
        chain = []
        for f in reversed(path):  # innermost first: the unrolled loops right around the nest
            if not (isinstance(f, For) and id(f) in plan.unroll):
                break
            chain.append(f)
        plan.chains[key] = tuple(reversed(chain))
    return plan, ""


def _ancestors(stmt: Stmt, wanted: set) -> dict:
    """id(s) -> the statements enclosing ``s`` (outermost first), for ``s`` in ``wanted``."""
    out: dict = {}
    stack = [(stmt, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in wanted:
            out[id(node)] = path
        for child in stmt_children(node):
            stack.append((child, (*path, node)))
    return out


def _shared_bytes(stmt: Stmt) -> int:
    return sum(
        s.buffer.nbytes
        for s in walk_stmts(stmt)
        if isinstance(s, Allocate) and s.buffer.scope == "shared"
    )


def tensor_core_errors(info, program_name: str, limits: dict) -> list[str]:
    """Why the kernel ``info`` (a ``verify_gpu.KernelInfo``) cannot run its marked fragment
    nests on tensor cores: nests that do not match the fragment rules, blocks whose warps are
    not whole ``threadIdx.x`` rows, shared memory (the store nests' staging tiles included)
    over ``max_shared_memory_per_block`` (a pipelined kernel's: ``..._optin``,
    :func:`~tensorir.passes.double_buffer.shared_memory_limit`). Empty when it can, or when
    nothing is marked."""
    plan, why = fragment_plan(info.stmt, info.extents)
    where = info.describe(program_name)
    if plan is None:
        return [f"{where}: tensor_core loops cannot use wmma fragments: {why}"] if why else []
    errors = []
    if plan.warpgroup:
        for k in plan.mma:
            tile = warpgroup_tile(plan, k)
            if isinstance(tile, str):
                errors.append(f"{where}: tensor_core loops cannot run as a wgmma warpgroup: {tile}")
    cap, key = shared_memory_limit(info.stmt, limits)
    used = _shared_bytes(info.stmt) + plan.staging_bytes
    if cap is not None and used > cap:
        errors.append(
            f"{where}: {used} bytes of shared memory (with {plan.staging_bytes} for the "
            f"fragment store tiles) exceed {key}={cap}; use smaller "
            "block tiles or fewer warps"
        )
    return errors
