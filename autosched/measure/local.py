"""Measurement: build candidates to code, run them safely, and say why one failed.

``MeasureInput`` (a task and a loop state) goes through a :class:`LocalBuilder` (replay, lower,
codegen and compilation to machine code in a process pool) and a :class:`LocalRunner` (load,
check against the reference interpreter, time, in a separate process that may crash or hang
without taking the search with it) to a ``MeasureResult``. The runner measures CPU, CUDA and
OpenCL candidates alike (the device follows the generated code's language);
:class:`LocalRPCMeasureContext` bundles a builder and a runner set up for GPUs, as in TVM.
Failures are results with a :class:`MeasureErrorNo` code (TVM's
numbering, so logs read alike) and a readable message, never exceptions.
:class:`ProgramMeasurer` drives both per batch, keeps the best per workload, calls callbacks
such as ``records.RecordToFile`` and totals the build / run wall time.

The worker processes (started by :mod:`autosched.workers`, never re-importing the user's
script) run :mod:`autosched.measure.worker`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..workers import WorkerPool, cpu_count, deferred_signals
from . import timing as _timing
from . import worker as _worker
from .data import (
    MAX_COST,
    BuildResult,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
)
from .data import failed_result as _failed
from .data import steps_json_of as _steps_json

__all__ = [
    "LocalBuilder",
    "LocalRPCMeasureContext",
    "LocalRunner",
    "MeasureStats",
    "ProgramMeasurer",
    "measure",
    "runner_builds",
]


class _ClosedOnExit:
    """Context-manager protocol for objects owning worker processes: ``close()`` on exit and
    when garbage-collected."""

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()


class LocalBuilder(_ClosedOnExit):
    """Builds candidates to code in a pool of worker processes, each build with a timeout.

    Parameters
    ----------
    timeout : float
        Seconds one build may take before it becomes BUILD_TIMEOUT.
    n_parallel : int, optional
        Worker processes; defaults to the number of usable cores.
    build_func : str or callable
        How a CPU candidate is linked, as TVM's: ``"default"`` (nothing to link: the runner
        loads the object code), ``"ndk"`` (:func:`autosched.contrib.ndk.create_shared`, the
        NDK's or zig's linker for the target's triple) or a picklable
        ``fcompile(output, objects, options)``. With one of the latter, every CPU candidate
        is also linked into a shared library for its target's triple, so a candidate the
        device's toolchain cannot link fails as COMPILE_HOST at build time. OpenCL and CUDA
        candidates are source the device's driver compiles: nothing to link.

    Notes
    -----
    The pool (:class:`autosched.workers.WorkerPool`: fresh interpreters that never import the
    user's script) starts on the first :meth:`build` and is reused; call :meth:`close` (or use
    the builder as a context manager) to stop it. States travel as ``(dag, steps JSON)`` and are
    replayed in the worker, so a step list that does not replay is INSTANTIATION_ERROR there.
    CUDA candidates are compiled to a cubin by nvcc in the workers for the device's ``-arch``
    (read once from device 0 unless the target names one); an nvcc error is COMPILE_DEVICE.
    """

    def __init__(self, timeout: float = 15, n_parallel: int | None = None, build_func="default"):
        if timeout <= 0:
            raise ValueError(f"LocalBuilder timeout must be positive, got {timeout}")
        self.build_func = _checked_build_func(build_func)
        self.timeout = float(timeout)
        self.n_parallel = int(n_parallel or cpu_count())
        self._pool: WorkerPool | None = None

    # Seconds past ``timeout`` before a build's worker is killed: the worker enforces
    # ``timeout`` itself (SIGALRM), this covers one stuck in C code that ignores the alarm.
    HARD_TIMEOUT_GRACE = 10.0

    def _get_pool(self) -> WorkerPool:
        if self._pool is None:
            # Preloaded once per worker, so no build pays for the imports inside its timeout.
            preload = (
                "autosched.measure.worker",
                "autosched.kernel",
                "runtime.cpu",
                "llvmlite.binding",
            )
            self._pool = WorkerPool(self.n_parallel, preload, name="build worker")
        return self._pool

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Build every input; errors become results, never exceptions.

        Parameters
        ----------
        inputs : sequence of MeasureInput

        Returns
        -------
        list of BuildResult
            One per input, in order.
        """
        from ..hardware import with_device_arch

        results: list[BuildResult | None] = [None] * len(inputs)
        jobs = []
        targets: dict[str, str] = {}  # task target -> the one compiled for (cuda gets -arch)
        for i, inp in enumerate(inputs):
            try:
                target = str(inp.task.target)
                if target not in targets:
                    targets[target] = str(with_device_arch(target))
                job = (inp.task.compute_dag, _steps_json(inp.state), targets[target])
            except Exception as exc:  # e.g. a step that cannot be serialised
                results[i] = BuildResult(
                    None, MeasureErrorNo.INSTANTIATION_ERROR, f"serialising the steps: {exc!r}"
                )
                continue
            link = () if self.build_func == "default" else (self.build_func,)
            jobs.append((i, (*job, self.timeout, *link)))
        if not jobs:
            return results  # type: ignore[return-value]
        outcomes = self._get_pool().map(
            _worker.build_one,
            [(job,) for _, job in jobs],
            timeout=self.timeout + self.HARD_TIMEOUT_GRACE,
        )
        for (i, _), outcome in zip(jobs, outcomes, strict=True):
            if outcome.ok:
                results[i] = BuildResult(*outcome.value)
            elif outcome.status == "timeout":  # the worker was killed and will be replaced
                msg = f"build did not finish within {self.timeout:g} s (worker unresponsive)"
                results[i] = BuildResult(None, MeasureErrorNo.BUILD_TIMEOUT, msg, self.timeout)
            elif outcome.status == "died":  # e.g. a segfault in LLVM
                msg = f"build worker failed: {outcome.detail}"
                results[i] = BuildResult(None, MeasureErrorNo.COMPILE_HOST, msg)
            else:
                msg = f"build worker failed: {_worker.short_error(outcome.error)}"
                results[i] = BuildResult(None, MeasureErrorNo.COMPILE_HOST, msg)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the worker processes (a later :meth:`build` starts new ones)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _checked_build_func(build_func):
    """``"default"``, ``"ndk"`` or a callable the build workers can receive (picklable)."""
    import pickle

    if isinstance(build_func, str):
        if build_func not in ("default", "ndk"):
            raise ValueError(
                f"LocalBuilder: build_func={build_func!r}; use 'default', 'ndk' or a function "
                "fcompile(output, objects, options)"
            )
        return build_func
    if not callable(build_func):
        raise TypeError(f"LocalBuilder: build_func must be a str or a function, got {build_func!r}")
    if getattr(build_func, "__module__", None) == "__main__":
        raise ValueError(
            f"LocalBuilder: build_func {build_func.__name__!r} is defined in the script, which "
            "the build workers do not import; define it in a module of its own"
        )
    try:
        pickle.dumps(build_func)
    except Exception as exc:
        raise ValueError(
            f"LocalBuilder: build_func {build_func!r} cannot be sent to the build workers "
            f"({exc}); define it at module level"
        ) from None
    return build_func


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


class LocalRunner(_ClosedOnExit):
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
        flush = self.enable_cpu_cache_flush
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
            "flush": flush,
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


class LocalRPCMeasureContext(_ClosedOnExit):
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

    Steps 2-3 cost about ``repeat * min_repeat_ms`` (up to 1.6x that when ``number`` has to
    grow twice) plus the load and the check. Measured on PoCL (2 busy CPU cores, a 64x64x32
    matmul + relu): 0.11 s per candidate with ``min_repeat_ms=0`` (mostly the OpenCL build)
    and 0.65 s with the default 300. On CUDA the load is a cubin, so the default should come
    to about 0.35-0.5 s, 0.3 s of it the GPU warming as TVM recommends. A crash (segfault)
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
    ):
        self.builder = LocalBuilder(timeout=build_timeout, n_parallel=n_parallel)
        self.runner = LocalRunner(
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            timeout=timeout,
            check_correctness=check_correctness,
            compile_timeout=compile_timeout,
        )

    def close(self) -> None:
        """Stop the build and measuring processes."""
        self.builder.close()
        self.runner.close()


@dataclass
class MeasureStats:
    """Running totals of a :class:`ProgramMeasurer` (mutable: updated after every batch).

    Attributes
    ----------
    build_s, run_s : float
        Wall seconds spent in the builder and in the runner (the servers' builds included
        when the runner builds its candidates itself, :func:`runner_builds`).
    measured, errors : int
        Candidates measured, and how many of them failed.
    """

    build_s: float = 0.0
    run_s: float = 0.0
    measured: int = 0
    errors: int = 0

    def __str__(self) -> str:
        return (
            f"{self.measured} measured ({self.errors} errors), build {self.build_s:.1f} s, "
            f"run {self.run_s:.1f} s"
        )


def _with_note(ran: list[MeasureResult], note: str) -> list[MeasureResult]:
    """``ran`` with ``note`` (such as ``data.RETIMED``) as the ``error_msg`` of each error-free
    result."""
    if not note:
        return ran
    ok = MeasureErrorNo.NO_ERROR
    return [dataclasses.replace(r, error_msg=note) if r.error_no == ok else r for r in ran]


class ProgramMeasurer:
    """Builds and runs candidates batch by batch, keeps the best per workload, calls callbacks.

    A runner that builds its candidates itself (:func:`runner_builds`: ``RPCRunner``, whose
    servers run only what they built) measures them with ``build_and_run``, and the builder
    is not used.

    Parameters
    ----------
    builder : LocalBuilder
    runner : LocalRunner
    callbacks : sequence
        Objects with ``callback(inputs, results)``, called after each batch (e.g.
        ``records.RecordToFile``).

    Attributes
    ----------
    stats : MeasureStats
        Build / run wall time and counts so far.
    best_cost : dict of str to float
        Lowest mean cost per workload key.
    best_input : dict of str to MeasureInput
        The candidate that achieved ``best_cost``.
    """

    def __init__(self, builder, runner, callbacks: Sequence = ()):
        self.builder = builder
        self.runner = runner
        self.callbacks = tuple(callbacks)
        self.stats = MeasureStats()
        self.best_cost: dict[str, float] = {}
        self.best_input: dict[str, MeasureInput] = {}

    def measure(
        self, inputs: Sequence[MeasureInput], note: str = "", gate=None
    ) -> list[MeasureResult]:
        """Build, run and record ``inputs`` (in batches of ``2 * builder.n_parallel``);
        ``note`` becomes the ``error_msg`` of error-free results (``data.RETIMED``).

        ``gate`` (a :class:`~autosched.measure.overlap.MeasureGate`, when a background thread
        measures while the tuning thread searches) says when a built batch may run: batches
        are built ahead until it opens, then run and recorded in order, so a runner that times
        on the host's cores never runs beside the search. A cancelled gate stops before the
        next batch is run or recorded (:class:`~autosched.measure.overlap.MeasureCancelled`):
        the log never gets results of candidates whose workers were stopped under them.

        Returns
        -------
        list of MeasureResult
            One per input, with ``all_cost`` and ``timestamp`` filled.
        """
        inputs = list(inputs)
        batch = max(1, 2 * getattr(self.builder, "n_parallel", 1))
        results: list[MeasureResult] = []
        built: list[tuple] = []  # (chunk, build results), built but not yet run
        remote = runner_builds(self.builder, self.runner)
        for lo in range(0, len(inputs), batch):
            chunk = inputs[lo : lo + batch]
            if remote:  # the servers build (an RPC server runs only what it built itself)
                results.extend(self._build_and_run_remotely(chunk, note, gate))
                continue
            built.append((chunk, self._build(chunk, gate)))
            if gate is None or gate.may_run():
                for chunk_, built_ in built:
                    results.extend(self._run(chunk_, built_, note, gate))
                built.clear()
        if built:
            gate.wait_run()
            for chunk_, built_ in built:
                results.extend(self._run(chunk_, built_, note, gate))
        return results

    def _build(self, chunk: list, gate) -> list[BuildResult]:
        if gate is not None:
            gate.check()
        t0 = time.perf_counter()
        built = self.builder.build(chunk)
        wall = time.perf_counter() - t0
        self.stats.build_s += wall
        ledger = _timing.current()
        if ledger is not None:
            workers = getattr(self.builder, "n_parallel", 1)
            ledger.add_build(wall, [getattr(b, "phases", {}) for b in built], workers)
        return built

    def _run(self, chunk: list, built: list, note: str, gate) -> list[MeasureResult]:
        """Run one built batch, keep its best and record it."""
        if gate is not None:
            gate.check()
        t1 = time.perf_counter()
        ran = self.runner.run(chunk, built)
        t2 = time.perf_counter()
        ran = _with_split(built, _with_note(ran, note))
        self.stats.run_s += t2 - t1
        ledger = _timing.current()
        if ledger is not None:
            ledger.add("run", t2 - t1)
        return self._keep(chunk, ran, gate)

    def _build_and_run_remotely(self, chunk: list, note: str, gate) -> list[MeasureResult]:
        """Have the RPC servers build and run one batch (:func:`runner_builds`), keep its best
        and record it."""
        if gate is not None:
            gate.check()
        t1 = time.perf_counter()
        built, ran = self.runner.build_and_run(chunk)
        t2 = time.perf_counter()
        ran = _with_split(built, _with_note(ran, note))
        self.stats.run_s += t2 - t1
        ledger = _timing.current()
        if ledger is not None:
            # The servers' builds, inside the runner's wall time: the candidates in flight at
            # once (on average) divide their seconds, as the builders' do.
            busy = sum(r.all_cost for r in ran) / max(t2 - t1, 1e-9)
            phases = [getattr(b, "phases", {}) for b in built]
            ledger.add_build(t2 - t1, phases, max(1, round(busy)), rest="run")
        return self._keep(chunk, ran, gate)

    def _keep(self, chunk: list, ran: list, gate) -> list[MeasureResult]:
        """Count a measured batch, keep its best and give it to the callbacks (the log)."""
        if gate is not None:
            gate.check()  # stopped while running: the workers may have been killed under it
        self.stats.measured += len(chunk)
        self.stats.errors += sum(r.error_no != MeasureErrorNo.NO_ERROR for r in ran)
        for inp, res in zip(chunk, ran):
            key = inp.task.workload_key
            if res.error_no == MeasureErrorNo.NO_ERROR and res.mean_cost < self.best_cost.get(
                key, MAX_COST
            ):
                self.best_cost[key] = res.mean_cost
                self.best_input[key] = inp
        with deferred_signals(), _timing.phase("records"):
            # (a Ctrl-C here waits: the log gets the whole batch)
            for cb in self.callbacks:
                cb.callback(chunk, ran)
        return ran

    def close(self, clean: bool = True) -> None:
        """Stop the builder's and runner's processes; after a ``clean`` end also close the
        callbacks that can be closed (``RecordToFile`` then marks the log as ended cleanly)."""
        for part in (self.builder, self.runner, *(self.callbacks if clean else ())):
            close = getattr(part, "close", None)
            if close is not None:
                close()


def runner_builds(builder, runner) -> bool:
    """Whether ``runner`` builds the candidates itself (``runner.build_and_run(inputs) ->
    (build results, measure results)``, e.g. ``RPCRunner``, whose servers run only what they
    built from the states), so that building them with ``builder`` would only be thrown
    away. False when the builder does more than build: a ``build_func`` that links each
    candidate with the device's toolchain, or a builder other than :class:`LocalBuilder`."""
    if not getattr(runner, "builds_candidates", False):
        return False
    if builder == "local":
        return True
    return (
        isinstance(builder, LocalBuilder)
        and type(builder).build is LocalBuilder.build
        and builder.build_func == "default"
    )


def _with_split(built, ran) -> list[MeasureResult]:
    """``ran`` with each result's ``build_s`` (the worker's build seconds) and ``run_s`` (the
    rest of its ``all_cost``) filled in, so records keep them (runners may not)."""
    out = []
    for b, r in zip(built, ran, strict=True):
        build_s = float(getattr(b, "time_cost", 0.0) or 0.0)
        run_s = r.run_s if r.run_s == r.run_s else max(0.0, r.all_cost - build_s)  # not NaN
        out.append(dataclasses.replace(r, build_s=build_s, run_s=run_s))
    return out


def measure(
    inputs: Sequence[MeasureInput], builder, runner, callbacks: Sequence = ()
) -> list[MeasureResult]:
    """Build and run ``inputs`` once; a one-shot :class:`ProgramMeasurer`.

    Parameters
    ----------
    inputs : sequence of MeasureInput
    builder : LocalBuilder
    runner : LocalRunner
    callbacks : sequence
        Objects with ``callback(inputs, results)`` (e.g. ``records.RecordToFile``).

    Returns
    -------
    list of MeasureResult
    """
    return ProgramMeasurer(builder, runner, callbacks).measure(inputs)
