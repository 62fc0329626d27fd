"""The source connector's write mode: a partition's records produced as they are made.

In write mode the data source's ``read`` (on an executor) reads its part of the batch,
passes each record through filter, transforms and converter (``read.RecordMaker``) and
produces it at once with this worker's pooled producer — no Arrow rows, no second Python
pass, one Spark job per batch. It yields one ``report`` row per partition (counts by
status, the first error, samples of skipped records, events, changes skipped per cache),
which the connector's ``foreachBatch`` collects.

Exactly-once: a partition is a *slot* of the exactly-once writer, known by its origin
(the partition's plan: cache and positions, or snapshot rows — the same for every run of
the batch, since Spark keeps each batch's offsets): its records and a commit marker go
in one transaction of the slot's transactional id; a re-run finds the marker and writes
nothing. A partition holding a record the policy stops on (``STOP_TASK``) aborts its
transaction. At-least-once: an idempotent producer, flushed before the report.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from gridstream.errors import SparkError
from gridstream.kafka import KafkaProperties, TopicSpec, ensure_topics
from gridstream.kafka.config import shared_config
from gridstream.kafka.errors import kafka_error
from gridstream.spark import _producers
from gridstream.spark._kafka_slots import Marker, SlotPlan, SlotTxn, open_slot
from gridstream.spark._produce_rows import produce_waiting

__all__ = ["BATCH_PROPERTY", "PRODUCER_OPTION", "SINK_OPTION", "ProducingRows", "SinkSpec",
           "batch_plan", "origin", "plan_from"]

SINK_OPTION = "sink"
PRODUCER_OPTION = "kafka.secret.producer"  # noqa: S105 - an option name, not a password
"""The producer's configuration (Spark redacts options whose name says ``secret``)."""
BATCH_PROPERTY = "gridstream.source.batch"
"""The Spark local property through which the driver hands each batch's slot plan (no
secret in it) to the tasks."""
_SAMPLES = 10


@dataclass(frozen=True)
class SinkSpec:
    """Where write mode writes (the data source's ``sink`` option, JSON)."""

    exactly_once: bool
    writer: str
    marker_topic: str
    topic_partitions: int
    timeout_s: float
    wait_s: float

    def to_json(self) -> str:
        return orjson.dumps(self.__dict__).decode()

    @classmethod
    def from_json(cls, text: str) -> SinkSpec:
        return cls(**orjson.loads(text))


def batch_plan(plan: SlotPlan) -> str:
    """The driver's slot plan of a batch for the tasks (``BATCH_PROPERTY``; no secret)."""
    return orjson.dumps({"query": plan.query_id, "prefix": plan.prefix,
                         "batch": plan.batch_id, "markers": plan.marker_partitions,
                         "check": plan.check,
                         "committed": {str(slot): m.encode().decode()
                                       for slot, m in plan.committed.items()}}).decode()


def plan_from(text: str, properties: KafkaProperties, spec: SinkSpec) -> SlotPlan:
    """A task's slot plan: the driver's (``batch_plan``) with the producer's properties."""
    raw = orjson.loads(text)
    committed = {int(slot): Marker.decode(value.encode())
                 for slot, value in raw.get("committed", {}).items()}
    return SlotPlan(properties, None, spec.marker_topic, int(raw["markers"]),
                    str(raw["query"]), str(raw["prefix"]), int(raw["batch"]), {},
                    spec.timeout_s, spec.wait_s, committed, bool(raw["check"]))


def origin(payload: str) -> str:
    """A partition's origin: a digest of its plan (what it reads, from which positions)."""
    return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()


_LOCK = threading.Lock()
_TOPICS: set[tuple[str, str]] = set()


def _ensure_topic(properties: KafkaProperties, topic: str, partitions: int) -> None:
    """Create ``topic`` if missing (once per worker process and topic)."""
    bootstrap = str(properties.get_str("bootstrap.servers"))
    with _LOCK:
        if (bootstrap, topic) in _TOPICS:
            return
    config = properties.client_config()
    try:
        admin = AdminClient(shared_config(config))
    except KafkaException as exc:
        raise kafka_error("invalid kafka client configuration", exc, config) from exc
    ensure_topics(admin, [TopicSpec(topic, partitions)])
    with _LOCK:
        _TOPICS.add((bootstrap, topic))


class ProducingRows:
    """``read.Rows`` that produces records instead of keeping them (see the module
    docstring). ``plan`` is the batch's slot plan (exactly-once) or None."""

    def __init__(self, spec: SinkSpec, properties: KafkaProperties, plan: SlotPlan | None,
                 slot: int, content: str, dead_letter_topic: str | None) -> None:
        self.spec, self.properties, self.plan = spec, properties, plan
        self.slot, self.content = slot, content
        self.dead_letter_topic = dead_letter_topic
        self.counts: Counter[str] = Counter()
        self.gaps: Counter[str] = Counter()
        self.events: list[str] = []
        self.samples: list[tuple[str, str]] = []
        self.first_error: tuple[str, str, str] | None = None
        self.written = 0
        self.skipped_slot = False
        self._txn: SlotTxn | None = None
        self._producer: Producer | None = None
        self._topics: set[str] = set()
        """Topics known to exist (checked once per partition, created once per worker)."""

    def __len__(self) -> int:
        return 0  # nothing is kept: nothing to take

    def take(self) -> pa.RecordBatch:
        raise AssertionError("write mode keeps no rows")

    def add(self, topic: str | None, key: bytes | None, value: bytes | None,
            headers: Sequence[tuple[str, bytes]] | None, status: str, cache: str,
            where: str = "", reason: str | None = None) -> None:
        self.counts[status] += 1
        if status in ("ok", "dead"):
            if self.first_error is None and not self.skipped_slot:
                self._produce(topic, key, value, headers, status)
        elif status == "error":
            if self.first_error is None:
                self.first_error = (where, reason or "", cache)
        elif status == "skipped":
            if len(self.samples) < _SAMPLES:
                self.samples.append((where, reason or ""))
        elif status == "gap":
            self.gaps[cache] += 1
        elif status == "event" and reason is not None:
            self.events.append(reason)

    def _produce(self, topic: str | None, key: bytes | None, value: bytes | None,
                 headers: Sequence[tuple[str, bytes]] | None, status: str) -> None:
        producer = self._open()
        if producer is None:
            return
        if topic is None:  # the config refuses DEAD_LETTER without a topic
            raise SparkError("a record without a topic")
        if topic not in self._topics:
            _ensure_topic(self.properties, topic, self.spec.topic_partitions
                          if topic != self.dead_letter_topic else -1)
            self._topics.add(topic)
        heads: list[tuple[str, str | bytes | None]] | None = list(headers) if headers else None
        try:  # a transaction's commit fails if a record of it failed: no report needed
            produce_waiting(producer, topic, value, key, headers=heads)
        except KafkaException as exc:
            raise kafka_error(f"slot {self.slot}: cannot produce to {topic!r}", exc,
                              self.properties.client_config()) from exc
        self.written += 1

    def _open(self) -> Producer | None:
        if self._producer is not None:
            return self._producer
        if self.plan is None:
            try:
                self._producer = _producers.idempotent(self.properties)
                _producers.undelivered(self._producer)  # an earlier partition's are not ours
            except KafkaException as exc:
                raise kafka_error("invalid kafka producer configuration", exc,
                                  self.properties.client_config()) from exc
            return self._producer
        self._txn = open_slot(self.plan, self.slot, self.content)
        if self._txn is None:
            self.skipped_slot = True  # an earlier run committed this slot of the batch
            return None
        self._producer = self._txn.producer
        return self._producer

    def fail(self) -> None:
        """The partition failed before ``finish``: abort its transaction, if open, so
        ``read_committed`` readers are not held until the transaction times out."""
        if self._txn is not None:
            self._txn.fail()
            self._txn = None
        elif self._producer is not None:  # what it queued goes with it, not to the next
            _producers.discard(self._producer)
            self._producer = None

    def finish(self) -> dict[str, Any]:
        """End the slot (commit, abort on a stopping error, or flush) and report."""
        if self._txn is not None:
            if self.first_error is not None:
                self._txn.fail()
            else:
                self._txn.commit(self.written)
        elif self._producer is not None:
            self._flush(self._producer)
        return {"slot": self.slot, "counts": dict(self.counts), "gaps": dict(self.gaps),
                "events": self.events, "samples": self.samples, "error": self.first_error,
                "written": 0 if self.skipped_slot else self.written,
                "committed_earlier": self.skipped_slot}

    def _flush(self, producer: Producer) -> None:
        _producers.flush_delivered(producer, self.spec.timeout_s, f"slot {self.slot}",
                                   self.properties.client_config())
