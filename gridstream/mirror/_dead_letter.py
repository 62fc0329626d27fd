"""Encoding a batch, and what to do with operations that cannot be delivered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gridstream.errors import CodecError
from gridstream.mirror.policy import Reason, UndeliverableError, UndeliverablePolicy
from gridstream.operations import Operation, TypeDescriptor
from gridstream.protocol import Header, JsonCodec, KafkaMessage, OperationEncoder
from gridstream.protocol.envelope import Envelope

__all__ = ["FRAMING_ALLOWANCE", "DeadLetters", "Prepared"]

FRAMING_ALLOWANCE = 512
"""Bytes kept free under a size limit for the record batch framing."""
H_REASON, H_ERROR, H_TOPIC, H_MIRROR = "gs.dlq.reason", "gs.dlq.error", "gs.dlq.topic", \
    "gs.dlq.mirror"
_MAX_ERROR = 1000
_NEAR_LIMIT = 4096
"""Headers are counted exactly once key and value come within this many bytes of it."""


@dataclass(slots=True)
class Prepared:
    """A batch ready to produce: records, and dead letters with their reason."""

    messages: list[KafkaMessage] = field(default_factory=list)
    dead: list[tuple[str, KafkaMessage]] = field(default_factory=list)


@dataclass(slots=True)
class _Rejected:
    reason: Reason
    operation: Operation
    message: KafkaMessage | None
    topic: str | None
    detail: str


class DeadLetters:
    """Collects a batch's records; rejects go to the policy (raise or dead-letter)."""

    def __init__(self, encoder: OperationEncoder, policy: UndeliverablePolicy,
                 mirror_name: str) -> None:
        self.encoder = encoder
        self.policy = policy
        self.mirror_name = mirror_name
        self.messages: list[KafkaMessage] = []
        self._rejected: list[_Rejected] = []

    def encode(self, op: Operation, descriptor: TypeDescriptor, topic: str,
               limit_of: Callable[[str], int]) -> None:
        try:
            message = self.encoder.encode(op, descriptor, topic)
        except CodecError as exc:
            self.reject(Reason.UNSERIALIZABLE, op, descriptor, str(exc), topic)
            return
        limit = limit_of(topic)
        near = len(message.key) + len(message.value) + FRAMING_ALLOWANCE + _NEAR_LIMIT > limit
        if near and message.size + FRAMING_ALLOWANCE > limit:
            self.reject(Reason.OVERSIZED, op, descriptor,
                        f"record of {message.size} bytes exceeds the limit of {limit} bytes "
                        f"(less {FRAMING_ALLOWANCE} for framing) of topic {topic!r}", topic,
                        message)
            return
        self.messages.append(message)

    def reject(self, reason: Reason, op: Operation, descriptor: TypeDescriptor | None,
               detail: str, topic: str | None, message: KafkaMessage | None = None) -> None:
        if self.policy is UndeliverablePolicy.FAIL:
            raise UndeliverableError(reason, op, detail)
        if message is None and reason is not Reason.UNSERIALIZABLE:
            try:
                message = self.encoder.encode(op, descriptor, topic or "")
            except CodecError:
                message = None
        self._rejected.append(_Rejected(reason, op, message, topic, detail))

    def result(self, dead_letter_topic: str) -> Prepared:
        prepared = Prepared(messages=self.messages)
        for rejected in self._rejected:
            prepared.dead.append((rejected.reason.value,
                                  self._letter(rejected, dead_letter_topic)))
        return prepared

    def _letter(self, rejected: _Rejected, topic: str) -> KafkaMessage:
        """The original record when there is one and it is not oversized; otherwise the
        envelope without data (JSON), so the record always fits and always encodes."""
        op = rejected.operation
        headers: list[Header] = [
            (H_REASON, rejected.reason.value.encode()),
            (H_ERROR, rejected.detail[:_MAX_ERROR].encode()),
            (H_MIRROR, self.mirror_name.encode()),
        ]
        if rejected.topic:
            headers.append((H_TOPIC, rejected.topic.encode()))
        original = rejected.message
        if original is not None and rejected.reason is not Reason.OVERSIZED:
            return KafkaMessage(topic, original.key, original.value,
                                original.headers + tuple(headers), original.timestamp_ms)
        bare = Envelope.from_operation(op)._replace(data=None)
        factory = self.encoder.factory
        return KafkaMessage(topic, str(op.id).encode(), JsonCodec().encode(bare, None),
                            tuple(factory.headers(bare, JsonCodec.name)) + tuple(headers),
                            op.timestamp_ms)
