"""What happens to an operation an endpoint cannot deliver: never a silent drop."""

from __future__ import annotations

from enum import StrEnum

from gridstream.errors import EndpointError
from gridstream.operations import EntityId, Operation

__all__ = ["Reason", "UndeliverableError", "UndeliverablePolicy"]


class UndeliverablePolicy(StrEnum):
    """``fail``: raise, and the mirror stops without advancing (the default).
    ``dead_letter``: send it to the dead-letter topic with the reason in its headers,
    and count it."""

    FAIL = "fail"
    DEAD_LETTER = "dead_letter"


class Reason(StrEnum):
    """Why an operation cannot be delivered."""

    UNKNOWN_TYPE = "unknown_type"
    NO_TOPIC = "no_topic"
    UNSERIALIZABLE = "unserializable"
    OVERSIZED = "oversized"


class UndeliverableError(EndpointError):
    """An operation cannot be delivered; retrying the same batch cannot help."""

    retriable = False

    def __init__(self, reason: Reason, operation: Operation, detail: str) -> None:
        super().__init__(
            f"{reason.value}: {operation.op.value} {operation.type_name} id={operation.id!r} "
            f"version={operation.version}: {detail}"
        )
        self.reason = reason
        self.type_name = operation.type_name
        self.entity_id: EntityId = operation.id
        self.version = operation.version
        self.detail = detail
