"""Avro codec in the Confluent wire format, with the schema derived from the type.

Record value = magic byte ``0`` + 4-byte big-endian schema id + Avro binary body. The
writer schema is derived from the ``TypeDescriptor`` (one envelope record per type) and
registered in a ``SchemaRegistry`` under the subject the ``subject_strategy`` names:
``record`` (default) the record's full name (Confluent's RecordNameStrategy), ``topic``
``<topic>-value``, ``topic_record`` ``<topic>-<record full name>``.

- ``LocalSchemaRegistry`` (the default, for embedded use) derives the id from the
  schema's fingerprint, so a consumer holding the same descriptors resolves ids without
  any server.
- ``RegistrySchemas`` registers in a Confluent-compatible registry
  (``gridstream.protocol.registry``): the ids are the registry's, so confluent-kafka's
  own ``AvroDeserializer`` reads the values. ``AvroCodec(schema_registry_url=...)``
  builds it. A schema the registry refuses (incompatible with the subject's
  compatibility rule, invalid) is a ``CodecError`` (the record's: the mirror's
  undeliverable policy takes it); a registry that cannot be reached is a
  ``RegistryError``.

Mapping of property kinds: str/int/float/bool/bytes native, datetime → timestamp-micros
(naive values are taken as UTC and come back UTC-aware), date → date, uuid → uuid,
decimal → string, declared nested objects → records, list/set/dict/any → JSON text.
Dynamic properties travel as JSON text in ``extra``; ``present`` lists the keys of
``data`` so a partial update decodes to exactly the keys it carried.
"""

from __future__ import annotations

import hashlib
import io
import re
import struct
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from gridstream._optional import require
from gridstream.errors import CodecError, ConfigError
from gridstream.kinds import KindVisitor, kind_table
from gridstream.operations import Kind, PropertySpec, TypeDescriptor
from gridstream.protocol.codec_base import Codec
from gridstream.protocol.envelope import Envelope
from gridstream.protocol.registry import Registry, SchemaRegistryClientRegistry
from gridstream.protocol.values import restore, wire_default

__all__ = ["ENVELOPE_FIELDS", "SUBJECT_STRATEGIES", "AvroCodec", "LocalSchemaRegistry",
           "RegistrySchemas", "SchemaRegistry", "avro_schema", "data_specs",
           "envelope_of_record"]

SUBJECT_STRATEGIES = ("record", "topic", "topic_record")
"""How a writer schema's subject is named (see the module docstring)."""

MAGIC = 0
KIND = "gridstream.kind"
_HEADER = struct.Struct(">bI")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _AvroTypes(KindVisitor[Any]):
    """A kind's Avro type; ``None``: carried as JSON text in a ``string``."""

    def str_(self) -> Any:
        return "string"

    def int_(self) -> Any:
        return "long"

    def float_(self) -> Any:
        return "double"

    def bool_(self) -> Any:
        return "boolean"

    def bytes_(self) -> Any:
        return "bytes"

    def datetime(self) -> Any:
        return {"type": "long", "logicalType": "timestamp-micros"}

    def date(self) -> Any:
        return {"type": "int", "logicalType": "date"}

    def decimal(self) -> Any:
        return "string"

    def uuid(self) -> Any:
        return {"type": "string", "logicalType": "uuid"}

    def list_(self) -> None:
        return None

    set_ = dict_ = object_ = any_ = list_


_TYPES = kind_table(_AvroTypes())
_NATIVE: dict[str, Any] = {k.value: t for k, t in _TYPES.items() if t is not None}
_JSON_KINDS = frozenset(k.value for k, t in _TYPES.items() if t is None)


def _avro_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return cleaned if _NAME.match(cleaned) else f"_{cleaned}"


def _is_record(spec: PropertySpec) -> bool:
    return spec.kind == "object" and bool(spec.nested)


def _avro_fields(specs: tuple[PropertySpec, ...], record_name: str) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = []
    for spec in specs:
        if not _NAME.match(spec.name):
            continue  # carried in ``extra`` as JSON text
        if _is_record(spec):
            avro_type: Any = {
                "type": "record", "name": f"{record_name}_{spec.name}",
                "fields": _avro_fields(spec.nested, f"{record_name}_{spec.name}"),
            }
        else:
            avro_type = _NATIVE.get(spec.kind, "string")
        fields.append({"name": spec.name, "type": ["null", avro_type], "default": None,
                       KIND: spec.kind})
    return fields


def _specs_of(fields: list[dict[str, Any]]) -> tuple[PropertySpec, ...]:
    """The property specs an envelope schema was derived from (its ``KIND`` marks); a
    kind gridstream does not know is a ``CodecError`` (the schema is not one it wrote)."""
    specs = []
    for field in fields:
        avro_type = field["type"][1]
        nested = _specs_of(avro_type["fields"]) if field[KIND] == "object" and isinstance(
            avro_type, dict) and avro_type.get("type") == "record" else ()
        try:
            specs.append(PropertySpec(field["name"], Kind(field[KIND]), nested=nested))
        except ValueError as exc:
            raise CodecError(f"Avro schema field {field['name']!r}: unknown {KIND} "
                             f"{field[KIND]!r}; one of {', '.join(Kind)}") from exc
    return tuple(specs)


def avro_schema(descriptor: TypeDescriptor) -> dict[str, Any]:
    """The envelope schema for one type (stable for a given descriptor)."""
    data_name = f"{_avro_name(descriptor.name)}Data"
    array = {"type": "array", "items": "string"}
    return {
        "type": "record", "name": f"{_avro_name(descriptor.name)}Envelope",
        "namespace": "gridstream.protocol",
        "fields": [
            {"name": "op", "type": "string"},
            {"name": "type", "type": "string"},
            {"name": "id", "type": ["string", "long"]},
            {"name": "version", "type": "long"},
            {"name": "txn", "type": ["null", "string"], "default": None},
            {"name": "ts", "type": "long"},
            {"name": "partition", "type": "int"},
            {"name": "data", "default": None, "type": ["null", {
                "type": "record", "name": data_name,
                "fields": _avro_fields(descriptor.fixed, data_name)}]},
            {"name": "removed", "type": array, "default": []},
            {"name": "present", "type": array, "default": []},
            {"name": "extra", "type": {"type": "map", "values": "string"}, "default": {}},
        ],
    }


class SchemaRegistry(ABC):
    """Where writer schemas get their ids (local now; Confluent's server later)."""

    @abstractmethod
    def register(self, subject: str, schema: Mapping[str, Any]) -> int:
        """The id of ``schema`` under ``subject`` (registering it if new)."""

    @abstractmethod
    def lookup(self, schema_id: int) -> Mapping[str, Any] | None:
        """The schema with that id, or None if unknown here."""


class LocalSchemaRegistry(SchemaRegistry):
    """Ids from the schema fingerprint; optionally persisted as ``<id>.avsc`` files in
    ``directory`` so that consumers without the descriptors can decode too."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._schemas: dict[int, bytes] = {}
        self._directory = Path(directory) if directory is not None else None
        self._lock = threading.Lock()

    @staticmethod
    def schema_id(schema: Mapping[str, Any]) -> int:
        canonical = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        return int.from_bytes(hashlib.sha256(canonical).digest()[:4], "big") & 0x7FFFFFFF

    def register(self, subject: str, schema: Mapping[str, Any]) -> int:
        canonical = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        schema_id = self.schema_id(schema)
        with self._lock:
            known = self._schemas.setdefault(schema_id, canonical)
            if known != canonical:
                raise CodecError(f"schema id {schema_id} collides for subject {subject!r}")
            if self._directory is not None:
                path = self._directory / f"{schema_id}.avsc"
                if not path.exists():
                    self._directory.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(canonical)
        return schema_id

    def lookup(self, schema_id: int) -> Mapping[str, Any] | None:
        raw = self._schemas.get(schema_id)
        if raw is None and self._directory is not None:
            path = self._directory / f"{schema_id}.avsc"
            if path.exists():
                raw = path.read_bytes()
                self._schemas[schema_id] = raw
        if raw is None:
            return None
        schema: Mapping[str, Any] = orjson.loads(raw)
        return schema


class RegistrySchemas(SchemaRegistry):
    """``SchemaRegistry`` over a Confluent-compatible registry (``Registry``)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def __repr__(self) -> str:
        return f"RegistrySchemas({self.registry!r})"

    def register(self, subject: str, schema: Mapping[str, Any]) -> int:
        return self.registry.register(subject, orjson.dumps(schema).decode())

    def lookup(self, schema_id: int) -> Mapping[str, Any] | None:
        text = self.registry.schema(schema_id)
        if text is None:
            return None
        try:
            schema: Mapping[str, Any] = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"schema id {schema_id} is not JSON: {exc}") from exc
        return schema


Writer = tuple[int, Any, dict[str, PropertySpec]]


class AvroCodec(Codec):
    """Confluent-framed Avro (see the module docstring).

    ``registry`` (a ``SchemaRegistry``) or ``schema_registry_url`` (with
    ``basic_auth_user_info``, a secret never shown) choose where schemas get their ids;
    neither: a ``LocalSchemaRegistry``."""

    name = "avro"

    def __init__(self, registry: SchemaRegistry | None = None, *,
                 schema_registry_url: str | None = None,
                 basic_auth_user_info: str | None = None,
                 subject_strategy: str = "record") -> None:
        fastavro = require("fastavro", "the avro codec")
        if subject_strategy not in SUBJECT_STRATEGIES:
            raise ConfigError(f"avro subject strategy {subject_strategy!r}: use one of "
                              f"{', '.join(SUBJECT_STRATEGIES)}")
        if basic_auth_user_info is not None and not schema_registry_url:
            raise ConfigError("basic.auth.user.info is only used with a schema registry URL")
        if schema_registry_url:
            if registry is not None:
                raise ConfigError("give the avro codec a registry or a schema registry URL, "
                                  "not both")
            registry = RegistrySchemas(SchemaRegistryClientRegistry(
                schema_registry_url, basic_auth_user_info))
        self._fastavro: Any = fastavro
        self.registry = registry or LocalSchemaRegistry()
        self.subject_strategy = subject_strategy
        self._writers: dict[tuple[TypeDescriptor, str], Writer] = {}
        self._refused: dict[tuple[TypeDescriptor, str], str] = {}
        self._readers: dict[int, tuple[Any, tuple[PropertySpec, ...]]] = {}

    def __repr__(self) -> str:
        return f"AvroCodec({self.registry!r}, subject_strategy={self.subject_strategy!r})"

    def subject(self, schema: Mapping[str, Any], topic: str | None) -> str:
        """The subject a writer schema is registered under for ``topic``."""
        full = f"{schema['namespace']}.{schema['name']}"
        if self.subject_strategy == "record":
            return full
        if not topic:
            raise CodecError(f"subject strategy {self.subject_strategy!r} needs the "
                             "record's topic, and it has none")
        return f"{topic}-value" if self.subject_strategy == "topic" else f"{topic}-{full}"

    def _writer(self, descriptor: TypeDescriptor, topic: str | None = None) -> Writer:
        schema = avro_schema(descriptor)
        subject = self.subject(schema, topic)
        key = (descriptor, subject)
        cached = self._writers.get(key)
        if cached is None:
            refused = self._refused.get(key)
            if refused is not None:  # asked once: not once per record
                raise CodecError(refused)
            try:
                schema_id = self.registry.register(subject, schema)
            except CodecError as exc:
                self._refused[key] = str(exc)
                raise
            parsed, specs = self._parse(schema)
            cached = (schema_id, parsed, {s.name: s for s in specs})
            self._writers[key] = cached
            self._readers[schema_id] = (parsed, specs)
        return cached

    def _parse(self, schema: Mapping[str, Any]) -> tuple[Any, tuple[PropertySpec, ...]]:
        data_type = next(f for f in schema["fields"] if f["name"] == "data")["type"][1]
        parsed = self._fastavro.parse_schema(dict(schema), named_schemas={})
        return parsed, _specs_of(data_type["fields"])

    def encode(self, envelope: Envelope, descriptor: TypeDescriptor | None) -> bytes:
        return self._encode(envelope, descriptor, None)

    def encode_for(self, envelope: Envelope, descriptor: TypeDescriptor | None,
                   topic: str) -> bytes:
        return self._encode(envelope, descriptor, topic)

    def _encode(self, envelope: Envelope, descriptor: TypeDescriptor | None,
                topic: str | None) -> bytes:
        if descriptor is None:
            raise CodecError(f"type {envelope.type!r} is unknown; the avro codec needs its "
                             "descriptor")
        schema_id, parsed, specs = self._writer(descriptor, topic)
        record = envelope.to_wire()
        data, record["extra"] = _split(envelope.data or {}, specs)
        record["data"] = None if envelope.data is None else data
        record["present"] = [] if envelope.data is None else list(envelope.data)
        out = io.BytesIO()
        out.write(_HEADER.pack(MAGIC, schema_id))
        try:
            self._fastavro.schemaless_writer(out, parsed, record)
        except (ValueError, TypeError, OverflowError, AttributeError) as exc:
            raise CodecError(f"{envelope.type} {envelope.id!r}: not Avro-serializable: {exc}") \
                from exc
        return out.getvalue()

    def decode(self, payload: bytes, types: Mapping[str, TypeDescriptor]) -> Envelope:
        return self._decode(payload, types, restored=True)

    def decode_wire(self, payload: bytes, types: Mapping[str, TypeDescriptor]) -> Envelope:
        """As ``decode``, but ``data`` keeps the values as Avro gives them (the JSON-text
        kinds parsed back, nothing else restored): what the JSON codec writes again as
        the mirror's JSON would carry them (``types`` only resolve local ids)."""
        return self._decode(payload, types, restored=False)

    def _decode(self, payload: bytes, types: Mapping[str, TypeDescriptor], *,
                restored: bool) -> Envelope:
        if len(payload) < _HEADER.size or payload[0] != MAGIC:
            raise CodecError("not a Confluent-framed Avro record (magic byte 0 expected)")
        _, schema_id = _HEADER.unpack_from(payload)
        parsed, specs = self._reader(schema_id, types)
        try:
            record = self._fastavro.schemaless_reader(io.BytesIO(payload[_HEADER.size:]),
                                                      parsed, None)
        except (ValueError, TypeError, EOFError, IndexError, UnicodeDecodeError) as exc:
            raise CodecError(f"avro body does not match schema {schema_id}: {exc}") from exc
        return _envelope(record, specs, restored=restored)

    def _reader(self, schema_id: int, types: Mapping[str, TypeDescriptor]
                ) -> tuple[Any, tuple[PropertySpec, ...]]:
        reader = self._readers.get(schema_id)
        if reader is None and isinstance(self.registry, LocalSchemaRegistry):
            for descriptor in types.values():  # the local ids derive from the schemas
                derived = avro_schema(descriptor)
                if LocalSchemaRegistry.schema_id(derived) == schema_id:
                    reader = self._readers[schema_id] = self._parse(derived)
                    break
        if reader is None:
            schema = self.registry.lookup(schema_id)
            if schema is None:
                raise CodecError(f"unknown avro schema id {schema_id}")
            reader = self._parse(schema)
            self._readers[schema_id] = reader
        return reader


def _envelope(record: dict[str, Any], specs: tuple[PropertySpec, ...], *,
              restored: bool = True) -> Envelope:
    try:
        present = record.pop("present")
        extra = record.pop("extra")
        if record["data"] is not None:
            data = _join(record["data"], extra, present, specs)
            record["data"] = restore(data, specs) if restored else data
    except (KeyError, TypeError, ValueError) as exc:  # orjson's decode error is a ValueError
        raise CodecError(f"avro record is not a gridstream envelope: {exc!r}") from exc
    return Envelope.from_wire(record)


def envelope_of_record(record: Mapping[str, Any], schema: Mapping[str, Any]) -> Envelope:
    """The envelope of a record another Avro reader decoded with the writer ``schema``
    (e.g. confluent-kafka's ``AvroDeserializer``): declared properties restored, the
    JSON-text kinds and ``extra`` parsed back, exactly the keys ``present`` lists."""
    return _envelope(dict(record), data_specs(schema))


ENVELOPE_FIELDS = ("op", "type", "id", "version", "txn", "ts", "partition", "data", "removed",
                   "present", "extra")
"""The fields of every envelope schema (``avro_schema``)."""


def data_specs(schema: Mapping[str, Any]) -> tuple[PropertySpec, ...]:
    """The declared properties of an envelope schema's ``data`` record (from its
    ``KIND`` marks); ``CodecError`` when ``schema`` is not an envelope schema."""
    try:
        names = [f["name"] for f in schema["fields"]]
        if schema.get("type") != "record" or names != list(ENVELOPE_FIELDS):
            raise CodecError(f"fields {names} are not an envelope's")
        data_type = next(f for f in schema["fields"] if f["name"] == "data")["type"][1]
        return _specs_of(data_type["fields"])
    except (KeyError, StopIteration, TypeError, IndexError) as exc:
        raise CodecError(f"not a gridstream envelope schema: {exc!r}") from exc
    except CodecError as exc:
        raise CodecError(f"not a gridstream envelope schema: {exc}") from exc


def _split(data: Mapping[str, Any], specs: Mapping[str, PropertySpec]) -> tuple[dict[str, Any],
                                                                                  dict[str, str]]:
    """Declared properties in Avro form; everything else as JSON text."""
    fields: dict[str, Any] = {}
    extra: dict[str, str] = {}
    for key, value in data.items():
        spec = specs.get(key)
        if spec is None:
            extra[key] = _json_text(value)
        else:
            fields[key] = _to_avro(value, spec)
    return fields, extra


def _to_avro(value: Any, spec: PropertySpec) -> Any:
    if value is None:
        return None
    if _is_record(spec):
        if not isinstance(value, Mapping):
            value = wire_default(value)
        nested = {s.name: s for s in spec.nested if _NAME.match(s.name)}
        unknown = set(value) - set(nested)
        if unknown:
            raise CodecError(f"property {spec.name}: undeclared nested keys {sorted(unknown)}")
        return {k: _to_avro(v, nested[k]) for k, v in value.items()}
    if spec.kind in _JSON_KINDS:
        return _json_text(value)
    if spec.kind == "decimal":
        return str(value)
    return value


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value, default=wire_default, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise CodecError(f"value is not JSON-serializable: {exc}") from exc


def _join(fields: Mapping[str, Any], extra: Mapping[str, str], present: list[str],
          specs: tuple[PropertySpec, ...]) -> dict[str, Any]:
    """Rebuild ``data`` with exactly the keys it had (JSON-text kinds parsed back)."""
    by_name = {s.name: s for s in specs}
    data: dict[str, Any] = {}
    for key in present:
        if key in extra:
            data[key] = orjson.loads(extra[key])
        else:
            data[key] = _from_avro(fields.get(key), by_name[key])
    return data


def _from_avro(value: Any, spec: PropertySpec) -> Any:
    if value is None:
        return None
    if _is_record(spec):
        nested = {s.name: s for s in spec.nested}
        return {k: _from_avro(v, nested[k]) for k, v in value.items()}
    if spec.kind in _JSON_KINDS:
        return orjson.loads(value)
    return value
