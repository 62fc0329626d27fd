"""The Kafka sync endpoint: each mirror batch is one Kafka transaction.

The batch's records and the mirror's new position (a record keyed by the mirror's name
in a compacted offsets topic) commit together, and the transactional ids are stable per
mirror name, so a restarted mirror fences its zombie and resumes exactly where the last
committed transaction ended: read_committed consumers see every operation exactly once.
An at-least-once mode (idempotent producer, no transactions) is available too.

Consecutive transactions alternate between two transactional producers (ids ``<id>``
and ``<id>.1``; ``transactional_producers=1`` keeps one). Transactions still run one
at a time, in log order, each committed before the next begins; the alternation only
spares the next transaction the coordinator's refusal (``CONCURRENT_TRANSACTIONS``)
to register partitions while the previous commit's markers are still being written,
which librdkafka retries after a fixed 20 ms. Opening the endpoint initializes both
ids — fencing a zombie on either and completing or aborting whatever it left open —
before the position is read.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from gridstream.errors import CodecError, ConfigError, EndpointError, GridstreamError, RegistryError
from gridstream.kafka import KafkaProperties, TopicSpec, ensure_topics, topic_max_message_bytes
from gridstream.kafka.config import shared_config
from gridstream.kafka.errors import error_of, is_fatal, kafka_error
from gridstream.mirror._dead_letter import NEAR_LIMIT, DeadLetters, Outgoing, record_size
from gridstream.mirror._offsets import (
    committed_position,
    encode_position,
    partition_for,
    read_position,
)
from gridstream.mirror._producers import Producers
from gridstream.mirror.config import (
    PRODUCER_DEFAULTS,
    REGISTRY_OPTIONS,
    KafkaEndpointConfig,
    TopicSettings,
)
from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.mirror.policy import Reason
from gridstream.operations import Bulk, Operation, OpType, TypeDescriptor
from gridstream.protocol import (
    Codec,
    DefaultTopicResolver,
    Header,
    KafkaMessage,
    KeyCodec,
    MessageFactory,
    OperationEncoder,
    TopicResolver,
    create_codec,
)

__all__ = ["PRODUCER_DEFAULTS", "KafkaEndpointConfig", "KafkaSyncEndpoint", "TopicSettings",
           "committed_position"]

log = logging.getLogger(__name__)

_COMMIT_RETRIES = 5
_UNKNOWN_TYPE = "the type is not described in the log"
_NO_TOPIC = "no topic from the type, the document property or default_topic"
_ANY_OPERATION = Operation(OpType.WRITE, "", "", 0, None, 0, 0)


class KafkaSyncEndpoint(SyncEndpoint):
    """Delivers mirror batches to Kafka topics (see the module docstring).

    Topic per type: the type's ``topic``; else the document property ``topic_property``;
    else ``default_topic``; else undeliverable. Undeliverable operations (unknown type,
    no topic, unserializable, oversized) raise under ``fail`` or go to the dead-letter
    topic under ``dead_letter`` — never dropped. ``producer_properties`` pass through
    to librdkafka over ``PRODUCER_DEFAULTS``; the explicit options win. Every setting is
    an option of ``KafkaEndpointConfig``; the keyword arguments are code that replaces
    a part (a ``Codec`` or ``KeyCodec`` object, a ``MessageFactory``, a
    ``TopicResolver``).
    """

    name = "kafka"

    def __init__(self, config: KafkaEndpointConfig, *, codec: Codec | None = None,
                 key_codec: KeyCodec | None = None,
                 message_factory: MessageFactory | None = None,
                 topic_resolver: TopicResolver | None = None) -> None:
        if not isinstance(config, KafkaEndpointConfig):
            raise ConfigError("KafkaSyncEndpoint takes a KafkaEndpointConfig (not "
                              f"{type(config).__name__})")
        named = {"codec", *REGISTRY_OPTIONS} & config.model_fields_set
        if codec is not None and named:
            raise ConfigError(f"a Codec object replaces the config's {', '.join(sorted(named))}"
                              ": give one or the other")
        if key_codec is not None and "key_codec" in config.model_fields_set:
            raise ConfigError("a KeyCodec object replaces the config's key_codec: give one "
                              "or the other")
        self.config = config
        explicit: dict[str, str | int | bool] = {}
        if config.bootstrap_servers:
            explicit["bootstrap.servers"] = config.bootstrap_servers
        if config.transaction_timeout_ms is not None:
            explicit["transaction.timeout.ms"] = config.transaction_timeout_ms
        if config.transactional_id is not None:
            explicit["transactional.id"] = config.transactional_id
        self._props = KafkaProperties(config.producer_properties).layered(
            {**PRODUCER_DEFAULTS, "transaction.timeout.ms": 60_000}, explicit)
        if "bootstrap.servers" not in self._props:
            raise ConfigError("the kafka endpoint needs bootstrap servers")
        self.exactly_once = config.exactly_once
        self.transactional_producers = config.transactional_producers
        self._commit_time = config.record_timestamp == "commit"
        value_codec = codec if codec is not None else create_codec(
            config.codec, **(config.registry_options() if config.codec == "avro" else {}))
        self.encoder = OperationEncoder(value_codec, key_codec or config.key_codec,
                                        message_factory)
        self.resolver = topic_resolver or DefaultTopicResolver(
            topic_property=config.topic_property, default_topic=config.default_topic)
        self.policy = config.on_undeliverable
        self.offsets_topic = config.offsets_topic
        self.topics = config.topics
        self._max_record_bytes = config.max_record_bytes or int(
            self._props.get_str("message.max.bytes", "1000000") or 1_000_000)
        self.timeout_s = config.timeout_s
        self.open_transaction_wait_s = config.open_transaction_wait_s
        self.dead_lettered: Counter[str] = Counter()
        self.records_sent = 0
        self.mirror_name: str | None = None
        self._producers: Producers | None = None
        self._admin: AdminClient | None = None
        self._limits: dict[str, int] = {}
        self._needs_reset = False
        self._offsets_partition = 0
        self._delivery_errors: list[KafkaError] = []
        self._log_id: str | None = None

    def __repr__(self) -> str:
        return (f"KafkaSyncEndpoint(mirror={self.mirror_name!r}, exactly_once={self.exactly_once},"
                f" properties={self._props!r})")

    # lifecycle -------------------------------------------------------------------------

    @property
    def dead_letter_topic(self) -> str:
        return self.config.dead_letter_topic or f"gridstream-mirror-{self.mirror_name}-dlq"

    @property
    def transactional_id(self) -> str:
        """Stable per mirror, so that a restarted mirror fences its zombie."""
        explicit = self._props.get_str("transactional.id")
        return explicit or f"gridstream-mirror-{self.mirror_name}"

    @property
    def transactional_ids(self) -> tuple[str, ...]:
        """The ids of the producers that take turns: ``transactional_id`` first."""
        base = self.transactional_id
        return (base, f"{base}.1")[:self.transactional_producers]

    def _shared_config(self) -> dict[str, Any]:
        return shared_config(self._props.client_config())

    def open(self, mirror_name: str) -> None:
        self.mirror_name = mirror_name
        try:
            self._admin = AdminClient(self._shared_config())
        except KafkaException as exc:
            raise kafka_error("invalid kafka client configuration", exc,
                              self._props.client_config()) from exc
        if self.exactly_once:
            self._ensure([TopicSpec(self.offsets_topic, 1, self.topics.replication_factor,
                                    {"cleanup.policy": "compact", "segment.ms": "600000",
                                     "min.cleanable.dirty.ratio": "0.1"})], force=True)
            self._offsets_partition = self._position_partition(mirror_name)
        self._open_producers()

    def _open_producers(self) -> None:
        ids = self.transactional_ids if self.exactly_once else ()
        self._producers = Producers(self._props.client_config(), ids, self.timeout_s)
        self._producers.open()

    def _position_partition(self, mirror_name: str) -> int:
        """The offsets-topic partition holding this mirror's position."""
        admin = self._admin
        if admin is None:
            raise EndpointError("the kafka endpoint is not open")
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                topic = admin.list_topics(self.offsets_topic, timeout=self.timeout_s)
            except KafkaException as exc:
                raise kafka_error(f"cannot describe {self.offsets_topic!r}", exc) from exc
            metadata = topic.topics.get(self.offsets_topic)
            if metadata is not None and metadata.error is None and metadata.partitions:
                return partition_for(mirror_name, len(metadata.partitions))
            if time.monotonic() > deadline:
                raise EndpointError(f"offsets topic {self.offsets_topic!r} is not available")
            time.sleep(0.2)

    def bind_log(self, log_id: str | None) -> None:
        self._log_id = log_id

    def position(self) -> int | None:
        if not self.exactly_once:
            return None
        self._reset_if_needed()
        return read_position(self._shared_config(), self.offsets_topic, self._name(),
                             self.timeout_s, expected_log=self._log_id,
                             open_transaction_wait_s=self.open_transaction_wait_s)

    def close(self) -> None:
        producers, self._producers = self._producers, None
        try:
            if producers is not None:
                producers.close(purge=self._needs_reset)
        finally:
            self._admin = None

    def _name(self) -> str:
        if self.mirror_name is None:
            raise EndpointError("the kafka endpoint is not open")
        return self.mirror_name

    def _require_producer(self) -> Producer:
        if self._producers is None:
            raise EndpointError("the kafka endpoint is not open")
        return self._producers.require()

    def _reset_if_needed(self) -> None:
        """Replace the producers when a transaction's state is unknown;
        ``init_transactions`` on the new ones completes or aborts whatever the old ones
        left open."""
        if not self._needs_reset:
            return
        if self._producers is not None:
            self._producers.close(purge=True)
        self._open_producers()
        self._needs_reset = False

    # topics ----------------------------------------------------------------------------

    def _ensure(self, specs: Iterable[TopicSpec], force: bool = False) -> None:
        admin = self._admin
        if admin is None:
            raise EndpointError("the kafka endpoint is not open")
        specs = [s for s in specs if s.name not in self._limits]
        if not specs:
            return
        if self.topics.create or force:
            ensure_topics(admin, specs, self.timeout_s)
        for spec in specs:
            limit = topic_max_message_bytes(admin, spec.name, self.timeout_s)
            self._limits[spec.name] = min(limit or self._max_record_bytes, self._max_record_bytes)

    def _topic_spec(self, topic: str) -> TopicSpec:
        return TopicSpec(topic, self.topics.partitions, self.topics.replication_factor,
                         dict(self.topics.config))

    def _limit(self, topic: str) -> int:
        limit = self._limits.get(topic)
        if limit is None:
            self._ensure([self._topic_spec(topic)])
            limit = self._limits[topic]
        return limit

    # delivery --------------------------------------------------------------------------

    def write_batch(self, bulks: Sequence[Bulk], types: Mapping[str, TypeDescriptor]) -> None:
        if not bulks:
            return
        self._reset_if_needed()
        producer = self._require_producer()
        letters = DeadLetters(self.encoder, self.policy, self._name())
        self._delivery_errors = []
        try:
            if self.exactly_once:
                dead = self._transaction(producer, bulks, types, letters)
            else:
                dead = self._at_least_once(producer, bulks, types, letters)
        except RegistryError as exc:  # the registry's fault, not the records': retried
            raise EndpointError(f"mirror {self.mirror_name}: {exc}; the batch will be "
                                "retried") from exc
        self.records_sent += sum(len(bulk.operations) for bulk in bulks) - len(dead)
        self.dead_lettered.update(reason for reason, _ in dead)

    def _records(self, bulks: Sequence[Bulk], types: Mapping[str, TypeDescriptor],
                 letters: DeadLetters) -> Iterator[Outgoing]:
        """The batch's records, one at a time (each may be produced before the next is
        encoded); rejects go to ``letters``, which raises at once under ``fail``."""
        fast = self.encoder.default_path()
        if fast is None:
            yield from self._general_records(bulks, types, letters)
            return
        encode = fast.encode
        resolve = self.resolver.resolve
        fixed_topics = type(self.resolver) is DefaultTopicResolver
        limits = self._limits
        commit_time = self._commit_time
        # per type name: (descriptor, topic when it does not depend on the operation)
        plans: dict[str, tuple[TypeDescriptor | None, str | None]] = {}
        for bulk in bulks:
            for op in bulk.operations:
                plan = plans.get(op.type_name)
                if plan is None:
                    plan = plans[op.type_name] = self._plan(op.type_name, types, fixed_topics)
                descriptor, topic = plan
                if descriptor is None:
                    letters.reject(Reason.UNKNOWN_TYPE, op, None, _UNKNOWN_TYPE, None)
                    continue
                if topic is None:
                    topic = resolve(op, descriptor)
                    if topic is None:
                        letters.reject(Reason.NO_TOPIC, op, descriptor, _NO_TOPIC, None)
                        continue
                try:
                    key, value, headers = encode(op)
                except CodecError as exc:
                    letters.reject(Reason.UNSERIALIZABLE, op, descriptor, str(exc), topic)
                    continue
                limit = limits.get(topic)
                if limit is None:
                    limit = self._limit(topic)
                if len(key) + len(value) + NEAR_LIMIT > limit and letters.oversized(
                        op, descriptor, topic, record_size(key, value, headers), limit):
                    continue
                yield topic, value, key, op.timestamp_ms if commit_time else 0, headers

    def _plan(self, type_name: str, types: Mapping[str, TypeDescriptor],
              fixed_topics: bool) -> tuple[TypeDescriptor | None, str | None]:
        descriptor = types.get(type_name)
        if descriptor is None or not fixed_topics or not descriptor.topic:
            return descriptor, None
        # the default resolver gives the type's topic whatever the operation
        return descriptor, self.resolver.resolve(_ANY_OPERATION, descriptor)

    def _general_records(self, bulks: Sequence[Bulk], types: Mapping[str, TypeDescriptor],
                         letters: DeadLetters) -> Iterator[Outgoing]:
        """Every part through the configured factory, key codec and codec."""
        for bulk in bulks:
            for op in bulk.operations:
                descriptor = types.get(op.type_name)
                if descriptor is None:
                    letters.reject(Reason.UNKNOWN_TYPE, op, None, _UNKNOWN_TYPE, None)
                    continue
                topic = self.resolver.resolve(op, descriptor)
                if topic is None:
                    letters.reject(Reason.NO_TOPIC, op, descriptor, _NO_TOPIC, None)
                    continue
                message = letters.encode(op, descriptor, topic, self._limit)
                if message is not None:
                    yield (message.topic, message.value, message.key,
                           message.timestamp_ms if self._commit_time else 0,
                           list(message.headers))

    def _letters(self, letters: DeadLetters) -> list[tuple[str, KafkaMessage]]:
        if not len(letters):
            return []
        self._ensure([self._topic_spec(self.dead_letter_topic)])
        return letters.letters(self.dead_letter_topic)

    def _produce(self, producer: Producer, message: KafkaMessage, partition: int = -1) -> None:
        self._produce_blocking(producer, message.topic, message.value, message.key,
                               message.timestamp_ms if self._commit_time else 0,
                               list(message.headers), partition)

    def _produce_blocking(self, producer: Producer, topic: str, value: bytes, key: bytes,
                          timestamp_ms: int, headers: list[Header], partition: int = -1) -> None:
        """Produce, waiting while the producer's queue is full."""
        # in a transaction a failed record fails the commit, so no per-record callback
        callback = None if self.exactly_once else self._on_delivery
        produce: Callable[..., None] = producer.produce
        while True:
            try:
                produce(topic, value, key, partition=partition, on_delivery=callback,
                        timestamp=timestamp_ms, headers=headers)
                return
            except BufferError:
                producer.poll(0.05)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._delivery_errors.append(err)

    def _transaction(self, producer: Producer, bulks: Sequence[Bulk],
                     types: Mapping[str, TypeDescriptor],
                     letters: DeadLetters) -> list[tuple[str, KafkaMessage]]:
        """One transaction: each record is produced as soon as it is encoded (a reject
        under ``fail`` aborts it), then the dead letters and the new position."""
        name = self._name()
        try:
            producer.begin_transaction()
            produce: Callable[..., None] = producer.produce
            for topic, value, key, timestamp_ms, headers in self._records(bulks, types, letters):
                try:
                    produce(topic, value, key, timestamp=timestamp_ms, headers=headers)
                except BufferError:
                    self._produce_blocking(producer, topic, value, key, timestamp_ms, headers)
            dead = self._letters(letters)
            for _, letter in dead:
                self._produce(producer, letter)
            position = encode_position(name, bulks[-1].next_seq, self._log_id)
            self._produce_blocking(producer, self.offsets_topic, position, name.encode(),
                                   int(time.time() * 1000), [], self._offsets_partition)
            self._commit(producer)
            if self._producers is not None:  # the other producer takes the next one
                self._producers.rotate()
        except KafkaException as exc:
            self._fail_transaction(producer, exc)
        except BaseException:
            self._abort_quietly(producer)
            raise
        return dead

    def _abort_quietly(self, producer: Producer) -> None:
        """Abort after a non-Kafka failure; replace the producer if even that fails."""
        try:
            producer.abort_transaction(self.timeout_s)
        except KafkaException:
            self._needs_reset = True

    def _commit(self, producer: Producer) -> None:
        for attempt in range(_COMMIT_RETRIES):
            try:
                producer.commit_transaction(self.timeout_s)
                return
            except KafkaException as exc:
                err = error_of(exc)
                if err is None or not err.retriable() or attempt == _COMMIT_RETRIES - 1:
                    raise
                log.warning("commit of mirror %s transaction retried: %s", self.mirror_name,
                            err.name())

    def _fail_transaction(self, producer: Producer, exc: KafkaException) -> NoReturn:
        """Abort what can be aborted; a fatal error (e.g. ``_FENCED``) is final."""
        if is_fatal(exc):
            self._needs_reset = True
            raise kafka_error(f"mirror {self.mirror_name} kafka producer failed", exc) from exc
        try:
            producer.abort_transaction(self.timeout_s)
        except KafkaException as abort_exc:
            self._needs_reset = True
            if is_fatal(abort_exc):
                raise kafka_error(f"mirror {self.mirror_name}: abort failed", abort_exc) \
                    from exc
        err = error_of(exc)
        code = err.name() if err is not None else type(exc).__name__
        raise _retriable_error(f"kafka transaction aborted ({code}); the batch will be retried",
                               self._delivery_errors) from exc

    def _at_least_once(self, producer: Producer, bulks: Sequence[Bulk],
                       types: Mapping[str, TypeDescriptor],
                       letters: DeadLetters) -> list[tuple[str, KafkaMessage]]:
        """The whole batch is encoded before anything is produced, so that a reject under
        ``fail`` leaves nothing of it in Kafka (there is no transaction to abort)."""
        # bytes(memoryview(v)) keeps an exact-size copy: orjson's results come from larger
        # buffers shrunk in place, and holding a batch of them alive measured slower
        # (heap growth) than copying each one.
        records = [(topic, bytes(memoryview(value)), key, timestamp_ms, headers)
                   for topic, value, key, timestamp_ms, headers
                   in self._records(bulks, types, letters)]
        dead = self._letters(letters)
        try:
            produce: Callable[..., None] = producer.produce
            callback = self._on_delivery
            for topic, value, key, timestamp_ms, headers in records:
                try:
                    produce(topic, value, key, on_delivery=callback, timestamp=timestamp_ms,
                            headers=headers)
                except BufferError:
                    self._produce_blocking(producer, topic, value, key, timestamp_ms, headers)
            for _, letter in dead:
                self._produce(producer, letter)
            remaining = producer.flush(self.timeout_s)
        except KafkaException as exc:
            if is_fatal(exc):
                self._needs_reset = True
                raise kafka_error(f"mirror {self.mirror_name} kafka producer failed", exc) \
                    from exc
            raise _retriable_error(f"produce failed: {exc}", self._delivery_errors) from exc
        if remaining or self._delivery_errors:
            raise _retriable_error(f"{remaining} records undelivered after "
                                   f"{self.timeout_s}s", self._delivery_errors)
        return dead

    def stats(self) -> dict[str, Any]:
        """Records sent and dead-lettered (by reason)."""
        return {"records_sent": self.records_sent, "dead_lettered": dict(self.dead_lettered)}


def _retriable_error(message: str, delivery_errors: Sequence[KafkaError]) -> GridstreamError:
    if delivery_errors:
        codes = Counter(e.name() for e in delivery_errors)
        message += f"; delivery errors: {dict(codes)}"
    return EndpointError(message)
