"""The tuner base class: ``tuner.tune(n_trial, measure_option, early_stopping, callbacks)``.

A tuner proposes configurations (``next_batch``), learns from their measurements
(``update``), and keeps the best one. Every tuner takes a ``seed`` so a run is reproducible.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..measure import measure_batch
from ..measure import measure_option as _default_option

__all__ = ["Tuner"]

_log = logging.getLogger(__name__)


class Tuner:
    """Base class of the tuners.

    Parameters
    ----------
    task : autotvm.task.Task
    seed : int, optional
        Seeds every random choice of the tuner.

    Attributes
    ----------
    best_config : ConfigEntity or None
    best_flops : float
        Operations per second of the best measured configuration (0 before any succeeds).
    best_measure_pair : (MeasureInput, MeasureResult) or None
    best_iter : int
        The trial at which the best was found.
    trace : list of float
        The best FLOPS after each trial (a tuning curve).
    """

    def __init__(self, task, seed: int | None = 0):
        self.task = task
        self.space = task.config_space
        self.rng = np.random.default_rng(seed)
        self.best_config = None
        self.best_flops = 0.0
        self.best_measure_pair = None
        self.best_iter = 0
        self.trace: list[float] = []
        self.visited: set[int] = set()

    # ------------------------------------------------------------------ to override

    def has_next(self) -> bool:
        """Whether configurations remain to propose."""
        return len(self.visited) < len(self.space)

    def next_batch(self, batch_size: int) -> list:
        """Up to ``batch_size`` configurations not measured yet."""
        raise NotImplementedError

    def update(self, inputs, results) -> None:
        """Learn from a measured batch."""

    def load_history(self, data_set, min_seed_records: int = 500) -> None:
        """Learn from records of earlier tunings (``autotvm.record.load_from_file(log)``).
        Only the model-based tuners use them; the others ignore them, as in TVM."""

    # ------------------------------------------------------------------ the loop

    def tune(self, n_trial: int, measure_option=None, early_stopping=None, callbacks=(),
             si_prefix: str = "G"):  # fmt: skip
        """Measure up to ``n_trial`` configurations, best kept in :attr:`best_config`.

        Parameters
        ----------
        n_trial : int
            Configurations to measure (fewer if the space runs out).
        measure_option : dict, optional
            ``autotvm.measure_option(builder=..., runner=...)`` (default: local ones).
        early_stopping : int, optional
            Stop after this many trials without a better configuration.
        callbacks : sequence
            ``callback(tuner, inputs, results)`` after each batch, e.g.
            ``autotvm.callback.progress_bar(n_trial)`` and ``log_to_file(path)``; those with a
            ``finish()`` method are told when tuning ends.
        si_prefix : str
            The unit prefix of the FLOPS in the debug log.
        """
        if not isinstance(n_trial, int) or isinstance(n_trial, bool) or n_trial < 0:
            raise ValueError(f"tune: n_trial must be a non-negative int, got {n_trial!r}")
        option = measure_option or _default_option()
        if not isinstance(option, dict) or not {"builder", "runner"} <= set(option):
            raise TypeError(
                "tune: measure_option must be autotvm.measure_option(builder=..., runner=...), "
                f"got {option!r}"
            )
        builder, runner = option["builder"], option["runner"]
        n_parallel = max(1, int(getattr(builder, "n_parallel", 1)))
        early_stopping = early_stopping or float("inf")
        scale = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(si_prefix, 1e9)
        flop = self.task.flop
        start, i, error_ct = time.time(), 0, 0
        try:
            while i < n_trial and self.has_next():
                configs = self.next_batch(min(n_parallel, n_trial - i))
                if not configs:
                    break
                inputs, results = measure_batch(self.task, configs, builder, runner)
                for k, (inp, res) in enumerate(zip(inputs, results, strict=True)):
                    self.visited.add(inp.config.index)
                    if res.error_no == 0:
                        flops, error_ct = flop / res.mean_cost, 0
                    else:
                        flops, error_ct = 0.0, error_ct + 1
                    if flops > self.best_flops:
                        self.best_flops, self.best_config = flops, inp.config
                        self.best_measure_pair, self.best_iter = (inp, res), i + k
                    self.trace.append(self.best_flops)
                    _log.debug(
                        "No: %d\t%sFLOPS: %.2f/%.2f\tresult: %s\t%s", i + k + 1, si_prefix,
                        flops / scale, self.best_flops / scale, res, inp.config,
                    )  # fmt: skip
                i += len(results)
                self.update(inputs, results)
                for callback in callbacks:
                    callback(self, inputs, results)
                if i >= self.best_iter + early_stopping:
                    _log.debug("early stopped at trial %d (best at %d)", i, self.best_iter)
                    break
                if error_ct > 150:
                    _log.warning(
                        "%d configurations in a row failed to measure: check the target and "
                        "the device (debug log: logging.getLogger('autotvm'))",
                        error_ct,
                    )
        finally:
            for callback in callbacks:
                finish = getattr(callback, "finish", None)
                if finish is not None:
                    finish()
        _log.debug("tuning %s took %.2f s", self.task.name, time.time() - start)
