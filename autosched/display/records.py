"""A record log as a sortable HTML table (click a column header to sort by it)."""

from __future__ import annotations

import html
import math
import time

from ..measure.record_rows import record_rows

__all__ = ["RecordsTable"]

_CELL = "border:1px solid #ccc;padding:2px 6px;text-align:left"
# Sorts the table's rows by the clicked column: numbers as numbers (each cell carries its raw
# value in data-v), text otherwise; a second click reverses. Inline, so no extension is needed.
_SORT_JS = (
    "(function(th){var b=th.closest('table').tBodies[0],i=th.cellIndex,"
    "up=th.dataset.up!=='1';th.dataset.up=up?'1':'0';"
    "Array.from(b.rows).sort(function(x,y){var a=x.cells[i].dataset.v,c=y.cells[i].dataset.v,"
    "p=parseFloat(a),q=parseFloat(c),r=(isNaN(p)||isNaN(q))?a.localeCompare(c):p-q;"
    "return up?r:-r}).forEach(function(r){b.appendChild(r)})})(this)"
)
_HEADERS = (("trial", "trial"), ("task", "task"), ("target", "target"),
            ("cost", "cost (ms)"), ("gflops", "GFLOP/s"), ("error", "error"),
            ("time", "time"), ("steps", "steps"))  # fmt: skip


def _shown(column: str, value) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    if column == "cost":
        return f"{value * 1e3:.4f}"
    if column == "gflops":
        return f"{value:.2f}"
    if column == "time":
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    return str(value)


class RecordsTable:
    """The measurements of a record log, one row each, as a notebook table.

    Parameters
    ----------
    log : str or Path
        The record file.
    tasks : sequence of SearchTask, optional
        Names the rows by the tasks' ``desc`` (see :func:`autosched.records.record_rows`).
    max_rows : int
        Show at most this many rows (the fastest first); ``rows`` keeps them all.
    """

    def __init__(self, log, tasks=None, max_rows: int = 200):
        self.log = log
        self.rows = record_rows(log, tasks)
        self.max_rows = max_rows

    def _fastest(self) -> list[dict]:
        def cost(r):
            return r["cost"] if r["cost"] == r["cost"] else math.inf

        return sorted(self.rows, key=cost)[: self.max_rows]

    def __repr__(self) -> str:
        ok = sum(r["error"] == "NO_ERROR" for r in self.rows)
        return f"<RecordsTable of {self.log}: {len(self.rows)} records, {ok} without error>"

    def _repr_html_(self) -> str:
        head = "".join(
            f'<th style="{_CELL};cursor:pointer" onclick="{_SORT_JS}">{html.escape(t)}</th>'
            for _, t in _HEADERS
        )
        body = []
        for r in self._fastest():
            cells = "".join(
                f'<td style="{_CELL}" data-v="{html.escape(str(r[c]))}">'
                f"{html.escape(_shown(c, r[c]))}</td>"
                for c, _ in _HEADERS
            )
            body.append(f"<tr>{cells}</tr>")
        shown = len(body)
        caption = (
            f"<b>{html.escape(str(self.log))}</b>: {len(self.rows)} records"
            + (f", the fastest {shown} shown" if shown < len(self.rows) else "")
            + " (click a header to sort)"
        )
        return (
            f'<div>{caption}<table style="border-collapse:collapse;font-family:monospace;'
            f'font-size:12px"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
            "</table></div>"
        )
