"""``build``: schedule -> loop IR -> target code -> a callable module on a device."""

from __future__ import annotations

from codegen.target import Target, check_host_cpu
from tensorir.dag import ComputeDAG
from tensorir.lower import lower


def _emit(program, target: Target):
    if target.kind == "llvm":
        from codegen.llvm import build_llvm

        return build_llvm(program)
    if target.kind == "cuda":
        from codegen.cuda import build_cuda

        return build_cuda(program)
    from codegen.opencl import build_opencl

    return build_opencl(program)


def gpu_limits(dev) -> dict:
    """The verifier's limits from a runtime device's properties."""
    p = dev.properties
    limits = {
        "max_threads_per_block": p.get("max_threads_per_block", 1024),
        "max_shared_memory_per_block": p.get("max_shared_memory_per_block", 48 * 1024),
        "max_local_memory_per_block": p.get("max_local_memory_per_block", 2**31 - 1),
        "max_vthread_extent": p.get("max_vthread_extent", 8),
        "warp_size": p.get("warp_size", 32),
    }
    # Per-dimension block and grid limits, where the device reports them.
    for key in ("max_thread_x", "max_thread_y", "max_thread_z", "max_grid_x", "max_grid_y",
                "max_grid_z"):  # fmt: skip
        if p.get(key):
            limits[key] = int(p[key])
    return limits


def lower_for(
    sch, target, name: str = "main", limits: dict | None = None, layout_rewrite: bool = False
):
    """Lower ``sch`` and, for GPU targets, verify it against ``limits``; return the Program.

    ``layout_rewrite`` stores the DAG's constant weights in the kernel's loop order (network
    builds and the measurement of network tasks; ``Program.param_layouts`` says how)."""
    target = Target(target)
    program = lower(sch, name=name, layout_rewrite=layout_rewrite)
    if target.is_gpu and limits is not None:
        from tensorir.passes.verify_gpu import verify_gpu_program

        verify_gpu_program(program, limits)
    return program


def generate_source(
    sch, target, name: str = "main", limits: dict | None = None, layout_rewrite: bool = False
):
    """The generated code (a codegen Source) for ``sch`` without loading it on a device."""
    target = Target(target)
    return _emit(lower_for(sch, target, name, limits, layout_rewrite), target)


def build(sch, target="llvm", name: str = "main", device=None, params=None):
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

    Returns
    -------
    Module
        Call it with the DAG's tensors in order (inputs, then outputs) as numpy arrays or device
        arrays; ``time_evaluator(number, repeat, min_repeat_ms)`` times it and
        ``get_source()`` shows the generated code.
    NetworkLib
        For a network (a ``tensorir.graph`` Module or Function): every fused subgraph compiled
        with its best record of the active ``ApplyHistoryBest``; run it with ``GraphModule``.
    """
    from tensorir.graph import ir as graph_ir

    check_host_cpu(target)
    if isinstance(sch, graph_ir.Module | graph_ir.Function):
        from .network import build_network

        return build_network(sch, target, params, device=device)
    from runtime import device as make_device
    from runtime import load_module

    target = Target(target)
    if not isinstance(sch, ComputeDAG) and not hasattr(sch, "stages"):
        raise TypeError(
            f"build takes a State (dag.get_init_state() + steps) or a ComputeDAG, got "
            f"{type(sch).__name__}"
        )
    dev = device if device is not None else make_device(target.device_kind, 0)
    limits = gpu_limits(dev) if target.is_gpu else None
    src = generate_source(sch, target, name, limits)
    dag = sch if isinstance(sch, ComputeDAG) else sch.dag
    shapes = {t.name: tuple(t.shape) for t in dag.tensors}
    outputs = [t.name for t in dag.output_tensors]
    return load_module(**src.as_dict(), device=dev, shapes=shapes, outputs=outputs)
