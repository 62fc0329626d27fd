"""Grid sinks and sources of the pipeline API: ``GridSinks.map`` (a Space cache or a
Hazelcast map) and ``GridSources.changes`` (the grid's change streams).

``GridSinks.map`` writes items ``(key, value)`` (or ``key_fn`` / ``value_fn`` of any
item) in ``foreachBatch``, through the grid adapter and the sink connector's apply
(``gridstream.connect.sink.apply``): each key's last write of the batch, in the order of
the records it came from (topic, partition, offset; the items of one record in the order
the steps gave them). ``NONE`` and ``AT_LEAST_ONCE``: idempotent puts and removes;
``EXACTLY_ONCE``: versioned writes, version = the batch id, the adapter's writer
``source`` = ``pipeline:<name>:<query id>``. What each survives:
``docs/pipeline-api.md`` ("Grid sinks and sources").

``GridSources.changes`` is the source connector's ``gridstream-grid`` data source
(``gridstream.connect.source``), its rows decoded into dicts ``{cache, key, value,
version, op}`` (``gridstream.pipeline.grid_changes``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from gridstream.connect.config import GridSettings, HazelcastGridSettings, SpaceGridSettings
from gridstream.connect.converters import dumps_value
from gridstream.connect.grids import grid_adapter
from gridstream.connect.record import H_STAGE
from gridstream.connect.sink.apply import ORDER, apply_on_driver, apply_tasks
from gridstream.errors import CodecError, ConfigError, RecordError, SparkError
from gridstream.grid.contract import GridAdapter, Key
from gridstream.pipeline.base import Flow, Guarantee, RunContext, Sink
from gridstream.pipeline.grid_changes import GridChangesSource
from gridstream.protocol.values import wire_default
from gridstream.spark.config import parse_trigger
from gridstream.spark.dead_letter import write_dead_letters

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    from gridstream.space import Space

__all__ = ["GridMapSink", "GridSinks", "GridSources", "grid_settings", "map_source",
           "where_columns"]

log = logging.getLogger(__name__)

COLUMNS = "key string, value binary"
"""What ``encode`` gives: the key as JSON text (``"k-1"`` quoted, ``12`` bare: a string
key and an integer key stay apart) and the value as JSON bytes (null: a remove)."""
_WHERE = r"^(.*)\[([0-9]+)\]@([0-9]+)$"
_LOGGED = 10
_QUERY_ID_WAIT_S = 120.0
_ERRORS = ("fail", "log", "dead_letter")


def grid_settings(grid: GridSettings | Mapping[str, Any]) -> GridSettings:
    """``grid`` as ``GridSettings`` (a dict of them: ``{"kind": "hazelcast", ...}``);
    ``ConfigError`` naming what is wrong."""
    if isinstance(grid, SpaceGridSettings | HazelcastGridSettings):
        return grid
    if not isinstance(grid, Mapping):
        raise ConfigError(f"grid: expected GridSettings or a dict of them, not "
                          f"{type(grid).__name__}")
    try:
        settings: GridSettings = TypeAdapter(GridSettings).validate_python(dict(grid))
    except ValidationError as exc:
        raise ConfigError(f"grid: {exc}") from exc
    return settings


def map_source(name: str, query_id: str) -> str:
    """The writer ``source`` of an exactly-once grid sink: one per pipeline and
    checkpoint (Spark keeps the query id in the checkpoint), so the versions (batch ids)
    of a new checkpoint never meet an old one's."""
    return f"pipeline:{name}:{query_id}"


def where_columns(where: Column) -> list[Column]:
    """``topic``, ``partition``, ``offset`` parsed from ``_gs_where``
    (``topic[partition]@offset``; null for rows of other sources)."""
    import pyspark.sql.functions as F

    matches = where.rlike(_WHERE)
    return [F.when(matches, F.regexp_extract(where, _WHERE, 1)).alias("topic"),
            F.when(matches, F.regexp_extract(where, _WHERE, 2).cast("int")).alias("partition"),
            F.when(matches, F.regexp_extract(where, _WHERE, 3).cast("long")).alias("offset")]


def _check_key(key: Any) -> Key:
    if isinstance(key, bool) or not isinstance(key, str | int):
        raise CodecError(f"a grid key must be a string or an integer, not "
                         f"{type(key).__name__}")
    if isinstance(key, int) and not -(2**63) <= key < 2**63:
        raise CodecError(f"key {key} is beyond 64 bits")
    if isinstance(key, str) and not key:
        raise CodecError("a grid key must not be empty")
    return key


class GridMapSink(Sink):
    """One grid cache (a Space type or a Hazelcast map) written by a pipeline; built by
    ``GridSinks.map``."""

    def __init__(self, grid: GridSettings | Mapping[str, Any], name: str, *,
                 key_fn: Callable[[Any], Any] | None = None,
                 value_fn: Callable[[Any], Any] | None = None,
                 guarantee: Guarantee | str | None = None, tasks: int | None = None,
                 space: Space | None = None) -> None:
        self.grid = grid_settings(grid)
        if not isinstance(name, str) or not name or name.startswith("__"):
            raise ConfigError(f"grid sink: {name!r} is not a cache name")
        self.name = name
        self.key_fn = key_fn
        self.value_fn = value_fn
        if guarantee is not None:
            try:
                self.cap = Guarantee(str(guarantee).upper())
            except ValueError as exc:
                raise ConfigError(f"grid sink {name!r}: guarantee {guarantee!r}: use one of "
                                  f"{', '.join(g.value for g in Guarantee)}") from exc
        if tasks is not None and (type(tasks) is not int or tasks < 1):
            raise ConfigError(f"grid sink {name!r}: tasks must be a positive integer")
        self.tasks = tasks
        self.hazelcast = isinstance(self.grid, HazelcastGridSettings)
        if space is not None and self.hazelcast:
            raise ConfigError(f"grid sink {name!r}: a Space was given to a Hazelcast sink")
        self._space = space
        self._id_property = None if isinstance(self.grid, HazelcastGridSettings) \
            else self.grid.id_property
        self._adapter: GridAdapter | None = None
        self._query_id: str | None = None
        self._started = threading.Event()
        self._context: RunContext | None = None
        self._on_batch: Callable[[int, dict[str, Any]], None] | None = None

    _DRIVER_ONLY = ("_space", "_adapter", "_started", "_context", "_on_batch")

    def __getstate__(self) -> dict[str, Any]:
        """What executors need (``encode``): no Space, adapter, event or callback."""
        return {k: v for k, v in self.__dict__.items() if k not in self._DRIVER_ONLY}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._space = self._adapter = self._context = self._on_batch = None
        self._started = threading.Event()

    # ------------------------------------------------------------ the contract

    def describe(self) -> str:
        g = self.grid
        where = (f"hazelcast map {self.name!r} @ {g.cluster_name}@{','.join(g.members)}"
                 if isinstance(g, HazelcastGridSettings)
                 else f"space {g.space_name} ({g.data_dir}) cache {self.name!r}")
        return f"{where} [at most {self.cap.value}: " + {
            Guarantee.EXACTLY_ONCE: "versioned writes, version = batch id]",
            Guarantee.AT_LEAST_ONCE: "idempotent puts of each key's last value per batch]",
            Guarantee.NONE: "idempotent puts of each key's last value per batch]"}[self.cap]

    def columns(self) -> str:
        return COLUMNS

    def encode(self, item: Any) -> dict[str, Any]:
        """An item → ``{"key": JSON text, "value": JSON bytes or None}`` (``CodecError``
        for a key that is not a non-empty string or a 64-bit integer, a value that is not
        a JSON object or that JSON cannot hold, a Space value whose id property names
        another key)."""
        if (self.key_fn is None or self.value_fn is None) and (
                not isinstance(item, tuple | list) or len(item) != 2):
            raise CodecError(f"a grid sink takes (key, value) items (or key_fn and "
                                 f"value_fn), not {type(item).__name__}")
        key = _check_key(self.key_fn(item) if self.key_fn is not None else item[0])
        value = self.value_fn(item) if self.value_fn is not None else item[1]
        key_text = dumps_value(key).decode()
        if value is None:
            return {"key": key_text, "value": None}
        data = dumps_value(value, default=wire_default)
        if not data.startswith(b"{"):
            raise CodecError(f"a grid value must be a JSON object (a dict), not "
                             f"{type(value).__name__}")
        prop = self._id_property
        if prop is not None and isinstance(value, Mapping) and prop in value:
            held = value[prop]
            if type(held) is not type(key) or held != key:
                raise CodecError(f"the value's {prop!r} ({held!r}) is not the item's key "
                                 f"({key!r})")
        return {"key": key_text, "value": data}

    def start(self, flow: Flow, context: RunContext,
              on_batch: Callable[[int, dict[str, Any]], None]) -> StreamingQuery:
        _policy(context)  # a bad policy fails now, not in the first batch
        self._context = context
        self._on_batch = on_batch
        self._started.clear()
        writer = (flow.df.writeStream.queryName(context.name)
                  .option("checkpointLocation", context.checkpoint)
                  .foreachBatch(self.write_batch))
        if context.trigger is not None:
            try:
                writer = writer.trigger(**parse_trigger(context.trigger))
            except ValueError as exc:
                raise ConfigError(f"pipeline {context.name!r}: {exc}") from exc
        query = writer.start()
        self.bind(str(query.id))
        return query

    def bind(self, query_id: str) -> None:
        """The query whose batches this sink writes (``start`` calls it; its id names the
        exactly-once writer ``source``)."""
        self._query_id = query_id
        self._started.set()

    def close(self) -> None:
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            adapter.close()

    # ------------------------------------------------------------ one micro-batch

    def source_name(self, context: RunContext) -> str:
        """The adapter's writer ``source``: ``pipeline:<name>:<query id>`` under
        ``EXACTLY_ONCE``, the grid settings' own otherwise."""
        if context.guarantee is not Guarantee.EXACTLY_ONCE:
            return self.grid.source
        if not self._started.wait(_QUERY_ID_WAIT_S) or self._query_id is None:
            raise SparkError(f"grid sink {self.name!r}: the query's id is not known")
        return map_source(context.name, self._query_id)

    def write_batch(self, batch: DataFrame, batch_id: int) -> None:
        """``foreachBatch``: route error rows by the policy, apply the rest."""
        if self._context is None or self._on_batch is None:
            raise SparkError(f"grid sink {self.name!r}: not started")
        self._on_batch(batch_id, self.process(batch, batch_id, self._context))

    def process(self, batch: DataFrame, batch_id: int, context: RunContext
                ) -> dict[str, Any]:
        """Write one batch; its counts (``records``, ``written``, ``errors``,
        ``skipped``, ``dead_lettered``, ``key_writes``). Callable again with the same
        batch id (a re-run) and the same rows: the grid ends as after the first run."""
        import pyspark.sql.functions as F
        from pyspark import StorageLevel

        errors, topic, options = _policy(context)
        cached = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            failed = F.col("_gs_error").isNotNull()
            counts = {bool(r["bad"]): int(r["count"]) for r in
                      cached.groupBy(failed.alias("bad")).count().collect()}
            bad = counts.get(True, 0)
            if bad and errors == "fail":
                _raise_first(cached.where(failed), bad, batch_id)
            written = counts.get(False, 0)
            keys = self._apply(cached.where(~failed), batch_id, context) if written else 0
            if bad and errors == "log":
                _log_bad(cached.where(failed), bad, context.name)
            if bad and errors == "dead_letter":
                assert topic is not None  # noqa: S101 - _policy checked it
                _dead_letter(cached.where(failed), topic, context.name, options)
        finally:
            cached.unpersist()
        return {"records": written + bad, "written": written, "errors": bad,
                "skipped": bad if errors == "log" else 0,
                "dead_lettered": bad if errors == "dead_letter" else 0, "key_writes": keys}

    def _apply(self, ok: DataFrame, batch_id: int, context: RunContext) -> int:
        import pyspark.sql.functions as F

        version = batch_id if context.guarantee is Guarantee.EXACTLY_ONCE else None
        source = self.source_name(context)
        rows = ok.select(F.lit(self.name).alias("cache"), "key", "value",
                         *where_columns(F.col("_gs_where")),
                         F.monotonically_increasing_id().alias("seq"))
        order = (*ORDER, "seq")
        if isinstance(self.grid, HazelcastGridSettings):
            from dataclasses import replace

            from gridstream.grid.hazelcast import HazelcastAdapter

            adapter = grid_adapter(self.grid)
            assert isinstance(adapter, HazelcastAdapter)  # noqa: S101 - grid_adapter's rule
            tasks = self.tasks or ok.sparkSession.sparkContext.defaultParallelism
            return apply_tasks(rows, replace(adapter.config, source=source), tasks=tasks,
                               updates=True, version=version, order=order)
        return apply_on_driver(self._space_adapter(source), rows, updates=True,
                               version=version, order=order)

    def _space_adapter(self, source: str) -> GridAdapter:
        """The driver's adapter of the Space (opened on first use: its writer ``source``
        needs the query id), which the driver owns or was given."""
        if self._adapter is None:
            settings = self.grid.model_copy(update={"source": source})
            adapter = grid_adapter(settings, writable=True, space=self._space)
            adapter.open()
            self._adapter = adapter
        return self._adapter


def _policy(context: RunContext) -> tuple[str, str | None, dict[str, str]]:
    """The pipeline's error policy: ``errors``, the dead-letter topic and the Spark
    Kafka options (``kafka.bootstrap.servers``, ...) it is written with."""
    errors = str(getattr(context, "errors", "fail") or "fail")
    topic = getattr(context, "dead_letter_topic", None)
    options = dict(getattr(context, "dead_letter_options", None) or {})
    if errors not in _ERRORS:
        raise ConfigError(f"pipeline {context.name!r}: errors {errors!r}: use one of "
                          f"{', '.join(_ERRORS)}")
    if errors == "dead_letter" and (not topic or "kafka.bootstrap.servers" not in options):
        raise ConfigError(f"pipeline {context.name!r}: errors 'dead_letter' needs "
                          "dead_letter_topic and the Kafka servers to write it to")
    return errors, topic, options


def _ordered(bad: DataFrame) -> DataFrame:
    import pyspark.sql.functions as F

    return bad.select("*", *where_columns(F.col("_gs_where"))).orderBy(
        F.col("topic").asc_nulls_last(), "partition", "offset", "_gs_where")


def _raise_first(bad: DataFrame, count: int, batch_id: int) -> None:
    first = _ordered(bad).select("_gs_where", "_gs_stage", "_gs_error").first()
    assert first is not None  # noqa: S101 - counted above
    raise RecordError(f"{first['_gs_error']} ({count} bad item(s) in batch {batch_id}; "
                      "errors 'fail': nothing of the batch written, its offsets not "
                      "committed)", where=str(first["_gs_where"]),
                      stage=str(first["_gs_stage"]))


def _log_bad(bad: DataFrame, count: int, pipeline: str) -> None:
    for row in _ordered(bad).limit(_LOGGED).select("_gs_where", "_gs_stage",
                                                   "_gs_error").collect():
        log.warning("%s: skipped %s: %s: %s", pipeline, row["_gs_where"], row["_gs_stage"],
                    row["_gs_error"])
    log.warning("%s: %d bad item(s) skipped (errors 'log')", pipeline, count)


def _dead_letter(bad: DataFrame, topic: str, pipeline: str, options: dict[str, str]) -> None:
    import pyspark.sql.functions as F

    letters = bad.select(
        F.col("_gs_raw_key").alias("key"), F.col("_gs_raw_value").alias("value"),
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
        F.concat_ws(": ", "_gs_stage", "_gs_error").alias("error"),
        *where_columns(F.col("_gs_where")), F.col("_gs_stage").alias("stage"),
    ).withColumnRenamed("partition", "kafka_partition")
    write_dead_letters(letters, topic, pipeline, options, more_headers={H_STAGE: "stage"})


class GridSinks:
    """Grid sinks of the pipeline API."""

    @staticmethod
    def map(grid: GridSettings | Mapping[str, Any], name: str, *,
            key_fn: Callable[[Any], Any] | None = None,
            value_fn: Callable[[Any], Any] | None = None,
            guarantee: Guarantee | str | None = None, tasks: int | None = None,
            space: Space | None = None) -> GridMapSink:
        """Write items to the cache ``name`` of ``grid`` (``GridSettings`` or a dict of
        them: ``{"kind": "hazelcast", "members": [...], "cluster_name": ...}`` or
        ``{"kind": "space", "data_dir": ..., "space_name": ...}``).

        Items are ``(key, value)`` (or ``key_fn(item)`` / ``value_fn(item)``): a key is a
        non-empty string or a 64-bit integer, a value a dict (a JSON object; datetimes,
        decimals, UUIDs, bytes, sets as in ``gridstream.protocol``) or ``None`` to remove
        the key. ``guarantee`` lowers the pipeline's (never raises it). ``tasks``
        (Hazelcast): the parallel writer tasks (default: Spark's default parallelism).
        ``space``: an open Space of this process to write through (else the sink opens
        the Space itself, as its owner)."""
        return GridMapSink(grid, name, key_fn=key_fn, value_fn=value_fn,
                           guarantee=guarantee, tasks=tasks, space=space)


class GridSources:
    """Grid sources of the pipeline API."""

    @staticmethod
    def changes(grid: GridSettings | Mapping[str, Any], caches: str | Sequence[str], *,
                failover: str = "BACKLOG", initial: bool = True,
                on_position_lost: str = "fail", batch_size: int = 10_000,
                cache_list_interval_ms: int = 5000) -> GridChangesSource:
        """Every change of the caches ``caches`` of ``grid``, as dicts ``{"cache",
        "key", "value", "version", "op"}`` (``op``: ``"put"`` or ``"remove"``, whose
        ``value`` is None). Read by the source connector's data source
        (``docs/connectors.md``): ``initial`` loads each cache first (its entries as
        puts); ``failover`` ``BACKLOG`` resumes from the checkpointed positions,
        ``FULL_SNAPSHOT`` loads every cache again on each start; ``on_position_lost``
        ``fail`` or ``snapshot``."""
        return GridChangesSource(grid_settings(grid), caches, failover=failover,
                                 initial=initial, on_position_lost=on_position_lost,
                                 batch_size=batch_size,
                                 cache_list_interval_ms=cache_list_interval_ms)
