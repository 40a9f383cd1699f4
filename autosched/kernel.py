"""One-kernel compilation: a loop state -> loop IR (lowered, size-checked, GPU-verified) -> the
target's source, without loading it.

The low module that the measurement worker, the network builder and :func:`autosched.build`
share; it imports only tensorir, codegen, runtime and :mod:`autosched.hardware`.
"""

from __future__ import annotations

from codegen.target import RenderOptions, Target, backend, cross_cpu, is_cross_target
from runtime.environment import VARIABLES, env
from tensorir.lower import lower
from tensorir.passes.unroll import expanded_sizes

from .hardware import GPU_DEFAULTS

__all__ = [
    "MAX_KERNEL_SIZE",
    "KernelSizeError",
    "check_kernel_size",
    "emit_source",
    "generate_source",
    "gpu_limits",
    "kernel_size_limit",
    "lower_for",
]

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


def cpu_features(target: Target) -> frozenset[str]:
    """LLVM names of the CPU features ``target``'s code may use: the host's (its code is
    compiled for and run on this machine, so VNNI where the host has it), or for another
    machine's triple the ``+feature`` entries of its ``-mattr``."""
    target = Target(target)
    if is_cross_target(target):
        _, mattr = cross_cpu(target)
        return frozenset(f[1:] for f in mattr.split(",") if f.startswith("+"))
    from runtime.cpu import host_cpu_features

    return host_cpu_features()


def emit_source(program, target):
    """The code (a codegen Source) of a lowered ``program`` for ``target``; what
    :func:`generate_source` does after :func:`lower_for` (the builders time the two apart)."""
    target = Target(target)
    entry = backend(target.kind)  # the backend table: which renderer, what it needs
    options = RenderOptions(check_indices=env("AUTOSCHED_CHECK_INDICES"))
    if entry.on_host:  # CPU code is compiled for this host's (or -mattr's) features
        options = RenderOptions(cpu_features(target), options.check_indices)
    return entry.render(program, target, options)


def gpu_limits(dev) -> dict:
    """The verifier's limits from a runtime device's properties."""
    p = dev.properties
    # What the device does not report falls back to the one table of GPU defaults.
    keys = ("max_threads_per_block", "max_shared_memory_per_block", "max_local_memory_per_block",
            "max_vthread_extent", "warp_size")  # fmt: skip
    limits = {key: p.get(key, GPU_DEFAULTS[key]) for key in keys}
    # Only a device that reports an opt-in (CUDA) has one; others keep their static limit.
    optin = p.get("max_shared_memory_per_block_optin")
    limits["max_shared_memory_per_block_optin"] = optin or limits["max_shared_memory_per_block"]
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
    program = lower_for(sch, target, name, limits, layout_rewrite, max_kernel_size)
    return emit_source(program, target)
