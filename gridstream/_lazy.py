"""Names of a package imported from their own modules on first use (PEP 562).

A package's ``__init__`` that re-exports names from heavy modules (the SQL sink pulls in
SQLAlchemy) makes every import of any of its submodules pay for all of them: a Spark
Python worker that needs one small module would import the lot. ``exports`` gives such
a package a ``__getattr__`` and a ``__dir__`` over a table of name → module, so that
only the names asked for are imported. The package imports the same names under
``TYPE_CHECKING`` and assigns the two functions only when not type checking: to mypy the
names are those imports, and an unknown one stays an error.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exports"]


def exports(package: str, table: Mapping[str, str]
            ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name of ``table`` is imported from
    its module when first asked for, then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(sys.modules[package])[name] = value  # the next look-up is a plain one
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
