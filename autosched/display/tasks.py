"""The task list of a network: a plain list of ``SearchTask`` that a notebook shows as the
seed's task table, each task's compute DAG folded in a ``<details>``."""

from __future__ import annotations

import html

from tensorir.display import format_flops, html_table

__all__ = ["TaskList"]


class TaskList(list):
    """``extract_tasks``' tasks: a ``list`` (index it, loop over it, pass it on) with weights.

    Parameters
    ----------
    tasks : iterable of SearchTask
    weights : sequence of int, optional
        How often each task's subgraph occurs in the network (shown in the table).
    """

    def __init__(self, tasks=(), weights=None):
        super().__init__(tasks)
        self.weights = None if weights is None else list(weights)

    def rows(self) -> list[dict]:
        """One dict per task: index, name, weight, FLOPs, workload key and the printed DAG."""
        weights = self.weights if self.weights is not None else [None] * len(self)
        return [
            {"id": i, "task": task.desc, "weight": w, "flops": task.compute_dag.flop_count(),
             "workload_key": task.workload_key, "dag": str(task.compute_dag)}
            for i, (task, w) in enumerate(zip(self, weights))
        ]  # fmt: skip

    def _repr_html_(self) -> str:
        headers = ["ID", "task", "weight", "FLOPs", "workload key", "compute DAG"]
        cells = []
        for r in self.rows():
            stages = r["dag"].count("\n") + 1
            dag = (
                f"<details><summary>{stages} stages</summary>"
                f"<pre>{html.escape(r['dag'])}</pre></details>"
            )
            weight = "" if r["weight"] is None else r["weight"]
            cells.append([r["id"], r["task"], weight, format_flops(r["flops"]),
                          r["workload_key"], dag])  # fmt: skip
        return f"<div><b>{len(self)} search tasks</b>{html_table(headers, cells, (5,))}</div>"
