"""The GPU tensor-core sketch: GEMMs on warp-level ``wmma`` fragments (fp16 / bf16 16x16x16,
float32 as TF32 16x16x8 where the target allows it).

:class:`MultiLevelTilingTensorCore` fires (ahead of the scalar multi-level tiling, see
:func:`autosched.search.sketch_rules_gpu.gpu_rules`) on a stage that
:func:`tensor_core_gemm` recognizes: ``out[b.., i, j] = sum_k X[.., i, k] * Y[.., j, k]`` (or
``Y[.., k, j]``) with 16-bit float operands (each maybe cast to the accumulator dtype),
accumulated in float32 or in the operand dtype, and ``i``, ``j``, ``k`` multiples of the
fragment's M, N and K (a dense layer, a batch_matmul). float32 operands qualify only on a target
with ``-allow_tf32=1`` of sm_80 or newer (or no ``-arch``): they then run as TF32 (10-bit
mantissa) on 16x16x8 fragments (:func:`tensor_core_dtypes`); by default float32 keeps the scalar
sketches. Anything else (batch-1 dense with M=1, K=3) is left to the scalar sketches: tails are
not masked yet. The fragment shapes are :data:`tensorir.passes.tensor_core.FRAGMENT_SHAPES`.

The sketch (a GEMM ``G`` and the stage ``O`` that writes its result: ``G`` itself after
``cache_write``, or its single elementwise consumer, fused: a chain, or a fan-in such as
BERT's gelu, :func:`~autosched.search.state_utils.elementwise_fan_in_consumer`)::

    G: b  i.0.0 j.0.0  i.0.1 j.0.1  k.0.0  k.0.1  i.0.2 j.0.2  i.1 j.1 k.1
       |  block tile   warps         k tile  frags  fragments   16 16 K   <- pragma tensor_core
    O: b@i.0.0@j.0.0 -> blockIdx.x, i.0.1@j.0.1 -> threadIdx.y (one warp each), i.0.2 j.0.2,
       i.1 j.1 <- pragma tensor_core (the fragment store); G computed at O's threadIdx.y
    X.shared, Y.shared at G's k.0.0: the row split by 16 bytes (8 halves or 4 floats,
       vectorized), the rest fused and split [.., warps, 32] -> threadIdx.y, threadIdx.x (the
       lanes); rows padded by 16 bytes.
    k.0.0 <- pragma double_buffer (:func:`pipeline_depth` >= 2; the default 3): lowering stages
       the two shared buffers twice over and loads k tile t + 1 while tile t multiplies
       (:mod:`tensorir.passes.double_buffer`); the CUDA backend issues those loads as
       ``cp.async`` on sm_80+. Sampling draws the stages of each state (2 up to
       :func:`pipeline_depth`, as many as fit in shared memory: ``software_pipeline_<N>``
       keeps N - 1 tiles in flight; :func:`autosched.search.annotate_gpu.init_pipeline_depth`)
       and evolution mutates them (:func:`autosched.search.mutation.mutate_pipeline_depth`).

The lengths left open (warps and fragments per warp along ``i`` and ``j``, fragments per shared
k tile) are drawn and mutated by the search like every tile size; the fragment sides, the 32
lanes and the 16-byte vector are fixed. Every lane of a warp runs the same iterations of ``G``
and ``O`` (they bind no ``threadIdx.x``), which is what makes the scalar reading of the loops
equal to the warp-collective ``wmma`` calls the CUDA backend emits for the marked nests
(:mod:`tensorir.passes.tensor_core`, :mod:`codegen.cuda`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import lru_cache

from codegen.cuda import cp_async_available
from tensorir.arith import linear_form
from tensorir.dtype import LOW_PRECISION, itemsize
from tensorir.expr import Binary, Cast, Reduce, TensorRead, Var
from tensorir.ops.conv2d_gemm import GEMM_TAG
from tensorir.passes.double_buffer import MAX_STAGES
from tensorir.passes.tensor_core import FRAGMENT_SHAPES, TF32_TENSOR_CORES

from . import state_utils as su
from .sketch_rules import APPLY_AND_SKIP_REST, SKIP, SketchRule

__all__ = [
    "FRAGMENT",
    "MultiLevelTilingTensorCore",
    "TensorCoreGemm",
    "tensor_core_dtypes",
    "pipeline_depth",
    "tensor_core_gemm",
]

log = logging.getLogger(__name__)

DEFAULT_PIPELINE = 3
"""``SearchParams.gpu_tensor_core_pipeline``'s default (kept equal there): states are drawn
with 2 or 3 stages (docs/gpu.md says why not 4)."""
FRAGMENT = 16
"""The wmma fragment's M and N (its K is the operand dtype's: FRAGMENT_SHAPES)."""
LANES = 32
FETCH_BYTES = 16  # per lane and shared-memory fetch: 8 halves or 4 floats
SHARED_ROW_ALIGN = 32  # shared rows are 32*m + 16 bytes' worth of elements long (see apply)
SHARED_ROW_PAD_BYTES = 16
FUSE_FLAT_CONSUMER = True
"""Run the epilogue of an implicit-GEMM conv2d (:func:`flat_consumer`) in the fragment store
nest; False writes the GEMM to global memory and runs the epilogue as a second kernel."""
FUSE_PADDED_ROWS = True
"""Also where the GEMM is padded past the reader's pixels (P = 49 -> 64): the store nest then
writes under an ``if`` on the real rows; False keeps those convs in two kernels."""


@dataclass(frozen=True)
class TensorCoreGemm:
    """The axes of a GEMM stage the tensor-core sketch tiles (names of ``op.axes``)."""

    batch: tuple[str, ...]
    i: str
    j: str
    k: str
    dtype: str = "float16"  # the operands' (a key of FRAGMENT_SHAPES)


def tensor_core_dtypes(target) -> tuple[str, ...]:
    """The operand dtypes the tensor-core sketch tiles for ``target``: fp16 and bf16 always (the
    CUDA backend keeps scalar loops for an ``-arch`` without them), float32 (as TF32) only with
    ``-allow_tf32=1`` and an ``-arch`` of sm_80 or newer, or none given (then decided by
    ``__CUDA_ARCH__`` when nvcc compiles)."""
    if not (TF32_TENSOR_CORES and getattr(target, "allow_tf32", False)):
        return LOW_PRECISION
    from codegen.cuda import wmma_unavailable_reason

    why = wmma_unavailable_reason(target.get("arch"), "float32")
    if why:
        _warn_once(f"target {str(target)!r}: -allow_tf32=1 has no effect: {why}")
        return LOW_PRECISION
    return (*LOW_PRECISION, "float32")


@lru_cache(maxsize=64)
def _warn_once(message: str) -> None:
    log.warning("%s", message)


def _operand(e, dtypes) -> TensorRead | None:
    """A tensor read of one of ``dtypes``, maybe cast up to the accumulator dtype."""
    if isinstance(e, Cast):
        e = e.value
    return e if isinstance(e, TensorRead) and e.dtype in dtypes else None


def tensor_core_gemm(op, dtypes=LOW_PRECISION) -> TensorCoreGemm | None:
    """The GEMM axes of ``op`` when the tensor-core sketch can tile it (module docstring), its
    operands of one of ``dtypes`` (:func:`tensor_core_dtypes` of the target: float32 only
    where TF32 is allowed)."""
    body = getattr(op, "body", None)
    if not (isinstance(body, Reduce) and body.combiner == "sum" and body.condition is None):
        return None
    if len(body.axes) != 1 or len(op.axes) < 2:
        return None
    prod = body.source
    if not (isinstance(prod, Binary) and prod.op == "*"):
        return None
    x, y = _operand(prod.a, dtypes), _operand(prod.b, dtypes)
    if x is None or y is None or x.dtype != y.dtype or x.dtype not in FRAGMENT_SHAPES:
        return None
    if body.dtype not in ("float32", x.dtype):
        return None
    k = body.axes[0]
    *batch, ax_i, ax_j = op.axes
    shape = FRAGMENT_SHAPES[x.dtype]
    if ax_i.extent % shape.m or ax_j.extent % shape.n or k.extent % shape.k:
        return None
    # X[.., i, k] and Y[.., j, k] or Y[.., k, j]: bare axes as the two last indices.
    if tuple(x.indices[-2:]) != (ax_i.var, k.var):
        return None
    if tuple(y.indices[-2:]) not in ((ax_j.var, k.var), (k.var, ax_j.var)):
        return None
    inner = {ax_i.var, ax_j.var, k.var}
    for r in (x, y):
        for e in r.indices[:-2]:  # batch indices: a batch axis or a constant
            if isinstance(e, Var) and e in inner:
                return None
    return TensorCoreGemm(tuple(ax.var.name for ax in batch), ax_i.var.name, ax_j.var.name,
                          k.var.name, x.dtype)  # fmt: skip


def _flattened_axes(index, axes) -> list[int] | None:
    """Positions of the consecutive ``axes`` (IterVars) that ``index`` flattens row-major
    (``(a*E1 + b)*E2 + c`` over axes of extents E0, E1, E2), or None."""
    form = linear_form(index)
    if form is None:
        return None
    terms, const = form
    pos = {id(ax.var): k for k, ax in enumerate(axes)}
    if const or not terms or any(not isinstance(v, Var) or id(v) not in pos for v in terms):
        return None
    used = sorted(pos[id(v)] for v in terms)
    if used != list(range(used[0], used[-1] + 1)):
        return None
    stride = 1
    for k in reversed(used):
        if terms.get(axes[k].var) != stride:
            return None
        stride *= axes[k].extent
    return used


def flat_consumer(state, sid: int) -> tuple[int, list[list[int]]] | None:
    """The stage that writes ``sid``'s GEMM result in another shape, and the groups of its
    iterators (positions) to fuse so that it matches the GEMM's axes; or None.

    :func:`tensorir.ops.conv2d_gemm.conv2d_implicit_gemm` computes ``gemm[p, co]`` and reads
    it back as ``out[n, oh, ow, co] = gemm[(n*OH + oh)*OW + ow, co]``, followed by its
    epilogue (cast, bias, relu): fusing ``n, oh, ow`` into one loop makes that consumer an
    elementwise one of the GEMM, so the epilogue runs in the fragment store nest. Each GEMM
    index must be a bare axis or a row-major flattening of consecutive axes of the reader,
    covering the GEMM's extent or, with :data:`FUSE_PADDED_ROWS`, less of it (padded rows:
    the store nest is then guarded), in order; the reader's other axes
    have extent 1 and lead; the reader reaches the single consumer elementwise. Only for the
    conv GEMM (tagged ``conv2d_gemm``).
    """
    dag = su.current_dag(state)
    g = dag.ops[dag.op_index(state.stages[sid].name)]
    if g.tag != GEMM_TAG:  # dense / batch_matmul keep their sketch as it was
        return None
    readers = dag.read_by(g)
    cons = su.consumer_ids(state, sid)
    if len(readers) != 1 or len(cons) != 1:
        return None
    ((rname, accesses),) = readers.items()
    reader = dag.ops[dag.op_index(rname)]
    if reader is g or not dag.elementwise_match(reader, state.stages[cons[0]].name):
        return None
    if len({tuple(str(e) for e in acc) for acc in accesses}) != 1:
        return None
    axes = reader.axes
    groups = []
    for index, extent in zip(accesses[0], g.shape, strict=True):
        used = _flattened_axes(index, axes)
        covered = None if used is None else math.prod(axes[k].extent for k in used)
        if covered is None or covered > extent or (covered < extent and not FUSE_PADDED_ROWS):
            return None
        groups.append(used)
    flat = [k for grp in groups for k in grp]
    lead = len(axes) - len(flat)
    if flat != list(range(lead, len(axes))) or any(ax.extent != 1 for ax in axes[:lead]):
        return None
    return cons[0], groups


class MultiLevelTilingTensorCore(SketchRule):
    """Tile a :func:`tensor_core_gemm` stage onto wmma fragments (module docstring)."""

    name = "MultiLevelTilingTensorCore"

    lanes = LANES
    """``threadIdx.x`` lanes of a block: one warp (every lane runs the same fragment loops)."""

    def _tile_gemm(self, s, g, gemm, shape):
        """Split G's ``i``, ``j``, ``k``: ``({axis: [block, warps, fragments, 16]}, [k tile,
        fragments per k tile, K], {axis: (step ids O follows, the warp split's last)})``."""
        parts, split_ids = {}, {}
        for ax, side in ((gemm.i, shape.m), (gemm.j, shape.n)):
            outer, inner = s.split(g, ax, [side])
            split_ids[ax] = (len(s.steps) - 1,)
            p = s.split(g, outer.name, [None, None])
            split_ids[ax] += (len(s.steps) - 1,)
            parts[ax] = [p[0].name, p[1].name, p[2].name, inner.name]
        ko, ki = s.split(g, gemm.k, [shape.k])
        kp = s.split(g, ko.name, [None])
        return parts, [kp[0].name, kp[1].name, ki.name], split_ids

    def _follow_axis(self, s, o, name, split_ids) -> list[str]:
        """O's loop ``name`` split as G's axis was: ``[block, warps, fragments, 16]``."""
        o16 = s.follow_split(o, name, split_ids[0], 1)
        op3 = s.follow_split(o, o16[0].name, split_ids[1], 2)
        return [x.name for x in op3] + [o16[1].name]

    def _shared_layout(self, s, shared: str, dtype: str) -> None:
        """Rows padded by 16 bytes (8 halves, 4 floats): the 16 rows a fragment load reads
        fall in different shared-memory banks (TVM's tensor-core schedules do the same)."""
        pad = SHARED_ROW_PAD_BYTES // itemsize(dtype)
        s.storage_align(shared, s[shared].iters[-2].name, SHARED_ROW_ALIGN, pad)

    def meet_condition(self, ctx, state, sid):
        stage = state.stages[sid]
        if stage.is_placeholder or stage.compute_at != "root" or su.is_tiled(stage):
            return SKIP
        if getattr(ctx, "warp_size", LANES) != LANES or not su.needs_multi_level_tiling(state, sid):
            return SKIP
        if not getattr(ctx.params, "gpu_tensor_core", True):
            return SKIP
        if tensor_core_gemm(stage.op, _dtypes(ctx)) is None:
            return SKIP
        return APPLY_AND_SKIP_REST

    def apply(self, ctx, state, sid):
        s = state.copy()
        name = state.stages[sid].name
        dtype = tensor_core_gemm(state.stages[sid].op, _dtypes(ctx)).dtype
        shape = FRAGMENT_SHAPES[dtype]
        vector = FETCH_BYTES // itemsize(dtype)
        cons, groups = su.has_single_elementwise_consumer(state, sid), []
        if cons is None:  # BERT's gelu reads the biased dense twice: still elementwise
            cons = su.elementwise_fan_in_consumer(state, sid)
        if cons is None and FUSE_FLAT_CONSUMER:
            cons, groups = flat_consumer(state, sid) or (None, [])
        if cons is None:
            s.cache_write(sid, "local")  # G = name.local, O = name
            g, o = f"{name}.local", name
        else:
            g, o = name, state.stages[cons].name
        o_iters = [it.name for it in s[o].iters]
        for grp in groups:  # O's loops as the GEMM's: out[n, oh, ow, co] -> [n@oh@ow, co]
            if len(grp) > 1:
                s.fuse(o, [o_iters[k] for k in grp])
        reads = [op.name for op in su.current_dag(s).producers(g)]
        # The iterators by position (cache_write renames them ``i.c``): batch.., i, j, k.
        spatial = [it.name for it in s[g].iters if it.kind == "spatial"]
        (k_name,) = [it.name for it in s[g].iters if it.kind == "reduce"]
        gemm = TensorCoreGemm(tuple(spatial[:-2]), spatial[-2], spatial[-1], k_name, dtype)
        o_names = [it.name for it in s[o].iters]
        o_batch, o_i, o_j = o_names[:-2], o_names[-2], o_names[-1]
        # G: fragments (16), then warps / fragments per warp (searched).
        parts, kp, split_ids = self._tile_gemm(s, g, gemm, shape)
        pi, pj = parts[gemm.i], parts[gemm.j]
        order = [*gemm.batch, pi[0], pj[0], pi[1], pj[1], kp[0], kp[1], pi[2], pj[2],
                 pi[3], pj[3], kp[2]]  # fmt: skip
        s.reorder(g, order)
        s.pragma(g, pi[3], "tensor_core")
        # O follows G's tiles; blocks and warps bound here (annotation leaves bound stages be).
        oi = self._follow_axis(s, o, o_i, split_ids[gemm.i])
        oj = self._follow_axis(s, o, o_j, split_ids[gemm.j])
        s.reorder(o, [*o_batch, oi[0], oj[0], oi[1], oj[1], oi[2], oj[2], oi[3], oj[3]])
        block = s.fuse(o, [*o_batch, oi[0], oj[0]])
        s.bind(o, block.name, "blockIdx.x")
        warps = s.fuse(o, [oi[1], oj[1]])
        s.bind(o, warps.name, "threadIdx.y")
        s.pragma(o, oi[3], "tensor_core")
        s.compute_at(g, o, warps.name)
        warp_steps = [split_ids[gemm.i][-1], split_ids[gemm.j][-1]]
        for rd in reads:
            shared = s.cache_read(rd, "shared", [g])
            s.compute_at(shared.name, g, kp[0])
            self._shared_layout(s, shared.name, dtype)
            # The vector is split off the row (contiguous in both copies) before the fuse, so
            # both indices stay linear in it (one 16-byte load and store, codegen.cuda).
            *outer, col = [it.name for it in s[shared.name].iters]
            col_o, vec = s.split(shared.name, col, [vector])
            fused = s.fuse(shared.name, [*outer, col_o.name])
            rest, lanes = s.split(shared.name, fused.name, [self.lanes])
            _, ty = s.follow_fused_split(shared.name, rest.name, warp_steps, 0, True)
            s.bind(shared.name, ty.name, "threadIdx.y")
            s.bind(shared.name, lanes.name, "threadIdx.x")
            s.vectorize(shared.name, vec.name)
        if pipeline_depth(ctx) >= 2:
            # Double buffered: tile k + 1 loads (cp.async on sm_80+) while tile k multiplies;
            # sampling may deepen the pipeline (init_pipeline_depth).
            s.pragma(g, kp[0], "double_buffer")
        return [(s, s.stage_id(g) - 1)]


def _dtypes(ctx) -> tuple[str, ...]:
    """The operand dtypes the rule tiles in this search (GPUSketchContext.tensor_core_dtypes)."""
    return getattr(ctx, "tensor_core_dtypes", LOW_PRECISION)


def pipeline_depth(ctx) -> int:
    """The most stages of the shared-memory staging (``SearchParams.gpu_tensor_core_pipeline``,
    1 to :data:`~tensorir.passes.double_buffer.MAX_STAGES`): 1 stages one tile at a time, 2
    double buffers every state, 3 and 4 let sampling and mutation choose 2 up to that many; 1
    when the target's ``-arch`` predates ``cp.async`` (sm_80)."""
    depth = getattr(ctx.params, "gpu_tensor_core_pipeline", DEFAULT_PIPELINE)
    if isinstance(depth, bool) or depth not in range(1, MAX_STAGES + 1):
        raise ValueError(
            f"SearchParams.gpu_tensor_core_pipeline={depth!r}: the tensor-core sketch stages "
            f"shared memory in 1 to {MAX_STAGES} buffers; pass an int from 1 (no pipeline) "
            f"to {MAX_STAGES}"
        )
    return 1 if cp_async_available(getattr(ctx, "arch", None)) is False else depth
