"""Whole networks: task extraction and compilation with the history best.

A network (``tensorir.graph``: a Module or Function plus its params) is optimised and split
into fused groups by the graph passes (``tensorir.graph.passes.optimize`` / ``fuse_ops``, Relay's
SimplifyInference, FoldConstant, FoldScaleAxis, AlterOpLayout for winograd and FuseOps). Each
group becomes one ComputeDAG (its inputs as ``placeholder`` tensors, its ops built by
``tensorir.ops.compute_op``):

- :func:`extract_tasks` turns the groups that contain a reduction into SearchTasks,
  deduplicated by workload key and weighted by how often they occur (Ansor notes 10.2);
- :func:`build_network` compiles every group with its best record from the active
  :class:`~autosched.measure.records.ApplyHistoryBest` (a default schedule where there is
  none, with one warning naming those groups) into a :class:`NetworkLib` that ``GraphModule`` runs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from codegen.target import Target
from runtime.graph_executor import GraphPlan, TensorSpec
from tensorir.dag import ComputeDAG
from tensorir.graph import ir as gir
from tensorir.ops import NameScope, compute_op
from tensorir.passes.layout_rewrite import ParamLayout

from ..hardware import GPU_DEFAULTS, HardwareParams
from ..task import SearchTask


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


def _main(mod) -> gir.Function:
    if isinstance(mod, gir.Module):
        return mod["main"]
    if isinstance(mod, gir.Function):
        return mod
    raise TypeError(
        f"expected a network (tensorir.graph Module or Function, e.g. from get_network or "
        f"from_onnx), got {type(mod).__name__}"
    )


def partition(mod, params=None, target="llvm", use_winograd=None):
    """Optimise ``mod``; return the optimised function and its fused groups as ComputeDAGs,
    in execution order."""
    # TVM's auto-scheduler strategies pick the winograd NHWC conv2d for 3x3 stride-1 convs,
    # on the CPU only where 64 < CO < 512 (tensorir.ops.use_winograd); a caller may turn it off.
    winograd = True if use_winograd is None else bool(use_winograd)
    kind = "cpu" if Target(target).kind == "llvm" else "gpu"
    func = _passes().optimize(_main(mod), params or {}, use_winograd=winograd, device_kind=kind)
    groups = _passes().fuse_ops(func)
    # On the CPU, constant weights are stored in each kernel's loop order at build time
    # (TVM's layout rewrite for CPU targets); GPU kernels read them as they are.
    return func, [_group_dag(g, i, layout_rewrite=kind == "cpu") for i, g in enumerate(groups)]


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


def _group_dag(group, index: int, layout_rewrite: bool = False) -> GroupDAG:
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
            tensor_of[call] = compute_op(call.op, args, dict(call.attrs), name_scope=scope)
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
        strategy does (default): every such conv on GPUs, those with 64 < CO < 512 on the CPU.

    Returns
    -------
    tasks : list of SearchTask
        In the network's execution order, one per distinct workload key.
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
    return tasks, weights


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


# ---------------------------------------------------------------------------- build
@dataclass
class NetworkLib:
    """A compiled network: the plan the graph executor runs plus the loaded kernels.

    ``export_library(path)`` saves it; ``autosched.load_module(path)`` loads it back.
    """

    plan: GraphPlan
    modules: list
    target: Target
    tuned: dict = field(default_factory=dict)  # group name -> True if it used a record

    def export_library(self, path) -> None:
        """Save the compiled network under ``path`` (JSON) and ``path.params.npz``.

        The files hold the kernels' code and, for CPU kernels, their object code compiled for
        this host (so that :func:`load_module` only links it), the plan and the weights, with
        a sha256 checksum over all of it. Like a shared library, the result is code that runs
        when loaded: share it as you would a binary, and load only files you trust.
        """
        from dataclasses import replace

        from runtime.cpu import compile_object

        kernels = tuple(
            dict(k, binary=compile_object(k["code"]))
            if k["lang"] == "llvm" and k.get("binary") is None
            else k
            for k in self.plan.kernels
        )
        replace(self.plan, kernels=kernels).save(path)

    def get_source(self) -> str:
        return "\n\n".join(m.get_source() for m in self.modules)


def load_module(path, dev=None) -> NetworkLib:
    """Load a network saved by :meth:`NetworkLib.export_library`.

    A saved network is code, like a shared library: loading it compiles and links its
    kernels, which then run with this process's rights. Load only files you trust.

    Raises
    ------
    ValueError
        Naming the file, if it was changed after it was written (checksum), if a kernel's
        object code was not compiled from the code the file holds, or if its plan does not fit
        its kernels (a buffer smaller than a kernel parameter, an id out of range, a wrong
        argument count): such a file is refused before anything runs.
    """
    from runtime import device as make_device
    from runtime import load_module as load_kernel

    plan = GraphPlan.load(path)
    langs = {k["lang"] for k in plan.kernels}
    if not langs:
        raise ValueError(f"{path}: the saved network has no kernels; compile it again")
    target = Target({"llvm": "llvm", "cuda": "cuda", "opencl": "opencl"}[langs.pop()])
    dev = make_device(dev if dev is not None else target.device_kind)
    modules = [load_kernel(**k, device=dev) for k in plan.kernels]
    return NetworkLib(plan, modules, target)


def default_schedule(dag: ComputeDAG, target: Target, max_threads_per_block: int | None = None):
    """A schedule for a group without a tuning record: inline what can be inlined and run the
    outer loops of the remaining stages in parallel (CPU), or bind them to blocks and threads
    (GPU, see :func:`default_gpu_schedule`). Correct, not fast."""
    target = Target(target)
    if target.is_gpu:
        return default_gpu_schedule(dag, max_threads_per_block)
    state = dag.get_init_state()
    try:
        for op in dag.compute_ops:
            if dag.is_strictly_inlinable(op) and not dag.is_output(op):
                state.compute_inline(op.name)
        for stage in state.stages:
            if stage.is_placeholder or stage.compute_at != "root":
                continue
            spatial = [it for it in stage.iters if it.kind == "spatial"]
            lead = []
            for it in spatial:
                lead.append(it)
                if np.prod([i.extent for i in lead]) >= 64:
                    break
            if not lead:
                continue
            names = [it.name for it in lead]
            fused = state.fuse(stage.op.name, names) if len(lead) > 1 else lead[0]
            state.parallel(stage.op.name, fused.name)
        return state
    except Exception:  # a default that fails to apply is replaced by the plain loop nest
        return dag.get_init_state()


# How many of a group's best records build_network tries before the default schedule: enough
# to step over a few stale or corrupt lines, few enough that a log tuned for a bigger GPU
# (where every record fails the limits) does not lower thousands of states.
MAX_RECORDS_TRIED = 8

# Threads per block of the default GPU schedule when the device allows more: enough warps to
# hide latency, small enough that small layers still spread over many blocks.
DEFAULT_GPU_THREADS = 256


def pick_num_threads(n: int, max_threads: int | None = None, warp: int = 32) -> int:
    """Threads per block for ``n`` independent outputs: ``n`` itself when it fits, else a
    divisor of ``n`` in ``[limit / 4, limit]`` (a multiple of ``warp`` when there is one), else
    ``limit`` with a guarded tail; ``limit = min(max_threads, DEFAULT_GPU_THREADS)``."""
    limit = max(1, min(int(max_threads or DEFAULT_GPU_THREADS), DEFAULT_GPU_THREADS))
    if n <= limit:
        return max(1, n)
    divisors = [d for d in range(limit, max(1, limit // 4) - 1, -1) if n % d == 0]
    for d in divisors:
        if warp <= 1 or d % warp == 0:
            return d
    return divisors[0] if divisors else limit


def default_gpu_schedule(
    dag: ComputeDAG, max_threads_per_block: int | None = None, warp=32, fuse_consumer=True
):
    """The GPU schedule of a group without a tuning record.

    Every non-output stage without a reduction is inlined into its readers (TVM inlines all of
    them on GPUs); each remaining stage becomes one kernel whose spatial loops are fused, split
    by :func:`pick_num_threads` and bound to ``blockIdx.x`` / ``threadIdx.x``. Reductions run
    serially inside each thread, accumulating in a register (a ``local`` cache stage). With
    ``fuse_consumer``, a reduction read element-wise by the output (conv2d + bias + relu) is
    computed inside the output's thread instead of in a kernel of its own. Correct, not fast.
    """
    state = dag.get_init_state()
    out_ops = [op for op in dag.compute_ops if dag.is_output(op)]
    fused_into: dict[str, str] = {}  # reduction stage -> the output stage computing it
    if fuse_consumer and len(out_ops) == 1:
        out = out_ops[0]
        for op in dag.compute_ops:
            if op is out or not op.reduce_axes:
                continue
            if dag.elementwise_match(op, out) and not fused_into:
                fused_into[op.name] = out.name
    for op in dag.compute_ops:
        if dag.is_output(op) or op.reduce_axes:
            continue
        trial = state.copy()
        try:
            trial.compute_inline(op.name)
        except Exception:  # a stage that cannot be inlined stays a kernel of its own
            continue
        state = trial
    for name in fused_into:
        # Its value lives in a register of the output's thread: cache it locally and inline
        # the copy back to global memory into the output.
        state.cache_write(name, "local")
        state.compute_inline(name)
    roots = [
        st.op.name
        for st in state.stages
        if not st.is_placeholder
        and st.compute_at == "root"
        and st.op.name not in {f"{n}.local" for n in fused_into}
    ]
    for name in roots:
        stage = state[name]
        spatial = [it for it in stage.iters if it.kind == "spatial"]
        if not spatial:
            raise ValueError(
                f"default GPU schedule: stage {name} has no spatial loop to bind to "
                "threads (a full reduction to a scalar needs a tuned schedule)"
            )
        local = None
        if any(it.kind == "reduce" for it in stage.iters):
            # Accumulate in a register (a "local" cache stage), store to global memory once.
            trial = state.copy()
            try:
                trial.cache_write(name, "local")
                state, local = trial, f"{name}.local"
            except Exception:
                pass
        spatial = [it for it in state[name].iters if it.kind == "spatial"]
        n = int(np.prod([it.extent for it in spatial], dtype=np.int64))
        fused = state.fuse(name, [it.name for it in spatial]) if len(spatial) > 1 else spatial[0]
        bx, tx = state.split(name, fused, [pick_num_threads(n, max_threads_per_block, warp)])
        state.bind(name, bx, "blockIdx.x")
        state.bind(name, tx, "threadIdx.x")
        if local is not None:
            state.compute_at(local, name, tx)
        for src, dst in fused_into.items():
            if dst == name:
                state.compute_at(f"{src}.local", name, tx)
    return state


def default_gpu_state(dag: ComputeDAG, max_threads_per_block, warp, check):
    """:func:`default_gpu_schedule` with the consumer fused, or, where that state fails
    ``check(state)`` (which raises), one kernel per stage. What an untuned GPU build runs, and
    what the task scheduler measures first for a GPU task."""
    try:
        state = default_gpu_schedule(dag, max_threads_per_block, warp, fuse_consumer=True)
        check(state)
    except Exception:  # fusing the consumer did not work here: one kernel per stage
        state = default_gpu_schedule(dag, max_threads_per_block, warp, fuse_consumer=False)
        check(state)
    return state


def build_network(
    mod,
    target="llvm",
    params=None,
    use_winograd=None,
    device=None,
    hardware_params: HardwareParams | None = None,
) -> NetworkLib:
    """Compile a network with the best records of the active ``ApplyHistoryBest``.

    Every fused group is built with its best record; groups without one get
    :func:`default_schedule` (:func:`default_gpu_schedule` for ``cuda`` / ``opencl``), and one
    warning lists them. GPU kernels are verified against the device's limits
    (:func:`~autosched.kernel.gpu_limits`), tightened by ``hardware_params`` where it gives
    smaller ones (e.g. ``HardwareParams(max_threads_per_block=64)``). A record that does not
    replay (stale or corrupt) or does not fit falls back to the next best record of its group,
    then to the default schedule, with one warning naming the log lines skipped. Groups whose
    DAGs are structurally equal share one kernel (:func:`distinct_groups`).
    """
    from runtime import device as make_device
    from runtime import load_module as load_kernel

    from ..kernel import generate_source
    from ..measure.records import ApplyHistoryBest

    target = Target(target)
    dev = make_device(device if device is not None else target.device_kind)
    limits = _network_limits(dev, hardware_params) if target.is_gpu else None
    func, groups = partition(mod, params, target, use_winograd)
    ctx = ApplyHistoryBest.current()

    def default_source(gd):
        if limits is None:
            state = default_schedule(gd.dag, target)
            return generate_source(state, target, gd.name, limits, layout_rewrite=True)
        threads = min(limits["max_threads_per_block"], limits.get("max_thread_x") or 2**31)
        warp = limits.get("warp_size") or GPU_DEFAULTS["warp_size"]
        out = []
        default_gpu_state(
            gd.dag, threads, warp, lambda s: out.append(generate_source(s, target, gd.name, limits))
        )
        return out[-1]

    distinct, kernel_of_group = distinct_groups(groups)
    kernels, tuned, missing, skipped = [], {}, [], []
    for gd in distinct:
        key = gd.dag.workload_key
        candidates = _candidates(ctx, key, target) if ctx is not None else []
        src, found, failed = None, None, []
        for rec in candidates[:MAX_RECORDS_TRIED]:
            # The best record that replays and compiles here; a stale or corrupt one (or one
            # for a bigger GPU) falls through to the next best, then to the default schedule.
            try:
                state = rec[0].state.to_state(gd.dag)
                src = generate_source(state, target, gd.name, limits, layout_rewrite=True)
            except Exception as e:  # records are outside input: any failure skips the record
                reason = str(e).strip().splitlines()[-1].strip() if str(e).strip() else repr(e)
                failed.append(f"{getattr(rec[0].state, 'origin', '') or 'a record'} ({reason})")
                continue
            found = rec
            break
        if failed:
            more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
            skipped.append(f"{gd.name}: {failed[0]}{more}")
        if ctx is not None and (found or gd.has_reduction):
            # Groups without a reduction are never tuned (as in TVM): not reported missing.
            (ctx.hit_keys if found else ctx.missed_keys).add(key)
        if src is None:
            src = default_source(gd)
        if not found and gd.has_reduction:
            missing.append(gd.name)
        kernels.append(src.as_dict())
        tuned[gd.name] = bool(found)
    modules = _load_kernels(kernels, dev, load_kernel)
    if skipped:
        warnings.warn(
            f"{len(skipped)} kernel(s) skipped records that do not replay or do not fit {dev} "
            "(the next best record or the default schedule is used): " + "; ".join(skipped),
            stacklevel=2,
        )
    if missing:
        warnings.warn(
            f"{len(missing)} of {len(kernels)} kernels have no tuning record and use a default "
            f"schedule: {', '.join(sorted(set(missing)))}",
            stacklevel=2,
        )
    plan = _plan(func, groups, kernels, kernel_of_group)
    return NetworkLib(plan, modules, target, tuned)


def _candidates(ctx, key: str, target: Target) -> list:
    """The error-free records for ``key`` on ``target``, best first; failing an exact match of
    the target string, those of the same target kind (``cuda -arch=sm_90`` for ``cuda``)."""
    found = ctx.candidates(key, target)
    if found:
        return found
    same_kind = []
    for rec_target in ctx.targets_of(key):
        try:
            if Target(rec_target).kind == target.kind:
                same_kind.extend(ctx.candidates(key, rec_target))
        except ValueError:
            continue
    return sorted(same_kind, key=lambda v: v[1].mean_cost)


def _network_limits(dev, hardware_params: HardwareParams | None) -> dict:
    """The device's GPU limits, each lowered to the one of ``hardware_params`` if smaller."""
    from ..kernel import gpu_limits

    limits = dict(gpu_limits(dev))
    if hardware_params is not None:
        for k, v in hardware_params.as_limits().items():
            if v is not None and k != "warp_size":
                limits[k] = min(v, limits[k]) if limits.get(k) is not None else v
            elif v is not None:
                limits[k] = v
    return limits


def _load_kernels(kernels: list, dev, load_kernel) -> list:
    """Compile the kernels on ``dev``; CUDA's nvcc runs in a few threads at once."""
    if dev.kind != "cuda" or len(kernels) < 2:
        return [load_kernel(**k, device=dev) for k in kernels]
    from concurrent.futures import ThreadPoolExecutor

    # Each worker thread gets the CUDA context for its compile (runtime.cuda._current); the
    # modules are kept and later dropped by the main thread, as pycuda requires.
    with ThreadPoolExecutor(max_workers=min(8, len(kernels))) as pool:
        return list(pool.map(lambda k: load_kernel(**k, device=dev), kernels))


def _plan(func, groups, kernels, kernel_of_group) -> GraphPlan:
    """Storage plan: constants and inputs get their own buffers; intermediates reuse a freed
    buffer of the same dtype that is large enough (greedy, in execution order).

    ``kernel_of_group[i]`` is the index in ``kernels`` of the kernel group ``i`` runs."""
    storages: list[tuple[str, int]] = []
    constants: dict[int, np.ndarray] = {}
    sid_of: dict = {}
    inputs: dict[str, TensorSpec] = {}

    def new_storage(dtype, size):
        storages.append((dtype, int(size)))
        return len(storages) - 1

    for v in func.params:
        sid_of[v] = new_storage(v.dtype, np.prod(v.shape, dtype=np.int64))
        inputs[v.name] = TensorSpec(sid_of[v], tuple(v.shape), v.dtype)
    outputs = [o for o in func.outputs]
    last_use: dict = {}
    for i, gd in enumerate(groups):
        for inp in gd.inputs:
            last_use[inp] = i
    for o in outputs:
        last_use[o] = len(groups)
    free: list[int] = []
    calls, names = [], []
    for i, gd in enumerate(groups):
        arg_sids = []
        kernel = kernels[kernel_of_group[i]]
        layouts = {lay[0]: lay for lay in kernel["layouts"]}
        for t, inp in zip(gd.dag.input_tensors, gd.inputs, strict=True):
            # A weight the kernel reads in its loop order is stored transformed, once.
            layout = layouts.get(t.name) if isinstance(inp, gir.Constant) else None
            key = inp if layout is None else (inp, layout)
            if key not in sid_of:
                if isinstance(inp, gir.Constant):
                    value = np.ascontiguousarray(inp.value)
                    if layout is not None:
                        value = ParamLayout.from_tuple(layout).transform(value)
                    sid = new_storage(str(value.dtype), value.size)
                    constants[sid] = value
                    sid_of[key] = sid
                else:
                    raise ValueError(f"fused group {gd.name} reads {inp!r} before it is computed")
            arg_sids.append(sid_of[key])
        out = gd.group.output
        size = int(np.prod(out.shape, dtype=np.int64))
        pick = [s for s in free if storages[s][0] == out.dtype and storages[s][1] >= size]
        if pick:
            sid = min(pick, key=lambda s: storages[s][1])
            free.remove(sid)
        else:
            sid = new_storage(out.dtype, size)
        sid_of[out] = sid
        calls.append((kernel_of_group[i], tuple(arg_sids + [sid])))
        names.append(gd.name)
        # Buffers whose last reader was this group can be reused from the next group on.
        for inp in set(gd.inputs):
            if isinstance(inp, gir.Call) and last_use.get(inp) == i:
                free.append(sid_of[inp])
    out_specs = []
    for o in outputs:
        if o not in sid_of:
            raise ValueError(f"network output {o!r} is not computed by any kernel")
        out_specs.append(TensorSpec(sid_of[o], tuple(o.shape), o.dtype))
    return GraphPlan(
        kernels=tuple(kernels),
        storages=tuple(storages),
        inputs=inputs,
        outputs=tuple(out_specs),
        constants=constants,
        calls=tuple(calls),
        names=tuple(names),
    )
