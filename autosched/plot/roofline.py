"""The roofline of a tuning log: each task's best achieved GFLOP/s against its arithmetic
intensity (FLOPs per byte of its inputs and outputs), under the machine's roofs."""

from __future__ import annotations

import math

import numpy as np

from ..measure.record_rows import record_rows
from .figure import new_figure
from .machine import machine_peak

__all__ = ["roofline"]


def roofline(log, tasks=None, peak=None):
    """Each task's best GFLOP/s against FLOPs per byte, with the roofs ``min(peak, bandwidth
    x intensity)``.

    Parameters
    ----------
    log : str or Path
    tasks : sequence of SearchTask, optional
        The tasks of the log (their DAGs give FLOPs and bytes; the DAGs registered in this
        process are used otherwise).
    peak : MachinePeak, optional
        The roofs; measured on this machine by default (:func:`machine_peak`). A GPU log needs
        the GPU's numbers here.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        When no task of the log has a successful measurement and a known DAG.
    """
    best: dict[str, dict] = {}
    for r in record_rows(log, tasks):
        if math.isnan(r["gflops"]) or math.isnan(r["bytes"]):
            continue
        if r["task"] not in best or r["gflops"] > best[r["task"]]["gflops"]:
            best[r["task"]] = r
    if not best:
        raise ValueError(
            f"roofline: no task of {log} has a successful measurement and a known DAG; "
            "pass tasks=[...] (the SearchTasks of the log)"
        )
    peak = peak or machine_peak()
    intensity = {t: r["flops"] / r["bytes"] for t, r in best.items()}
    fig, (ax,) = new_figure(6, 4.5)
    lo = min(min(intensity.values()) / 4, peak.gflops / peak.bandwidth_gbs / 4)
    hi = max(max(intensity.values()) * 4, peak.gflops / peak.bandwidth_gbs * 4)
    xs = np.geomspace(lo, hi, 200)
    ax.plot(xs, np.minimum(peak.gflops, peak.bandwidth_gbs * xs), color="black",
            label=f"roof: {peak.gflops:.0f} GFLOP/s, {peak.bandwidth_gbs:.1f} GB/s")  # fmt: skip
    for task, r in best.items():
        ax.scatter([intensity[task]], [r["gflops"]], label=f"{task}: {r['gflops']:.2f} GFLOP/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of inputs and outputs)")
    ax.set_ylabel("achieved GFLOP/s (best measured)")
    ax.set_title("Roofline: best kernel per task")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return fig
