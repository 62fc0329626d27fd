"""A failed flow in one line, its whole trace in the run's log file, and whether a restart
may help.

A failure is **transient** when the same batch may pass later without anyone changing
anything: a service unreachable or timing out, a store refusing for a while, a topic
not there yet. It is **permanent** when it would fail the same way again: a record the
flow cannot take (``STOP_TASK``), a bad configuration, a lost position, a bug. The
runner restarts transient failures with bounded exponential backoff and leaves
permanent ones failed.
"""

from __future__ import annotations

import re
import time
import traceback
from pathlib import Path

import gridstream.errors as errors
from gridstream.errors import (
    CodecError,
    ConfigError,
    GridError,
    GridstreamError,
    KafkaClientError,
    PositionLostError,
    RecordError,
    RegistryError,
    SpaceError,
    StackError,
    StoreError,
)

__all__ = ["Failure", "LogFile", "NotYet", "describe", "error_line", "is_transient"]


class NotYet(GridstreamError):
    """A flow's input is not there yet (a topic another flow creates): the runner waits
    and checks again (``gridstream.ops.preflight``)."""


_PERMANENT = (RecordError, ConfigError, CodecError, PositionLostError, SpaceError)
_ALWAYS_TRANSIENT = (StoreError, StackError, NotYet, ConnectionError, TimeoutError)
_TRANSIENT_IF_UNREACHABLE = (GridError, KafkaClientError, RegistryError)
"""Of these only the failures to reach a service are transient: a grid refusing a value
of the wrong type, a snapshot file gone or an incompatible schema fail the same again."""

_UNREACHABLE = re.compile(
    r"(TimeoutException|UnknownTopicOrPartitionException|NetworkException|"
    r"DisconnectException|NotLeaderOrFollowerException|LeaderNotAvailableException|"
    r"ConnectException|NoHostAvailable|Connection refused|TargetDisconnected|"
    r"HazelcastClientOffline|ClientOffline|Unable to connect|cannot reach|unreachable|"
    r"does not answer|timed out|[Tt]imeout)")
"""Words of a failure to reach a service: Java's Kafka and Hazelcast exceptions, the
Python clients' (hazelcast, cassandra-driver) and gridstream's own messages."""

_OURS = re.compile(r"\bgridstream\.errors\.(\w+)")

_HINTS = {
    RecordError: "to get past it: errors = \"dead_letter\" with dead_letter_topic keeps "
                 "bad records in a topic, errors = \"log\" skips and logs them; see "
                 "docs/operating.md#a-record-that-stops-a-flow",
    ConfigError: "fix the configuration and run again",
    PositionLostError: "the stored position is gone: re-snapshot (failoverPolicy) or "
                       "start from a new checkpoint; see docs/connectors.md",
}


def _named(error: BaseException | None, java: str) -> type[BaseException] | None:
    """The gridstream error a failure is: the one a Spark task raised, named in the text
    Spark wraps it in (``gridstream.errors.GridError: ...``; a flow's own error may wrap
    it too: ``SparkError: pipeline 'p' failed: gridstream.errors.RecordError: ...``),
    else the error itself."""
    for text in (java, str(error) if error is not None else ""):
        names = _OURS.findall(text)
        if names:
            found = getattr(errors, names[-1], None)  # the outermost one raised
            if isinstance(found, type) and issubclass(found, GridstreamError):
                return found
    return type(error) if isinstance(error, GridstreamError) else None


class Failure:
    """One failure of a flow: its one line, and whether a restart may help."""

    def __init__(self, flow: str, error: BaseException | None, java: str | None) -> None:
        self.flow = flow
        self.error = error
        self.java = java or ""
        self.transient = is_transient(error, self.java)
        self.waiting = isinstance(error, NotYet)
        self.line = str(error) if self.waiting else describe(error, self.java)

    def hint(self) -> str:
        """What to do about it, unless the error says so itself (a connector's record
        error does: ``gridstream.connect.config.GET_PAST``)."""
        if "to get past it" in f"{self.error}{self.java}":
            return ""
        named = _named(self.error, self.java)
        for kind, hint in _HINTS.items():
            if named is not None and issubclass(named, kind):
                return hint
        if "UnknownTopicOrPartition" in self.java:
            return ("the topic does not exist (yet): create it, or let the flow that "
                    "writes it start first")
        return ""

    def trace(self) -> str:
        """Everything known of the failure, for the log file."""
        parts = []
        if self.error is not None:
            parts.append("".join(traceback.format_exception(self.error)))
        if self.java:
            parts.append(self.java)
        return "\n".join(parts) or "(no trace)"


def is_transient(error: BaseException | None, java: str = "") -> bool:
    """Whether a restart may pass where this failed (see the module's words)."""
    kind = _named(error, java)
    text = f"{error if error is not None else ''}\n{java}"
    if kind is None:  # not ours: a client's, Spark's or a user function's error
        if isinstance(error, (ConnectionError, TimeoutError)):
            return True
        return bool(_UNREACHABLE.search(text))
    if issubclass(kind, _PERMANENT):
        return False
    if issubclass(kind, _ALWAYS_TRANSIENT):
        return True
    if isinstance(error, KafkaClientError) and error.retriable:
        return True
    if issubclass(kind, _TRANSIENT_IF_UNREACHABLE):
        return bool(_UNREACHABLE.search(text))
    return False


def error_line(text: str) -> str:
    """A failed query's message: a task's gridstream error line (from where it names
    the error), else the first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    ours = [line[line.index("gridstream.errors."):] for line in lines
            if "gridstream.errors." in line]
    ours += [line for line in lines if line.startswith("RecordError: ")]
    return (ours or lines or ["unknown error"])[0]


def describe(error: BaseException | None, java: str = "") -> str:
    """One line: the gridstream error a task raised if there is one (Spark wraps it),
    else the flow's own error, else the first meaningful line of the query's (Java)
    error, shorn of Spark's wrapping."""
    for text in (java, str(error) if error is not None else ""):
        if _OURS.search(text):
            return error_line(text).removeprefix("gridstream.errors.")
    if error is not None:
        first = str(error).strip().splitlines()
        return f"{type(error).__name__}: {first[0] if first else ''}".rstrip(": ")
    for raw in java.splitlines():
        line = raw.strip()
        if not line or line.startswith(("at ", "...", "=== ", "Caused by: ")):
            continue
        line = re.sub(r"^\[[A-Z_.]+\]\s*", "", line)  # [STREAM_FAILED] ...
        if line.startswith("Query ") and "terminated with exception" in line:
            line = line.split("terminated with exception:", 1)[1].strip() or line
        if line:
            return line
    return "unknown error"


class LogFile:
    """The run's log file: Spark's own log (log4j) and each failure's whole trace."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)  # traces may quote records: the operator's eyes only

    def failure(self, failure: Failure) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with self.path.open("a", encoding="utf-8") as out:
            out.write(f"\n==== {stamp} {failure.flow} FAILED "
                      f"({'transient' if failure.transient else 'permanent'}): "
                      f"{failure.line}\n{failure.trace()}\n")
