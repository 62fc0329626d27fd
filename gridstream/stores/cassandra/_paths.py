"""Setting and removing a path inside a nested value (a change inside one column)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["REMOVE", "edit_path"]

REMOVE: Any = object()
"""The value that removes the path instead of setting it."""


def edit_path(value: Any, path: tuple[str, ...], new: Any) -> Any:
    """A copy of ``value`` with ``path`` set to ``new`` (maps created on the way, as the
    space does) or removed when ``new`` is ``REMOVE``."""
    if new is REMOVE and not isinstance(value, Mapping):
        return value
    root = dict(copy.deepcopy(value)) if isinstance(value, Mapping) else {}
    node = root
    for segment in path[:-1]:
        child = node.get(segment)
        if not isinstance(child, dict):
            if new is REMOVE:
                return root
            child = dict(child) if isinstance(child, Mapping) else {}
            node[segment] = child
        node = child
    if new is REMOVE:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = new
    return root
