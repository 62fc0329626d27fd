"""JSON mapped onto a declared schema (heterogeneous messages)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridstream.pipeline.serde._base import Deserializer
from gridstream.pipeline.serde._basic import JsonDeserializer

__all__ = ["json_deserializer"]


def json_deserializer(props: Mapping[str, Any], *, is_key: bool) -> Deserializer:
    return JsonDeserializer(is_key=is_key)
