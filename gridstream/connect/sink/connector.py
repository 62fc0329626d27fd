"""The sink connector: Kafka topics → grid caches, a Spark streaming query.

Spark's Kafka source (``subscribe`` for ``topics``, ``subscribePattern`` for
``topics.regex``; ``read_committed``; offsets in the checkpoint) feeds ``foreachBatch``:

1. decode on the executors (``mapInArrow``, ``decode``), the batch kept (persisted) and
   counted by status;
2. bad records by ``errorHandlingPolicy``: ``STOP_TASK`` raises ``RecordError`` naming
   the first one's ``topic[partition]@offset`` before anything of the batch is applied;
   ``LOG_ONLY`` logs them (the first ones in full) and counts them; ``DEAD_LETTER``
   writes them to the dead-letter topic with their key, value and headers and
   ``gs.error.*`` headers;
3. the valid records are applied (``apply``): on Hazelcast by ``tasks.max`` Spark tasks,
   on the Space by the driver, which owns the Space;
4. a ``ConnectorReport`` (the runner adds the lag from the query's progress).

Spark commits a batch's offsets only after the function returns: a crash anywhere in it
runs the batch again from the same offsets, and applying it again changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gridstream.connect.base import Connector, ConnectorReport
from gridstream.connect.config import ErrorHandling, HazelcastGridSettings, SinkConnectorConfig
from gridstream.connect.converters import build_converter
from gridstream.connect.filters import allowed_modules, load_filter
from gridstream.connect.grids import grid_adapter
from gridstream.connect.record import H_CONNECTOR, H_STAGE
from gridstream.connect.sink.apply import apply_on_driver, apply_tasks
from gridstream.connect.sink.decode import (
    BAD,
    FILTERED,
    OK,
    DecodeSpec,
    decode_batches,
    output_schema,
)
from gridstream.connect.transforms import build_chain
from gridstream.errors import ConfigError, RecordError
from gridstream.grid.contract import GridAdapter
from gridstream.kafka import redact
from gridstream.spark.config import parse_trigger
from gridstream.spark.dead_letter import write_dead_letters
from gridstream.spark.kafka_source import (
    check_consumer_properties,
    client_options,
    source_options,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from gridstream.space import Space

__all__ = ["SinkConnector"]

log = logging.getLogger(__name__)

_LOGGED = 10
"""Bad records logged in full per batch under LOG_ONLY (all are counted)."""


class SinkConnector(Connector):
    """``kind = "sink"``: build with its config, ``start`` on a Spark session.

    ``space``: an open Space of this process to apply to (a Space grid); without it the
    connector opens the Space named by ``grid`` itself when it starts, and owns it until
    ``close``."""

    def __init__(self, config: SinkConnectorConfig, *, bootstrap_servers: str,
                 kafka_properties: Mapping[str, Any] | None = None,
                 allowed_modules: Sequence[str] = (), space: Space | None = None) -> None:
        super().__init__(config.name)
        self.config = config
        self.bootstrap_servers = config.bootstrap_servers or bootstrap_servers
        self.kafka_properties: dict[str, Any] = {**(kafka_properties or {}), **config.kafka}
        check_consumer_properties(self.kafka_properties, f"connector {config.name!r}")
        self.allowed = _allowed(allowed_modules)
        if space is not None and isinstance(config.grid, HazelcastGridSettings):
            raise ConfigError(f"connector {config.name!r}: a Space was given to a "
                              "Hazelcast sink")
        self._space = space
        self._adapter: GridAdapter | None = None
        self.spec = DecodeSpec(
            connector=config.name, converter=config.converter, key_policy=config.key_policy,
            key_fields=config.key_fields, cache_prefix=config.cache_prefix,
            transforms=config.transforms, cache_filter=config.cache_filter,
            allowed_modules=self.allowed,
            id_property=None if isinstance(config.grid, HazelcastGridSettings)
            else config.grid.id_property,
            with_headers=config.error_handling_policy is ErrorHandling.DEAD_LETTER)
        self._check_parts()

    def _check_parts(self) -> None:
        """Build the converter, the transforms and the filter once here, so a bad one is
        a ``ConfigError`` now rather than a failed task later."""
        c = self.config
        build_converter(c.converter).close()
        build_chain(c.transforms)
        if c.cache_filter:
            load_filter(c.cache_filter, self.allowed)

    # ------------------------------------------------------------ the runner's side

    def describe(self) -> str:
        c = self.config
        topics = ",".join(c.topics) if c.topics is not None else f"/{c.topics_regex}/"
        props = redact(self.kafka_properties)
        extra = f" {props}" if props else ""
        grid = (f"hazelcast {c.grid.cluster_name}@{','.join(c.grid.members)}"
                if isinstance(c.grid, HazelcastGridSettings)
                else f"space {c.grid.space_name} ({c.grid.data_dir})")
        return (f"{c.name}: sink {topics} @ {self.bootstrap_servers}{extra} → {grid} "
                f"caches {c.cache_prefix!r}+topic  [checkpoint {c.checkpoint}, every "
                f"{c.push_interval_ms} ms, tasks.max {c.tasks_max}, keyPolicy "
                f"{c.key_policy.value}, shallProcessUpdates "
                f"{str(c.shall_process_updates).lower()}, errors "
                f"{c.error_handling_policy.value}]")

    def source_options(self) -> dict[str, str]:
        """The Kafka source's options (secrets included: never print them)."""
        c = self.config
        return source_options(
            self.bootstrap_servers, self.kafka_properties, topics=c.topics,
            pattern=c.topics_regex, starting_offsets=c.starting_offsets,
            include_headers=self.spec.with_headers,
            max_offsets_per_trigger=c.max_offsets_per_trigger)

    def source(self, spark: SparkSession) -> DataFrame:
        return spark.readStream.format("kafka").options(**self.source_options()).load()

    def open(self) -> None:
        """Open the driver's side of the grid: the Space, which the driver applies to
        (Hazelcast: nothing, the tasks connect). ``start`` calls it; idempotent."""
        if not isinstance(self.config.grid, HazelcastGridSettings) and self._adapter is None:
            adapter = grid_adapter(self.config.grid, writable=True, space=self._space)
            adapter.open()
            self._adapter = adapter

    def start(self, spark: SparkSession) -> StreamingQuery:
        self.failure = None
        self.open()
        writer = (self.source(spark).writeStream.queryName(self.name)
                  .option("checkpointLocation", self.config.checkpoint)
                  .foreachBatch(self._handle)
                  .trigger(**parse_trigger(self.config.trigger)))
        return writer.start()

    def close(self) -> None:
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            adapter.close()

    def _handle(self, records: DataFrame, batch_id: int) -> None:
        try:
            self.reports.append(self.process_batch(records, batch_id))
        except BaseException as exc:
            self.failure = exc
            raise

    # ------------------------------------------------------------ one micro-batch

    def process_batch(self, records: DataFrame, batch_id: int) -> ConnectorReport:
        """Decode, handle the bad records by policy, apply the valid ones."""
        import pyspark.sql.functions as F
        from pyspark import StorageLevel

        started = time.monotonic()
        decoded = records.mapInArrow(decode_batches(self.spec),
                                     output_schema(self.spec.with_headers))
        decoded = decoded.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            counts = {str(r["status"]): int(r["count"])
                      for r in decoded.groupBy("status").count().collect()}
            bad = counts.get(BAD, 0)
            note = self._bad(decoded, bad, batch_id) if bad else ""
            written = 0
            if counts.get(OK, 0):
                written = self._apply(decoded.where(F.col("status") == OK))
        finally:
            decoded.unpersist()
        policy = self.config.error_handling_policy
        return ConnectorReport(
            self.name, batch_id, records=sum(counts.values()), written=counts.get(OK, 0),
            filtered=counts.get(FILTERED, 0),
            skipped=bad if policy is ErrorHandling.LOG_ONLY else 0,
            dead_lettered=bad if policy is ErrorHandling.DEAD_LETTER else 0,
            seconds=time.monotonic() - started,
            note=_join(note, f"{written} key writes" if written else ""))

    def _apply(self, ok: DataFrame) -> int:
        c = self.config
        updates = c.shall_process_updates
        if isinstance(c.grid, HazelcastGridSettings):
            from gridstream.grid.hazelcast import HazelcastAdapter

            adapter = grid_adapter(c.grid)
            assert isinstance(adapter, HazelcastAdapter)  # noqa: S101 - grid_adapter's rule
            return apply_tasks(ok, adapter.config, tasks=c.tasks_max, updates=updates)
        if self._adapter is None:
            raise ConfigError(f"connector {self.name!r}: not open (the Space it applies to)")
        return apply_on_driver(self._adapter, ok, updates=updates)

    def _bad(self, decoded: DataFrame, count: int, batch_id: int) -> str:
        """Apply the error policy to the batch's ``count`` bad records; a note for the
        report."""
        import pyspark.sql.functions as F

        bad = decoded.where(F.col("status") == BAD)
        first = bad.orderBy("topic", "partition", "offset").limit(_LOGGED).select(
            "topic", "partition", "offset", "stage", "reason").collect()
        if not first:  # counted, then gone: the batch is not what it was
            raise RecordError(f"{count} bad record(s) counted but none found again",
                              where=f"batch {batch_id}", stage="decode")
        head = first[0]
        where = f"{head['topic']}[{head['partition']}]@{head['offset']}"
        policy = self.config.error_handling_policy
        if policy is ErrorHandling.STOP_TASK:
            raise RecordError(f"{head['reason']} ({count} bad record(s) in batch {batch_id}; "
                              "errorHandlingPolicy STOP_TASK: nothing of the batch applied, "
                              "its offsets not committed)", where=where, stage=head["stage"])
        if policy is ErrorHandling.LOG_ONLY:
            for row in first:
                log.warning("%s: skipped %s[%s]@%s: %s: %s", self.name, row["topic"],
                            row["partition"], row["offset"], row["stage"], row["reason"])
            return f"{count} bad record(s) skipped, first at {where}: {head['reason']}"
        topic = self.config.dead_letter_topic
        if topic is None:  # guarded by the config
            raise ConfigError(f"connector {self.name!r} has no deadLetterTopic")
        letters = bad.select(
            F.col("raw_key").alias("key"), F.col("raw_value").alias("value"), "headers",
            F.concat_ws(": ", "stage", "reason").alias("error"), "topic",
            F.col("partition").alias("kafka_partition"), "offset", "stage")
        write_dead_letters(letters, topic, self.name,
                           client_options(self.bootstrap_servers, self.kafka_properties),
                           origin_header=H_CONNECTOR, more_headers={H_STAGE: "stage"})
        return f"{count} bad record(s) dead-lettered to {topic}, first at {where}"


def _allowed(configured: Sequence[str]) -> tuple[str, ...]:
    return allowed_modules(configured)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
