"""The operation envelope: the flat, stable record every codec carries.

JSON layout (one object per Kafka record value)::

    {"op": "WRITE", "type": "Person", "id": "p-1", "version": 42, "txn": "t-7",
     "ts": 1732262400000, "partition": 0, "data": {...}, "removed": []}

``data`` is the full entry for WRITE/UPDATE, the changed properties for
PARTIAL_UPDATE/CHANGE and the last state (or null) for REMOVE/TAKE; ``removed`` lists the
properties a CHANGE removed. The layout is flat so that Spark can decode it in the JVM
with ``from_json`` (see ``spark_schema_ddl``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from gridstream.errors import CodecError
from gridstream.operations import EntityId, Operation, OpType

__all__ = ["ENVELOPE_FIELDS", "Envelope", "Header", "Headers"]

Header = tuple[str, bytes]
Headers = tuple[Header, ...]
ENVELOPE_FIELDS = ("op", "type", "id", "version", "txn", "ts", "partition", "data", "removed")


class Envelope(NamedTuple):
    """One operation as it travels on the wire (see the module docstring).

    Immutable; a named tuple rather than a frozen dataclass because the mirror builds one
    per operation on its hot path, where construction cost matters."""

    op: OpType
    type: str
    id: EntityId
    version: int
    ts: int
    partition: int
    data: Mapping[str, Any] | None = None
    txn: str | None = None
    removed: tuple[str, ...] = ()

    @classmethod
    def from_operation(cls, operation: Operation) -> Envelope:
        """The envelope of a committed operation."""
        return cls(operation.op, operation.type_name, operation.id, operation.version,
                   operation.timestamp_ms, operation.partition, operation.data,
                   operation.txn_id, tuple(operation.removed))

    def to_operation(self) -> Operation:
        """Back to an ``Operation`` (for stores and the sink connector)."""
        return Operation(
            op=self.op, type_name=self.type, id=self.id, version=self.version,
            data=self.data, partition=self.partition, timestamp_ms=self.ts,
            txn_id=self.txn, removed=self.removed,
        )

    def to_wire(self) -> dict[str, Any]:
        """The flat dict a codec serializes (values of ``data`` not yet normalized)."""
        return {
            "op": str(self.op), "type": self.type, "id": self.id, "version": self.version,
            "txn": self.txn, "ts": self.ts, "partition": self.partition,
            "data": self.data if self.data is None or type(self.data) is dict else dict(self.data),
            "removed": list(self.removed),
        }

    @classmethod
    def from_wire(cls, raw: Any) -> Envelope:
        """Validate a decoded flat dict; ``CodecError`` names what is wrong."""
        if not isinstance(raw, Mapping):
            raise CodecError(f"envelope must be an object, not {type(raw).__name__}")
        try:
            op = OpType(raw["op"])
            data = raw.get("data")
            removed = raw.get("removed") or ()
            envelope = cls(
                op=op, type=_typed(raw, "type", str), id=_entity_id(raw.get("id")),
                version=_typed(raw, "version", int), ts=_typed(raw, "ts", int),
                partition=_typed(raw, "partition", int),
                data=None if data is None else _mapping(data),
                txn=raw.get("txn"), removed=tuple(_strings(removed)),
            )
        except KeyError as exc:
            raise CodecError(f"envelope field {exc.args[0]!r} is missing") from exc
        except ValueError as exc:
            raise CodecError(f"envelope is malformed: {exc}") from exc
        if envelope.txn is not None and not isinstance(envelope.txn, str):
            raise CodecError("envelope field 'txn' must be a string or null")
        return envelope


def _typed(raw: Mapping[str, Any], key: str, kind: type) -> Any:
    value = raw[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"field {key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def _entity_id(value: Any) -> EntityId:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ValueError(f"field 'id' must be a string or an integer, got {type(value).__name__}")


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"field 'data' must be an object, got {type(value).__name__}")
    return dict(value)


def _strings(value: Any) -> Sequence[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError("field 'removed' must be a list of strings")
    return value
