"""The local builder: candidates to code in a pool of worker processes, each build with a
timeout (re-exported by :mod:`autosched.measure.local`, where users import it), and the
context-manager base of the objects that own worker processes."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from ..workers import WorkerPool, cpu_count
from . import worker as _worker
from .data import BuildResult, MeasureErrorNo, MeasureInput
from .data import steps_json_of as _steps_json


class ClosedOnExit:
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


class LocalBuilder(ClosedOnExit):
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
