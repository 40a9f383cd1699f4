"""Bound inference: the loop structure of every stage and the regions of attached stages.

:func:`analyze` is the analysis half of lowering. For every non-inlined compute stage it
fixes the leaf loops (fresh Vars with C-identifier names, concrete extents), expresses each
root axis as an expression of those loops (split strides, fuse div/mod), collects the tail
guards of non-divisible splits, and for a stage attached with ``compute_at`` infers the
region of its output that the loops inside the attach point read (TVM's InferBound):

- consumers are processed before producers; inlined stages are substituted into their
  consumers first, so reads through them count;
- for each access of the producer, every loop var inside the attach point is relaxed to its
  range and the loops at or outside it stay symbolic (thread-bound loops are relaxed too
  when the buffer is shared by those threads: shared scope relaxes threadIdx/vthread, global
  relaxes every thread loop, as TVM's ``NeedRelax``); a stage left at the default "global"
  scope but attached inside a kernel gets "local" (under threadIdx/vthread) or "shared" (under
  blockIdx only), as TVM's ``InferStorageScope``;
- the per-dimension interval ``[lo, hi]`` (symbolic in the outer loops) gives the region
  minimum; the extent is a constant (the largest width), clamped to the tensor's shape.

:func:`infer_bound` returns the stages with every extent filled in, for printing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from .arith import const_bound, linear_diff, simplify_expr
from .expr import (
    Const,
    Expr,
    Reduce,
    TensorRead,
    Var,
    walk,
    walk_distinct,
)
from .identity_cache import IdentityCache
from .intervals import max_expr, min_expr, region_width, sym_interval
from .loop_structure import leaf_extents, loop_kind, root_values
from .loops import Buffer
from .lower_error import LowerError
from .stage import Iterator, Stage, initial_stage
from .transform import rewrite, substitute

__all__ = ["Analysis", "LowerError", "StageInfo", "analyze", "infer_bound", "stages_of"]

INF = math.inf
THREAD_RANK = {"blockIdx": 0, "threadIdx": 1, "vthread": 1}
SCOPE_RANK = {"global": 0, "shared": 1, "local": 3}
_C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "int", "long", "register", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned",
    "void", "volatile", "while", "bool", "inline", "half", "main", "kernel", "global", "local",
    "shared", "in", "is", "and", "or", "not", "lambda", "def", "class", "pass", "None",
    "True", "False", "range", "min", "max", "abs",
}  # fmt: skip


@dataclass(frozen=True, eq=False)
class Loop:
    """One emitted loop: its Var, extent, For kind and thread tag."""

    var: Var
    extent: int
    kind: str
    tag: str | None
    iterator: Iterator


@dataclass(eq=False)
class StageInfo:
    """What lowering needs to emit one non-inlined compute stage."""

    stage: Stage
    body: Expr  # te-level body with inlined producers substituted
    root_ext: dict  # root iterator name -> extent
    leaf_ext: dict  # leaf iterator name -> extent
    loops: list  # own leaf Loops, outermost first
    enclosing: list  # Loops outside this stage's nest (attach path), outermost first
    local_root: dict  # root iterator name -> value relative to the region (leaf vars)
    region_min: list  # per output dimension: Expr (0 for root stages)
    guards: list  # tail conditions over the leaf vars
    buffer: Buffer | None = None
    strides: tuple = ()
    attached: dict = field(default_factory=dict)  # leaf index -> [stage names]
    global_root: dict = field(default_factory=dict)  # root name -> value incl. region offset
    scope: str = "global"  # effective storage scope (see effective_scope)

    @property
    def name(self) -> str:
        return self.stage.name

    def root_value(self, name: str) -> Expr:
        """The global value of root iterator ``name`` (region offset and dom_min added)."""
        return self.global_root[name]


@dataclass
class Analysis:
    stages: tuple
    infos: dict  # name -> StageInfo (non-inlined compute stages)
    output_names: tuple
    input_names: tuple
    param_order: tuple  # tensor names in dag.tensors order
    extents: dict  # Var -> extent of every loop var


def stages_of(obj):
    """``(stages, dag)`` from a State, a ComputeDAG or ``(stages, dag)``."""
    if hasattr(obj, "stages") and hasattr(obj, "dag"):
        return tuple(obj.stages), obj.dag
    if hasattr(obj, "ops") and hasattr(obj, "tensors"):
        return tuple(initial_stage(op) for op in obj.ops), obj
    if isinstance(obj, tuple) and len(obj) == 2 and hasattr(obj[1], "tensors"):
        return tuple(obj[0]), obj[1]
    raise LowerError(
        f"cannot lower {type(obj).__name__}: give a State, a ComputeDAG or (stages, dag)"
    )


# ----------------------------------------------------------------------------- names


class Namer:
    """Unique C-identifier names within one Program."""

    def __init__(self, reserved=()):
        self.used = set(_C_KEYWORDS) | set(reserved)

    def __call__(self, raw: str, qualifier: str = "") -> str:
        base = sanitize(raw)
        cands = [base]
        if qualifier:
            cands.append(f"{base}_{sanitize(qualifier)}")
        for c in cands:
            if c not in self.used:
                self.used.add(c)
                return c
        k = 1
        while f"{cands[-1]}_{k}" in self.used:
            k += 1
        name = f"{cands[-1]}_{k}"
        self.used.add(name)
        return name


@lru_cache(maxsize=8192)
def sanitize(raw: str) -> str:
    """``i.0`` -> ``i_0``, ``a@b@`` -> ``a_b_f``: a valid C identifier (cached: bound
    inference names every loop of every sampled state, from a few hundred distinct names)."""
    s = re.sub(r"@(?=\.|$)", "_f", raw).replace("@", "_")
    s = re.sub(r"[^0-9A-Za-z_]", "_", s)
    if not s or s[0].isdigit():
        s = "v" + s
    return s


# ----------------------------------------------------------------------------- inlining


def expand_inlined(stages) -> dict:
    """name -> body with every read of an inlined stage replaced by its (expanded) body."""
    by_name = {s.name: s for s in stages}
    out: dict = {}
    for s in stages:
        if s.is_placeholder:
            continue
        if s.compute_at == "inline" and isinstance(s.op.body, Reduce):
            raise LowerError(
                f"stage {s.name!r} is a reduction and cannot be inlined; compute it at root "
                "or attach it with compute_at"
            )

        def fn(node, _name=s.name):
            if not isinstance(node, TensorRead):
                return None
            prod = by_name.get(node.tensor.name)
            if prod is None or prod.compute_at != "inline":
                return None
            if node.tensor.name not in out:
                raise LowerError(
                    f"stage {_name!r} reads inlined stage {node.tensor.name!r} that comes "
                    "after it in stage order"
                )
            idx = [rewrite(i, fn) for i in node.indices]
            mapping = {ax.var: i for ax, i in zip(prod.op.axes, idx, strict=True)}
            return substitute(out[node.tensor.name], mapping)

        out[s.name] = rewrite(s.op.body, fn)
    return out


# expand_inlined depends only on the stages' names, ops, order and which are inlined: every
# state of a task whose steps made no new op (cache_read / cache_write / rfactor) expands the
# same bodies, so the cost model's lowering of thousands of states expands them once.
# Keyed by the ops' ids (kept alive by the entries); values: the bodies and the tensor names
# each body reads.
_EXPANDED = IdentityCache(64)


def _expanded_bodies(stages) -> tuple[dict, dict]:
    """``expand_inlined(stages)`` and the tensor names each body reads, cached (bounded)."""
    key = tuple((s.name, id(s.op), s.compute_at == "inline", s.is_placeholder) for s in stages)
    hit = _EXPANDED.get(key)
    if hit is not None:
        return dict(hit[0]), hit[1]
    bodies = expand_inlined(stages)
    names = {n: frozenset(_read_names(b)) for n, b in bodies.items()}
    _EXPANDED.put(key, (bodies, names), keep=tuple(s.op for s in stages))
    return dict(bodies), names


def _read_names(body: Expr) -> set:
    """Names of the tensors ``body`` reads; a shared sub-expression (inlining substitutes one
    producer body into many reads) is walked once."""
    return {n.tensor.name for n in walk_distinct(body) if isinstance(n, TensorRead)}


def reads_of(body: Expr, name: str) -> list:
    return [n for n in walk(body) if isinstance(n, TensorRead) and n.tensor.name == name]


# ----------------------------------------------------------------------------- analysis


def analyze(obj) -> Analysis:
    """Loop structure and bounds of every stage of a State / ComputeDAG (see module doc)."""
    stages, dag = stages_of(obj)
    by_name = {s.name: s for s in stages}
    param_order = tuple(t.name for t in dag.tensors)
    input_names = tuple(t.name for t in dag.input_tensors)
    output_names = tuple(t.name for t in dag.output_tensors)
    for n in output_names:
        if n not in by_name:
            raise LowerError(f"output {n!r} has no stage; stages are {list(by_name)}")
        if by_name[n].compute_at == "inline":
            raise LowerError(f"output stage {n!r} cannot be inlined")
    bodies, read_names = _expanded_bodies(stages)
    live = [s for s in stages if not s.is_placeholder and s.compute_at != "inline"]

    # Names: in stage order so the first loop called i keeps the plain name.
    # Buffer names (tensor names, sanitized) are reserved so no loop var shadows a buffer.
    namer = Namer(reserved=(*param_order, *(sanitize(s.name) for s in stages)))
    leaf_vars: dict = {}
    for s in live:
        leaf_vars[s.name] = {it.name: Var(namer(it.name, s.name)) for it in s.iters}

    consumers: dict = {s.name: [] for s in stages}
    for s in live:
        for t in read_names[s.name]:
            if t in consumers:
                consumers[t].append(s.name)

    infos: dict = {}
    extents: dict = {}
    visiting: set = set()

    def process(s: Stage) -> None:
        if s.name in infos:
            return
        if s.name in visiting:
            raise LowerError(f"stage {s.name!r}: cyclic compute_at / consumer relation")
        visiting.add(s.name)
        deps = list(consumers[s.name])
        if s.compute_at == "iter":
            if s.attach is None or s.attach[0] not in by_name:
                raise LowerError(f"stage {s.name!r} is attached to an unknown stage {s.attach}")
            deps.append(s.attach[0])
        for d in deps:
            if by_name[d].compute_at != "inline":
                process(by_name[d])
        infos[s.name] = _process_stage(s, bodies[s.name], leaf_vars[s.name], infos, extents,
                                       consumers[s.name], by_name)  # fmt: skip
        visiting.discard(s.name)

    for s in live:
        process(s)
    for s in live:
        if s.compute_at == "iter":
            tgt, it = s.attach
            k = by_name[tgt].iter_index(it)
            infos[tgt].attached.setdefault(k, []).append(s.name)
    return Analysis(stages, infos, output_names, input_names, param_order, extents)


def _process_stage(s: Stage, body, vars_, infos, extents, cons, by_name) -> StageInfo:
    op = s.op
    axes = {ax.name: ax for ax in op.axes}
    raxes = {ax.name: ax for ax in op.reduce_axes}
    for it in s.root_iters:
        if it.name not in axes and it.name not in raxes:
            raise LowerError(f"stage {s.name!r}: root iterator {it.name!r} is not an op axis")

    if s.compute_at == "iter":
        tgt_name, it_name = s.attach
        if tgt_name not in infos:
            raise LowerError(
                f"stage {s.name!r} is attached to {tgt_name!r}, which has no loops (inlined or a "
                "placeholder); attach it to a stage computed at the root or inside loops"
            )
        tgt = infos[tgt_name]
        try:
            k = tgt.stage.iter_index(it_name)
        except KeyError:
            raise LowerError(
                f"stage {s.name!r} is attached at {tgt_name}.{it_name}, which is not a loop "
                f"of {tgt_name!r} ({[it.name for it in tgt.stage.iters]})"
            ) from None
        enclosing = list(tgt.enclosing) + list(tgt.loops[: k + 1])
        scope = effective_scope(s.scope, enclosing)
        region_min, region_ext = _infer_region(s, scope, enclosing, cons, infos, extents)
    else:
        scope = s.scope if s.scope.partition(".")[0] in SCOPE_RANK else "global"
        enclosing = []
        region_min = [Const(0, "int32") for _ in op.axes]
        region_ext = list(op.shape)

    root_ext = {}
    for d, ax in enumerate(op.axes):
        root_ext[ax.name] = region_ext[d]
    for ax in op.reduce_axes:
        root_ext[ax.name] = ax.extent
    ext = leaf_extents(s, root_ext)
    loops = []
    for it in s.iters:
        kind, tag = loop_kind(it)
        v = vars_[it.name]
        loops.append(Loop(v, ext[it.name], kind, tag, it))
        extents[v] = ext[it.name]
    vals, guards = root_values(s, {it.name: vars_[it.name] for it in s.iters}, ext)
    local_root = {it.name: vals[it.name] for it in s.root_iters}
    glob = {}
    for d, ax in enumerate(op.axes):
        glob[ax.name] = region_min[d] + local_root[ax.name]
    for ax in op.reduce_axes:
        glob[ax.name] = local_root[ax.name] + ax.dom_min if ax.dom_min else local_root[ax.name]
    return StageInfo(
        s,
        body,
        root_ext,
        ext,
        loops,
        enclosing,
        local_root,
        region_min,
        guards,
        global_root=glob,
        scope=scope,
    )


def effective_scope(scope: str, enclosing) -> str:
    """The storage scope of an attached stage, as TVM's InferStorageScope: an explicit
    "shared"/"local" stays; the default "global" becomes "local" under a threadIdx or vthread
    loop, "shared" under blockIdx loops only (a GPU kernel has no global temporaries)."""
    if scope.partition(".")[0] in ("shared", "local"):
        return scope  # a tagged scope ("local.acc_buffer") keeps its tag for the backend
    rank = -1
    for lp in enclosing:
        if lp.kind == "vthread":
            rank = max(rank, THREAD_RANK["vthread"])
        elif lp.kind == "thread":
            rank = max(rank, THREAD_RANK[lp.tag.split(".")[0]])
    return {-1: "global", 0: "shared"}.get(rank, "local")


def _relaxed_thread(loop: Loop, scope: str) -> bool:
    if loop.kind == "vthread":
        rank = THREAD_RANK["vthread"]
    elif loop.kind == "thread":
        rank = THREAD_RANK[loop.tag.split(".")[0]]
    else:
        return False
    return SCOPE_RANK.get(scope.partition(".")[0], 0) <= rank


def _infer_region(s: Stage, scope: str, enclosing, cons, infos, extents):
    """Region (min exprs, const extents) of ``s``'s output read under its attach point."""
    attach_var = enclosing[-1].var
    fixed = {lp.var for lp in enclosing if not _relaxed_thread(lp, scope)}
    ranges = {v: (0, e - 1) for v, e in extents.items()}
    memo: dict = {}  # the simplifier's memo under ``ranges`` (reads share sub-expressions)
    shape = s.op.shape
    los: list = [None] * len(shape)
    his: list = [None] * len(shape)
    ws: list = [0] * len(shape)
    found = False
    for cname in cons:
        c = infos[cname]
        cvars = [lp.var for lp in c.enclosing] + [lp.var for lp in c.loops]
        if attach_var not in cvars:
            raise LowerError(
                f"stage {s.name!r} is attached at {s.attach[0]}.{s.attach[1]} but its consumer "
                f"{cname!r} is not computed inside that loop; attach {s.name!r} where all its "
                "consumers run, or compute it at root"
            )
        relaxed = {v: (0, extents[v] - 1) for v in cvars if v not in fixed}
        mapping = {}
        for ax in c.stage.op.axes:
            mapping[ax.var] = c.root_value(ax.name)
        for ax in c.stage.op.reduce_axes:
            mapping[ax.var] = c.root_value(ax.name)
        for read in reads_of(c.body, s.name):
            found = True
            for d, idx in enumerate(read.indices):
                e = simplify_expr(substitute(idx, mapping), ranges, memo)
                try:
                    lo, hi, w = sym_interval(e, relaxed, ranges)
                except LowerError:  # e.g. a data-dependent index: take the whole dimension
                    n = shape[d]
                    lo, hi, w = Const(0, "int32"), Const(n - 1, "int32"), n - 1
                lo, hi = simplify_expr(lo, ranges, memo), simplify_expr(hi, ranges, memo)
                if los[d] is None:
                    los[d], his[d], ws[d] = lo, hi, w
                else:
                    same = (
                        linear_diff(lo, los[d]) is not None and linear_diff(hi, his[d]) is not None
                    )
                    nlo, nhi = min_expr(los[d], lo), max_expr(his[d], hi)
                    if same:
                        ws[d] = linear_diff(nhi, nlo)
                    else:
                        ws[d] = None
                    los[d], his[d] = nlo, nhi
    if not found:
        raise LowerError(
            f"stage {s.name!r} is attached at {s.attach[0]}.{s.attach[1]} but nothing inside "
            "that loop reads it"
        )
    mins, exts = [], []
    for d, n in enumerate(shape):
        width = region_width(los[d], his[d], ws[d], ranges)
        e = min(width + 1, n)
        lo = los[d]
        b = const_bound(lo, ranges)
        if b[0] < 0:
            lo = max_expr(lo, Const(0, "int32"))
        if b[1] > n - e:
            lo = min_expr(lo, Const(n - e, "int32"))
        mins.append(simplify_expr(lo, ranges, memo))
        exts.append(e)
    return mins, exts


def infer_bound(state) -> tuple[Stage, ...]:
    """The stages of ``state`` with every iterator extent filled in (as TVM's InferBound)."""
    an = analyze(state)
    out = []
    for s in an.stages:
        info = an.infos.get(s.name)
        if info is None:
            out.append(s)
            continue
        roots = tuple(it.__class__(it.name, info.leaf_ext[it.name], it.kind, it.annotation)
                      for it in s.root_iters)  # fmt: skip
        iters = tuple(it.__class__(it.name, info.leaf_ext[it.name], it.kind, it.annotation)
                      for it in s.iters)  # fmt: skip
        out.append(s.with_(root_iters=roots, iters=iters))
    return tuple(out)
