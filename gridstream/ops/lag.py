"""How far behind a query is, read from its progress (Spark's ``lastProgress``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["kafka_lag", "kafka_lags", "kafka_offsets"]


def kafka_lag(progress: Mapping[str, Any] | None) -> int | None:
    """Records between the last batch's end offsets and the latest offsets (all sources,
    all partitions), from a query's progress; None before the first batch."""
    lags = kafka_lags(progress)
    return sum(lags.values()) if lags else None


def kafka_lags(progress: Mapping[str, Any] | None) -> dict[tuple[str, str], int]:
    """(topic, partition) → records between the last batch's end offset and the latest
    offset, from a query's progress; empty before the first batch."""
    lags: dict[tuple[str, str], int] = {}
    for source in (progress or {}).get("sources", []):
        end = kafka_offsets(source.get("endOffset"))
        for key, value in kafka_offsets(source.get("latestOffset")).items():
            if key in end:
                lags[key] = lags.get(key, 0) + max(0, value - end[key])
    return lags


def kafka_offsets(raw: Any) -> dict[tuple[str, str], int]:
    """``{"topic": {"0": 12}}`` (a dict or its JSON text) → ``{(topic, "0"): 12}``. Only
    Kafka-like members count (every value an integer): a source connector's offsets
    (positions, snapshot progress) are not Kafka offsets."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    return {(t, p): o for t, parts in raw.items() if isinstance(parts, dict)
            and all(type(o) is int for o in parts.values())
            for p, o in parts.items()}
