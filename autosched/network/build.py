"""Network compilation: every fused group with the history best, then storage planning.

:func:`build_network` compiles every group of :func:`autosched.network.partition.partition`
with its best record from the active :class:`~autosched.measure.dispatch.ApplyHistoryBest` (a
default schedule of :mod:`autosched.network.default_schedules` where there is none, with one
warning naming those groups) into a :class:`NetworkLib` that ``GraphModule`` runs.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from codegen.target import Target, backend_of_lang, cross_cpu, is_cross_target, target_triple
from runtime.graph_executor import BoundLibrary, GraphPlan, TensorSpec
from tensorir.dtype import round_to_tf32
from tensorir.graph import ir as gir
from tensorir.passes.layout_rewrite import ParamLayout

from ..hardware import GPU_DEFAULTS, HardwareParams
from .default_schedules import default_gpu_state, default_schedule
from .partition import distinct_groups, graph_fingerprint, partition
from .tf32_weights import tf32_rounded_weights

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordSource:
    """Records of a layer above this one that a network build consults for a fused group the
    auto-scheduler's records do not cover: AutoTVM's ``apply_history_best``, which
    :mod:`autosched.autotvm.network` registers when ``autosched.autotvm`` is imported (nobody
    can have entered its context before), so that this layer never imports AutoTVM.

    Attributes
    ----------
    name : str
        For messages ("its AutoTVM record (...)").
    group_state : callable
        ``group_state(group, dag, target)`` -> ``(State, found)`` of the group under the
        source's active records, or None; may raise (the build then falls back).
    current : callable
        ``current()`` -> the source's active context or None; a context whose ``missing_logs``
        is set and that holds nothing has warned about its missing log already.
    """

    name: str
    group_state: Callable
    current: Callable


RECORD_SOURCES: dict[str, RecordSource] = {}


def register_record_source(source: RecordSource) -> None:
    """Consult ``source`` in every network build from now on (once per name)."""
    RECORD_SOURCES[source.name] = source


def _other_record_state(group, dag, target):
    """The first ``(State, found)`` a registered :class:`RecordSource` gives, or None."""
    for source in RECORD_SOURCES.values():
        found = source.group_state(group, dag, target)
        if found is not None:
            return found
    return None


@dataclass
class NetworkLib:
    """A compiled network: the plan the graph executor runs plus the loaded kernels.

    ``export_library(path)`` saves it; ``autosched.load_module(path)`` loads it back.
    """

    plan: GraphPlan
    modules: list
    target: Target
    tuned: dict = field(default_factory=dict)  # group name -> True if it used a record

    def __getitem__(self, name: str):
        """``lib["default"]``: TVM's graph executor factory; ``lib["default"](dev)`` binds the
        network to ``dev`` for ``GraphModule(lib["default"](dev))``."""
        if name != "default":
            raise KeyError(
                f"a compiled network has one function, 'default' (lib['default'](dev)); "
                f"got {name!r}"
            )
        return lambda dev=None: BoundLibrary(self, dev)

    @property
    def cross_triple(self) -> str | None:
        """The target triple when the network was compiled for another machine (its kernels
        are then not loaded here: export it as a shared library and run it there)."""
        return target_triple(self.target) if is_cross_target(self.target) else None

    def export_library(self, path, graph_name=None, fcompile=None) -> None:
        """Save the compiled network under ``path`` and ``path.params.npz`` (the weights).

        A ``path`` ending in ``.so`` (or a given ``fcompile``) writes a real shared library
        for the target's triple (its host's ``-mtriple``, else this machine's), linked by
        ``cc -shared`` / a cross linker or by ``fcompile(output, objects, options)``
        (:mod:`runtime.shared_library`): CPU kernels as machine code, OpenCL kernels as their
        source (data the device's driver compiles when the library is loaded). As in TVM,
        ``fcompile`` may be the second positional argument:
        ``lib.export_library("deploy_lib.so", ndk.create_shared)``. Any other path writes the
        JSON form, which CUDA networks use.

        The files hold the kernels' code and, for CPU kernels, their object code compiled for
        this host (so that :func:`load_module` only links it), the plan and the weights, with
        a sha256 checksum over all of it. Like a shared library, the result is code that runs
        when loaded: share it as you would a binary, and load only files you trust. It also
        records the state each kernel was built from (``plan.states``), from which an RPC
        server rebuilds the kernels instead of running the file's code
        (``remote.load_module(name)``; :mod:`autosched.rpc.rebuild`).

        The plan's ``graph`` says which graph it was compiled from: the
        :func:`~autosched.network.partition.graph_fingerprint` and ``graph_name`` (e.g.
        ``"resnet-18 NHWC B1"`` or an ONNX file) when given.
        """
        from runtime.cpu import compile_object
        from runtime.shared_library import export_shared_library, is_shared_library_path

        if callable(graph_name) and fcompile is None:  # TVM's export_library(path, fcompile)
            graph_name, fcompile = None, graph_name
        graph = dict(self.plan.graph, **({"name": graph_name} if graph_name else {}))
        cross = self.cross_triple
        if fcompile is not None or is_shared_library_path(path):
            meta = dict(replace(self.plan, graph=graph).meta(), kind="network")
            # An OpenCL network's library is linked for its host's triple (the board's CPU).
            triple = cross or target_triple(self.target)
            cpu, features = cross_cpu(self.target) if triple else (None, "")
            export_shared_library(path, self.plan.kernels, meta, self.plan.constants,
                                  triple=triple, fcompile=fcompile, cpu=cpu,
                                  features=features)  # fmt: skip
            return
        if cross:
            raise ValueError(
                f"export_library({str(path)!r}): a network compiled for {cross} exports as a "
                "shared library; give a path ending in .so (and fcompile= to link it)"
            )
        kernels = tuple(
            dict(k, binary=compile_object(k["code"]))
            if backend_of_lang(k["lang"]).on_host and k.get("binary") is None
            else k
            for k in self.plan.kernels
        )
        replace(self.plan, kernels=kernels, graph=graph).save(path)

    def get_source(self) -> str:
        """Every kernel's code (a ``str``; a notebook shows it highlighted)."""
        from runtime.display import SourceCode

        modules = self.modules
        lang = modules[0].lang if modules else "text"
        return SourceCode("\n\n".join(m.get_source() for m in modules), lang)


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
    from runtime.shared_library import is_elf

    if is_elf(path):
        return _load_shared_library(path, dev)
    plan = GraphPlan.load(path)
    langs = {k["lang"] for k in plan.kernels}
    if not langs:
        raise ValueError(f"{path}: the saved network has no kernels; compile it again")
    target = Target(backend_of_lang(langs.pop()).kind)
    dev = make_device(dev if dev is not None else target.device_kind)
    modules = [load_kernel(**k, device=dev) for k in plan.kernels]
    return NetworkLib(plan, modules, target)


def _load_shared_library(path, dev=None):
    """A network (NetworkLib) or one kernel (runtime Module) from a library that
    ``export_library("x.so")`` wrote."""
    from runtime.module import load_kernel_library
    from runtime.shared_library import SharedLibrary

    lib = SharedLibrary(path)
    if lib.meta.get("kind") == "kernel":
        return load_kernel_library(path, dev)
    plan = GraphPlan.from_meta(
        {**lib.meta, "kernels": [lib.artifact(i) for i in range(len(lib.meta["kernels"]))]},
        lib.constants,
        str(path),
    )
    return network_from_plan(plan, path, dev, lib.compiled if lib.handle is not None else None)


def network_from_plan(plan: GraphPlan, path, dev=None, compiled=None) -> NetworkLib:
    """The network of ``plan`` (checked) on ``dev`` (default: its kernels' device): CPU
    kernels with ``compiled(i)``'s entry points (a loaded library's) where given, else every
    kernel compiled from its code (linked from its ``binary`` where it has one: object code
    this process compiled). ValueError naming ``path`` for a device the kernels do not run on.
    """
    from runtime import device as make_device
    from runtime import load_module as load_kernel
    from runtime.module import Module

    langs = {k["lang"] for k in plan.kernels} or {"llvm"}
    if len(langs) > 1:
        raise ValueError(f"{path}: kernels of several languages {sorted(langs)} in one network")
    target = Target(langs.pop())
    dev = make_device(dev if dev is not None else target.device_kind)
    if dev.kind != target.device_kind:
        raise ValueError(
            f"{path}: this network's {target.kind} kernels run on the {target.device_kind} "
            f"device, not on {dev}"
        )
    if not target.backend.on_host or compiled is None:  # OpenCL source: dev's driver compiles it
        return NetworkLib(plan, [load_kernel(**k, device=dev) for k in plan.kernels], target)
    modules = [
        Module(**kernel, dev=dev, compiled=compiled(i)) for i, kernel in enumerate(plan.kernels)
    ]
    return NetworkLib(plan, modules, target)


# How many of a group's best records build_network tries before the default schedule: enough
# to step over a few stale or corrupt lines, few enough that a log tuned for a bigger GPU
# (where every record fails the limits) does not lower thousands of states.
MAX_RECORDS_TRIED = 8


def build_network(
    mod,
    target="llvm",
    params=None,
    use_winograd=None,
    device=None,
    hardware_params: HardwareParams | None = None,
) -> NetworkLib:
    """Compile a network with the best records of the active ``ApplyHistoryBest``.

    Every fused group is built with its best record (or, without one, with the AutoTVM
    record of its anchor op under ``autotvm.apply_history_best``); groups without one get
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
    from ..measure.dispatch import ApplyHistoryBest

    target = Target(target)
    dev = make_device(device if device is not None else target.device_kind)
    limits = _network_limits(dev, hardware_params) if target.is_gpu else None
    func, groups = partition(mod, params, target, use_winograd)
    ctx = ApplyHistoryBest.current()

    def default_source(gd):
        """``(state, source, layout_rewrite)`` of the default schedule of ``gd``."""
        if limits is None:
            state = default_schedule(gd.dag, target)
            return state, generate_source(state, target, gd.name, limits, True), True
        threads = min(limits["max_threads_per_block"], limits.get("max_thread_x") or 2**31)
        warp = limits.get("warp_size") or GPU_DEFAULTS["warp_size"]
        out = []
        state = default_gpu_state(
            gd.dag,
            threads,
            warp,
            lambda s: out.append(generate_source(s, target, gd.name, limits)),
            task=_default_task(gd, target, hardware_params),
        )
        return state, out[-1], False

    distinct, kernel_of_group = distinct_groups(groups)
    kernels, states, tuned, missing, skipped, rounded = [], [], {}, [], [], []
    for gd in distinct:
        key = gd.dag.workload_key
        candidates = _candidates(ctx, key, target) if ctx is not None else []
        src, found, failed, layout_rewrite = None, None, [], True
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
        if src is None and gd.has_reduction:
            # No auto-scheduler record: an AutoTVM record of the group's anchor op, if any.
            try:
                tuned_state = _other_record_state(gd.group, gd.dag, target)
                if tuned_state is not None:
                    src = generate_source(
                        tuned_state[0], target, gd.name, limits, layout_rewrite=True
                    )
                    state, found = tuned_state[0], tuned_state
            except Exception as e:  # records are outside input: any failure skips the record
                reason = str(e).strip().splitlines()[-1].strip() if str(e).strip() else repr(e)
                failed.append(f"its AutoTVM record ({reason})")
        if failed:
            more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
            skipped.append(f"{gd.name}: {failed[0]}{more}")
        if ctx is not None and (found or gd.has_reduction):
            # Groups without a reduction are never tuned (as in TVM): not reported missing.
            (ctx.hit_keys if found else ctx.missed_keys).add(key)
        if src is None:
            state, src, layout_rewrite = default_source(gd)
        if not found and gd.has_reduction:
            missing.append(gd.name)
        kernels.append(src.as_dict())
        states.append(_kernel_state(gd, state, target, layout_rewrite))
        rounded.append(tf32_rounded_weights(gd.dag, gd.inputs, state, target))
        tuned[gd.name] = bool(found)
    # Kernels for another machine's triple are not loaded here (export_library writes them).
    modules = [] if is_cross_target(target) else _load_kernels(kernels, dev, load_kernel)
    if skipped:
        warnings.warn(
            f"{len(skipped)} kernel(s) skipped records that do not replay or do not fit {dev} "
            "(the next best record or the default schedule is used): " + "; ".join(skipped),
            stacklevel=2,
        )
    if missing and not _missing_log_warned(ctx):
        warnings.warn(
            f"{len(missing)} of {len(kernels)} kernels have no tuning record and use a default "
            f"schedule: {', '.join(sorted(set(missing)))}",
            stacklevel=2,
        )
    plan = _plan(func, groups, kernels, kernel_of_group, rounded)
    graph = {"fingerprint": graph_fingerprint(func, groups)}
    plan = replace(plan, graph=graph, states=tuple(states))
    return NetworkLib(plan, modules, target, tuned)


def _kernel_state(gd, state, target: Target, layout_rewrite: bool) -> dict | None:
    """What kernel ``gd.name`` was built from, as plain data (``GraphPlan.states``): the state
    as a measure request carries it (:func:`~autosched.measure.data.state_data`), its name and
    ``layout_rewrite``, so that an RPC server can rebuild it with its own compiler and compare
    (:mod:`autosched.rpc.rebuild`). None where the DAG has no plain form."""
    from ..measure.data import state_data

    try:
        data = state_data(gd.dag, state, target)
    except Exception as e:  # noqa: BLE001 - e.g. an op attribute that is not plain data
        # Recording is for remote loading only: it never fails a build.
        log.debug("kernel %s: no plain form of its state (%s)", gd.name, e)
        return None
    return {**data, "name": gd.name, "layout_rewrite": bool(layout_rewrite)}


def _missing_log_warned(ctx) -> bool:
    """True when the active ApplyHistoryBest (the auto-scheduler's ``ctx`` or AutoTVM's)
    holds nothing because its log does not exist: its one warning named the log already."""
    for c in (ctx, *(source.current() for source in RECORD_SOURCES.values())):
        held = getattr(c, "best", None) or getattr(c, "best_by_target", None)
        if getattr(c, "missing_logs", None) and not held:
            return True
    return False


def _candidates(ctx, key: str, target: Target) -> list:
    """The error-free records for ``key`` on ``target``, best first; failing an exact match of
    the target string, those of the same target kind (``cuda -arch=sm_90`` for ``cuda``), except
    records tuned with ``-allow_tf32=1`` for a target without it: they may round float32
    operands to TF32, which the user did not allow (float32 records serve a TF32 target)."""
    found = ctx.candidates(key, target)
    if found:
        return found
    same_kind = []
    for rec_target in ctx.targets_of(key):
        try:
            rec = Target(rec_target)
        except ValueError:
            continue
        if rec.kind == target.kind and (target.allow_tf32 or not rec.allow_tf32):
            same_kind.extend(ctx.candidates(key, rec_target))
    return sorted(same_kind, key=lambda v: v[1].mean_cost)


def _default_task(gd, target: Target, hardware_params: HardwareParams | None):
    """A SearchTask of ``gd`` for its default schedule (the tensor-core default needs the
    target and the limits), or None where one cannot be made (the scalar default then)."""
    from ..task import SearchTask

    try:
        return SearchTask(gd.dag, target=target, hardware_params=hardware_params, desc=gd.name)
    except Exception:  # noqa: BLE001 - no task: the scalar default, as before
        log.debug("no task for the default schedule of %s", gd.name, exc_info=True)
        return None


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


def _plan(func, groups, kernels, kernel_of_group, tf32_weights=None) -> GraphPlan:
    """Storage plan: constants and inputs get their own buffers; intermediates reuse a freed
    buffer of the same dtype that is large enough (greedy, in execution order).

    ``kernel_of_group[i]`` is the index in ``kernels`` of the kernel group ``i`` runs;
    ``tf32_weights[k]`` names the constant inputs kernel ``k`` reads rounded to TF32
    (:func:`~autosched.network.tf32_weights.tf32_rounded_weights`)."""
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
        rounds = tf32_weights[kernel_of_group[i]] if tf32_weights else frozenset()
        for t, inp in zip(gd.dag.input_tensors, gd.inputs, strict=True):
            # A weight the kernel reads in its loop order is stored transformed, once; one it
            # reads as a TF32 tensor-core operand, rounded (a kernel of exact float32 that
            # reads the same constant gets its own copy).
            constant = isinstance(inp, gir.Constant)
            layout = layouts.get(t.name) if constant else None
            tf32 = constant and t.name in rounds
            key = (inp, layout, tf32) if constant else inp
            if key not in sid_of:
                if constant:
                    value = np.ascontiguousarray(inp.value)
                    if tf32:
                        value = round_to_tf32(value)
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
