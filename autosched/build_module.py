"""``build``: the front door. A schedule -> :mod:`autosched.kernel` -> a callable module on a
device; a network -> :func:`autosched.network.build.build_network`."""

from __future__ import annotations

import contextlib

from codegen.target import Target, check_host_cpu, cross_cpu, is_cross_target, target_triple
from tensorir.dag import ComputeDAG

from .kernel import generate_source, gpu_limits
from .measure.data import state_data
from .network.build import build_network


def build(
    sch,
    target="llvm",
    name: str = "main",
    device=None,
    params=None,
    max_kernel_size: int | None = None,
    target_host=None,
):
    """Compile a schedule into a callable module, or a whole network into a graph library.

    Parameters
    ----------
    sch : State or ComputeDAG
        A loop state (``dag.get_init_state()`` plus steps) or a DAG (built unscheduled).
    target : str or Target
        ``"llvm"``, ``"cuda"`` or ``"opencl"`` (with options, e.g. ``"opencl -device=mali"``).
    name : str
        Name of the generated function / kernels.
    device : runtime Device, optional
        Where to load the code; defaults to device 0 of the target's kind.
    params : dict of str to ndarray, optional
        A network's weights (only when ``sch`` is a network).
    max_kernel_size : int, optional
        The most statements plus expression nodes the kernel may emit after unrolling
        (default ``MAX_KERNEL_SIZE``, or ``$AUTOSCHED_MAX_KERNEL_SIZE``, which network builds
        read too); a larger one raises KernelSizeError instead of compiling for minutes.
    target_host : str or Target, optional
        TVM's older spelling of ``Target(target, host=target_host)`` (the seed tutorials use
        it); its ``-mtriple`` is the CPU code's triple when the target has none.

    Returns
    -------
    Module
        Call it with the DAG's tensors in order (inputs, then outputs) as numpy arrays or device
        arrays; ``time_evaluator(number, repeat, min_repeat_ms)`` times it,
        ``get_source()`` shows the generated code and ``export_library("k.so")`` writes it as
        a shared library. For an llvm target of another machine (``-mtriple=...``, or a host
        with one) a ``runtime.shared_library.CrossCompiledModule``: it does not run here;
        ``export_library`` writes it for that machine.
    NetworkLib
        For a network (a ``tensorir.graph`` Module or Function): every fused subgraph compiled
        with its best record of the active ``ApplyHistoryBest``; run it with ``GraphModule``.
    """
    from tensorir.graph import ir as graph_ir

    if target_host is not None:
        target = Target(target, host=target_host)
    check_host_cpu(target)
    if isinstance(sch, graph_ir.Module | graph_ir.Function):
        return build_network(sch, target, params, device=device)
    from runtime import device as make_device
    from runtime import load_module

    target = Target(target)
    if not isinstance(sch, ComputeDAG) and not hasattr(sch, "stages"):
        raise TypeError(
            f"build takes a State (dag.get_init_state() + steps) or a ComputeDAG, got "
            f"{type(sch).__name__}"
        )
    dag = sch if isinstance(sch, ComputeDAG) else sch.dag
    shapes = {t.name: tuple(t.shape) for t in dag.tensors}
    outputs = [t.name for t in dag.output_tensors]
    if is_cross_target(target):  # code for another machine: export it, do not load it here
        from runtime.shared_library import CrossCompiledModule

        src = generate_source(sch, target, name, None, max_kernel_size=max_kernel_size)
        triple, (cpu, features) = target_triple(target), cross_cpu(target)
        return CrossCompiledModule(src.as_dict(), triple, shapes, outputs, cpu, features)
    dev = device if device is not None else make_device(target.device_kind, 0)
    limits = gpu_limits(dev) if target.is_gpu else None
    src = generate_source(sch, target, name, limits, max_kernel_size=max_kernel_size)
    module = load_module(**src.as_dict(), device=dev, shapes=shapes, outputs=outputs)
    if target.backend.on_host:  # what export_library records, for a server to rebuild it
        state = sch if hasattr(sch, "stages") else dag.get_init_state()
        with contextlib.suppress(Exception):  # no plain form: not rebuildable, still built
            module.state = {**state_data(dag, state, target), "name": name,
                            "layout_rewrite": False}  # fmt: skip
    return module
