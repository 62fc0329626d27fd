"""Avro values in the Confluent wire format, schemas in a Confluent-compatible registry.

A value's bytes: magic byte ``0``, the writer schema's id (4 bytes, big-endian), the
Avro binary body — what Confluent's ``AvroSerializer`` / ``KafkaAvroSerializer`` write
and read.

- Encoding (source side): the cache's declared schema (``avro.schemas``: cache → .avsc
  file) or one inferred from the value (``gridstream.connect._avro_schema``), registered
  under the subject ``value.subject.name.strategy`` names — ``topic``: ``<topic>-value``,
  ``record``: the record's full name, ``topic_record``: ``<topic>-<record full name>``.
  A value that does not fit its declared schema (a missing field without a default, an
  undeclared field, a wrong type) and a schema the registry refuses (incompatible with
  the subject's compatibility rule, invalid) are ``CodecError``s: that record's fault.
- Decoding (sink side): magic byte, writer schema by id (unknown id: ``CodecError``),
  the body decoded with the writer schema into a dict in the grid's wire form (bytes
  and fixed as base64 text, decimals and UUIDs as text, dates and times as ISO-8601
  text; a NaN or infinite double is a ``CodecError``); a writer schema that is not a
  record, a body that does not match it, or trailing bytes are ``CodecError``s.
- Registry answers are cached (each cache bounded: values of ever new shapes start it
  afresh): one registration per (subject, schema), one lookup per schema id; a value
  with ``None`` fields reads the subject's versions (once, then only newer ones, when
  none read so far fits it). The bytes of a value depend on the value and the registry
  only, never on the values a worker encoded before (``_avro_schema``): a batch re-run
  by a fresh worker is the same bytes.
- A registry that cannot be reached, or answers with a server error, raises
  ``RegistryError``, a ``ConnectorError`` (the connector stops; records are not blamed for it). The
  registry URL may carry credentials (``https://user:pass@host``), or they come from
  ``basic.auth.user.info``: neither ever appears in a message or repr.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Mapping
from typing import Any

import orjson

from gridstream._optional import require
from gridstream.connect._avro_schema import (
    NAMESPACE,
    Form,
    Memory,
    Shape,
    check_value,
    fields_key,
    fits,
    form_of,
    full_name,
    has_holes,
    load_declared,
    record_name,
    remember,
    schema_of,
    shape_of,
)
from gridstream.connect.config import ConverterConfig
from gridstream.connect.converters import Converter
from gridstream.errors import CodecError, ConfigError
from gridstream.grid.contract import Value
from gridstream.protocol.confluent import SchemaIds, frame, subject_name, unframe
from gridstream.protocol.registry import (
    Registry,
    SchemaRegistryClientRegistry,
    redacted_url,
)
from gridstream.protocol.values import wire_default

__all__ = ["AvroConverter", "Registry", "SchemaRegistryClientRegistry", "redacted_url"]


_MAX_CACHED = 4096
"""Entries each cache of a converter keeps (writer schemas, registered ids, reader
schemas, subject versions): values of ever new shapes (dynamic keys) start a cache afresh
instead of growing it without bound."""


_NOT_WIRE = re.compile(rb'"(bytes|fixed|float|double|logicalType)"')
"""What in a parsed schema may decode to a value that is not JSON."""


_PLAIN = frozenset({str, int, bool, type(None)})


class _NotFinite(Exception):
    """A NaN or infinite float met by ``_wire_in_place`` (its path is found afterwards)."""


def _wire_in_place(value: Any) -> Any:
    """``value`` (fastavro's fresh containers, changed in place) in wire form; fast: no
    path is built unless something is wrong."""
    kind = type(value)
    if kind is dict:
        for name, item in value.items():  # values replaced, keys unchanged: allowed
            if type(item) not in _PLAIN:
                value[name] = _wire_in_place(item)
        return value
    if kind is list:
        for index, item in enumerate(value):
            if type(item) not in _PLAIN:
                value[index] = _wire_in_place(item)
        return value
    if kind is float:
        if value - value != 0.0:  # NaN and infinities (inf - inf is NaN)
            raise _NotFinite
        return value
    return wire_default(value)


def _to_wire(value: Any, path: str) -> Any:
    """A decoded value in the grid's wire form (``gridstream.protocol``'s, as the Space
    stores values): bytes and fixed as base64 text, decimals and UUIDs as text, dates and
    times as ISO-8601 text. A NaN or infinite double is a ``CodecError``: JSON has none
    (a grid would store null)."""
    try:
        return _wire_in_place(value)
    except _NotFinite:
        raise CodecError(f"{_not_finite(value, path)} has no JSON form (no grid holds it)"
                         ) from None
    except TypeError as exc:
        raise CodecError(f"a decoded value has no wire form: {exc}") from exc


def _not_finite(value: Any, path: str) -> str:
    """Where the first NaN or infinity in ``value`` is, and what it is."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{f'field {path!r}' if path else 'the value'}: {value}"
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for name, item in items:
        inner = f"{path}[{name}]" if isinstance(value, list) else \
            f"{path}.{name}" if path else str(name)
        found = _not_finite(item, inner)
        if found:
            return found
    return ""


class _Writer:
    """One writer schema under one subject: its id and parsed form."""

    __slots__ = ("header", "parsed", "strict")

    def __init__(self, header: bytes, parsed: Any, strict: bool) -> None:
        self.header = header
        self.parsed = parsed
        self.strict = strict


class _Versions:
    """A subject's registered versions read so far (up to ``last``), by record name and
    field names (the schema id and text of each, in version order), and the latest's
    text."""

    __slots__ = ("by_fields", "last", "latest", "size")

    def __init__(self) -> None:
        self.by_fields: dict[Any, list[tuple[int, str]]] = {}
        self.last = 0
        self.latest: str | None = None
        self.size = 0

    def add(self, version: int, schema_id: int, text: str) -> None:
        self.last = max(self.last, version)
        self.latest = text
        try:
            schema = orjson.loads(text)
            fields = schema["fields"]
            key = (full_name(schema), tuple(str(field["name"]) for field in fields))
        except (orjson.JSONDecodeError, TypeError, KeyError):
            return  # not a record (written by others): it fits no inferred schema
        self.by_fields.setdefault(key, []).append((schema_id, text))
        self.size += 1

    def earliest(self, pattern: Form) -> tuple[int, str] | None:
        """The schema id and text of the earliest version read that fits ``pattern``."""
        for schema_id, text in self.by_fields.get(fields_key(pattern), ()):
            if fits(pattern, form_of(orjson.loads(text))):
                return schema_id, text
        return None


class AvroConverter(Converter):
    """Avro values (see the module docstring)."""

    def __init__(self, config: ConverterConfig, *, registry: Registry | None = None) -> None:
        super().__init__(config)
        require("confluent_kafka.schema_registry", "the avro converter")  # [registry]
        self._fastavro: Any = require("fastavro", "the avro converter")
        if registry is None:
            if not config.schema_registry_url:
                raise ConfigError("value.converter 'avro' needs schema.registry.url")
            info = config.schema_registry_user_info
            registry = SchemaRegistryClientRegistry(
                config.schema_registry_url,
                info.get_secret_value() if info is not None else None)
        self.registry = registry
        declared = load_declared(config.avro_schemas)
        self._declared = {cache: self._parse(schema, f"the declared schema of {cache!r}",
                                             ConfigError)
                          for cache, schema in declared.items()}
        self._declared_text = {cache: orjson.dumps(schema).decode()
                               for cache, schema in declared.items()}
        self._ids = SchemaIds(registry, limit=_MAX_CACHED)
        self._writers: dict[tuple[str, str, Shape], _Writer] = {}
        self._readers: dict[int, Any] = {}
        self._wire: dict[int, bool] = {}
        """schema id → whether its values may hold what is not JSON (bytes, fixed,
        logical types, floats that may be NaN): those are turned into wire form."""
        self._versions: dict[str, _Versions] = {}

    def __repr__(self) -> str:
        return f"AvroConverter({self.config.subject_name_strategy!r}, {self.registry!r})"

    def _parse(self, schema: Mapping[str, Any], what: str, error: type[Exception]) -> Any:
        try:
            return self._fastavro.parse_schema(dict(schema), named_schemas={})
        except Exception as exc:  # fastavro raises several kinds for a bad schema
            raise error(f"{what} is not a valid Avro schema: {exc}") from exc

    def subject(self, topic: str, schema: Mapping[str, Any]) -> str:
        return subject_name(self.config.subject_name_strategy, topic, schema, is_key=False)

    def _schema_id(self, subject: str, text: str) -> int:
        """The registered id (refusals remembered: see ``SchemaIds``)."""
        return self._ids.register(subject, text)

    def _writer(self, topic: str, cache: str, value: Value) -> _Writer:
        declared = self._declared.get(cache)
        if declared is not None:
            key: tuple[str, str, Shape] = (topic, cache, None)
            writer = self._writers.get(key)
            if writer is None:
                text = self._declared_text[cache]
                subject = self.subject(topic, orjson.loads(text))
                schema_id = self._schema_id(subject, text)
                self._keep_reader(schema_id, declared)
                writer = _Writer(frame(schema_id), declared, True)
                self._writers[key] = writer
            return writer
        shape = shape_of(value)
        key = (topic, cache, shape)
        writer = self._writers.get(key)
        if writer is None:
            writer = self._inferred(topic, cache, shape)
            if len(self._writers) >= _MAX_CACHED:
                self._writers.clear()
            self._writers[key] = writer
        return writer

    def _inferred(self, topic: str, cache: str, shape: Shape) -> _Writer:
        subject = self.subject(topic, {"name": record_name(cache), "namespace": NAMESPACE})
        memory: Memory = {}
        if has_holes(shape):
            pattern = form_of(schema_of(cache, shape, {}))
            known, found = self._registered(subject, pattern)
            if found is not None:
                schema_id, text = found
                parsed = self._readers.get(schema_id)
                if parsed is None:
                    parsed = self._parse(orjson.loads(text), f"schema id {schema_id}",
                                         CodecError)
                    self._keep_reader(schema_id, parsed)
                return _Writer(frame(schema_id), parsed, False)
            if known.latest is not None:
                # a subject written by others may not parse: then nothing is learnt
                with contextlib.suppress(orjson.JSONDecodeError, AttributeError, TypeError):
                    remember(orjson.loads(known.latest), memory)
        schema = schema_of(cache, shape, memory)
        parsed = self._parse(schema, f"the schema inferred for cache {cache!r}", CodecError)
        schema_id = self._schema_id(subject, orjson.dumps(schema).decode())
        self._keep_reader(schema_id, parsed)
        return _Writer(frame(schema_id), parsed, False)

    def _registered(self, subject: str, pattern: Form) -> tuple[_Versions, tuple[int, str] | None]:
        """The subject's versions, and the earliest that fits ``pattern`` (its id and
        text) if any: versions read before are asked for again only when none fits (a
        version fitting now fits for good, and stays the earliest)."""
        known = self._versions.get(subject)
        if known is not None:
            found = known.earliest(pattern)
            if found is not None:
                return known, found
        known = self._read_versions(subject, known or _Versions())
        return known, known.earliest(pattern)

    def _read_versions(self, subject: str, known: _Versions) -> _Versions:
        """``known`` with the subject's newer versions (a ``ConnectorError``: asked again
        later); kept while every subject's together stay within ``_MAX_CACHED``."""
        for version, schema_id, text in self.registry.versions(subject, known.last):
            known.add(version, schema_id, text)
        others = sum(v.size for s, v in self._versions.items() if s != subject)
        if others + known.size > _MAX_CACHED:
            self._versions.clear()
        if known.size <= _MAX_CACHED:
            self._versions[subject] = known
        else:
            self._versions.pop(subject, None)
        return known

    def _keep_reader(self, schema_id: int, parsed: Any) -> None:
        """Cache a parsed schema by id (a full cache starts afresh)."""
        if schema_id not in self._readers and len(self._readers) >= _MAX_CACHED:
            self._readers.clear()
            self._wire.clear()
        self._readers[schema_id] = parsed

    def encode_value(self, topic: str, cache: str, value: Value | None) -> bytes | None:
        if value is None:
            return None
        check_value(value)
        writer = self._writer(topic, cache, value)
        out = io.BytesIO()
        out.write(writer.header)
        try:
            self._fastavro.schemaless_writer(out, writer.parsed, value,
                                             strict_allow_default=writer.strict)
        except (ValueError, TypeError, OverflowError, AttributeError, KeyError) as exc:
            raise CodecError(f"value does not fit the Avro schema of cache {cache!r}: "
                             f"{exc}") from exc
        return out.getvalue()

    def _reader(self, schema_id: int) -> Any:
        parsed = self._readers.get(schema_id)
        if parsed is None:
            text = self.registry.schema(schema_id)
            if text is None:
                raise CodecError(f"schema id {schema_id} is unknown to the registry")
            try:
                schema = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise CodecError(f"schema id {schema_id} is not JSON: {exc}") from exc
            if not isinstance(schema, dict) or schema.get("type") != "record":
                raise CodecError(f"schema id {schema_id} is not a record: a grid value is one")
            parsed = self._parse(schema, f"schema id {schema_id}", CodecError)
            self._keep_reader(schema_id, parsed)
        if schema_id not in self._wire:
            self._wire[schema_id] = _NOT_WIRE.search(orjson.dumps(parsed)) is not None
        return parsed

    def decode_value(self, topic: str, data: bytes | None) -> Value | None:
        if data is None:
            return None
        schema_id = unframe(data)
        parsed = self._reader(schema_id)
        body = io.BytesIO(data)
        body.seek(5)
        try:
            value = self._fastavro.schemaless_reader(body, parsed, None)
        except (ValueError, TypeError, EOFError, IndexError, UnicodeDecodeError,
                StopIteration) as exc:
            raise CodecError(f"Avro body does not match schema id {schema_id}: "
                             f"{type(exc).__name__}: {exc}") from exc
        if body.tell() != len(data):
            raise CodecError(f"Avro body has {len(data) - body.tell()} bytes beyond the "
                             f"record of schema id {schema_id}")
        if not isinstance(value, dict):  # pragma: no cover - the schema is a record
            raise CodecError(f"schema id {schema_id} did not decode to a record")
        if self._wire.get(schema_id, True):
            wire: Value = _to_wire(value, "")
            return wire
        return value

    def close(self) -> None:
        self.registry.close()
