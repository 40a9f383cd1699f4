"""The one place that imports matplotlib (lazily, with the extra to install when missing)."""

from __future__ import annotations


def new_figure(width: float, height: float, columns: int = 1):
    """A Figure (Agg canvas, no pyplot) and its ``columns`` axes."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError('autosched.plot needs matplotlib: pip install "autosched[viz]"') from None
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, columns, squeeze=False)[0]
    return fig, list(axes)
