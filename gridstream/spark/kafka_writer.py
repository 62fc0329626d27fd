"""Exactly-once writes from Spark micro-batches to Kafka (``foreachBatch``).

Spark's own Kafka sink is at-least-once: a batch re-run after a crash is written again.
``KafkaExactlyOnceWriter`` is a ``foreachBatch`` function that writes each batch's rows
from the executors (``mapInArrow``, one producer per task) in Kafka transactions:

- task ``i`` of a batch writes its rows and a *commit marker* — key
  ``<query id>/<i>``, value: batch id, rows, digest — in ONE transaction, the marker to a
  compacted marker topic;
- its transactional id is ``<prefix>-<i>`` (prefix from the writer's name and the
  query's id, which lives in the checkpoint; never the attempt number), so any later
  producer of task ``i`` fences an earlier one and aborts what it left open;
- after ``init_transactions`` a task reads its marker ``read_committed``: a marker for
  this batch means an earlier run committed the task — it is skipped (after checking its
  rows are the same ones: count and digest), never written twice;
- on its first batch the driver initialises every task's id, aborting transactions left
  open by an earlier run before any task starts.

Assumption: a batch id always holds the same rows in the same Spark partitions (true
for Kafka sources, whose offsets for each batch are in the checkpoint, and
partition-preserving transforms). A re-run that differs is refused (``SparkError``),
never silently duplicated or dropped. The protocol and its crash cases:
``docs/protocol.md``.
"""

from __future__ import annotations

import hashlib
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
           "KafkaExactlyOnceWriter", "Marker", "check_transaction_timeout", "decide",
           "marker_partition", "transactional_id"]

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
_RESULT_SCHEMA = "task INT, records LONG, skipped BOOLEAN"
_COLUMNS = ("key", "value", "topic", "partition", "headers")


@dataclass(frozen=True)
class Marker:
    """What a committed task wrote: ``records`` rows with digest ``digest``."""

    query: str
    task: int
    batch: int
    tasks: int
    records: int
    digest: str

    def encode(self) -> bytes:
        return orjson.dumps({"query": self.query, "task": self.task, "batch": self.batch,
                             "tasks": self.tasks, "records": self.records,
                             "digest": self.digest, "ts": int(time.time() * 1000)})

    @classmethod
    def decode(cls, value: bytes) -> Marker:
        try:
            raw = orjson.loads(value)
            return cls(str(raw["query"]), int(raw["task"]), int(raw["batch"]),
                       int(raw["tasks"]), int(raw["records"]), str(raw["digest"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise SparkError("malformed commit marker in the marker topic") from exc


def marker_key(query_id: str, task: int) -> bytes:
    return f"{query_id}/{task}".encode()


def marker_partition(query_id: str, task: int, partitions: int) -> int:
    """Consecutive tasks of a query on consecutive partitions (no shared waits)."""
    return (zlib.crc32(query_id.encode()) + task) % max(partitions, 1)


def transactional_id(prefix: str, task: int) -> str:
    return f"{prefix}-{task}"


def decide(marker: Marker | None, batch_id: int, tasks: int) -> bool:
    """Whether the task must write (True) or was committed by an earlier run (False).
    A marker ahead of the batch is refused: the checkpoint was rolled back or replaced."""
    if marker is None or marker.batch < batch_id:
        return True
    if marker.batch > batch_id:
        raise SparkError(
            f"task {marker.task} of query {marker.query} committed batch {marker.batch}, "
            f"but Spark is running batch {batch_id}: the checkpoint was rolled back or "
            "copied; give the query a new checkpoint (a new query id) instead")
    if marker.tasks != tasks:
        raise SparkError(
            f"batch {batch_id} re-runs with {tasks} partitions, but committed with "
            f"{marker.tasks}: its input is not deterministic, so a re-run would write "
            "rows twice or lose them")
    return False


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
    """What one batch did: rows written, and rows of tasks an earlier run committed."""

    batch_id: int
    written: int
    skipped: int
    tasks: int
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
    tasks: int
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
        """Write one batch; skip the tasks an earlier run of this batch committed."""
        started = time.monotonic()
        query_id = self._query_id(df)
        rows = self._rows(df)
        tasks = rows.rdd.getNumPartitions()
        if self._prepared_for != query_id:
            self._prepare(df, query_id, tasks)
        plan = _Plan(self.properties, self.topic, self.marker_topic, self._partitions,
                     query_id, self._prefix(query_id), batch_id, tasks, self.timeout_s)
        try:
            done = rows.mapInArrow(lambda batches: _run_task(plan, iter(batches)),
                                   _RESULT_SCHEMA).collect()
        except GridstreamError:
            raise
        except Exception as exc:
            lines = str(exc).strip().splitlines()
            raise SparkError(f"exactly-once write of batch {batch_id} failed: "
                             f"{lines[0] if lines else type(exc).__name__}") from exc
        result = BatchResult(batch_id, sum(r.records for r in done if not r.skipped),
                             sum(r.records for r in done if r.skipped), tasks,
                             time.monotonic() - started)
        self.results.append(result)
        log.info("writer %s batch %d: %d rows written, %d skipped (committed earlier)",
                 self.name, batch_id, result.written, result.skipped)
        return result

    def _prefix(self, query_id: str) -> str:
        return f"gridstream-spark-{self.name}-{query_id}"

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

    def _prepare(self, df: DataFrame, query_id: str, tasks: int) -> None:
        """First batch: refuse speculation, check the timeout against the broker, create
        the marker topic, and fence every task id of an earlier run."""
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
        for task in range(tasks):
            _close(_new_producer(self.properties, transactional_id(prefix, task),
                                 self.timeout_s))
        self._prepared_for = query_id


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


def _drop_producer(txn_id: str) -> None:
    producer = _PRODUCERS.pop(txn_id, None)
    if producer is not None:
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


def _reader(plan: _Plan, task: int) -> _MarkerReader:
    partition = marker_partition(plan.query_id, task, plan.marker_partitions)
    key = (str(plan.properties.get_str("bootstrap.servers")), plan.marker_topic, partition)
    reader = _READERS.get(key)
    if reader is None:
        reader = _READERS[key] = _MarkerReader(plan.properties.client_config(),
                                               plan.marker_topic, partition)
    return reader


def _run_task(plan: _Plan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One Spark task: write its rows and marker in one transaction, or skip them."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise SparkError("the exactly-once writer must run inside a Spark task")
    task = context.partitionId()
    txn_id = transactional_id(plan.prefix, task)
    key = marker_key(plan.query_id, task)
    try:
        producer, marker = _begin(plan, task, txn_id, key)
        if not decide(marker, plan.batch_id, plan.tasks):
            producer.abort_transaction(plan.timeout_s)
            records, digest = _digest(batches)
            _verify(plan, task, marker, records, digest)
            skipped = True
        else:
            records, digest = _produce(producer, plan, batches)
            done = Marker(plan.query_id, task, plan.batch_id, plan.tasks, records, digest)
            _produce_marker(producer, plan, task, key, done.encode())
            producer.commit_transaction(plan.timeout_s)
            skipped = False
    except KafkaException as exc:
        _drop_producer(txn_id)
        raise kafka_error(f"task {task} of batch {plan.batch_id} failed", exc,
                          plan.properties.client_config()) from exc
    except BaseException:
        _drop_producer(txn_id)
        raise
    yield pa.RecordBatch.from_pylist([{"task": task, "records": records, "skipped": skipped}],
                                     schema=pa.schema([("task", pa.int32()),
                                                       ("records", pa.int64()),
                                                       ("skipped", pa.bool_())]))


def _begin(plan: _Plan, task: int, txn_id: str,
           key: bytes) -> tuple[Producer, Marker | None]:
    """A producer with an open transaction that nobody has fenced, and the task's last
    committed marker, read after this producer's id was last initialised."""
    for _ in range(3):
        producer = _PRODUCERS.get(txn_id)
        fresh = producer is None
        if producer is None:
            producer = _PRODUCERS[txn_id] = _new_producer(plan.properties, txn_id,
                                                         plan.timeout_s)
        marker = _reader(plan, task).get(key, plan.timeout_s)
        # a probe: registers the marker partition now, so a cached producer that another
        # worker fenced fails before a row is taken (an unchanged marker value)
        errors: list[Any] = []
        try:
            producer.begin_transaction()
            producer.produce(
                plan.marker_topic, marker.encode() if marker is not None else None, key,
                partition=marker_partition(plan.query_id, task, plan.marker_partitions))
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
            raise kafka_error(f"task {task}: the transaction could not start", errors[0],
                              plan.properties.client_config()) from errors[0]
    raise KafkaClientError(f"task {task}: fenced again and again (another writer of the "
                           "same transactional id is running)", code="_FENCED")


def _produce_marker(producer: Producer, plan: _Plan, task: int, key: bytes,
                    value: bytes) -> None:
    producer.produce(plan.marker_topic, value, key,
                     partition=marker_partition(plan.query_id, task, plan.marker_partitions))


def _columns(batch: pa.RecordBatch) -> dict[str, list[Any]]:
    return {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}


def _update(digest: Any, batch: pa.RecordBatch) -> None:
    """Feed a batch's rows to the digest: every column's lengths and bytes."""
    import pyarrow.compute as pc

    for i, name in enumerate(batch.schema.names):
        column = batch.column(i)
        digest.update(name.encode())
        if name in ("key", "value", "topic"):
            lengths = pc.fill_null(pc.binary_length(column), -1)
            digest.update(lengths.to_numpy(zero_copy_only=False).tobytes())
            digest.update(b"".join(v for v in column.to_pylist() if v is not None)
                          if name != "topic" else
                          "".join(v for v in column.to_pylist() if v is not None).encode())
        else:
            digest.update(orjson.dumps(column.to_pylist()))


def _digest(batches: Iterator[pa.RecordBatch]) -> tuple[int, str]:
    digest, records = hashlib.blake2b(digest_size=16), 0
    for batch in batches:
        records += batch.num_rows
        _update(digest, batch)
    return records, digest.hexdigest()


def _produce(producer: Producer, plan: _Plan,
             batches: Iterator[pa.RecordBatch]) -> tuple[int, str]:
    digest, records = hashlib.blake2b(digest_size=16), 0
    produce = producer.produce
    for batch in batches:
        records += batch.num_rows
        _update(digest, batch)
        cols = _columns(batch)
        values = cols["value"]
        keys = cols.get("key") or [None] * len(values)
        if len(cols) == 2 or (len(cols) == 1 and "value" in cols):
            topic = plan.topic
            if topic is None:
                raise SparkError("the batch has no 'topic' column and the writer no topic")
            for k, v in zip(keys, values, strict=True):
                try:
                    produce(topic, v, k)
                except BufferError:
                    _wait_and_produce(producer, topic, v, k)
            continue
        topics = cols.get("topic") or [plan.topic] * len(values)
        parts = cols.get("partition") or [None] * len(values)
        heads = cols.get("headers") or [None] * len(values)
        for k, v, t, p, h in zip(keys, values, topics, parts, heads, strict=True):
            kwargs: dict[str, Any] = {"partition": -1 if p is None else p}
            if h:
                kwargs["headers"] = [(e["key"], e["value"]) for e in h]
            _wait_and_produce(producer, t or plan.topic, v, k, **kwargs)
    return records, digest.hexdigest()


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


def _verify(plan: _Plan, task: int, marker: Marker | None, records: int, digest: str) -> None:
    if marker is not None and (marker.records, marker.digest) != (records, digest):
        raise SparkError(
            f"batch {plan.batch_id} task {task} re-runs with other rows ({records}) than it "
            f"committed ({marker.records}, other digest): the batch's input is not "
            "deterministic; refusing to write it twice or to lose rows")
