"""The local runner: built candidates checked against the reference interpreter and timed,
one at a time, in a long-lived worker process that may crash or hang; the reference cache it
shares with the RPC runner; and :class:`LocalRPCMeasureContext`, a builder and a runner set up
for GPUs (re-exported by :mod:`autosched.measure.local`, where users import them)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from . import worker as _worker
from .data import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from .data import failed_result as _failed
from .local_builder import ClosedOnExit, LocalBuilder


class ReferenceCache:
    """Reference ``(inputs, outputs)`` per workload key, oldest dropped past ``max_bytes``.

    The local and the RPC runner keep the references they computed here, so that each
    workload's reference is computed once per runner.

    Parameters
    ----------
    max_bytes : int
        The most bytes of arrays kept; a reference larger than this is not kept.
    """

    def __init__(self, max_bytes: int = 512 * 1024**2):
        self.max_bytes = max_bytes
        self._items: dict[str, tuple] = {}
        self._bytes = 0

    @staticmethod
    def _size(ref) -> int:
        return sum(a.nbytes for arrays in ref for a in arrays)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def get(self, key: str):
        return self._items.get(key)

    def put(self, key: str, ref) -> None:
        size = self._size(ref)
        if key in self._items or size > self.max_bytes:
            return
        while self._items and self._bytes + size > self.max_bytes:
            self._bytes -= self._size(self._items.pop(next(iter(self._items))))
        self._items[key] = ref
        self._bytes += size


class LocalRunner(ClosedOnExit):
    """Runs built candidates one at a time in a long-lived worker process.

    A candidate that crashes the worker becomes RUNTIME_DEVICE, one that runs past ``timeout``
    RUN_TIMEOUT (the worker is killed); a fresh worker then measures the rest of the batch.
    GPU candidates run on device 0 of their language's kind in the same worker (which owns the
    CUDA context / OpenCL queue; the tuning process never creates one). A GPU error raised by
    the driver is RUNTIME_DEVICE too; if it left the context unusable (CUDA's sticky errors,
    e.g. an illegal address) the worker is replaced before the next candidate.
    Before timing, each candidate's outputs are compared once with ``tensorir.interp.eval_dag``
    on reproducible random inputs (computed once per workload key and kept in the worker and
    by the runner, which hands it to a replacement worker); a mismatch is WRONG_ANSWER.

    Parameters
    ----------
    number : int
        Runs averaged into one cost.
    repeat : int
        Costs per candidate.
    min_repeat_ms : float
        ``number`` grows until one repeat lasts this long.
    timeout : float
        Seconds for checking and timing one candidate once it is loaded.
    enable_cpu_cache_flush : bool
        Write a buffer twice the size of the last-level cache before each repeat, and time one
        cold run per repeat (``number`` and ``min_repeat_ms`` are then ignored, as in TVM).
        The repeats stop once they took half the ``timeout`` (at least one is kept), so a
        kernel of seconds per run is measured instead of timing out.
    enable_gpu_cache_flush : bool
        The same on a CUDA device: write a device buffer twice the GPU's L2 cache before each
        repeat, one cold run per repeat. Inside a network each kernel reads its weights from
        device memory, while repeated runs find them in L2 (50 MB on an H100): this times the
        former (benchmarks/bench_cold_cache_gpu.py). Off by default, as in TVM; turn it on
        (with ``repeat=3``) when the network reads more than the L2 holds per inference: so
        ranked, bert-base float16 ran 0.543 ms instead of 0.645 on an H100 (docs/gpu.md).
    check_correctness : bool
        Compare outputs with the reference interpreter before timing.
    num_threads : int, optional
        CPU candidates: threads of their parallel loops while timed (default: the measuring
        process's count, AUTOSCHED_NUM_THREADS else the cores it may use).
    compile_timeout : float
        Seconds for loading one candidate on its device and its first run: the OpenCL
        program build (and PoCL's compile of the kernel at its first launch), the link of
        LLVM object code, CUDA's module load. Generous, and apart from ``timeout``, because
        a first compile on a cold compiler cache and a busy machine takes seconds (a PoCL
        build was seen at 18 s) while the candidate's run is fast; past it the candidate is
        RUN_TIMEOUT too.

    Attributes
    ----------
    test_faults : dict of int to str
        TEST-ONLY. ``{index in the batch: "segfault" | "hang" | "wrong" | "raise" | "slow_load" |
        "device_fault"}`` makes the worker misbehave on those candidates of the next
        :meth:`run` calls ("device_fault", GPU only, first launches an out-of-bounds kernel).
    """

    def __init__(
        self,
        number: int = 3,
        repeat: int = 1,
        min_repeat_ms: float = 100,
        timeout: float = 10,
        enable_cpu_cache_flush: bool = False,
        check_correctness: bool = True,
        num_threads: int | None = None,
        compile_timeout: float = 60,
        enable_gpu_cache_flush: bool = False,
    ):
        if num_threads is not None and (
            isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1
        ):
            raise ValueError(f"LocalRunner num_threads must be a positive int, got {num_threads!r}")
        if number < 1 or repeat < 1 or timeout <= 0 or compile_timeout <= 0:
            raise ValueError(
                f"LocalRunner needs number >= 1, repeat >= 1, timeout > 0 and compile_timeout "
                f"> 0, got number={number}, repeat={repeat}, timeout={timeout}, "
                f"compile_timeout={compile_timeout}"
            )
        self.number = int(number)
        self.repeat = int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.timeout = float(timeout)
        self.compile_timeout = float(compile_timeout)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self.enable_gpu_cache_flush = bool(enable_gpu_cache_flush)
        self.check_correctness = bool(check_correctness)
        self.num_threads = num_threads
        self.reference_timeout = max(300.0, self.timeout)  # the interpreter is slow on big DAGs
        self.test_faults: dict[int, str] = {}
        self._proc: _worker.RunnerProcess | None = None
        self._proc_keys: set[str] = set()  # workloads whose reference the worker holds
        self._refs = ReferenceCache()

    def run(
        self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult]
    ) -> list[MeasureResult]:
        """Measure each successfully built input; failed builds pass their error through.

        Returns
        -------
        list of MeasureResult
            One per input. ``all_cost`` is this candidate's build plus run seconds.
        """
        if len(inputs) != len(build_results):
            raise ValueError(f"run got {len(inputs)} inputs but {len(build_results)} build results")
        out = []
        for i, (inp, br) in enumerate(zip(inputs, build_results)):
            if br.error_no != MeasureErrorNo.NO_ERROR:
                out.append(_failed(br.error_no, br.error_msg, br.time_cost))
                continue
            start = time.perf_counter()
            costs, code, msg = self._run_one(inp, br, self.test_faults.get(i))
            secs = br.time_cost + time.perf_counter() - start
            if code != MeasureErrorNo.NO_ERROR:
                out.append(_failed(code, msg, secs))
            else:
                out.append(MeasureResult(tuple(costs), 0, "", secs, time.time()))
        return out

    def _run_one(self, inp: MeasureInput, br: BuildResult, fault: str | None) -> tuple:
        if fault is not None and fault not in _worker.FAULTS:
            raise ValueError(f"unknown test fault {fault!r}; use one of {_worker.FAULTS}")
        if self._proc is None:
            self._proc = _worker.RunnerProcess()
            self._proc_keys = set()
        proc = self._proc
        flush = self.enable_cpu_cache_flush or self.enable_gpu_cache_flush
        loaded = True  # False while waiting for the end of loading (the compile phase)
        key = inp.task.workload_key
        job = {
            "key": key,
            # The reference outlives a crashed worker: computed once per workload, kept here.
            "ref": self._refs.get(key) if key not in self._proc_keys else None,
            "want_ref": key not in self._refs,
            "dag": inp.task.compute_dag,
            "source": br.source,
            "number": 1 if flush else self.number,
            "repeat": self.repeat,
            "min_repeat_ms": 0.0 if flush else self.min_repeat_ms,
            "flush": self.enable_cpu_cache_flush,
            "flush_device": self.enable_gpu_cache_flush,
            # Cold repeats stop once they took this long (at least one is kept), issue 29.
            "time_limit_s": self.timeout / 2 if flush else None,
            "check": self.check_correctness,
            "num_threads": self.num_threads,
            "fault": fault,
        }
        try:
            proc.conn.send(job)
        except OSError:
            reply = ("eof",)
        else:
            reply = proc.recv(self.reference_timeout)
            if reply is not None and reply[0] == "ready":
                self._proc_keys.add(key)
                if reply[1] is not None:
                    self._refs.put(key, reply[1])
                # Two clocks: loading (compiling on the device) and the first run, then the
                # check and the timing. A cold compiler must not make a fast candidate a
                # RUN_TIMEOUT.
                loaded = False
                reply = proc.recv(self.compile_timeout)
                if reply is not None and reply[0] == "loaded":
                    loaded = True
                    reply = proc.recv(self.timeout)
        if reply is not None and reply[0] == "done":
            if reply[4]:  # the worker's GPU context is broken: replace the worker
                self._proc = None
                proc.kill()
            return reply[1], reply[2], reply[3]
        # No answer: the worker died (a crashing kernel) or hangs. Either way it is replaced.
        self._proc = None
        if reply is None:
            proc.kill()
            if loaded:
                msg = f"the candidate did not finish within {self.timeout:g} s; worker killed"
            else:
                msg = (
                    f"loading the candidate on the device (compiling it) and its first run did "
                    f"not finish within compile_timeout={self.compile_timeout:g} s; worker killed"
                )
            return (), MeasureErrorNo.RUN_TIMEOUT, msg
        why = proc.death()
        proc.kill()
        return (), MeasureErrorNo.RUNTIME_DEVICE, f"measuring process {why}"

    def close(self) -> None:
        """Stop the worker process (a later :meth:`run` starts a new one)."""
        if self._proc is not None:
            self._proc.stop()
            self._proc = None


class LocalRPCMeasureContext(ClosedOnExit):
    """Isolated measurement for GPUs, under TVM's name: ``.builder`` and ``.runner``.

    Use as ``TuningOptions(runner=ctx.runner, builder=ctx.builder, ...)`` (the builder may be
    left as "local"), then ``ctx.close()``, or ``with LocalRPCMeasureContext() as ctx:``.
    TVM starts an RPC tracker and server on this machine; here the isolation is the runner's
    long-lived worker process, which owns the GPU context, so no sockets are involved.

    Measurement protocol for one candidate, and its cost:

    1. build (in ``builder``, on all host cores, ``n_parallel`` at a time): replay, lower,
       generate code and, for CUDA, nvcc to a cubin (about 1 s of one core per candidate;
       OpenCL is built in the runner: its binaries are not portable);
    2. in the runner's worker: load the module (``cuModuleLoadData`` of the cubin, a few ms;
       an OpenCL program build, 0.1-0.5 s on PoCL with a warm cache, seconds cold), copy the
       reference inputs (cached per workload) to the device, run once (PoCL compiles the
       kernel for its launch sizes here) and compare all outputs with the reference
       interpreter (WRONG_ANSWER on mismatch); loading and that first run have their own
       ``compile_timeout``, so a cold compiler on a busy machine is not a RUN_TIMEOUT;
    3. time with device events (CUDA events / OpenCL profiling events): one warm-up run, then
       ``repeat`` costs, each the mean of ``number`` back-to-back runs with no host sync in
       between, ``number`` grown until one repeat lasts ``min_repeat_ms`` (one sync per
       attempt).

    Steps 2-3 cost about ``repeat * min_repeat_ms`` (about 1.15x that: a calibrating attempt
    of a tenth of it when the first is too short to predict from, and a 5% margin; TVM's rule
    of growing straight from 3 calls cost up to 2.3x, :func:`runtime.timer.next_number`) plus
    the load and the check. Measured on PoCL (2 busy CPU cores, a 64x64x32
    matmul + relu): 0.11 s per candidate with ``min_repeat_ms=0`` (mostly the OpenCL build)
    and 0.65 s with the default 300. On CUDA the load is a cubin: a resnet-18 tune on the H100
    took a median 0.77 s per candidate under TVM's growth rule, whatever the kernel's length
    (session 7), and should now take about 0.35-0.45 s, 0.3 s of it the GPU warming as TVM
    recommends. A crash (segfault)
    restarts the worker (1-3 s with the CUDA context); the reference outputs, kept by the
    runner, are not recomputed.

    Parameters
    ----------
    number, repeat, min_repeat_ms, timeout : see :class:`LocalRunner`.
    n_parallel : int, optional
        Build processes (default: all usable cores).
    build_timeout : float
        Seconds one build (including nvcc) may take.
    check_correctness : bool
        Compare outputs with the reference interpreter before timing.
    compile_timeout : float
        Seconds for loading a candidate on the device and its first run (see
        :class:`LocalRunner`); ``timeout`` covers only the check and the timing.
    num_threads : int, optional
        CPU candidates: threads of their parallel loops while timed (default: the measuring
        process's count, AUTOSCHED_NUM_THREADS else the cores it may use).
    enable_gpu_cache_flush : bool
        Time each repeat as one run after evicting the GPU's L2 (see :class:`LocalRunner`;
        CUDA only, off by default).
    """

    def __init__(
        self,
        repeat: int = 1,
        min_repeat_ms: float = 300,
        timeout: float = 10,
        n_parallel: int | None = None,
        number: int = 3,
        build_timeout: float = 15,
        check_correctness: bool = True,
        compile_timeout: float = 60,
        enable_gpu_cache_flush: bool = False,
    ):
        self.builder = LocalBuilder(timeout=build_timeout, n_parallel=n_parallel)
        self.runner = LocalRunner(
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            timeout=timeout,
            check_correctness=check_correctness,
            compile_timeout=compile_timeout,
            enable_gpu_cache_flush=enable_gpu_cache_flush,
        )

    def close(self) -> None:
        """Stop the build and measuring processes."""
        self.builder.close()
        self.runner.close()
