"""The grid adapter for gridstream's embedded ``Space``.

Caches are the Space's entry types (type names), keys are entity ids, values are the
entries' data in wire form (JSON values, as ``gridstream.protocol`` encodes them; see
``gridstream.protocol.values``).

**Reading** (caches, snapshot, change stream) goes through the operation log only
(``LogReader``), so it works from any process, as ``gridstream mirror`` does. A
position is the log's id (``LogReader.log_id``) and the next sequence number of the one
stream ``"log"``; ``Change.version`` (and ``Entry.version``) is the log sequence number,
space-wide, so it only grows, across removes and re-creates. PARTIAL_UPDATE and CHANGE
are folded into the whole value after the change with the one fold
(``gridstream.grid._space_state``). A bulk (a transaction) is never split: a batch may
exceed ``max_changes`` by the rest of one transaction.

A position survives every restart of the Space and of the reader (the log is durable).
It is lost (``PositionLostError``) when retention removed the log below it, when it
comes from another log, when it lies beyond the log's end, or — after retention — when
a partial update meets an entry whose earlier state neither the retained log nor the
Space's saved state can give.

**Writing** (``apply``): the Space is embedded, so only the process owning it writes.
Pass the open ``Space`` (``SpaceAdapter(config, space=space)``, in the owning process),
or set ``SpaceGridConfig.writable`` and the adapter opens the Space itself in ``open()``
(the process becomes its owner; another owner makes that fail). Otherwise ``apply``
raises ``GridError``. See ``docs/grid.md`` for the idempotency rule.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

import orjson

from gridstream.errors import (
    ConfigError,
    GridError,
    GridstreamError,
    OperationLogError,
    PositionLostError,
)
from gridstream.grid._space_state import TypeState, UnknownBase, rebuild, roll
from gridstream.grid._space_writes import APPLIED_TYPE, apply_writes
from gridstream.grid.contract import (
    CacheEvent,
    Change,
    ChangeBatch,
    Entry,
    GridAdapter,
    Key,
    Position,
    Value,
    Write,
)
from gridstream.space import EmbeddedLogReader, Space, open_log_reader

__all__ = ["STREAM", "SpaceAdapter", "SpaceGridConfig"]

log = logging.getLogger(__name__)
T = TypeVar("T")

STREAM = "log"
"""The one stream of a Space position."""

_READ_OPS = 1024
"""Operations (of every cache) read from the log at a time."""
_SCAN_OPS = 100_000
"""Operations of other caches scanned at most by one ``read_changes`` before it returns
an empty batch that moves the position on."""


@dataclass(frozen=True, slots=True)
class SpaceGridConfig:
    """Where the Space is and how to reach it. Picklable (Spark ships it to executors)."""

    data_dir: str
    """The Space's directory (``Space.embedded(..., data_dir=...)``)."""
    space_name: str
    """The Space's name (checked when the adapter opens the Space itself)."""
    writable: bool = False
    """``open()`` opens the Space itself, making this process its owner, so ``apply``
    can write. Leave false to read only, or to pass an open ``Space`` instead."""
    source: str = "default"
    """Names the writer whose ``Write.version``s ``apply`` compares: writers whose
    versions are unrelated (two source grids) need distinct sources."""
    id_property: str = "id"
    """The id property of the document types ``apply`` creates for missing caches."""
    poll_interval_s: float = 1.0
    """How often ``watch_caches`` looks for new types."""
    fsync: Literal["always", "batch", "never"] = "batch"
    """The fsync policy when the adapter opens the Space itself."""
    partitions: int = 4
    """The partition count of a Space the adapter creates (an existing one keeps its own)."""

    def __post_init__(self) -> None:
        if not self.data_dir or not self.space_name:
            raise ConfigError("a Space grid needs data_dir and space_name")
        if not self.id_property or not self.source:
            raise ConfigError("id_property and source must not be empty")
        if self.poll_interval_s <= 0:
            raise ConfigError("poll_interval_s must be positive")


class SpaceAdapter(GridAdapter):
    """``GridAdapter`` over an embedded Space (see the module docstring)."""

    position_survives: ClassVar[str] = (
        "every restart of the Space and of the job (the operation log is durable); "
        "not log retention: a position below the log's first retained sequence number "
        "is lost"
    )
    shared_stream: ClassVar[bool] = True

    def __init__(self, config: SpaceGridConfig, space: Space | None = None) -> None:
        self.config = config
        self._given = space
        self._space: Space | None = None
        self._owned = False
        self._reader: EmbeddedLogReader | None = None
        self._streams: dict[str, TypeState] = {}
        self._lookups: dict[str, TypeState] = {}
        self._watchers: list[Callable[[], None]] = []
        self._registered: set[str] = set()

    def __repr__(self) -> str:
        return f"SpaceAdapter({self.config.space_name!r}, data_dir={self.config.data_dir!r})"

    # ------------------------------------------------------------ lifecycle

    def open(self) -> None:
        if self._reader is not None:
            return
        space = self._given
        if space is None and self.config.writable:
            try:
                space = Space.embedded(self.config.space_name, data_dir=self.config.data_dir,
                                       partitions=self.config.partitions,
                                       fsync=self.config.fsync)
            except GridstreamError as exc:
                raise GridError(f"cannot open the Space {self.config.space_name!r} in "
                                f"{self.config.data_dir} for writing: {exc}") from exc
            self._owned = True
        try:
            self._reader = open_log_reader(self.config.data_dir)
        except OperationLogError as exc:
            if self._owned and space is not None:
                space.close()
            raise GridError(f"cannot read the Space in {self.config.data_dir}: {exc}") from exc
        self._space = space

    def close(self) -> None:
        reader, self._reader = self._reader, None
        space, self._space = self._space, None
        self._streams.clear()
        self._lookups.clear()
        watchers, self._watchers = self._watchers, []
        for stop in watchers:
            stop()
        if reader is not None:
            reader.close()
        if space is not None and self._owned:
            self._owned = False
            space.close()

    def _log(self) -> EmbeddedLogReader:
        if self._reader is None:
            raise GridError(f"{self!r} is not open")
        return self._reader

    # ------------------------------------------------------------ caches

    def list_caches(self) -> list[str]:
        return _cache_names(self._log())

    def watch_caches(self, listener: Callable[[CacheEvent], None]) -> Callable[[], None]:
        """Polls the Space's types every ``poll_interval_s`` from a thread of its own (with
        its own log reader) until stopped or ``close()``. A Space type is never dropped:
        no ``removed`` event."""
        known = set(self.list_caches())
        stop = threading.Event()
        thread = threading.Thread(target=self._watch, args=(known, listener, stop),
                                  name=f"gridstream-space-watch-{self.config.space_name}",
                                  daemon=True)
        thread.start()

        def cancel() -> None:
            stop.set()
            if thread is not threading.current_thread():
                thread.join()

        self._watchers.append(cancel)
        return cancel

    def _watch(self, known: set[str], listener: Callable[[CacheEvent], None],
               stop: threading.Event) -> None:
        """Polls until stopped. A failure to read the log (or to open it) is logged once
        per kind of error while it lasts, and the poll retries on the next interval with
        a reader opened anew: the watch never stops reporting on its own."""
        reader: EmbeddedLogReader | None = None
        failing: set[type[BaseException]] = set()
        try:
            while not stop.wait(self.config.poll_interval_s):
                try:
                    if reader is None:
                        reader = open_log_reader(self.config.data_dir)
                    names = _cache_names(reader)
                except Exception as exc:  # noqa: BLE001 - a watcher thread must live on
                    if type(exc) not in failing:
                        failing.add(type(exc))
                        log.warning("cannot poll the caches of %s (retrying every %ss)",
                                    self.config.data_dir, self.config.poll_interval_s,
                                    exc_info=exc)
                    if reader is not None:
                        _close_quietly(reader)
                        reader = None
                    continue
                if failing:
                    failing.clear()
                    log.warning("polling the caches of %s again", self.config.data_dir)
                for name in names:
                    if name not in known and not stop.is_set():
                        known.add(name)
                        try:
                            listener(CacheEvent("created", name))
                        except Exception:
                            log.exception("cache listener failed on %s", name)
        finally:
            if reader is not None:
                _close_quietly(reader)

    # ------------------------------------------------------------ reading

    def _declared(self, cache: str) -> frozenset[str]:
        descriptor = self._log().types().get(cache)
        return descriptor.declared_paths() if descriptor is not None else frozenset()

    def snapshot(self, cache: str, batch_size: int) -> Iterator[list[Entry]]:
        """The cache's entries at the log's end when called: every operation before that
        sequence number is in (an entry's ``version`` is its last operation's). Reading
        the stream from an ``end_position`` taken before gives the changes from there on;
        those already in the snapshot have versions not above the entries'."""
        if batch_size < 1:
            raise ConfigError("batch_size must be at least 1")
        reader = self._log()
        state = self._guard(cache, lambda: self._state_now(reader, cache))
        batch: list[Entry] = []
        for key, entity in state.live():
            batch.append(Entry(key, _value(entity.data), entity.version))
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def get_all(self, cache: str, keys: Collection[Key]) -> dict[Key, Value]:
        """The entries at the log's end now. The cache's state is built once (as a
        snapshot is) and rolled forward along the log on each later call."""
        reader = self._log()
        state = self._lookups.pop(cache, None)
        if state is not None:
            try:
                end = reader.end_seq()
                if end < state.next_seq:
                    state = None
                else:
                    roll(reader, state, end, self._declared(cache))
            except (OperationLogError, GridError):
                state = None  # retention passed the state kept: build it again
        if state is None or not state.complete:
            state = self._guard(cache, lambda: self._state_now(reader, cache))
        self._lookups[cache] = state
        found: dict[Key, Value] = {}
        for key in keys:
            entity = state.known.get(key)
            if entity is not None and not entity.deleted:
                found[key] = _value(entity.data)
        return found

    def _state_now(self, reader: EmbeddedLogReader, cache: str) -> TypeState:
        for _ in range(3):
            end = reader.end_seq()
            snap = reader.state_snapshot([cache])  # its next_seq may lead the scan
            target = max(end, snap.next_seq) if snap is not None else end
            state = rebuild(reader, cache, target, self._declared(cache))
            if state.complete:  # else a newer saved state replaced the one read: again
                return state
        raise GridError(f"{cache}: the Space's saved state kept changing during a snapshot")

    def end_position(self, cache: str) -> Position:
        reader = self._log()
        return self._position(reader, self._guard(cache, reader.end_seq))

    def start_position(self, cache: str) -> Position:
        """The log's first retained sequence number. After retention, a partial update
        of an entry last written whole before it may make reading from there fail."""
        reader = self._log()
        return self._position(reader, self._guard(cache, reader.first_seq))

    def read_changes(self, cache: str, position: Position, max_changes: int) -> ChangeBatch:
        return self.read_shared([cache], position, max_changes)

    def read_shared(self, caches: Sequence[str], position: Position, max_changes: int,
                    stop: Position | None = None) -> ChangeBatch:
        """The log read once for every cache of ``caches`` (``GridAdapter.read_shared``).
        With ``stop`` no bulk at or past it is read: the caches' kept states never move
        past a batch's planned end, so the next batch resumes them instead of rebuilding
        them from the saved state."""
        if max_changes < 1:
            raise ConfigError("max_changes must be at least 1")
        if not caches:
            raise ConfigError("read_shared needs at least one cache")
        label = ", ".join(caches)
        reader = self._log()
        seq = self._checked_seq(reader, label, position)
        limit = None if stop is None else stop.next_seqs.get(STREAM)
        try:
            return self._read(reader, caches, seq, max_changes, limit)
        except UnknownBase as exc:
            self._forget(caches)
            raise _lost(label, "retention",
                        f"the entry with {exc} was last written whole before the "
                        f"log's first retained seq {reader.first_seq()}; its value after "
                        "a partial update cannot be rebuilt") from exc
        except OperationLogError as exc:
            self._forget(caches)
            first = self._guard(label, reader.first_seq)
            if first > seq:
                raise _lost(label, "retention",
                            f"log retention removed seq {seq} while it was read "
                            f"(the log now starts at {first})") from exc
            raise GridError(f"{label}: cannot read the log from seq {seq}: {exc}") from exc
        except (GridError, ConfigError):
            self._forget(caches)
            raise
        except GridstreamError as exc:  # a logged operation the fold refuses
            self._forget(caches)
            raise GridError(f"{label}: cannot fold the log from seq {seq}: {exc}") from exc

    def _forget(self, caches: Sequence[str]) -> None:
        for cache in caches:
            self._streams.pop(cache, None)

    def cut(self, cache: str, begin: Position, end: Position) -> Position:
        """A transaction's first sequence number (a transaction reaches Kafka whole)."""
        reader = self._log()
        seq = self._checked_seq(reader, cache, end)
        low = begin.next_seqs.get(STREAM, 0)
        first, following = self._guard(cache, lambda: reader.bulk_start(seq))
        return self._position(reader, first if first > low else following)

    def release(self, consumer: str) -> None:
        """Unregisters ``consumer`` from the Space's log: retention no longer waits for it."""
        try:
            self._log().unregister(consumer)
        except OperationLogError as exc:
            raise GridError(f"{consumer}: cannot unregister from the Space's log: {exc}"
                            ) from exc
        self._registered.discard(consumer)

    def acknowledge(self, consumer: str, position: Position) -> None:
        """Registers ``consumer`` as a consumer of the Space's log (once) and records its
        position: log retention removes only what every registered consumer passed.
        ``PositionLostError`` for a position of another log."""
        reader = self._log()
        seq = _stream_seq(reader, consumer, position, "acknowledged position")
        try:
            if consumer not in self._registered:
                reader.register(consumer)
                self._registered.add(consumer)
            reader.acknowledge(consumer, seq)
        except OperationLogError as exc:
            raise GridError(f"{consumer}: cannot acknowledge seq {seq} to the Space's log: "
                            f"{exc}") from exc

    def _checked_seq(self, reader: EmbeddedLogReader, cache: str, position: Position) -> int:
        raw = _stream_seq(reader, cache, position)
        seq = self._guard(cache, lambda: reader.resume_seq(raw))
        first, end = self._guard(cache, lambda: (reader.first_seq(), reader.end_seq()))
        if seq < first:
            raise _lost(cache, "retention",
                        f"log retention removed seq {seq} (the log now starts at {first})")
        if seq > end:
            raise _lost(cache, "ahead", f"seq {seq} is beyond the log's end ({end}): the position "
                        "does not come from this log as it is")
        return seq

    def _read(self, reader: EmbeddedLogReader, caches: Sequence[str], seq: int,
              max_changes: int, stop: int | None = None) -> ChangeBatch:
        declared = {cache: self._declared(cache) for cache in caches}
        states = {}
        for cache in caches:
            state = self._streams.get(cache)
            if state is None or state.next_seq > seq:
                self._streams.pop(cache, None)
                state = rebuild(reader, cache, seq, declared[cache])
            elif state.next_seq < seq:
                roll(reader, state, seq, declared[cache])
            self._streams[cache] = states[cache] = state
        changes: list[Change] = []
        scanned = 0
        next_seq = seq
        while not changes and scanned < _SCAN_OPS and (stop is None or next_seq < stop):
            bulks = reader.read(next_seq, max(max_changes, _READ_OPS))
            if not bulks:
                break
            for bulk in bulks:
                if stop is not None and bulk.first_seq >= stop:
                    break
                mine = [op for op in bulk.operations if op.type_name in states]
                if changes and len(changes) + len(mine) > max_changes:
                    break
                for op in mine:
                    cache = op.type_name
                    entity = states[cache].apply(op, declared[cache], strict=True)
                    if entity is None or entity.deleted:
                        changes.append(Change(cache, op.id, None, op.version, STREAM,
                                              op.version))
                    else:  # the fold's wire JSON, decoded only if asked for
                        changes.append(Change.of_json(cache, op.id, entity.data or "{}",
                                                      op.version, STREAM, op.version))
                next_seq = bulk.next_seq
                scanned += len(bulk.operations)
            for state in states.values():
                state.next_seq = next_seq
                state.settle(next_seq)
        return ChangeBatch(changes, self._position(reader, next_seq))

    def _position(self, reader: EmbeddedLogReader, seq: int) -> Position:
        return Position(_log_id(reader), {STREAM: seq})

    @staticmethod
    def _guard(cache: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except OperationLogError as exc:
            raise GridError(f"{cache}: cannot read the Space's log: {exc}") from exc

    # ------------------------------------------------------------ writing

    def apply(self, cache: str, writes: Sequence[Write], *, overwrite: bool = True) -> None:
        """One Space transaction per call (all or nothing). Creates a missing cache as a
        document type whose id property is ``config.id_property``; a value gets its key
        as its id property (a different id there is refused). Idempotent: see
        ``gridstream.grid._space_writes``. ``overwrite=False``: puts of absent keys only
        (``GridAdapter.apply``)."""
        self._log()
        if self._space is None:
            raise GridError(f"{cache}: the adapter is read-only; give it the open Space "
                            "or set writable=True (only the Space's owner can write)")
        if cache == APPLIED_TYPE:
            raise GridError(f"{cache!r} is reserved for the adapter's bookkeeping")
        apply_writes(self._space, cache, writes, self.config.id_property, self.config.source,
                     overwrite=overwrite)


def _close_quietly(reader: EmbeddedLogReader) -> None:
    try:
        reader.close()
    except Exception:  # noqa: BLE001 - closing a reader that already failed
        log.debug("closing a failed log reader failed", exc_info=True)


def _cache_names(reader: EmbeddedLogReader) -> list[str]:
    try:
        types = reader.types()
    except OperationLogError as exc:
        raise GridError(f"cannot read the Space's types: {exc}") from exc
    return sorted(name for name in types if name != APPLIED_TYPE)


def _log_id(reader: EmbeddedLogReader) -> str:
    log_id = reader.log_id()
    if not log_id:
        raise GridError("the Space's log has no id: positions could not be checked")
    return log_id


def _value(data: str | None) -> dict[str, Any]:
    value = orjson.loads(data) if data is not None else {}
    if not isinstance(value, dict):
        raise GridError("an entry's data is not a JSON object")
    return value


def _stream_seq(reader: EmbeddedLogReader, who: str, position: Position,
                what: str = "position") -> int:
    """The seq of ``position``, a position of this Space's log: ``PositionLostError``
    for another log's, ``ConfigError`` for one whose streams are not the Space's one."""
    lineage = _log_id(reader)
    if position.lineage != lineage:
        raise _lost(who, "lineage", f"the {what} belongs to log {position.lineage!r}, "
                    f"this Space's log is {lineage!r}")
    seq = position.next_seqs.get(STREAM)
    if seq is None or set(position.next_seqs) != {STREAM}:
        raise ConfigError(f"{who}: a Space position has exactly one stream "
                          f"{STREAM!r}, not {sorted(position.next_seqs)}")
    return seq


def _lost(cache: str, code: str, why: str) -> PositionLostError:
    """``code`` is the error's ``detail``: ``retention``, ``lineage`` or ``ahead``."""
    return PositionLostError(f"{cache}: the stored position is lost: {why}",
                             cache=cache, detail=code)
