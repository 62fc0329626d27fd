"""A flow's trigger as a run file names it: ``"5 seconds"``, ``"500 ms"``,
``"available_now"`` (the one parser every flow's config uses)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_trigger"]

_UNIT_MS = {
    "ms": 1.0, "millisecond": 1.0, "milliseconds": 1.0, "s": 1000.0, "second": 1000.0,
    "seconds": 1000.0, "m": 60_000.0, "min": 60_000.0, "minute": 60_000.0, "minutes": 60_000.0,
}
_TRIGGER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")


def parse_trigger(text: str) -> dict[str, Any]:
    """``"5 seconds"`` → ``{"processingTime": "5 seconds"}``; ``"available_now"`` →
    ``{"availableNow": True}``; ``ValueError`` otherwise."""
    lowered = text.strip().lower().replace("-", "_")
    if lowered in ("available_now", "availablenow"):
        return {"availableNow": True}
    match = _TRIGGER.match(lowered)
    if match is None or match.group(2) not in _UNIT_MS:
        raise ValueError(f"trigger {text!r}: use e.g. '5 seconds', '500 ms' or 'available_now'")
    number, unit = match.groups()
    return {"processingTime": f"{int(float(number) * _UNIT_MS[unit])} milliseconds"}
