"""Features of configurations for the model-based tuners: "knob", "itervar" and "curve".

- ``"knob"``: the configuration's knob values (``ConfigEntity.get_flatten_feature``); cheap,
  but only comparable between configurations of one template and shape.
- ``"itervar"``: TVM's per-loop features of the lowered program, on its main statement (the
  store executed most often): per loop, outermost first (the innermost ``MAX_LOOPS`` kept,
  left-padded with zeros), its log extent, its kind (serial / parallel / vectorized / unrolled
  / thread / vthread) and, for each buffer the statement touches (up to ``MAX_BUFFERS``: the
  one stored, then those loaded), whether the loop variable indexes it and the log number of
  its elements touched inside the loop.
- ``"curve"``: the same touch counts as curves, one per buffer: the log elements touched
  against the log iterations run, sampled at fixed points; a fixed length whatever the loop
  nest, so records of other shapes and templates can teach a new task (transfer learning).

Extraction lowers the configuration's State (a few ms); :class:`FeatureCache` keeps the rows
per configuration index.
"""

from __future__ import annotations

import math

import numpy as np

from tensorir.expr import Var, walk
from tensorir.loops import FOR_KINDS, Allocate, For, If, Load, Seq, Store

from ...suppressed import suppressed

__all__ = ["FEATURE_TYPES", "config_features", "program_features", "state_features"]

FEATURE_TYPES = ("knob", "itervar", "curve")
MAX_LOOPS = 14
MAX_BUFFERS = 4
CURVE_POINTS = np.arange(0.0, 40.0, 2.0)  # log2 iterations at which curves are sampled
_PER_LOOP = 1 + len(FOR_KINDS) + 2 * MAX_BUFFERS
ITERVAR_LEN = MAX_LOOPS * _PER_LOOP
CURVE_LEN = MAX_BUFFERS * len(CURVE_POINTS) + len(FOR_KINDS)


def _stores(stmt, loops, out) -> None:
    """``(loops outermost first, Store)`` for every store under ``stmt``."""
    if isinstance(stmt, For):
        _stores(stmt.body, loops + [stmt], out)
    elif isinstance(stmt, Seq):
        for s in stmt.stmts:
            _stores(s, loops, out)
    elif isinstance(stmt, Allocate):
        _stores(stmt.body, loops, out)
    elif isinstance(stmt, If):
        _stores(stmt.then, loops, out)
        if stmt.else_ is not None:
            _stores(stmt.else_, loops, out)
    elif isinstance(stmt, Store):
        out.append((loops, stmt))


def _main_store(program):
    found: list = []
    _stores(program.body, [], found)
    if not found:
        return [], None
    return max(found, key=lambda ls: math.prod(f.extent for f in ls[0]))


def _accesses(store) -> list[tuple[str, set]]:
    """``(buffer name, names of the variables in its indices)`` per buffer, stored one first."""
    acc: dict[str, set] = {store.buffer.name: {v.name for v in walk(store.index)
                                                if isinstance(v, Var)}}  # fmt: skip
    for node in walk(store.value):
        if isinstance(node, Load):
            names = {v.name for v in walk(node.index) if isinstance(v, Var)}
            acc.setdefault(node.buffer.name, set()).update(names)
    return list(acc.items())[:MAX_BUFFERS]


def _touch_table(loops, accesses) -> np.ndarray:
    """``[depth, buffer]``: log2(1 + elements of the buffer touched inside loop ``depth``)."""
    table = np.zeros((len(loops), MAX_BUFFERS))
    for b, (_, names) in enumerate(accesses):
        touched = 1.0
        for d in range(len(loops) - 1, -1, -1):
            if loops[d].var.name in names:
                touched *= loops[d].extent
            table[d, b] = math.log2(1.0 + touched)
    return table


def program_features(program, feature_type: str) -> np.ndarray:
    """The ``"itervar"`` or ``"curve"`` vector of a lowered program."""
    loops, store = _main_store(program)
    if store is None:
        return np.zeros(ITERVAR_LEN if feature_type == "itervar" else CURVE_LEN, np.float32)
    accesses = _accesses(store)
    touch = _touch_table(loops, accesses)
    if feature_type == "itervar":
        rows = np.zeros((MAX_LOOPS, _PER_LOOP), np.float32)
        keep = loops[-MAX_LOOPS:]
        offset = MAX_LOOPS - len(keep)
        for k, loop in enumerate(keep):
            d = len(loops) - len(keep) + k
            row = rows[offset + k]
            row[0] = math.log2(1.0 + loop.extent)
            row[1 + FOR_KINDS.index(loop.kind)] = 1.0
            for b, (_, names) in enumerate(accesses):
                row[1 + len(FOR_KINDS) + 2 * b] = float(loop.var.name in names)
                row[2 + len(FOR_KINDS) + 2 * b] = touch[d, b]
        return rows.ravel()
    # curve: touched elements against iterations run, per buffer
    iters = np.array([math.log2(math.prod(f.extent for f in loops[d:])) for d in
                      range(len(loops))] + [0.0])  # fmt: skip
    out = np.zeros(CURVE_LEN, np.float32)
    for b in range(len(accesses)):
        ys = np.concatenate([touch[:, b], [0.0]])
        order = np.argsort(iters, kind="stable")
        out[b * len(CURVE_POINTS) : (b + 1) * len(CURVE_POINTS)] = np.interp(
            CURVE_POINTS, iters[order], ys[order]
        )
    for loop in loops:
        out[MAX_BUFFERS * len(CURVE_POINTS) + FOR_KINDS.index(loop.kind)] += 1.0
    return out


def state_features(state, feature_type: str) -> np.ndarray | None:
    """Lower ``state`` and extract its vector; None when it does not lower."""
    from tensorir.lower import lower

    try:
        program = lower(state)
    except ValueError:  # an invalid configuration has no features (LowerError, ...)
        return None
    except Exception:  # noqa: BLE001 - a bug: no features either, but counted (strict: raised)
        suppressed("autotvm features")
        return None
    return program_features(program, feature_type)


def config_features(task, config, feature_type: str) -> np.ndarray | None:
    """The feature vector of ``config`` of ``task`` (None when it does not instantiate/lower)."""
    if feature_type == "knob":
        return np.asarray(config.get_flatten_feature(), np.float32)
    if feature_type not in FEATURE_TYPES:
        raise ValueError(f"feature_type {feature_type!r}: use one of {FEATURE_TYPES}")
    try:
        state, _ = task.instantiate(config)
    except ValueError:  # the template rejects this configuration (InstantiationError, ...)
        return None
    except Exception:  # noqa: BLE001 - a bug: no features either, but counted (strict: raised)
        suppressed("autotvm features")
        return None
    return state_features(state, feature_type)


class FeatureCache:
    """Feature vectors per configuration index of one task."""

    def __init__(self, task, feature_type: str):
        if feature_type not in FEATURE_TYPES:
            raise ValueError(f"feature_type {feature_type!r}: use one of {FEATURE_TYPES}")
        self.task = task
        self.feature_type = feature_type
        self._rows: dict[int, np.ndarray | None] = {}

    def get(self, index: int) -> np.ndarray | None:
        if index not in self._rows:
            cfg = self.task.config_space.get(index)
            self._rows[index] = config_features(self.task, cfg, self.feature_type)
        return self._rows[index]

    def matrix(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, valid mask)`` for ``indices`` (invalid rows are zeros)."""
        rows = [self.get(int(i)) for i in indices]
        width = next((len(r) for r in rows if r is not None), 0)
        out = np.zeros((len(rows), width), np.float32)
        valid = np.zeros(len(rows), bool)
        for k, r in enumerate(rows):
            if r is not None and len(r) == width:
                out[k], valid[k] = r, True
        return out, valid
