"""Grid sinks and sources of the pipeline API: ``GridSinks.map`` (a Space cache or a
Hazelcast map) and ``GridSources.changes`` (the grid's change streams).

``GridSinks.map`` writes items ``(key, value)`` (or ``key_fn`` / ``value_fn`` of any
item) in ``foreachBatch``, through the grid adapter and the sink connector's apply
(``gridstream.spark.grid_apply``): each key's last write of the batch, in the order of
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

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from gridstream.errors import CodecError, ConfigError, SparkError
from gridstream.grid.contract import GridAdapter, Key
from gridstream.grid.settings import (
    GridSettings,
    HazelcastGridSettings,
    SpaceGridSettings,
    grid_adapter,
)
from gridstream.grid.values import dumps_value
from gridstream.pipeline.base import Flow, Guarantee, RunContext, Sink
from gridstream.pipeline.errors import split_batch
from gridstream.pipeline.grid_changes import GridChangesSource
from gridstream.pipeline.streaming import observed
from gridstream.protocol.values import wire_default
from gridstream.spark.grid_apply import ORDER, apply_streamed, apply_tasks
from gridstream.spark.triggers import parse_trigger

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    from gridstream.space import Space

__all__ = ["GridMapSink", "GridSinks", "GridSources", "grid_settings", "map_source",
           "where_columns"]


COLUMNS = "key string, value binary"
"""What ``encode`` gives: the key as JSON text (``"k-1"`` quoted, ``12`` bare: a string
key and an integer key stay apart) and the value as JSON bytes (null: a remove)."""
_WHERE = r"^(.*)\[([0-9]+)\]@([0-9]+)$"
_QUERY_ID_WAIT_S = 120.0


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
            self.cap = Guarantee.parse(guarantee, f"grid sink {name!r}: guarantee")
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
        self._adapter_source = ""
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

    def nodes(self) -> list[str]:
        return [f"{self.grid.kind}:{self.name}"]

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
        self._context = context
        self._on_batch = on_batch
        self._started.clear()
        writer = (observed(flow.df).writeStream.queryName(context.name)
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
        """``foreachBatch``: error rows by the policy, the rest applied."""
        if self._context is None or self._on_batch is None:
            raise SparkError(f"grid sink {self.name!r}: not started")
        self._on_batch(batch_id, self.process(batch, batch_id, self._context))

    def process(self, batch: DataFrame, batch_id: int, context: RunContext
                ) -> dict[str, Any]:
        """Write one batch; its counts (``written``: items written, ``errors``: error
        rows, ``key_writes``: the writes they folded into). Error rows go by the
        pipeline's policy first (``split_batch``: ``fail`` raises before anything is
        written). Callable again with the same batch id and rows (a re-run): the grid
        ends as after the first run."""
        from pyspark import StorageLevel

        cached = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            good, errors = split_batch(cached, context)
            written = good.count()
            keys = self._apply(good, batch_id, context, written) if written else 0
        finally:
            cached.unpersist()
        return {"written": written, "errors": errors, "key_writes": keys}

    def _apply(self, ok: DataFrame, batch_id: int, context: RunContext, count: int) -> int:
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
        return apply_streamed(self._space_adapter(source), rows, count=count, updates=True,
                              version=version, order=order)

    def _space_adapter(self, source: str) -> GridAdapter:
        """The driver's adapter of the Space (opened on first use: its writer ``source``
        needs the query id), which the driver owns or was given."""
        if self._adapter is not None and self._adapter_source != source:
            self.close()  # started again on another checkpoint: another writer source
        if self._adapter is None:
            settings = self.grid.model_copy(update={"source": source})
            adapter = grid_adapter(settings, writable=True, space=self._space)
            adapter.open()
            self._adapter, self._adapter_source = adapter, source
        return self._adapter


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
