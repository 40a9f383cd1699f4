"""The record form of a knob entity: ``[kind, value]`` (``["sp", [-1, 8]]``) and back.

What a config record writes for each knob (:meth:`ConfigEntity.to_json_dict
<autosched.autotvm.space.ConfigEntity.to_json_dict>`), read back with its value's type checked,
and the canonical text by which :meth:`autosched.autotvm.space.ConfigSpace.check` finds a
record's value among a knob's entities.
"""

from __future__ import annotations

import json

from .knobs import AnnotateEntity, OtherOptionEntity, ReorderEntity, SplitEntity

__all__ = ["ENTITY_KINDS", "entity_from_json", "entity_to_json"]

ENTITY_KINDS = {
    SplitEntity: "sp",
    ReorderEntity: "re",
    AnnotateEntity: "an",
    OtherOptionEntity: "ot",
}


def entity_to_json(entity) -> list:
    kind = ENTITY_KINDS[type(entity)]
    value = {
        "sp": lambda e: e.size,
        "re": lambda e: e.perm,
        "an": lambda e: e.anns,
        "ot": lambda e: e.val,
    }[kind](entity)
    return [kind, value]


def _int_list(value, what: str) -> list:
    if not isinstance(value, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in value
    ):
        raise ValueError(f"{what} must be a list of integers, got {value!r}")
    return value


def entity_from_json(kind: str, value):
    """The entity of a record's ``[kind, value]``; the value's type is checked (``int(2.5)``
    would silently make a different point), its membership in a space by
    :meth:`ConfigSpace.check`."""
    if kind == "sp":
        return SplitEntity(_int_list(value, "a split"))
    if kind == "re":
        return ReorderEntity(_int_list(value, "a reorder"))
    if kind == "an":
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise ValueError(f"an annotation must be a list of strings, got {value!r}")
        return AnnotateEntity(value)
    if kind == "ot":
        return OtherOptionEntity(value)
    raise ValueError(
        f"unknown knob kind {kind!r} in a config record; expected ['sp', 're', 'an', 'ot']"
    )


def _canonical(entity) -> str:
    """An entity as its record writes it: a value read back from JSON (a list for a tuple
    candidate) matches its candidate, while ``1`` does not match ``True`` nor ``2.5`` ``2``."""
    return json.dumps(entity_to_json(entity), sort_keys=True, default=repr)
