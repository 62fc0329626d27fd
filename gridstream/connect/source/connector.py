"""``SourceConnector``: grid caches → Kafka topics, a Spark streaming query.

The query reads the ``gridstream-grid`` data source in *write mode* (``datasource``,
``produce``): each partition — a cache's part of the batch, or the batch's events —
passes its records through filter, transforms and converter and produces them to Kafka
as it reads them (exactly-once: in one transaction of its slot with a commit marker,
through ``KafkaExactlyOnceWriter``'s slots; at-least-once: an idempotent producer,
flushed), creating missing topics. ``foreachBatch`` runs that one job and collects one
report row per partition: counts by status, the first record the policy stops on
(``STOP_TASK``: the batch fails naming its cache and key, its partition's transaction is
aborted and the batch's offsets are not committed, so a restart reads it again), samples
of skipped records, and the batch's events (snapshots, changes skipped under ``NONE``,
lost positions, caches discovered or dropped), queued as a ``ConnectorReport``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.allowlist import allowed_modules
from gridstream.connect.base import Connector, ConnectorReport
from gridstream.connect.config import GET_PAST, DeliveryGuarantee, SourceConnectorConfig
from gridstream.connect.filters import load_filter
from gridstream.connect.source import produce
from gridstream.connect.source.datasource import FORMAT, register, source_options
from gridstream.connect.source.lag import GridLag
from gridstream.connect.source.snapshots import local_dir
from gridstream.connect.transforms import build_chain
from gridstream.errors import ConfigError, RecordError
from gridstream.kafka import KafkaProperties, redact
from gridstream.spark.kafka_writer import PRODUCER_DEFAULTS, KafkaExactlyOnceWriter
from gridstream.spark.owner import claim_checkpoint
from gridstream.spark.triggers import parse_trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from gridstream.space import Space

__all__ = ["SourceConnector", "SourceEvent", "marker_topic"]

log = logging.getLogger(__name__)

_FORBIDDEN = frozenset({"transactional.id", "bootstrap.servers", "transaction.timeout.ms"})
_SET_HERE = ("acks", "enable.idempotence")
"""Set by the connector itself (``acks=all``, idempotent): a user's ``acks=all`` / ``-1``
or ``enable.idempotence=true`` is dropped, any other value refused at load
(``SourceConnectorConfig.producer_problem``)."""
_WAIT_S = 30.0
"""The producers' timeout (init, flush, commit)."""


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

    kind = "source connector"

    def __init__(self, config: SourceConnectorConfig, *, bootstrap_servers: str,
                 kafka_properties: Mapping[str, Any] | None = None,
                 allowed_modules: Sequence[str] = (), space: Space | None = None) -> None:
        super().__init__(config.name)
        self.config = config
        self.bootstrap_servers = config.bootstrap_servers or bootstrap_servers
        merged = {**(kafka_properties or {}), **config.kafka}
        bad = sorted(_FORBIDDEN & set(merged))
        if bad:
            raise ConfigError(f"source connector {config.name!r}: the connector sets "
                              f"{', '.join(bad)} itself; remove them from its Kafka properties")
        problem = config.producer_problem(merged)
        if problem is not None:
            raise ConfigError(problem)
        self.kafka_properties = KafkaProperties(
            {k: v for k, v in merged.items() if k not in _SET_HERE})
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
        self._query: StreamingQuery | None = None
        self._lag = GridLag(config.grid)

    # ------------------------------------------------------------------ the runner's API

    def endpoints(self) -> tuple[list[str], list[str]]:
        """The places it reads and writes (the run's topology): caches and topics are
        patterns (``cacheWhitelist`` holds regular expressions; ``.*`` for all), plus
        the topics a ``route_by_cache`` transform names."""
        c = self.config
        caches = list(c.cache_whitelist) or [".*"]
        routed = [str(topic) for t in c.transforms if t.type == "route_by_cache"
                  for topic in dict((t.model_extra or {}).get("topics") or {}).values()]
        return ([f"{c.grid.kind}:{cache}" for cache in caches],
                [f"kafka:{c.topic_prefix}{cache}" for cache in caches]
                + [f"kafka:{topic}" for topic in routed])

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
        """The streaming DataFrame of the source in write mode: one report row per
        partition of a batch, its records produced when the batch is read."""
        register(spark)
        options = source_options(self.config, self.allowed)
        writer = self._exactly_once()
        if writer is not None:
            properties = writer.properties
            spec = produce.SinkSpec(True, writer.name, writer.marker_topic,
                                    self.config.topic_partitions, _WAIT_S, writer.wait_s())
        else:
            properties = self.kafka_properties.layered(
                PRODUCER_DEFAULTS, {"bootstrap.servers": self.bootstrap_servers})
            spec = produce.SinkSpec(False, "", "", self.config.topic_partitions, _WAIT_S,
                                    _WAIT_S)
        options[produce.SINK_OPTION] = spec.to_json()
        options[produce.PRODUCER_OPTION] = orjson.dumps({
            k: v.get_secret_value() if hasattr(v, "get_secret_value") else v
            for k, v in properties.client_config().items()}).decode()
        return spark.readStream.format(FORMAT).options(**options).load()

    def _exactly_once(self) -> KafkaExactlyOnceWriter | None:
        c = self.config
        if c.delivery_guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
            return None
        if self._writer is None:
            self._writer = KafkaExactlyOnceWriter(
                self.bootstrap_servers, name=f"source-{c.name}",
                properties=dict(self.kafka_properties.client_config()),
                transaction_timeout_ms=c.transaction_timeout_ms, trigger=c.trigger,
                cache_batch=False, marker_topic=marker_topic(c.name), marker_partitions=1,
                timeout_s=_WAIT_S)
        return self._writer

    def start(self, spark: SparkSession) -> StreamingQuery:
        self.failure = None
        claim_checkpoint(self.config.checkpoint, "source connector", self.name)
        writer = (self.stream(spark).writeStream.queryName(self.name)
                  .option("checkpointLocation", self.config.checkpoint)
                  .foreachBatch(self._handle)
                  .trigger(**parse_trigger(self.config.trigger)))
        self._query = writer.start()
        return self._query

    def lags(self, progress: Mapping[str, Any] | None) -> dict[str, int]:
        """Changes of the grid not read yet, per cache (the Space: ``log``), measured
        every ``LAG_EVERY_S`` (``gridstream.connect.source.lag``)."""
        return self._lag.measure(progress)

    def close(self) -> None:
        self._lag.close()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # ------------------------------------------------------------------ batches

    def process_batch(self, rows: DataFrame, batch_id: int) -> ConnectorReport:
        """Read (and so write) one batch in one Spark job, then check and report it."""
        started = time.monotonic()
        writer = self._exactly_once()
        spark = rows.sparkSession.sparkContext
        plan = writer.plan(rows, batch_id) if writer is not None else None
        if plan is not None:
            spark.setLocalProperty(produce.BATCH_PROPERTY, produce.batch_plan(plan))
        try:
            reports = [orjson.loads(r["reason"]) for r in rows.select("reason").collect()]
        finally:
            spark.setLocalProperty(produce.BATCH_PROPERTY, None)  # type: ignore[arg-type]
        counts: dict[str, int] = {}
        gaps: dict[str, int] = {}
        for report in reports:
            for status, n in report["counts"].items():
                counts[status] = counts.get(status, 0) + n
            for cache, n in report["gaps"].items():
                gaps[cache] = gaps.get(cache, 0) + n
        if counts.get("error"):
            self._stop_on_error(reports, counts["error"])
        if writer is not None and plan is not None:
            writer.completed(plan.query_id, batch_id)
        if counts.get("skipped"):
            self._log_skipped(reports, counts["skipped"])
        events = self._events(reports, batch_id, gaps)
        self._record(events, batch_id)  # only once the batch is written: a re-run counts once
        records = sum(counts.get(s, 0) for s in ("ok", "filtered", "skipped", "dead"))
        earlier = [r for r in reports if r["committed_earlier"]]
        again = {s: sum(r["counts"].get(s, 0) for r in earlier) for s in ("ok", "dead")}
        notes = [e.text() for e in events]
        if earlier:
            notes.append(f"{again['ok'] + again['dead']} record(s) of {len(earlier)} "
                         "partition(s) committed by an earlier run, not written again")
        return ConnectorReport(self.name, batch_id, records,
                               counts.get("ok", 0) - again["ok"], counts.get("filtered", 0),
                               counts.get("skipped", 0), counts.get("dead", 0) - again["dead"],
                               time.monotonic() - started, "; ".join(notes),
                               earlier_written=again["ok"], earlier_dead_lettered=again["dead"])

    def _stop_on_error(self, reports: list[dict[str, Any]], count: int) -> None:
        where, reason, _cache = next(r["error"] for r in sorted(
            reports, key=lambda r: r["slot"]) if r["error"])
        stage, _, message = str(reason).partition(": ")
        raise RecordError(f"{message} (source connector {self.name!r}, "
                          f"errorHandlingPolicy STOP_TASK: {count} bad record(s) in the batch; "
                          f"the position is not advanced; {GET_PAST})", where=str(where),
                          stage=stage)

    def _log_skipped(self, reports: list[dict[str, Any]], count: int) -> None:
        samples = [s for r in sorted(reports, key=lambda r: r["slot"]) for s in r["samples"]]
        for where, reason in samples[:10]:
            log.warning("%s: skipped %s: %s", self.name, where, reason)
        log.warning("%s: %d bad record(s) skipped (errorHandlingPolicy LOG_ONLY)", self.name,
                    count)

    @staticmethod
    def _events(reports: list[dict[str, Any]], batch_id: int, gaps: dict[str, int]
                ) -> list[SourceEvent]:
        events = []
        for text in (e for r in sorted(reports, key=lambda r: r["slot"]) for e in r["events"]):
            raw = orjson.loads(text)
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


def marker_topic(connector: str) -> str:
    """The exactly-once writer's commit markers of one source connector: a topic of its
    own, so a transaction another query's crash left open (it holds back
    ``read_committed`` reads of its partition until the broker aborts it) never delays
    this connector's batches."""
    return f"__gridstream_markers.source.{connector}"


def _allowed(configured: Sequence[str]) -> tuple[str, ...]:
    return allowed_modules(configured)

