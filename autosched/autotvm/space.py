"""The configuration space of a template: knobs, their entities, and one point of the space.

A template defines knobs on a :class:`ConfigSpace` (``cfg.define_split("tile_y", y,
num_outputs=2)``); each knob is a sub-space (:class:`SplitSpace`, :class:`OtherOptionSpace`,
:class:`ReorderSpace`, :class:`AnnotateSpace`) with a list of entities. A point of the space is
a :class:`ConfigEntity`: one entity per knob, numbered by a mixed-radix index in which the first
knob defined varies fastest (TVM's numbering, so ``space.get(i)`` agrees with TVM's order).

Entities apply themselves to a :class:`tensorir.schedule.State` with the auto-scheduler's steps,
so a tuned template is a list of State steps like any other schedule::

    yo, yi = cfg["tile_y"].apply(s, C, y)      # s.split(C, y, [yi extent])

When a template runs for real (under a dispatch context) ``cfg`` is a :class:`ConfigEntity`
whose ``define_*`` calls only return; during task creation it is the :class:`ConfigSpace`
itself, whose ``cfg[name]`` is the knob's first entity.

The knob kinds live in :mod:`autosched.autotvm.knobs` and an entity's record form in
:mod:`autosched.autotvm.knob_json`; this module keeps the space, its points and the fallback,
and re-exports the knob classes and the record functions (import them from here).
"""

from __future__ import annotations

import math
from collections import OrderedDict

from tensorir.stage import Iterator

from .knob_json import ENTITY_KINDS, _canonical, entity_from_json, entity_to_json
from .knobs import (
    AnnotateEntity,
    AnnotateSpace,
    OtherOptionEntity,
    OtherOptionSpace,
    ReorderEntity,
    ReorderSpace,
    SplitEntity,
    SplitSpace,
)

__all__ = [
    "AnnotateEntity",
    "AnnotateSpace",
    "ConfigEntity",
    "ConfigSpace",
    "FallbackConfigEntity",
    "OtherOptionEntity",
    "OtherOptionSpace",
    "ReorderEntity",
    "ReorderSpace",
    "SplitEntity",
    "SplitSpace",
]


def _extent(axis, knob: str) -> int:
    """The extent of a knob's axis: an Iterator of ``s[C].iters`` or an int."""
    if isinstance(axis, Iterator):
        if axis.extent is None:
            raise ValueError(
                f"knob {knob!r}: iterator {axis.name!r} has no known extent (a stage after "
                "compute_at); define the knob on an int extent instead"
            )
        return int(axis.extent)
    if isinstance(axis, int) and not isinstance(axis, bool) and axis >= 1:
        return axis
    raise TypeError(
        f"knob {knob!r}: the axis must be an iterator of s[C].iters or a positive int extent, "
        f"got {axis!r}"
    )


class ConfigSpace:
    """All configurations of a template: one sub-space per knob, in definition order.

    ``len(space)`` is the product of the knobs' sizes; ``space.get(i)`` (or ``space[i]`` with
    an int) the configuration of index ``i``; ``space[name]`` the knob's first entity (what a
    template sees while its space is being collected); ``space.space_map[name]`` the knob's
    sub-space. ``print(space)`` lists the knobs as TVM does.
    """

    def __init__(self):
        self.space_map: OrderedDict[str, object] = OrderedDict()
        self._entity_map: OrderedDict[str, object] = OrderedDict()
        self._length = 1
        self.flop = 0.0
        self.is_fallback = False
        self.code_hash = None

    # ------------------------------------------------------------------ definitions

    def _add(self, name: str, space):
        if name in self.space_map:
            raise ValueError(f"knob {name!r} is defined twice in this template; names must differ")
        if len(space) == 0:
            raise ValueError(f"knob {name!r} has no candidates ({space!r})")
        self.space_map[name] = space
        self._entity_map[name] = space[0]
        self._length *= len(space)

    def define_split(self, name, axis, policy="factors", num_outputs=2, max_factor=None,
                     filter=None):  # noqa: A002 - TVM's keyword  # fmt: skip
        """A knob splitting ``axis`` (an iterator of ``s[C].iters`` or an int extent) into
        ``num_outputs`` parts; apply it with ``cfg[name].apply(s, C, axis)``. See
        :class:`SplitSpace` for ``policy``, ``max_factor`` and ``filter``."""
        space = SplitSpace(_extent(axis, name), num_outputs, policy, max_factor, filter)
        self._add(name, space)

    def define_knob(self, name, candidate):
        """A knob taking one of the values ``candidate``; read it as ``cfg[name].val``."""
        self._add(name, OtherOptionSpace(candidate))

    def define_reorder(self, name, axes, policy="all", **kwargs):
        """A knob choosing the order of ``axes``; apply with ``cfg[name].apply(s, C, axes)``."""
        self._add(name, ReorderSpace(axes, policy, kwargs.get("candidate")))

    def define_annotate(self, name, axes, policy="try_unroll", **_):
        """A knob annotating each of ``axes`` (unroll / vectorize / none)."""
        self._add(name, AnnotateSpace(axes, policy))

    def add_flop(self, flop) -> None:
        """Add to the template's floating-point (or integer) operation count."""
        self.flop += float(flop)

    def raise_error(self, msg: str):
        """Mark this configuration invalid (TVM's ``cfg.raise_error``)."""
        raise InstantiationError(msg)

    # ------------------------------------------------------------------ points

    def __len__(self) -> int:
        return self._length

    def get(self, index: int) -> ConfigEntity:
        """The configuration of ``index`` (the first knob defined varies fastest)."""
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self):
            raise IndexError(f"config index {index!r} is out of range [0, {len(self)})")
        entities, t = OrderedDict(), index
        for name, space in self.space_map.items():
            entities[name] = space[t % len(space)]
            t //= len(space)
        return ConfigEntity(index, self.code_hash, entities, self)

    def check(self, config) -> ConfigEntity:
        """``config`` (read from a record) as a point of this space, or a ValueError saying why
        it is not one: the same knobs, each value one of its knob's entities, and the index of
        those values. The point returned holds the space's own entities and index."""
        names, theirs = list(self.space_map), list(config._entity_map)
        if set(names) != set(theirs):
            missing = [n for n in names if n not in theirs]
            unknown = [n for n in theirs if n not in names]
            raise ValueError(
                f"its knobs do not match the config space (missing {missing}, unknown "
                f"{unknown}; the space has {names})"
            )
        picks = []
        for name, space in self.space_map.items():
            table = space.__dict__.get("_index_of")
            if table is None:
                table = {_canonical(e): i for i, e in enumerate(space.entities)}
                space._index_of = table
            entity = config._entity_map[name]
            k = table.get(_canonical(entity)) if type(entity) in ENTITY_KINDS else None
            if k is None:
                raise ValueError(f"knob {name!r}: {entity!r} is not one of its {space!r}")
            picks.append(k)
        index = self.index_of(picks)
        if config.index != index:
            raise ValueError(f"its index {config.index} is not that of its knob values ({index})")
        return self.get(index)

    def knob_indices(self, index: int) -> list[int]:
        """The entity index of every knob in configuration ``index``."""
        out, t = [], index
        for space in self.space_map.values():
            out.append(t % len(space))
            t //= len(space)
        return out

    def index_of(self, knob_indices) -> int:
        """The configuration index of per-knob entity indices (inverse of knob_indices)."""
        index, radix = 0, 1
        for k, space in zip(knob_indices, self.space_map.values(), strict=True):
            index += k * radix
            radix *= len(space)
        return index

    def __getitem__(self, name):
        if isinstance(name, int) and not isinstance(name, bool):
            return self.get(name)
        if name not in self._entity_map:
            raise KeyError(f"no knob {name!r}; knobs are {list(self._entity_map)}")
        return self._entity_map[name]

    def __iter__(self):
        return iter(self.space_map)

    def items(self):
        return self._entity_map.items()

    def __repr__(self) -> str:
        res = f"ConfigSpace (len={len(self)}, space_map=\n"
        for i, (name, space) in enumerate(self.space_map.items()):
            res += f"  {i:2d} {name}: {space}\n"
        return res + ")"


class InstantiationError(ValueError):
    """A configuration the template rejects (``cfg.raise_error``)."""


class ConfigEntity(ConfigSpace):
    """One configuration: an entity per knob. Its ``define_*`` calls only return.

    Parameters
    ----------
    index : int
        Its index in the space (-1 when unknown, e.g. a fallback).
    code_hash : str or None
    entity_map : OrderedDict
        Knob name -> entity.
    space : ConfigSpace, optional
        The space it was drawn from (None for one read back from a record).
    """

    def __init__(self, index, code_hash, entity_map, space=None):
        super().__init__()
        self.index = index
        self.code_hash = code_hash
        self._entity_map = OrderedDict(entity_map)
        self._space = space
        self._length = len(space) if space is not None else 1

    def define_split(self, name, axis, *args, **kwargs):
        return None

    def define_knob(self, name, candidate):
        return None

    def define_reorder(self, name, axes, *args, **kwargs):
        return None

    def define_annotate(self, name, axes, *args, **kwargs):
        return None

    def get_flatten_feature(self) -> list[float]:
        """The knob values as numbers (TVM's "knob" feature): split sizes, permutations,
        annotation codes and knob values (their index among numbers when not numeric)."""
        out: list[float] = []
        for entity in self._entity_map.values():
            if isinstance(entity, SplitEntity):
                out.extend(entity.size[1:])
            elif isinstance(entity, ReorderEntity):
                out.extend(entity.perm)
            elif isinstance(entity, AnnotateEntity):
                out.extend(["none", "unroll", "vec", "parallel"].index(a) for a in entity.anns)
            else:
                val = entity.val
                out.append(float(val) if isinstance(val, int | float) else float(hash(val) % 97))
        return out

    def to_json_dict(self) -> dict:
        return {
            "index": self.index,
            "code_hash": self.code_hash,
            "entity": [[name, *entity_to_json(e)] for name, e in self._entity_map.items()],
        }

    @staticmethod
    def from_json_dict(data: dict) -> ConfigEntity:
        entities = OrderedDict(
            (name, entity_from_json(kind, value)) for name, kind, value in data["entity"]
        )
        return ConfigEntity(int(data["index"]), data.get("code_hash"), entities)

    def __getitem__(self, name):
        if name not in self._entity_map:
            raise KeyError(f"this configuration has no knob {name!r}; knobs are "
                           f"{list(self._entity_map)}")  # fmt: skip
        return self._entity_map[name]

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}: {e!r}" for name, e in self._entity_map.items())
        return f"{inner},{self.code_hash},{self.index}"

    def __eq__(self, other) -> bool:
        return isinstance(other, ConfigEntity) and dict(self._entity_map) == dict(other._entity_map)

    def __hash__(self) -> int:
        return hash(tuple(self._entity_map.items()))


class FallbackConfigEntity(ConfigSpace):
    """The configuration of a workload no record covers: every knob takes a default.

    Knobs are defined as in a :class:`ConfigSpace`, and each gets its first entity, except
    splits, whose default keeps the innermost parts small and the outer parts large (TVM's
    fallback: inner factors are the largest divisors not above 4, then 16...), so a template
    runs reasonably without tuning. ``is_fallback`` is True.
    """

    def __init__(self):
        super().__init__()
        self.is_fallback = True
        self.index = -1

    def _add(self, name: str, space):
        # A fallback is cached per workload and the template runs again on it: a knob it
        # already has keeps its entity.
        if name not in self.space_map:
            super()._add(name, space)

    def define_split(self, name, axis, policy="factors", num_outputs=2, max_factor=None,
                     filter=None):  # noqa: A002  # fmt: skip
        if name in self.space_map:
            return
        super().define_split(name, axis, policy, num_outputs, max_factor, filter)
        self._entity_map[name] = self._default_split(self.space_map[name])

    @staticmethod
    def _default_split(space: SplitSpace) -> SplitEntity:
        # A small innermost part (vector / register friendly), the rest outer.
        caps = [4] * (space.num_outputs - 1)
        best = space[0]
        for e in space.entities:
            fits = all(f <= c for f, c in zip(reversed(e.size[1:]), caps, strict=True))
            if fits and math.prod(e.size[1:]) > math.prod(best.size[1:]):
                best = e
        return best

    def fallback_split(self, name, constraints) -> None:
        """Set split ``name`` to the largest factors not above ``constraints`` (inner parts)."""
        space = self.space_map[name]
        ok = [
            e
            for e in space.entities
            if all(c == -1 or f <= c for f, c in zip(e.size[1:], constraints[1:], strict=True))
        ]
        self._entity_map[name] = max(ok, key=lambda e: math.prod(e.size[1:]), default=space[0])

    def __getitem__(self, name):
        return ConfigSpace.__getitem__(self, name)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}: {e!r}" for name, e in self._entity_map.items())
        return f"{inner},{self.code_hash},fallback"
