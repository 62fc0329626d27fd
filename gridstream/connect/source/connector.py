"""``SourceConnector``: grid caches → Kafka topics, a Spark streaming query.

The query reads the ``gridstream-grid`` data source (``datasource``) and writes each
micro-batch in ``foreachBatch``: the batch is persisted, counted by status, a record the
policy stops on (``STOP_TASK``) fails the batch naming its cache and key (the batch's
offsets are not committed: a restart reads it again), the topics are created if missing,
the records and dead letters are written through ``KafkaExactlyOnceWriter``
(``deliveryGuarantee = exactly_once``) or Spark's Kafka sink (``at_least_once``), and a
``ConnectorReport`` is queued with the batch's events (snapshots, changes skipped under
``NONE``, lost positions, caches discovered or dropped).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.connect.base import Connector, ConnectorReport
from gridstream.connect.config import DeliveryGuarantee, SourceConnectorConfig
from gridstream.connect.filters import allowed_modules, load_filter
from gridstream.connect.source.datasource import FORMAT, GridSourceDataSource, source_options
from gridstream.connect.source.snapshots import local_dir
from gridstream.connect.transforms import build_chain
from gridstream.errors import ConfigError, RecordError
from gridstream.kafka import KafkaProperties, TopicSpec, ensure_topics, redact
from gridstream.spark.config import parse_trigger
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from gridstream.space import Space

__all__ = ["SourceConnector", "SourceEvent", "marker_topic"]

log = logging.getLogger(__name__)

_FORBIDDEN = frozenset({"transactional.id", "enable.idempotence", "bootstrap.servers",
                        "transaction.timeout.ms"})
_WRITTEN = ("ok", "dead")


@dataclass(frozen=True)
class SourceEvent:
    """An event of one batch: ``kind`` (``snapshot``, ``skipped``, ``lost``,
    ``discovered``, ``dropped``), the cache, the planner's detail and, for ``skipped``,
    how many changes were not emitted."""

    batch_id: int
    kind: str
    cache: str
    detail: str
    count: int | None = None

    def text(self) -> str:
        count = f"{self.count} changes " if self.count is not None else ""
        return f"{self.kind} {count}{self.cache}" + (f" ({self.detail})" if self.detail else "")


class SourceConnector(Connector):
    """Grid caches → Kafka topics (see the module docstring and ``docs/connectors.md``)."""

    def __init__(self, config: SourceConnectorConfig, *, bootstrap_servers: str,
                 kafka_properties: Mapping[str, Any] | None = None,
                 allowed_modules: Sequence[str] = (), space: Space | None = None) -> None:
        super().__init__(config.name)
        self.config = config
        self.bootstrap_servers = config.bootstrap_servers or bootstrap_servers
        self.kafka_properties = KafkaProperties({**(kafka_properties or {}), **config.kafka})
        bad = sorted(_FORBIDDEN & set(self.kafka_properties))
        if bad:
            raise ConfigError(f"source connector {config.name!r}: the connector sets "
                              f"{', '.join(bad)} itself; remove them from its Kafka properties")
        self.allowed = _allowed(allowed_modules)
        if config.cache_filter:  # fail at construction, not in a Spark task
            load_filter(config.cache_filter, self.allowed)
        build_chain(config.transforms)
        local_dir(config.checkpoint)
        self.space = space
        self.events: deque[SourceEvent] = deque(maxlen=10_000)
        """Every event reported so far (oldest first)."""
        self.skipped_while_down: dict[str, int] = {}
        """Per cache: changes not emitted under ``NONE`` (made while stopped), summed."""
        self._writer: KafkaExactlyOnceWriter | None = None
        self._topics: set[str] = set()
        self._query: StreamingQuery | None = None

    # ------------------------------------------------------------------ the runner's API

    def describe(self) -> str:
        c = self.config
        props = redact(self.kafka_properties)
        extra = f" {props}" if props else ""
        grid = (f"space {c.grid.space_name}@{c.grid.data_dir}" if c.grid.kind == "space"
                else f"hazelcast {c.grid.cluster_name}@{','.join(c.grid.members)}")
        return (f"{c.name}: {grid} → {c.topic_prefix or ''}<cache> @ "
                f"{self.bootstrap_servers}{extra}  [source, {c.failover_policy.value}, "
                f"{c.delivery_guarantee.value}, checkpoint {c.checkpoint}, trigger "
                f"{c.trigger}, errors {c.error_handling_policy.value}]")

    def stream(self, spark: SparkSession) -> DataFrame:
        """The streaming DataFrame of the source's rows (see ``read``)."""
        spark.dataSource.register(GridSourceDataSource)
        options = source_options(self.config, self.allowed)
        return spark.readStream.format(FORMAT).options(**options).load()

    def start(self, spark: SparkSession) -> StreamingQuery:
        self.failure = None
        writer = (self.stream(spark).writeStream.queryName(self.name)
                  .option("checkpointLocation", self.config.checkpoint)
                  .foreachBatch(self._handle)
                  .trigger(**parse_trigger(self.config.trigger)))
        self._query = writer.start()
        return self._query

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # ------------------------------------------------------------------ batches

    def process_batch(self, rows: DataFrame, batch_id: int) -> ConnectorReport:
        """Count, check, write and report one batch."""
        import pyspark.sql.functions as F
        from pyspark import StorageLevel

        started = time.monotonic()
        cached = rows.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            counts: dict[str, int] = {}
            topics: set[str] = set()
            gaps: dict[str, int] = {}
            for row in cached.groupBy("status", "topic", "cache").count().collect():
                status, n = str(row["status"]), int(row["count"])
                counts[status] = counts.get(status, 0) + n
                if status in _WRITTEN and row["topic"]:
                    topics.add(str(row["topic"]))
                if status == "gap":
                    gaps[str(row["cache"])] = gaps.get(str(row["cache"]), 0) + n
            if counts.get("error"):
                self._stop_on_error(cached, counts["error"])
            if counts.get("skipped"):
                self._log_skipped(cached, counts["skipped"])
            events = self._events(cached, batch_id, gaps) if counts.get("event") else []
            out = cached.where(F.col("status").isin(*_WRITTEN)).select(
                "topic", "key", "value", "headers")
            if counts.get("ok", 0) + counts.get("dead", 0):
                self._ensure_topics(topics)
                self._write(out, batch_id)
        finally:
            cached.unpersist()
        self._record(events, batch_id)  # only once the batch is written: a re-run counts once
        records = sum(counts.get(s, 0) for s in ("ok", "filtered", "skipped", "dead"))
        return ConnectorReport(self.name, batch_id, records, counts.get("ok", 0),
                               counts.get("filtered", 0),
                               counts.get("skipped", 0), counts.get("dead", 0),
                               time.monotonic() - started, "; ".join(e.text() for e in events))

    def _stop_on_error(self, cached: DataFrame, count: int) -> None:
        first = cached.where("status = 'error'").select("where", "reason", "cache").first()
        assert first is not None
        where, reason = str(first["where"]), str(first["reason"])
        stage, _, message = reason.partition(": ")
        raise RecordError(f"{message} (source connector {self.name!r}, "
                          f"errorHandlingPolicy STOP_TASK: {count} bad record(s) in the batch; "
                          "the position is not advanced)", where=where, stage=stage)

    def _log_skipped(self, cached: DataFrame, count: int) -> None:
        for row in cached.where("status = 'skipped'").select("where", "reason").limit(10
                                                                                     ).collect():
            log.warning("%s: skipped %s: %s", self.name, row["where"], row["reason"])
        log.warning("%s: %d bad record(s) skipped (errorHandlingPolicy LOG_ONLY)", self.name,
                    count)

    def _events(self, cached: DataFrame, batch_id: int, gaps: dict[str, int]
                ) -> list[SourceEvent]:
        events = []
        for row in cached.where("status = 'event'").select("reason").collect():
            raw = orjson.loads(row["reason"])
            count = gaps.get(raw["cache"], 0) if raw["kind"] == "skipped" else None
            events.append(SourceEvent(batch_id, raw["kind"], raw["cache"], raw["detail"],
                                      count))
        return events

    def _record(self, events: list[SourceEvent], batch_id: int) -> None:
        """Keep a written batch's events (and the changes NONE skipped, per cache)."""
        for event in events:
            if event.count is not None:
                self.skipped_while_down[event.cache] = (
                    self.skipped_while_down.get(event.cache, 0) + event.count)
            self.events.append(event)
            log.info("%s batch %d: %s", self.name, batch_id, event.text())

    def _ensure_topics(self, topics: set[str]) -> None:
        missing = topics - self._topics
        if not missing:
            return
        from confluent_kafka.admin import AdminClient

        from gridstream.kafka.config import shared_config

        config = self.kafka_properties.layered({}, {"bootstrap.servers": self.bootstrap_servers})
        admin = AdminClient(shared_config(config.client_config()))
        specs = [TopicSpec(t, self.config.topic_partitions if t != self.config.dead_letter_topic
                           else -1) for t in sorted(missing)]
        ensure_topics(admin, specs)
        self._topics |= missing

    def _write(self, out: DataFrame, batch_id: int) -> None:
        c = self.config
        if c.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            if self._writer is None:
                self._writer = KafkaExactlyOnceWriter(
                    self.bootstrap_servers, name=f"source-{c.name}",
                    properties=dict(self.kafka_properties.client_config()),
                    transaction_timeout_ms=c.transaction_timeout_ms, trigger=c.trigger,
                    cache_batch=False, marker_topic=marker_topic(c.name),
                    marker_partitions=1)
            self._writer.write(out, batch_id)
            return
        writer = out.write.format("kafka").option("kafka.bootstrap.servers",
                                                   self.bootstrap_servers)
        for key, value in {"kafka.acks": "all", **{
                f"kafka.{k}": str(v) for k, v in self.kafka_properties.client_config().items()
        }}.items():
            writer = writer.option(key, value)
        writer.save()


def marker_topic(connector: str) -> str:
    """The exactly-once writer's commit markers of one source connector: a topic of its
    own, so a transaction another query's crash left open (it holds back
    ``read_committed`` reads of its partition until the broker aborts it) never delays
    this connector's batches."""
    return f"__gridstream_markers.source.{connector}"


def _allowed(configured: Sequence[str]) -> tuple[str, ...]:
    return allowed_modules(configured)

