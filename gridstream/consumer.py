"""Read decoded operations from Kafka: the consumer side of the mirror's protocol.

``OperationConsumer`` yields ``OperationRecord``s (the decoded envelope plus its Kafka
position), reads ``read_committed`` by default (only whole mirror transactions) and
commits offsets only when told to, after the application stored what it read. A record
that does not decode is an error (``fail``) or is skipped and counted (``skip``); it is
never dropped silently.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any

import orjson
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from gridstream.errors import (
    CodecError,
    ConfigError,
    EndpointError,
    GridstreamError,
    KafkaClientError,
)
from gridstream.kafka import KafkaProperties
from gridstream.kafka.errors import error_of, kafka_error
from gridstream.kafka.where import kafka_where
from gridstream.operations import EntityId, OpType, TypeDescriptor
from gridstream.protocol import Envelope, Headers, OperationDecoder
from gridstream.protocol.values import wire_default

__all__ = [
    "DecodeErrorPolicy",
    "OffsetOutOfRangeError",
    "OperationConsumer",
    "OperationRecord",
    "UndecodableRecordError",
    "main",
]

log = logging.getLogger(__name__)
_COMMIT_RETRY_S = 30.0
"""How long a synchronous commit is tried again while the broker answers retriably."""


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """One decoded operation and where it was read from."""

    envelope: Envelope
    topic: str
    partition: int
    offset: int
    key: bytes | None
    headers: Headers
    timestamp_ms: int

    @property
    def op(self) -> OpType:
        return self.envelope.op

    @property
    def type_name(self) -> str:
        return self.envelope.type

    @property
    def id(self) -> EntityId:
        return self.envelope.id

    @property
    def version(self) -> int:
        return self.envelope.version

    @property
    def data(self) -> Mapping[str, Any] | None:
        return self.envelope.data


class DecodeErrorPolicy(StrEnum):
    """``fail``: raise ``UndecodableRecordError``. ``skip``: count it, log it, go on."""

    FAIL = "fail"
    SKIP = "skip"


class UndecodableRecordError(CodecError):
    """A record is not a valid operation envelope; names its position."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int) -> None:
        super().__init__(f"{kafka_where(topic, partition, offset)}: {message}")
        self.topic = topic
        self.partition = partition
        self.offset = offset


class OffsetOutOfRangeError(KafkaClientError):
    """The group's committed position is no longer in the log (retention deleted the
    records after it was committed): records were lost to this group, and jumping
    over them could leave, e.g., a removed row alive. Names the partition and the
    position; ``on_offset_out_of_range="earliest"`` opts in to resetting."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int) -> None:
        super().__init__(f"{kafka_where(topic, partition, offset)}: {message}",
                         code="_AUTO_OFFSET_RESET", retriable=False)
        self.topic = topic
        self.partition = partition
        self.offset = offset


OUT_OF_RANGE_POLICIES = ("fail", "earliest", "latest")
CONSUMER_DEFAULTS: Mapping[str, str | int | bool] = {
    "enable.partition.eof": False,
}
_FETCH = 500


class OperationConsumer:
    """Iterate decoded operations of ``topics`` as consumer group ``group_id``.

    A partition without a committed position starts at its earliest record. A committed
    position that fell out of the log (retention) raises ``OffsetOutOfRangeError``
    under ``on_offset_out_of_range="fail"`` (the default); ``"earliest"`` or ``"latest"``
    opt in to jumping there (librdkafka's ``auto.offset.reset``, which then also places
    a new group).
    """

    def __init__(
        self, bootstrap_servers: str | None = None, *, topics: Sequence[str],
        group_id: str, consumer_properties: Mapping[str, Any] | None = None,
        types: Mapping[str, TypeDescriptor] | None = None,
        decoder: OperationDecoder | None = None,
        on_decode_error: DecodeErrorPolicy | str = DecodeErrorPolicy.FAIL,
        read_committed: bool = True,
        on_offset_out_of_range: str = "fail",
    ) -> None:
        if not topics:
            raise ConfigError("the consumer needs at least one topic")
        if on_offset_out_of_range not in OUT_OF_RANGE_POLICIES:
            raise ConfigError(f"on_offset_out_of_range must be one of {OUT_OF_RANGE_POLICIES}")
        if consumer_properties and "auto.offset.reset" in consumer_properties:
            raise ConfigError("set on_offset_out_of_range instead of auto.offset.reset "
                              "(the consumer fails on a lost position unless told otherwise)")
        explicit: dict[str, str | int | bool] = {
            "group.id": group_id, "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            "auto.offset.reset": ("error" if on_offset_out_of_range == "fail"
                                  else on_offset_out_of_range),
        }
        if bootstrap_servers:
            explicit["bootstrap.servers"] = bootstrap_servers
        self._props = KafkaProperties(consumer_properties).layered(CONSUMER_DEFAULTS, explicit)
        self.topics = list(topics)
        self.decoder = decoder or OperationDecoder(types)
        self.policy = DecodeErrorPolicy(on_decode_error)
        self.on_offset_out_of_range = on_offset_out_of_range
        self.skipped = 0
        self.tombstones = 0
        self.last_decode_error: str | None = None
        self._consumer: Consumer | None = None
        self._next: dict[tuple[str, int], int] = {}
        self._buffer: deque[Message] = deque()

    def __repr__(self) -> str:
        return f"OperationConsumer(topics={self.topics!r}, properties={self._props!r})"

    def open(self) -> OperationConsumer:
        """Connect and subscribe (called by ``with`` and on first use)."""
        if self._consumer is None:
            config = self._props.client_config()
            try:
                self._consumer = Consumer(config)
            except KafkaException as exc:
                raise kafka_error("invalid kafka consumer configuration", exc,
                                  config) from exc
            if self.on_offset_out_of_range == "fail":
                self._consumer.subscribe(self.topics, on_assign=self._on_assign,
                                         on_revoke=self._on_revoke)
            else:
                self._consumer.subscribe(self.topics, on_revoke=self._on_revoke)
        return self

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._buffer.clear()
        if consumer is not None:
            consumer.close()

    def __enter__(self) -> OperationConsumer:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Under ``fail`` librdkafka's reset policy is ``error``: a partition the group
        never committed is placed at its beginning here, so only a committed position
        that fell out of the log raises."""
        committed = consumer.committed(partitions, timeout=30)
        for tp in committed:
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
        strategy = self._props.get_str("partition.assignment.strategy", "") or ""
        if "cooperative" in strategy:
            consumer.incremental_assign(committed)
        else:
            consumer.assign(committed)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        for key in revoked:
            self._next.pop(key, None)
        self._buffer = deque(m for m in self._buffer
                             if (m.topic(), m.partition()) not in revoked)

    def _fill(self, wanted: int, timeout_s: float) -> None:
        """Fetch more messages when none is buffered."""
        if self._buffer:
            return
        consumer = self.open()._consumer
        assert consumer is not None
        try:
            self._buffer.extend(consumer.consume(max(wanted, 1), timeout=timeout_s))
        except KafkaException as exc:
            raise kafka_error("consume failed", exc) from exc

    def consume(self, max_records: int = 500, timeout_s: float = 1.0) -> list[OperationRecord]:
        """Up to ``max_records`` decoded operations (fewer if ``timeout_s`` passes).

        Under the ``fail`` decode policy an undecodable record ends the batch before it:
        the records decoded ahead of it are returned, and the next call raises
        ``UndecodableRecordError`` (again on every call: the record is never passed)."""
        self._fill(max_records, timeout_s)
        records: list[OperationRecord] = []
        while self._buffer and len(records) < max_records:
            try:
                record = self._take()
            except UndecodableRecordError:
                if records:
                    break
                raise
            if record is not None:
                records.append(record)
        return records

    def __iter__(self) -> Iterator[OperationRecord]:
        """Decoded operations, forever (stop by breaking out, then ``close()``). A
        record counts as returned (for ``commit()``) once it is yielded."""
        while True:
            self._fill(_FETCH, 1.0)
            while self._buffer:
                record = self._take()
                if record is not None:
                    yield record

    def _take(self) -> OperationRecord | None:
        """Decode the first buffered message; it leaves the buffer, and its position
        counts as returned, only if it decodes (or is skipped under ``skip``)."""
        msg = self._buffer[0]
        try:
            record = self._record(msg)
        except UndecodableRecordError:
            raise  # stays buffered: the next call meets it again
        except BaseException:
            self._buffer.popleft()
            raise
        self._buffer.popleft()
        if record is not None:
            self._next[(record.topic, record.partition)] = record.offset + 1
        return record

    def _record(self, msg: Message) -> OperationRecord | None:
        err = msg.error()
        if err is not None:
            self._client_error(err, msg)
            return None
        topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
        headers = _headers(msg.headers())
        value = msg.value()
        if value is None:
            self.tombstones += 1
            self._next[(topic, partition)] = offset + 1
            return None
        try:
            envelope = self.decoder.decode(value, headers)
        except CodecError as exc:
            self._undecodable(exc, topic, partition, offset)
            self._next[(topic, partition)] = offset + 1
            return None
        _, timestamp = msg.timestamp()
        return OperationRecord(envelope, topic, partition, offset, msg.key(), headers, timestamp)

    def _client_error(self, err: KafkaError, msg: Message) -> None:
        if err.code() == KafkaError._AUTO_OFFSET_RESET:
            raise OffsetOutOfRangeError(
                f"the committed position is no longer in the log ({err.str()}); records "
                "after it were deleted before this group read them. Rebuild what this "
                "group feeds, or reopen with on_offset_out_of_range='earliest' to accept "
                "the loss", topic=msg.topic() or "", partition=msg.partition() or 0,
                offset=msg.offset() or 0)
        if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                         KafkaError.TOPIC_AUTHORIZATION_FAILED):
            raise kafka_error("consumer error", err)
        log.warning("consumer: %s", err.str())

    def _undecodable(self, exc: CodecError, topic: str, partition: int,
                     offset: int) -> None:
        error = UndecodableRecordError(str(exc), topic=topic, partition=partition,
                                       offset=offset)
        if self.policy is DecodeErrorPolicy.FAIL:
            raise error from exc
        self.skipped += 1
        self.last_decode_error = str(error)
        log.warning("skipped undecodable record (%d so far): %s", self.skipped, error)

    def commit(self, records: Sequence[OperationRecord] | None = None, *,
               asynchronous: bool = False) -> None:
        """Commit positions: after each partition's last record in ``records``, or by
        default after the last record *returned* per partition — by ``consume()`` or
        iteration — with the tombstones and (under ``skip``) undecodable records passed
        on the way. Never a position past a record still buffered (fetched but not
        returned) or one that failed to decode."""
        consumer = self._consumer
        if consumer is None:
            raise EndpointError("the consumer is not open")
        if records is None:
            positions = dict(self._next)
        else:
            positions = {}
            for r in records:
                key = (r.topic, r.partition)
                positions[key] = max(positions.get(key, 0), r.offset + 1)
        if not positions:
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
        if asynchronous:
            try:
                consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:
                raise kafka_error("offset commit failed", exc) from exc
            return
        self._commit_sync(consumer, offsets)

    def _commit_sync(self, consumer: Consumer, offsets: list[TopicPartition]) -> None:
        """Commit, again while the broker answers with a retriable error (a group
        coordinator still loading, say) for up to ``_COMMIT_RETRY_S``: committing the
        same positions twice is harmless."""
        deadline = time.monotonic() + _COMMIT_RETRY_S
        while True:
            try:
                results = consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                if _retriable(error_of(exc)) and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise kafka_error("offset commit failed", exc) from exc
            failed = [tp for tp in results or () if tp.error is not None]
            if not failed:
                return
            if all(_retriable(tp.error) for tp in failed) and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            tp = failed[0]
            raise kafka_error(f"offset commit failed for {tp.topic}[{tp.partition}]", tp.error)


def _retriable(error: Any) -> bool:
    return isinstance(error, KafkaError) and bool(error.retriable())


def _headers(raw: Any) -> Headers:
    """Kafka headers as ``(name, bytes)`` pairs (a null header value becomes ``b""``)."""
    pairs = raw.items() if isinstance(raw, Mapping) else (raw or [])
    return tuple((k, v.encode() if isinstance(v, str) else (v or b"")) for k, v in pairs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gridstream consume",
                                     description="Print decoded operations as JSON lines.")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", action="append", required=True, help="repeatable")
    parser.add_argument("--group", default=None, help="consumer group (default: a new one)")
    parser.add_argument("--max", type=int, default=0, help="stop after N operations")
    parser.add_argument("--idle-timeout", type=float, default=0.0,
                        help="stop after this many seconds without records (0: never)")
    parser.add_argument("--skip-undecodable", action="store_true")
    parser.add_argument("--commit", action="store_true", help="commit offsets as it goes")
    parser.add_argument("--read-uncommitted", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``gridstream consume``: print each decoded operation as one JSON line."""
    args = _parser().parse_args(argv)
    group = args.group or f"gridstream-consume-{uuid.uuid4().hex[:8]}"
    consumer = OperationConsumer(
        args.bootstrap, topics=args.topic, group_id=group,
        on_decode_error="skip" if args.skip_undecodable else "fail",
        read_committed=not args.read_uncommitted)
    printed, idle = 0, 0.0
    try:
        with consumer:
            while not args.max or printed < args.max:
                # never take more than is printed: commit() covers every record taken
                wanted = min(500, args.max - printed) if args.max else 500
                records = consumer.consume(wanted, timeout_s=1.0)
                idle = 0.0 if records else idle + 1.0
                if args.idle_timeout and idle >= args.idle_timeout:
                    break
                for record in records:
                    sys.stdout.write(_json_line(record))
                    printed += 1
                sys.stdout.flush()
                if args.commit:
                    consumer.commit()
    except GridstreamError as exc:
        print(f"gridstream consume: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _json_line(record: OperationRecord) -> str:
    row = {"topic": record.topic, "partition": record.partition, "offset": record.offset,
           **record.envelope.to_wire()}
    return orjson.dumps(row, default=wire_default, option=orjson.OPT_NON_STR_KEYS
                        | orjson.OPT_APPEND_NEWLINE).decode()
