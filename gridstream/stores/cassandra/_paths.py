"""Setting and removing a path inside a nested value (a change inside one column)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gridstream.paths import remove_in, set_in

__all__ = ["REMOVE", "edit_path"]

REMOVE: Any = object()
"""The value that removes the path instead of setting it."""


def edit_path(value: Any, path: tuple[str, ...], new: Any) -> Any:
    """A copy of ``value`` with ``path`` set to ``new`` (maps created on the way, as the
    space does) or removed when ``new`` is ``REMOVE``."""
    if new is REMOVE and not isinstance(value, Mapping):
        return value
    root = dict(copy.deepcopy(value)) if isinstance(value, Mapping) else {}
    if new is REMOVE:
        remove_in(root, path)
    else:
        set_in(root, path, new, replace_scalars=True)
    return root
