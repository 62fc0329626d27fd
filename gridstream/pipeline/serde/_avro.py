"""Avro in the Confluent wire format (``KafkaAvroSerializer`` / ``KafkaAvroDeserializer``).

Bytes: magic byte 0, the writer schema's registry id (4 bytes, big-endian), the Avro
binary body — what confluent-kafka's ``AvroSerializer`` / ``AvroDeserializer`` and
Confluent's Java serializers write and read.

With a declared record reader schema a source's records decode in the JVM
(``_avro_jvm``: Spark's ``from_avro``, a branch per writer schema id); otherwise in Python
(fastavro), where a record's writer schema is looked up by id (cached), so ids registered
while a pipeline runs decode without a re-plan. With a declared
reader schema (``key.schema`` / ``value.schema``) records are read with Avro schema
resolution (fields the writer lacks take the reader's default; a writer field the reader
lacks goes to ``_extra`` as JSON text, or is dropped with ``unknown.fields=drop``); a
writer schema the reader cannot resolve is a decode error naming both.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from gridstream._optional import require
from gridstream.errors import CodecError, ConfigError
from gridstream.pipeline.serde._avro_jvm import (
    AvroPlan,
    known_subjects,
    plan_columns,
    staged_column,
    writer_extra,
)
from gridstream.pipeline.serde._avro_types import avro_ddl
from gridstream.pipeline.serde._base import Deserializer, Serializer, unknown_fields
from gridstream.protocol.confluent import HEADER, SchemaIds, frame, strategy, subject_name, unframe
from gridstream.protocol.registry import Registry, SchemaRegistryClientRegistry, redacted_url
from gridstream.protocol.values import wire_default

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["AvroDeserializer", "AvroSerializer", "AvroSettings", "load_schema"]

_MAX_CACHED = 4096
_PRIMITIVE = {str: "string", bool: "boolean", int: "long", float: "double",
              bytes: "bytes"}
_BODY_ERRORS = (ValueError, TypeError, EOFError, IndexError, UnicodeDecodeError,
                StopIteration, KeyError)


class _Secret:
    """``basic.auth.user.info``: never in a repr or message."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "'***'"

    def __getstate__(self) -> str:
        return self.value

    def __setstate__(self, state: str) -> None:
        self.value = state


def _flag(props: Mapping[str, Any], name: str, default: bool) -> bool:
    value = props.get(name, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"{name} must be true or false, not {value!r}")


def load_schema(given: Any, prop: str) -> dict[str, Any] | list[Any] | str:
    """A declared Avro schema: parsed JSON, JSON text, or the path of an ``.avsc`` file."""
    if isinstance(given, dict | list):
        return given
    text = str(given).strip()
    if not text.startswith(("{", "[", '"')):
        try:
            text = Path(text).read_text()
        except OSError as exc:
            raise ConfigError(f"{prop}: cannot read {given!r}: {exc.strerror}") from exc
    try:
        schema: dict[str, Any] | list[Any] | str = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{prop} is not JSON (an Avro schema, or the path of an .avsc "
                          f"file): {exc}") from exc
    return schema


def _parse(schema: Any, what: str, error: type[Exception]) -> Any:
    fastavro = require("fastavro", "Avro in a pipeline")

    try:
        return fastavro.parse_schema(schema, named_schemas={})
    except Exception as exc:  # fastavro raises several kinds for a bad schema
        raise error(f"{what} is not a valid Avro schema: {exc}") from exc


class AvroSettings:
    """The options both directions share (read from Kafka-style properties)."""

    def __init__(self, props: Mapping[str, Any], *, is_key: bool) -> None:
        side = "key" if is_key else "value"
        self.url = props.get("schema.registry.url")
        if not self.url or not isinstance(self.url, str):
            raise ConfigError(f"{side}: Avro needs schema.registry.url")
        info = props.get("basic.auth.user.info")
        self.user_info = _Secret(str(info)) if info else None
        prop = f"{side}.subject.name.strategy"
        self.strategy = strategy(props.get(prop), prop)
        self.auto_register = _flag(props, "auto.register.schemas", True)
        self.use_latest = _flag(props, "use.latest.version", False)
        unknown = unknown_fields(props)
        if unknown not in ("extra", "drop"):
            raise ConfigError(f"unknown.fields must be extra or drop, not {unknown!r}")
        self.unknown = unknown
        prop = f"{side}.schema"
        self.declared = load_schema(props[prop], prop) if props.get(prop) else None
        self.parsed = None if self.declared is None else \
            _parse(self.declared, prop, ConfigError)

    def __repr__(self) -> str:
        return f"AvroSettings({redacted_url(str(self.url))!r}, {self.strategy!r})"

    def registry(self) -> Registry:
        return SchemaRegistryClientRegistry(
            str(self.url), self.user_info.value if self.user_info else None)


class _Lazy:
    """The registry client and caches: built on first use, never pickled."""

    _registry: Registry | None

    def __init__(self, settings: AvroSettings, registry: Registry | None) -> None:
        self.settings = settings
        self._registry = registry
        self._given = registry is not None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = self.settings.registry()
        return self._registry

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in list(state):
            if name.startswith("_cache") or (name == "_registry" and not self._given):
                state[name] = {} if name.startswith("_cache") else None
        return state

    def close(self) -> None:
        if self._registry is not None:
            self._registry.close()


class _Reader:
    __slots__ = ("extra", "parsed")

    def __init__(self, parsed: Any, extra: tuple[str, ...]) -> None:
        self.parsed = parsed
        self.extra = extra


class AvroDeserializer(_Lazy, Deserializer):
    name = "Avro"

    def __init__(self, settings: AvroSettings, *, is_key: bool,
                 registry: Registry | None = None) -> None:
        Deserializer.__init__(self, is_key=is_key)
        _Lazy.__init__(self, settings, registry)
        self._cache_writers: dict[int, _Reader] = {}
        declared = settings.declared
        self.ddl = None if declared is None else avro_ddl(
            declared, extra=settings.unknown == "extra")
        self._topics: tuple[str, ...] | None = None
        self._learned: set[int] = set()
        self._plan: AvroPlan | None = None

    @classmethod
    def from_props(cls, props: Mapping[str, Any], *, is_key: bool,
                   registry: Registry | None = None) -> AvroDeserializer:
        return cls(AvroSettings(props, is_key=is_key), is_key=is_key, registry=registry)

    def __repr__(self) -> str:
        return f"AvroDeserializer({self.side}, {self.settings!r})"

    def for_topics(self, topics: Sequence[str] | None) -> None:
        self._topics = None if topics is None else tuple(topics)

    def learn(self, ids: set[int]) -> bool:
        """Ids a ``NewSchemaError`` named, for the next plan; False when none is new."""
        new = ids - self._learned
        self._learned |= new
        return bool(new)

    def prepare(self) -> None:
        """On the driver, before the query: the JVM plan, or why there is none."""
        self._plan, self.why_python = None, ""
        reader, settings = self.settings.declared, self.settings
        if not isinstance(reader, dict) or reader.get("type") != "record" or self.ddl is None:
            self.why_python = (f"no declared {self.side}.schema" if reader is None else
                               f"the declared {self.side}.schema is not a record")
            return
        subjects = known_subjects(settings.strategy, self._topics, reader,
                                  is_key=self.is_key)
        if subjects is None:
            self.why_python = "topics by pattern: the subjects are not known before the query"
            return
        plan = AvroPlan(self.side, reader, self.ddl, settings.unknown == "extra",
                        subjects=subjects)
        for subject in subjects:
            for _version, schema_id, text in self.registry.versions(subject):
                plan.writers[schema_id] = text
        for schema_id in sorted(self._learned - set(plan.writers)):
            try:
                found = self.registry.schema(schema_id)
            except CodecError as exc:  # not an Avro schema
                plan.refused[schema_id] = f"{self.side}: {exc}"
                continue
            if found is None:
                plan.refused[schema_id] = self._unknown(schema_id)
            else:
                plan.writers[schema_id] = found
        if plan.extra:
            wider = sorted(i for i, text in plan.writers.items()
                           if writer_extra(reader, orjson.loads(text)))
            if wider:
                ids = ", ".join(map(str, wider))
                self.why_python = (f"schema id{'s' if len(wider) > 1 else ''} {ids} "
                                   f"{'have' if len(wider) > 1 else 'has'} fields the "
                                   f"declared {self.side}.schema lacks, which "
                                   "unknown.fields=extra keeps in _extra")
                return
        self._plan = plan

    def _unknown(self, schema_id: int) -> str:
        return f"{self.side}: schema id {schema_id} is unknown to the registry"

    def _staged_name(self) -> str:
        return f"_gs_avro_{self.side}"

    def staged(self, raw: Column) -> dict[str, Column]:
        found = None if self._plan is None else staged_column(raw, self._plan)
        return {} if found is None else {self._staged_name(): found}

    def jvm(self, raw: Column) -> tuple[Column, Column | None] | None:
        if self._plan is None:
            return None
        from pyspark.sql import functions as F  # noqa: N812

        found = F.col(self._staged_name()) if self._plan.writers else None
        return plan_columns(raw, found, self._plan)

    def _writer(self, schema_id: int) -> _Reader:
        found = self._cache_writers.get(schema_id)
        if found is not None:
            return found
        text = self.registry.schema(schema_id)
        if text is None:
            raise CodecError(self._unknown(schema_id))
        try:
            schema = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"{self.side}: schema id {schema_id} is not JSON: {exc}") from exc
        parsed = _parse(schema, f"schema id {schema_id}", CodecError)
        extra = writer_extra(self.settings.declared, schema)
        if len(self._cache_writers) >= _MAX_CACHED:
            self._cache_writers.clear()
        found = self._cache_writers[schema_id] = _Reader(parsed, extra)
        return found

    def python(self, topic: str, data: bytes | None) -> Any:
        fastavro = require("fastavro", "Avro in a pipeline")

        if data is None:
            return None
        data = bytes(data)
        schema_id = unframe(data, self.side)
        writer = self._writer(schema_id)
        reader = self.settings.parsed
        body = io.BytesIO(data)
        body.seek(HEADER.size)
        try:
            value = fastavro.schemaless_reader(body, writer.parsed, reader)
        except fastavro.read.SchemaResolutionError as exc:
            raise CodecError(f"{self.side}: schema id {schema_id} cannot be read as the "
                             f"declared {self.side}.schema: {exc}") from exc
        except _BODY_ERRORS as exc:
            raise CodecError(f"{self.side}: Avro body does not match schema id {schema_id}: "
                             f"{type(exc).__name__}: {exc}") from exc
        if body.tell() != len(data):
            raise CodecError(f"{self.side}: Avro body has {len(data) - body.tell()} bytes "
                             f"beyond the record of schema id {schema_id}")
        if reader is not None and self.settings.unknown == "extra" and isinstance(value, dict):
            value["_extra"] = self._extra(data, writer) if writer.extra else {}
        return value

    def _extra(self, data: bytes, writer: _Reader) -> dict[str, str]:
        fastavro = require("fastavro", "Avro in a pipeline")

        body = io.BytesIO(data)
        body.seek(HEADER.size)
        full: Any = fastavro.schemaless_reader(body, writer.parsed, None)
        return {name: orjson.dumps(full.get(name), default=wire_default).decode()
                for name in writer.extra}


class AvroSerializer(_Lazy, Serializer):
    name = "Avro"

    def __init__(self, settings: AvroSettings, *, is_key: bool,
                 registry: Registry | None = None) -> None:
        Serializer.__init__(self, is_key=is_key)
        _Lazy.__init__(self, settings, registry)
        if settings.use_latest and settings.strategy != "topic" and settings.declared is None:
            raise ConfigError(f"{self.side}: use.latest.version with the "
                              f"{settings.strategy} strategy needs {self.side}.schema (the "
                              "record's name names the subject)")
        self._cache_ids: dict[str, SchemaIds] = {}
        self._cache_writers: dict[tuple[str, str], tuple[bytes, Any]] = {}
        declared = settings.declared
        self.jvm_type = None
        # the JVM writes a declared record schema (use.latest.version reads the
        # registry's) that has a Spark type (not a recursive one, say)
        if isinstance(declared, dict) and declared.get("type") == "record" and \
                not settings.use_latest:
            with contextlib.suppress(ConfigError):
                self.jvm_type = avro_ddl(declared, extra=False)

    @classmethod
    def from_props(cls, props: Mapping[str, Any], *, is_key: bool,
                   registry: Registry | None = None) -> AvroSerializer:
        return cls(AvroSettings(props, is_key=is_key), is_key=is_key, registry=registry)

    def __repr__(self) -> str:
        return f"AvroSerializer({self.side}, {self.settings!r})"

    def _schema(self, value: Any) -> Any:
        if self.settings.declared is not None:
            return self.settings.declared
        kind = _PRIMITIVE.get(type(value))
        if kind is None:
            raise CodecError(f"{self.side}: a {type(value).__name__} needs a declared "
                             f"{self.side}.schema (or use.latest.version=true)")
        return kind

    def _writer(self, topic: str, value: Any) -> tuple[bytes, Any]:
        settings = self.settings
        schema = None if settings.use_latest else self._schema(value)
        key = (topic, "" if schema is None else orjson.dumps(schema).decode())
        found = self._cache_writers.get(key)
        if found is not None:
            return found
        if schema is None:
            subject = subject_name(settings.strategy, topic, settings.declared,
                                   is_key=self.is_key)
            text = self.registry.latest(subject)
            if text is None:
                raise CodecError(f"{self.side}: use.latest.version: subject {subject!r} has "
                                 "no schema")
            schema_id = self.registry.lookup(subject, text)
            schema = orjson.loads(text)
        else:
            subject = subject_name(settings.strategy, topic, schema, is_key=self.is_key)
            text = key[1]
            schema_id = self._ids(subject, text)
        if schema_id is None:
            raise CodecError(f"{self.side}: subject {subject!r} holds no such schema "
                             "(auto.register.schemas=false)")
        if schema is settings.declared and settings.parsed is not None:
            parsed = settings.parsed
        else:
            parsed = _parse(schema, f"the schema of subject {subject!r}", CodecError)
        if len(self._cache_writers) >= _MAX_CACHED:
            self._cache_writers.clear()
        found = self._cache_writers[key] = (frame(schema_id), parsed)
        return found

    def jvm(self, col: Column, topic: str | None = None) -> Column | None:
        """``to_avro`` with the declared schema after its 5-byte header (the schema
        registered, or looked up, on the driver); None when the subject lacks it or the
        registry refuses it (the Python pass then makes each record an encode error)."""
        if self.jvm_type is None or topic is None:
            return None
        from pyspark.sql import functions as F  # noqa: N812
        from pyspark.sql.avro.functions import to_avro

        declared = self.settings.declared
        text = orjson.dumps(declared).decode()
        subject = subject_name(self.settings.strategy, topic, declared, is_key=self.is_key)
        try:
            schema_id = self._ids(subject, text)
        except CodecError:  # refused: the Python pass makes each record an encode error
            return None
        if schema_id is None:
            return None
        return F.when(col.isNotNull(), F.concat(F.lit(frame(schema_id)), to_avro(col, text)))

    def jvm_errors(self, col: Column) -> Column | None:
        """A null in a field the declared record does not allow null (top-level fields;
        a nested one fails the query, as Spark's ``to_avro`` does)."""
        from pyspark.sql import functions as F  # noqa: N812

        declared = self.settings.declared
        if self.jvm_type is None or not isinstance(declared, dict):
            return None
        error: Any = None
        for spec in declared.get("fields", ()):
            kind = spec.get("type")
            if kind == "null" or isinstance(kind, list) and "null" in kind:
                continue
            name = spec["name"]
            why = F.lit(f"{self.side} does not fit its Avro schema: field {name!r} is null")
            hit = col.isNotNull() & col[name].isNull()
            error = F.when(hit, why) if error is None else error.when(hit, why)
        return error  # type: ignore[no-any-return]

    def _ids(self, subject: str, text: str) -> int | None:
        if not self.settings.auto_register:
            return self.registry.lookup(subject, text)
        ids = self._cache_ids.get("")
        if ids is None:
            ids = self._cache_ids[""] = SchemaIds(self.registry)
        return ids.register(subject, text)

    def python(self, topic: str, value: Any) -> bytes | None:
        fastavro = require("fastavro", "Avro in a pipeline")

        if value is None:
            return None
        header, parsed = self._writer(topic, value)
        out = io.BytesIO()
        out.write(header)
        try:
            fastavro.schemaless_writer(out, parsed, value, strict=True,
                                       strict_allow_default=True)
        except (ValueError, TypeError, OverflowError, AttributeError, KeyError) as exc:
            raise CodecError(f"{self.side} does not fit its Avro schema: "
                             f"{type(exc).__name__}: {exc}") from exc
        return out.getvalue()
