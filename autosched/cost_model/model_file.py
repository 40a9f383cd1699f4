"""The file format of a saved ``LGBModel``: an ``.npz`` archive of plain arrays, no pickle.

Loading a cost model must not run code from the file (``TaskScheduler(load_model_file=...)``
may be handed a file from elsewhere), so nothing here is unpickled: the booster is LightGBM's
own text format, checked tree by tree (:mod:`.booster_text`) before LightGBM parses it, since
LightGBM's parser aborts the process and its predictor reads out of bounds on malformed trees;
the training data are numeric arrays read with ``np.load(allow_pickle=False)``; task keys and
the base score are a JSON header.

Archive members:

``format``
    ``"autosched.LGBModel"``; ``version`` is :data:`FORMAT_VERSION`.
``header``
    JSON: ``{"n_features", "base_score", "keys": [[workload_key, target], ...]}``.
``booster``
    The LightGBM model text (absent when the model is untrained).
``rows``, ``sizes``, ``costs``
    All programs' feature rows concatenated (``(R, n_features)`` float32), the row count of
    each program, and each program's cost (``MAX_COST`` when it failed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from .booster_text import checked_booster_text
from .features import N_FEATURES

FORMAT_NAME = "autosched.LGBModel"
FORMAT_VERSION = 1

_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_MAGIC = b"\x80"  # pickle protocol 2 and later start with PROTO (0x80)


@dataclass(frozen=True)
class SavedModel:
    """What a model file holds, checked for consistency."""

    features: list
    keys: list
    costs: list
    base_score: float
    booster: object  # lightgbm.Booster or None


def save_model_file(model, path) -> None:
    """Write ``model``'s booster and training data to ``path`` (exactly that name)."""
    sizes = np.array([len(f) for f in model.features], dtype=np.int64)
    rows = [np.asarray(f, dtype=np.float32).reshape(-1, N_FEATURES) for f in model.features]
    members = {
        "format": np.array(FORMAT_NAME),
        "version": np.array(FORMAT_VERSION, dtype=np.int64),
        "header": np.array(
            json.dumps(
                {
                    "n_features": N_FEATURES,
                    "base_score": float(model.base_score),
                    "keys": [[str(k) for k in key] for key in model.keys],
                }
            )
        ),
        "rows": np.concatenate(rows) if rows else np.zeros((0, N_FEATURES), np.float32),
        "sizes": sizes,
        "costs": np.asarray(model.costs, dtype=np.float64),
    }
    if model.booster is not None:
        members["booster"] = np.array(model.booster.model_to_string())
    # A file object, so numpy does not append ".npz" to the name the caller chose.
    with open(path, "wb") as fh:
        np.savez(fh, **members)


def load_model_file(path) -> SavedModel:
    """Read and check a file written by :func:`save_model_file`; never unpickles anything.

    Raises
    ------
    ValueError
        Naming ``path``, if it is not such a file (an old pickle model included), or if its
        parts do not agree with each other.
    """
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic.startswith(_PICKLE_MAGIC):
        raise ValueError(
            f"{path}: a cost model in the old pickle format, which is not loaded because "
            "unpickling a file can run any code; retrain the model (e.g. from the tuning log "
            "with load_log_file=...) and save it again with LGBModel.save"
        )
    if magic != _ZIP_MAGIC:
        raise ValueError(f"{path}: not a cost model saved by LGBModel.save (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as z:
            members = {name: z[name] for name in z.files}
    except ValueError as e:  # an object array inside: it would need pickle
        raise ValueError(f"{path}: not a cost model saved by LGBModel.save ({e})") from e
    except Exception as e:  # a damaged archive (zipfile / npy header errors)
        raise ValueError(f"{path}: damaged cost model file ({type(e).__name__}: {e})") from e
    return _check(path, members)


def _check(path, m: dict) -> SavedModel:
    def bad(what: str) -> ValueError:
        return ValueError(f"{path}: invalid cost model file: {what}; save the model again")

    missing = {"format", "version", "header", "rows", "sizes", "costs"} - set(m)
    if missing:
        raise bad(f"missing {sorted(missing)}")
    if str(m["format"]) != FORMAT_NAME:
        raise bad(f"format {str(m['format'])!r}, expected {FORMAT_NAME!r}")
    if int(m["version"]) != FORMAT_VERSION:
        raise bad(f"version {int(m['version'])} but this autosched reads {FORMAT_VERSION}")
    try:
        header = json.loads(str(m["header"]))
        n_features = int(header["n_features"])
        base_score = float(header["base_score"])
        keys = [tuple(str(part) for part in key) for key in header["keys"]]
    except (ValueError, KeyError, TypeError) as e:
        raise bad(f"unreadable header ({e})") from e
    if n_features != N_FEATURES:
        raise bad(f"saved with {n_features} features per row, this autosched uses {N_FEATURES}")
    rows, sizes, costs = m["rows"], m["sizes"], m["costs"]
    if rows.ndim != 2 or rows.shape[1] != N_FEATURES or rows.dtype.kind != "f":
        raise bad(f"feature rows of shape {rows.shape} and dtype {rows.dtype}")
    if sizes.ndim != 1 or sizes.dtype.kind not in "iu" or (sizes < 0).any():
        raise bad("row counts must be non-negative integers")
    if int(sizes.sum()) != len(rows):
        raise bad(f"row counts sum to {int(sizes.sum())} but there are {len(rows)} rows")
    if costs.ndim != 1 or not (len(costs) == len(sizes) == len(keys)):
        raise bad(f"{len(sizes)} programs, {len(costs)} costs and {len(keys)} task keys")
    booster = None
    if "booster" in m:
        import lightgbm as lgb

        try:
            # LightGBM's parser and predictor trust the text (a bad index aborts the process
            # or reads other memory): it only sees text that passed the structural check.
            text = checked_booster_text(str(m["booster"]), N_FEATURES)
        except ValueError as e:
            raise bad(f"malformed booster ({e})") from e
        try:
            booster = lgb.Booster(model_str=text)
        except lgb.basic.LightGBMError as e:
            raise bad(f"LightGBM cannot read the booster ({e})") from e
        if booster.num_feature() != N_FEATURES:
            raise bad(f"booster of {booster.num_feature()} features, expected {N_FEATURES}")
    rows = rows.astype(np.float32, copy=False)
    features = np.split(rows, np.cumsum(sizes)[:-1]) if len(sizes) else []
    return SavedModel(features, keys, [float(c) for c in costs], base_score, booster)
