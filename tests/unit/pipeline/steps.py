"""Step functions the run-file tests name by import path."""

from __future__ import annotations

from json import loads  # noqa: F401 - imported, not defined here: refused by the loader
from typing import Any


def upper(kv: tuple[Any, str]) -> tuple[Any, str]:
    return (kv[0], kv[1].upper())


def not_empty(kv: tuple[Any, str]) -> bool:
    return bool(kv[1])
