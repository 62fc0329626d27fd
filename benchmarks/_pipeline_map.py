"""The map of the pipeline benchmarks' gridstream sides, in a module of its own: a Spark
Python worker imports the module of the function it unpickles, and a user's step module
imports no more than its step needs (this one: nothing)."""

from __future__ import annotations

from typing import Any


def upper_entry(kv: tuple[Any, Any]) -> tuple[Any, Any]:
    """The value uppercased, the key unchanged."""
    return kv[0], kv[1].upper()
