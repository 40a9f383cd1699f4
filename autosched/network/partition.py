"""A network split into tasks.

A network (``tensorir.graph``: a Module or Function plus its params) is optimised and split
into fused groups by the graph passes (``tensorir.graph.passes.optimize`` / ``fuse_ops``, Relay's
SimplifyInference, FoldConstant, FoldScaleAxis, AlterOpLayout for winograd and FuseOps). Each
group becomes one ComputeDAG (its inputs as ``placeholder`` tensors, its ops built by
``tensorir.ops.compute_op``); :func:`extract_tasks` turns the groups that contain a reduction
into SearchTasks, deduplicated by workload key and weighted by how often they occur (Ansor
notes 10.2).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from codegen.cuda_arch import wgmma_available
from codegen.target import Target
from runtime.environment import env
from tensorir.dag import ComputeDAG
from tensorir.graph import ir as gir
from tensorir.ops import NameScope, compute_op, op_attrs
from tensorir.ops.conv2d_gemm import implicit_gemm_conv2d_op

from ..display.tasks import TaskList
from ..hardware import HardwareParams, known_cuda_arch
from ..task import SearchTask

IMPLICIT_GEMM = True
"""On CUDA, build 16-bit conv2d (and float32 conv2d where the target allows TF32) as an
implicit GEMM (``tensorir.ops.conv2d_gemm``), which the tensor-core sketch tiles onto wmma
fragments; False keeps the direct conv2d (scalar sketches)."""


def tensor_core_convs(target) -> bool:
    """Whether ``target``'s conv2d groups are built for tensor cores (:data:`IMPLICIT_GEMM`):
    CUDA, unless its ``-arch`` is older than sm_70 (no wmma). The dtype is checked per conv
    (``use_implicit_gemm`` with :func:`implicit_gemm_dtypes`)."""
    target = Target(target)
    if not IMPLICIT_GEMM or target.kind != "cuda":
        return False
    from codegen.cuda import wmma_available  # the CUDA backend: only needed for cuda targets

    return wmma_available(target.get("arch"), "float16") is not False


def implicit_gemm_dtypes(target) -> tuple[str, ...]:
    """The operand dtypes whose conv2d ``target`` builds as an implicit GEMM: none unless
    :func:`tensor_core_convs`; else those the tensor-core sketch tiles for it
    (``tensor_core_dtypes``): float16 and bfloat16, and float32 (run as TF32) with
    ``-allow_tf32=1`` on sm_80+ or no ``-arch``."""
    if not tensor_core_convs(target):
        return ()
    from ..search.sketch_rules_tensor_core import tensor_core_dtypes

    return tensor_core_dtypes(Target(target))


def _passes():
    # Imported here: the passes package is large and only whole-network work needs it.
    from tensorir.graph import passes

    return passes


@dataclass(frozen=True, eq=False)
class GroupDAG:
    """One fused group as a ComputeDAG; ``inputs`` are the graph exprs its placeholders stand
    for, in the DAG's placeholder order."""

    group: object
    dag: ComputeDAG
    inputs: tuple
    name: str

    @property
    def has_reduction(self) -> bool:
        return any(op.reduce_axes for op in self.dag.compute_ops)


def partition(mod, params=None, target="llvm", use_winograd=None):
    """Optimise ``mod``; return the optimised function and its fused groups as ComputeDAGs,
    in execution order."""
    # TVM's auto-scheduler strategies pick the winograd NHWC conv2d for 3x3 stride-1 convs,
    # on the CPU only where 64 < CO < 512 (tensorir.ops.use_winograd); a caller may turn it off.
    # Where float32 convs run on TF32 tensor cores as implicit GEMMs, winograd (scalar
    # float32 sketches) would take their 3x3 ones first: off unless the caller asks for it.
    igemm = implicit_gemm_dtypes(target)
    # sm_90: conv GEMM rows padded to whole 64-row warpgroup tiles where that wastes little.
    warpgroup = bool(igemm) and bool(wgmma_available(known_cuda_arch(target)))
    winograd = "float32" not in igemm if use_winograd is None else bool(use_winograd)
    on_host = Target(target).backend.on_host
    kind = "cpu" if on_host else "gpu"
    network = gir.main_function(mod, "partition")
    func = _passes().optimize(network, params or {}, use_winograd=winograd, device_kind=kind)
    if igemm:
        # Constant weights of tensor-core convs stored K-major (OHWI): the warpgroup sketch
        # reads both GEMM operands so (tensorir/graph/passes/implicit_gemm_layout.py).
        func = _passes().alter_op_layout_implicit_gemm(func, igemm)
    if not on_host:
        # Fewer, larger kernels for transformers (tensorir/graph/passes/transformer.py): one
        # dense for the query/key/value projections, the head split/merge read inside the
        # matmuls, and a few-row long-K dense (BERT's FFN output) as split-K slices: its
        # M x N output tiles alone leave most of the GPU idle (benchmarks/RESULTS.md).
        func = _passes().combine_parallel_dense(func)
        if env("AUTOSCHED_SPLIT_K_DENSE"):
            func = _passes().split_k_dense(func)
    groups = _passes().fuse_ops(func)
    if not on_host:
        # Mixed precision's cast after a softmax / layer norm runs in its kernel (the norm's
        # readers, a dense and the residual add, all take its 16-bit copy: to_mixed_precision).
        groups = _passes().fuse_normalization_epilogues(func, groups)
        # The injective group before a layer norm (split-K's sum + bias + residual) is
        # recomputed as the norm reads its rows: one kernel and one round trip fewer.
        groups = _passes().fuse_normalization_prologues(func, groups)
        # Head split / merge layout ops run in the matmul's shared-memory copy.
        groups = _passes().fuse_layout_producers(func, groups)
    # On the CPU, constant weights are stored in each kernel's loop order at build time
    # (TVM's layout rewrite for CPU targets); GPU kernels read them as they are.
    return func, [_group_dag(g, i, on_host, igemm, warpgroup) for i, g in enumerate(groups)]


def _layout_free(dag: ComputeDAG, inputs) -> tuple[str, ...]:
    """Placeholders of ``dag`` that are constants read only by reductions (conv / dense /
    winograd weights): those the build may store in another layout."""
    names = []
    for t, inp in zip(dag.input_tensors, inputs, strict=True):
        if not isinstance(inp, gir.Constant):
            continue
        readers = dag.consumers(t)
        if readers and all(op.reduce_axes for op in readers):
            names.append(t.name)
    return tuple(names)


def _call_compute(
    call, args, scope: NameScope, implicit_gemm: tuple[str, ...], warpgroup: bool = False
):
    """The te compute of one graph call: the op table's, except a conv2d that runs as an
    implicit GEMM on tensor cores (the op strategy: which compute a target gets), for
    operands of the ``implicit_gemm`` dtypes (rows padded for sm_90's ``warpgroup`` tiles)."""
    if implicit_gemm and call.op == "nn.conv2d":
        with scope:
            attrs = op_attrs(call.op, dict(call.attrs))
            # Split-K for GEMMs of few output tiles (conv2d_gemm.split_k_slices), unless off.
            split_k = None if env("AUTOSCHED_CONV_SPLIT_K") else 1
            out = implicit_gemm_conv2d_op(*args, attrs, implicit_gemm, split_k, warpgroup)
        if out is not None:
            return out
    return compute_op(call.op, args, dict(call.attrs), name_scope=scope)


def _group_dag(
    group,
    index: int,
    layout_rewrite: bool = False,
    implicit_gemm: tuple[str, ...] = (),
    warpgroup: bool = False,
) -> GroupDAG:
    scope = NameScope()
    tensor_of = {}
    placeholders = []
    for inp in group.inputs:
        t = scope.placeholder(tuple(inp.shape), inp.dtype)
        tensor_of[inp] = t
        placeholders.append(t)
    for call in group.calls:
        args = [tensor_of[a] for a in call.args]
        try:
            tensor_of[call] = _call_compute(call, args, scope, implicit_gemm, warpgroup)
        except Exception as e:
            raise type(e)(
                f"building the te compute of {call.op} in fused group {index}: {e}"
            ) from e  # noqa: E501
    out = tensor_of[group.output]
    short = {"nn.contrib_conv2d_winograd_without_weight_transform": "conv2d_winograd"}
    name = "fused_" + "_".join(
        short.get(c.op, c.op.replace("nn.", "").replace(".", "_")) for c in group.calls
    )
    dag = ComputeDAG([*placeholders, out])
    if layout_rewrite:
        dag = ComputeDAG([*placeholders, out], _layout_free(dag, group.inputs))
    return GroupDAG(group, dag, tuple(group.inputs), name)


def extract_tasks(
    mod,
    params=None,
    target="llvm",
    hardware_params: HardwareParams | None = None,
    include_simple_tasks: bool = False,
    use_winograd: bool | None = None,
):
    """Search tasks of a network and their weights (occurrence counts).

    Parameters
    ----------
    mod : tensorir.graph Module or Function
        The network, e.g. from ``networks.get_network`` or ``from_onnx``.
    params : dict of str to ndarray
        Its weights; they are bound as constants before the passes run.
    target : str or Target
    hardware_params : HardwareParams, optional
        Given to every task (a remote device's limits); read from the host by default.
    include_simple_tasks : bool
        Also return groups without a reduction (elementwise / layout ops).
    use_winograd : bool, optional
        Use the winograd conv2d for 3x3 stride-1 NHWC convolutions where TVM's auto-scheduler
        strategy does (default): every such conv on GPUs, those with 64 < CO < 512 on the CPU;
        by default none on a target whose float32 convs run on TF32 tensor cores
        (``cuda -allow_tf32=1``, :func:`implicit_gemm_dtypes`).

    Returns
    -------
    tasks : TaskList of SearchTask
        In the network's execution order, one per distinct workload key (a ``list``; a
        notebook shows it as the task table with each compute DAG folded).
    task_weights : list of int
        How many times each task's subgraph occurs in the network.
    """
    target = Target(target)
    _, groups = partition(mod, params, target, use_winograd)
    groups = [gd for gd in groups if include_simple_tasks or gd.has_reduction]
    distinct, index_of = distinct_groups(groups)
    keys = [gd.dag.workload_key for gd in distinct]
    for k, key in enumerate(keys):
        if key in keys[:k]:  # records name tasks by key: two computations cannot share one
            other = distinct[keys.index(key)]
            raise ValueError(
                f"fused groups {other.name} and {distinct[k].name} compute different things but "
                f"have the same workload key {key}; report this (a hash collision)"
            )
    tasks = [
        SearchTask(
            compute_dag=gd.dag,
            workload_key=gd.dag.workload_key,
            target=target,
            hardware_params=hardware_params,
            desc=gd.name,
        )
        for gd in distinct
    ]
    weights = [index_of.count(k) for k in range(len(distinct))]
    return TaskList(tasks, weights), weights


def distinct_groups(groups) -> tuple[list[GroupDAG], list[int]]:
    """The structurally distinct groups (first occurrences, in order) and, for every group,
    the index of the distinct one it equals.

    Equal workload keys only propose a match: a group shares with an earlier one only when
    their DAGs are structurally equal (:meth:`ComputeDAG.structurally_equal`), so no two
    different computations ever share a task or a kernel.
    """
    distinct: list[GroupDAG] = []
    by_key: dict[str, list[int]] = {}
    index_of: list[int] = []
    for gd in groups:
        candidates = by_key.setdefault(gd.dag.workload_key, [])
        match = next((k for k in candidates if distinct[k].dag.structurally_equal(gd.dag)), None)
        if match is None:
            match = len(distinct)
            distinct.append(gd)
            candidates.append(match)
        index_of.append(match)
    return distinct, index_of


def graph_fingerprint(func, groups) -> str:
    """A short digest of an optimised graph: its inputs (names, shapes, dtypes), its outputs'
    shapes and dtypes, and its fused groups' workload keys in execution order. A compiled
    network records it, so it can refuse to run as another graph."""
    parts = [
        [[v.name, list(v.shape), v.dtype] for v in func.params],
        [[list(o.shape), o.dtype] for o in func.outputs],
        [gd.dag.workload_key for gd in groups],
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def network_fingerprint(mod, params=None, target="llvm", use_winograd=None) -> str:
    """:func:`graph_fingerprint` of ``mod`` as :func:`build_network` would compile it."""
    return graph_fingerprint(*partition(mod, params, target, use_winograd))
