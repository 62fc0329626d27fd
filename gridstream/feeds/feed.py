"""A store feed: Kafka topics → decode in the JVM → one store, checkpointed.

Each micro-batch (``foreachBatch``) is decoded in the JVM, malformed records are handled
by policy (fail or dead-letter, never dropped), and the valid operations go to the sink:
in one Spark action that also counts the batch when the sink allows it
(``BatchSink.single_pass``), else after caching and counting the batch. Offsets live in
the checkpoint and are committed by Spark only after the batch function returns, so a
crash at any point replays the batch, which every sink applies idempotently
(effectively-once).
"""

from __future__ import annotations

import re
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridstream.errors import ConfigError, SparkError
from gridstream.feeds.config import FeedConfig
from gridstream.kafka import redact
from gridstream.ops.counts import BatchCounts
from gridstream.spark.avro_envelopes import AvroPlanner, decode_avro_envelopes
from gridstream.spark.dead_letter import ErrorPolicy, raise_first, write_dead_letters
from gridstream.spark.envelope import MalformedEnvelopeError, decode_envelopes
from gridstream.spark.kafka_source import check_consumer_properties, client_options, source_options
from gridstream.spark.runnable import Runnable
from gridstream.spark.sinks import BatchSink, SinkResult, create_sink
from gridstream.spark.sinks.base import streaming_query_id
from gridstream.spark.triggers import parse_trigger
from gridstream.spark.types import TypeRegistry
from gridstream.spark.value_codecs import CODEC_ERROR, JSON_TEXT, Transcoder

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["BatchReport", "StoreFeed"]

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

    def counts(self) -> BatchCounts:
        """Applied operations are written; stale ones (the store holds newer) and those
        with nothing to write are filtered; malformed ones skipped or dead-lettered."""
        r = self.result
        return BatchCounts(self.records, r.applied, r.stale + r.skipped,
                           self.malformed - self.dead_lettered, self.dead_lettered,
                           self.seconds)


class StoreFeed(Runnable):
    """One ``[[feed]]``: build with a config, ``start`` it on a Spark session."""

    kind = "store feed"

    def __init__(self, config: FeedConfig, types: TypeRegistry | None = None, *,
                 sink: BatchSink | None = None, bootstrap_servers: str | None = None,
                 kafka_properties: Mapping[str, Any] | None = None) -> None:
        self.config = config
        self.types = types or TypeRegistry(
            unknown_types=config.unknown_types, default_id_property=config.default_id_property)
        self.sink = sink or create_sink(config.sink, self.types)
        self.bootstrap_servers = config.bootstrap_servers or bootstrap_servers or "127.0.0.1:9092"
        self.kafka_properties = {**(kafka_properties or {}), **config.kafka}
        check_consumer_properties(self.kafka_properties, f"feed {config.name!r}")
        self.transcoder = _transcoder(config)
        self.avro = _planner(config, self.types)
        self.reports: deque[BatchReport] = deque(maxlen=1000)
        self._headers_read = False
        self.failure: BaseException | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def _client_options(self) -> dict[str, str]:
        return client_options(self.bootstrap_servers, self.kafka_properties)

    def source_options(self) -> dict[str, str]:
        """The Kafka source's options (secrets included: never print them)."""
        c = self.config
        # Headers cost the source ~20 % of a batch and only malformed records need them:
        # those are read again with their headers (_with_headers).
        return source_options(
            self.bootstrap_servers, self.kafka_properties, topics=c.topics, pattern=c.pattern,
            starting_offsets=c.starting_offsets, isolation_level=c.isolation_level,
            fail_on_data_loss=c.fail_on_data_loss, include_headers=False,
            max_offsets_per_trigger=c.max_offsets_per_trigger, min_partitions=c.min_partitions)

    def close(self) -> None:
        """Close the sink (the runner calls this when the run ends)."""
        self.sink.close()

    def endpoints(self) -> tuple[list[str], list[str]]:
        """The places it reads and writes (the run's topology)."""
        c = self.config
        topics = [f"kafka:{t}" for t in c.topics] if c.topics is not None else [
            f"kafka:/{c.pattern}/"]
        return topics, [f"store:{self.sink.kind}"]

    def describe(self) -> str:
        """One line for the terminal (secrets redacted)."""
        c = self.config
        source = ",".join(c.topics) if c.topics is not None else f"/{c.pattern}/"
        props = redact(self.kafka_properties)
        extra = f" {props}" if props else ""
        loss = "" if c.fail_on_data_loss else ", failOnDataLoss=false: lost offsets are SKIPPED"
        codec = (f" [{self.transcoder.describe()}]" if self.transcoder is not None
                 else f" [{self.avro.describe()}]" if self.avro is not None else "")
        return (f"{c.name}: {source} @ {self.bootstrap_servers}{extra}{codec} → "
                f"{self.sink.describe()}"
                f"  [checkpoint {c.checkpoint}, trigger {c.trigger}, "
                f"errors {c.error_handling_policy.value}{loss}]")

    def source(self, spark: SparkSession) -> DataFrame:
        """The streaming DataFrame of the feed's Kafka records."""
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

    def process_batch(self, records: DataFrame, batch_id: int, *,
                      query_id: str | None = None) -> BatchReport:
        """Decode, apply the error policy, write to the sink (also usable on a batch
        DataFrame read from Kafka, e.g. to replay a range by hand).

        ``query_id`` names the run the batch belongs to; inside the streaming query it is
        the query's id (kept by the checkpoint). A batch applied by hand to the
        ``parquet`` sink needs one of its own: the change log's file names include it.
        """
        started = time.monotonic()
        query_id = query_id or streaming_query_id(records)
        if query_id is not None and not _QUERY_ID.fullmatch(query_id):
            raise ConfigError(f"feed {self.name!r}: query id {query_id!r} must be "
                              "1-64 letters, digits, '-' or '_'")
        self.sink.bind_query(query_id)
        self._headers_read = "headers" in records.columns
        for replans in range(_MAX_REPLANS + 1):
            decoded = self.decode(records)
            try:
                if self.sink.single_pass:
                    total, bad, dead, result = self._single_pass(decoded, batch_id)
                else:
                    total, bad, dead, result = self._cached(decoded, batch_id)
                break
            except Exception as exc:
                # a schema id the plan lacks stopped the batch: learn the batch's, re-run it
                if (self.avro is None or replans == _MAX_REPLANS
                        or not self.avro.relearn(records, exc)):
                    raise
        return BatchReport(self.name, batch_id, total, bad, dead, result,
                           time.monotonic() - started)

    def decode(self, records: DataFrame) -> DataFrame:
        """Kafka rows → ``decode_envelopes``' columns, whatever the feed's codec."""
        if self.avro is not None:
            return decode_avro_envelopes(records, self.avro.plan)
        if self.transcoder is None:
            return decode_envelopes(records)
        staged = self.transcoder.apply(records)
        return decode_envelopes(staged, codec=self.config.codec, text=JSON_TEXT,
                                codec_error=CODEC_ERROR)

    def _cached(self, decoded: DataFrame, batch_id: int) -> tuple[int, int, int, SinkResult]:
        """Cache the batch, count it, handle the malformed records, then write the rest."""
        import pyspark.sql.functions as F
        from pyspark import StorageLevel

        cached = decoded.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            good, bad = _count(cached)
            dead = self._malformed(cached, bad) if bad else 0
            result = (self.sink.write(cached.where(F.col("error").isNull()), batch_id)
                      if good else SinkResult())
        finally:
            cached.unpersist()
        return good + bad, bad, dead, result

    def _single_pass(self, decoded: DataFrame, batch_id: int) -> tuple[int, int, int, SinkResult]:
        """The sink's one action reads the batch once.

        Under ``fail`` a malformed record fails that action (nothing of the batch becomes
        visible: see ``BatchSink.single_pass``) and the batch is read again only to name
        the first bad record; when it succeeds, the sink's count is the batch's. Under
        ``dead_letter`` an observation counts the batch on the way, the valid records are
        written first, and the batch is read again only when it had malformed ones, to
        dead-letter them; the batch's offsets are committed after both, so a crash in
        between re-runs the batch (the sink replaces its own output, dead letters are
        at-least-once).
        """
        import pyspark.sql.functions as F
        from pyspark.sql import Observation

        if self.config.error_handling_policy is ErrorPolicy.FAIL:
            # No filter and no observation: every record is written, and reading a
            # malformed one's ``op`` fails the action. The sink counts what it wrote.
            try:
                result = self.sink.write(decoded.withColumn("op", _op_or_raise()), batch_id)
            except Exception as exc:
                self._raise_if_malformed(decoded, exc)
                raise
            return result.operations, 0, 0, result
        seen = Observation()
        observed = decoded.observe(seen, F.count(F.lit(1)).alias("records"),
                                   F.count(F.col("error")).alias("malformed"))
        # Spark never pushes a filter below an observation: it counts every record, and
        # the filter on ``error`` does not evaluate the decode twice (_malformed_rows).
        result = self.sink.write(observed.where(F.col("error").isNull()), batch_id)
        metrics = _observed(seen, _OBSERVATION_WAIT_S)
        if metrics is None:  # never seen in practice; counting again is always correct
            good, bad = _count(decoded)
            total = good + bad
        else:
            total, bad = int(metrics["records"]), int(metrics["malformed"])
        dead = self._malformed(decoded, bad) if bad else 0
        return total, bad, dead, result

    def _raise_if_malformed(self, decoded: DataFrame, failure: Exception) -> None:
        """After a failed write under ``fail``: raise ``MalformedEnvelopeError`` if the
        batch has malformed records (the failure was theirs), else return."""
        bad = _malformed_rows(decoded)
        count = int(bad.count())
        if count:
            try:
                raise_first(self._with_headers(bad, count), count, self.name)
            except MalformedEnvelopeError as malformed:
                raise malformed from failure

    def _malformed(self, decoded: DataFrame, count: int) -> int:
        bad = self._with_headers(_malformed_rows(decoded), count)
        if self.config.error_handling_policy is ErrorPolicy.FAIL:
            raise_first(bad, count, self.name)
        topic = self.config.dead_letter_topic
        if topic is None:  # guarded by the config; kept for callers building configs by hand
            raise ConfigError(f"feed {self.name!r} has no dead_letter_topic")
        write_dead_letters(bad, topic, self.name, self._client_options())
        return count

    def _with_headers(self, bad: DataFrame, count: int) -> DataFrame:
        """The malformed records read again from Kafka, this time with their headers.

        The stream reads no headers (they are the costliest part of the source), so the
        few malformed records are fetched again by offset: their dead letters carry their
        original headers, and the reason names a non-JSON ``gs.codec`` header when that is
        why the value does not decode. Only the offsets found malformed are kept; if any
        of them can no longer be read the batch fails (never a dead letter without its
        headers, never a silent skip).
        """
        if self._headers_read:
            return bad
        import json

        import pyspark.sql.functions as F

        keys = bad.select("topic", "kafka_partition", "offset")
        assign: dict[str, list[int]] = {}
        start: dict[str, dict[str, int]] = {}
        end: dict[str, dict[str, int]] = {}
        for row in keys.groupBy("topic", "kafka_partition").agg(
                F.min("offset").alias("lo"), F.max("offset").alias("hi")).collect():
            topic, partition = str(row["topic"]), int(row["kafka_partition"])
            assign.setdefault(topic, []).append(partition)
            start.setdefault(topic, {})[str(partition)] = int(row["lo"])
            end.setdefault(topic, {})[str(partition)] = int(row["hi"]) + 1
        options = {**self._client_options(), "kafka.isolation.level": self.config.isolation_level,
                   "assign": json.dumps(assign), "startingOffsets": json.dumps(start),
                   "endingOffsets": json.dumps(end), "includeHeaders": "true"}
        raw = bad.sparkSession.read.format("kafka").options(**options).load()
        again = self.decode(raw).join(keys, ["topic", "kafka_partition", "offset"],
                                           "left_semi")
        found = int(again.count())
        if found != count:
            raise SparkError(f"feed {self.name!r}: {count} malformed record(s), but only "
                             f"{found} could be read again with their headers")
        return again


def _transcoder(config: FeedConfig) -> Transcoder | None:
    """What turns MessagePack values into envelope JSON (None: not MessagePack)."""
    return Transcoder(config.codec) if config.codec == "msgpack" else None


def _planner(config: FeedConfig, types: TypeRegistry) -> AvroPlanner | None:
    """What plans the JVM's decoding of Avro values (None: not Avro)."""
    if config.codec != "avro":
        return None
    url = config.schema_registry_url
    user_info = config.basic_auth_user_info
    return AvroPlanner(
        schema_registry_url=url.get_secret_value() if url else None,
        basic_auth_user_info=user_info.get_secret_value() if user_info else None,
        avro_schema_dir=config.avro_schema_dir, types=types.declared)


_MAX_REPLANS = 10
"""Re-runs of one batch after ``NewSchemaError`` (each learns every new id of the batch:
one is enough unless the registry changes under it)."""


_QUERY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


_OBSERVATION_WAIT_S = 60.0
"""How long to wait for a finished action's observed counts before counting again."""


def _count(decoded: DataFrame) -> tuple[int, int]:
    """(valid, malformed) records of a decoded batch, in one job."""
    import pyspark.sql.functions as F

    counts = {bool(r["ok"]): int(r["count"]) for r in decoded.groupBy(
        F.col("error").isNull().alias("ok")).count().collect()}
    return counts.get(True, 0), counts.get(False, 0)


def _malformed_rows(decoded: DataFrame) -> DataFrame:
    """The malformed records of a decoded batch.

    The observation is a barrier: Spark pushes a filter on ``error`` through the decode's
    projections but never through ``observe``, and a pushed filter evaluates ``from_json``
    once per field the checks read (several times slower than decoding once).
    """
    import pyspark.sql.functions as F

    barrier = decoded.observe(f"gs_malformed_{uuid.uuid4().hex}", F.count(F.lit(1)))
    return barrier.where(F.col("error").isNotNull())


def _op_or_raise() -> Column:
    """The record's ``op`` (which every sink reads); reading a malformed record's fails
    the task that reads it. (SQL text: one Py4J call instead of some twenty.)"""
    import pyspark.sql.functions as F

    return F.expr(
        "CASE WHEN `error` IS NULL THEN `op` ELSE raise_error(format_string("
        "'malformed envelope at %s[%d]@%d: %s', `topic`, `kafka_partition`, `offset`, "
        "`error`)) END")


def _observed(seen: Observation, timeout_s: float) -> dict[str, Any] | None:
    """The metrics of an observation whose action has succeeded, or None if they have
    not arrived within ``timeout_s`` (they come through Spark's listener bus)."""
    future = seen._jo.future() if seen._jo is not None else None
    if future is None:
        return None
    deadline = time.monotonic() + timeout_s
    pause = 0.001
    while not future.isCompleted():
        if time.monotonic() > deadline:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return dict(seen.get)
