"""Setting and removing a path inside a nested value (a change inside one column)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gridstream.paths import set_in, unset_in

__all__ = ["REMOVE", "edit_path"]

REMOVE: Any = object()
"""The value that removes the path instead of setting it."""


def edit_path(value: Any, path: tuple[str, ...], new: Any, *, declared: bool = False) -> Any:
    """A copy of ``value`` with ``path`` set to ``new`` (maps created on the way, as the
    space does) or unset when ``new`` is ``REMOVE``: nulled if the property is
    ``declared``, removed otherwise (the rule of ``gridstream.paths``)."""
    if new is REMOVE and not isinstance(value, Mapping):
        return value
    root = dict(copy.deepcopy(value)) if isinstance(value, Mapping) else {}
    if new is REMOVE:
        unset_in(root, path, declared=declared)
    else:
        set_in(root, path, new)
    return root
