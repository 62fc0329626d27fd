"""Property paths (``address.city``) inside an entry's data, and the one rule for applying
a logged PARTIAL_UPDATE or CHANGE to an entry's data.

One implementation for every place that applies these operations: the space (a change
set, and its log replay), the row-versioned sinks folding operations onto stored state
(``gridstream.fold``), and the Cassandra writer editing a value inside one column. The
rule is the grid's:

- A top-level name that contains dots (``kafka.topic``) wins over the nested path of
  the same spelling.
- Setting a path creates the missing (or null) maps on the way; a value on the way that
  is not a map is an ``InvalidEntryError``: the space refuses such a change when it is
  made, so a logged change never meets one unless the data it is applied to differs
  from the space's, which is reported rather than papered over.
- Unsetting a declared property (``declared_paths``: at any nesting level of a declared
  nested object) makes it null; any other property disappears. Under a null or absent
  object there is nothing to unset.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from gridstream.errors import InvalidEntryError

__all__ = ["apply_logged", "set_in", "set_path", "unset_in", "unset_path"]


def set_in(data: dict[str, Any], segments: Sequence[str], value: Any) -> None:
    """Set ``data[s0][s1]...`` to ``value``, creating the maps on the way (a null is
    replaced by a map; any other non-map value is an ``InvalidEntryError``)."""
    node = data
    for part in segments[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            if child is not None:
                raise InvalidEntryError(
                    f"property {'.'.join(segments)!r}: {part!r} is not a map")
            child = node[part] = {}
        node = child
    node[segments[-1]] = value


def unset_in(data: dict[str, Any], segments: Sequence[str], *, declared: bool) -> None:
    """Unset ``data[s0][s1]...``: null when ``declared``, else removed. Nothing happens
    when a map on the way is missing or null."""
    node: Any = data
    for part in segments[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return
    if declared:
        node[segments[-1]] = None
    else:
        node.pop(segments[-1], None)


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the property at the dotted ``path`` (see ``set_in``)."""
    if path in data:
        data[path] = value
    else:
        set_in(data, path.split("."), value)


def unset_path(data: dict[str, Any], path: str, declared: Collection[str]) -> None:
    """Unset the property at the dotted ``path``: null if ``path`` is one of the
    ``declared`` property paths, removed otherwise (see ``unset_in``)."""
    if path in data:
        if path in declared:
            data[path] = None
        else:
            del data[path]
    else:
        unset_in(data, path.split("."), declared=path in declared)


def apply_logged(data: dict[str, Any], op: str, values: Mapping[str, Any],
                 removed: Iterable[str], declared: Collection[str]) -> None:
    """Apply one logged PARTIAL_UPDATE or CHANGE to ``data`` in place.

    PARTIAL_UPDATE: the non-null top-level properties of ``values`` are written.
    CHANGE: each ``values`` key is a property path set to its value, then each
    ``removed`` path is unset. ``declared`` holds the type's declared property paths
    (``TypeDescriptor.declared_paths``).
    """
    if op == "PARTIAL_UPDATE":
        data.update((k, v) for k, v in values.items() if v is not None)
    elif op == "CHANGE":
        for path, value in values.items():
            set_path(data, path, value)
        for path in removed:
            unset_path(data, path, declared)
    else:
        raise InvalidEntryError(f"{op} is not a partial operation")
