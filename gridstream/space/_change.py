"""Change sets (``space.change``) and property paths (``address.city``).

A change is applied to the stored entry inside the space; the log then carries only the
resulting values of the changed paths and the removed paths (``OpType.CHANGE``), which
is what stores need to apply it without reading the entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from gridstream.errors import InvalidEntryError
from gridstream.kinds import check_path_value
from gridstream.model import normalize_value
from gridstream.operations import TypeDescriptor
from gridstream.paths import apply_logged

__all__ = [
    "MISSING",
    "Change",
    "apply_changes",
    "get_path",
    "matches",
    "matches_template",
]

MISSING: Any = object()
"""What ``get_path`` returns for an absent path."""


@dataclass(frozen=True, slots=True)
class Change:
    """One step of a change set; build with ``Change.set/increment/unset``."""

    action: Literal["set", "increment", "unset"]
    path: str
    value: Any = None

    @staticmethod
    def set(path: str, value: Any) -> Change:
        """Set the property at ``path`` (missing parent maps are created)."""
        return Change("set", path, value)

    @staticmethod
    def increment(path: str, delta: int | float | Decimal = 1) -> Change:
        """Add ``delta`` to a number (an absent or null value counts as 0)."""
        return Change("increment", path, delta)

    @staticmethod
    def unset(path: str) -> Change:
        """Remove the property (a declared field of a class becomes ``None``)."""
        return Change("unset", path)


ChangeSet = Iterable[Change] | Mapping[str, Any]


def get_path(data: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, or ``MISSING``."""
    if path in data:
        return data[path]
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return MISSING
        node = node[part]
    return node


def matches(data: Mapping[str, Any], criteria: Mapping[str, Any]) -> bool:
    """Every path in ``criteria`` holds an equal value in ``data``."""
    return all(get_path(data, path) == value for path, value in criteria.items())


def matches_template(data: Mapping[str, Any], template: Mapping[str, Any]) -> bool:
    """Template matching: every non-null template value equals the entry's (nested maps
    are matched the same way, recursively)."""
    for name, want in template.items():
        if want is None:
            continue
        have = data.get(name, MISSING)
        if isinstance(want, dict) and isinstance(have, dict):
            if not matches_template(have, want):
                return False
        elif have != want:
            return False
    return True


def apply_changes(
    data: dict[str, Any], changes: ChangeSet, descriptor: TypeDescriptor
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Apply ``changes`` to ``data`` in place.

    Returns what the log carries: the resulting value of each changed path and the
    paths that no longer exist. When one changed path lies under another, only the
    outer one is reported (with its resulting value), so the two parts never overlap
    and applying them (``gridstream.paths.apply_logged``) gives the same result in any
    order. Each step is applied with that same function.
    """
    steps = (
        [Change.set(k, v) for k, v in changes.items()] if isinstance(changes, Mapping)
        else list(changes)
    )
    if not steps:
        raise InvalidEntryError("an empty change set")
    touched: dict[str, None] = {}
    declared = descriptor.declared_paths()
    for step in steps:
        _check_path(step, descriptor, data)
        touched[step.path] = None
        if step.action == "unset":
            apply_logged(data, "CHANGE", {}, (step.path,), declared)
            continue
        value = normalize_value(step.value, step.path)
        if step.action == "increment":
            value = _incremented(get_path(data, step.path), value, step.path)
        elif step.action != "set":
            raise InvalidEntryError(f"unknown change action {step.action!r}")
        check_path_value(descriptor, step.path, value, top_level=step.path in data)
        apply_logged(data, "CHANGE", {step.path: value}, (), declared)
    changed: dict[str, Any] = {}
    removed: list[str] = []
    for path in _outermost(touched):
        value = get_path(data, path)
        if value is MISSING:
            removed.append(path)
        else:
            changed[path] = value
    return changed, tuple(removed)


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths that have no other path of the set as an ancestor."""
    ordered = list(paths)
    given = set(ordered)
    out = []
    for path in ordered:
        parts = path.split(".")
        if not any(".".join(parts[:i]) in given for i in range(1, len(parts))):
            out.append(path)
    return out


def _check_path(step: Change, descriptor: TypeDescriptor, data: dict[str, Any]) -> None:
    if not isinstance(step, Change):
        raise InvalidEntryError(f"not a Change: {step!r}")
    top = step.path if step.path in data else step.path.split(".", 1)[0]
    if not step.path or "" in step.path.split("."):
        raise InvalidEntryError(f"malformed property path {step.path!r}")
    if top in (descriptor.id_property, descriptor.routing_property):
        raise InvalidEntryError(f"{descriptor.name}: the id or routing property {top!r} "
                                "cannot be changed")
    if not descriptor.dynamic_properties and top not in descriptor.fixed_names():
        raise InvalidEntryError(f"{descriptor.name} has no property {top!r}")


def _incremented(current: Any, delta: Any, path: str) -> Any:
    if current is MISSING or current is None:
        current = 0
    numbers = (int, float, Decimal)
    if (isinstance(current, bool) or isinstance(delta, bool)
            or not isinstance(current, numbers) or not isinstance(delta, numbers)):
        raise InvalidEntryError(f"property {path!r}: cannot increment {current!r} by {delta!r}")
    if isinstance(current, Decimal) != isinstance(delta, Decimal):
        current, delta = Decimal(str(current)), Decimal(str(delta))
    return current + delta

