"""Default (untuned) schedules: what a group without a tuning record is compiled with, and the
task scheduler's seed state on GPUs. Correct, not fast."""

from __future__ import annotations

import logging

import numpy as np

from codegen.target import Target
from tensorir.dag import ComputeDAG

from ..suppressed import suppressed

_log = logging.getLogger(__name__)


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
    except Exception:  # noqa: BLE001 - a default that fails to apply: the plain loop nest
        suppressed("default schedules")  # (slow: counted, logged; strict: raised)
        return dag.get_init_state()


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


# Blocks an elementwise kernel keeps at least when its threads take several elements each
# (about four per SM of a large GPU), and the most elements a thread takes.
MIN_BLOCKS_PER_KERNEL = 512
MAX_ELEMENTS_PER_THREAD = 8


def elements_per_thread(n: int, threads: int, max_elements: int = MAX_ELEMENTS_PER_THREAD) -> int:
    """Outputs each thread of an elementwise kernel of ``n`` outputs computes: the largest
    power of two up to ``max_elements`` that keeps the kernel at least
    ``MIN_BLOCKS_PER_KERNEL`` blocks of ``threads`` and divides ``n`` into whole blocks; 1 for
    small kernels.

    One element per thread keeps too few bytes in flight for the GPU's memory: an H100 needs
    about 15 KB in flight per SM to reach its bandwidth, a full SM of threads reading one
    16-bit value each has 4 KB. resnet-50 batch 16 float16's bias + relu kernels (25 MB each in
    the first stage) ran at about a quarter of the bandwidth that way (benchmarks/RESULTS.md,
    session 16). Each thread's elements are a block's width apart, so every load of the warp
    stays coalesced and the thread's loads are independent."""
    best = 1
    v = 2
    while (
        v <= max_elements and n % (v * threads) == 0 and n // (v * threads) >= MIN_BLOCKS_PER_KERNEL
    ):
        best, v = v, 2 * v
    return best


def default_gpu_schedule(
    dag: ComputeDAG,
    max_threads_per_block: int | None = None,
    warp=32,
    fuse_consumer=True,
    max_elements_per_thread: int = MAX_ELEMENTS_PER_THREAD,
):
    """The GPU schedule of a group without a tuning record.

    Every non-output stage without a reduction is inlined into its readers (TVM inlines all of
    them on GPUs); each remaining stage becomes one kernel whose spatial loops are fused, split
    by :func:`pick_num_threads` and bound to ``blockIdx.x`` / ``threadIdx.x``. Reductions run
    serially inside each thread, accumulating in a register (a ``local`` cache stage). With
    ``fuse_consumer``, a reduction read element-wise by the output (conv2d + bias + relu) is
    computed inside the output's thread instead of in a kernel of its own. A large group
    without a reduction gives each thread several outputs, a block apart
    (:func:`elements_per_thread`, at most ``max_elements_per_thread``). Correct, not fast.
    """
    state = dag.get_init_state()
    reduces = any(op.reduce_axes for op in dag.compute_ops)  # else elements_per_thread applies
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
        except ValueError:  # a stage that cannot be inlined stays a kernel of its own
            continue
        except Exception:  # noqa: BLE001 - a bug: the same, but counted (strict: raised)
            suppressed("default schedules")
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
            except ValueError:  # no local cache stage: accumulate in global memory
                pass
            except Exception:  # noqa: BLE001 - a bug: the same, but counted (strict: raised)
                suppressed("default schedules")
        spatial = [it for it in state[name].iters if it.kind == "spatial"]
        n = int(np.prod([it.extent for it in spatial], dtype=np.int64))
        fused = state.fuse(name, [it.name for it in spatial]) if len(spatial) > 1 else spatial[0]
        threads = pick_num_threads(n, max_threads_per_block, warp)
        each = 1 if reduces else elements_per_thread(n, threads, max_elements_per_thread)
        if each > 1:
            bx, vx, tx = state.split(name, fused, [each, threads])
            state.unroll(name, vx)  # the thread's loads, all issued before the first returns
        else:
            bx, tx = state.split(name, fused, [threads])
        state.bind(name, bx, "blockIdx.x")
        state.bind(name, tx, "threadIdx.x")
        if local is not None:
            state.compute_at(local, name, tx)
        for src, dst in fused_into.items():
            if dst == name:
                state.compute_at(f"{src}.local", name, tx)
    return state


def default_gpu_state(dag: ComputeDAG, max_threads_per_block, warp, check, task=None):
    """:func:`default_gpu_schedule` with the consumer fused, or, where that state fails
    ``check(state)`` (which raises), one kernel per stage. What an untuned GPU build runs, and
    what the task scheduler measures first for a GPU task.

    With ``task`` (a SearchTask of ``dag``: its target and hardware limits), a GEMM the
    tensor-core sketch takes (16-bit dense, batch_matmul, implicit-GEMM conv2d) gets the sketch
    with a fixed tile instead, when one passes the limits and ``check``
    (:func:`autosched.search.tensor_core_default.default_tensor_core_state`); else the scalar
    schedule above."""
    if task is not None:
        from ..search.tensor_core_default import default_tensor_core_state

        try:
            state = default_tensor_core_state(task, check)
        except Exception:  # noqa: BLE001 - a fixed tile that fails to apply: the scalar default
            _log.debug("no tensor-core default for %s", task.desc or "a task", exc_info=True)
            state = None
        if state is not None:
            return state
    try:
        state = default_gpu_schedule(dag, max_threads_per_block, warp, fuse_consumer=True)
        check(state)
    except Exception as exc:  # noqa: BLE001 - fusing the consumer failed: one kernel per stage
        if not isinstance(exc, ValueError):  # a schedule or check error; anything else: a bug
            suppressed("default schedules")
        state = default_gpu_schedule(dag, max_threads_per_block, warp, fuse_consumer=False)
        check(state)
    return state
