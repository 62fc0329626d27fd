"""The Confluent wire format and subject names, shared by every Avro codec of gridstream
(the connectors' converter, the pipelines' serializers).

A framed record: magic byte ``0``, the writer schema's registry id (4 bytes, big-endian),
the Avro binary body. Subjects are named by a strategy: ``topic`` (``<topic>-key`` /
``<topic>-value``), ``record`` (the record's full name) or ``topic_record``
(``<topic>-<record full name>``), or Confluent's class names for them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from gridstream.errors import CodecError, ConfigError
from gridstream.protocol.registry import MAGIC, Registry

__all__ = ["HEADER", "STRATEGIES", "SchemaIds", "frame", "full_name", "strategy",
           "subject_name", "unframe"]

HEADER = struct.Struct(">bI")
_STRATEGY_CLASS = "io.confluent.kafka.serializers.subject."
STRATEGIES: dict[str, str] = {
    "topic": "topic", "record": "record", "topic_record": "topic_record",
    f"{_STRATEGY_CLASS}TopicNameStrategy": "topic",
    f"{_STRATEGY_CLASS}RecordNameStrategy": "record",
    f"{_STRATEGY_CLASS}TopicRecordNameStrategy": "topic_record",
    "TopicNameStrategy": "topic", "RecordNameStrategy": "record",
    "TopicRecordNameStrategy": "topic_record",
}
"""Every accepted spelling of a subject name strategy → its short name."""
_MAX_CACHED = 4096


def strategy(name: Any, prop: str) -> str:
    """The short name of a strategy (``ConfigError`` naming ``prop`` otherwise)."""
    found = STRATEGIES.get(str(name).strip()) if name is not None else "topic"
    if found is None:
        raise ConfigError(f"{prop} {name!r} is not a subject name strategy; known: "
                          f"{', '.join(STRATEGIES)}")
    return found


def full_name(schema: Any) -> str | None:
    """A named schema's full name (records, enums, fixed), else None."""
    if not isinstance(schema, Mapping):
        return None
    name = schema.get("name")
    if not isinstance(name, str):
        return None
    namespace = schema.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name


def subject_name(kind: str, topic: str, schema: Any, *, is_key: bool) -> str:
    """The subject ``schema`` (parsed JSON) is registered under, for ``topic``."""
    if kind == "topic":
        return f"{topic}-{'key' if is_key else 'value'}"
    name = full_name(schema)
    if name is None:
        raise CodecError(f"subject name strategy {kind!r} needs a named schema (a record), "
                         f"not {str(schema)[:80]}")
    return name if kind == "record" else f"{topic}-{name}"


def frame(schema_id: int) -> bytes:
    """The 5-byte header of a record written with ``schema_id``."""
    return HEADER.pack(MAGIC, schema_id)


def unframe(data: bytes, side: str = "value") -> int:
    """The schema id of a framed record (``CodecError`` if it is not framed)."""
    if len(data) < HEADER.size:
        raise CodecError(f"{side} is not Confluent-framed Avro: {len(data)} bytes, a "
                         "5-byte header (magic byte 0, schema id) expected")
    if data[0] != MAGIC:
        raise CodecError(f"{side} is not Confluent-framed Avro: magic byte {data[0]}, "
                         f"{MAGIC} expected")
    _, schema_id = HEADER.unpack_from(data)
    return int(schema_id)


class SchemaIds:
    """Registered ids per (subject, schema text), refusals too: the records of a refused
    schema do not each ask the registry again."""

    def __init__(self, registry: Registry, *, limit: int = _MAX_CACHED) -> None:
        self.registry = registry
        self.limit = limit
        self._ids: dict[tuple[str, str], int] = {}
        self._refused: dict[tuple[str, str], str] = {}

    def register(self, subject: str, text: str) -> int:
        key = (subject, text)
        schema_id = self._ids.get(key)
        if schema_id is None:
            refused = self._refused.get(key)
            if refused is not None:
                raise CodecError(refused)
            try:
                schema_id = self.registry.register(subject, text)
            except CodecError as exc:
                if len(self._refused) >= self.limit:
                    self._refused.clear()
                self._refused[key] = str(exc)
                raise
            self.remember(subject, text, schema_id)
        return schema_id

    def __len__(self) -> int:
        return len(self._ids)

    def remember(self, subject: str, text: str, schema_id: int) -> None:
        if len(self._ids) >= self.limit:
            self._ids.clear()
        self._ids[(subject, text)] = schema_id
