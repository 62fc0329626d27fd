"""Comparing what each place holds with the grid, entity by entity and property by property.

A ``Holding`` is one place's live entities as that place gives them back (raw
properties and the version of each entity's last operation) with the place's
``PlaceRules``; ``compare`` canonicalises the reference (the grid) under the same rules
and reports the counts of missing, extra and different entities and the first
difference (entity, property path, both values) in (type, id) order. The state hash
covers (type, id, version, canonical content), so two places with the same hash hold
the same values, not only the same versions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gridstream.operations import TypeDescriptor
from gridstream.reconcile.canonical import (
    STRICT,
    Canon,
    PlaceRules,
    canonical_entity,
    encode,
    show,
)

__all__ = [
    "Comparison",
    "Difference",
    "Entity",
    "Holding",
    "Key",
    "State",
    "compare",
    "first_difference",
    "state_hash",
]

Key = tuple[str, str]
"""(type name, ``str(id)``)."""

State = dict[Key, tuple[int, Canon]]
"""(type, id) → (version, canonical properties) of the live entities."""


@dataclass(frozen=True, slots=True)
class Entity:
    """A live entity as a place gives it back."""

    version: int
    data: Mapping[str, Any]


@dataclass
class Holding:
    """One place's live entities; ``descriptors`` give the declared properties."""

    place: str
    entities: dict[Key, Entity]
    descriptors: Mapping[str, TypeDescriptor]
    rules: PlaceRules = STRICT
    operations: int | None = None
    notes: list[str] = field(default_factory=list)
    _states: dict[PlaceRules, State] = field(default_factory=dict, repr=False)

    def state(self, rules: PlaceRules | None = None) -> State:
        """Canonical content under ``rules`` (default: the place's own)."""
        chosen = self.rules if rules is None else rules
        cached = self._states.get(chosen)
        if cached is None:
            cached = self._states[chosen] = {
                key: (e.version, canonical_entity(e.data, self.descriptors.get(key[0]),
                                                  chosen))
                for key, e in self.entities.items()
            }
        return cached


@dataclass(frozen=True, slots=True)
class Difference:
    """The first place where a place differs from the grid (``path`` empty: the whole
    entity is missing or extra; ``(version)``: same content, another version)."""

    type_name: str
    id: str
    path: str
    grid: str
    place: str

    def line(self) -> str:
        where = self.path or "(entity)"
        return f"{self.type_name} {self.id} {where}: grid {self.grid}, place {self.place}"


@dataclass(frozen=True, slots=True)
class Comparison:
    """How one place compares with the grid."""

    place: str
    live: int
    state_hash: str
    missing: int
    extra: int
    different: int
    first: Difference | None
    notes: tuple[str, ...] = ()
    operations: int | None = None

    @property
    def matches(self) -> bool:
        return not (self.missing or self.extra or self.different or self.notes)

    def summary(self) -> str:
        counts = f"{self.missing} missing, {self.extra} extra, {self.different} different"
        return "; ".join((counts, *self.notes))


def state_hash(state: Mapping[Key, tuple[int, Canon]]) -> str:
    """12 hex digits of SHA-256 over (type, id, version, canonical content)."""
    digest = hashlib.sha256()
    for (type_name, entity_id), (version, canon) in sorted(state.items()):
        digest.update(f"{type_name}\x00{entity_id}\x00{version}\x00".encode())
        digest.update(encode(canon))
        digest.update(b"\n")
    return digest.hexdigest()[:12]


def compare(reference: Holding, place: Holding) -> Comparison:
    """``place`` against ``reference`` (the grid), under the place's rules."""
    want = reference.state(place.rules)
    have = place.state()
    missing = extra = different = 0
    first: Difference | None = None
    for key in sorted(want.keys() | have.keys()):
        found = _entity_difference(key, want.get(key), have.get(key))
        if found is None:
            continue
        if key not in have:
            missing += 1
        elif key not in want:
            extra += 1
        else:
            different += 1
        first = first or found
    return Comparison(place.place, len(have), state_hash(have), missing, extra, different,
                      first, tuple(place.notes), place.operations)


def _entity_difference(key: Key, want: tuple[int, Canon] | None,
                       have: tuple[int, Canon] | None) -> Difference | None:
    if want == have:
        return None
    if want is None or have is None:
        return Difference(key[0], key[1], "", _version(want), _version(have))
    found = first_difference(want[1], have[1])
    if found is None:
        return Difference(key[0], key[1], "(version)", str(want[0]), str(have[0]))
    path, a, b = found
    return Difference(key[0], key[1], path, show(a), show(b))


def _version(entry: tuple[int, Canon] | None) -> str:
    return "absent" if entry is None else f"present (version {entry[0]})"


def _step(path: str, name: str) -> str:
    """``path`` one property deeper; a name with a dot or a bracket is quoted
    (``["kafka.topic"]``), so a top-level ``address.city`` differs from the nested one."""
    if "." in name or "[" in name or not name:
        return f"{path}[{orjson.dumps(name).decode()}]"
    return f"{path}.{name}" if path else name


def first_difference(a: Canon | None, b: Canon | None, path: str = ""
                     ) -> tuple[str, Canon | None, Canon | None] | None:
    """The first path where two canonical values differ, with both values there
    (``None``: absent); ``None`` when they are equal."""
    if a == b:
        return None
    if a is None or b is None or a[0] != b[0] or a[0] not in ("map", "list"):
        return path, a, b
    if a[0] == "map":
        left, right = dict(a[1]), dict(b[1])
        for name in sorted(left.keys() | right.keys()):
            found = first_difference(left.get(name), right.get(name), _step(path, name))
            if found is not None:
                return found
        return None  # pragma: no cover - unequal maps differ at some key
    items_a, items_b = a[1], b[1]
    for i in range(max(len(items_a), len(items_b))):
        found = first_difference(items_a[i] if i < len(items_a) else None,
                                 items_b[i] if i < len(items_b) else None, f"{path}[{i}]")
        if found is not None:
            return found
    return None  # pragma: no cover - unequal lists differ at some index
