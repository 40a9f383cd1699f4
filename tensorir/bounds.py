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
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache

from .arith import const_bound, linear_diff, simplify_expr
from .dtype import is_int
from .expr import (
    Binary,
    Cast,
    Const,
    Expr,
    IfThenElse,
    Reduce,
    Select,
    TensorRead,
    Var,
    walk,
    walk_distinct,
)
from .loops import Buffer
from .stage import Iterator, SplitRel, Stage, initial_stage
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


class LowerError(ValueError):
    """A loop state cannot be lowered (bad attachment, unsupported construct)."""


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
# Entries are (the ops, kept alive so that their ids in the key stay theirs; the bodies; the
# tensor names each body reads).
_EXPANDED: OrderedDict = OrderedDict()
_EXPANDED_MAX = 64
_EXPANDED_LOCK = threading.Lock()  # lowering may run in several threads


def _expanded_bodies(stages) -> tuple[dict, dict]:
    """``expand_inlined(stages)`` and the tensor names each body reads, cached (bounded)."""
    key = tuple((s.name, id(s.op), s.compute_at == "inline", s.is_placeholder) for s in stages)
    with _EXPANDED_LOCK:
        hit = _EXPANDED.get(key)
        if hit is not None:
            _EXPANDED.move_to_end(key)
    if hit is not None:
        return dict(hit[1]), hit[2]
    bodies = expand_inlined(stages)
    names = {n: frozenset(_read_names(b)) for n, b in bodies.items()}
    with _EXPANDED_LOCK:
        _EXPANDED[key] = (tuple(s.op for s in stages), bodies, names)
        if len(_EXPANDED) > _EXPANDED_MAX:
            _EXPANDED.popitem(last=False)
    return dict(bodies), names


def _read_names(body: Expr) -> set:
    """Names of the tensors ``body`` reads; a shared sub-expression (inlining substitutes one
    producer body into many reads) is walked once."""
    return {n.tensor.name for n in walk_distinct(body) if isinstance(n, TensorRead)}


def reads_of(body: Expr, name: str) -> list:
    return [n for n in walk(body) if isinstance(n, TensorRead) and n.tensor.name == name]


# ----------------------------------------------------------------------------- loop structure


def leaf_extents(stage: Stage, root_ext: dict) -> dict:
    """Extents of every iterator (root, intermediate, leaf) from the root extents.

    As TVM's PassDownDomain, a split applies its lengths innermost first and tightens each
    inner part to ``min(remaining extent, length)`` unless a loop derived from it is bound to
    a thread (a split of an extent-2 region by lengths [4, 2] gives loops 1, 1, 2 instead of
    1, 4, 2 with a guard). Strides stay the lengths (see :func:`root_values`).
    """
    bound = _thread_bound_iters(stage)
    ext = dict(root_ext)
    for rel in stage.relations:
        if isinstance(rel, SplitRel):
            if any(x is None for x in rel.lengths):
                raise LowerError(
                    f"stage {stage.name!r}: split of {rel.parent!r} has undefined lengths "
                    f"{list(rel.lengths)}; fill the tile sizes before lowering"
                )
            rem = ext[rel.parent]
            for child, ln in zip(reversed(rel.children[1:]), reversed(rel.lengths), strict=True):
                ln = int(ln)
                if ln <= 0:
                    raise LowerError(
                        f"stage {stage.name!r}: split of {rel.parent!r} has a non-positive "
                        f"length {ln}"
                    )
                ext[child] = ln if child in bound else min(rem, ln)
                rem = -(-rem // ln)
            ext[rel.children[0]] = rem
        else:
            ext[rel.child] = math.prod(ext[p] for p in rel.parents)
    return ext


def _thread_bound_iters(stage: Stage) -> set:
    """Names of iterators from which a thread- or vthread-bound leaf is derived."""
    out = {
        it.name
        for it in stage.iters
        if it.annotation not in ("none", None, "parallel", "vectorize", "unroll")
    }
    for rel in reversed(stage.relations):
        if isinstance(rel, SplitRel):
            if any(c in out for c in rel.children):
                out.add(rel.parent)
        elif rel.child in out:
            out.update(rel.parents)
    return out


def root_values(stage: Stage, leaf_vals: dict, ext: dict):
    """Root iterator values from leaf values, and tail guards ``value < extent``.

    A split parent is ``sum(child_k * stride_k)`` with strides the products of the split
    lengths; a guard is needed when the largest value reached is beyond the parent's extent.
    """
    val = dict(leaf_vals)
    guards = []
    for rel in reversed(stage.relations):
        if isinstance(rel, SplitRel):
            total: Expr | None = None
            stride = 1
            top = 0
            strides = [*[math.prod(rel.lengths[k:]) for k in range(len(rel.lengths))], 1]
            for c, stride in zip(reversed(rel.children), reversed(strides), strict=True):
                term = val[c] if stride == 1 else val[c] * stride
                total = term if total is None else term + total
                top += (ext[c] - 1) * stride
            val[rel.parent] = total
            if top >= ext[rel.parent]:
                guards.append(total < ext[rel.parent])
        else:
            fused = val[rel.child]
            stride = 1
            parts = {}
            for p in reversed(rel.parents):
                e = ext[p]
                x = fused if stride == 1 else fused // stride
                parts[p] = x if p == rel.parents[0] else x % e
                stride *= e
            val.update(parts)
    return val, guards


def loop_kind(it: Iterator) -> tuple[str, str | None]:
    ann = it.annotation
    if ann in ("none", None):
        return "serial", None
    if ann == "parallel":
        return "parallel", None
    if ann == "vectorize":
        return "vectorized", None
    if ann == "unroll":
        return "unrolled", None
    if ann == "vthread":
        return "vthread", None
    if ann.startswith("blockIdx") or ann.startswith("threadIdx"):
        return "thread", ann
    raise LowerError(f"unknown iterator annotation {ann!r} on {it.name!r}")


# ----------------------------------------------------------------------------- intervals


def _has_any(e: Expr, vars_: dict) -> bool:
    return any(isinstance(n, Var) and n in vars_ for n in walk(e))


def sym_interval(e: Expr, relaxed: dict, ranges: dict):
    """``(lo, hi, width)`` of ``e`` when the Vars in ``relaxed`` range over their intervals.

    ``lo``/``hi`` are expressions in the other (fixed) variables; ``width`` bounds ``hi - lo``
    (an int, or None when unknown). ``ranges`` holds the ranges of every variable (for the
    constant fallback).
    """
    if not _has_any(e, relaxed):
        return e, e, 0
    if isinstance(e, Var):
        lo, hi = relaxed[e]
        return Const(lo, "int32"), Const(hi, "int32"), hi - lo
    if isinstance(e, Binary) and is_int(e.dtype):
        op = e.op
        if op in ("+", "-"):
            a = sym_interval(e.a, relaxed, ranges)
            b = sym_interval(e.b, relaxed, ranges)
            w = None if a[2] is None or b[2] is None else a[2] + b[2]
            if op == "+":
                return a[0] + b[0], a[1] + b[1], w
            return a[0] - b[1], a[1] - b[0], w
        if op == "*":
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(y, Const):
                    c = int(y.value)
                    a = sym_interval(x, relaxed, ranges)
                    w = None if a[2] is None else a[2] * abs(c)
                    if c >= 0:
                        return a[0] * c, a[1] * c, w
                    return a[1] * c, a[0] * c, w
        if op in ("floordiv", "floormod") and isinstance(e.b, Const) and int(e.b.value) > 0:
            c = int(e.b.value)
            a = sym_interval(e.a, relaxed, ranges)
            if op == "floordiv":
                w = None if a[2] is None else -(-a[2] // c)
                return a[0] // c, a[1] // c, w
            # floormod: the constant bound below ([0, c) or tighter) is all we use
        if op in ("min", "max"):
            a = sym_interval(e.a, relaxed, ranges)
            b = sym_interval(e.b, relaxed, ranges)
            w = None if a[2] is None or b[2] is None else max(a[2], b[2])
            f = _min if op == "min" else _max
            return f(a[0], b[0]), f(a[1], b[1]), w
    if isinstance(e, Select | IfThenElse):
        t = sym_interval(e.t, relaxed, ranges)
        f = sym_interval(e.f, relaxed, ranges)
        return _min(t[0], f[0]), _max(t[1], f[1]), None
    if isinstance(e, Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        return sym_interval(e.value, relaxed, ranges)
    lo, hi = const_bound(e, {**ranges, **relaxed})
    if lo == -INF or hi == INF:
        raise LowerError(f"cannot bound the index expression {e}")
    return Const(int(lo), "int32"), Const(int(hi), "int32"), int(hi - lo)


def _min(a: Expr, b: Expr) -> Expr:
    d = linear_diff(a, b)
    if d is not None:
        return a if d <= 0 else b
    return Binary("min", a, b, "int32")


def _max(a: Expr, b: Expr) -> Expr:
    d = linear_diff(a, b)
    if d is not None:
        return a if d >= 0 else b
    return Binary("max", a, b, "int32")


def _width(lo: Expr, hi: Expr, w, ranges: dict) -> int:
    d = linear_diff(hi, lo)
    if d is not None:
        return d
    cands = [] if w is None else [w]
    b = const_bound(simplify_expr(hi - lo, ranges), ranges)
    if b[1] != INF:
        cands.append(int(b[1]))
    if not cands:
        raise LowerError(f"cannot bound the width of the region [{lo}, {hi}]")
    return min(cands)


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
                    nlo, nhi = _min(los[d], lo), _max(his[d], hi)
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
        width = _width(los[d], his[d], ws[d], ranges)
        e = min(width + 1, n)
        lo = los[d]
        b = const_bound(lo, ranges)
        if b[0] < 0:
            lo = _max(lo, Const(0, "int32"))
        if b[1] > n - e:
            lo = _min(lo, Const(n - e, "int32"))
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
