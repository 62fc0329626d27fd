"""The operation log's value codec: MessagePack (msgspec) with explicit extension types.

MessagePack has no datetime/date/time/Decimal/UUID/set/frozenset/tuple of its own (or
maps them lossily), so each gets an extension code and comes back as the same Python
type. No code-executing deserializer is involved: an unknown extension code is an error.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import msgspec

from gridstream.errors import CodecError
from gridstream.operations import Bulk, Kind, Operation, OpType, TypeDescriptor

__all__ = [
    "OpRecord",
    "decode_bulk",
    "decode_data",
    "decode_descriptor",
    "decode_value",
    "decoder_for",
    "encode_bulk",
    "encode_data",
    "encode_descriptor",
    "encode_value",
    "prep_value",
]

Ext = msgspec.msgpack.Ext
T = TypeVar("T")

_EXT_DATETIME, _EXT_DATE, _EXT_TIME, _EXT_DECIMAL, _EXT_UUID = 1, 2, 3, 4, 5
_EXT_SET, _EXT_FROZENSET, _EXT_TUPLE, _EXT_ZONED = 6, 7, 8, 9

_NATIVE: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})
_ENCODER = msgspec.msgpack.Encoder()


class _Unsupported(Exception):
    """A value the codec cannot store; ``path`` grows as the error climbs out."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind
        self.path: list[str] = []


def _prep(value: Any) -> Any:
    """The value with every non-native object replaced by its extension."""
    kind = type(value)
    if kind in _NATIVE:
        return value
    if kind is dict:
        return _prep_dict(value)
    if kind is list:
        return _prep_list(value)
    convert = _TO_EXT.get(kind)
    if convert is None:
        raise _Unsupported(kind.__qualname__)
    return convert(value)


def _prep_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    for key, item in value.items():
        if type(item) not in _NATIVE or type(key) not in (str, int):
            break
    else:
        return value  # nothing to convert: encode as is
    out = {}
    for key, item in value.items():
        if type(key) not in (str, int):
            raise _Unsupported(f"map key of type {type(key).__qualname__}")
        try:
            out[key] = _prep(item)
        except _Unsupported as exc:
            exc.path.append(str(key))
            raise
    return out


def _prep_list(value: Sequence[Any]) -> list[Any]:
    out = []
    for i, item in enumerate(value):
        try:
            out.append(_prep(item))
        except _Unsupported as exc:
            exc.path.append(f"[{i}]")
            raise
    return out


def _packed(code: int) -> Callable[[Any], Ext]:
    return lambda v: Ext(code, _ENCODER.encode(_prep_list(list(v))))


def _temporal(code: int) -> Callable[[Any], Ext]:
    """ISO-8601 text; a value in a named zone keeps its zone key and fold (code 9), so
    it comes back identical even in a DST gap or overlap."""

    def convert(v: dt.datetime | dt.time) -> Ext:
        if isinstance(v.tzinfo, ZoneInfo):
            naive = v.replace(tzinfo=None).isoformat()
            return Ext(_EXT_ZONED, _ENCODER.encode((code, naive, v.tzinfo.key, v.fold)))
        return Ext(code, v.isoformat().encode())

    return convert


def _zoned(data: memoryview) -> dt.datetime | dt.time:
    code, naive, key, fold = _DECODER.decode(data)
    zone = ZoneInfo(key)
    if code == _EXT_DATETIME:
        return dt.datetime.fromisoformat(naive).replace(tzinfo=zone, fold=fold)
    return dt.time.fromisoformat(naive).replace(tzinfo=zone, fold=fold)


_TO_EXT: dict[type, Callable[[Any], Ext]] = {
    dt.datetime: _temporal(_EXT_DATETIME),
    dt.date: lambda v: Ext(_EXT_DATE, v.isoformat().encode()),
    dt.time: _temporal(_EXT_TIME),
    Decimal: lambda v: Ext(_EXT_DECIMAL, str(v).encode()),
    uuid.UUID: lambda v: Ext(_EXT_UUID, v.bytes),
    set: _packed(_EXT_SET),
    frozenset: _packed(_EXT_FROZENSET),
    tuple: _packed(_EXT_TUPLE),
}


def _ext_hook(code: int, data: memoryview) -> Any:
    try:
        if code == _EXT_DATETIME:
            return dt.datetime.fromisoformat(bytes(data).decode())
        if code == _EXT_DATE:
            return dt.date.fromisoformat(bytes(data).decode())
        if code == _EXT_TIME:
            return dt.time.fromisoformat(bytes(data).decode())
        if code == _EXT_DECIMAL:
            return Decimal(bytes(data).decode())
        if code == _EXT_UUID:
            return uuid.UUID(bytes=bytes(data))
        if code == _EXT_SET:
            return set(_DECODER.decode(data))
        if code == _EXT_FROZENSET:
            return frozenset(_DECODER.decode(data))
        if code == _EXT_TUPLE:
            return tuple(_DECODER.decode(data))
        if code == _EXT_ZONED:
            return _zoned(data)
    except (ValueError, TypeError, KeyError, msgspec.DecodeError) as exc:
        raise CodecError(f"malformed extension value (code {code})") from exc
    raise CodecError(f"unknown extension code {code} in the operation log")


_DECODER: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(ext_hook=_ext_hook)


def _big_int_path(value: Any, path: str = "") -> str:
    """Where the first out-of-range integer sits (for the error message)."""
    if type(value) is int and not -(2**63) <= value < 2**64:
        return f" at {path!r}" if path else ""
    if isinstance(value, dict):
        for key, item in value.items():
            if type(key) is int and not -(2**63) <= key < 2**64:
                return f" at {path!r} (a map key)" if path else " (a map key)"
            found = _big_int_path(item, f"{path}.{key}" if path else str(key))
            if found:
                return found
    if isinstance(value, list | tuple | set | frozenset):
        for i, item in enumerate(value):
            found = _big_int_path(item, f"{path}[{i}]")
            if found:
                return found
    return ""


def encode_value(value: Any) -> bytes:
    """Any storable value as bytes (``CodecError`` names the offending path)."""
    try:
        return _ENCODER.encode(_prep(value))
    except _Unsupported as exc:
        raise _unsupported(exc) from None
    except OverflowError as exc:
        raise CodecError(f"integer out of the 64-bit range{_big_int_path(value)}") from exc


def _unsupported(exc: _Unsupported) -> CodecError:
    where = "".join(p if p.startswith("[") else f".{p}" for p in reversed(exc.path))
    return CodecError(f"{where.lstrip('.') or 'value'}: a {exc.kind} cannot be stored")


def decode_value(raw: bytes | memoryview) -> Any:
    try:
        return _DECODER.decode(raw)
    except msgspec.DecodeError as exc:
        raise CodecError("malformed value in the operation log") from exc


def encode_data(data: Mapping[str, Any]) -> bytes:
    """An entry's property map as bytes; the ``CodecError`` names the property."""
    try:
        return _ENCODER.encode(_prep_dict(data if type(data) is dict else dict(data)))
    except _Unsupported as exc:
        raise _unsupported(exc) from None
    except OverflowError as exc:
        raise CodecError(f"integer out of the 64-bit range{_big_int_path(data)}") from exc


def decode_data(raw: bytes | memoryview) -> dict[str, Any]:
    data = decode_value(raw)
    if not isinstance(data, dict):
        raise CodecError("an entry's data is not a map")
    return data


def decoder_for(type_: type[T]) -> msgspec.msgpack.Decoder[T]:
    """A typed decoder that restores this codec's extension values."""
    return msgspec.msgpack.Decoder(type_, ext_hook=_ext_hook)


def prep_value(value: Any) -> Any:
    """``value`` ready to embed in a record (for routing values)."""
    try:
        return _prep(value)
    except _Unsupported as exc:
        raise CodecError(f"a {exc.kind} cannot be stored") from None


# ---------------------------------------------------------------- bulk records

OpRecord = tuple[str, str, Any, "msgspec.Raw | None", int, int, tuple[str, ...], Any]
"""(op, type_name, id, data, partition, timestamp_ms, removed, routing): one logged op."""


class _Op(msgspec.Struct, array_like=True, gc=False):
    op: OpType
    type_name: str
    id: str | int
    data: dict[str, Any] | None
    partition: int
    timestamp_ms: int
    removed: tuple[str, ...]
    routing: Any


class _RawOp(msgspec.Struct, array_like=True, gc=False):
    op: OpType
    type_name: str
    id: str | int
    data: msgspec.Raw
    partition: int
    timestamp_ms: int
    removed: tuple[str, ...]
    routing: Any


class _BulkRec(msgspec.Struct, array_like=True, gc=False):
    txn_id: str | None
    timestamp_ms: int
    ops: list[_Op]


class _RawBulkRec(msgspec.Struct, array_like=True, gc=False):
    txn_id: str | None
    timestamp_ms: int
    ops: list[_RawOp]


_BULK_DECODER = msgspec.msgpack.Decoder(_BulkRec, ext_hook=_ext_hook)
_RAW_BULK_DECODER = msgspec.msgpack.Decoder(_RawBulkRec, ext_hook=_ext_hook)
_NIL = b"\xc0"


def encode_bulk(txn_id: str | None, timestamp_ms: int, ops: Sequence[OpRecord]) -> bytes:
    """A bulk's payload (its data values already encoded, passed as ``msgspec.Raw``)."""
    try:
        return _ENCODER.encode((txn_id, timestamp_ms, ops))
    except OverflowError as exc:  # ids and routing values are checked here
        raise CodecError(f"integer out of the 64-bit range in a bulk{_big_int_path(ops)}") from exc


def decode_bulk(first_seq: int, payload: bytes | memoryview) -> Bulk:
    """The bulk a payload holds; versions are ``first_seq``, ``first_seq + 1``, ..."""
    try:
        rec = _BULK_DECODER.decode(payload)
    except msgspec.DecodeError as exc:
        raise CodecError(f"malformed bulk record at seq {first_seq}") from exc
    txn_id, seq, make = rec.txn_id, first_seq, _make_operation
    ops = []
    for o in rec.ops:
        ops.append(make(o.op, o.type_name, o.id, seq, o.data, o.partition,
                        o.timestamp_ms, txn_id, o.removed, o.routing))
        seq += 1
    return _make_bulk(first_seq, tuple(ops), txn_id, rec.timestamp_ms)


_OPERATION_FIELDS = ("op", "type_name", "id", "version", "data", "partition", "timestamp_ms",
                     "txn_id", "removed", "routing")


def _operation_factory() -> Callable[..., Operation]:
    """A faster ``Operation(...)`` for the read path: the frozen dataclass's ``__init__``
    sets each slot through ``object.__setattr__``; the slot descriptors do the same work
    directly. Falls back to the constructor if ``Operation`` ever changes shape."""
    names = tuple(f.name for f in dataclasses.fields(Operation))
    if names != _OPERATION_FIELDS or "__slots__" not in Operation.__dict__:
        return Operation
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9 = (getattr(Operation, n).__set__ for n in names)
    new = object.__new__

    def make(op: OpType, type_name: str, id_: Any, version: int, data: Any, partition: int,
             timestamp_ms: int, txn_id: str | None, removed: tuple[str, ...],
             routing: Any) -> Operation:
        obj: Operation = new(Operation)
        s0(obj, op)
        s1(obj, type_name)
        s2(obj, id_)
        s3(obj, version)
        s4(obj, data)
        s5(obj, partition)
        s6(obj, timestamp_ms)
        s7(obj, txn_id)
        s8(obj, removed)
        s9(obj, routing)
        return obj

    return make


def _bulk_factory() -> Callable[[int, tuple[Operation, ...], str | None, int], Bulk]:
    """Like ``_operation_factory``, for ``Bulk``."""
    names = tuple(f.name for f in dataclasses.fields(Bulk))
    if names != ("first_seq", "operations", "txn_id", "timestamp_ms") or (
        "__slots__" not in Bulk.__dict__
    ):
        return Bulk
    s0, s1, s2, s3 = (getattr(Bulk, n).__set__ for n in names)
    new = object.__new__

    def make(first_seq: int, ops: tuple[Operation, ...], txn_id: str | None, ts: int) -> Bulk:
        obj: Bulk = new(Bulk)
        s0(obj, first_seq)
        s1(obj, ops)
        s2(obj, txn_id)
        s3(obj, ts)
        return obj

    return make


_make_bulk = _bulk_factory()
_make_operation = _operation_factory()


class RawOp(msgspec.Struct, frozen=True):
    """A logged operation whose data stays encoded (for replay into the space)."""

    op: OpType
    type_name: str
    id: str | int
    data: bytes | None
    partition: int
    removed: tuple[str, ...]
    routing: Any


def decode_raw_ops(first_seq: int, payload: bytes | memoryview) -> list[RawOp]:
    try:
        rec = _RAW_BULK_DECODER.decode(payload)
    except msgspec.DecodeError as exc:
        raise CodecError(f"malformed bulk record at seq {first_seq}") from exc
    out = []
    for o in rec.ops:
        data = bytes(o.data)
        out.append(RawOp(o.op, o.type_name, o.id, None if data == _NIL else data,
                         o.partition, o.removed, o.routing))
    return out


# ---------------------------------------------------------------- type descriptors

_DESCRIPTOR_DECODER = msgspec.msgpack.Decoder(TypeDescriptor)


def encode_descriptor(descriptor: TypeDescriptor) -> bytes:
    return _ENCODER.encode(descriptor)


def decode_descriptor(raw: bytes | memoryview) -> TypeDescriptor:
    try:
        return _DESCRIPTOR_DECODER.decode(raw)
    except msgspec.ValidationError:
        pass  # maybe a kind this version does not know (below)
    except msgspec.DecodeError as exc:
        raise CodecError("malformed type record in the operation log") from exc
    try:
        return msgspec.convert(_known_kinds(msgspec.msgpack.decode(raw)), TypeDescriptor)
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
        raise CodecError("malformed type record in the operation log") from exc


def _known_kinds(record: Any) -> Any:
    """A type record with each kind an earlier version let through unchecked (a
    document type's fixed property named ``"string"``) read as ``any``, which is what
    it meant then: every value accepted, stored as given."""
    if isinstance(record, dict):
        fixed = record.get("fixed")
        if isinstance(fixed, list):
            record["fixed"] = [_known_spec(spec) for spec in fixed]
    return record


def _known_spec(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    if spec.get("kind") not in set(Kind):
        spec = {**spec, "kind": Kind.ANY.value}
    nested = spec.get("nested")
    if isinstance(nested, list):
        spec = {**spec, "nested": [_known_spec(n) for n in nested]}
    return spec
