"""The grid adapter contract: what connectors and pipelines may rely on in any grid.

A grid holds named caches (the Space: one per entry type; Hazelcast: one per map) of
entries ``key → value``. An adapter lists the caches and is told when one appears or
disappears, snapshots a cache, streams its changes from a resumable ``Position`` and
applies batches of puts and removes.

Adapters are built from a picklable config (Spark ships it to executors) and open their
connections in ``open()``, never in ``__init__``: one connection per task.

Positions say what they survive (``GridAdapter.position_survives``). A position that is
no longer valid for the grid (retention, journal overflow, a restart of a whole
cluster) raises ``PositionLostError`` when read from; it is never skipped silently.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

import orjson

from gridstream.errors import ConfigError, GridError

__all__ = [
    "CacheEvent",
    "Change",
    "ChangeBatch",
    "Entry",
    "GridAdapter",
    "Key",
    "Position",
    "Value",
    "Write",
    "changes_after",
    "first_puts",
]

Key = str | int
"""A cache key: a string or an integer (JSON scalars, the same in every grid)."""

Value = dict[str, Any]
"""An entry's value: a JSON object in wire form (as ``gridstream.protocol`` encodes it)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a snapshot. ``version`` grows with every change of the key in the
    grids that keep one (the Space: its log sequence number), ``None`` otherwise."""

    key: Key
    value: Value
    version: int | None = None


class Change:
    """One change of a cache, read from its change stream.

    ``value`` is the value after the change, ``None`` when the key was removed.
    ``stream`` and ``seq`` say where it was read (the Space: ``"log"`` and the log
    sequence number; Hazelcast: the partition id and its journal sequence); ``version``
    grows per key along one position lineage, so a consumer can settle duplicates. It
    orders changes within one lineage only: Hazelcast's starts again in a new lineage (a
    restarted cluster) or a re-created map, so it must not be compared across them (e.g.
    as a sink's write version); the Space's log sequence numbers only grow.

    ``text`` is the value as compact JSON text when the adapter holds it so (``of_json``:
    the Space's fold keeps each entry's wire JSON, written by orjson): a JSON converter
    writes it as it is, and ``value`` is decoded from it only when something asks.
    """

    __slots__ = ("_decoded", "_value", "cache", "key", "seq", "stream", "text", "version")

    def __init__(self, cache: str, key: Key, value: Value | None, version: int | None,
                 stream: str, seq: int) -> None:
        self.cache, self.key, self._value = cache, key, value
        self.version, self.stream, self.seq = version, stream, seq
        self.text: str | None = None
        self._decoded = True

    @classmethod
    def of_json(cls, cache: str, key: Key, text: str, version: int | None, stream: str,
                seq: int) -> Change:
        """A change to a value given as the JSON text of an object, which the adapter
        guarantees: orjson's compact form with unique keys, what ``orjson.dumps`` of its
        decoding gives again (the Space's ``fold.data_text``)."""
        change = cls(cache, key, None, version, stream, seq)
        change.text, change._decoded = text, False
        return change

    @property
    def value(self) -> Value | None:
        if not self._decoded:
            value = orjson.loads(self.text or "{}")
            if not isinstance(value, dict):
                raise GridError(f"cache {self.cache!r} key {self.key!r}: the change's "
                                "value is not a JSON object")
            self._value, self._decoded = value, True
        result: Value | None = self._value
        return result

    @property
    def removed(self) -> bool:
        return self._decoded and self._value is None

    def _fields(self) -> tuple[Any, ...]:
        return (self.cache, self.key, self.value, self.version, self.stream, self.seq)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Change):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # a value is a dict

    def __repr__(self) -> str:
        return (f"Change(cache={self.cache!r}, key={self.key!r}, value={self.value!r}, "
                f"version={self.version!r}, stream={self.stream!r}, seq={self.seq!r})")


@dataclass(frozen=True, slots=True)
class Position:
    """Where a cache's change stream stands: the next sequence number to read per stream,
    valid only for ``lineage`` (the Space's log id; Hazelcast: the cluster's id). Stored
    as JSON by whoever checkpoints it (``to_json`` / ``from_json``).

    ``marks`` (optional, per stream) is an adapter's fingerprint of the change just before
    the stream's next sequence, which it checks on the next read to tell a stream that
    was replaced by a new one (Hazelcast: a map destroyed and re-created) from the one
    the position was taken in. Positions stored without marks still read."""

    lineage: str
    next_seqs: Mapping[str, int] = field(default_factory=dict)
    marks: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        raw: dict[str, object] = {"lineage": self.lineage, "next": dict(self.next_seqs)}
        if self.marks:
            raw["marks"] = dict(self.marks)
        return orjson.dumps(raw, option=orjson.OPT_SORT_KEYS).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Position:
        try:
            raw = orjson.loads(text)
            lineage = raw["lineage"]
            nexts = raw["next"]
            if not isinstance(lineage, str) or not isinstance(nexts, dict):
                raise TypeError("lineage must be a string and next an object")
            seqs = {str(k): v for k, v in nexts.items()}
            if not all(type(v) is int and v >= 0 for v in seqs.values()):
                raise TypeError("every next sequence must be a non-negative integer")
            marks = raw.get("marks", {})
            if not isinstance(marks, dict) or not all(
                isinstance(v, str) for v in marks.values()
            ):
                raise TypeError("marks must be an object of strings")
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"not a grid position: {exc}") from exc
        return cls(lineage, seqs, {str(k): v for k, v in marks.items()})


def changes_after(ends: Mapping[str, int], position: Position) -> int:
    """The changes between ``position`` and ``ends`` (each stream's next sequence number
    now); a stream ``position`` does not know counts none."""
    return sum(max(0, seq - position.next_seqs.get(stream, seq)) for stream, seq in ends.items())


@dataclass(frozen=True, slots=True)
class ChangeBatch:
    """Changes read in order, and the position to resume from after them (it may move on
    even with no change, e.g. past a void in the Space's log)."""

    changes: Sequence[Change]
    position: Position


@dataclass(frozen=True, slots=True)
class Write:
    """A put (``value`` set) or a remove (``value`` None) for one key.

    ``version``, when given (a non-negative int), makes every grid skip the write when it
    already holds, for the same writer (the adapter's ``source``) and key, a version that
    is not older: an equal version is skipped too, and of equal versions in one batch the
    first is applied. Writers with unrelated version sequences use distinct sources."""

    key: Key
    value: Value | None
    version: int | None = None


def first_puts(writes: Sequence[Write]) -> list[Write]:
    """What ``apply(..., overwrite=False)`` considers: each key's first put, in the
    batch's order (removes never apply without overwrite)."""
    seen: set[tuple[type, Key]] = set()
    out: list[Write] = []
    for write in writes:
        ident = (type(write.key), write.key)
        if write.value is not None and ident not in seen:
            seen.add(ident)
            out.append(write)
    return out


@dataclass(frozen=True, slots=True)
class CacheEvent:
    kind: Literal["created", "removed"]
    cache: str


class GridAdapter(ABC):
    """One grid, seen through caches. Not thread-safe unless an adapter says so."""

    position_survives: ClassVar[str] = ""
    """What a stored position survives, in words (shown in docs and errors)."""
    shared_stream: ClassVar[bool] = False
    """Whether every cache's position is a position in one stream that all caches share
    (the Space's log): a span of sequence numbers then counts every cache's changes."""

    @abstractmethod
    def open(self) -> None:
        """Connect (or open files). Idempotent."""

    @abstractmethod
    def close(self) -> None:
        """Release every connection and listener. Idempotent."""

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @abstractmethod
    def list_caches(self) -> list[str]:
        """The names of the caches that exist now, sorted."""

    @abstractmethod
    def watch_caches(self, listener: Callable[[CacheEvent], None]) -> Callable[[], None]:
        """Call ``listener`` when a cache appears or disappears (from a background thread)
        until the returned function is called."""

    @abstractmethod
    def snapshot(self, cache: str, batch_size: int) -> Iterator[list[Entry]]:
        """Every entry of ``cache`` now, in batches of at most ``batch_size``."""

    def get_all(self, cache: str, keys: Collection[Key]) -> dict[Key, Value]:
        """The current values of those of ``keys`` that ``cache`` holds (a key it does
        not hold, or a cache that does not exist, is left out). Lookups of a stream–table
        join. This default scans a snapshot; adapters with point reads override it."""
        wanted = {(type(k), k) for k in keys}
        found: dict[Key, Value] = {}
        if not wanted or cache not in self.list_caches():
            return found
        for batch in self.snapshot(cache, 1000):
            for entry in batch:
                if (type(entry.key), entry.key) in wanted:
                    found[entry.key] = entry.value
        return found

    @abstractmethod
    def end_position(self, cache: str) -> Position:
        """The position just after the newest change now: reading from it returns only
        changes made later. Taken before a snapshot, no change is missed between the two.
        Duplicates are settled by ``version`` where entries carry one (the Space: keep a
        change only when its version is above the entry's); where ``Entry.version`` is
        ``None`` (Hazelcast), apply every change read from this position after the
        snapshot, in order, last write wins per key: a change the snapshot already holds
        is applied again and leaves the same value."""

    def behind(self, cache: str, position: Position) -> int | None:
        """How many changes of ``cache``'s streams a reader at ``position`` has not read
        yet, or None for a position of another lineage. (The Space has one stream, its
        log: every operation after ``position``, of any cache.)"""
        end = self.end_position(cache)
        if end.lineage != position.lineage:
            return None
        return changes_after(end.next_seqs, position)

    @abstractmethod
    def start_position(self, cache: str) -> Position:
        """The oldest position still readable."""

    @abstractmethod
    def read_changes(self, cache: str, position: Position, max_changes: int) -> ChangeBatch:
        """Changes of ``cache`` from ``position`` (none yet: an empty batch), at most
        ``max_changes`` (a grid that keeps transactions whole, the Space, may return the
        rest of one transaction above it). Raises ``PositionLostError`` when the position
        is no longer valid (another lineage, overflowed, retained no longer)."""

    def span(self, cache: str, since: Position | None = None) -> tuple[Position, Position]:
        """``(start_position, end_position)`` of ``cache`` at once; ``since`` (a position
        of the cache read before) lets an adapter reuse what did not change since (its
        marks). This default asks for each."""
        return self.start_position(cache), self.end_position(cache)

    def cut(self, cache: str, begin: Position, end: Position) -> Position:
        """A position to end a bounded read at, from ``end`` (between ``begin`` and the
        cache's end position): one the grid can resume from (the Space: a transaction's
        start — moved down, or up to the transaction's end when down would not pass
        ``begin``), with its marks. This default: ``end`` as it is."""
        return end

    def read_shared(self, caches: Sequence[str], position: Position, max_changes: int,
                    stop: Position | None = None) -> ChangeBatch:
        """Changes of every cache of ``caches`` from ``position``, in stream order, at
        most ``max_changes`` in all (transactions kept whole, as ``read_changes``) and
        none at or past ``stop`` (the read's planned end: nothing after it is read or
        folded), for grids whose caches share one stream (``shared_stream``): the stream
        is read once for all of them. Grids whose caches have streams of their own do
        not offer it."""
        raise ConfigError(f"{type(self).__name__}: caches have streams of their own; "
                          "read each with read_changes")

    @abstractmethod
    def apply(self, cache: str, writes: Sequence[Write], *, overwrite: bool = True) -> None:
        """Apply puts and removes to ``cache``, creating it if missing. Applying the same
        batch again leaves the cache as the first application did.

        ``overwrite=False`` never changes an entry the cache holds: a put is applied only
        when its key is absent (of several puts of one key in the batch, the first:
        ``first_puts``), and removes are skipped. With versions, a put is applied only
        when it is not older than the version held (as with overwrite) and its key is
        absent."""

    def release(self, consumer: str) -> None:
        """Forget ``consumer``: the grid's retention no longer waits for it (a name that
        is not registered is ignored). Grids whose retention does not wait for readers
        ignore it."""
        return None

    def acknowledge(self, consumer: str, position: Position) -> None:
        """Tell the grid that ``consumer`` has durably delivered every change before
        ``position`` (of every cache), so the grid's retention need not keep them for it.
        The first call registers ``consumer``: from then on, a grid whose retention waits
        for its consumers (the Space's log) keeps what it has not acknowledged. Grids
        whose retention does not wait for readers (Hazelcast's journals) ignore it."""
        return None
