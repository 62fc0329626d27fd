"""Store sinks of the pipeline API: the mirror's change rows → SQL, Delta, Parquet or
Cassandra, through the store feeds' own sinks (``gridstream.spark.sinks``).

Items are the mirror's change rows (the envelope): a mapping with ``op``, ``type``,
``id``, ``version``, ``ts``, ``partition`` and optionally ``data`` (a mapping or its JSON
text), ``txn`` and ``removed``; an ``Envelope`` or an ``Operation``; the record value's
bytes as the mirror wrote them (decoded with the sink's ``codec``: ``json``, ``msgpack``
or ``avro`` with a registry, a schema directory or the declared types); or a ``(key,
value)`` entry, whose value is taken. Anything else, or an envelope that is not valid,
is a ``CodecError`` for that row: the pipeline's error policy takes it.

Each batch (``foreachBatch``) goes to the sink's ``write`` with its batch id, after the
error rows went to the policy (``split_batch``): every store sink applies a batch
idempotently by version (a batch Spark runs again changes nothing), so the sink gives
``EXACTLY_ONCE`` effect in the store (duplicates of a re-run never show). The Kafka
position the ``parquet`` change log records comes from the row's origin (``_gs_where``:
``topic[partition]@offset``); rows that do not come from Kafka have none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.errors import CodecError, ConfigError
from gridstream.operations import Operation, TypeDescriptor
from gridstream.pipeline.base import Flow, Guarantee, RunContext, Sink
from gridstream.pipeline.errors import split_batch
from gridstream.pipeline.streaming import configure, observed
from gridstream.protocol.envelope import Envelope
from gridstream.protocol.values import wire_default
from gridstream.spark.sinks import BatchSink, SinkResult, create_sink
from gridstream.spark.sinks.config import SinkConfig
from gridstream.spark.types import TypeRegistry
from gridstream.spark.value_codecs import VALUE_CODECS, Transcoder

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["OPERATION_DDL", "StoreSink", "StoreSinks"]

OPERATION_DDL = ("op string, type string, id string, id_int boolean, version bigint, "
                 "txn string, ts bigint, `partition` int, data string, removed array<string>")
"""The columns ``encode`` gives: the store feeds' decoded operation."""
_WHERE = r"^(.*)\[(-?\d+)\]@(-?\d+)$"
Types = TypeRegistry | Iterable[TypeDescriptor] | Mapping[str, Mapping[str, Any]] | None


def _types(types: Types) -> TypeRegistry:
    if types is None:
        return TypeRegistry()
    if isinstance(types, TypeRegistry):
        return types
    if isinstance(types, Mapping):
        return TypeRegistry.from_tables(types)
    return TypeRegistry.of(types)


class StoreSink(Sink):
    """One store sink (see the module docstring); build with ``StoreSinks``."""

    cap = Guarantee.EXACTLY_ONCE
    foreach_batch = True

    def __init__(self, config: SinkConfig | Mapping[str, Any], types: Types = None, *,
                 codec: str = "json", schema_registry_url: str | None = None,
                 basic_auth_user_info: str | None = None,
                 avro_schema_dir: str | None = None,
                 guarantee: Guarantee | str | None = None) -> None:
        from pydantic import TypeAdapter, ValidationError

        try:
            self.config: SinkConfig = TypeAdapter(SinkConfig).validate_python(config)
        except ValidationError as exc:
            raise ConfigError(f"store sink: {_first_error(exc)}") from None
        if codec not in VALUE_CODECS:
            raise ConfigError(f"store sink codec {codec!r}: use one of "
                              f"{', '.join(VALUE_CODECS)}")
        if guarantee is not None:
            self.cap = Guarantee.parse(guarantee)
        self.types = _types(types)
        self.codec = codec
        self._transcoder = None if codec == "json" else Transcoder(
            codec, schema_registry_url=schema_registry_url,
            basic_auth_user_info=basic_auth_user_info, avro_schema_dir=avro_schema_dir,
            types=self.types.to_payload())
        if codec == "json" and (schema_registry_url or avro_schema_dir or basic_auth_user_info):
            raise ConfigError("the schema registry options are only used with codec 'avro'")
        self._sink: BatchSink | None = None
        self.results: dict[int, SinkResult] = {}

    def __getstate__(self) -> dict[str, Any]:
        # a copy is pickled into the Python pass (its ``encode``): the driver's store
        # connection and the store's settings (its password, a SQL URL's credentials)
        # stay on the driver; the copy encodes rows and nothing else
        state = dict(self.__dict__)
        state["_sink"] = None
        state["config"] = None
        state["results"] = {}
        return state

    def nodes(self) -> list[str]:
        return [f"store:{self.config.kind}"]

    def describe(self) -> str:
        if self._sink is not None:
            what = self._sink.describe()
        else:
            sink = create_sink(self.config, self.types)
            try:
                what = sink.describe()
            finally:
                sink.close()
        codec = f", {self._transcoder.describe()}" if self._transcoder is not None else ""
        return f"store {what} (the mirror's change rows{codec})"

    def columns(self) -> str:
        return OPERATION_DDL

    def encode(self, item: Any) -> dict[str, Any]:
        if isinstance(item, tuple) and len(item) == 2 and not isinstance(item, Envelope):
            item = item[1]
        if isinstance(item, bytes | bytearray | memoryview):
            item = self._decode(bytes(item))
        if isinstance(item, Operation):
            item = Envelope.from_operation(item)
        if isinstance(item, Mapping):
            raw = dict(item)
            if isinstance(raw.get("data"), str):
                try:
                    raw["data"] = orjson.loads(raw["data"])
                except orjson.JSONDecodeError as exc:
                    raise CodecError(f"change row field 'data' is not JSON: {exc}") from exc
            item = Envelope.from_wire(raw)
        if not isinstance(item, Envelope):
            raise CodecError(f"a store sink writes the mirror's change rows, not "
                             f"{type(item).__name__}")
        return _row(item)

    def jvm_encode(self, flow: Flow) -> DataFrame | None:
        """Record values that are the mirror's JSON envelopes, decoded and checked in the
        JVM (the store feeds' ``decode_envelopes``: no Python pass); None for any
        other flow. An invalid envelope becomes an error row (stage ``encode``)."""
        from pyspark.sql.types import BinaryType

        from gridstream.pipeline.base import HIDDEN
        from gridstream.spark.envelope import decode_envelopes

        df = flow.df
        if (self.codec != "json" or flow.item not in ("entry", "value")
                or "value" not in df.columns
                or not isinstance(df.schema["value"].dataType, BinaryType)):
            return None
        staged = df.selectExpr(
            "CAST(NULL AS STRING) AS topic", "CAST(NULL AS INT) AS `partition`",
            "CAST(NULL AS BIGINT) AS offset", "CAST(NULL AS BINARY) AS key", "value",
            *(f"`{name}`" for name in HIDDEN))
        decoded = decode_envelopes(staged, carry=HIDDEN)
        names = [c.split(" ")[0] for c in OPERATION_DDL.split(", ")]
        failed = "`_gs_error` IS NULL AND error IS NOT NULL"
        return decoded.selectExpr(
            *names,
            "coalesce(`_gs_error`, error) AS `_gs_error`",
            f"CASE WHEN {failed} THEN 'encode' ELSE `_gs_stage` END AS `_gs_stage`",
            *(f"`{name}`" for name in HIDDEN if name not in ("_gs_error", "_gs_stage")))

    def _decode(self, value: bytes) -> Any:
        text = value if self._transcoder is None else self._transcoder.json_of(value)
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"not valid JSON: {exc}") from exc

    def start(self, flow: Flow, context: RunContext,
              on_batch: Callable[[int, dict[str, Any]], None]) -> StreamingQuery:
        from pyspark import StorageLevel

        from gridstream.spark.sinks.base import streaming_query_id

        sink = self._sink = create_sink(self.config, self.types)
        spark = flow.df.sparkSession
        sink.open(spark)

        def batch(batch_df: DataFrame, batch_id: int) -> None:
            cached = batch_df.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                good, errors = split_batch(cached, context)
                sink.bind_query(streaming_query_id(batch_df))
                result = sink.write(_operations(good), batch_id)
            finally:
                cached.unpersist()
            self.results[batch_id] = result
            while len(self.results) > 1000:
                del self.results[min(self.results)]
            on_batch(batch_id, {"applied": result.applied, "stale": result.stale,
                                "skipped": result.skipped, "errors": errors})

        writer = observed(flow.df).writeStream.foreachBatch(batch)
        return configure(writer, context).start()

    def close(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.close()


def _operations(good: DataFrame) -> DataFrame:
    """The batch's good rows as the store sinks read them (Kafka position included; null
    for rows of other sources: nothing is cast that did not match)."""
    import pyspark.sql.functions as F

    where = F.col("_gs_where")
    matches = where.rlike(_WHERE)

    def part(group: int, kind: str | None, name: str) -> Column:
        text = F.regexp_extract(where, _WHERE, group)
        return F.when(matches, text if kind is None else text.cast(kind)).alias(name)

    return good.select(
        part(1, None, "topic"), part(2, "int", "kafka_partition"),
        part(3, "bigint", "offset"),
        "op", "type", "id", "id_int", "version", "txn", "ts", "partition", "data",
        F.coalesce("removed", F.array().cast("array<string>")).alias("removed"),
        F.lit(None).cast("string").alias("error"))


def _row(envelope: Envelope) -> dict[str, Any]:
    """The columns of ``OPERATION_DDL`` for one envelope."""
    data = envelope.data
    try:
        text = None if data is None else orjson.dumps(
            data if type(data) is dict else dict(data), default=wire_default,
            option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise CodecError(f"{envelope.type} {envelope.id!r}: data is not JSON-serializable: "
                         f"{exc}") from exc
    return {"op": str(envelope.op), "type": envelope.type, "id": str(envelope.id),
            "id_int": not isinstance(envelope.id, str), "version": envelope.version,
            "txn": envelope.txn, "ts": envelope.ts, "partition": envelope.partition,
            "data": text, "removed": list(envelope.removed)}


def _first_error(exc: Any) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg"))


class StoreSinks:
    """Factories of store sinks (items: the mirror's change rows; ``types``: declared
    types as descriptors, ``[types]`` tables or a ``TypeRegistry``; undeclared types
    are dynamic; ``codec`` and the registry options decode items that are bytes)."""

    @staticmethod
    def from_config(table: SinkConfig | Mapping[str, Any], types: Types = None,
                    **options: Any) -> StoreSink:
        """A ``[pipeline.sink]`` table of the store feeds (``kind`` = ``sql``,
        ``delta``, ``parquet`` or ``cassandra``)."""
        return StoreSink(table, types, **options)

    @staticmethod
    def sql(url: str, types: Types = None, *, table_prefix: str = "",
            create_tables: bool = True, **options: Any) -> StoreSink:
        """SQLite (``sqlite:///path.db``) or PostgreSQL (``postgresql://...``)."""
        return StoreSink({"kind": "sql", "url": url, "table_prefix": table_prefix,
                          "create_tables": create_tables}, types, **options)

    @staticmethod
    def delta(path: str, types: Types = None, **options: Any) -> StoreSink:
        """The lake's current-state Delta table at ``path``."""
        return StoreSink({"kind": "delta", "path": path}, types, **options)

    @staticmethod
    def parquet(path: str, *, compression: str = "zstd", **options: Any) -> StoreSink:
        """The lake's Parquet change log at ``path`` (rows from Kafka: it records their
        position)."""
        return StoreSink({"kind": "parquet", "path": path, "compression": compression},
                         None, **options)

    @staticmethod
    def cassandra(types: Types = None, *, codec: str = "json",
                  schema_registry_url: str | None = None,
                  basic_auth_user_info: str | None = None,
                  avro_schema_dir: str | None = None,
                  guarantee: Guarantee | str | None = None, **cassandra: Any) -> StoreSink:
        """Cassandra with the shared mapping (``cassandra``: ``CassandraConfig`` fields,
        e.g. ``keyspace``, ``contact_points``)."""
        return StoreSink({"kind": "cassandra", **cassandra}, types, codec=codec,
                         schema_registry_url=schema_registry_url,
                         basic_auth_user_info=basic_auth_user_info,
                         avro_schema_dir=avro_schema_dir, guarantee=guarantee)

