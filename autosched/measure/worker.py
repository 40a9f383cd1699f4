"""The measuring processes of :mod:`autosched.measure.local`: their code, and the parent's
handle on the runner process (:class:`RunnerProcess`).

The RPC servers' device process (:mod:`autosched.rpc.device_process`, a higher layer) runs
candidates with the same code, so these pieces are public: :class:`CandidateRunner`,
:func:`device_usable`, :func:`param_array`, :func:`check_output`, :func:`short_error`,
:func:`random_inputs` and :func:`build_one`.

Two kinds of worker process (started by :mod:`autosched.workers`: fresh interpreters that
import this module, never the user's script; no inherited threads, and the CPU thread pool
starts fresh in the runner) use this module:

* builder pool workers call :func:`build_one`: replay the steps on the DAG, lower, generate
  code, compile it to machine code where that can be done off the device (LLVM to an object
  file, CUDA to a cubin with nvcc) and return the codegen ``Source`` as plain values, the
  machine code under ``"binary"``;
* the runner's long-lived worker runs :func:`runner_main`: load each candidate on the device
  its language runs on (CPU, CUDA through pycuda, OpenCL through pyopencl; GPU contexts are
  created in this process only), check its output against the reference interpreter once,
  then time it. A device error that leaves the GPU context unusable (CUDA's sticky errors such
  as an illegal address) is reported and the worker asks to be replaced.

Everything crossing the process boundary is plain values (dicts, tuples, JSON step lists) or a
pickled ``ComputeDAG``.
"""

from __future__ import annotations

import ctypes
import signal
import time
import traceback

import numpy as np

from tensorir.bounds_check import index_extents

from ..suppressed import suppressed
from .data import MeasureErrorNo, is_outlier

# The error codes as plain ints (what the worker sends back), from the data-only module.
NO_ERROR = int(MeasureErrorNo.NO_ERROR)
INSTANTIATION_ERROR = int(MeasureErrorNo.INSTANTIATION_ERROR)
COMPILE_HOST = int(MeasureErrorNo.COMPILE_HOST)
COMPILE_DEVICE = int(MeasureErrorNo.COMPILE_DEVICE)
RUNTIME_DEVICE = int(MeasureErrorNo.RUNTIME_DEVICE)
WRONG_ANSWER = int(MeasureErrorNo.WRONG_ANSWER)
BUILD_TIMEOUT = int(MeasureErrorNo.BUILD_TIMEOUT)

# TEST-ONLY fault injection: the runner passes one of these per candidate when a test asks for
# it (``LocalRunner.test_faults``); production runs always pass None.
# "device_fault" launches a kernel that writes far out of bounds on the candidate's device (a
# CUDA illegal address; on PoCL, which runs kernels in-process, a segfault).
# "slow_load" makes loading (the compile phase) take SLOW_LOAD_S seconds, as a cold compiler
# on a busy machine does.
FAULTS = ("segfault", "hang", "wrong", "raise", "device_fault", "slow_load")
SLOW_LOAD_S = 4.0

_SEED = 0  # inputs are random but reproducible across runs and machines


def short_error(exc: BaseException, limit: int = 400) -> str:
    """``Type: first lines of the message``, short enough for a log line."""
    text = str(exc).strip() or repr(exc)
    if len(text) > limit:
        text = text[:limit] + " ..."
    return f"{type(exc).__name__}: {text}"


# ----------------------------------------------------------------------------- building


class _SoftTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _SoftTimeout()


def build_one(job: tuple, name: str = "main", layout_rewrite: bool = True) -> tuple:
    """Build one candidate. ``job = (dag, steps_json, target, timeout[, build_func])``;
    ``name`` and ``layout_rewrite`` as :func:`autosched.kernel.generate_source` (a network's
    kernel rebuilt from the state its library records keeps its name).

    Returns ``(source_dict or None, error_no, error_msg, seconds, phases)``, ``phases`` the
    seconds of ``"lower"`` (replay included), ``"codegen"`` and ``"compile"`` (for the timing
    ledger, :mod:`autosched.measure.timing`). The timeout is enforced
    here with SIGALRM (lowering and codegen are Python, so the alarm interrupts them; nvcc is
    killed by ``subprocess.run`` when the alarm interrupts the wait); the parent keeps a hard
    deadline as well in case the process stops responding altogether. A CUDA ``target`` should
    carry ``-arch`` (the parent fills it from the device).
    """
    dag, steps_json, target, timeout, *link = job
    from autosched.kernel import emit_source, lower_for
    from tensorir.schedule import replay
    from tensorir.steps import steps_from_json

    start = time.perf_counter()
    phases: dict[str, float] = {}
    mark = [start]

    def lap(name: str) -> None:  # seconds since the previous lap, charged to ``name``
        now = time.perf_counter()
        phases[name] = phases.get(name, 0.0) + now - mark[0]
        mark[0] = now

    signal.signal(signal.SIGALRM, _on_alarm)
    stage = "replaying the steps"
    try:
        # The alarm is one-shot and cancelled in the inner finally, so it can only fire inside
        # this block; the outer handlers never see it.
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            state = replay(dag, steps_from_json(steps_json))
            stage = "lowering / code generation"
            # Network tasks on the CPU read their weights pre-transformed, as the network
            # build will store them (the DAG lists them; others are left alone).
            program = lower_for(state, target, name, layout_rewrite=layout_rewrite)
            lap("lower")
            src = emit_source(program, target).as_dict()
            lap("codegen")
            if src["lang"] == "llvm":
                # The O3 pipeline and machine code here, in the parallel builders, so that the
                # single measuring process only links the object file.
                from runtime.cpu import compile_object

                stage = "LLVM compilation"
                src["binary"] = compile_object(src["code"])
                if link:
                    stage = "linking with build_func"
                    _link_check(src, target, link[0])
            elif src["lang"] == "cuda":
                # NVRTC (or nvcc, ~1 s per candidate): here, on all host cores, not in the runner.
                from codegen.target import Target
                from runtime.cuda import DEFAULT_ARCH, compile_cubin

                stage = "CUDA compilation"
                arch = Target(target).get("arch") or DEFAULT_ARCH
                src["binary"] = compile_cubin(src["code"], arch)
            lap("compile")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _SoftTimeout:
        msg = f"build did not finish within {timeout:g} s (while {stage})"
        return None, BUILD_TIMEOUT, msg, time.perf_counter() - start, phases
    except Exception as exc:  # every failure becomes a result; the search goes on
        code = {"replaying the steps": INSTANTIATION_ERROR, "CUDA compilation": COMPILE_DEVICE}.get(
            stage, COMPILE_HOST
        )
        msg = f"{stage}: {short_error(exc)}"
        log = getattr(exc, "log", "")
        if log:
            msg += "\n" + log[:2000]
        return None, code, msg, time.perf_counter() - start, phases
    return src, NO_ERROR, "", time.perf_counter() - start, phases


def _link_check(src: dict, target: str, build_func) -> None:
    """Link the CPU candidate ``src`` into a shared library for ``target``'s triple with
    ``build_func`` (``"ndk"`` or ``fcompile``), as TVM's builder exports each candidate; the
    library is thrown away (the runner loads the object code)."""
    import tempfile

    from codegen.target import Target, cross_cpu, target_triple
    from runtime.shared_library import export_shared_library

    if build_func == "ndk":
        from autosched.contrib.ndk import create_shared as build_func
    triple = target_triple(Target(target))
    cpu, features = cross_cpu(Target(target)) if triple else (None, "")
    if triple is None:  # this host's: name it, for a linker that asks (zig, the NDK's)
        from runtime.cpu import _llvm

        triple = _llvm().get_default_triple()
    artifact = {k: v for k, v in src.items() if k != "binary"}
    with tempfile.TemporaryDirectory(prefix="autosched-build-") as tmp:
        export_shared_library(f"{tmp}/candidate.so", [artifact], {"kind": "kernel"},
                              triple=triple, fcompile=build_func, cpu=cpu,
                              features=features)  # fmt: skip


# ----------------------------------------------------------------------------- running


def random_inputs(dag) -> list[np.ndarray]:
    """Reproducible random inputs: uniform [-1, 1] floats, small positive ints.

    Never zeros or ones, which hide wrong indexing; ints stay positive so that integer division
    and modulo in a DAG neither divide by zero nor depend on C-vs-Python rounding of negatives;
    a tensor used as a data-dependent index stays below the extent it indexes.
    """
    from tensorir.dtype import is_float, to_numpy

    rng = np.random.default_rng(_SEED)
    arrays = []
    # Index tensors (token ids of an embedding lookup) stay inside the tables they index.
    index_limit = index_extents(dag.compute_ops)
    for t in dag.input_tensors:
        dt = to_numpy(t.dtype)  # bfloat16 is ml_dtypes' (a numpy "void" kind)
        shape = tuple(int(s) for s in t.shape)
        if is_float(t.dtype):
            arrays.append(rng.uniform(-1.0, 1.0, shape).astype(dt))
        elif dt.kind == "b":
            arrays.append(rng.integers(0, 2, shape).astype(dt))
        elif t.name in index_limit:
            arrays.append(rng.integers(0, max(1, min(index_limit[t.name], 8)), shape).astype(dt))
        else:
            arrays.append(rng.integers(1, 8, shape).astype(dt))
    return arrays


def param_array(value: np.ndarray, layout) -> np.ndarray:
    """A fresh copy of ``value``, in the kernel's layout where it reads one (a weight).

    Parameters
    ----------
    value : numpy.ndarray
        The argument in the DAG's layout.
    layout : tuple or None
        The kernel's ``ParamLayout`` of this argument as a tuple (``Module.layouts``), None
        when the kernel reads the DAG's layout.

    Returns
    -------
    numpy.ndarray
        A new array (the kernel may write its arguments).
    """
    if layout is None:
        return np.array(value)
    from tensorir.passes.layout_rewrite import ParamLayout

    return ParamLayout.from_tuple(layout).transform(value)


def check_output(name: str, got: np.ndarray, ref: np.ndarray) -> str | None:
    """None if ``got`` matches ``ref``, else a message with the max abs error."""
    got = got.reshape(ref.shape)
    if ref.dtype.kind in "iub":
        bad = got != ref
        atol, rtol = 0.0, 0.0
    else:
        rtol = 1e-2 if ref.dtype.itemsize <= 2 else 1e-3
        # Scale atol with the output's magnitude: a long float32 reduction loses absolute, not
        # relative, precision when terms cancel, and a fixed atol would flag correct kernels.
        finite = np.abs(ref[np.isfinite(ref)])
        atol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
        bad = ~np.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return None
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    err = np.where(np.isnan(err), np.inf, err)
    idx = np.unravel_index(int(np.argmax(np.where(bad, err, -1.0))), ref.shape)
    return (
        f"output {name!r} differs from the reference interpreter in {int(bad.sum())} of "
        f"{ref.size} elements: max abs error {float(err[bad].max()):.3g} at index "
        f"{tuple(int(i) for i in idx)} (got {got[idx].item()!r}, expected {ref[idx].item()!r}; "
        f"atol={atol:.3g}, rtol={rtol:g})"
    )


def _llc_bytes() -> int:
    """Size of the last-level cache (Linux sysfs), or 32 MiB when unknown."""
    best = 0
    for idx in range(6):
        path = f"/sys/devices/system/cpu/cpu0/cache/index{idx}/size"
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
        try:
            best = max(best, int(text.rstrip("KMG")) * mult)
        except ValueError:
            continue
    return best or 32 * 1024**2


class CandidateRunner:
    """Loads, checks and times candidates on this process's devices, keeping state across
    candidates: the reference outputs per workload key and the cache-flush buffer.

    The local runner's worker process (:func:`runner_main`) and the RPC servers' device
    process use it; :meth:`run` takes one built candidate (a job dict) and returns
    ``(costs, error_no, error_msg, restart)``.
    """

    def __init__(self):
        import runtime

        self.runtime = runtime
        self.refs: dict[str, tuple[list, list]] = {}  # workload key -> (inputs, outputs)
        self.flush_buf: np.ndarray | None = None

    def reference(self, key: str, dag) -> tuple[list, list]:
        if key not in self.refs:
            from tensorir.interp import eval_dag

            inputs = random_inputs(dag)
            self.refs[key] = (inputs, eval_dag(dag, inputs))
        return self.refs[key]

    def flush_cache(self) -> None:
        if self.flush_buf is None:
            # Twice the LLC: writing it evicts everything the kernel touched last time.
            self.flush_buf = np.zeros(2 * _llc_bytes() // 8, dtype=np.float64)
        self.flush_buf += 1.0

    def run(self, job: dict, on_loaded=None) -> tuple:
        """``(costs, error_no, error_msg, restart)`` for one built candidate; ``restart`` asks
        the parent to replace this process (its GPU context is no longer usable).

        ``on_loaded()`` is called once the candidate is compiled on the device and has run
        once (see :meth:`_check_and_time`): what comes after is the part the run timeout
        covers."""
        from runtime.module import LANG_DEVICE

        dev = self.runtime.device(LANG_DEVICE.get(job["source"]["lang"], "cpu"))
        costs, code, msg = self._run(job, dev, on_loaded or (lambda: None))
        restart = code == RUNTIME_DEVICE and not dev.on_host and not device_usable(dev)
        return costs, code, msg, restart

    def _run(self, job: dict, dev, on_loaded) -> tuple:
        from runtime.module import cpu_threads

        dag = job["dag"]
        inputs, refs = self.reference(job["key"], dag)
        try:
            mod = self.runtime.load_module(**job["source"], device=dev)
        except Exception as exc:
            return (), COMPILE_DEVICE, f"loading the module: {short_error(exc)}"
        in_names = [t.name for t in dag.input_tensors]
        out_names = [t.name for t in dag.output_tensors]
        by_name = dict(zip(in_names, inputs))
        outs = {
            n: np.full(r.shape, np.nan if r.dtype.kind == "f" else 0x5A, dtype=r.dtype)
            for n, r in zip(out_names, refs)
        }
        by_name.update(outs)
        try:
            # Copies: a buggy kernel writing into its inputs must not spoil later candidates.
            args = [param_array(by_name[p[0]], mod.layouts.get(p[0])) for p in mod.params]
        except KeyError as exc:
            return (), COMPILE_DEVICE, f"module param {exc} is not a tensor of the DAG"
        try:
            threads = job.get("num_threads") if dev.on_host else None
            with cpu_threads(dev, threads)():
                return self._check_and_time(mod, args, job, outs, refs, out_names, dev, on_loaded)
        except Exception as exc:
            return (), RUNTIME_DEVICE, f"running the kernel: {short_error(exc)}"

    def _check_and_time(self, mod, args, job, outs, refs, out_names, dev, on_loaded) -> tuple:
        """Run once (the output check's run), report ``on_loaded()``, check, then time.

        The first run belongs to loading, not to the run timeout: PoCL compiles a kernel for
        its work-group size at its first enqueue (about as long as the program build, seconds
        on a cold cache and a busy machine) and CUDA loads a module's kernels lazily."""
        fault = job["fault"]
        try:
            _inject(fault, before_run=True, dev=dev)
            mod(*args)
            on_loaded()
            _inject(fault, before_run=False, args=args)
            if job["check"]:
                for a, (name, _, _) in zip(args, mod.params):
                    if name in outs:
                        msg = check_output(name, a, refs[out_names.index(name)])
                        if msg:
                            return (), WRONG_ANSWER, msg
            costs = self.time(mod, args, job)
        except Exception as exc:
            return (), RUNTIME_DEVICE, f"running the kernel: {short_error(exc)}"
        return tuple(costs), NO_ERROR, ""

    def time(self, mod, args, job) -> list[float]:
        """The costs of ``repeat`` repeats; each tick-sized outlier (``data.is_outlier``: this
        repeat was descheduled) is re-measured once, the new repeat appended: the record keeps
        both, and ``mean_cost`` leaves the outliers out."""
        costs = self._time(mod, args, job, job["repeat"])
        outliers = sum(is_outlier(c, min(costs)) for c in costs)
        if outliers:
            costs += self._time(mod, args, job, outliers)
        return costs

    def _time(self, mod, args, job, repeat: int) -> list[float]:
        number, min_ms = job["number"], job["min_repeat_ms"]
        on_device = job.get("flush_device", False)
        if not job["flush"] and not on_device:
            return list(mod.time_evaluator(number, repeat, min_ms)(*args).results)
        # As TVM: with flushing every repeat is a single cold run. time_evaluator has no
        # pre-run hook, so this drives the module's bound launch function directly.
        handles, _ = mod._prepare(args)
        fn = mod._bound_run(handles)
        backend = mod._backend
        flush = self.flush_cache
        if on_device:
            flush = getattr(backend, "flush_cache", None)
            if flush is None:
                raise RuntimeError(
                    f"enable_gpu_cache_flush: the {getattr(backend, 'kind', '?')} device has no "
                    "cache flush (CUDA only); measure without it"
                )
        backend.time_launches(fn, 1)  # warm-up (lazy loading, page faults)
        costs = []
        limit, start = job.get("time_limit_s"), time.perf_counter()
        for _ in range(repeat):
            flush()
            costs.append(backend.time_launches(fn, 1))
            # A kernel of a second or more per run (a default schedule of a large conv) keeps
            # the repeats it had time for, rather than running into the timeout and losing all.
            if limit is not None and time.perf_counter() - start > limit:
                break
        return costs


def device_usable(dev) -> bool:
    """Whether ``dev`` still works: False when its context is broken (after a CUDA illegal
    address every call fails), so the process owning it must be replaced.

    Parameters
    ----------
    dev : runtime device
        A device of this process (``runtime.device(...)``).

    Returns
    -------
    bool
        True when a small allocation, copy and synchronisation succeed.
    """
    try:
        backend = dev.backend
        buf = backend.alloc(4)
        backend.copy_to_device(buf, np.zeros(1, np.float32))
        backend.synchronize()
    except Exception:  # noqa: BLE001 - whatever the driver raises, the device is not usable
        suppressed("device check", expected=Exception)
        return False
    return True


_OOB_KERNEL = {
    "cuda": 'extern "C" __global__ void oob(float* a) { a[(1ull << 40) + threadIdx.x] = 1.0f; }',
    "opencl": "__kernel void oob(__global float* a) { a[(1ul << 40) + get_local_id(0)] = 1.0f; }",
}


def _device_fault(dev) -> None:
    """Write 4 TiB past a 4-byte buffer on ``dev`` and wait for the kernel."""
    import runtime
    from runtime.device import DEVICE_KINDS

    lang = DEVICE_KINDS[dev.kind].lang
    mod = runtime.load_module(
        lang,
        _OOB_KERNEL[lang],
        [("a", "float32", 1)],
        [],
        [("oob", ("a",), (1, 1, 1), (32, 1, 1))],
        device=dev,
    )
    mod(np.zeros(1, np.float32))


def _inject(fault: str | None, before_run: bool, args=None, dev=None) -> None:
    """TEST-ONLY: make this candidate crash, hang, raise or compute a wrong answer."""
    if fault is None:
        return
    if before_run and fault == "device_fault":
        if dev is None or dev.on_host:
            raise ValueError("the device_fault test fault needs a GPU (cuda / opencl) candidate")
        _device_fault(dev)
    if before_run and fault == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV, the process dies like a bad kernel
    if before_run and fault == "slow_load":
        time.sleep(SLOW_LOAD_S)
    if before_run and fault == "raise":
        raise RuntimeError("injected fault")
    if not before_run and fault == "hang":  # after the first run: a candidate too slow to time
        while True:
            time.sleep(1)
    if not before_run and fault == "wrong":
        args[-1].reshape(-1)[0] += 1  # outputs come last in params


def runner_main(conn) -> None:
    """Serve jobs from the parent over ``conn`` until it sends None or goes away.

    Protocol: reply ``("hello",)`` once started; for each job dict reply ``("ready", refs)``
    when the reference is available (the parent's compile timeout starts then; ``refs`` is
    the ``(inputs, outputs)`` just computed when the job has ``want_ref``, so that the parent
    can hand it to a replacement worker as ``job["ref"]`` instead of recomputing it),
    ``("loaded",)`` once the candidate is compiled on the device and has run once (its run
    timeout starts then; not sent when loading fails) and ``("done", costs, error_no,
    error_msg, restart)`` at the end.
    """
    try:
        runner = CandidateRunner()
    except Exception:
        conn.send(("failed", traceback.format_exc()))
        return
    conn.send(("hello",))
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        key = job["key"]
        fresh = key not in runner.refs
        try:
            if job.get("ref") is not None:  # the parent kept it from an earlier worker
                runner.refs[key] = job["ref"]
            refs = runner.reference(key, job["dag"])
        except Exception as exc:
            msg = f"reference interpreter failed: {short_error(exc)}"
            conn.send(("done", (), RUNTIME_DEVICE, msg, False))
            continue
        conn.send(("ready", refs if fresh and job.get("want_ref") else None))
        conn.send(("done", *runner.run(job, on_loaded=lambda: conn.send(("loaded",)))))


# ----------------------------------------------------------------------------- parent side


class RunnerProcess:
    """The parent's handle on the runner's worker process (a long-lived
    :class:`autosched.workers.WorkerProcess` serving :func:`runner_main`)."""

    START_TIMEOUT = 120.0  # importing numpy + llvmlite in a cold process on a busy machine

    def __init__(self):
        from ..workers import WorkerProcess

        self.worker = WorkerProcess(("autosched.measure.worker",), "measuring")
        self.proc = self.worker.proc
        self.conn = self.worker.conn
        self.worker.wait_ready(self.START_TIMEOUT)
        self.worker.serve(runner_main)
        reply = self.recv(self.START_TIMEOUT)
        if reply is None or reply[0] != "hello":
            detail = reply[1] if reply and reply[0] == "failed" else self.death()
            self.kill()
            raise RuntimeError(f"the measuring process did not start: {detail}")

    def recv(self, timeout: float):
        """The next message; ``("eof",)`` when the worker died, None when the timeout passed."""
        return self.worker.recv(timeout)

    def death(self) -> str:
        """Why the worker is gone, e.g. ``died with signal 11 (SIGSEGV)``."""
        return self.worker.death()

    def kill(self) -> None:
        self.worker.kill()

    def stop(self) -> None:
        self.worker.stop()
