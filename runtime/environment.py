"""The ``AUTOSCHED_*`` environment variables and the usable core count, read in one place.

Every variable the project reads is in :data:`VARIABLES` with its parser and default; code
reads one with :func:`env` and never touches ``os.environ`` itself, so a bad value is one clear
error naming the variable wherever it is first read. :func:`cpu_count` is the one core count
(affinity- and cgroup-quota-aware) that builders, feature workers, the cost model, hardware
params and the CPU runtime all use.

This module lives in ``runtime`` because the runtime reads some of these variables and may not
import ``autosched``; ``autosched.workers`` re-exports both functions. docs/environment.md lists
the variables.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["VARIABLES", "Variable", "cpu_count", "env"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError
    return value


def _flag(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError


def _overlap(text: str) -> str:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on", "full"):
        return "full"
    if low in ("0", "false", "no", "off"):
        return "off"
    if low in ("build", "auto"):
        return low
    raise ValueError


def _launcher(text: str) -> str:
    low = text.strip().lower()
    if low not in ("openmp", "threadpool"):
        raise ValueError
    return low


@dataclass(frozen=True)
class Variable:
    """One environment variable: how to parse it, what a valid value is, its default."""

    name: str
    parse: Callable[[str], object]
    expected: str  # shown in the error for a bad value
    default: object
    doc: str


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable(
            "AUTOSCHED_NUM_THREADS",
            _positive_int,
            "a positive int",
            None,
            "threads of a parallel CPU kernel, and the cores a CPU SearchTask's hardware "
            "params assume (default: cpu_count())",
        ),
        Variable(
            "AUTOSCHED_PARALLEL_LAUNCHER",
            _launcher,
            "'openmp' or 'threadpool'",
            "threadpool",
            "how CPU kernels run their parallel loops: our own thread pool (per-thread ranges "
            "with stealing, so a descheduled thread is never waited for), or libgomp's "
            "GOMP_parallel (static ranges; kept for comparison)",
        ),
        Variable(
            "AUTOSCHED_FEATURE_WORKERS",
            _non_negative_int,
            "a non-negative int",
            None,
            "feature extraction worker processes (0: in the tuning process; default: "
            "cpu_count(), none on a single core)",
        ),
        Variable(
            "AUTOSCHED_OPENCL_PLATFORM",
            str,
            "a substring of an OpenCL platform name",
            None,
            "which OpenCL platform runs OpenCL kernels (default: the first with a device)",
        ),
        Variable(
            "AUTOSCHED_SPLIT_K_DENSE",
            _flag,
            "1/0, true/false, yes/no or on/off",
            True,
            "on GPU targets, split few-row long-K dense layers along K (split_k_dense)",
        ),
        Variable(
            "AUTOSCHED_CONV_SPLIT_K",
            _flag,
            "1/0, true/false, yes/no or on/off",
            True,
            "on GPU targets, compute implicit-GEMM conv2d with few output tiles in slices of K "
            "(conv2d_gemm.split_k_slices)",
        ),
        Variable(
            "AUTOSCHED_CUDA_GRAPH",
            _flag,
            "1/0, true/false, yes/no or on/off",
            True,
            "capture a network's CUDA kernels into a CUDA graph, and time short kernels as "
            "graph replays",
        ),
        Variable(
            "AUTOSCHED_PROGRAMMATIC_LAUNCH",
            _flag,
            "1/0, true/false, yes/no or on/off",
            True,
            "link a network's CUDA graph kernels by programmatic edges on sm_90 and newer (each "
            "kernel launches while the one before it finishes)",
        ),
        Variable(
            "AUTOSCHED_MAX_KERNEL_SIZE",
            _positive_int,
            "a positive int",
            500_000,
            "the most statements plus expression nodes one kernel may emit after unrolling; "
            "larger kernels are refused by build and network builds (KernelSizeError)",
        ),
        Variable(
            "AUTOSCHED_CHECK_INDICES",
            _flag,
            "1/0, true/false, yes/no or on/off",
            True,
            "check data-dependent indices (A[B[i]], embedding lookups) at run time: an "
            "out-of-range one is an IndexOutOfRangeError naming the value and the tensor; 0 "
            "drops the check for speed once the inputs are validated (an out-of-range id then "
            "reads outside the tensor)",
        ),
        Variable(
            "AUTOSCHED_OVERLAP",
            _overlap,
            "auto, full (or 1/on), build, or off (or 0)",
            "auto",
            "search a network tune's next round while this round is measured: full (beside "
            "building and running), build (beside building only, runs wait for a quiet "
            "host), off; auto: full for GPU targets and RPC runners, off for the local CPU "
            "(autosched/measure/overlap.py)",
        ),
        Variable(
            "AUTOSCHED_STRICT",
            _flag,
            "1/0, true/false, yes/no or on/off",
            False,
            "raise the unexpected errors the library otherwise catches, logs at DEBUG and "
            "counts (autosched/suppressed.py); on in the test suite (tests/conftest.py)",
        ),
    )
}

# (name, raw text) -> parsed value: each distinct value is parsed once.
_parsed: dict[tuple[str, str], object] = {}


def env(name: str):
    """The parsed value of the environment variable ``name``, or its default when unset/empty.

    Parameters
    ----------
    name : str
        A key of :data:`VARIABLES`.

    Raises
    ------
    ValueError
        When the variable holds a value its parser rejects; the message names the variable,
        the value and what it expects.
    """
    var = VARIABLES.get(name)
    if var is None:
        raise KeyError(f"{name} is not an autosched environment variable; see docs/environment.md")
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return var.default
    key = (name, raw)
    if key not in _parsed:
        try:
            _parsed[key] = var.parse(raw.strip())
        except ValueError:
            raise ValueError(
                f"environment variable {name}={raw!r} is invalid: expected {var.expected} "
                f"({var.doc}); fix or unset it"
            ) from None
    return _parsed[key]


CGROUP_ROOT = "/sys/fs/cgroup"  # where the cgroup file systems are mounted
PROC_SELF_CGROUP = "/proc/self/cgroup"  # this process's cgroup per hierarchy


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per hierarchy: ``""`` for v2, ``"cpu"`` for v1's cpu one."""
    paths = {}
    try:
        with open(PROC_SELF_CGROUP) as f:
            for line in f:
                parts = line.strip().split(":", 2)
                if len(parts) == 3:
                    for controller in parts[1].split(",") if parts[1] else [""]:
                        paths[controller] = parts[2]
    except OSError:
        pass
    return paths


def _with_ancestors(base: str, rel: str) -> list[str]:
    """``base/rel`` and each folder above it up to ``base``: a parent's quota caps a child."""
    parts = [p for p in rel.split("/") if p and p != ".."]
    return [os.path.join(base, *parts[:k]) for k in range(len(parts), -1, -1)]


def _read_words(path: str) -> list[str] | None:
    try:
        with open(path) as f:
            return f.read().split()
    except OSError:
        return None


def _cgroup_quota_cores() -> int | None:
    """Cores allowed by a cgroup CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), if any.

    The process's own cgroup (``/proc/self/cgroup``) and its ancestors are read, the smallest
    quota wins; in a container whose cgroup is the mount's root that is the root's file.
    """
    own = _own_cgroups()
    quotas = []
    for folder in _with_ancestors(CGROUP_ROOT, own.get("", "/")):
        words = _read_words(os.path.join(folder, "cpu.max"))
        try:
            if words and words[0] != "max":
                quotas.append(int(words[0]) / int(words[1]))
        except (ValueError, IndexError, ZeroDivisionError):
            continue
    if not quotas:  # cgroup v1
        for base in ("cpu", "cpu,cpuacct"):
            for folder in _with_ancestors(os.path.join(CGROUP_ROOT, base), own.get("cpu", "/")):
                quota = _read_words(os.path.join(folder, "cpu.cfs_quota_us"))
                period = _read_words(os.path.join(folder, "cpu.cfs_period_us"))
                try:
                    if quota and period and int(quota[0]) > 0 and int(period[0]) > 0:
                        quotas.append(int(quota[0]) / int(period[0]))
                except ValueError:
                    continue
            if quotas:
                break
    return max(1, math.ceil(min(quotas))) if quotas else None


def cpu_count() -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup CPU quota.

    ``os.cpu_count()`` counts the machine's cores, which over-subscribes a container or a
    ``taskset``-restricted process; this is what every process pool and thread count uses.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_quota_cores()
    return max(1, min(cores, quota) if quota else cores)
