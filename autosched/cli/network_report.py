"""What the network commands (cli/network.py) print after a run: every output checked against
its reference, the estimated against the measured latency with the reason they differ, and
whether other load on the machine explains it."""

from __future__ import annotations

import os

import numpy as np


def latency_comparison(
    estimated_ms: float | None,
    measured_ms: float,
    gpu: bool,
    cold_tuned: bool = False,
    busy: str | None = None,
    coverage: tuple[int, int] | None = None,
) -> str:
    """One line: the task scheduler's estimate beside the measured network latency, and why
    they differ (the reason depends on which one is larger).

    ``coverage`` is ``(tasks with a record, tasks)``: when some tasks have none, the estimate
    sums the others (:meth:`TaskScheduler.partial_latency_ms`) and the line says so.

    ``cold_tuned`` says the candidates were timed with cold caches, as the network runs them;
    ``busy`` (from :func:`machine_busy`) names other load on the cores, the likeliest reason for a
    network far slower than its kernels."""
    head = (
        f"Latency: estimated {'-' if estimated_ms is None else f'{estimated_ms:.3f} ms'} "
        f"(sum of weight x best kernel time), measured {measured_ms:.3f} ms (network median)."
    )
    if estimated_ms is None:
        return head + " No estimate: no task has a measured record yet."
    if coverage is not None and coverage[0] < coverage[1]:
        return head + (
            f" The estimate covers the {coverage[0]} of {coverage[1]} tasks that have a measured "
            "record; the others run their default schedules and are not in it, so the network "
            "is slower than the estimate (tune longer to measure every task)."
        )
    if abs(measured_ms - estimated_ms) <= 0.15 * estimated_ms:
        return head + " They agree within 15%."
    if measured_ms > estimated_ms:
        reasons = []
        if busy:
            reasons.append(f"{busy}, so kernels ran on shared cores (time it again when quiet)")
        if not cold_tuned:
            reasons.append(
                "tuning times each kernel alone with warm caches, while the network runs kernels "
                "back to back with cold caches"
            )
        if gpu:
            reasons.append("launch gaps between kernels")
        reasons.append("kernels without a reduction are not tuned, so not in the estimate")
        return head + " The network is slower: " + "; ".join(reasons) + "."
    return head + (
        " The network is faster: the estimate holds each task's best measurement so far, and "
        "early or noisy ones (a kernel timed while the machine was busy, or an untuned default) "
        "count in full until a better record replaces them; more tuning brings them together."
    )


def machine_busy(cores: int) -> str | None:
    """A phrase naming other load on this machine's cores (the 1-minute load average above the
    cores this process uses, less the one it is itself), or None when it looks quiet."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None
    if load <= cores + 1:
        return None
    return f"the machine is busy (load average {load:.1f} on {cores} cores)"


def check_outputs(outs, refs, rtol=1e-3, atol=1e-5) -> tuple[bool, list[str]]:
    """Compare EVERY network output with its reference.

    Returns
    -------
    ok : bool
        True when there are as many outputs as references and each is close to its reference.
    lines : list of str
        One report line per output (``Output 1 (2, 5): ... (WRONG)``).
    """
    lines, ok = [], len(outs) == len(refs)
    if not ok:
        lines.append(f"The network gave {len(outs)} outputs, the reference {len(refs)} (WRONG)")
    for k, (out, ref) in enumerate(zip(outs, refs)):
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            ok = False
            lines.append(f"Output {k}: shape {out.shape}, the reference's {ref.shape} (WRONG)")
            continue
        diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        err = float(np.max(diff, initial=0.0) / (np.max(np.abs(ref), initial=0.0) + 1e-12))
        good = bool(np.allclose(out, ref, rtol=rtol, atol=atol))
        ok = ok and good
        lines.append(
            f"Output {k} {out.shape}: max relative error vs numpy reference {err:.2e} "
            f"({'OK' if good else 'WRONG'})"
        )
    return ok, lines
