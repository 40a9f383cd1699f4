"""A record log as rows of plain values: one dict per measurement.

What the records' table (:class:`autosched.display.RecordsTable`), ``to_dataframe`` and the
plots (:mod:`autosched.plot`) read, so they agree on the columns:

``trial``
    the record's position among the log's records (0, 1, ...), the order they were measured;
``workload``, ``task``, ``target``
    the workload key, a readable task name (the ``desc`` of a task passed in ``tasks``, else the
    compute stages of the DAG registered for the key joined by ``_``, as ``SearchTask`` names
    them, else the key's hash), and the target string;
``cost``
    mean seconds per run (NaN for a failed measurement);
``gflops``
    the task's FLOPs over ``cost`` in GFLOP/s (NaN when failed or the DAG is unknown);
``flops``, ``bytes``
    the task's FLOPs of one run and the bytes its inputs and outputs hold (the least memory
    traffic of a run; NaN when the DAG is unknown);
``error``
    the ``MeasureErrorNo`` name (``NO_ERROR`` for a success);
``time``
    Unix seconds when the measurement finished; ``steps``: the number of transform steps;
``build_s``, ``run_s``
    seconds spent building and running the candidate (NaN in records written before they
    were kept).
"""

from __future__ import annotations

import math

from .data import MeasureErrorNo
from .records import load_records

__all__ = ["COLUMNS", "record_rows"]

COLUMNS = ("trial", "workload", "task", "target", "cost", "gflops", "flops", "bytes", "error",
           "time", "steps", "build_s", "run_s")  # fmt: skip


def _key_hash(key: str) -> str:
    head = key[2:].split('"')[0] if key.startswith('["') else key
    return head.split(":")[-1][:12]


def _io_bytes(dag) -> float:
    """Bytes of the DAG's inputs and outputs: what one run must at least read and write."""
    import numpy as np

    try:
        return float(sum(math.prod(t.shape) * np.dtype(t.dtype).itemsize for t in dag.tensors))
    except TypeError:  # a dtype numpy does not know
        return math.nan


def _error_name(error_no: int) -> str:
    try:
        return MeasureErrorNo(error_no).name
    except ValueError:
        return f"ERROR_{error_no}"


def record_rows(log, tasks=None) -> list[dict]:
    """The rows of ``log`` (a record file path), in file order.

    Parameters
    ----------
    log : str or Path
    tasks : sequence of SearchTask, optional
        Name the rows by the tasks' ``desc`` and count FLOPs on their DAGs (the registry of
        DAGs seen in this process is used for keys not among them).

    Raises
    ------
    FileNotFoundError
        If ``log`` does not exist.
    """
    names = {t.workload_key: t.desc for t in tasks or ()}
    flops_of: dict[str, float] = {}
    bytes_of: dict[str, float] = {}
    rows = []
    for trial, (inp, res) in enumerate(load_records(log, dags=tasks)):
        key, dag = inp.task.workload_key, inp.task.compute_dag
        if key not in flops_of:
            count = dag.flop_count() if dag is not None else -1.0
            flops_of[key] = count if count > 0 else math.nan
            bytes_of[key] = _io_bytes(dag) if dag is not None else math.nan
        if key not in names:
            stages = [op.name for op in dag.compute_ops] if dag is not None else []
            names[key] = "_".join(stages) or _key_hash(key)
        ok = res.error_no == MeasureErrorNo.NO_ERROR
        cost = res.mean_cost if ok else math.nan
        rows.append(
            {
                "trial": trial,
                "workload": key,
                "task": names[key],
                "target": inp.task.target,
                "cost": cost,
                "gflops": flops_of[key] / cost / 1e9 if ok else math.nan,
                "flops": flops_of[key],
                "bytes": bytes_of[key],
                "error": _error_name(res.error_no),
                "time": res.timestamp,
                "steps": len(inp.state.steps),
                "build_s": res.build_s,
                "run_s": res.run_s,
            }
        )
    return rows


def to_dataframe(log, tasks=None):
    """The measurements of ``log`` as a pandas DataFrame, one row per record.

    Columns as in :mod:`autosched.measure.record_rows`; ``time`` becomes a UTC timestamp.

    Raises
    ------
    ImportError
        Without pandas (``pip install "autosched[data]"``).
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(
            'autosched.records.to_dataframe needs pandas: pip install "autosched[data]"'
        ) from None
    frame = pd.DataFrame(record_rows(log, tasks), columns=list(COLUMNS))
    frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
    return frame
