"""What one batch of any flow did, in the words every flow shares (``BatchCounts``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BatchCounts"]


@dataclass(frozen=True)
class BatchCounts:
    """One batch of a flow. ``read`` records came in; ``written`` went to the flow's
    target; ``filtered`` were dropped on purpose (a filter, a step, an older version
    than the store holds); ``skipped`` were bad and skipped by policy; ``dead_lettered``
    were bad and sent to the dead-letter topic."""

    read: int
    written: int
    filtered: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    seconds: float = 0.0
