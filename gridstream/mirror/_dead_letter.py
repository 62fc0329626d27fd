"""Encoding a batch, and what to do with operations that cannot be delivered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gridstream.errors import CodecError
from gridstream.mirror.policy import Reason, UndeliverableError, UndeliverablePolicy
from gridstream.operations import Operation, TypeDescriptor
from gridstream.protocol import Header, JsonCodec, KafkaMessage, OperationEncoder
from gridstream.protocol.envelope import Envelope

__all__ = ["FRAMING_ALLOWANCE", "NEAR_LIMIT", "DeadLetters", "Outgoing", "record_size"]

FRAMING_ALLOWANCE = 512
"""Bytes kept free under a size limit for the record batch framing."""
H_REASON, H_ERROR, H_TOPIC, H_MIRROR = "gs.dlq.reason", "gs.dlq.error", "gs.dlq.topic", \
    "gs.dlq.mirror"
_MAX_ERROR = 1000
_NEAR_LIMIT = 4096
"""Headers are counted exactly once key and value come within this many bytes of it."""
NEAR_LIMIT = FRAMING_ALLOWANCE + _NEAR_LIMIT
"""A record whose key + value + this many bytes stay under the limit fits, whatever its
headers (the cheap test of the hot path)."""

Outgoing = tuple[str, bytes, bytes, int, list[Header]]
"""A record ready to produce: ``(topic, value, key, timestamp_ms, headers)``."""


@dataclass(slots=True)
class _Rejected:
    reason: Reason
    operation: Operation
    message: KafkaMessage | None
    topic: str | None
    detail: str


def record_size(key: bytes, value: bytes, headers: list[Header]) -> int:
    """What counts against size limits (as ``KafkaMessage.size``)."""
    return len(key) + len(value) + sum(len(k) + len(v) for k, v in headers)


class DeadLetters:
    """A batch's rejects: each goes to the policy (raise at once, or dead-letter)."""

    def __init__(self, encoder: OperationEncoder, policy: UndeliverablePolicy,
                 mirror_name: str) -> None:
        self.encoder = encoder
        self.policy = policy
        self.mirror_name = mirror_name
        self._rejected: list[_Rejected] = []

    def __len__(self) -> int:
        return len(self._rejected)

    def encode(self, op: Operation, descriptor: TypeDescriptor, topic: str,
               limit_of: Callable[[str], int]) -> KafkaMessage | None:
        """The general path: the record, or None when it was rejected."""
        try:
            message = self.encoder.encode(op, descriptor, topic)
        except CodecError as exc:
            self.reject(Reason.UNSERIALIZABLE, op, descriptor, str(exc), topic)
            return None
        limit = limit_of(topic)
        near = len(message.key) + len(message.value) + NEAR_LIMIT > limit
        if near and self.oversized(op, descriptor, topic, message.size, limit):
            return None
        return message

    def oversized(self, op: Operation, descriptor: TypeDescriptor, topic: str, size: int,
                  limit: int) -> bool:
        """Reject a record of ``size`` bytes if it does not fit under ``limit``."""
        if size + FRAMING_ALLOWANCE <= limit:
            return False
        self.reject(Reason.OVERSIZED, op, descriptor,
                    f"record of {size} bytes exceeds the limit of {limit} bytes "
                    f"(less {FRAMING_ALLOWANCE} for framing) of topic {topic!r}", topic)
        return True

    def reject(self, reason: Reason, op: Operation, descriptor: TypeDescriptor | None,
               detail: str, topic: str | None) -> None:
        if self.policy is UndeliverablePolicy.FAIL:
            raise UndeliverableError(reason, op, detail)
        message: KafkaMessage | None = None
        if reason in (Reason.UNKNOWN_TYPE, Reason.NO_TOPIC):  # the letter is the record
            try:
                message = self.encoder.encode(op, descriptor, topic or "")
            except CodecError:
                message = None
        self._rejected.append(_Rejected(reason, op, message, topic, detail))

    def letters(self, dead_letter_topic: str) -> list[tuple[str, KafkaMessage]]:
        """The dead letters, with their reason."""
        return [(rejected.reason.value, self._letter(rejected, dead_letter_topic))
                for rejected in self._rejected]

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
