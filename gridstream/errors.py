"""The exception tree: one root, one subclass per area.

Errors are always raised ``from`` their cause, keep client error codes as attributes, and
never carry secrets in their message.
"""

from __future__ import annotations

__all__ = [
    "CodecError",
    "ConfigError",
    "ConnectorError",
    "EndpointError",
    "EntryNotFoundError",
    "GridError",
    "GridstreamError",
    "INFRASTRUCTURE",
    "InvalidEntryError",
    "KafkaClientError",
    "LogCorruptedError",
    "MirrorError",
    "NewSchemaError",
    "NotInstalledError",
    "OperationLogError",
    "PositionLostError",
    "RecordError",
    "ReconcileError",
    "RegistryError",
    "SpaceError",
    "SparkError",
    "StackError",
    "StoreError",
    "TransactionError",
    "UnknownTypeError",
    "VersionConflictError",
]


class GridstreamError(Exception):
    """Root of every error gridstream raises on purpose."""


class ConfigError(GridstreamError):
    """A configuration value is missing, malformed or contradictory."""


class NotInstalledError(ConfigError, ImportError):
    """An optional dependency is not installed; the message names the ``pip install``
    extra that brings it (``gridstream._optional`` has the one table of them). It is an
    ``ImportError`` too, so code that tolerates a missing package keeps tolerating it."""


class StackError(GridstreamError):
    """A local service (Kafka, Cassandra, ...) could not be fetched, started or reached."""


class SpaceError(GridstreamError):
    """A grid (space) operation was refused."""


class UnknownTypeError(SpaceError):
    """The entry's type has not been introduced to the space and cannot be inferred."""


class InvalidEntryError(SpaceError):
    """The entry is malformed: no id, an unserializable value, too large, ..."""


class EntryNotFoundError(SpaceError):
    """An update or change named an id that the space does not hold."""


class VersionConflictError(SpaceError):
    """Optimistic locking failed: the entry changed since the caller read it."""

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class TransactionError(SpaceError):
    """A transaction was used wrongly (nested, reused after commit, ...)."""


class OperationLogError(GridstreamError):
    """The durable operation log could not be written or read."""


class LogCorruptedError(OperationLogError):
    """A log file has a torn or corrupted record; names the file and byte offset."""

    def __init__(self, message: str, *, path: str, offset: int) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


class CodecError(GridstreamError):
    """A value could not be encoded or decoded by the chosen codec."""


class NewSchemaError(CodecError):
    """A record's schema id was not in the plan its query started with (decoding in the
    JVM): the flow re-plans from its checkpoint with the id added."""


class MirrorError(GridstreamError):
    """The write-behind mirror could not deliver or could not resume."""


class EndpointError(MirrorError):
    """A sync endpoint refused or failed a batch."""


class KafkaClientError(GridstreamError):
    """A Kafka client call failed; ``code`` keeps librdkafka's error code name."""

    def __init__(self, message: str, *, code: str | None = None, retriable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = retriable


class GridError(GridstreamError):
    """A grid adapter could not reach, read or write its grid."""


class PositionLostError(GridError):
    """A stored change-stream position is no longer valid for the grid.

    The changes after it cannot be read any more (journal overflow, log retention, a
    restart of the whole cluster): resuming would skip changes silently. The caller
    fails or re-snapshots by policy. ``cache`` names the cache, ``detail`` says which
    part of the position was lost and why.
    """

    def __init__(self, message: str, *, cache: str, detail: str) -> None:
        super().__init__(message)
        self.cache = cache
        self.detail = detail


class StoreError(GridstreamError):
    """A store (Cassandra, SQL, lake) mapping or write failed."""


class ReconcileError(GridstreamError):
    """A place could not be read back or compared (a value with no canonical form, ...)."""


class SparkError(GridstreamError):
    """A Spark session or streaming query failed."""


class ConnectorError(GridstreamError):
    """A source or sink connector could not run (its grid, Kafka, or a record)."""


class RegistryError(ConnectorError):
    """The schema registry cannot be reached or failed (not a record's fault). A
    ``ConnectorError`` so a connector stops on it; pipelines and the mirror stop too."""


class RecordError(ConnectorError):
    """One record (or grid entry) could not be filtered, transformed, converted or
    applied. ``where`` names it: ``cache/key`` on the source side, ``topic/partition@
    offset`` on the sink side. Under ``STOP_TASK`` this stops the connector with its
    position not advanced; under ``LOG_ONLY`` and ``DEAD_LETTER`` it is counted (and
    dead-lettered) and the connector goes on."""

    def __init__(self, message: str, *, where: str, stage: str) -> None:
        super().__init__(f"{where}: {stage}: {message}")
        self.where = where
        self.stage = stage
        self.reason = message


INFRASTRUCTURE = (RegistryError, GridError, KafkaClientError)
"""Failures of a service a record's processing called, not of the record: a pipeline's
Python pass stops the query on them (the checkpoint does not move past the batch)
instead of turning the record into an error row."""
