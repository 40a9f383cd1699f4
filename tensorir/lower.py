"""Lowering a loop state to loop IR (:mod:`tensorir.loops`).

``lower(state)`` emits, for each non-inlined compute stage at the root, one loop nest over
its leaf iterators (outermost first, stages in stage order); stages attached with
``compute_at`` are emitted inside their target's nest right inside the attach loop, with
their buffer allocated there (region-sized, see :mod:`tensorir.bounds`); inlined stages are
substituted into their consumers. Reductions get an init nest right before the outermost
reduce loop (before the whole nest when a loop fuses spatial and reduce axes); a reduction
with a reduce loop bound to threadIdx becomes a cross-thread reduction (per-thread partials,
a shared buffer, barriers). Runs of shared-scope stages are fenced by barriers, and tail
guards never enclose a barrier; a loop with the ``double_buffer`` (``software_pipeline_<N>``)
pragma pipelines the shared stages attached at it (:mod:`tensorir.passes.double_buffer`).
Loops of extent 1 disappear.
Index expressions are simplified with the loop ranges, and
:func:`tensorir.passes.unroll.unroll_loops` applies ``auto_unroll_max_step``.

Example
-------
>>> prog = lower(state)          # or lower(dag) for the unscheduled program
>>> print(prog)
"""

from __future__ import annotations

from .bounds import Analysis, Loop, LowerError, Namer, StageInfo, analyze, infer_bound, stages_of
from .expr import Binary, Const, Expr, Reduce, TensorRead, Var, children, equal, walk
from .loops import (
    Allocate,
    Barrier,
    Buffer,
    CheckedIndex,
    For,
    If,
    Load,
    Program,
    Stmt,
    Store,
    row_major_strides,
    seq,
)
from .passes.double_buffer import PIPELINE_PRAGMAS, double_buffer_loop
from .passes.layout_rewrite import rewrite_layouts
from .passes.simplify_loops import simplify_program
from .passes.unroll import unroll_loops
from .tensor import reduce_identity
from .transform import rewrite, substitute

__all__ = ["LowerError", "aligned_strides", "infer_bound", "lower", "lower_unscheduled"]


def lower(
    state_or_stages, name: str = "main", simplify: bool = True, layout_rewrite: bool = False
) -> Program:
    """Lower a State (or a ComputeDAG: its initial state) to a loop-IR Program.

    Parameters
    ----------
    state_or_stages : State, ComputeDAG or (stages, dag)
        What to lower; a State contributes ``.stages`` and ``.dag``.
    name : str
        The Program's name (the kernel / function name backends emit).
    simplify : bool
        Simplify index expressions and apply ``auto_unroll_max_step`` (about half the cost).
        Without it the loops, buffers and launch extents are the same, which is all the GPU
        verifier looks at; code generation and features need the simplified program.

    Returns
    -------
    Program
        ``params`` are the DAG's tensors (inputs then outputs), ``workspaces`` the global
        intermediates computed at the root.
    """
    an = analyze(state_or_stages)
    program = _Lowerer(an).program(name, simplify)
    if layout_rewrite and simplify:
        _, dag = stages_of(state_or_stages)
        free = getattr(dag, "layout_free_placeholders", ())
        if free:
            program, _ = rewrite_layouts(program, free)
    return program


def lower_unscheduled(dag, name: str = "main") -> Program:
    """The naive lowering of ``dag`` (every stage at the root, loops in axis order)."""
    return lower(dag, name)


class _Lowerer:
    def __init__(self, an: Analysis):
        self.an = an
        self.namer = Namer(reserved=an.param_order)
        for v in an.extents:
            self.namer.used.add(v.name)
        by_name = {s.name: s for s in an.stages}
        self.params: dict = {}
        for pname in an.param_order:
            s = by_name[pname]
            shape = tuple(s.op.shape)
            self.params[pname] = Buffer(pname, shape, s.op.dtype, "global")
        self.workspaces: list = []
        self.root_allocs: list = []
        self.reads_memo: dict = {}  # id(expr) -> (expr, reads a tensor?), see _checked
        for s in an.stages:
            info = an.infos.get(s.name)
            if info is None:
                continue
            if s.name in self.params:
                info.buffer = self.params[s.name]
                info.strides = row_major_strides(info.buffer.shape)
                continue
            shape = tuple(info.root_ext[ax.name] for ax in s.op.axes)
            strides, alloc_shape = aligned_strides(shape, s.storage_align, s.name)
            scope = info.scope
            info.buffer = Buffer(self.namer(s.name), alloc_shape, s.op.dtype, scope)
            info.strides = strides
            if s.compute_at == "root":
                (self.workspaces if scope == "global" else self.root_allocs).append(info.buffer)

    # ------------------------------------------------------------------ expressions

    def flat(self, info: StageInfo, idx) -> Expr:
        out: Expr | None = None
        for i, st in zip(idx, info.strides, strict=True):
            term = i if st == 1 else i * st
            out = term if out is None else out + term
        return Const(0, "int32") if out is None else out

    def access(self, node: TensorRead) -> Expr | None:
        name = node.tensor.name
        info = self.an.infos.get(name)
        if info is None:
            buf = self.params.get(name)
            if buf is None:
                raise LowerError(f"tensor {name!r} is read but has neither a stage nor a param")
            idx = _checked(node, [self.te_to_loop(i) for i in node.indices], self.reads_memo)
            return Load(buf, self.flat_param(buf, idx), node.dtype)
        idx = _checked(node, [self.te_to_loop(i) for i in node.indices], self.reads_memo)
        mins = [self.te_to_loop(m) for m in info.region_min]
        rel = [i - m if not _is_zero(m) else i for i, m in zip(idx, mins, strict=True)]
        return Load(info.buffer, self.flat(info, rel), node.dtype)

    def flat_param(self, buf: Buffer, idx) -> Expr:
        out: Expr | None = None
        for i, st in zip(idx, row_major_strides(buf.shape), strict=True):
            term = i if st == 1 else i * st
            out = term if out is None else out + term
        return Const(0, "int32") if out is None else out

    def te_to_loop(self, e: Expr) -> Expr:
        # ``access`` is pure: a sub-expression shared within ``e`` is converted once.
        return rewrite(e, lambda n: self.access(n) if isinstance(n, TensorRead) else None, {})

    # ------------------------------------------------------------------ statements

    def program(self, name: str, simplify: bool = True) -> Program:
        parts = []
        for s in self.an.stages:
            info = self.an.infos.get(s.name)
            if info is not None and s.compute_at == "root":
                parts.append(self.emit(info))
        body: Stmt = seq(*parts) if parts else seq()
        for buf in reversed(self.root_allocs):
            body = Allocate(buf, body)
        params = tuple(self.params[n] for n in self.an.param_order)
        prog = Program(name, params, tuple(self.workspaces), body)
        return unroll_loops(simplify_program(prog)) if simplify else prog

    def emit(self, info: StageInfo) -> Stmt:
        s = info.stage
        op = s.op
        loops: list[Loop] = info.loops
        n = len(loops)
        mapping = {}
        for ax in op.axes:
            mapping[ax.var] = info.root_value(ax.name)
        for ax in op.reduce_axes:
            mapping[ax.var] = info.root_value(ax.name)
        store_idx = self.flat(info, [info.local_root[ax.name] for ax in op.axes])
        body = info.body
        vars_pos = {lp.var: k for k, lp in enumerate(loops)}

        # Attached stages, per leaf level.
        attached: dict = {}
        allocs: dict = {}
        for k, names in sorted(info.attached.items()):
            # Shared-memory loads are fenced: one barrier before a run of consecutive shared
            # stages (earlier reads are done) and one after it (the writes are visible).
            stmts: list = []
            in_shared = False
            for nm in names:
                sub = self.an.infos[nm]
                shared = sub.scope == "shared"
                if shared != in_shared:
                    stmts.append(Barrier())
                    in_shared = shared
                stmts.append(self.emit(sub))
                allocs.setdefault(k, []).append(sub.buffer)
            if in_shared:
                stmts.append(Barrier())
            attached[k] = stmts
        barrier_below = [False] * n
        for k in range(n):
            barrier_below[k] = any(
                isinstance(x, Barrier)
                for j, stmts in attached.items()
                if j > k
                for st in stmts
                for x in _walk(st)
            )

        red_pos = [k for k, lp in enumerate(loops) if lp.iterator.kind in ("reduce", "mixed")]
        xthread = isinstance(body, Reduce) and any(
            loops[k].kind == "thread" and loops[k].tag.startswith("threadIdx") for k in red_pos
        )
        if xthread:
            # Cross-thread reduction: the loops from the first reduce loop on become one
            # block with its own barriers; every guard goes inside it.
            r = red_pos[0]
            core = self.cross_thread(info, r, store_idx, mapping, attached)
            return self.build(info, r, core, {}, attached, allocs)

        # Guards: just inside the innermost loop they depend on (not around barriers).
        guards_at: dict = {}
        core_guards = []
        for g in info.guards:
            lv = max((vars_pos[v] for v in _vars(g) if v in vars_pos), default=-1)
            if lv >= 0 and barrier_below[lv]:
                core_guards.append(g)
            else:
                guards_at.setdefault(lv, []).append(g)

        init_nest, init_at = None, None
        if isinstance(body, Reduce):
            src = self.te_to_loop(substitute(body.source, mapping))
            load = Load(info.buffer, store_idx, body.dtype)
            update: Stmt = Store(info.buffer, store_idx, _combine(body.combiner, load, src))
            if body.condition is not None:
                update = If(self.te_to_loop(substitute(body.condition, mapping)), update)
            ident = reduce_identity(body.combiner, body.dtype)
            has_mixed = any(loops[k].iterator.kind == "mixed" for k in red_pos)
            if not red_pos:
                core = seq(Store(info.buffer, store_idx, ident), update)
            elif has_mixed:
                # A loop fusing spatial and reduce axes (maybe split and reordered) can visit
                # an output element first at any reduce index: initialize the whole region
                # before the nest instead.
                core = update
                init_nest, init_at = self.full_init(info, ident), 0
            else:
                core = update
                init_at = red_pos[0]
                init_nest = self.init_nest(info, init_at, store_idx, ident, core_guards)
        else:
            value = self.te_to_loop(substitute(body, mapping))
            core = Store(info.buffer, store_idx, value)
        if core_guards:
            core = If(_and(core_guards), core)
        return self.build(info, n, core, guards_at, attached, allocs, init_nest, init_at)

    def build(self, info, n, core, guards_at, attached, allocs, init_nest=None, r0=None):
        """Wrap ``core`` in the stage's loops ``0 .. n-1`` with guards, attached stages and
        their allocations, and the reduction init nest before loop ``r0``."""
        s = info.stage
        loops = info.loops
        stmt = core
        for k in range(n - 1, -1, -1):
            if guards_at.get(k):
                stmt = If(_and(guards_at[k]), stmt)
            stmt = seq(*attached.get(k, []), stmt)
            for buf in reversed(allocs.get(k, [])):
                stmt = Allocate(buf, stmt)
            lp = loops[k]
            ann = tuple(("pragma", p) for name, p in s.pragmas if name == lp.iterator.name)
            if k == 0 and s.auto_unroll_max_step > 0:
                ann += (("auto_unroll_max_step", int(s.auto_unroll_max_step)),)
            stmt = For(lp.var, lp.extent, stmt, lp.kind, lp.tag, ann)
            if any(p in PIPELINE_PRAGMAS for _, p in ann):  # attached shared stages, pipelined
                stmt = double_buffer_loop(stmt)
            if init_nest is not None and k == r0:
                stmt = seq(init_nest, stmt)
        if guards_at.get(-1):
            stmt = If(_and(guards_at[-1]), stmt)
        return stmt

    def cross_thread(self, info: StageInfo, r: int, store_idx, mapping, attached) -> Stmt:
        """A reduction whose reduce loops include threadIdx-bound ones (TVM's cross-thread
        reduction): each thread reduces its share into a local accumulator, writes it to a
        shared buffer, the threads combine those as a tree (:func:`tree_reduction_steps`) and
        one thread per output element stores the result."""
        s, loops, body = info.stage, info.loops, info.body
        name = s.name
        red_loops = loops[r:]
        if any(lp.iterator.kind == "mixed" for lp in red_loops):
            raise LowerError(
                f"stage {name!r}: a cross-thread reduction over a fused spatial+reduce loop is "
                "not supported; bind only pure reduce loops to threadIdx"
            )
        if any(lp.iterator.kind != "reduce" for lp in red_loops):
            raise LowerError(
                f"stage {name!r}: a cross-thread reduction (reduce loop bound to threadIdx) needs "
                "all spatial loops outside the reduce loops; reorder the stage"
            )
        if any(k >= r for k in attached):
            raise LowerError(
                f"stage {name!r}: stages attached inside the loops of a cross-thread reduction "
                "are not supported; attach them at a spatial loop"
            )
        tloops = [lp for lp in red_loops if lp.kind == "thread"]
        sloops = [lp for lp in red_loops if lp.kind != "thread"]
        enc = [
            lp
            for lp in [*info.enclosing, *loops[:r]]
            if lp.kind == "thread" and lp.tag.startswith("threadIdx")
        ]
        dt = body.dtype
        ident = reduce_identity(body.combiner, dt)
        nthreads = 1
        for lp in tloops:
            nthreads *= lp.extent
        base: Expr = Const(0, "int32")
        size = nthreads
        for lp in enc:
            base = base * lp.extent + lp.var
            size *= lp.extent
        tid: Expr = Const(0, "int32")
        for lp in tloops:
            tid = tid * lp.extent + lp.var
        red = Buffer(self.namer(f"{name}_red"), (size,), dt, "shared")
        acc = Buffer(self.namer(f"{name}_acc"), (1,), dt, "local")
        zero = Const(0, "int32")
        spatial_vars = {lp.var for lp in loops[:r]}
        sp_guards = [g for g in info.guards if _vars(g) <= spatial_vars]
        red_guards = [g for g in info.guards if not _vars(g) <= spatial_vars]
        src = self.te_to_loop(substitute(body.source, mapping))
        upd: Stmt = Store(acc, zero, _combine(body.combiner, Load(acc, zero, dt), src))
        if body.condition is not None:
            upd = If(self.te_to_loop(substitute(body.condition, mapping)), upd)
        if sp_guards or red_guards:
            upd = If(_and(sp_guards + red_guards), upd)
        for lp in reversed(sloops):
            upd = For(lp.var, lp.extent, upd, lp.kind, lp.tag)
        slot = base * nthreads + tid
        part: Stmt = Allocate(
            acc, seq(Store(acc, zero, ident), upd, Store(red, slot, Load(acc, zero, dt)))
        )

        def over_threads(stmt: Stmt, fresh: dict) -> Stmt:
            for lp in reversed(tloops):
                stmt = For(fresh[lp.var], lp.extent, stmt, "thread", lp.tag)
            return stmt

        part = over_threads(part, {lp.var: lp.var for lp in tloops})

        # The partial results are combined as a tree: each step halves the live slots, the
        # lower half of the threads adding the upper half's, a barrier between steps. One
        # thread combining them serially took n dependent shared loads (48 in each of a tuned
        # bert layer norm's two reductions), the tree ceil(log2(n)) steps.
        segment = base * nthreads
        steps: list[Stmt] = []
        for half, active in tree_reduction_steps(nthreads):
            fresh = {lp.var: Var(self.namer(lp.var.name + "_t")) for lp in tloops}
            t: Expr = Const(0, "int32")
            for lp in tloops:
                t = t * lp.extent + fresh[lp.var]
            lo, hi = Load(red, segment + t, dt), Load(red, segment + t + half, dt)
            add = If(t < active, Store(red, segment + t, _combine(body.combiner, lo, hi)))
            steps += [over_threads(add, fresh), Barrier()]
        fresh = {lp.var: Var(self.namer(lp.var.name + "_x")) for lp in tloops}
        final: Stmt = Store(info.buffer, store_idx, Load(red, segment, dt))
        first = [equal(v, 0) for v in fresh.values()]
        final = over_threads(If(_and(first + sp_guards), final), fresh)
        return Allocate(red, seq(part, Barrier(), *steps, final, Barrier()))

    def full_init(self, info: StageInfo, ident) -> Stmt:
        """``buffer[...] = identity`` over the stage's whole (region-sized) output."""
        axes = info.stage.op.axes
        fresh = [Var(self.namer(ax.name + "_init")) for ax in axes]
        stmt: Stmt = Store(info.buffer, self.flat(info, fresh), ident)
        for ax, v in zip(reversed(axes), reversed(fresh), strict=True):
            stmt = For(v, info.root_ext[ax.name], stmt)
        return stmt

    def init_nest(self, info: StageInfo, r: int, store_idx, ident, core_guards) -> Stmt:
        """The init store over the spatial leaf loops inside the outermost reduce loop."""
        loops = info.loops
        inner = [lp for lp in loops[r + 1 :] if lp.iterator.kind == "spatial"]
        inner_vars = {lp.var for lp in inner}
        red_vars = {lp.var for lp in loops if lp.iterator.kind != "spatial"}
        fresh = {lp.var: Var(self.namer(lp.var.name + "_init")) for lp in inner}
        idx = substitute(store_idx, fresh)
        guards = [
            substitute(g, fresh)
            for g in info.guards
            if not (_vars(g) & red_vars) and (_vars(g) & inner_vars or g in core_guards)
        ]
        stmt: Stmt = Store(info.buffer, idx, ident)
        pos = {fresh[lp.var]: k for k, lp in enumerate(inner)}
        at: dict = {}
        for g in guards:
            lv = max((pos[v] for v in _vars(g) if v in pos), default=len(inner) - 1)
            at.setdefault(lv, []).append(g)
        if at.get(len(inner) - 1) and not inner:
            stmt = If(_and(at[-1]), stmt)
        for k in range(len(inner) - 1, -1, -1):
            if at.get(k):
                stmt = If(_and(at[k]), stmt)
            lp = inner[k]
            stmt = For(fresh[lp.var], lp.extent, stmt, lp.kind, lp.tag)
        return stmt


# ----------------------------------------------------------------------------- helpers


def _walk(s: Stmt):
    from .loops import walk_stmts

    return walk_stmts(s)


def _vars(e: Expr) -> set:
    return {n for n in walk(e) if isinstance(n, Var)}


def tree_reduction_steps(n: int) -> list[tuple[int, int]]:
    """``(half, active)`` per step of combining ``n`` partial results as a tree: threads
    ``t < active`` combine slot ``t`` with slot ``t + half``, leaving ``half`` live slots, until
    one is left (``ceil(log2(n))`` steps; any ``n``, not only powers of two)."""
    steps = []
    while n > 1:
        half = (n + 1) // 2
        steps.append((half, n - half))
        n = half
    return steps


def _and(conds) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


def _checked(node: TensorRead, idx: list, memo: dict) -> list:
    """The loop-IR indices of ``node`` with each data-dependent one (it reads a tensor, as in
    ``A[B[i], j]``) wrapped in a CheckedIndex: nothing proves such an index in range, so the
    kernel checks it at run time instead of reading outside the tensor. ``memo``: see
    :func:`_reads_tensor`."""
    out = []
    for axis, (te_index, loop_index) in enumerate(zip(node.indices, idx, strict=True)):
        if _reads_tensor(te_index, memo):
            extent = int(node.tensor.shape[axis])
            loop_index = CheckedIndex(loop_index, extent, node.tensor.name, axis)
        out.append(loop_index)
    return out


def _reads_tensor(e: Expr, memo: dict) -> bool:
    """Whether ``e`` contains a TensorRead; ``memo`` (``id -> (expr, answer)``, one per
    lowering) answers for sub-expressions seen before: the indices of a stage's reads share
    its loop values, which would otherwise be walked once per read."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    out = isinstance(e, TensorRead) or any(_reads_tensor(c, memo) for c in children(e))
    memo[id(e)] = (e, out)  # keeps ``e`` alive, so its id is not reused
    return out


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _combine(combiner: str, acc: Expr, src: Expr) -> Expr:
    if combiner == "sum":
        return acc + src
    if combiner == "max":
        return Binary("max", acc, src, acc.dtype)
    if combiner == "min":
        return Binary("min", acc, src, acc.dtype)
    raise LowerError(f"unknown reduction combiner {combiner!r}")


def aligned_strides(shape, aligns, name: str):
    """Row-major strides with ``storage_align`` padding; returns (strides, allocation shape)
    (what lowering allocates for a stage of region ``shape``; the GPU sampler's shared-memory
    estimate reads it too)."""
    nd = len(shape)
    align = {}
    for axis, factor, offset in aligns:
        if not 0 <= axis < nd:
            raise LowerError(f"stage {name!r}: storage_align axis {axis} out of range ({nd} dims)")
        if factor <= 0:
            raise LowerError(f"stage {name!r}: storage_align factor must be positive")
        align[axis] = (factor, offset % factor)
    strides = [1] * nd
    acc = 1
    for d in range(nd - 1, -1, -1):
        st = acc
        if d in align and d != nd - 1:
            f, o = align[d]
            while st % f != o:
                st += 1
        strides[d] = st
        acc = st * shape[d]
    if not align:
        return tuple(strides), tuple(shape)
    alloc = [shape[0]] if nd else []
    ok = True
    for d in range(1, nd):
        if strides[d - 1] % strides[d]:
            ok = False
            break
        alloc.append(strides[d - 1] // strides[d])
    if not ok:
        alloc = [acc]
    return tuple(strides), tuple(alloc)
