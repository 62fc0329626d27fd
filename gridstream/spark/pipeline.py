"""A store pipeline: Kafka topics → decode in the JVM → one store, checkpointed.

Each micro-batch (``foreachBatch``) is decoded once and cached, malformed records are
handled by policy (fail or dead-letter, never dropped), and the valid operations go to
the sink. Offsets live in the checkpoint and are committed by Spark only after the batch
function returns, so a crash at any point replays the batch, which every sink applies
idempotently (effectively-once).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridstream.errors import ConfigError
from gridstream.kafka import redact
from gridstream.spark.config import PipelineConfig, parse_trigger
from gridstream.spark.dead_letter import ErrorPolicy, raise_first, write_dead_letters
from gridstream.spark.envelope import decode_envelopes
from gridstream.spark.sinks import BatchSink, SinkResult, create_sink
from gridstream.spark.types import TypeRegistry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["BatchReport", "StorePipeline"]

_FORBIDDEN = frozenset({"auto.offset.reset", "enable.auto.commit", "key.deserializer",
                        "value.deserializer", "interceptor.classes"})
"""Consumer properties Spark's Kafka source manages itself."""


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch did."""

    pipeline: str
    batch_id: int
    records: int
    malformed: int
    dead_lettered: int
    result: SinkResult
    seconds: float

    def line(self, lag: int | None = None) -> str:
        """One progress line."""
        rate = self.records / self.seconds if self.seconds > 0 else 0.0
        r = self.result
        text = (f"{self.pipeline}  batch {self.batch_id}: {self.records} records, "
                f"{r.applied} applied, {r.stale} stale, {r.skipped} skipped, "
                f"{self.malformed} malformed ({self.dead_lettered} dead-lettered) "
                f"in {self.seconds:.2f}s ({rate:,.0f} rec/s)")
        return text if lag is None else f"{text}, lag {lag}"


class StorePipeline:
    """One ``[[pipeline]]``: build with a config, ``start`` it on a Spark session."""

    def __init__(self, config: PipelineConfig, types: TypeRegistry | None = None, *,
                 sink: BatchSink | None = None, bootstrap_servers: str | None = None,
                 kafka_properties: Mapping[str, Any] | None = None) -> None:
        self.config = config
        self.types = types or TypeRegistry(
            unknown_types=config.unknown_types, default_id_property=config.default_id_property)
        self.sink = sink or create_sink(config.sink, self.types)
        self.bootstrap_servers = config.bootstrap_servers or bootstrap_servers or "127.0.0.1:9092"
        self.kafka_properties = {**(kafka_properties or {}), **config.kafka}
        bad = _FORBIDDEN & set(self.kafka_properties)
        if bad:
            raise ConfigError(f"pipeline {config.name!r}: Spark's Kafka source manages "
                              f"{', '.join(sorted(bad))} itself; remove them")
        self.reports: deque[BatchReport] = deque(maxlen=1000)
        self.failure: BaseException | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def _client_options(self) -> dict[str, str]:
        options = {"kafka.bootstrap.servers": self.bootstrap_servers}
        options.update({f"kafka.{k}": _text(v) for k, v in self.kafka_properties.items()})
        return options

    def source_options(self) -> dict[str, str]:
        """The Kafka source's options (secrets included: never print them)."""
        c = self.config
        options = self._client_options()
        options["kafka.isolation.level"] = c.isolation_level
        if c.topics is not None:
            options["subscribe"] = ",".join(c.topics)
        else:
            options["subscribePattern"] = str(c.pattern)
        options.update(startingOffsets=c.starting_offsets, includeHeaders="true",
                       failOnDataLoss=_text(c.fail_on_data_loss))
        if c.max_offsets_per_trigger is not None:
            options["maxOffsetsPerTrigger"] = str(c.max_offsets_per_trigger)
        if c.min_partitions is not None:
            options["minPartitions"] = str(c.min_partitions)
        return options

    def describe(self) -> str:
        """One line for the terminal (secrets redacted)."""
        c = self.config
        source = ",".join(c.topics) if c.topics is not None else f"/{c.pattern}/"
        props = redact(self.kafka_properties)
        extra = f" {props}" if props else ""
        loss = "" if c.fail_on_data_loss else ", failOnDataLoss=false: lost offsets are SKIPPED"
        return (f"{c.name}: {source} @ {self.bootstrap_servers}{extra} → {self.sink.describe()}"
                f"  [checkpoint {c.checkpoint}, trigger {c.trigger}, "
                f"errors {c.error_handling_policy.value}{loss}]")

    def source(self, spark: SparkSession) -> DataFrame:
        """The streaming DataFrame of the pipeline's Kafka records."""
        return spark.readStream.format("kafka").options(**self.source_options()).load()

    def start(self, spark: SparkSession) -> StreamingQuery:
        """Open the sink and start the streaming query (resuming from the checkpoint)."""
        self.failure = None
        self.sink.open(spark)
        writer = (self.source(spark).writeStream.queryName(self.name)
                  .option("checkpointLocation", self.config.checkpoint)
                  .foreachBatch(self._handle)
                  .trigger(**parse_trigger(self.config.trigger)))
        return writer.start()

    def _handle(self, records: DataFrame, batch_id: int) -> None:
        try:
            self.reports.append(self.process_batch(records, batch_id))
        except BaseException as exc:
            self.failure = exc
            raise

    def process_batch(self, records: DataFrame, batch_id: int) -> BatchReport:
        """Decode, apply the error policy, write to the sink (also usable on a batch
        DataFrame read from Kafka, e.g. to replay a range by hand)."""
        import pyspark.sql.functions as F
        from pyspark import StorageLevel

        started = time.monotonic()
        decoded = decode_envelopes(records).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            counts = {bool(r["ok"]): int(r["count"]) for r in decoded.groupBy(
                F.col("error").isNull().alias("ok")).count().collect()}
            good, bad = counts.get(True, 0), counts.get(False, 0)
            dead = self._malformed(decoded, bad) if bad else 0
            result = (self.sink.write(decoded.where(F.col("error").isNull()), batch_id)
                      if good else SinkResult())
        finally:
            decoded.unpersist()
        return BatchReport(self.name, batch_id, good + bad, bad, dead, result,
                           time.monotonic() - started)

    def _malformed(self, decoded: DataFrame, count: int) -> int:
        import pyspark.sql.functions as F

        bad = decoded.where(F.col("error").isNotNull())
        if self.config.error_handling_policy is ErrorPolicy.FAIL:
            raise_first(bad, count, self.name)
        topic = self.config.dead_letter_topic
        if topic is None:  # guarded by the config; kept for callers building configs by hand
            raise ConfigError(f"pipeline {self.name!r} has no dead_letter_topic")
        write_dead_letters(bad, topic, self.name, self._client_options())
        return count


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
