"""The live view of a tuning run in a notebook: a progress bar and the curve of the objective
(estimated total latency, or a task's best GFLOP/s) against trials and seconds, redrawn after
every round in one output area.

In a Jupyter kernel the bar is a ``tqdm.auto`` widget when ipywidgets is installed, and an HTML
``<progress>`` inside the view otherwise (tqdm's text bar would only warn there); the curves are
inline SVG (no plotting library needed). The kernel is detected from ``sys.modules``, so this
module imports IPython only when it runs inside one.
"""

from __future__ import annotations

import html
import importlib.util
import sys
import time

from .svg import line_chart_svg

__all__ = ["LiveView", "in_notebook"]


def in_notebook() -> bool:
    """Whether this code runs in a Jupyter kernel (never imports IPython to find out)."""
    if "ipykernel" not in sys.modules:
        return False
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    return shell is not None and "ZMQ" in type(shell).__name__


class LiveView:
    """A progress bar plus the objective's curve, updated in place.

    Parameters
    ----------
    total_trials : int or None
        The trial budget (None: a time budget only; the bar counts without a total).
    title : str
        Shown above the curves.
    metric : str
        The curve's label, e.g. ``"est. total latency (ms)"`` or ``"best GFLOP/s"``.
    display : bool
        Show the view in the notebook (False: only collect the points, e.g. in tests).
    """

    def __init__(self, total_trials, title: str, metric: str, display: bool = True):
        self.total = None if total_trials is None else max(1, int(total_trials))
        self.title = title
        self.metric = metric
        self.trials: list[float] = []
        self.seconds: list[float] = []
        self.values: list[float] = []
        self.done = 0
        self.note = ""
        self._bar = None
        self._handle = None
        self._start = time.monotonic()
        if display:
            if importlib.util.find_spec("ipywidgets") is not None:
                from tqdm.auto import tqdm

                self._bar = tqdm(total=self.total, unit="trial", desc=title, leave=True)
            from IPython.display import HTML
            from IPython.display import display as show

            self._handle = show(HTML(self._repr_html_()), display_id=True)

    def update(self, trials: int, seconds: float, value: float | None, note: str = "") -> None:
        """After a round: ``trials`` done in all, ``seconds`` since the start, the objective's
        current ``value`` (None while there is none yet, e.g. a task without a valid result)."""
        if self._bar is not None:
            self._bar.update(trials - self.done)
            if note:
                self._bar.set_postfix_str(note)
        self.done, self.note = trials, note
        if value is not None:
            self.trials.append(trials)
            self.seconds.append(seconds)
            self.values.append(value)
        if self._handle is not None:
            from IPython.display import HTML

            self._handle.update(HTML(self._repr_html_()))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _progress_html(self) -> str:
        if self._bar is not None:  # the tqdm widget shows it
            return ""
        elapsed = time.monotonic() - self._start
        if self.total is None:
            bar = f"{self.done} trials"
        else:
            bar = (
                f'<progress value="{min(self.done, self.total)}" max="{self.total}" '
                f'style="width:240px"></progress> {self.done}/{self.total} trials'
            )
        note = f" &middot; {html.escape(self.note)}" if self.note else ""
        return f"<div>{bar}, {elapsed:.0f} s{note}</div>"

    def _repr_html_(self) -> str:
        charts = line_chart_svg(self.trials, self.values, "trials", self.metric) + line_chart_svg(
            self.seconds, self.values, "seconds", self.metric
        )
        return (
            f'<div class="autosched-live"><b>{html.escape(self.title)}</b>'
            f"{self._progress_html()}<div>{charts}</div></div>"
        )

    def __repr__(self) -> str:
        last = f", last {self.metric} {self.values[-1]:.4g}" if self.values else ""
        return f"<LiveView {self.title!r}: {self.done} trials{last}>"
