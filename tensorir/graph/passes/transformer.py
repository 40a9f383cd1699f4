"""Graph passes for transformers on GPUs: fewer, larger kernels for attention.

:func:`combine_parallel_dense` turns the query / key / value projections of one input (three
``add(nn.dense(x, W_i), b_i)``) into one dense with the weights and biases concatenated, sliced
back per branch (Relay's ``CombineParallelDense``, which TVM runs at opt_level 4). With a
sequence of 128 a (128, 768) x (768, 768) dense has too few output tiles to fill a GPU; the
combined (128, 2304) one has three times as many, in one launch instead of three.

:func:`fuse_layout_producers` runs after ``fuse_ops``: a fused group made only of layout ops
(``reshape``, ``transpose``, ``strided_slice`` ...: the head split ``(S, H) -> (heads, S, dh)``
and merge of attention) whose only reader is a dense or batch_matmul moves into that reader's
group. Relay keeps such a group as its own kernel (an injective group never fuses into an
out-elemwise-fusable sink); on a GPU the matmul's sketch copies its inputs into shared memory
anyway (``AddCacheRead``) and inlines the layout ops into that copy (``AlwaysInlineGPU``), so
the transpose costs an index computation instead of a kernel launch and a round trip of the
tensor through global memory. A cast stays out: a layer norm's float16 copy converted in the
tensor-core kernel's shared-memory copy made bert-base's q/k/v and FFN denses 3.7 us slower
each on an H200 (the float32 rows copied element by element instead of as 16-byte
``cp.async`` words), more than the 24 cast kernels it saved (benchmarks/RESULTS.md, session
16). Mixed precision now stores that norm's result in float16 for all its readers, so the
cast runs in the norm's kernel (:func:`fuse_normalization_epilogues`).

:func:`fuse_normalization_epilogues` runs before it: the cast that mixed precision puts after a
softmax (or a layer norm read by nothing else) joins the normalization's group, so that the
kernel writes the 16-bit result instead of a float32 tensor that a second kernel casts. Relay
never fuses into a reduction's output; on a GPU the row-wise sketch (one block per row, the
reductions across its threads) ends with an elementwise loop over the row anyway, and the cast
runs in it.

:func:`fuse_normalization_prologues` runs after the epilogues: an injective group read only by
a layer norm or softmax, as its data (split-K's sum with the bias and residual, the
embedding's gathers and adds), joins the normalization's group at its start and is recomputed
at each of the row's reads.

:func:`split_k_dense` cuts the reduction of a few-row long-K dense (BERT's FFN output) into
slices computed as one batch_matmul: ``partition`` runs it for GPU targets unless
``AUTOSCHED_SPLIT_K_DENSE=0`` (bert-base float16 on an H200: that dense's 11.9 us became 6.2 us
plus a 1.3 us sum, benchmarks/RESULTS.md session 14, timed before the slices kept the dense's
float32 accumulator).
"""

from __future__ import annotations

import numpy as np

from ...passes.tensor_core import FRAGMENT
from .. import nn, op
from ..ir import Call, Constant, Expr, Function, calls, rewrite, users
from ..shapes import ELEMWISE, INJECTIVE
from .fuse import FusedGroup, op_pattern

__all__ = [
    "LAYOUT_OPS",
    "combine_parallel_dense",
    "fuse_layout_producers",
    "fuse_normalization_epilogues",
    "fuse_normalization_prologues",
    "split_k_dense",
]

LAYOUT_OPS = frozenset(
    {"reshape", "transpose", "strided_slice", "squeeze", "expand_dims", "layout_transform"}
)
_MATMULS = ("nn.dense", "nn.batch_matmul")
# Row-wise normalizations whose GPU sketch runs an elementwise consumer of the row in its kernel.
_NORMALIZATIONS = frozenset({"nn.softmax", "nn.layer_norm"})


def _dense_branch(dense: Call, readers: dict) -> tuple[Call, str] | None:
    """The ``add(dense, bias)`` of a dense with a constant 2-D weight and a constant (N,) bias
    read by nothing else, or mixed precision's ``add(cast(dense), bias)`` (the dense
    accumulating in float32, its result cast to 16 bits before the bias); with the cast's dtype
    ("" for none). None for anything else."""
    weight = dense.args[1]
    if not isinstance(weight, Constant) or len(weight.shape) != 2:
        return None
    if dense.attrs.get("out_dtype", "") not in ("", dense.dtype):
        return None
    end, cast_dtype = dense, ""
    after = readers.get(dense, [])
    if len(after) == 1 and after[0].op == "cast":
        end, cast_dtype = after[0], after[0].attrs["dtype"]
        after = readers.get(end, [])
    if len(after) != 1 or after[0].op != "add" or after[0].args[0] is not end:
        return None
    bias = after[0].args[1]
    if not isinstance(bias, Constant) or bias.shape != (weight.shape[0],):
        return None
    if after[0].shape != dense.shape:
        return None
    return after[0], cast_dtype


def combine_parallel_dense(func: Function, min_branches: int = 2) -> Function:
    """Combine sibling ``add(nn.dense(x, W_i), b_i)`` of one ``x`` into one dense.

    Each branch needs a constant weight (N_i, K) and a constant bias (N_i,) and no other reader
    of its dense; the branches' ``add`` become ``strided_slice`` of the combined result along
    the last axis. Values are unchanged (each output element is the same dot product).
    Mixed precision's branches, ``add(cast(nn.dense(x, W_i, out_dtype), dtype), b_i)``, combine
    the same way; only branches that agree on every dtype (weight, accumulator, cast, bias)
    are combined.

    Parameters
    ----------
    func : Function
        Usually the output of ``optimize`` (bias_add already canonicalised to ``add``).
    min_branches : int
        Combine only when at least this many branches share their input.

    Returns
    -------
    Function
    """
    readers = users(func)
    replace: dict[Call, tuple[int, int, int]] = {}  # branch add -> (group id, begin, end)
    plans: list[tuple[list, str]] = []  # a group's (dense, bias add) pairs, its cast's dtype
    for x, rs in readers.items():
        dense = [c for c in rs if c.op == "nn.dense" and c.args[0] is x]
        branches = [(d, *b) for d in dense if (b := _dense_branch(d, readers)) is not None]
        by_kind: dict[tuple, list] = {}
        for d, a, cast_dtype in branches:
            bias = str(a.args[1].dtype)
            kind = (str(d.args[1].dtype), d.attrs.get("out_dtype", ""), cast_dtype, bias)
            by_kind.setdefault(kind, []).append((d, a))
        for (_, _, cast_dtype, _), group in by_kind.items():
            if len(group) < min_branches:
                continue
            gid, begin = len(plans), 0
            plans.append((group, cast_dtype))
            for d, a in group:
                n = d.args[1].shape[0]
                replace[a] = (gid, begin, begin + n)
                begin += n
    if not replace:
        return func
    combined: dict[int, Expr] = {}

    def visit(node, args):
        if node not in replace:
            return None
        gid, begin, end = replace[node]
        if gid not in combined:
            group, cast_dtype = plans[gid]
            dense = [d for d, _ in group]
            weight = np.concatenate([d.args[1].value for d in dense], axis=0)
            bias = np.concatenate([a.args[1].value for _, a in group], axis=0)
            names = [d.args[1].name for d in dense if d.args[1].name]
            # the rewritten x: through the rewritten dense (and its cast)
            data = (args[0].args[0] if cast_dtype else args[0]).args[0]
            out = nn.dense(data, Constant(weight, "+".join(names)), units=weight.shape[0],
                           out_dtype=dense[0].attrs.get("out_dtype", ""))  # fmt: skip
            if cast_dtype:
                out = op.cast(out, cast_dtype)
            combined[gid] = op.add(out, Constant(bias))
        last = len(node.shape) - 1
        return op.strided_slice(combined[gid], (begin,), (end,), axes=(last,))

    return rewrite(func, visit)


def _split_count(n: int, k: int, max_split: int, min_slice: int) -> int:
    """How many K slices an (m, n, k) dense gets: the largest power of two <= k // n and
    <= ``max_split`` that divides k into slices of at least ``min_slice``; 1 = leave it."""
    s = 1
    while (s * 2 <= max_split and s * 2 * n <= k and k % (s * 2) == 0
           and k // (s * 2) >= min_slice):  # fmt: skip
        s *= 2
    return s


def _fragment_padded(n: int) -> int:
    """``n`` rounded up to whole tensor-core fragments (``FRAGMENT``, 16) where the padding is
    at most an eighth of the result (1000 -> 1008), else ``n`` (10 stays 10: most of a 16-wide
    tile would be zeros)."""
    padded = -(-n // FRAGMENT) * FRAGMENT
    return padded if (padded - n) * 8 <= padded else n


def split_k_dense(
    func: Function,
    max_rows: int = 256,
    max_split: int = 8,
    min_rows: int = 2,
    min_slice: int = 256,
) -> Function:
    """Split the reduction of a dense with few rows and a long K (BERT's FFN output, (128,
    3072) x (3072, 768)) into ``s`` slices computed as one batch_matmul, summed after.

    ``dense(x, W)`` with constant ``W`` (N, K) becomes ``batch_matmul(x_s, W_s)`` with
    ``x_s = transpose(reshape(x, (M, s, K/s)), (1, 0, 2))`` and ``W_s`` the weight cut the same
    way (a Constant), then the ``s`` partial results added. M x N output tiles alone leave most
    of a GPU idle when M is small; the slices give ``s`` times as many blocks, and the reshape
    and transpose of ``x`` are read inside the batch_matmul (:func:`fuse_layout_producers`).
    The partial sums and the dense's epilogue (bias, residual) are one elementwise kernel.
    Float sums are reassociated: results equal the dense's to rounding. An N that is not a
    multiple of 16 (a classifier's 1000) is padded with zero weights where that adds at most
    an eighth, so the slices run on tensor cores; the sum reads only the real columns.

    Parameters
    ----------
    func : Function
    max_rows : int
        Only denses with at most this many rows (M) are split.
    max_split : int
        At most this many slices; a dense gets ``s = min(max_split, K // N)`` rounded down to
        a power of two that divides K.
    min_rows : int
        Denses with fewer rows are left alone: a batch-1 (M = 1) dense has the GPU's GEMV
        sketch, which already spreads K over a block's threads.
    min_slice : int
        Each slice keeps at least this much of K: a short K is not worth a second kernel.
    """

    def visit(node, args):
        if not (isinstance(node, Call) and node.op == "nn.dense"):
            return None
        x, w = args
        if not isinstance(w, Constant) or len(x.shape) != 2 or len(w.shape) != 2:
            return None
        if node.attrs.get("out_dtype", "") not in ("", node.dtype):
            return None
        (m, k), n = x.shape, w.shape[0]
        if not min_rows <= m <= max_rows:
            return None
        s = _split_count(n, k, max_split, min_slice)
        if s < 2:
            return None
        part = k // s
        xs = op.transpose(op.reshape(x, (m, s, part)), (1, 0, 2))
        ws = w.value.reshape(n, s, part).transpose(1, 0, 2)
        # N padded with zero weights to whole tensor-core fragments (a classifier's 1000 ->
        # 1008), so the batch_matmul takes the tensor-core sketch; the sum reads the real N.
        n_pad = _fragment_padded(n)
        if n_pad != n:
            ws = np.concatenate([ws, np.zeros((s, n_pad - n, part), ws.dtype)], axis=1)
        # the dense's accumulator dtype (mixed precision's float32) for the partial sums too
        out_dtype = node.attrs.get("out_dtype", "")
        partial = nn.batch_matmul(xs, Constant(np.ascontiguousarray(ws), w.name), out_dtype)
        total = None
        for i in range(s):
            piece = op.strided_slice(partial, (i, 0), (i + 1, n), axes=(0, 2))
            piece = op.reshape(piece, (m, n))
            total = piece if total is None else op.add(total, piece)
        return total

    return rewrite(func, visit)


def _group(group_calls: list[Call], pattern: int) -> FusedGroup:
    inside = set(group_calls)
    inputs: list[Expr] = []
    for c in group_calls:
        for a in c.args:
            if a not in inside and a not in inputs:
                inputs.append(a)
    return FusedGroup(tuple(group_calls), tuple(inputs), pattern)


def fuse_layout_producers(func: Function, groups: list[FusedGroup]) -> list[FusedGroup]:
    """Move every group of layout ops only, read only by a dense / batch_matmul, into its
    reader.

    Parameters
    ----------
    func : Function
        The function ``groups`` partition (its outputs stay materialised).
    groups : list of FusedGroup
        ``fuse_ops(func)``.

    Returns
    -------
    list of FusedGroup
        Still in topological order, each with one output; a reader's group lists its
        absorbed producers' calls first.
    """
    outputs = set(func.outputs)
    readers = _group_readers(groups)
    into: dict[int, list[int]] = {}
    for pi, p in enumerate(groups):
        if p.anchor is not None or p.output in outputs:
            continue
        if not all(c.op in LAYOUT_OPS for c in p.calls):
            continue
        rs = readers.get(p.output, [])
        if len(rs) != 1:
            continue
        anchor = groups[rs[0]].anchor
        if anchor is None or anchor.op not in _MATMULS or p.output not in anchor.args:
            continue
        into.setdefault(rs[0], []).append(pi)
    if not into:
        return groups
    absorbed = {pi for ps in into.values() for pi in ps}
    out = []
    for gi, g in enumerate(groups):
        if gi in absorbed:
            continue
        if gi not in into:
            out.append(g)
            continue
        moved = [c for pi in sorted(into[gi]) for c in groups[pi].calls]
        pattern = max(g.pattern, *(op_pattern(c) for c in moved))
        out.append(_group(moved + list(g.calls), pattern))
    _check_order(func, out)
    return out


def fuse_normalization_epilogues(func: Function, groups: list[FusedGroup]) -> list[FusedGroup]:
    """Move an elementwise group (mixed precision's cast) that reads only a normalization's
    output, its only reader, into the normalization's group.

    Parameters
    ----------
    func : Function
        The function ``groups`` partition (its outputs stay materialised).
    groups : list of FusedGroup
        ``fuse_ops(func)`` (before :func:`fuse_layout_producers`).

    Returns
    -------
    list of FusedGroup
        Still in topological order, each with one output: the normalization's group, where it
        was, now ends with the reader's calls.
    """
    outputs = set(func.outputs)
    readers = _group_readers(groups)
    joined: dict[int, int] = {}  # normalization group -> the reader moved into it
    for gi, g in enumerate(groups):
        if len(g.calls) != 1 or g.output.op not in _NORMALIZATIONS or g.output in outputs:
            continue
        rs = readers.get(g.output, [])
        if len(rs) != 1:
            continue
        reader = groups[rs[0]]
        if reader.inputs != (g.output,) or reader.output.shape != g.output.shape:
            continue
        if any(op_pattern(c) != ELEMWISE for c in reader.calls):
            continue
        joined[gi] = rs[0]
    return _join_groups(func, groups, joined, moved_first=False)


def fuse_normalization_prologues(func: Function, groups: list[FusedGroup]) -> list[FusedGroup]:
    """Move an injective group (no matmul or reduction) whose only reader is a normalization,
    reading it as its data, into the normalization's group.

    The producer is typically the split-K slices' sum with the bias and the residual before
    BERT's layer norm, or the embedding's gathers and adds. Relay fuses no injective op into a
    reduction. On a GPU the row-wise sketch reads its row three times (sum, centred sum of
    squares, normalize), so the producer is recomputed at each read instead of costing a
    kernel launch and a round trip of the row through global memory. Measured on bert-base
    float16 (benchmarks/RESULTS.md, session 16): as tuned with 64 threads a row the fused norm
    cost about what the two kernels did; with 384 threads a row it took 5.53 us instead of
    6.24, hence mutation's wider row splits for cross-thread reductions.

    Parameters
    ----------
    func : Function
        The function ``groups`` partition (its outputs stay materialised).
    groups : list of FusedGroup
        ``fuse_ops(func)`` (after :func:`fuse_normalization_epilogues`).

    Returns
    -------
    list of FusedGroup
        Still in topological order, each with one output: the normalization's group, where it
        was, now starts with the producer's calls.
    """
    outputs = set(func.outputs)
    readers = _group_readers(groups)
    into: dict[int, int] = {}  # normalization group -> the producer moved into it
    for pi, p in enumerate(groups):
        if p.anchor is not None or p.output in outputs:
            continue
        if any(op_pattern(c) > INJECTIVE for c in p.calls):
            continue
        rs = readers.get(p.output, [])
        if len(rs) != 1 or rs[0] in into:
            continue
        norm = groups[rs[0]].calls[0]
        if norm.op not in _NORMALIZATIONS or norm.args[0] is not p.output:
            continue
        uses = sum(a is p.output for c in groups[rs[0]].calls for a in c.args)
        if uses == 1:
            into[rs[0]] = pi
    return _join_groups(func, groups, into, moved_first=True)


def _join_groups(func: Function, groups: list[FusedGroup], joins: dict, moved_first: bool):
    """``groups`` with group ``joins[gi]`` moved into group ``gi`` (its calls before ``gi``'s
    with ``moved_first``, after them otherwise), the host keeping its place and pattern;
    ``groups`` itself when there is nothing to join."""
    if not joins:
        return groups
    moved = set(joins.values())
    out = []
    for gi, g in enumerate(groups):
        if gi in moved:
            continue
        if gi in joins:
            other = list(groups[joins[gi]].calls)
            calls_ = [*other, *g.calls] if moved_first else [*g.calls, *other]
            g = _group(calls_, g.pattern)
        out.append(g)
    _check_order(func, out)
    return out


def _group_readers(groups: list[FusedGroup]) -> dict[Expr, list[int]]:
    """Each call that leaves a group -> the indices of the groups that read it."""
    readers: dict[Expr, list[int]] = {}
    for gi, g in enumerate(groups):
        for a in g.inputs:
            if isinstance(a, Call):
                readers.setdefault(a, []).append(gi)
    return readers


def _check_order(func: Function, groups: list[FusedGroup]) -> None:
    # Every call in exactly one group, each group's inputs made by earlier groups.
    seen: set[Call] = set()
    for g in groups:
        for a in g.inputs:
            if isinstance(a, Call) and a not in seen:  # pragma: no cover - an invariant
                raise AssertionError(f"fuse_layout_producers: {a.op} is read before it is made")
        seen.update(g.calls)
    if len(seen) != len(calls(func)):  # pragma: no cover - an invariant
        raise AssertionError("fuse_layout_producers: a call was lost or duplicated")
