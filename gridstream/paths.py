"""Property paths (``address.city``) inside an entry's data: set and unset.

One implementation for every place that applies a CHANGE: the space itself, the
row-versioned sinks folding operations onto stored state, and the Cassandra writer
editing a value inside one column. A top-level name that contains dots
(``kafka.topic``) wins over the nested path of the same spelling.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from gridstream.errors import InvalidEntryError

__all__ = ["remove_in", "set_in", "set_path", "unset_path"]


def set_in(data: dict[str, Any], segments: Sequence[str], value: Any, *,
           replace_scalars: bool) -> None:
    """Set ``data[s0][s1]...`` to ``value``, creating the maps on the way. A non-map
    value on the way is replaced by a map when ``replace_scalars``, else it is an
    ``InvalidEntryError`` (a null is always replaced)."""
    node = data
    for part in segments[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            if child is not None and not replace_scalars:
                raise InvalidEntryError(
                    f"property {'.'.join(segments)!r}: {part!r} is not a map")
            child = node[part] = {}
        node = child
    node[segments[-1]] = value


def remove_in(data: dict[str, Any], segments: Sequence[str]) -> None:
    """Remove ``data[s0][s1]...`` if it is there (nothing happens otherwise)."""
    node: Any = data
    for part in segments[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(segments[-1], None)


def set_path(data: dict[str, Any], path: str, value: Any, *, replace_scalars: bool) -> None:
    """Set the property at the dotted ``path`` (see ``set_in``)."""
    if path in data:
        data[path] = value
    else:
        set_in(data, path.split("."), value, replace_scalars=replace_scalars)


def unset_path(data: dict[str, Any], path: str, fixed_names: Collection[str]) -> None:
    """Unset the property at the dotted ``path``: a declared (fixed) property becomes
    null, any other disappears."""
    if path in fixed_names:
        data[path] = None
    elif path in data:
        del data[path]
    else:
        remove_in(data, path.split("."))
