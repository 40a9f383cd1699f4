"""Check a LightGBM text model before LightGBM parses it.

LightGBM trusts its own model text: its parser reads the trees in an OpenMP loop where a format
error aborts the process (``terminate``, SIGABRT), and its predictor follows ``left_child`` /
``right_child`` and indexes the feature row with ``split_feature`` unchecked, so an out-of-range
index reads other memory (a wrong score or SIGSEGV) and a child cycle never ends. A cost model
file may come from elsewhere (``TaskScheduler(load_model_file=...)``), so
:func:`checked_booster_text` reads the text as LightGBM would, strictly, and refuses with one
``ValueError`` anything that is not a well-formed regression forest over ``n_features``
features: each tree's arrays of the right lengths, split features in range, children forming
one tree (every node and leaf reached exactly once from the root), decision types LightGBM
defines, categorical splits only with their boundaries and bitsets. Numbers must be written as
LightGBM writes them (its ``Atoi``/``Atof`` stop at the first bad character, Python's
``int``/``float`` accept other spellings), so both readers see the same values. It returns the
text up to ``end of trees``: the importances and training parameters after it are not needed to
predict and are not handed on.
"""

from __future__ import annotations

import math
import re

# LightGBM's own cap on num_leaves (config.h: num_leaves <= 131072).
MAX_LEAVES = 131072

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|nan)", re.I)
_LINE = re.compile(r"([a-z_]+)=([^\r\n]*)")
_TREE = re.compile(r"Tree=([0-9]+)")
_END = "end of trees"

# decision_type bits (LightGBM tree.h): 1 = categorical, 2 = default left, 4 * missing type with
# missing type 0 (none), 1 (zero) or 2 (NaN); no other bits are defined.
_CATEGORICAL = 1
_TREE_KEYS = {
    "num_leaves", "num_cat", "split_feature", "split_gain", "threshold", "decision_type",
    "left_child", "right_child", "leaf_value", "leaf_weight", "leaf_count", "internal_value",
    "internal_weight", "internal_count", "cat_boundaries", "cat_threshold", "is_linear",
    "shrinkage",
}  # fmt: skip
_HEADER_KEYS = {
    "version", "num_class", "num_tree_per_iteration", "label_index", "max_feature_idx",
    "feature_names", "feature_infos", "tree_sizes", "monotone_constraints", "average_output",
}  # fmt: skip


class BoosterTextError(ValueError):
    """The booster text is not a well-formed LightGBM regression forest (the message says why)."""


def _ints(text: str, what: str, n: int | None = None) -> list[int]:
    parts = text.split(" ") if text else []
    if not all(_INT.fullmatch(p) for p in parts):
        raise BoosterTextError(f"{what}: not a list of integers")
    if n is not None and len(parts) != n:
        raise BoosterTextError(f"{what}: {len(parts)} values, expected {n}")
    return [int(p) for p in parts]


def _floats(text: str, what: str, n: int) -> list[float]:
    parts = text.split(" ") if text else []
    if not all(_FLOAT.fullmatch(p) for p in parts):
        raise BoosterTextError(f"{what}: not a list of numbers")
    if len(parts) != n:
        raise BoosterTextError(f"{what}: {len(parts)} values, expected {n}")
    return [float(p) for p in parts]


def _one_int(kv: dict, key: str, what: str) -> int:
    if key not in kv:
        raise BoosterTextError(f"{what}: no {key}")
    return _ints(kv[key], f"{what} {key}", 1)[0]


def _key_values(lines: list[str], what: str) -> dict:
    kv = {}
    for line in lines:
        m = _LINE.fullmatch(line)
        if not m:
            raise BoosterTextError(f"{what}: unreadable line {line[:40]!r}")
        if m[1] in kv:
            raise BoosterTextError(f"{what}: {m[1]} given twice")
        kv[m[1]] = m[2]
    return kv


def _check_header(lines: list[str], n_features: int) -> tuple[dict, int]:
    if not lines or lines[0] != "tree":
        raise BoosterTextError("does not start with LightGBM's 'tree' line")
    kv = _key_values(lines[1:], "header")
    unknown = set(kv) - _HEADER_KEYS
    if unknown:
        # objective= would transform the raw scores the cost model sums, for instance.
        raise BoosterTextError(f"header: unexpected {sorted(unknown)}")
    if kv.get("version") not in ("v3", "v4"):
        raise BoosterTextError(f"header: version {kv.get('version')!r}, expected v3 or v4")
    for key, want in (("num_class", 1), ("num_tree_per_iteration", 1), ("label_index", 0)):
        if _one_int(kv, key, "header") != want:
            raise BoosterTextError(f"header: {key}={kv[key]}, expected {want}")
    max_feature_idx = _one_int(kv, "max_feature_idx", "header")
    if max_feature_idx + 1 != n_features:
        raise BoosterTextError(f"booster of {max_feature_idx + 1} features, expected {n_features}")
    for key in ("feature_names", "feature_infos", "monotone_constraints"):
        if key in kv and len(kv[key].split(" ")) != n_features:
            raise BoosterTextError(f"header: {key} does not list {n_features} features")
    return kv, max_feature_idx


def _check_tree(kv: dict, max_feature_idx: int, what: str) -> None:
    unknown = set(kv) - _TREE_KEYS
    if unknown:
        raise BoosterTextError(f"{what}: unexpected {sorted(unknown)}")
    if kv.get("is_linear", "0") != "0":
        raise BoosterTextError(f"{what}: linear trees are not used by the cost model")
    if "shrinkage" in kv:
        _floats(kv["shrinkage"], f"{what} shrinkage", 1)
    n = _one_int(kv, "num_leaves", what)
    if not 1 <= n <= MAX_LEAVES:
        raise BoosterTextError(f"{what}: num_leaves={n}, expected 1 .. {MAX_LEAVES}")
    num_cat = _one_int(kv, "num_cat", what)
    if not 0 <= num_cat <= n - 1:
        raise BoosterTextError(f"{what}: num_cat={num_cat}, expected 0 .. {n - 1}")
    if "leaf_value" not in kv:
        raise BoosterTextError(f"{what}: no leaf_value")
    if not all(math.isfinite(v) for v in _floats(kv["leaf_value"], f"{what} leaf_value", n)):
        raise BoosterTextError(f"{what}: leaf values must be finite")
    if n == 1:
        return  # LightGBM reads nothing more of a one-leaf tree (its other arrays are empty)
    for key in ("leaf_weight", "leaf_count"):
        if key in kv:
            _floats(kv[key], f"{what} {key}", n)
    for key in ("split_feature", "threshold", "decision_type", "left_child", "right_child"):
        if key not in kv:
            raise BoosterTextError(f"{what}: no {key}")
    for key in ("split_gain", "internal_value", "internal_weight", "internal_count"):
        if key in kv:
            _floats(kv[key], f"{what} {key}", n - 1)
    features = _ints(kv["split_feature"], f"{what} split_feature", n - 1)
    bad = [f for f in features if not 0 <= f <= max_feature_idx]
    if bad:
        raise BoosterTextError(
            f"{what}: split_feature {bad[0]} outside 0 .. {max_feature_idx} (the feature count)"
        )
    thresholds = _floats(kv["threshold"], f"{what} threshold", n - 1)
    kinds = _ints(kv["decision_type"], f"{what} decision_type", n - 1)
    for k in kinds:
        if not 0 <= k <= 11 or (k >> 2) == 3:
            raise BoosterTextError(f"{what}: decision_type {k} is not one LightGBM defines")
    _check_categorical(kv, num_cat, kinds, thresholds, what)
    left = _ints(kv["left_child"], f"{what} left_child", n - 1)
    right = _ints(kv["right_child"], f"{what} right_child", n - 1)
    _check_shape(left, right, n, what)


def _check_categorical(kv: dict, num_cat: int, kinds: list, thresholds: list, what: str) -> None:
    cat_nodes = [i for i, k in enumerate(kinds) if k & _CATEGORICAL]
    if len(cat_nodes) != num_cat:
        raise BoosterTextError(f"{what}: num_cat={num_cat} but {len(cat_nodes)} categorical splits")
    if num_cat == 0:
        return
    if "cat_boundaries" not in kv or "cat_threshold" not in kv:
        raise BoosterTextError(f"{what}: num_cat={num_cat} without cat_boundaries / cat_threshold")
    bounds = _ints(kv["cat_boundaries"], f"{what} cat_boundaries", num_cat + 1)
    if bounds[0] != 0 or any(b < a for a, b in zip(bounds, bounds[1:])):
        raise BoosterTextError(f"{what}: cat_boundaries must rise from 0")
    words = _ints(kv["cat_threshold"], f"{what} cat_threshold", bounds[-1])
    if any(not 0 <= w < 2**32 for w in words):
        raise BoosterTextError(f"{what}: cat_threshold values must be 32-bit bitsets")
    # A categorical split's threshold is the index of its bitset in cat_boundaries.
    if sorted(thresholds[i] for i in cat_nodes) != list(range(num_cat)):
        raise BoosterTextError(f"{what}: categorical thresholds must index 0 .. {num_cat - 1}")


def _check_shape(left: list, right: list, n: int, what: str) -> None:
    """Children form one binary tree over internal nodes 0..n-2 and leaves ~0..~(n-1)."""
    seen_nodes, seen_leaves = [False] * (n - 1), [False] * n
    stack = [0]
    seen_nodes[0] = True
    while stack:
        node = stack.pop()
        for child in (left[node], right[node]):
            if child >= 0:
                if child >= n - 1:
                    raise BoosterTextError(f"{what}: child {child} of node {node} out of range")
                if seen_nodes[child]:
                    raise BoosterTextError(f"{what}: node {child} reached twice (a cycle)")
                seen_nodes[child] = True
                stack.append(child)
            else:
                leaf = ~child
                if leaf >= n:
                    raise BoosterTextError(f"{what}: leaf {child} of node {node} out of range")
                if seen_leaves[leaf]:
                    raise BoosterTextError(f"{what}: leaf {child} reached twice")
                seen_leaves[leaf] = True
    if not all(seen_nodes) or not all(seen_leaves):
        raise BoosterTextError(f"{what}: nodes or leaves not reachable from the root")


def checked_booster_text(text: str, n_features: int) -> str:
    """The part of ``text`` LightGBM needs to predict, after checking all of it.

    Raises
    ------
    BoosterTextError
        (a ``ValueError``) saying what is malformed, if ``text`` is not a LightGBM regression
        forest over ``n_features`` features as LightGBM writes one.
    """
    end = text.find("\n" + _END + "\n")
    if end < 0:
        raise BoosterTextError(f"no '{_END}' line (truncated?)")
    body = text[: end + 1]
    first = body.find("\nTree=")
    if first < 0:
        raise BoosterTextError("no trees")
    header_lines = body[:first].split("\n")
    if header_lines[-1] == "":  # the blank line LightGBM writes before the first tree
        header_lines.pop()
    kv, max_feature_idx = _check_header(header_lines, n_features)
    # Each block runs from its "Tree=i" line to the next one; LightGBM's tree_sizes give the
    # byte length of each block and it jumps by them unchecked, so they must match exactly.
    starts = [m.start() + 1 for m in re.finditer(r"\nTree=", body)]
    blocks = [body[a:b] for a, b in zip(starts, starts[1:] + [len(body)])]
    if "tree_sizes" in kv:
        sizes = _ints(kv["tree_sizes"], "header tree_sizes", len(blocks))
        actual = [len(b.encode()) for b in blocks]
        if sizes != actual:
            raise BoosterTextError("header: tree_sizes do not match the trees")
    for i, block in enumerate(blocks):
        lines = block.split("\n")
        m = _TREE.fullmatch(lines[0])
        if not m or int(m[1]) != i:
            raise BoosterTextError(f"tree {i}: expected a 'Tree={i}' line")
        what = f"tree {i}"
        lines = lines[1:]
        while lines and lines[-1] == "":
            lines.pop()
        if not lines or "" in lines:
            raise BoosterTextError(f"{what}: blank line inside the tree")
        _check_tree(_key_values(lines, what), max_feature_idx, what)
    return body + _END + "\n"
