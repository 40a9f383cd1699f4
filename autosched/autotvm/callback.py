"""Tuning callbacks: ``progress_bar`` and ``log_to_file``.

A callback is called as ``callback(tuner, inputs, results)`` after every measured batch; one
with a ``finish()`` method is also told when ``tuner.tune`` ends.
"""

from __future__ import annotations

import os
import sys
import time

from ..measure.data import MeasureErrorNo
from .record import encode

__all__ = ["log_to_file", "progress_bar"]


class log_to_file:  # noqa: N801 - TVM's name, used as a function
    """Append every measured configuration to ``file_out`` (one record line each, flushed
    and fsynced per batch, so an interrupted tuning keeps what it measured)."""

    def __init__(self, file_out, protocol: str = "json"):
        self.file_out = os.fspath(file_out)
        self.protocol = protocol

    def __call__(self, tuner, inputs, results) -> None:
        with open(self.file_out, "a", encoding="utf-8") as f:
            for inp, res in zip(inputs, results, strict=True):
                f.write(encode(inp, res, self.protocol) + "\n")
            f.flush()
            os.fsync(f.fileno())


class progress_bar:  # noqa: N801 - TVM's name, used as a function
    """The tuning progress line of TVM's tutorials, redrawn in place (a ``tqdm`` bar)::

        [Task  1/10]  Current/Best:    0.72/  23.24 GFLOPS | Progress: (480/1000) | 640.31 s Done.

    Parameters
    ----------
    total : int
        Trials planned (the denominator of Progress).
    prefix : str
        Text before the line, e.g. ``"[Task %2d/%2d] " % (i + 1, len(tasks))``.
    si_prefix : str
        The unit prefix of the FLOPS figures: "G" (default), "T", "M", "K" or "".
    file : file, optional
        Where the line goes (default: standard output, as in TVM).
    """

    _SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}

    def __init__(self, total: int, prefix: str = "", si_prefix: str = "G", file=None):
        if si_prefix not in self._SCALE:
            raise ValueError(
                f"progress_bar si_prefix {si_prefix!r}: use one of {list(self._SCALE)}"
            )
        self.total = int(total)
        self.prefix = prefix
        self.si_prefix = si_prefix
        self.file = file
        self.count = 0
        self.cur_flops = 0.0
        self.best_flops = 0.0
        self.start = time.time()  # as TVM: the clock starts when the bar is made
        self._bar = None

    def line(self) -> str:
        scale = self._SCALE[self.si_prefix]
        return (
            f"{self.prefix} Current/Best: {self.cur_flops / scale:7.2f}/"
            f"{self.best_flops / scale:7.2f} {self.si_prefix}FLOPS | "
            f"Progress: ({self.count}/{self.total}) | {time.time() - self.start:.2f} s"
        )

    def _draw(self, text: str, refresh: bool = True) -> None:
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=self.total,
                bar_format="{desc}",
                file=self.file or sys.stdout,
                leave=True,
                dynamic_ncols=True,
            )
        self._bar.set_description_str(text, refresh=refresh)

    def __call__(self, tuner, inputs, results) -> None:
        flop = tuner.task.flop
        for res in results:
            self.count += 1
            ok = res.error_no == MeasureErrorNo.NO_ERROR
            self.cur_flops = flop / res.mean_cost if ok else 0.0
            self.best_flops = max(self.best_flops, self.cur_flops)
        self._draw(self.line())

    def finish(self) -> None:
        """Write the final line with " Done." and end it."""
        self._draw(self.line() + " Done.", refresh=False)
        self._bar.close()  # draws the line once more, then ends it
        self._bar = None
