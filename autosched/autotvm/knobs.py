"""The knob kinds of an AutoTVM template: each knob's sub-space and its entities.

A knob is a sub-space (:class:`SplitSpace`, :class:`OtherOptionSpace`, :class:`ReorderSpace`,
:class:`AnnotateSpace`) listing its entities in TVM's order; an entity (:class:`SplitEntity`,
:class:`OtherOptionEntity`, :class:`ReorderEntity`, :class:`AnnotateEntity`) is one value of
the knob and applies itself to a :class:`tensorir.schedule.State` with the auto-scheduler's
steps. :class:`autosched.autotvm.space.ConfigSpace` defines them (and re-exports them).
"""

from __future__ import annotations

import functools
import itertools
import math

from tensorir.stage import Iterator

__all__ = [
    "AnnotateEntity",
    "AnnotateSpace",
    "OtherOptionEntity",
    "OtherOptionSpace",
    "ReorderEntity",
    "ReorderSpace",
    "SplitEntity",
    "SplitSpace",
]


def _reorder_subset(s, stage, axes) -> None:
    """Reorder only ``axes`` of ``stage``: they take the positions they held, in the new order."""
    names = [a.name if isinstance(a, Iterator) else a for a in axes]
    current = [it.name for it in s[stage].iters]
    slots = sorted(current.index(n) for n in names)
    order = list(current)
    for slot, name in zip(slots, names, strict=True):
        order[slot] = name
    s.reorder(stage, order)


# ----------------------------------------------------------------------------- split


@functools.lru_cache(maxsize=256)
def _factors(n: int) -> tuple[int, ...]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return tuple(sorted(set(small + [n // k for k in small])))


def _powers_of_two(n: int) -> tuple[int, ...]:
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    return tuple(out)


class SplitEntity:
    """Split one axis into parts of sizes ``size`` (outermost first; ``size[0]`` is -1, the
    part the extent leaves)."""

    def __init__(self, size):
        self.size = [int(x) for x in size]

    def apply(self, s, stage, axis):
        """``s.split(stage, axis, size[1:])``; returns the new iterators, outermost first."""
        return s.split(stage, axis, self.size[1:])

    def __repr__(self) -> str:
        return f"sp{self.size}"

    def __eq__(self, other) -> bool:
        return isinstance(other, SplitEntity) and self.size == other.size

    def __hash__(self) -> int:
        return hash(("sp", tuple(self.size)))


class SplitSpace:
    """The ways to split an axis of ``product`` into ``num_outputs`` parts.

    ``policy``: "factors" (inner parts divide the extent exactly), "power2" (inner parts are
    powers of two; the outer part covers the rest, its tail guarded when lowered) or "verbose"
    (both). ``max_factor`` bounds every inner part; ``filter(entity)`` keeps only the
    entities it returns True for (``filter=lambda e: e.size[1] <= 8``).
    """

    def __init__(self, product: int, num_outputs: int, policy="factors", max_factor=None,
                 filter=None):  # noqa: A002 - TVM's keyword  # fmt: skip
        if policy not in ("factors", "power2", "verbose"):
            raise ValueError(
                f"define_split policy {policy!r}: use 'factors', 'power2' or 'verbose'"
            )
        if num_outputs < 1:
            raise ValueError(f"define_split num_outputs must be >= 1, got {num_outputs}")
        self.product = product
        self.num_outputs = num_outputs
        self.policy = policy
        self.max_factor = max_factor or product
        exact = _factors(product)
        if policy == "factors":
            choices = exact
        elif policy == "power2":
            choices = _powers_of_two(product)
        else:
            choices = tuple(sorted(set(exact) | set(_powers_of_two(product))))
        choices = tuple(c for c in choices if c <= self.max_factor)
        self.entities = [
            SplitEntity([-1, *inner])
            for inner in self._inner(choices, num_outputs - 1, product, policy == "factors")
        ]
        if filter is not None:
            self.entities = [e for e in self.entities if filter(e)]

    @staticmethod
    def _inner(choices, n, product, exact):
        """Inner size tuples (outer-to-inner) whose product fits ``product`` (divides it when
        ``exact``), in TVM's order: the innermost size varies slowest."""
        out = []

        def rec(prefix, left):
            if len(prefix) == n:
                out.append(tuple(reversed(prefix)))
                return
            for c in choices:
                if (left % c == 0) if exact else (c <= left):
                    rec(prefix + [c], left // c)

        rec([], product)
        return out

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i):
        return self.entities[i]

    def __repr__(self) -> str:
        return (
            f"Split(policy={self.policy}, product={self.product}, "
            f"num_outputs={self.num_outputs}) len={len(self)}"
        )


# ----------------------------------------------------------------------------- other knobs


class OtherOptionEntity:
    """A plain knob value: ``cfg["unroll"].val``."""

    def __init__(self, val):
        self.val = val

    def __repr__(self) -> str:
        return str(self.val)

    def __eq__(self, other) -> bool:
        return isinstance(other, OtherOptionEntity) and self.val == other.val

    def __hash__(self) -> int:
        return hash(("ot", repr(self.val)))


class OtherOptionSpace:
    """``define_knob(name, candidates)``: one entity per candidate value."""

    def __init__(self, candidates):
        candidates = list(candidates)
        if not candidates:
            raise ValueError("define_knob needs at least one candidate value")
        self.entities = [OtherOptionEntity(c) for c in candidates]

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i):
        return self.entities[i]

    def __repr__(self) -> str:
        return f"OtherOption({[e.val for e in self.entities]}) len={len(self)}"


class ReorderEntity:
    """A permutation of a knob's axes: ``perm[k]`` is the index of the k-th axis put first."""

    def __init__(self, perm):
        self.perm = [int(x) for x in perm]

    def apply(self, s, stage, axes):
        """Reorder ``axes`` (only those) by the permutation; returns them in the new order."""
        ordered = [axes[i] for i in self.perm]
        _reorder_subset(s, stage, ordered)
        names = [a.name if isinstance(a, Iterator) else a for a in ordered]
        return [s[stage].iters[s.iter_id(stage, n)] for n in names]

    def __repr__(self) -> str:
        return f"re{self.perm}"

    def __eq__(self, other) -> bool:
        return isinstance(other, ReorderEntity) and self.perm == other.perm

    def __hash__(self) -> int:
        return hash(("re", tuple(self.perm)))


class ReorderSpace:
    """``define_reorder(name, axes, policy)``: "identity", "all" (every permutation) or
    "candidate" (the permutations of ``candidate=[[axes...], ...]``)."""

    def __init__(self, axes, policy="all", candidate=None):
        n = len(axes)
        if policy == "identity":
            perms = [list(range(n))]
        elif policy == "all":
            if n > 8:
                raise ValueError(f"define_reorder policy 'all' over {n} axes is too large")
            perms = [list(p) for p in itertools.permutations(range(n))]
        elif policy == "candidate":
            names = [a.name if isinstance(a, Iterator) else a for a in axes]
            perms = [[names.index(getattr(a, "name", a)) for a in c] for c in candidate or ()]
            if not perms:
                raise ValueError("define_reorder policy 'candidate' needs candidate=[[axes...]]")
        else:
            raise ValueError(
                f"define_reorder policy {policy!r}: use 'identity', 'all' or 'candidate'"
            )
        self.policy = policy
        self.entities = [ReorderEntity(p) for p in perms]

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i):
        return self.entities[i]

    def __repr__(self) -> str:
        return f"Reorder(policy={self.policy}) len={len(self)}"


_ANNOTATIONS = {"none": None, "unroll": "unroll", "vec": "vectorize", "parallel": "parallel"}


class AnnotateEntity:
    """One annotation per axis: "none", "unroll", "vec" or "parallel"."""

    def __init__(self, anns):
        self.anns = list(anns)

    def apply(self, s, stage, axes):
        for axis, ann in zip(axes, self.anns, strict=True):
            kind = _ANNOTATIONS[ann]
            if kind is not None:
                getattr(s, kind)(stage, axis)
        return axes

    def __repr__(self) -> str:
        return f"an{self.anns}"

    def __eq__(self, other) -> bool:
        return isinstance(other, AnnotateEntity) and self.anns == other.anns

    def __hash__(self) -> int:
        return hash(("an", tuple(self.anns)))


class AnnotateSpace:
    """``define_annotate(name, axes, policy)``: "try_unroll" (unroll or not, per axis) or
    "try_unroll_vec" (the same, and the last axis may be vectorized instead)."""

    def __init__(self, axes, policy="try_unroll"):
        n = len(axes)
        if policy == "try_unroll":
            choices = [["none", "unroll"]] * n
        elif policy == "try_unroll_vec":
            choices = [["none", "unroll"]] * (n - 1) + [["none", "unroll", "vec"]] if n else []
        else:
            raise ValueError(
                f"define_annotate policy {policy!r}: use 'try_unroll' or 'try_unroll_vec'"
            )
        self.policy = policy
        self.entities = [AnnotateEntity(c) for c in itertools.product(*choices)]

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i):
        return self.entities[i]

    def __repr__(self) -> str:
        return f"Annotate(policy={self.policy}) len={len(self)}"
