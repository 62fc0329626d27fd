"""A Hazelcast map's values as gridstream reads them: JSON objects
(``HazelcastJsonValue``), every error naming the map and, when known, the key."""

from __future__ import annotations

import orjson
from hazelcast.core import HazelcastJsonValue

from gridstream.errors import GridError
from gridstream.grid.contract import Key, Value

__all__ = ["entry_name", "json_object", "value_of"]


def value_of(cache: str, value: object, key: Key | None = None) -> Value:
    if not isinstance(value, HazelcastJsonValue):
        raise GridError(
            f"{entry_name(cache, key)}: a value of type {type(value).__name__} is not JSON "
            "(gridstream reads HazelcastJsonValue objects)"
        )
    return json_object(cache, value.to_string(), key)


def entry_name(cache: str, key: Key | None) -> str:
    """``cache 'c'`` or, when the key is known, ``cache 'c', key 'k'``."""
    return f"cache {cache!r}" if key is None else f"cache {cache!r}, key {key!r}"


def json_object(cache: str, text: str | bytes, key: Key | None = None) -> Value:
    try:
        decoded = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise GridError(f"{entry_name(cache, key)}: a value is not valid JSON: {exc}") from exc
    if not isinstance(decoded, dict):
        raise GridError(f"{entry_name(cache, key)}: a value is JSON {type(decoded).__name__}, "
                        "not an object")
    return decoded
