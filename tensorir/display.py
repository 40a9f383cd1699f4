"""HTML forms of the IR objects for notebooks (``_repr_html_``), kept apart from the IR.

Jupyter calls ``_repr_html_`` on the last value of a cell; the IR classes answer with the
functions here, which take plain values (rows, text) so that this module imports no IR module
and no import cycle forms. Highlighting uses pygments when it is installed (it is in every
notebook setup); without it the text goes into a plain ``<pre>``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["code_html", "format_flops", "html_table", "stage_table_html"]

# One inline style for every table, so a table looks the same in Jupyter, VS Code and the
# docs site (none of which share a stylesheet).
_TABLE_STYLE = "border-collapse:collapse;font-family:monospace;font-size:12px"
_CELL_STYLE = "border:1px solid #ccc;padding:2px 6px;text-align:left"


def format_flops(flops: float) -> str:
    """``33.55 MFLOP``; ``unknown`` for a negative count (an op the estimator cannot count)."""
    if flops < 0:
        return "unknown"
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("KFLOP", 1e3)):
        if flops >= scale:
            return f"{flops / scale:.2f} {unit}"
    return f"{flops:.0f} FLOP"


def html_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], raw_columns: Sequence[int] = ()
) -> str:
    """A small bordered table; cells are escaped except in the columns ``raw_columns``
    (cells that already hold HTML, such as a folded ``<details>``)."""
    head = "".join(f'<th style="{_CELL_STYLE}">{html.escape(str(h))}</th>' for h in headers)
    body = []
    for row in rows:
        cells = (
            str(cell) if k in raw_columns else html.escape(str(cell)) for k, cell in enumerate(row)
        )
        body.append("<tr>" + "".join(f'<td style="{_CELL_STYLE}">{c}</td>' for c in cells))
    return (
        f'<table style="{_TABLE_STYLE}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(r + '</tr>' for r in body)}</tbody></table>"
    )


def code_html(text: str, language: str = "python") -> str:
    """``text`` highlighted by pygments as ``language`` (inline styles, no stylesheet needed),
    or escaped in a ``<pre>`` when pygments is missing or does not know the language."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:
        return f"<pre>{html.escape(text)}</pre>"
    try:
        lexer = get_lexer_by_name(language)
    except ClassNotFound:
        return f"<pre>{html.escape(text)}</pre>"
    return highlight(text, lexer, HtmlFormatter(noclasses=True, nobackground=True))


def stage_table_html(title: str, rows: Sequence[dict], total_flops: float) -> str:
    """The stages of a compute DAG (rows of ``ComputeDAG.stage_rows()``) as a table."""
    headers = ["stage", "kind", "shape", "dtype", "FLOPs", "expression"]
    cells = [
        [r["name"], r["kind"], "x".join(map(str, r["shape"])) or "scalar", r["dtype"],
         "" if r["kind"] == "placeholder" else format_flops(r["flops"]), r["expression"]]
        for r in rows
    ]  # fmt: skip
    caption = f"<b>{html.escape(title)}</b> &middot; {format_flops(total_flops)} per run"
    return f"<div>{caption}{html_table(headers, cells)}</div>"
