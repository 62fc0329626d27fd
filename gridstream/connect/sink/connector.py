"""The sink connector: Kafka topics → grid caches, a Spark streaming query.

Spark's Kafka source (``subscribe`` for ``topics``, ``subscribePattern`` for
``topics.regex``; ``read_committed``; offsets in the checkpoint) feeds ``foreachBatch``:

1. decode and apply: on Hazelcast, when ``tasks.max`` does not exceed the batch's input
   partitions, in one pass (``fused``: each of at most ``tasks.max`` tasks decodes its
   Kafka records and applies the valid ones, no shuffle); otherwise — more tasks than
   input partitions, or the Space, which the driver owns and applies to — the records
   are decoded on the executors (``mapInArrow``, ``decode``) and applied (``apply``: by
   ``tasks.max`` tasks after a shuffle by (cache, key), or by the driver) in one Spark
   job that also counts the records by status;
2. bad records by ``errorHandlingPolicy``: ``STOP_TASK`` — a bad record fails its task
   before anything of that task's records is applied, and the driver raises
   ``RecordError`` naming the batch's first bad record (``topic[partition]@offset``);
   with the shuffle nothing of the batch is applied, in one pass other tasks' records
   may be (applying them again changes nothing; the offsets are not committed);
   ``LOG_ONLY`` logs them (the first ones in full) and counts them; ``DEAD_LETTER``
   writes them to the dead-letter topic with their key, value and headers and
   ``gs.error.*`` headers (both decode the batch again, only when it had bad records);
3. a ``ConnectorReport`` (the runner adds the lag from the query's progress).

Spark commits a batch's offsets only after the function returns: a crash anywhere in it
runs the batch again from the same offsets, and applying it again changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gridstream.allowlist import allowed_modules
from gridstream.connect.base import Connector, ConnectorReport
from gridstream.connect.config import (
    GET_PAST,
    ErrorHandling,
    KeyPolicy,
    SinkConnectorConfig,
)
from gridstream.connect.converters import build_converter
from gridstream.connect.filters import load_filter
from gridstream.connect.sink.decode import (
    BAD,
    FILTERED,
    OK,
    SKIPPED,
    DecodeSpec,
    decode_batches,
    output_schema,
)
from gridstream.connect.sink.fused import COUNTS_SCHEMA, decode_and_apply
from gridstream.connect.sink.positions import GroupPositions
from gridstream.connect.transforms import build_chain
from gridstream.errors import ConfigError, ConnectorError, RecordError
from gridstream.grid.contract import GridAdapter
from gridstream.grid.settings import HazelcastGridSettings, grid_adapter
from gridstream.kafka import redact
from gridstream.kafka.where import kafka_where
from gridstream.spark.dead_letter import H_CONNECTOR, H_STAGE, write_dead_letters
from gridstream.spark.grid_apply import apply_on_driver, apply_tasks
from gridstream.spark.kafka_source import (
    check_consumer_properties,
    client_options,
    source_options,
)
from gridstream.spark.owner import claim_checkpoint, record_skips
from gridstream.spark.triggers import parse_trigger

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

    kind = "sink connector"

    def __init__(self, config: SinkConnectorConfig, *, bootstrap_servers: str,
                 kafka_properties: Mapping[str, Any] | None = None,
                 allowed_modules: Sequence[str] = (), space: Space | None = None) -> None:
        super().__init__(config.name)
        self.config = config
        self.bootstrap_servers = config.bootstrap_servers or bootstrap_servers
        self.kafka_properties: dict[str, Any] = {**(kafka_properties or {}), **config.kafka}
        check_consumer_properties(self.kafka_properties, f"connector {config.name!r}")
        self.positions = GroupPositions(config.name, self.bootstrap_servers,
                                        self.kafka_properties)
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
            with_headers=config.error_handling_policy is ErrorHandling.DEAD_LETTER,
            skip=config.skip_positions)
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

    def endpoints(self) -> tuple[list[str], list[str]]:
        """The places it reads and writes (the run's topology)."""
        c = self.config
        topics = list(c.topics) if c.topics is not None else [f"/{c.topics_regex}/"]
        return ([f"kafka:{t}" for t in topics],
                [f"{c.grid.kind}:{c.cache_prefix}{t}" for t in topics])

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
        claim_checkpoint(self.config.checkpoint, "sink connector", self.name)
        self.open()
        writer = (self.source(spark).writeStream.queryName(self.name)
                  .option("checkpointLocation", self.config.checkpoint)
                  .foreachBatch(self._handle)
                  .trigger(**parse_trigger(self.config.trigger)))
        return writer.start()

    def progressed(self, progress: Mapping[str, Any] | None) -> None:
        self.positions.progressed(progress)

    def close(self) -> None:
        try:
            self.positions.close()
        finally:
            adapter, self._adapter = self._adapter, None
            if adapter is not None:
                adapter.close()

    # ------------------------------------------------------------ one micro-batch

    def process_batch(self, records: DataFrame, batch_id: int) -> ConnectorReport:
        """Decode, apply the valid records, handle the bad ones by policy.

        One pass: the decode and the apply run in one Spark job, which also counts the
        records by status (an observation). The apply never starts before the whole
        batch is decoded (Hazelcast: the tasks read a shuffle of the decoded batch; the
        Space: the driver collects it first), so under ``STOP_TASK`` a decode task that
        meets a bad record fails the job before anything is applied; the batch is then
        decoded again to name the first bad record. Under ``LOG_ONLY`` and
        ``DEAD_LETTER`` a batch that had bad records is decoded again to log or
        dead-letter them."""
        import pyspark.sql.functions as F
        from pyspark.sql import Observation

        started = time.monotonic()
        stop = self.config.error_handling_policy is ErrorHandling.STOP_TASK
        if self._one_pass_possible():
            parts = records.rdd.getNumPartitions()
            if self.config.tasks_max <= parts:
                return self._one_pass(records, batch_id, parts, stop, started)
        seen = Observation()
        status = F.col("status")
        decoded = records.mapInArrow(decode_batches(self.spec, stop_on_bad=stop),
                                     output_schema(self.spec.with_headers)).observe(
            seen, F.count(F.lit(1)).alias("records"),
            F.count(F.when(status == OK, 1)).alias(OK),
            F.count(F.when(status == FILTERED, 1)).alias(FILTERED),
            F.count(F.when(status == BAD, 1)).alias(BAD),
            F.count(F.when(status == SKIPPED, 1)).alias(SKIPPED))
        try:
            keys = self._apply(decoded.where(status == OK))
        except Exception as exc:
            if stop:
                self._raise_first_bad(records, batch_id, exc)
            raise
        counts = {k: int(v) for k, v in seen.get.items()}
        return self._report(records, batch_id, counts, keys, started)

    def _one_pass_possible(self) -> bool:
        """Hazelcast, and every key's records in one Kafka partition: the key is the
        record's Kafka key (``keyPolicy`` key) and no transform re-keys or re-routes a
        record, nor do two topics feed one cache (no transforms: cache = prefix +
        topic). Otherwise writes of one key could race between tasks."""
        c = self.config
        return (isinstance(c.grid, HazelcastGridSettings) and c.key_policy is KeyPolicy.KEY
                and not c.transforms)

    def _one_pass(self, records: DataFrame, batch_id: int, parts: int, stop: bool,
                  started: float) -> ConnectorReport:
        """Hazelcast with ``tasks.max`` ≤ the input partitions: decode and apply in the
        same tasks (``fused``), at most ``tasks.max`` of them, no shuffle."""
        from gridstream.grid.hazelcast import HazelcastAdapter

        c = self.config
        adapter = grid_adapter(c.grid)
        assert isinstance(adapter, HazelcastAdapter)  # noqa: S101 - grid_adapter's rule
        source = records.coalesce(c.tasks_max) if parts > c.tasks_max else records
        try:
            rows = source.mapInArrow(decode_and_apply(
                self.spec, adapter.config, updates=c.shall_process_updates,
                stop_on_bad=stop), COUNTS_SCHEMA).collect()
        except Exception as exc:
            if stop:
                self._raise_first_bad(records, batch_id, exc, "nothing of the bad record's "
                                      "Kafka partition applied (other partitions' records "
                                      "may be, and are again at the restart)")
            raise
        counts = {k: sum(int(r[k]) for r in rows)
                  for k in ("records", OK, FILTERED, BAD, SKIPPED, "writes")}
        return self._report(records, batch_id, counts, counts["writes"], started)

    def _report(self, records: DataFrame, batch_id: int, counts: dict[str, int], keys: int,
                started: float) -> ConnectorReport:
        bad, passed = counts[BAD], counts[SKIPPED]
        note = self._bad(records, bad) if bad else ""
        if passed:
            note = _join(note, self._skipped(records, batch_id, passed))
        policy = self.config.error_handling_policy
        return ConnectorReport(
            self.name, batch_id, records=counts["records"], written=counts[OK],
            filtered=counts[FILTERED],
            skipped=(bad if policy is ErrorHandling.LOG_ONLY else 0) + passed,
            dead_lettered=bad if policy is ErrorHandling.DEAD_LETTER else 0,
            seconds=time.monotonic() - started,
            note=_join(note, f"{keys} key writes" if keys else ""))

    def _bad_rows(self, records: DataFrame) -> DataFrame:
        """The batch's bad records, decoded again (the decode is deterministic)."""
        import pyspark.sql.functions as F

        return records.mapInArrow(decode_batches(self.spec), output_schema(
            self.spec.with_headers)).where(F.col("status") == BAD)

    def _skipped(self, records: DataFrame, batch_id: int, count: int) -> str:
        """Log the batch's records ``skipRecords`` named (found by their position, not
        decoded again) and list them in the checkpoint's ``skipped.jsonl`` (a batch run
        again lists them again); a note."""
        import pyspark.sql.functions as F

        named = [(F.col("topic") == t) & (F.col("partition") == p) & (F.col("offset") == o)
                 for t, p, o in sorted(self.spec.skip)]
        condition = named[0]
        for more in named[1:]:
            condition = condition | more
        rows = records.where(condition).select("topic", "partition", "offset").collect()
        where = sorted(_where(r) for r in rows)
        for position in where:
            log.warning("%s: skipped %s: named by skipRecords", self.name, position)
        record_skips(self.config.checkpoint, self.name, batch_id, where)
        return f"{count} record(s) skipped by skipRecords: {', '.join(where)}"

    def _raise_first_bad(self, records: DataFrame, batch_id: int, failure: Exception,
                         applied: str = "nothing of the batch applied") -> None:
        """After a failed batch under STOP_TASK: ``RecordError`` for its first bad record
        if it has one (the failure was the decode's), else return."""
        bad = self._bad_rows(records)
        first = bad.orderBy("topic", "partition", "offset").select(
            "topic", "partition", "offset", "stage", "reason").first()
        if first is None:
            return
        count = int(bad.count())
        where = _where(first)
        raise RecordError(f"{first['reason']} ({count} bad record(s) in batch {batch_id}; "
                          f"errorHandlingPolicy STOP_TASK: {applied}, its "
                          f"offsets not committed; {GET_PAST}; or pass over this one "
                          f"record: skipRecords = [\"{where}\"])", where=where,
                          stage=first["stage"]) from failure

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

    def _bad(self, records: DataFrame, count: int) -> str:
        """Log (``LOG_ONLY``) or dead-letter (``DEAD_LETTER``) the batch's ``count`` bad
        records; a note for the report."""
        import pyspark.sql.functions as F

        bad = self._bad_rows(records)
        first = bad.orderBy("topic", "partition", "offset").limit(_LOGGED).select(
            "topic", "partition", "offset", "stage", "reason").collect()
        if not first:  # counted, then gone: the batch is not what it was
            raise ConnectorError(f"connector {self.name!r}: {count} bad record(s) counted "
                                 "but none found when the batch was decoded again")
        where = _where(first[0])
        if self.config.error_handling_policy is ErrorHandling.LOG_ONLY:
            for row in first:
                log.warning("%s: skipped %s: %s: %s", self.name, _where(row), row["stage"],
                            row["reason"])
            return f"{count} bad record(s) skipped, first at {where}: {first[0]['reason']}"
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


def _where(row: Any) -> str:
    return kafka_where(row["topic"], row["partition"], row["offset"])


def _allowed(configured: Sequence[str]) -> tuple[str, ...]:
    return allowed_modules(configured)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
