"""The exactly-once Kafka writer's executor side: commit markers, slots' producers,
and the task that writes (or skips) one slot (see ``kafka_writer``)."""

from __future__ import annotations

import contextlib
import itertools
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from gridstream.errors import SparkError
from gridstream.kafka import KafkaProperties
from gridstream.kafka.admin import watermark_offsets
from gridstream.kafka.config import shared_config
from gridstream.kafka.errors import kafka_error
from gridstream.spark import _producers, worker
from gridstream.spark._produce_rows import produce_batch, produce_waiting, total
from gridstream.spark._producers import close_producer, new_producer

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["COLUMNS", "H1", "H2", "RESULT_SCHEMA", "Hashed", "Marker", "Rows", "SlotPlan",
           "SlotTxn", "close_producer", "content_of", "decide", "marker_key",
           "marker_partition", "match_slots", "open_slot", "produce_waiting", "run_task",
           "transactional_id"]

COLUMNS = ("key", "value", "topic", "partition", "headers")
"""The columns of Spark's Kafka sink that a row may have."""
H1, H2 = "_gs_h1", "_gs_h2"
"""The two row hashes the driver adds (their sums are a partition's content)."""


@dataclass(frozen=True)
class Marker:
    """What a committed slot wrote: batch ``batch`` had ``slots`` slots (0: written in
    one pass, slot = partition, count unknown); this one ``records`` rows, whose count
    and hash sums (or, for a slot known by its origin, the origin) are ``content``."""

    query: str
    slot: int
    batch: int
    slots: int
    records: int
    content: str
    dropped: int = 0
    """Rows of its input a fused pass's error policy left out (``errors="log"``)."""

    def encode(self) -> bytes:
        return orjson.dumps({"query": self.query, "slot": self.slot, "batch": self.batch,
                             "slots": self.slots, "records": self.records,
                             "content": self.content, "dropped": self.dropped,
                             "ts": int(time.time() * 1000)})

    @classmethod
    def decode(cls, value: bytes) -> Marker:
        try:
            raw = orjson.loads(value)
            return cls(str(raw["query"]), int(raw["slot"]), int(raw["batch"]),
                       int(raw["slots"]), int(raw["records"]), str(raw["content"]),
                       int(raw.get("dropped", 0)))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise SparkError("malformed commit marker in the marker topic") from exc


def marker_key(query_id: str, slot: int) -> bytes:
    return f"{query_id}/{slot}".encode()


def marker_partition(query_id: str, slot: int, partitions: int) -> int:
    """Consecutive slots of a query on consecutive partitions (no shared waits)."""
    return (zlib.crc32(query_id.encode()) + slot) % max(partitions, 1)


def transactional_id(prefix: str, slot: int) -> str:
    return f"{prefix}-{slot}"


def decide(marker: Marker | None, batch_id: int, slots: int | None, records: int | None,
           content: str) -> bool:
    """Whether the slot must write (True) or was committed by an earlier run (False).
    A marker ahead of the batch, or of this batch with other rows, is refused
    (``slots`` and ``records`` None: a slot known by its origin, ``content``, alone)."""
    if marker is None or marker.batch < batch_id:
        return True
    if marker.batch > batch_id:
        raise SparkError(
            f"slot {marker.slot} of query {marker.query} committed batch {marker.batch}, "
            f"but Spark is running batch {batch_id}: the checkpoint was rolled back or "
            "copied; give the query a new checkpoint (a new query id) instead")
    if slots is None or records is None:
        if marker.content == content:
            return False
        raise SparkError(
            f"batch {batch_id} re-runs slot {marker.slot} with another origin or content "
            f"than it committed ({content} now, {marker.content} then): the batch's input is not "
            "deterministic; refusing to write rows twice or to lose them")
    if (marker.slots, marker.records, marker.content) != (slots, records, content):
        raise SparkError(
            f"batch {batch_id} re-runs with other rows than it committed (slot "
            f"{marker.slot}: {records} rows in {slots} slots, committed {marker.records} "
            f"in {marker.slots}): its input is not deterministic; refusing to write rows "
            "twice or to lose them")
    return False


def content_of(rows: int, h1: int, h2: int) -> str:
    """A partition's content: its row count and the sums of its rows' two hashes."""
    return f"{rows}:{h1:x}:{h2:x}"


def match_slots(stats: list[tuple[int, int, str]], markers: Mapping[int, Marker],
                batch_id: int) -> dict[int, tuple[int, str]]:
    """``(partition, rows, content)`` of each partition and the markers an earlier
    run committed for this batch (``{slot: marker}``) → ``{partition: (slot, content)}``
    for the non-empty partitions: a partition whose content a marker holds takes that
    marker's slot (its task finds it committed and skips); the others take, in the
    order of their contents, the slots no marker of the batch holds (so no committed
    marker is ever overwritten). ``SparkError`` when a marker's content is in no
    partition: the batch's rows are not those it committed, or are split into
    partitions differently (refused before any slot writes)."""
    ranked = sorted((content, part) for part, rows, content in stats if rows > 0)
    waiting: dict[str, list[int]] = {}
    for content, part in ranked:
        waiting.setdefault(content, []).append(part)
    slots: dict[int, tuple[int, str]] = {}
    for marker in sorted(markers.values(), key=lambda m: m.slot):
        if marker.batch != batch_id:
            continue
        parts = waiting.get(marker.content)
        if not parts:
            raise SparkError(
                f"batch {batch_id} was committed (in part or in whole) under another slot "
                f"layout than its re-run has (committed: slot {marker.slot}, "
                f"{marker.records} rows, content {marker.content}, found in no partition "
                f"of the {len(ranked)} now): its input is not deterministic, or its rows "
                "are split into partitions differently now (restore the first run's "
                "partitioning, e.g. the source's minPartitions); refused before any slot "
                "writes, to write no row twice")
        slots[parts.pop(0)] = (marker.slot, marker.content)
    held = {slot for slot, _ in slots.values()}
    free = (slot for slot in itertools.count() if slot not in held)
    for content, part in ranked:
        if part not in slots:
            slots[part] = (next(free), content)
    return slots


@dataclass(frozen=True)
class SlotPlan:
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
    wait_s: float
    """How long an open transaction on a marker partition is waited for."""
    committed: Mapping[int, Marker] = field(default_factory=dict)
    """The query's markers the driver read before the tasks started, by slot."""
    check: bool = True
    """Whether tasks read their slot's marker before writing. The driver leaves it off
    only for the batch right after one this writer completed in the same run: no
    earlier run can have written it (Spark plans a batch only after committing the one
    before). A task that is a retry checks whatever this says."""
    partitioned: bool = False
    """Slot = the task's partition index, content summed while the rows are written
    (``slots`` empty): the batch right after one this writer completed in the same run
    (``check`` on only when the batch's plan reads a shuffle, whose loss re-runs the
    stage with attempts from 0), or a batch of which the driver found no marker
    (``check`` on: a zombie of an earlier run may have committed its slot since); a
    re-run of the batch matches the markers by content (``match_slots``)."""


_READERS: dict[tuple[str, str, int], _MarkerReader] = {}


def _abort_and_discard(producer: Producer, abort_s: float) -> None:
    """Abort the producer's open transaction if it can (else the next run's init of the
    same transactional id aborts it), and drop it from the pool."""
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(abort_s)
    _producers.discard(producer)


def _is_retry() -> bool:
    """Whether this task is a retry. (A stage is re-submitted whole only when a shuffle
    it reads is lost; the writer's stages read none: a lost executor fails its tasks,
    which are retried with a higher attempt number.)"""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context is None or context.attemptNumber() > 0


@dataclass
class SlotTxn:
    """A slot's open transaction (``open_slot``): produce into ``producer``, then
    ``commit`` (the marker goes in last) or ``fail``."""

    plan: SlotPlan
    slot: int
    content: str
    producer: Producer

    @contextlib.contextmanager
    def failing(self) -> Iterator[None]:
        """Abort the transaction (and drop the producer) if the block raises; a Kafka
        error is raised as the client error it is, secrets scrubbed."""
        try:
            yield
        except KafkaException as exc:
            self.fail()
            raise kafka_error(f"slot {self.slot} of batch {self.plan.batch_id} failed", exc,
                              self.plan.properties.client_config()) from exc
        except BaseException:
            self.fail()
            raise

    def commit(self, records: int, slots: int | None = None, dropped: int = 0) -> None:
        plan = self.plan
        done = Marker(plan.query_id, self.slot, plan.batch_id,
                      len(plan.slots) if slots is None else slots, records, self.content,
                      dropped)
        with self.failing():
            # the marker partition joins the transaction only at its end (a reader of it
            # waits for the transaction's end); a fenced producer fails at the latest in
            # commit_transaction, before anything of it is committed
            produce_waiting(self.producer, plan.marker_topic, done.encode(),
                              marker_key(plan.query_id, self.slot),
                              partition=marker_partition(plan.query_id, self.slot,
                                                         plan.marker_partitions))
            self.producer.commit_transaction(plan.timeout_s)

    def fail(self) -> None:
        _abort_and_discard(self.producer, self.plan.timeout_s)


def open_slot(plan: SlotPlan, slot: int, content: str, *, slots: int | None = None,
              records: int | None = None, checked: bool = False) -> SlotTxn | None:
    """Slot ``slot``'s transaction begun with this worker's producer of its id, or None
    when an earlier run committed the slot (its marker: read when the plan or a task
    retry asks for it, unless the caller ``checked`` it; ``slots`` and ``records`` as
    ``decide`` takes them)."""
    txn_id = transactional_id(plan.prefix, slot)
    producer = _producers.transactional(
        plan.properties, txn_id, lambda: new_producer(plan.properties, txn_id, plan.timeout_s))
    try:
        if not checked and (plan.check or _is_retry()):
            key = marker_key(plan.query_id, slot)
            marker = _newest(plan.committed.get(slot), _reader(plan, slot).get(key, plan.wait_s))
            if not decide(marker, plan.batch_id, slots, records, content):
                return None
        producer.begin_transaction()
    except KafkaException as exc:
        _abort_and_discard(producer, plan.timeout_s)
        raise kafka_error(f"slot {slot} of batch {plan.batch_id} failed", exc,
                          plan.properties.client_config()) from exc
    return SlotTxn(plan, slot, content, producer)


class _MarkerReader:
    """Committed markers of one marker partition, read incrementally."""

    def __init__(self, config: Mapping[str, Any], topic: str, partition: int,
                 prefix: bytes = b"") -> None:
        base = shared_config(config)
        base.update({"group.id": "gridstream-spark-markers", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "enable.partition.eof": False})
        self.committed = Consumer({**base, "isolation.level": "read_committed"})
        self.ends = Consumer({**base, "isolation.level": "read_uncommitted"})
        self.tp = TopicPartition(topic, partition)
        self.next_offset: int | None = None
        self.prefix = prefix
        self.values: dict[bytes, bytes] = {}
        """The last committed value of each key (that starts with ``prefix``)."""

    def close(self) -> None:
        self.committed.close()
        self.ends.close()

    def get(self, key: bytes, wait_s: float) -> Marker | None:
        """The last committed marker under ``key``, reading to the partition's real end."""
        self.read(wait_s)
        value = self.values.get(key)
        return None if value is None else Marker.decode(value)

    def read(self, wait_s: float) -> None:
        """Read the partition's new committed records to its real end (an open
        transaction there is waited for, up to ``wait_s``: the transaction timeout and a
        margin, after which the broker has aborted it)."""
        timeout_s = min(wait_s, 30.0)
        low, high = watermark_offsets(self.ends, self.tp, timeout_s)
        start = low if self.next_offset is None else max(self.next_offset, low)
        if start < high:
            self.committed.assign([TopicPartition(self.tp.topic, self.tp.partition, start)])
            deadline = time.monotonic() + wait_s
            position = start
            while position < high:
                for msg in self.committed.consume(1000, timeout=0.2):
                    if msg.error() is not None:
                        raise KafkaException(msg.error())
                    k, v = msg.key(), msg.value()
                    if k is None or not k.startswith(self.prefix):
                        continue
                    if v is not None:
                        self.values[k] = v
                    else:  # a tombstone: no marker
                        self.values.pop(k, None)
                position = self.committed.position([self.tp])[0].offset
                if position < high and time.monotonic() > deadline:
                    raise SparkError(
                        f"cannot read marker partition {self.tp.partition} of "
                        f"{self.tp.topic!r} to its end within {wait_s:g}s: a transaction "
                        "there stayed open longer than this writer's transaction timeout "
                        "(a writer sharing the marker topic with a larger "
                        "transaction.timeout.ms?)")
        self.next_offset = max(high, start)


def _reader(plan: SlotPlan, slot: int) -> _MarkerReader:
    partition = marker_partition(plan.query_id, slot, plan.marker_partitions)
    key = (str(plan.properties.get_str("bootstrap.servers")), plan.marker_topic, partition)
    reader = _READERS.get(key)
    if reader is None:
        reader = _READERS[key] = _MarkerReader(plan.properties.client_config(),
                                               plan.marker_topic, partition)
    return reader


class Rows(Protocol):
    """How a task knows and writes its rows: ``content`` names them (a re-run must
    find the same), ``write`` produces them in the slot's open transaction."""

    def content(self, batches: Iterator[pa.RecordBatch]) -> str:
        """The rows' content; nothing written."""

    def write(self, batches: Iterator[pa.RecordBatch], producer: Producer,
              topic: str | None) -> tuple[str, int, int]:
        """Produce the rows (``topic`` for those that name none): their content, the
        records written and the rows left out (by a pass's error policy)."""


class Hashed:
    """The writer's own rows (``COLUMNS`` and the driver's two hashes): content = the
    row count and the hash sums; every row is written."""

    def content(self, batches: Iterator[pa.RecordBatch]) -> str:
        return _sums(batches, None, None)

    def write(self, batches: Iterator[pa.RecordBatch], producer: Producer,
              topic: str | None) -> tuple[str, int, int]:
        found = _sums(batches, producer, topic)
        return found, int(found.split(":", 1)[0]), 0


def run_task(plan: SlotPlan, batches: Iterator[pa.RecordBatch], rows: Rows | None = None,
             ) -> Iterator[pa.RecordBatch]:
    """One Spark task: write its slot's rows and marker in one transaction, or skip them
    when an earlier run committed them (``rows``: how they are known and written, the
    writer's own ``Hashed`` rows by default)."""
    from pyspark import TaskContext

    worker.prepare()
    rows = rows or Hashed()
    context = TaskContext.get()
    if context is None:
        raise SparkError("the exactly-once writer must run inside a Spark task")
    if plan.partitioned:
        yield from _run_partitioned(plan, context.partitionId(), batches, rows)
        return
    found = plan.slots.get(context.partitionId())
    if found is None:  # empty when counted: must still be
        if any(batch.num_rows for batch in batches):
            raise SparkError(f"batch {plan.batch_id}: a partition counted empty has rows "
                             "now: the batch's input is not deterministic")
        return
    slot, content = found
    txn = open_slot(plan, slot, content)
    if txn is None:  # an earlier run committed the slot: check its rows, write nothing
        _check(plan, content, rows.content(batches))
        yield _skipped(slot, _committed(plan, slot))
        return
    with txn.failing():
        found_content, records, dropped = rows.write(batches, txn.producer, plan.topic)
        _check(plan, content, found_content)
    txn.commit(records, dropped=dropped)
    yield _result(slot, records, False, dropped)


def _committed(plan: SlotPlan, slot: int) -> Marker | None:
    """The marker ``open_slot`` found the slot committed by (its reader's, or the
    driver's)."""
    key = marker_key(plan.query_id, slot)
    value = _reader(plan, slot).values.get(key) if plan.check or _is_retry() else None
    return _newest(plan.committed.get(slot), None if value is None else Marker.decode(value))


def _skipped(slot: int, marker: Marker | None) -> pa.RecordBatch:
    """A slot an earlier run committed: what its marker says it wrote and left out."""
    return _result(slot, 0 if marker is None else marker.records, True,
                   0 if marker is None else marker.dropped)


def _run_partitioned(plan: SlotPlan, slot: int, batches: Iterator[pa.RecordBatch],
                     rows: Rows | None = None) -> Iterator[pa.RecordBatch]:
    """A task of a ``partitioned`` plan: an empty partition writes nothing (no marker);
    a retry (its producer's init has fenced the earlier attempt) whose earlier attempt
    committed finds the marker and checks its rows."""
    rows = rows or Hashed()
    first = next((batch for batch in batches if batch.num_rows), None)
    if first is None:
        return
    given = itertools.chain([first], batches)
    # the producer first: its init fences an earlier attempt that may still live (and
    # completes or aborts its pending commit) before the marker is read
    txn = open_slot(plan, slot, "", checked=True)
    assert txn is not None  # unchecked: always opened
    if plan.check or _is_retry():  # check: the plan reads a shuffle (reads_shuffle)
        with txn.failing():
            marker = _reader(plan, slot).get(marker_key(plan.query_id, slot), plan.wait_s)
        if marker is not None and marker.batch >= plan.batch_id:
            txn.fail()  # nothing produced in it: the earlier attempt committed the slot
            decide(marker, plan.batch_id, None, None, rows.content(given))  # refuses any other
            yield _skipped(slot, marker)
            return
    with txn.failing():
        txn.content, records, dropped = rows.write(given, txn.producer, plan.topic)
    txn.commit(records, slots=0, dropped=dropped)
    yield _result(slot, records, False, dropped)


RESULT_SCHEMA = "slot INT, records LONG, skipped BOOLEAN, dropped LONG"
"""A task's one result row: its slot, the records it wrote (or found committed), whether
an earlier run had committed them, and the rows its pass's error policy left out."""


def _result(slot: int, records: int, skipped: bool, dropped: int = 0) -> pa.RecordBatch:
    import pyarrow as pa

    return pa.RecordBatch.from_pylist(
        [{"slot": slot, "records": records, "skipped": skipped, "dropped": dropped}],
        schema=pa.schema([("slot", pa.int32()), ("records", pa.int64()),
                          ("skipped", pa.bool_()), ("dropped", pa.int64())]))


def _newest(first: Marker | None, second: Marker | None) -> Marker | None:
    """Of two reads of a slot's marker, the one of the later batch."""
    if first is None or (second is not None and second.batch >= first.batch):
        return second
    return first


def _check(plan: SlotPlan, content: str, found: str) -> None:
    if found != content:
        raise SparkError(f"batch {plan.batch_id}: a partition's rows changed between two "
                         f"passes over the batch ({content} → {found}): its input is not "
                         "deterministic; nothing of it was committed")


def _sums(batches: Iterator[pa.RecordBatch], producer: Producer | None,
          topic: str | None) -> str:
    """The rows' count and hash sums; with ``producer``, every row is produced too (in
    its open transaction; ``topic`` for rows that name none)."""
    records = h1 = h2 = 0
    for batch in batches:
        records += batch.num_rows
        h1 += total(batch.column(H1))
        h2 += total(batch.column(H2))
        if producer is not None:
            produce_batch(producer, topic, batch)
    return content_of(records, h1, h2)
