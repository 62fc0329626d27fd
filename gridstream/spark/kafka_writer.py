"""Exactly-once writes from Spark micro-batches to Kafka (``foreachBatch``).

Spark's own Kafka sink is at-least-once: a batch re-run after a crash is written again.
``KafkaExactlyOnceWriter`` is a ``foreachBatch`` function that writes each batch's rows
from the executors (``mapInArrow``; each task through its Python worker's producer of
the slot's transactional id, kept across batches: ``_producers``) in Kafka
transactions.

A batch that follows one this writer completed in the same run of the query (Spark
plans batch n + 1 only after committing batch n) cannot have been written before: it is
written in ONE pass, slot ``s`` = partition ``s``, and each task sums its rows' two
hashes while it produces them. Slot ``s``:

- writes its rows and a *commit marker* — key ``<query id>/<s>``, value: batch id, rows,
  *content* (row count and hash sums) — in ONE transaction, the marker to a compacted
  topic;
- uses the transactional id ``<prefix>-<s>`` (prefix from the writer's name and the
  query's id, which lives in the checkpoint; never the attempt number), so any later
  producer of the slot fences an earlier one and aborts what it left open;
- on a task retry, reads its marker ``read_committed``: a marker of this batch means the
  earlier attempt committed it (the rows are checked, nothing written).

Any other batch — the query's first in this writer, or one that may be a re-run after a
crash — may have been written in part. Before any task starts the driver initialises the
id of every slot an earlier run may have used (each partition index, and any slot a
marker names), aborting what an earlier run left open, and reads every marker of the
query from all partitions of the marker topic (a marker ahead of the batch is refused).
No marker of the batch: nothing of it was committed, and it is written in one pass as
above. Otherwise Spark does not keep a re-run batch's rows in the same partitions (its
Kafka source may order a batch's topic-partitions differently after a restart), so the
batch's partitions are known by their *content*: a JVM-only pass counts each
partition's rows and sums two hashes of them; the driver gives each partition whose
content a marker of the batch holds that marker's slot (its task skips it) and the
others the slots no marker holds (``match_slots``). Every task reads its marker again
before it writes.

With a ``Through`` (``gridstream.spark.kafka_through``) the batch is a Kafka source's rows
and each task runs a Python pass over them and writes what it gives: its content is
then the origin of its input (topic-partition, offsets, count) instead of hash sums,
and the ranking pass counts origins in the JVM; the protocol is the same.

Assumption: a batch id always holds the same rows (true for Kafka sources, whose
offsets for each batch are in the checkpoint). A re-run whose rows differ is refused
(``SparkError``), never silently duplicated or dropped. The protocol and its crash
cases: ``docs/protocol.md``.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from gridstream.errors import ConfigError, GridstreamError, SparkError
from gridstream.kafka import KafkaProperties, TopicSpec, ensure_topics
from gridstream.kafka.config import shared_config
from gridstream.kafka.errors import kafka_error
from gridstream.spark import _producers
from gridstream.spark._batch_content import content, hashes, reads_shuffle
from gridstream.spark._kafka_slots import (
    COLUMNS,
    RESULT_SCHEMA,
    Marker,
    SlotPlan,
    decide,
    marker_partition,
    match_slots,
    run_task,
    transactional_id,
)
from gridstream.spark._marker_scan import MarkerScan
from gridstream.spark._producers import close_producer, new_producer
from gridstream.spark._txn_timeout import broker_max, check_transaction_timeout
from gridstream.spark.kafka_through import Through, origin_contents

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["DEFAULT_MARKER_TOPIC", "PRODUCER_DEFAULTS", "BatchResult",
           "KafkaExactlyOnceWriter", "Marker", "check_transaction_timeout", "decide",
           "marker_partition", "match_slots", "transactional_id"]

log = logging.getLogger(__name__)

DEFAULT_MARKER_TOPIC = "__gridstream_spark_markers"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property Spark sets to the streaming query's id (stable in the checkpoint)."""
PRODUCER_DEFAULTS: Mapping[str, str | int | bool] = {
    "acks": "all", "enable.idempotence": True, "compression.type": "lz4",
    "linger.ms": 5, "partitioner": "murmur2_random",
}
"""Under the user's properties (murmur2: the partitions Java producers pick)."""
_FORBIDDEN = ("transactional.id", "enable.idempotence", "acks", "transaction.timeout.ms",
              "bootstrap.servers")
"""Set by the writer itself (the last two: its arguments); refused in ``properties``."""


@dataclass(frozen=True)
class BatchResult:
    """What one batch did: rows written, and rows of slots an earlier run committed."""

    batch_id: int
    written: int
    skipped: int
    slots: int
    seconds: float
    counting_s: float = 0.0
    """Of ``seconds``, the JVM pass that ranks the partitions into slots."""
    dropped: int = 0
    """Rows a fused pass's error policy left out (``errors="log"``)."""


class KafkaExactlyOnceWriter:
    """``df.writeStream.foreachBatch(KafkaExactlyOnceWriter(...))``: each batch's rows
    (``value``; optional ``key``, ``topic``, ``partition``, ``headers`` — the columns of
    Spark's Kafka sink) go to Kafka exactly once for ``read_committed`` consumers."""

    def __init__(self, bootstrap_servers: str, *, name: str, topic: str | None = None,
                 properties: Mapping[str, Any] | None = None,
                 marker_topic: str = DEFAULT_MARKER_TOPIC, marker_partitions: int = 8,
                 transaction_timeout_ms: int = 60_000, trigger: str | None = None,
                 query_id: str | None = None, timeout_s: float = 30.0,
                 cache_batch: bool = True, check_broker_timeout: bool = True) -> None:
        if not name or "/" in name:
            raise ConfigError("the writer needs a name without '/'")
        bad = sorted(set(_FORBIDDEN) & set(properties or {}))
        if bad:
            raise ConfigError(f"the exactly-once writer sets {', '.join(bad)} itself (give "
                              "bootstrap servers and the transaction timeout as arguments)")
        check_transaction_timeout(transaction_timeout_ms, trigger)
        self.name, self.topic, self.query_id = name, topic, query_id
        self.marker_topic, self.marker_partitions = marker_topic, marker_partitions
        self.timeout_s, self.cache_batch = timeout_s, cache_batch
        self.check_broker_timeout = check_broker_timeout
        self.transaction_timeout_ms = transaction_timeout_ms
        self.properties = KafkaProperties(properties).layered(
            PRODUCER_DEFAULTS, {"bootstrap.servers": bootstrap_servers,
                                "transaction.timeout.ms": transaction_timeout_ms})
        self._prepared_for: str | None = None
        self._partitions = 0
        self._scan: MarkerScan | None = None
        self._admin: AdminClient | None = None
        self._clean: tuple[str, str, int] | None = None
        """(query id, run id, batch id) of the last batch this writer completed, while no
        later call has failed: the next batch of that run needs no marker check."""
        self._running: tuple[str, str, int] | None = None
        self.results: deque[BatchResult] = deque(maxlen=1000)
        """The last batches' results (oldest first)."""

    def __repr__(self) -> str:
        return (f"KafkaExactlyOnceWriter(name={self.name!r}, topic={self.topic!r}, "
                f"properties={self.properties!r})")

    def __call__(self, df: DataFrame, batch_id: int) -> BatchResult:
        return self.write(df, batch_id)

    def write(self, df: DataFrame, batch_id: int, through: Through | None = None,
              ) -> BatchResult:
        """Write one batch; skip the slots an earlier run of this batch committed.
        ``through``: ``df`` is a Kafka source's rows, and each task runs this pass over
        them and writes what it gives (its rows known by their origin: one Python pass,
        not the pass's and then the writer's)."""
        started = time.monotonic()
        query_id = self._query_id(df)
        rows = hashes(self._rows(df)) if through is None else df
        if not self._checks(df, query_id, batch_id):
            # no earlier run can have written the batch: one pass, slot = partition
            # index, each task sums its content while it writes (for a later re-run)
            self.begin(df, query_id, batch_id, 0)
            return self._write(rows, query_id, batch_id, started, None, through=through)
        # an earlier run may have used any partition index as a slot (one-pass batches)
        # and left a zombie on it: fence them all, and any slot a marker of the query
        # names, before the markers are read
        count = max(rows.rdd.getNumPartitions(), 1)
        first = self._prepared_for != query_id
        self.begin(df, query_id, batch_id, count)
        if not first:
            self.fence(query_id, range(count))
        markers = self._committed(batch_id)
        beyond = set(markers) - set(range(count))
        if beyond:
            self.fence(query_id, sorted(beyond))
            markers = self._committed(batch_id)  # a fenced commit may have completed
        committed = _of_batch(markers, batch_id)
        if not committed:
            # no slot of the batch was committed when the markers were read (a commit
            # holds its marker): one pass, as above, but every task reads its slot's
            # marker after its own producer's init — a zombie of an earlier run may
            # still have started a producer and committed since (same rows: skipped;
            # other rows in the slot: refused, and the restarted query ranks the batch)
            return self._write(rows, query_id, batch_id, started, None, check=True,
                               through=through)
        # the ranking pass reads the rows again (a pass fused into the tasks: only their
        # origins, in the JVM)
        cache = self.cache_batch and through is None
        if cache:  # the ranking pass fills it, the write pass reads it
            from pyspark import StorageLevel

            rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            ranking = time.monotonic()
            stats = content(rows) if through is None else origin_contents(rows, through)
            counted = time.monotonic() - ranking
            slots = match_slots(stats, markers, batch_id)
            return self._write(rows, query_id, batch_id, started, slots, counted, committed,
                               through=through)
        finally:
            if cache:
                rows.unpersist()

    def _write(self, rows: DataFrame, query_id: str, batch_id: int, started: float,
               slots: dict[int, tuple[int, str]] | None, counted: float = 0.0,
               committed: Mapping[int, Marker] | None = None,
               check: bool = False, through: Through | None = None) -> BatchResult:
        """The write pass: ``slots`` from ``match_slots`` and ``committed`` (the batch's
        markers) for a batch an earlier run committed in part, or None (slot = partition
        index; each task reads its marker when ``check``, when it is a retry, or when the
        batch's plan reads a shuffle: see ``reads_shuffle``)."""
        partitioned = slots is None
        check = check or not partitioned or reads_shuffle(rows)
        plan = SlotPlan(self.properties, self.topic, self.marker_topic, self._partitions,
                        query_id, self._prefix(query_id), batch_id, slots or {},
                        self.timeout_s, self.wait_s(), committed or {}, check,
                        partitioned=partitioned)
        try:
            done = rows.mapInArrow(lambda batches: run_task(plan, iter(batches), through),
                                   RESULT_SCHEMA).collect()
        except GridstreamError:
            raise
        except Exception as exc:
            raise SparkError(f"exactly-once write of batch {batch_id} failed: "
                             f"{_task_error(exc)}") from exc
        self.completed(query_id, batch_id)
        result = BatchResult(batch_id, sum(r.records for r in done if not r.skipped),
                             sum(r.records for r in done if r.skipped), len(done),
                             time.monotonic() - started, counted,
                             sum(r.dropped for r in done))
        self.results.append(result)
        log.info("writer %s batch %d: %d rows written, %d skipped (committed earlier)",
                 self.name, batch_id, result.written, result.skipped)
        return result

    def _checks(self, df: DataFrame, query_id: str, batch_id: int) -> bool:
        """Whether an earlier run may have written the batch (see ``begin``)."""
        run = _run_id(df)
        return (self._prepared_for != query_id or run is None
                or self._clean != (query_id, run, batch_id - 1))

    def begin(self, df: DataFrame, query_id: str, batch_id: int, slots: int) -> bool:
        """Before a batch's tasks: prepare the query's first batch (``_prepare``) and say
        whether the tasks must read their markers (see ``SlotPlan.check``): unless this
        writer completed the batch before it in the same run of the query (Spark's run
        id: a restarted query, even in this process, is a new run), whose next batch
        no earlier run can have written."""
        check = self._checks(df, query_id, batch_id)
        if self._prepared_for != query_id:
            self._prepare(df, query_id, slots)
        run = _run_id(df)
        self._clean = None  # until this batch completes: a re-run of it checks
        self._running = (query_id, run, batch_id) if run is not None else None
        return check

    def completed(self, query_id: str, batch_id: int) -> None:
        """Every slot of the batch committed (or was found committed)."""
        running = self._running
        if running is not None and running[0] == query_id and running[2] == batch_id:
            self._clean = running

    def plan(self, df: DataFrame, batch_id: int) -> SlotPlan:
        """For inputs whose tasks know their slot by its origin (a partition of a source
        that plans the same partitions for a batch whatever run reads it): no ranking
        pass, no driver-side marker scan; each task opens its slot with ``open_slot``
        and the caller reports ``completed`` once every task succeeded."""
        query_id = self._query_id(df)
        # the query's first batch here fences every slot's id (an earlier run's open
        # transactions would otherwise hold back the marker reads until they time out)
        slots = df.rdd.getNumPartitions() if self._prepared_for != query_id else 1
        check = self.begin(df, query_id, batch_id, slots)
        committed = _of_batch(self._committed(batch_id), batch_id) if check else {}
        return SlotPlan(self.properties, self.topic, self.marker_topic, self._partitions,
                        query_id, self._prefix(query_id), batch_id, {}, self.timeout_s,
                        self.wait_s(), committed, check)

    def wait_s(self) -> float:
        """How long a marker partition's open transaction is waited for: until the broker
        has surely aborted it (the transaction timeout, and a margin)."""
        return self.transaction_timeout_ms / 1000 + max(self.timeout_s, 10.0)

    def _committed(self, batch_id: int) -> dict[int, Marker]:
        """Before any task runs: every marker of the query, from every partition of the
        marker topic (its partition count read again: tasks read theirs under it);
        refuses a query ahead of the batch; returns every slot's last marker."""
        assert self._admin is not None and self._scan is not None
        try:
            meta = self._admin.list_topics(self.marker_topic, timeout=self.timeout_s)
        except KafkaException as exc:
            raise kafka_error("cannot read the marker topic's metadata", exc) from exc
        self._partitions = len(meta.topics[self.marker_topic].partitions)
        try:
            markers = self._scan.markers(self._partitions, self.wait_s())
        except KafkaException as exc:
            raise kafka_error("cannot read the marker topic", exc) from exc
        for marker in sorted(markers.values(), key=lambda m: m.slot):
            if marker.batch > batch_id:
                decide(marker, batch_id, None, None, marker.content)  # refuses
        return markers

    def close(self) -> None:
        """Close the driver's Kafka clients (the writer reopens them if used again)."""
        if self._scan is not None:
            self._scan.close()
        self._scan = self._admin = None
        self._prepared_for = None

    def _prefix(self, query_id: str) -> str:
        return f"gridstream-spark-{self.name}-{query_id}"

    def transactional_id(self, query_id: str, slot: int) -> str:
        """The transactional id of slot ``slot`` of the query ``query_id``."""
        return transactional_id(self._prefix(query_id), slot)

    def _query_id(self, df: DataFrame) -> str:
        if self.query_id:
            return self.query_id
        found = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not found:
            raise ConfigError("no streaming query id: use the writer in foreachBatch of a "
                              "streaming query, or pass query_id")
        return str(found)

    def _rows(self, df: DataFrame) -> DataFrame:
        import pyspark.sql.functions as F

        if "value" not in df.columns:
            raise ConfigError("the batch has no 'value' column")
        if "topic" not in df.columns and self.topic is None:
            raise ConfigError("the batch has no 'topic' column and the writer no topic")
        casts = {"key": "binary", "value": "binary", "topic": "string", "partition": "int"}
        return df.select(*[F.col(c).cast(casts[c]).alias(c) if c in casts else F.col(c)
                           for c in COLUMNS if c in df.columns])

    def _prepare(self, df: DataFrame, query_id: str, slots: int) -> None:
        """First batch: refuse speculation, check the timeout against the broker, create
        the marker topic, and fence every slot's id of an earlier run."""
        speculation = df.sparkSession.sparkContext.getConf().get("spark.speculation", "false")
        if str(speculation).strip().lower() == "true":
            raise ConfigError("spark.speculation=true would run a task twice at once, each "
                              "fencing the other; disable it for exactly-once Kafka writes")
        config = self.properties.client_config()
        try:
            admin = AdminClient(shared_config(config))
        except KafkaException as exc:
            raise kafka_error("invalid kafka client configuration", exc, config) from exc
        if self.check_broker_timeout:
            check_transaction_timeout(self.transaction_timeout_ms, None,
                                      broker_max(admin, self.timeout_s))
        try:  # an existing marker topic is used with its own partition count
            existing = admin.list_topics(timeout=self.timeout_s).topics.get(self.marker_topic)
        except KafkaException as exc:
            raise kafka_error("cannot list topics", exc) from exc
        partitions = len(existing.partitions) if existing and existing.partitions else 0
        partitions = partitions or self.marker_partitions
        ensure_topics(admin, [TopicSpec(self.marker_topic, partitions, -1, {
            "cleanup.policy": "compact", "segment.ms": "600000",
            "min.cleanable.dirty.ratio": "0.1"})], self.timeout_s)
        meta = admin.list_topics(self.marker_topic, timeout=self.timeout_s)
        self._partitions = len(meta.topics[self.marker_topic].partitions)
        self.close()
        self._admin = admin
        self._scan = MarkerScan(config, self.marker_topic, query_id)
        self.fence(query_id, range(max(slots, 1)))
        self._prepared_for = query_id
        self._clean = None

    def fence(self, query_id: str, slots: Iterable[int]) -> None:
        """Initialise the transactional id of each slot: any earlier producer of it is
        fenced and the transaction it left open aborted (or its pending commit
        completed), before any task of this batch starts."""
        prefix = self._prefix(query_id)
        bootstrap = str(self.properties.get_str("bootstrap.servers"))
        for slot in slots:
            txn_id = transactional_id(prefix, slot)
            close_producer(new_producer(self.properties, txn_id, self.timeout_s))
            _producers.claim(bootstrap, txn_id)  # this machine's cached ones are fenced


RUN_ID_PROPERTY = "spark.jobGroup.id"
"""The local property Spark sets to the streaming query's run id (new at every start)."""


def _run_id(df: DataFrame) -> str | None:
    found = df.sparkSession.sparkContext.getLocalProperty(RUN_ID_PROPERTY)
    return str(found) if found else None


def _of_batch(markers: Mapping[int, Marker], batch_id: int) -> dict[int, Marker]:
    return {slot: m for slot, m in markers.items() if m.batch == batch_id}


def _task_error(exc: Exception) -> str:
    """For the message: the task's own error line (Spark wraps it in its traceback text:
    a gridstream error, else the last ``SomeError: …`` line of the Python traceback),
    else the first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("gridstream.errors.")]
    raised = [line for line in lines if _RAISED.match(line)]
    return (ours or raised[-1:] or lines or [type(exc).__name__])[0]


_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit): \S")
