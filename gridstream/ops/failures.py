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
    INFRASTRUCTURE,
    CodecError,
    ConfigError,
    GridstreamError,
    KafkaClientError,
    PositionLostError,
    RecordError,
    SpaceError,
    StackError,
    StoreError,
)

__all__ = ["Failure", "LogFile", "NotYet", "describe", "error_line", "is_transient"]


class NotYet(GridstreamError):
    """A flow's input is not there yet: the runner waits and checks again
    (``gridstream.ops.preflight``); ``created_here`` when a flow of the same run creates
    it (then it waits as long as it takes: a source creates its topics with its first
    record, which may come much later)."""

    def __init__(self, message: str, *, created_here: bool = False) -> None:
        super().__init__(message)
        self.created_here = created_here


_PERMANENT = (RecordError, ConfigError, CodecError, PositionLostError, SpaceError)
_ALWAYS_TRANSIENT = (StoreError, StackError, NotYet, ConnectionError, TimeoutError)
_TRANSIENT_IF_UNREACHABLE = INFRASTRUCTURE
"""Of these only the failures to reach a service are transient: a grid refusing a value
of the wrong type, a snapshot file gone or an incompatible schema fail the same again."""

_UNREACHABLE = re.compile(
    r"\b(TimeoutException|UnknownTopicOrPartitionException|NetworkException|"
    r"DisconnectException|NotLeaderOrFollowerException|LeaderNotAvailableException|"
    r"ConnectException|NoHostAvailable|Connection refused|TargetDisconnected\w*|"
    r"HazelcastClientOffline\w*|ClientOffline\w*|Unable to connect|cannot reach|"
    r"unreachable|does not answer|not connected|timed out|[Tt]imeout|"
    r"_TRANSPORT|_ALL_BROKERS_DOWN|_RESOLVE|_TIMED_OUT|_MSG_TIMED_OUT|REQUEST_TIMED_OUT|"
    r"NOT_COORDINATOR|COORDINATOR_NOT_AVAILABLE|COORDINATOR_LOAD_IN_PROGRESS)\b")
"""Words of a failure to reach a service: Java's Kafka and Hazelcast exceptions, the
Python clients' (hazelcast, cassandra-driver, librdkafka's codes) and gridstream's own
messages. Searched in message lines only, never in a trace's frames or source lines."""

_OURS = re.compile(r"\bgridstream\.errors\.(\w+)")
_EXCEPTION_LINE = re.compile(r"^(Caused by: )?[\w.$]*(Error|Exception)\b")
_WRAPPERS = (errors.SparkError,)
"""Our errors that wrap another (a pipeline's ``SparkError: pipeline 'p' failed: ...``):
what they wrap decides."""


def _messages(error: BaseException | None, java: str) -> str:
    """The message lines of a failure: the first line of each text and every line that
    names an exception (``x.y.SomeError: ...``), not frames or source lines."""
    lines: list[str] = []
    for text in (str(error) if error is not None else "", java):
        rows = [row.strip() for row in text.splitlines() if row.strip()]
        lines += rows[:1] + [row for row in rows[1:] if _EXCEPTION_LINE.match(row)
                             or "gridstream.errors." in row]
    return "\n".join(lines)

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
        for name in reversed(_OURS.findall(text)):  # the outermost one raised first
            found = getattr(errors, name, None)
            if (isinstance(found, type) and issubclass(found, GridstreamError)
                    and not issubclass(found, _WRAPPERS)):
                return found
    if isinstance(error, GridstreamError) and not isinstance(error, _WRAPPERS):
        return type(error)
    return None


class Failure:
    """One failure of a flow: its one line, and whether a restart may help."""

    def __init__(self, flow: str, error: BaseException | None, java: str | None) -> None:
        self.flow = flow
        self.error = error
        self.java = java or ""
        self.transient = is_transient(error, self.java)
        self.waiting = isinstance(error, NotYet)
        named = _named(error, self.java)
        self.replan = named is not None and issubclass(named, errors.NewSchemaError)
        """A re-plan reads it (``gridstream.pipeline.serde._avro_jvm``)."""
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
    text = _messages(error, java)
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
            if "gridstream.errors." in line and "gridstream.errors.SparkError" not in line]
    ours = ours or [line for line in lines if line.startswith("RecordError: ")]
    return (ours[-1:] or lines[:1] or ["unknown error"])[0]  # the outermost one raised


def describe(error: BaseException | None, java: str = "") -> str:
    """One line: the gridstream error a task raised if there is one (Spark wraps it),
    else the flow's own error, else the first meaningful line of the query's (Java)
    error, shorn of Spark's wrapping."""
    for text in (java, str(error) if error is not None else ""):
        if any(name != "SparkError" for name in _OURS.findall(text)):
            return error_line(text).removeprefix("gridstream.errors.")
    if error is not None and (isinstance(error, GridstreamError) or not java) and not \
            isinstance(error, _WRAPPERS):
        first = str(error).strip().splitlines()
        return f"{type(error).__name__}: {first[0] if first else ''}".rstrip(": ")
    rows = [raw.strip() for raw in java.splitlines() if raw.strip()]
    causes = [row.removeprefix("Caused by: ") for row in rows if row.startswith("Caused by: ")]
    for line in causes[-1:] or rows:  # the root cause, else the first meaningful line
        if line.startswith(("at ", "...", "=== ")):
            continue
        line = re.sub(r"^\[[A-Z_.]+\]\s*", "", line)  # [STREAM_FAILED] ...
        if line.startswith("Query ") and "terminated with exception" in line:
            line = line.split("terminated with exception:", 1)[1].strip() or line
        line = re.sub(r"^.*most recent failure: Lost task [^:]*\): ", "", line)
        if line:
            return line
    if error is not None:
        first = str(error).strip().splitlines()
        return f"{type(error).__name__}: {first[0] if first else ''}".rstrip(": ")
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
