"""The sink's decode step: Kafka records → grid writes, on the executors (``mapInArrow``).

Each record becomes one row with a status:

- ``ok``: ``cache``, ``key`` (the key as JSON text, so ``1`` and ``"1"`` stay apart) and
  ``value`` (JSON text; null for a tombstone, which removes the key);
- ``filtered``: ``cacheFilter`` said no (counted, not an error);
- ``bad``: it cannot be decoded, keyed, transformed or filtered; ``stage`` and
  ``reason`` say why, ``raw_key`` / ``raw_value`` (and ``headers`` when the batch read
  them) keep the original for a dead letter. The driver applies the error policy.

The key comes from ``keyPolicy``: ``key`` — the key converter's (a record without a key
is bad); ``value`` — ``keyFields`` of the value (one field: its value, a string or an
integer; several: a JSON array text of their values); ``kafka`` — ``"topic/partition/
offset"``. The cache is ``cachePrefix`` + the topic, after the transforms: a transform
that routes the topic (or sets the record's cache) chooses another cache. A tombstone is
never filtered (the filter judges entries; a removal has none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import orjson

from gridstream.connect.config import ConverterConfig, KeyPolicy, TransformConfig
from gridstream.connect.converters import Converter, build_converter
from gridstream.connect.filters import EntryFilter, load_filter
from gridstream.connect.record import Record
from gridstream.connect.transforms import Chain, build_chain, key_from_fields
from gridstream.errors import CodecError, RecordError
from gridstream.grid._space_writes import APPLIED_TYPE
from gridstream.grid.contract import Key, Value
from gridstream.kafka.where import KafkaPosition, kafka_where
from gridstream.spark import worker
from gridstream.spark.grid_apply import Entry

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BAD", "FILTERED", "OK", "SKIPPED", "DecodeSpec", "Decoded", "Decoder",
           "decode_batches", "decode_entries", "output_schema"]

OK: Final = "ok"
FILTERED: Final = "filtered"
BAD: Final = "bad"
SKIPPED: Final = "skipped"
"""A record ``skipRecords`` names: not decoded, not applied."""
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_HEADERS_TYPE = "array<struct<key:string,value:binary>>"


@dataclass(frozen=True)
class DecodeSpec:
    """What the decode needs of a sink's config (picklable: Spark ships it)."""

    connector: str
    converter: ConverterConfig
    key_policy: KeyPolicy
    key_fields: tuple[str, ...] = ()
    cache_prefix: str = ""
    transforms: tuple[TransformConfig, ...] = ()
    cache_filter: str | None = None
    allowed_modules: tuple[str, ...] = ()
    id_property: str | None = None
    """The Space: a value's id property, which must hold the key when present (the Space
    refuses another id; checked here so one record cannot fail a whole batch)."""
    with_headers: bool = False
    """The batch has a ``headers`` column (kept for dead letters)."""
    skip: frozenset[KafkaPosition] = frozenset()
    """The records ``skipRecords`` names."""


def output_schema(with_headers: bool) -> str:
    """The decoded rows' schema (Spark DDL)."""
    schema = ("status string, topic string, partition int, offset long, cache string, "
              "key string, value string, stage string, reason string, raw_key binary, "
              "raw_value binary")
    return f"{schema}, headers {_HEADERS_TYPE}" if with_headers else schema


@dataclass(frozen=True, slots=True)
class Decoded:
    """One record's outcome (see the module docstring)."""

    status: str
    cache: str | None = None
    key: str | None = None
    value: str | None = None
    stage: str | None = None
    reason: str | None = None


class _Bad(Exception):  # noqa: N818 - a control-flow signal inside this module only
    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(reason)
        self.stage, self.reason = stage, reason


@dataclass
class Decoder:
    """The converter, transform chain and filter of one spec (built once per worker)."""

    spec: DecodeSpec
    converter: Converter = field(init=False)
    chain: Chain = field(init=False)
    keep: EntryFilter | None = field(init=False)

    def __post_init__(self) -> None:
        s = self.spec
        self.converter = build_converter(s.converter)
        self.chain = build_chain(s.transforms)
        self.keep = load_filter(s.cache_filter, s.allowed_modules) if s.cache_filter else None

    def decode(self, topic: str, partition: int, offset: int, key: bytes | None,
               value: bytes | None, timestamp_ms: int | None = None,
               headers: Sequence[tuple[str, bytes]] = ()) -> Decoded:
        """One Kafka record's outcome (a valid one's key and value as JSON text)."""
        out = self.decode_entry(topic, partition, offset, key, value, timestamp_ms, headers)
        if not isinstance(out, Entry):
            return out
        text = None if out.value is None else orjson.dumps(out.value).decode()
        return Decoded(OK, out.cache, orjson.dumps(out.key).decode(), text)

    def decode_entry(self, topic: str, partition: int, offset: int, key: bytes | None,
                     value: bytes | None, timestamp_ms: int | None = None,
                     headers: Sequence[tuple[str, bytes]] = ()) -> Entry | Decoded:
        """One Kafka record's write (``Entry``), or its outcome when it is filtered or
        bad (``Decoded``), or skipped by ``skipRecords``."""
        if self.spec.skip and (topic, partition, offset) in self.spec.skip:
            return Decoded(SKIPPED, stage="skip", reason="named by skipRecords")
        try:
            return self._decode(topic, partition, offset, key, value, timestamp_ms, headers)
        except _Bad as bad:
            return Decoded(BAD, stage=bad.stage, reason=bad.reason)

    def _decode(self, topic: str, partition: int, offset: int, raw_key: bytes | None,
                raw_value: bytes | None, timestamp_ms: int | None,
                headers: Sequence[tuple[str, bytes]]) -> Entry | Decoded:
        try:
            value = self.converter.decode_value(topic, raw_value)
        except CodecError as exc:
            raise _Bad("value", str(exc)) from exc
        key = self._key(topic, partition, offset, raw_key, value)
        cache = self.spec.cache_prefix + topic
        if self.spec.transforms:
            record = Record(topic, cache, key, value, tuple(headers), timestamp_ms,
                            kafka_where(topic, partition, offset))
            try:
                out = self.chain(record)
            except CodecError as exc:
                raise _Bad("transform", str(exc)) from exc
            if out.cache == cache and out.topic != topic:
                out = replace(out, cache=self.spec.cache_prefix + out.topic)
            cache, key, value = out.cache, out.key, out.value
        checked = _checked_key(key)
        _check_cache(cache)
        if value is not None:
            self._check_id(checked, value)
            if self.keep is not None and not self._keeps(cache, checked, value):
                return Decoded(FILTERED, cache=cache)
        return Entry(cache, checked, value)

    def _key(self, topic: str, partition: int, offset: int, raw: bytes | None,
             value: Value | None) -> Key | None:
        policy = self.spec.key_policy
        if policy is KeyPolicy.KAFKA:
            return f"{topic}/{partition}/{offset}"
        if policy is KeyPolicy.KEY:
            try:
                key = self.converter.decode_key(raw)
            except CodecError as exc:
                raise _Bad("key", str(exc)) from exc
            if key is None:
                raise _Bad("key", "the record has no key (keyPolicy 'key')")
            return key
        if value is None:
            raise _Bad("key", "a tombstone has no value to take keyFields from "
                       "(keyPolicy 'value')")
        try:
            return key_from_fields(value, self.spec.key_fields)
        except CodecError as exc:
            raise _Bad("key", str(exc)) from exc

    def _check_id(self, key: Key, value: Value) -> None:
        prop = self.spec.id_property
        if prop is None or prop not in value:
            return
        held = value[prop]
        if type(held) is not type(key) or held != key:
            raise _Bad("key", f"the value's {prop!r} ({held!r}) is not the record's key "
                       f"({key!r})")

    def _keeps(self, cache: str, key: Key, value: Value) -> bool:
        assert self.keep is not None  # noqa: S101 - checked by the caller
        try:
            return bool(self.keep(cache, key, value))
        except Exception as exc:  # noqa: BLE001 - the operator's predicate: a record error
            raise _Bad("filter", f"cacheFilter failed: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self.converter.close()


def _checked_key(key: object, name: str = "key") -> Key:
    if type(key) is str and key:
        return key
    if type(key) is int and _LONG_MIN <= key <= _LONG_MAX:
        return key
    raise _Bad("key", f"{name} must be a non-empty string or a 64-bit integer, not "
               f"{_brief(key)}")


def _check_cache(cache: str) -> None:
    if not cache or cache.startswith("__") or cache == APPLIED_TYPE:
        raise _Bad("cache", f"{cache!r} is not a cache name (empty or reserved)")


def _brief(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


# ------------------------------------------------------------------ on the executors

_DECODERS: dict[str, Decoder] = {}
"""Per Python worker (reused across tasks): one decoder per spec."""


def _decoder(spec: DecodeSpec) -> Decoder:
    ident = repr(spec)
    found = _DECODERS.get(ident)
    if found is None:
        found = _DECODERS[ident] = Decoder(spec)
    return found


def decode_batches(spec: DecodeSpec, *, stop_on_bad: bool = False) -> Callable[
        [Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: Kafka source rows → decoded rows
    (``output_schema``). ``stop_on_bad``: a bad record fails the task (``RecordError``
    naming it), so the job fails before any of its rows is applied."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        worker.prepare()
        decoder = _decoder(spec)
        for batch in batches:
            decoded = _decode_batch(decoder, batch)
            if stop_on_bad:
                _raise_bad(decoded)
            yield decoded

    return run


def _decoded(decoder: Decoder, batch: pa.RecordBatch
             ) -> Iterator[tuple[Decoded, str, int, int, Any, Any, Any]]:
    """Each Kafka source row decoded: the outcome, then the row's topic, partition,
    offset, key, value and headers (as read)."""
    for topic, partition, offset, key, value, stamp, head in _columns(decoder.spec, batch):
        d = decoder.decode(topic, partition, offset, key, value, stamp, _pairs(head))
        yield d, topic, partition, offset, key, value, head


def _columns(spec: DecodeSpec, batch: pa.RecordBatch
             ) -> Iterator[tuple[str, int, int, Any, Any, int | None, Any]]:
    """Each Kafka source row's topic, partition, offset, key, value, timestamp (ms) and
    headers (as read: None, or a list of ``{"key", "value"}``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stamps = pc.cast(batch.column("timestamp"), pa.int64()).to_pylist()
    heads: list[Any] = (batch.column("headers").to_pylist() if spec.with_headers
                        else [None] * batch.num_rows)
    yield from zip(batch.column("topic").to_pylist(), batch.column("partition").to_pylist(),
                   batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                   batch.column("value").to_pylist(),
                   (None if s is None else s // 1000 for s in stamps), heads, strict=True)


def _pairs(head: Any) -> Sequence[tuple[str, bytes]]:
    return [(h["key"], h["value"]) for h in head] if head else ()


def decode_entries(spec: DecodeSpec, batch: pa.RecordBatch, *, stop_on_bad: bool = False
                   ) -> Iterator[Entry | str]:
    """Kafka source rows → each valid record's ``Entry`` (Python objects: no JSON text
    and no decoded Arrow rows are built), or the status of one that is not (the
    one-pass write's decode). ``stop_on_bad``: a bad record raises ``RecordError``
    naming it."""
    decode = _decoder(spec).decode_entry
    for topic, partition, offset, key, value, stamp, head in _columns(spec, batch):
        out = decode(topic, partition, offset, key, value, stamp, _pairs(head))
        if isinstance(out, Entry):
            yield out
        elif out.status == BAD and stop_on_bad:
            raise RecordError(str(out.reason), stage=str(out.stage),
                              where=kafka_where(topic, partition, offset))
        else:
            yield out.status


def _raise_bad(decoded: pa.RecordBatch) -> None:
    status = decoded.column("status").to_pylist()
    if BAD in status:
        i = status.index(BAD)
        row = {name: decoded.column(name)[i].as_py()
               for name in ("topic", "partition", "offset", "stage", "reason")}
        raise RecordError(str(row["reason"]), stage=str(row["stage"]),
                          where=kafka_where(row["topic"], row["partition"], row["offset"]))


def _decode_batch(decoder: Decoder, batch: pa.RecordBatch) -> pa.RecordBatch:
    import pyarrow as pa

    with_headers = decoder.spec.with_headers
    status: list[str] = []
    caches: list[str | None] = []
    out_keys: list[str | None] = []
    out_values: list[str | None] = []
    stages: list[str | None] = []
    reasons: list[str | None] = []
    raw_keys: list[bytes | None] = []
    raw_values: list[bytes | None] = []
    raw_heads: list[Any] = []
    for d, _, _, _, key, value, head in _decoded(decoder, batch):
        status.append(d.status)
        caches.append(d.cache)
        out_keys.append(d.key)
        out_values.append(d.value)
        stages.append(d.stage)
        reasons.append(d.reason)
        bad = d.status == BAD
        raw_keys.append(key if bad else None)
        raw_values.append(value if bad else None)
        raw_heads.append(head if bad else None)
    columns: dict[str, pa.Array] = {
        "status": pa.array(status, pa.string()),
        "topic": batch.column("topic"), "partition": batch.column("partition"),
        "offset": batch.column("offset"),
        "cache": pa.array(caches, pa.string()),
        "key": pa.array(out_keys, pa.string()),
        "value": pa.array(out_values, pa.string()),
        "stage": pa.array(stages, pa.string()),
        "reason": pa.array(reasons, pa.string()),
        "raw_key": pa.array(raw_keys, pa.binary()),
        "raw_value": pa.array(raw_values, pa.binary()),
    }
    if with_headers:
        columns["headers"] = pa.array(raw_heads, batch.column("headers").type)
    return pa.RecordBatch.from_pydict(columns)
