"""``build``: schedule -> loop IR -> target code -> a callable module on a device."""

from __future__ import annotations

from codegen.target import Target, check_host_cpu
from runtime.environment import VARIABLES, env
from tensorir.dag import ComputeDAG
from tensorir.lower import lower
from tensorir.passes.unroll import expanded_sizes

# The most statements plus expression nodes one kernel may emit after unrolling (what code
# generation copies). A fully unrolled 16^3 matmul is about 110k and takes LLVM 3 s; the search
# stays far below (unrolled loops are capped at tensorir.passes.unroll.MAX_UNROLLED_SIZE stores).
# Override with generate_source(max_kernel_size=...), build(max_kernel_size=...) or the
# AUTOSCHED_MAX_KERNEL_SIZE variable (runtime/environment.py; network builds read it too).
MAX_KERNEL_SIZE_ENV = "AUTOSCHED_MAX_KERNEL_SIZE"
MAX_KERNEL_SIZE = VARIABLES[MAX_KERNEL_SIZE_ENV].default


class KernelSizeError(ValueError):
    """A lowered kernel is too large to compile in reasonable time (see MAX_KERNEL_SIZE)."""


def kernel_size_limit(max_kernel_size: int | None = None) -> int:
    """The size limit in force: the argument, else $AUTOSCHED_MAX_KERNEL_SIZE, else the default."""
    if max_kernel_size is not None:
        return int(max_kernel_size)
    return env(MAX_KERNEL_SIZE_ENV)


def check_kernel_size(program, max_kernel_size: int | None = None) -> None:
    """Raise KernelSizeError when ``program`` emits more code than the limit allows."""
    limit = kernel_size_limit(max_kernel_size)
    sizes = expanded_sizes(program.body)
    total = sum(sizes.values())
    if total <= limit:
        return
    stage = max((k for k in sizes if k), key=sizes.__getitem__, default="?")
    raise KernelSizeError(
        f"build of kernel {program.name!r}: {total} statements and expression nodes after "
        f"unrolling (stage {stage!r}: {sizes.get(stage, 0)}) exceed the limit {limit}; unroll "
        "less (fewer unroll annotations, a smaller auto_unroll_max_step) or split the stage, or "
        f"raise the limit with max_kernel_size= or {MAX_KERNEL_SIZE_ENV}"
    )


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
    sch,
    target,
    name: str = "main",
    limits: dict | None = None,
    layout_rewrite: bool = False,
    max_kernel_size: int | None = None,
):
    """Lower ``sch`` and, for GPU targets, verify it against ``limits``; return the Program.

    ``layout_rewrite`` stores the DAG's constant weights in the kernel's loop order (network
    builds and the measurement of network tasks; ``Program.param_layouts`` says how). A program
    larger than ``max_kernel_size`` (default: :func:`kernel_size_limit`) raises KernelSizeError
    before any code is generated."""
    target = Target(target)
    program = lower(sch, name=name, layout_rewrite=layout_rewrite)
    check_kernel_size(program, max_kernel_size)
    if target.is_gpu and limits is not None:
        from tensorir.passes.verify_gpu import verify_gpu_program

        verify_gpu_program(program, limits)
    return program


def generate_source(
    sch,
    target,
    name: str = "main",
    limits: dict | None = None,
    layout_rewrite: bool = False,
    max_kernel_size: int | None = None,
):
    """The generated code (a codegen Source) for ``sch`` without loading it on a device."""
    target = Target(target)
    return _emit(lower_for(sch, target, name, limits, layout_rewrite, max_kernel_size), target)


def build(
    sch,
    target="llvm",
    name: str = "main",
    device=None,
    params=None,
    max_kernel_size: int | None = None,
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
        from .network.build import build_network

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
    src = generate_source(sch, target, name, limits, max_kernel_size=max_kernel_size)
    dag = sch if isinstance(sch, ComputeDAG) else sch.dag
    shapes = {t.name: tuple(t.shape) for t in dag.tensors}
    outputs = [t.name for t in dag.output_tensors]
    return load_module(**src.as_dict(), device=dev, shapes=shapes, outputs=outputs)
