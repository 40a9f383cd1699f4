"""The one place that imports matplotlib (lazily, with the extra to install when missing)."""

from __future__ import annotations

import functools
import io


@functools.cache
def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError('autosched.plot needs matplotlib: pip install "autosched[viz]"') from None

    class PlotFigure(Figure):
        """A Figure that a notebook shows as a PNG even when pyplot was never imported (the
        inline backend only registers its formatter once pyplot is in use)."""

        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png")
            return buffer.getvalue()

    return PlotFigure


def new_figure(width: float, height: float, columns: int = 1):
    """A Figure (Agg canvas, no pyplot) and its ``columns`` axes."""
    fig = _figure_class()(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, columns, squeeze=False)[0]
    return fig, list(axes)
