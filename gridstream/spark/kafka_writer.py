"""Exactly-once writes from Spark micro-batches to Kafka (``foreachBatch``).

Spark's own Kafka sink is at-least-once: a batch re-run after a crash is written again.
``KafkaExactlyOnceWriter`` is a ``foreachBatch`` function that writes each batch's rows
from the executors (``mapInArrow``, one producer per task) in Kafka transactions.

Spark does not keep a re-run batch's rows in the same partitions (its Kafka source
orders a batch's topic-partitions differently after a restart), so a task is known by
its *content*: a first, JVM-only pass counts each partition's rows and sums two hashes
of them; the non-empty partitions, ranked by (count, hashes), get *slots* 0..n-1 — the
same slots for the same rows in any run. Then slot ``s``:

- writes its rows and a *commit marker* — key ``<query id>/<s>``, value: batch id, slot
  count, rows, content hash — in ONE transaction, the marker to a compacted topic;
- uses the transactional id ``<prefix>-<s>`` (prefix from the writer's name and the
  query's id, which lives in the checkpoint; never the attempt number), so any later
  producer of the slot fences an earlier one and aborts what it left open;
- after ``init_transactions`` reads its marker ``read_committed``: a marker for this
  batch (same content) means an earlier run committed it: skipped, never written twice;
- on its first batch the driver initialises every slot's id, aborting transactions left
  open by an earlier run before any task starts.

Assumption: a batch id always holds the same rows (true for Kafka sources, whose
offsets for each batch are in the checkpoint). A re-run whose rows differ is refused
(``SparkError``), never silently duplicated or dropped. The protocol and its crash
cases: ``docs/protocol.md``.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._resource import ResourceType

from gridstream.errors import ConfigError, GridstreamError, KafkaClientError, SparkError
from gridstream.kafka import KafkaProperties, TopicSpec, ensure_topics
from gridstream.kafka.errors import error_of, kafka_error
from gridstream.spark.config import parse_trigger

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["DEFAULT_MARKER_TOPIC", "PRODUCER_DEFAULTS", "BatchResult",
           "KafkaExactlyOnceWriter", "Marker", "assign_slots", "check_transaction_timeout",
           "decide", "marker_partition", "transactional_id"]

log = logging.getLogger(__name__)

DEFAULT_MARKER_TOPIC = "__gridstream_spark_markers"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property Spark sets to the streaming query's id (stable in the checkpoint)."""
PRODUCER_DEFAULTS: Mapping[str, str | int | bool] = {
    "acks": "all", "enable.idempotence": True, "compression.type": "lz4",
    "linger.ms": 5, "partitioner": "murmur2_random",
}
"""Under the user's properties (murmur2: the partitions Java producers pick)."""
_FORBIDDEN = ("transactional.id", "enable.idempotence", "acks")
_RESULT_SCHEMA = "slot INT, records LONG, skipped BOOLEAN"
_COLUMNS = ("key", "value", "topic", "partition", "headers")
_H1, _H2 = "_gs_h1", "_gs_h2"


@dataclass(frozen=True)
class Marker:
    """What a committed slot wrote: batch ``batch`` had ``slots`` slots; this one
    ``records`` rows, whose count and hash sums are ``content``."""

    query: str
    slot: int
    batch: int
    slots: int
    records: int
    content: str

    def encode(self) -> bytes:
        return orjson.dumps({"query": self.query, "slot": self.slot, "batch": self.batch,
                             "slots": self.slots, "records": self.records,
                             "content": self.content, "ts": int(time.time() * 1000)})

    @classmethod
    def decode(cls, value: bytes) -> Marker:
        try:
            raw = orjson.loads(value)
            return cls(str(raw["query"]), int(raw["slot"]), int(raw["batch"]),
                       int(raw["slots"]), int(raw["records"]), str(raw["content"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise SparkError("malformed commit marker in the marker topic") from exc


def marker_key(query_id: str, slot: int) -> bytes:
    return f"{query_id}/{slot}".encode()


def marker_partition(query_id: str, slot: int, partitions: int) -> int:
    """Consecutive slots of a query on consecutive partitions (no shared waits)."""
    return (zlib.crc32(query_id.encode()) + slot) % max(partitions, 1)


def transactional_id(prefix: str, slot: int) -> str:
    return f"{prefix}-{slot}"


def decide(marker: Marker | None, batch_id: int, slots: int, records: int,
           content: str) -> bool:
    """Whether the slot must write (True) or was committed by an earlier run (False).
    A marker ahead of the batch, or of this batch with other rows, is refused."""
    if marker is None or marker.batch < batch_id:
        return True
    if marker.batch > batch_id:
        raise SparkError(
            f"slot {marker.slot} of query {marker.query} committed batch {marker.batch}, "
            f"but Spark is running batch {batch_id}: the checkpoint was rolled back or "
            "copied; give the query a new checkpoint (a new query id) instead")
    if (marker.slots, marker.records, marker.content) != (slots, records, content):
        raise SparkError(
            f"batch {batch_id} re-runs with other rows than it committed (slot "
            f"{marker.slot}: {records} rows in {slots} slots, committed {marker.records} "
            f"in {marker.slots}): its input is not deterministic; refusing to write rows "
            "twice or to lose them")
    return False


def assign_slots(stats: list[tuple[int, int, int, int]]) -> dict[int, tuple[int, str]]:
    """``(partition, rows, hash1, hash2)`` of each partition → ``{partition: (slot,
    content)}`` for the non-empty ones, slots ranked by content (ties: equal rows)."""
    ranked = sorted((rows, h1, h2, part) for part, rows, h1, h2 in stats if rows > 0)
    return {part: (slot, f"{rows}:{h1:x}:{h2:x}")
            for slot, (rows, h1, h2, part) in enumerate(ranked)}


def check_transaction_timeout(timeout_ms: int, trigger: str | None,
                              broker_max_ms: int | None = None) -> None:
    """``ConfigError`` unless ``timeout_ms`` exceeds twice the trigger interval and fits
    under the broker's ``transaction.max.timeout.ms``."""
    if timeout_ms <= 0:
        raise ConfigError("transaction.timeout.ms must be positive")
    if trigger is not None:
        try:
            parsed = parse_trigger(trigger)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        interval = parsed.get("processingTime")
        interval_ms = int(interval.split()[0]) if isinstance(interval, str) else 0
        if timeout_ms <= 2 * interval_ms:
            raise ConfigError(
                f"transaction.timeout.ms ({timeout_ms}) must exceed twice the trigger "
                f"interval ({interval_ms} ms): a task's transaction lasts up to one batch, "
                "and the broker aborts it after the timeout (the batch then fails)")
    if broker_max_ms is not None and timeout_ms > broker_max_ms:
        raise ConfigError(
            f"transaction.timeout.ms ({timeout_ms}) exceeds the broker's "
            f"transaction.max.timeout.ms ({broker_max_ms}); lower it or raise the broker's")


@dataclass(frozen=True)
class BatchResult:
    """What one batch did: rows written, and rows of slots an earlier run committed."""

    batch_id: int
    written: int
    skipped: int
    slots: int
    seconds: float


@dataclass(frozen=True)
class _Plan:
    """Everything a task needs (pickled to the executors; its repr hides secrets)."""

    properties: KafkaProperties = field(repr=False)
    topic: str | None
    marker_topic: str
    marker_partitions: int
    query_id: str
    prefix: str
    batch_id: int
    slots: Mapping[int, tuple[int, str]]
    timeout_s: float


class KafkaExactlyOnceWriter:
    """``df.writeStream.foreachBatch(KafkaExactlyOnceWriter(...))``: each batch's rows
    (``value``; optional ``key``, ``topic``, ``partition``, ``headers`` — the columns of
    Spark's Kafka sink) go to Kafka exactly once for ``read_committed`` consumers."""

    def __init__(self, bootstrap_servers: str, *, name: str, topic: str | None = None,
                 properties: Mapping[str, Any] | None = None,
                 marker_topic: str = DEFAULT_MARKER_TOPIC, marker_partitions: int = 8,
                 transaction_timeout_ms: int = 60_000, trigger: str | None = None,
                 query_id: str | None = None, timeout_s: float = 30.0) -> None:
        if not name or "/" in name:
            raise ConfigError("the writer needs a name without '/'")
        bad = sorted(set(_FORBIDDEN) & set(properties or {}))
        if bad:
            raise ConfigError(f"the exactly-once writer sets {', '.join(bad)} itself")
        check_transaction_timeout(transaction_timeout_ms, trigger)
        self.name, self.topic, self.query_id = name, topic, query_id
        self.marker_topic, self.marker_partitions = marker_topic, marker_partitions
        self.timeout_s = timeout_s
        self.transaction_timeout_ms = transaction_timeout_ms
        self.properties = KafkaProperties(properties).layered(
            PRODUCER_DEFAULTS, {"bootstrap.servers": bootstrap_servers,
                                "transaction.timeout.ms": transaction_timeout_ms})
        self._prepared_for: str | None = None
        self._partitions = 0
        self.results: list[BatchResult] = []

    def __repr__(self) -> str:
        return (f"KafkaExactlyOnceWriter(name={self.name!r}, topic={self.topic!r}, "
                f"properties={self.properties!r})")

    def __call__(self, df: DataFrame, batch_id: int) -> BatchResult:
        return self.write(df, batch_id)

    def write(self, df: DataFrame, batch_id: int) -> BatchResult:
        """Write one batch; skip the slots an earlier run of this batch committed."""
        started = time.monotonic()
        query_id = self._query_id(df)
        rows = _hashes(self._rows(df))
        slots = assign_slots(_content(rows))
        if self._prepared_for != query_id:
            self._prepare(df, query_id, len(slots))
        plan = _Plan(self.properties, self.topic, self.marker_topic, self._partitions,
                     query_id, self._prefix(query_id), batch_id, slots, self.timeout_s)
        try:
            done = rows.mapInArrow(lambda batches: _run_task(plan, iter(batches)),
                                   _RESULT_SCHEMA).collect()
        except GridstreamError:
            raise
        except Exception as exc:
            raise SparkError(f"exactly-once write of batch {batch_id} failed: "
                             f"{_task_error(exc)}") from exc
        result = BatchResult(batch_id, sum(r.records for r in done if not r.skipped),
                             sum(r.records for r in done if r.skipped), len(slots),
                             time.monotonic() - started)
        self.results.append(result)
        log.info("writer %s batch %d: %d rows written, %d skipped (committed earlier)",
                 self.name, batch_id, result.written, result.skipped)
        return result

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
                           for c in _COLUMNS if c in df.columns])

    def _prepare(self, df: DataFrame, query_id: str, slots: int) -> None:
        """First batch: refuse speculation, check the timeout against the broker, create
        the marker topic, and fence every slot's id of an earlier run."""
        speculation = df.sparkSession.sparkContext.getConf().get("spark.speculation", "false")
        if str(speculation).strip().lower() == "true":
            raise ConfigError("spark.speculation=true would run a task twice at once, each "
                              "fencing the other; disable it for exactly-once Kafka writes")
        config = self.properties.client_config()
        try:
            admin = AdminClient({k: v for k, v in config.items() if k not in (
                "transaction.timeout.ms", "acks", "enable.idempotence", "compression.type",
                "linger.ms", "partitioner")})
        except KafkaException as exc:
            raise kafka_error("invalid kafka client configuration", exc, config) from exc
        check_transaction_timeout(self.transaction_timeout_ms, None, _broker_max(admin))
        ensure_topics(admin, [TopicSpec(self.marker_topic, self.marker_partitions, -1, {
            "cleanup.policy": "compact", "segment.ms": "600000",
            "min.cleanable.dirty.ratio": "0.1"})], self.timeout_s)
        meta = admin.list_topics(self.marker_topic, timeout=self.timeout_s)
        self._partitions = len(meta.topics[self.marker_topic].partitions)
        prefix = self._prefix(query_id)
        for slot in range(max(slots, 1)):
            _close(_new_producer(self.properties, transactional_id(prefix, slot),
                                 self.timeout_s))
        self._prepared_for = query_id


def _task_error(exc: Exception) -> str:
    """For the message: the task's own error line (Spark wraps it in its traceback text),
    else the first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("gridstream.errors.")]
    return (ours or lines or [type(exc).__name__])[0]


def _broker_max(admin: AdminClient) -> int | None:
    """The broker's ``transaction.max.timeout.ms`` (None if it cannot be described)."""
    try:
        brokers = admin.list_topics(timeout=30).brokers
        resource = ConfigResource(ResourceType.BROKER, str(next(iter(brokers))))
        configs = admin.describe_configs([resource])[resource].result(30)
    except (KafkaException, StopIteration) as exc:
        log.warning("cannot read the broker's transaction.max.timeout.ms: %s",
                    type(exc).__name__)
        return None
    entry = configs.get("transaction.max.timeout.ms")
    return int(entry.value) if entry is not None and entry.value else None


def _hashes(rows: DataFrame) -> DataFrame:
    """``rows`` with two hashes of each row (order-free sums of them know a partition)."""
    import pyspark.sql.functions as F

    columns = [F.col(c) for c in rows.columns]
    return rows.select("*", F.xxhash64(*columns).alias(_H1), F.hash(*columns).alias(_H2))


def _content(hashed: DataFrame) -> list[tuple[int, int, int, int]]:
    """Each partition's rows and hash sums, in the JVM (one pass)."""
    import pyspark.sql.functions as F

    stats = (hashed.select(F.spark_partition_id().alias("p"), _H1, _H2).groupBy("p")
             .agg(F.count(F.lit(1)).alias("n"),
                  F.sum(F.col(_H1).cast("decimal(38,0)")).alias("h1"),
                  F.sum(F.col(_H2).cast("decimal(38,0)")).alias("h2")).collect())
    return [(int(r.p), int(r.n), int(r.h1), int(r.h2)) for r in stats]


# -- executor side ---------------------------------------------------------------------

_PRODUCERS: dict[str, Producer] = {}
"""Initialised producers of this Python worker by transactional id (workers are reused;
a producer another worker fenced since is found out before any row is taken)."""
_READERS: dict[tuple[str, str, int], _MarkerReader] = {}


def _new_producer(properties: KafkaProperties, txn_id: str, timeout_s: float) -> Producer:
    config = {**properties.client_config(), "transactional.id": txn_id}
    try:
        producer = Producer(config)
    except KafkaException as exc:
        raise kafka_error("invalid kafka producer configuration", exc, config) from exc
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            producer.init_transactions(timeout_s)
            return producer
        except KafkaException as exc:
            err = error_of(exc)
            if err is not None and err.name() == "INVALID_TRANSACTION_TIMEOUT":
                producer.close()
                raise ConfigError("the broker refuses transaction.timeout.ms (above its "
                                  "transaction.max.timeout.ms)") from exc
            if err is None or not err.retriable() or time.monotonic() > deadline:
                producer.close()
                raise kafka_error(f"cannot initialize transactions of {txn_id}", exc,
                                  config) from exc
            time.sleep(0.2)


def _close(producer: Producer) -> None:
    with warnings.catch_warnings():
        # a fenced or failed producer warns that it cannot abort on close
        warnings.simplefilter("ignore", RuntimeWarning)
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        producer.close()


def _drop_producer(txn_id: str, abort_s: float | None = None) -> None:
    """Forget (and close) the worker's producer of ``txn_id``; with ``abort_s``, abort
    its open transaction first if it can (else the next run's init aborts it)."""
    producer = _PRODUCERS.pop(txn_id, None)
    if producer is None:
        return
    if abort_s is not None:
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(abort_s)
    _close(producer)


class _MarkerReader:
    """Committed markers of one marker partition, read incrementally."""

    def __init__(self, config: Mapping[str, Any], topic: str, partition: int) -> None:
        base = {k: v for k, v in config.items() if k.startswith((
            "bootstrap.", "security.", "sasl.", "ssl.", "client.", "socket.", "broker."))}
        base.update({"group.id": "gridstream-spark-markers", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "enable.partition.eof": False})
        self.committed = Consumer({**base, "isolation.level": "read_committed"})
        self.ends = Consumer({**base, "isolation.level": "read_uncommitted"})
        self.tp = TopicPartition(topic, partition)
        self.next_offset: int | None = None
        self.values: dict[bytes, bytes] = {}

    def get(self, key: bytes, timeout_s: float) -> Marker | None:
        """The last committed marker under ``key``, reading to the partition's real end
        (an open transaction there is waited for, up to ``timeout_s``)."""
        low, high = self.ends.get_watermark_offsets(self.tp, timeout=timeout_s, cached=False)
        start = low if self.next_offset is None else max(self.next_offset, low)
        if start < high:
            self.committed.assign([TopicPartition(self.tp.topic, self.tp.partition, start)])
            deadline = time.monotonic() + timeout_s
            position = start
            while position < high:
                for msg in self.committed.consume(1000, timeout=0.2):
                    if msg.error() is not None:
                        raise KafkaException(msg.error())
                    k, v = msg.key(), msg.value()
                    if k is not None and v is not None:
                        self.values[k] = v
                    elif k is not None:  # a tombstone: no marker
                        self.values.pop(k, None)
                position = self.committed.position([self.tp])[0].offset
                if time.monotonic() > deadline:
                    raise SparkError(
                        f"cannot read marker partition {self.tp.partition} of "
                        f"{self.tp.topic!r} to its end ({position} of {high}) within "
                        f"{timeout_s:g}s: a transaction left open there by a crashed "
                        "writer of another query blocks it until its timeout")
        self.next_offset = max(high, start)
        value = self.values.get(key)
        return None if value is None else Marker.decode(value)


def _reader(plan: _Plan, slot: int) -> _MarkerReader:
    partition = marker_partition(plan.query_id, slot, plan.marker_partitions)
    key = (str(plan.properties.get_str("bootstrap.servers")), plan.marker_topic, partition)
    reader = _READERS.get(key)
    if reader is None:
        reader = _READERS[key] = _MarkerReader(plan.properties.client_config(),
                                               plan.marker_topic, partition)
    return reader


def _run_task(plan: _Plan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One Spark task: write its slot's rows and marker in one transaction, or skip them
    when an earlier run committed them."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise SparkError("the exactly-once writer must run inside a Spark task")
    found = plan.slots.get(context.partitionId())
    if found is None:  # empty when counted: must still be
        if any(batch.num_rows for batch in batches):
            raise SparkError(f"batch {plan.batch_id}: a partition counted empty has rows "
                             "now: the batch's input is not deterministic")
        return
    slot, content = found
    expected = int(content.split(":", 1)[0])
    txn_id = transactional_id(plan.prefix, slot)
    key = marker_key(plan.query_id, slot)
    try:
        producer, marker = _begin(plan, slot, txn_id, key)
        if not decide(marker, plan.batch_id, len(plan.slots), expected, content):
            producer.abort_transaction(plan.timeout_s)
            _check(plan, content, _sums(batches, None, plan))
            records, skipped = expected, True
        else:
            _check(plan, content, _sums(batches, producer, plan))
            done = Marker(plan.query_id, slot, plan.batch_id, len(plan.slots), expected,
                          content)
            producer.produce(plan.marker_topic, done.encode(), key, partition=marker_partition(
                plan.query_id, slot, plan.marker_partitions))
            producer.commit_transaction(plan.timeout_s)
            records, skipped = expected, False
    except KafkaException as exc:
        _drop_producer(txn_id, abort_s=plan.timeout_s)
        raise kafka_error(f"slot {slot} of batch {plan.batch_id} failed", exc,
                          plan.properties.client_config()) from exc
    except BaseException:
        _drop_producer(txn_id, abort_s=plan.timeout_s)
        raise
    yield pa.RecordBatch.from_pylist([{"slot": slot, "records": records, "skipped": skipped}],
                                     schema=pa.schema([("slot", pa.int32()),
                                                       ("records", pa.int64()),
                                                       ("skipped", pa.bool_())]))


def _begin(plan: _Plan, slot: int, txn_id: str,
           key: bytes) -> tuple[Producer, Marker | None]:
    """A producer with an open transaction that nobody has fenced, and the slot's last
    committed marker, read after this producer's id was last initialised."""
    for _ in range(3):
        producer = _PRODUCERS.get(txn_id)
        fresh = producer is None
        if producer is None:
            producer = _PRODUCERS[txn_id] = _new_producer(plan.properties, txn_id,
                                                         plan.timeout_s)
        marker = _reader(plan, slot).get(key, plan.timeout_s)
        # a probe: registers the marker partition now, so a cached producer that another
        # worker fenced fails before a row is taken (an unchanged marker value)
        errors: list[Any] = []
        try:
            producer.begin_transaction()
            producer.produce(
                plan.marker_topic, marker.encode() if marker is not None else None, key,
                partition=marker_partition(plan.query_id, slot, plan.marker_partitions))
            # a fenced producer raises here (_FENCED); no delivery callback, which
            # confluent-kafka would call with that exception pending
            if producer.flush(plan.timeout_s):
                errors.append(KafkaClientError("the probe was not delivered in time",
                                               code="_TIMED_OUT", retriable=True))
        except KafkaException as exc:
            errors.append(exc)
        if not errors:
            return producer, marker
        _drop_producer(txn_id)
        if fresh:
            if isinstance(errors[0], KafkaClientError):
                raise errors[0]
            raise kafka_error(f"slot {slot}: the transaction could not start", errors[0],
                              plan.properties.client_config()) from errors[0]
    raise KafkaClientError(f"slot {slot}: fenced again and again (another writer of the "
                           "same transactional id is running)", code="_FENCED")


def _check(plan: _Plan, content: str, found: str) -> None:
    if found != content:
        raise SparkError(f"batch {plan.batch_id}: a partition's rows changed between two "
                         f"passes over the batch ({content} → {found}): its input is not "
                         "deterministic; nothing of it was committed")


def _sums(batches: Iterator[pa.RecordBatch], producer: Producer | None, plan: _Plan) -> str:
    """The rows' count and hash sums; with ``producer``, every row is produced too (in
    its open transaction)."""
    records = h1 = h2 = 0
    for batch in batches:
        records += batch.num_rows
        names = batch.schema.names
        h1 += sum(batch.column(names.index(_H1)).to_pylist())
        h2 += sum(batch.column(names.index(_H2)).to_pylist())
        if producer is not None:
            _produce(producer, plan, {name: batch.column(i).to_pylist()
                                      for i, name in enumerate(names) if name in _COLUMNS})
    return f"{records}:{h1:x}:{h2:x}"


def _produce(producer: Producer, plan: _Plan, cols: dict[str, list[Any]]) -> None:
    values = cols["value"]
    keys = cols.get("key") or [None] * len(values)
    if set(cols) <= {"key", "value"}:
        topic = plan.topic
        if topic is None:
            raise SparkError("the batch has no 'topic' column and the writer no topic")
        produce = producer.produce
        for k, v in zip(keys, values, strict=True):
            try:
                produce(topic, v, k)
            except BufferError:
                _wait_and_produce(producer, topic, v, k)
        return
    topics = cols.get("topic") or [plan.topic] * len(values)
    parts = cols.get("partition") or [None] * len(values)
    heads = cols.get("headers") or [None] * len(values)
    for k, v, t, p, h in zip(keys, values, topics, parts, heads, strict=True):
        kwargs: dict[str, Any] = {"partition": -1 if p is None else p}
        if h:
            kwargs["headers"] = [(e["key"], e["value"]) for e in h]
        _wait_and_produce(producer, t or plan.topic, v, k, **kwargs)


def _wait_and_produce(producer: Producer, topic: str | None, value: Any, key: Any,
                      **kwargs: Any) -> None:
    if topic is None:
        raise SparkError("a row has no topic and the writer no default topic")
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)
