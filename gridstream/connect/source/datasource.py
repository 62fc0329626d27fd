"""The source connector as a PySpark Python streaming data source (``gridstream-grid``).

The driver-side reader (``GridStreamReader``, run by Spark in a Python process of its
own for the life of the query) plans offsets with ``offsets.Planner`` over a grid
adapter, materialises snapshots under the checkpoint and, on ``commit``, acknowledges
the committed positions to the grid (the Space's log retention) and deletes snapshot
files no offset needs. ``read`` (on executors) reads one cache's part of the batch
(``read.read_work``) into Arrow record batches; adapters and record makers are kept per
worker process, so a reused worker does not reconnect or rebuild its state.

Options: ``config`` (the ``SourceConnectorConfig`` as JSON, without Kafka properties)
and ``allowed`` (the allowed filter modules, comma-separated). With ``sink`` and the
producer's configuration (``produce.PRODUCER_OPTION``, a name Spark redacts), the source
is in *write mode*: each partition produces its records to Kafka as it reads them and
yields one ``report`` row (``produce``); without them it yields the records as rows.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
from py4j.protocol import Py4JError
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from gridstream.connect.config import DeliveryGuarantee, SourceConnectorConfig
from gridstream.connect.converters import build_converter
from gridstream.connect.filters import load_filter
from gridstream.connect.source import produce, snapshots
from gridstream.connect.source.bounds import QuietChecks
from gridstream.connect.source.offsets import (
    Planner,
    SnapshotMade,
    SourceOffset,
    Work,
    batch_work,
    initial_offset,
    planned_changes,
    position_dict,
    position_from,
)
from gridstream.connect.source.read import (
    SCHEMA_DDL,
    RecordMaker,
    RowBuffer,
    Rows,
    read_work,
    shared_works,
)
from gridstream.connect.transforms import build_chain
from gridstream.errors import GridError, PositionLostError, SparkError
from gridstream.grid.contract import GridAdapter, Position
from gridstream.grid.settings import grid_adapter
from gridstream.kafka import KafkaProperties
from gridstream.spark import worker
from gridstream.spark._kafka_slots import SlotPlan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT", "GridSourceDataSource", "GridStreamReader", "consumer_name",
           "legacy_consumer_name", "register", "source_options"]

log = logging.getLogger(__name__)

FORMAT = "gridstream-grid"
_ATTEMPTS, _RETRY_S = 3, 2.0
"""How often planning is tried when the grid fails (not a lost position), and the pause."""


_MIN_BOUND, _FIRST_RATE = 1_000, 2_000.0
"""The adaptive bound's floor (changes), and the rate (changes/s) assumed before a batch
of at least the floor was measured."""


def consumer_name(connector: str, checkpoint: str) -> str:
    """The name the source acknowledges its positions under (the Space's log): one per
    query — the connector's name and a digest of its checkpoint's absolute path — so two
    queries never share one (the faster would release what the slower still needs), and
    a checkpoint deleted and made again at the same place takes the same name on (an
    abandoned name would hold the log's retention back for good)."""
    where = os.path.abspath(snapshots.local_dir(checkpoint))
    digest = hashlib.blake2b(where.encode(), digest_size=6).hexdigest()
    return f"gridstream-source-{connector}-{digest}"


def legacy_consumer_name(connector: str) -> str:
    """The name earlier versions acknowledged under (one per connector name)."""
    return f"gridstream-source-{connector}"


class GridSourceDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return GridStreamReader(dict(self.options))


class CachePartition(InputPartition):
    """One cache's part of a batch (JSON: picklable, small)."""

    def __init__(self, payload: str) -> None:
        super().__init__(payload)
        self.payload = payload


def _work_json(works: Sequence[Work], time_ms: int) -> str:
    out = []
    for work in works:
        raw = asdict(work)
        for name in ("start", "end", "until"):
            value = getattr(work, name)
            raw[name] = position_dict(value) if value is not None else None
        out.append(raw)
    return orjson.dumps({"works": out, "t": time_ms}).decode()


def _work_from(payload: str) -> tuple[list[Work], int, list[dict[str, str]]]:
    raw = orjson.loads(payload)
    if "events" in raw:
        return [], int(raw["t"]), list(raw["events"])
    works = []
    for item in raw["works"]:
        w = dict(item)
        for name in ("start", "end", "until"):
            w[name] = position_from(w[name]) if w[name] is not None else None
        works.append(Work(**w))
    return works, int(raw["t"]), []


SECRET_OPTION = "registry.secret"  # noqa: S105 - an option name, not a password
"""The option holding the converter's registry credentials: Spark redacts options whose
name matches ``spark.redaction.regex`` (``secret``, ``password``, ...) wherever it prints
them."""


def register(spark: SparkSession) -> None:
    """``GridSourceDataSource`` registered with ``spark``'s session, once: registering it
    again would log a warning that it replaced itself at every query's start. (A source
    registered under ``FORMAT`` is taken to be this one: the name is the project's.)"""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        if manager.dataSourceExists(FORMAT):
            return
    except (Py4JError, AttributeError) as exc:  # no look-up: registering again is harmless
        log.debug("registering %s without looking it up: %s", FORMAT, exc)
    spark.dataSource.register(GridSourceDataSource)


def source_options(config: SourceConnectorConfig, allowed: Sequence[str]) -> dict[str, str]:
    """The data source's options: the config without Kafka properties (the reader needs
    none), the allowed filter modules, and the registry's credentials apart."""
    options = {"config": config.model_dump_json(exclude={"kafka"}), "allowed": ",".join(allowed)}
    secret = config.converter.schema_registry_user_info
    if secret is not None:
        options[SECRET_OPTION] = secret.get_secret_value()
    return options


def _config(options: dict[str, str]) -> tuple[SourceConnectorConfig, tuple[str, ...]]:
    raw = orjson.loads(options["config"])
    secret = options.get(SECRET_OPTION)
    if secret is not None:
        raw["converter"]["schema_registry_user_info"] = secret
    config = SourceConnectorConfig.model_validate(raw)
    allowed = tuple(a for a in options.get("allowed", "").split(",") if a)
    return config, allowed


class _AdapterView:
    """``offsets.GridView`` over an open adapter (driver side)."""

    def __init__(self, adapter: GridAdapter, snap_dir: Path) -> None:
        self.adapter = adapter
        self.snap_dir = snap_dir
        self._shared_span: tuple[Position, Position] | None = None

    def list_caches(self) -> list[str]:
        return self.adapter.list_caches()

    def end_position(self, cache: str) -> Position:
        if self.adapter.shared_stream:
            return self.span(cache)[1]
        return self.adapter.end_position(cache)

    def start_position(self, cache: str) -> Position:
        return self.adapter.start_position(cache)

    def span(self, cache: str, since: Position | None = None) -> tuple[Position, Position]:
        if not self.adapter.shared_stream:
            return self.adapter.span(cache, since)
        if self._shared_span is None:  # one stream: one reading of it for the whole plan,
            self._shared_span = self.adapter.span(cache, since)  # so caches stay together
        return self._shared_span

    @property
    def shared_stream(self) -> bool:
        return self.adapter.shared_stream

    def check(self, cache: str, position: Position) -> None:
        self.adapter.read_changes(cache, position, 1)

    def cut(self, cache: str, begin: Position, end: Position) -> Position:
        return self.adapter.cut(cache, begin, end)

    def snapshot(self, cache: str) -> SnapshotMade:
        before = self.adapter.end_position(cache)
        name, rows, versioned = snapshots.write_snapshot(self.adapter, cache, self.snap_dir)
        after = self.adapter.end_position(cache) if versioned and rows else None
        log.info("snapshot of %s: %d entries in %s", cache, rows, name)
        return SnapshotMade(name, rows, before, after)


class GridStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans, reads and commits the source's micro-batches (see the module docstring).

    Batches are bounded: at most ``maxChangesPerBatch`` changes (and Spark's read limit
    when it gives a smaller one); under exactly-once also what the reader measured it
    can move in a quarter of ``transaction.timeout.ms``, so a backlog never becomes one
    transaction the broker aborts on timeout."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.config, self.allowed = _config(options)
        self.snap_dir = snapshots.snapshot_dir(self.config.checkpoint)
        c = self.config
        self._planner = Planner(policy=c.failover_policy, on_position_lost=c.on_position_lost,
                                load_initial=c.shall_load_initial_data,
                                batch_size=c.batch_size, whitelist=c.cache_whitelist,
                                blacklist=c.cache_blacklist,
                                list_interval_ms=c.cache_list_poll_interval_ms)
        self._adapter: GridAdapter | None = None
        self._planned: SourceOffset | None = None
        """The last plan, until the next plan measured it."""
        self._planned_any: SourceOffset | None = None
        """The last plan (its snapshots are kept)."""
        self._planned_from: SourceOffset | None = None
        self._planned_at = 0.0
        self._planned_bound = 0
        self._rate = _FIRST_RATE
        self._quiet = QuietChecks(c.poll_interval_ms, c.idle_poll_interval_ms)
        self._target: dict[str, Position] | None = None
        self._released = False
        self._consumer: str | None = None

    def __getstate__(self) -> dict[str, Any]:  # executors get the options only
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    def _grid(self) -> GridAdapter:
        if self._adapter is None:
            adapter = grid_adapter(self.config.grid)
            adapter.open()
            self._adapter = adapter
        return self._adapter

    def initialOffset(self) -> dict[str, Any]:
        return initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.config.max_changes_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        """An available-now run reads up to the caches' ends now, then stops."""
        grid = self._grid()
        self._target = {c: grid.end_position(c) for c in grid.list_caches()
                        if self._planner.wanted(c)}

    def bound(self, limit: ReadLimit | None = None) -> int:
        """The most changes the next batch may stream (see the class docstring)."""
        c = self.config
        bound = c.max_changes_per_batch
        if isinstance(limit, ReadMaxRows):
            bound = min(bound, limit.max_rows)
        if c.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            fits = int(self._rate * c.transaction_timeout_ms / 1000 / 4)
            bound = min(bound, max(fits, _MIN_BOUND))
        return max(bound, 1)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit | None = None
                     ) -> dict[str, Any]:
        first = self._planner.first
        now = time.monotonic()
        if not first and self._target is None and not self._quiet.due(now):
            return start  # the grid was quiet at the last check: not yet checked again
        begin = SourceOffset.from_dict(start)
        self._measure(begin)
        bound = self.bound(limit)
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                planned = self._planner.plan(begin, _AdapterView(self._grid(), self.snap_dir),
                                             int(time.time() * 1000), bound, self._target)
                break
            except PositionLostError:
                raise
            except GridError as exc:  # the grid unreachable for a while: a new connection
                self._reset()
                if attempt == _ATTEMPTS:
                    raise
                log.warning("planning the next batch failed (attempt %d of %d), again in "
                            "%ss: %s", attempt, _ATTEMPTS, _RETRY_S, exc)
                time.sleep(_RETRY_S)
        if first:
            self._acknowledge(begin)
        self._quiet.checked(now, found=planned is not begin)
        self._planned = self._planned_any = planned
        self._planned_from, self._planned_at = begin, time.monotonic()
        self._planned_bound = bound
        return planned.to_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = SourceOffset.from_dict(start), SourceOffset.from_dict(end)
        works = [w for cache, state in sorted(finish.caches.items())
                 if (w := batch_work(cache, begin.caches.get(cache), state)) is not None]
        # one stream for every cache (the Space's log): caches over the same span read it
        # once, together (the grid's kind decides: known without connecting)
        groups = (shared_works(works) if self.config.grid.kind == "space"
                  else [[w] for w in works])
        parts: list[InputPartition] = [CachePartition(_work_json(g, finish.time_ms))
                                       for g in groups]
        if finish.events:
            payload = {"events": [e.to_dict() for e in finish.events], "t": finish.time_ms}
            parts.append(CachePartition(orjson.dumps(payload).decode()))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, CachePartition)
        worker.prepare()
        works, time_ms, events = _work_from(partition.payload)
        if produce.SINK_OPTION in self.options:
            yield self._produce(partition.payload, works, time_ms, events)
            return
        if not works:
            rows = RowBuffer()
            _add_events(rows, events)
            yield rows.take()
            return
        maker = _worker_maker(self.config, self.allowed, time_ms)
        yield from read_work(works, lambda fresh: _worker_adapter(self.config, fresh), maker,
                             self.snap_dir)

    def _produce(self, payload: str, works: list[Work], time_ms: int,
                 events: list[dict[str, str]]) -> pa.RecordBatch:
        """Write mode: the partition's records produced, one report row back."""
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise SparkError("the source's write mode runs inside a Spark task")
        spec = produce.SinkSpec.from_json(self.options[produce.SINK_OPTION])
        properties = KafkaProperties(orjson.loads(self.options[produce.PRODUCER_OPTION]))
        plan = _slot_plan(spec, properties, context) if spec.exactly_once else None
        rows = produce.ProducingRows(spec, properties, plan, context.partitionId(),
                                     produce.origin(payload), self.config.dead_letter_topic)
        try:
            if not works:
                _add_events(rows, events)
            else:
                maker = _worker_maker(self.config, self.allowed, time_ms)
                for _ in read_work(works, lambda fresh: _worker_adapter(self.config, fresh),
                                   maker, self.snap_dir, rows):
                    raise AssertionError("write mode yields no rows")
        except BaseException:
            rows.fail()
            raise
        report = RowBuffer()
        report.add(None, None, None, None, "report", ",".join(w.cache for w in works),
                   reason=orjson.dumps(rows.finish()).decode())
        return report.take()

    def commit(self, end: dict[str, Any]) -> None:
        done = SourceOffset.from_dict(end)
        self._acknowledge(done)
        keep = {s.snap for s in done.caches.values() if s.snap}
        if self._planned_any is not None:  # a planned batch may be running or re-run next
            keep |= {s.snap for s in self._planned_any.caches.values() if s.snap}
            snapshots.remove_unused(self.snap_dir, keep)

    def _measure(self, start: SourceOffset) -> None:
        """The rate of the batch this reader planned last, once Spark asks for the next
        one from its end (it has run by then: Spark plans batch n + 1 after running n),
        if it was large enough to tell: the adaptive bound's input."""
        planned, since = self._planned, self._planned_from
        if planned is None or since is None or self._adapter is None:
            return
        self._planned = None
        if start.to_dict() != planned.to_dict():
            return
        changes = planned_changes(since, planned, self._adapter.shared_stream)
        seconds = time.monotonic() - self._planned_at
        if changes < _MIN_BOUND or seconds <= 0:
            return
        measured = changes / seconds
        # a batch that filled its bound ran back to back with the next plan: its rate is
        # the batch's; a smaller one may include the wait for the next trigger, so it
        # only says the rate is at least that much
        full = changes >= 0.9 * self._planned_bound
        self._rate = measured if full else max(self._rate, measured)

    def _acknowledge(self, offset: SourceOffset) -> None:
        positions = [s.pos for s in offset.caches.values()]
        if not positions:
            return
        lowest = min(positions, key=lambda p: min(p.next_seqs.values(), default=0))
        if len({p.lineage for p in positions}) != 1 or len(
                {tuple(sorted(p.next_seqs)) for p in positions}) != 1:
            return  # not one stream for all caches (Hazelcast): nothing to acknowledge
        c = self.config
        try:
            if self._consumer is None:
                self._consumer = consumer_name(c.name, c.checkpoint)
            grid = self._grid()
            grid.acknowledge(self._consumer, lowest)
            if not self._released:  # an earlier version's name would hold retention back
                grid.release(legacy_consumer_name(c.name))
                self._released = True
        except GridError as exc:
            log.warning("cannot acknowledge the source's position to the grid: %s", exc)

    def _reset(self) -> None:
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            adapter.close()

    def stop(self) -> None:
        self._reset()


# ---------------------------------------------------------------- per worker process


def _add_events(rows: Rows, events: list[dict[str, str]]) -> None:
    """One ``event`` row per event of the batch (``reason``: the event as JSON)."""
    for event in events:
        rows.add(None, None, None, None, "event", event["cache"], event["kind"],
                 orjson.dumps(event).decode())


def _slot_plan(spec: produce.SinkSpec, properties: KafkaProperties, context: Any) -> SlotPlan:
    """The batch's slot plan, as the driver handed it to the tasks (``produce.batch_plan``)."""
    batch = context.getLocalProperty(produce.BATCH_PROPERTY)
    if not batch:
        raise SparkError("the source's write mode runs only in the connector's foreachBatch")
    return produce.plan_from(batch, properties, spec)


_LOCK = threading.Lock()
_ADAPTERS: dict[str, GridAdapter] = {}
_MAKERS: dict[str, RecordMaker] = {}


def _grid_key(config: SourceConnectorConfig) -> str:
    return config.grid.model_dump_json()


def _worker_adapter(config: SourceConnectorConfig, fresh: bool = False) -> GridAdapter:
    """This worker's adapter for the config's grid (``fresh``: the old one failed, close
    it and connect again)."""
    if fresh:
        _drop_worker_adapter(config)
    key = _grid_key(config)
    with _LOCK:
        adapter = _ADAPTERS.get(key)
        if adapter is None:
            adapter = grid_adapter(config.grid)
            adapter.open()
            _ADAPTERS[key] = adapter
        return adapter


def _drop_worker_adapter(config: SourceConnectorConfig) -> None:
    with _LOCK:
        adapter = _ADAPTERS.pop(_grid_key(config), None)
    if adapter is not None:
        try:
            adapter.close()
        except Exception:  # noqa: BLE001 - closing an adapter that already failed
            log.debug("closing a failed adapter failed", exc_info=True)


def _worker_maker(config: SourceConnectorConfig, allowed: tuple[str, ...],
                  time_ms: int) -> RecordMaker:
    key = config.model_dump_json() + "|" + ",".join(allowed)
    with _LOCK:
        maker = _MAKERS.get(key)
        if maker is None:
            entry_filter = (load_filter(config.cache_filter, allowed)
                            if config.cache_filter else None)
            maker = RecordMaker(config, build_converter(config.converter),
                                build_chain(config.transforms), entry_filter, time_ms)
            _MAKERS[key] = maker
        maker.time_ms = time_ms
        return maker

