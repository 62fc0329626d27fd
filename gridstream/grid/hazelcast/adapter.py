"""The Hazelcast grid adapter: caches are IMaps, changes come from their event journals.

Values are stored as ``HazelcastJsonValue`` (the wire-form JSON object as text), so
Hazelcast SQL and predicates can query their fields. Keys are strings or integers
(integers as Java ``long``).

A position is the cluster's id (its lineage) and, per partition, the next journal
sequence to read. It survives a restart of the job and the loss of a member (the journal
has backups); a restart of the whole cluster (new id) or a journal overflow loses it,
which ``read_changes`` detects and reports as ``PositionLostError``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson
from hazelcast.client import HazelcastClient
from hazelcast.config import IntType
from hazelcast.core import DistributedObjectEvent, DistributedObjectEventType, HazelcastJsonValue
from hazelcast.errors import HazelcastError, HazelcastSerializationError
from hazelcast.proxy import MAP_SERVICE

from gridstream.errors import ConfigError, GridError, PositionLostError
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
    changes_after,
    first_puts,
)
from gridstream.grid.hazelcast import _codec, _journal, _writes
from gridstream.grid.hazelcast._codec import JournalEvent
from gridstream.grid.hazelcast._positions import allocate as _allocate
from gridstream.grid.hazelcast._positions import mark as _mark
from gridstream.grid.hazelcast._positions import marks_of as _marks
from gridstream.grid.hazelcast._positions import start_partition as _start_partition
from gridstream.grid.hazelcast._values import entry_name, json_object, value_of

__all__ = ["HazelcastAdapter", "HazelcastGridConfig"]

INTERNAL_PREFIX = "__"
"""Hazelcast's own maps (SQL catalog, Jet) start with this and are never caches."""

# EntryEventType numbers a map's journal records.
_PUT_EVENTS = frozenset({1, 4, 128, 512})  # added, updated, merged, loaded
_GONE_EVENTS = frozenset({2, 8, 16})  # removed, evicted, expired
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class HazelcastGridConfig:
    """How to reach the cluster. Picklable (Spark ships it to executors); holds no secret."""

    cluster_name: str = "gridstream"
    members: tuple[str, ...] = ("127.0.0.1:5701",)
    connect_timeout_s: float = 30.0
    """How long to try to reach the cluster, at open and after losing it, before failing."""
    invocation_timeout_s: float = 60.0
    """How long one operation may be retried (e.g. while a lost member's partitions move)."""
    smart_routing: bool = field(default=True)
    source: str = "default"
    """The writer whose versions versioned ``apply`` compares (writers with unrelated
    version sequences need distinct sources)."""

    def __post_init__(self) -> None:
        if not self.cluster_name:
            raise ConfigError("hazelcast: cluster_name must not be empty")
        if not self.members or not all(isinstance(m, str) and m for m in self.members):
            raise ConfigError("hazelcast: members must list at least one 'host:port'")
        if self.connect_timeout_s <= 0 or self.invocation_timeout_s <= 0:
            raise ConfigError("hazelcast: timeouts must be positive")
        if not isinstance(self.source, str) or not self.source:
            raise ConfigError("hazelcast: source must be a non-empty string")


class HazelcastAdapter(GridAdapter):
    """Hazelcast IMaps through ``hazelcast-python-client``. Thread-safe after ``open()``."""

    position_survives: ClassVar[str] = (
        "a restart of the job and the loss of a member (the journal has backups); not a "
        "restart of the whole cluster nor a journal overflow nor the map's destruction and "
        "re-creation (each raises PositionLostError)"
    )

    def __init__(self, config: HazelcastGridConfig) -> None:
        self.config = config
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HazelcastAdapter({self.config!r})"

    def __reduce__(self) -> tuple[type[HazelcastAdapter], tuple[HazelcastGridConfig]]:
        """Pickles as its config (unopened): each process opens its own connection."""
        return (HazelcastAdapter, (self.config,))

    # -- connection ---------------------------------------------------------------------

    def open(self) -> None:
        with self._lock:
            if self._client is not None:
                return
            c = self.config
            try:
                self._client = HazelcastClient(
                    cluster_name=c.cluster_name, cluster_members=list(c.members),
                    cluster_connect_timeout=c.connect_timeout_s,
                    invocation_timeout=c.invocation_timeout_s, smart_routing=c.smart_routing,
                    default_int_type=IntType.LONG,
                )
            except HazelcastError as exc:
                raise GridError(
                    f"hazelcast: cannot reach cluster {c.cluster_name!r} at {list(c.members)}: "
                    f"{_journal.brief(exc)}"
                ) from exc

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.shutdown()

    @property
    def client(self) -> Any:
        """The connected ``HazelcastClient`` (``GridError`` before ``open()``)."""
        if self._client is None:
            raise GridError("hazelcast adapter is not open")
        return self._client

    def cluster_id(self) -> str:
        return _journal.cluster_id(self.client)

    def _partitions(self) -> list[int]:
        return list(range(self.client.partition_service.get_partition_count()))

    # -- caches -------------------------------------------------------------------------

    def list_caches(self) -> list[str]:
        try:
            objects = self.client.get_distributed_objects()
        except HazelcastError as exc:
            raise GridError(f"hazelcast: cannot list maps: {_journal.brief(exc)}") from exc
        return sorted(
            o.name for o in objects
            if o.service_name == MAP_SERVICE and not o.name.startswith(INTERNAL_PREFIX)
        )

    def watch_caches(self, listener: Callable[[CacheEvent], None]) -> Callable[[], None]:
        kinds = {DistributedObjectEventType.CREATED: "created",
                 DistributedObjectEventType.DESTROYED: "removed"}

        def on_event(event: DistributedObjectEvent) -> None:
            kind = kinds.get(event.event_type)
            if (kind is not None and event.service_name == MAP_SERVICE
                    and not event.name.startswith(INTERNAL_PREFIX)):
                listener(CacheEvent(kind, event.name))  # type: ignore[arg-type]

        client = self.client
        try:
            registration = client.add_distributed_object_listener(on_event).result()
        except HazelcastError as exc:
            raise GridError(f"hazelcast: cannot watch maps: {_journal.brief(exc)}") from exc

        def stop() -> None:
            if client.lifecycle_service.is_running():
                client.remove_distributed_object_listener(registration).result()

        return stop

    def _map(self, cache: str) -> Any:
        return self.client.get_map(_check_cache(cache))

    def snapshot(self, cache: str, batch_size: int) -> Iterator[list[Entry]]:
        """Keys first, then their values in batches (``get_all``): a key removed meanwhile
        is left out, a value changed meanwhile is read as it is then."""
        if batch_size < 1:
            raise ConfigError(f"snapshot batch_size must be positive, not {batch_size}")
        entries = self._map(cache)
        try:
            keys = entries.key_set().result()
        except HazelcastError as exc:
            raise GridError(f"cache {cache!r}: cannot list keys: {_journal.brief(exc)}") from exc
        for start in range(0, len(keys), batch_size):
            chunk = keys[start : start + batch_size]
            try:
                found = entries.get_all(chunk).result()
            except HazelcastError as exc:
                raise GridError(
                    f"cache {cache!r}: cannot read entries: {_journal.brief(exc)}"
                ) from exc
            batch = [
                Entry(key, value_of(cache, found[k], key))
                for k in chunk if k in found for key in (_key(cache, k),)
            ]
            if batch:
                yield batch

    def get_all(self, cache: str, keys: Collection[Key]) -> dict[Key, Value]:
        """One ``getAll`` of the map (a missing map holds nothing)."""
        wanted = list(dict.fromkeys(_check_key(cache, k) for k in keys))
        if not wanted:
            return {}
        try:
            found = self._map(cache).get_all(wanted).result()
        except HazelcastError as exc:
            raise GridError(f"cache {cache!r}: cannot read entries: {_journal.brief(exc)}") \
                from exc
        return {key: value_of(cache, v, key) for k, v in found.items()
                for key in (_key(cache, k),)}

    # -- positions and changes ----------------------------------------------------------

    def _bounds(self, cache: str) -> tuple[str, dict[int, _journal.Bounds]]:
        """The cluster's id and every partition's journal bounds, both of one cluster."""
        _check_cache(cache)
        lineage = self.cluster_id()
        bounds = _journal.subscribe(self.client, cache, self._partitions())
        if self.cluster_id() != lineage:
            raise GridError(f"cache {cache!r}: the cluster restarted while its journal was read")
        return lineage, bounds

    def end_position(self, cache: str) -> Position:
        return self.span(cache)[1]

    def behind(self, cache: str, position: Position) -> int | None:
        """From one journal subscription (no event read: ``end_position`` reads each
        moved partition's last event for its mark)."""
        lineage, bounds = self._bounds(cache)
        if lineage != position.lineage:
            return None
        return changes_after({str(p): b.end for p, b in bounds.items()}, position)

    def span(self, cache: str, since: Position | None = None) -> tuple[Position, Position]:
        """The start and end positions from one journal subscription; the end's marks
        read only for partitions that moved since ``since`` (the others keep its)."""
        lineage, bounds = self._bounds(cache)
        start = Position(lineage, {str(p): b.oldest for p, b in bounds.items()})
        nexts = {p: b.end for p, b in bounds.items()}
        kept = ({} if since is None or since.lineage != lineage else
                {str(p): since.marks[str(p)] for p, n in nexts.items()
                 if str(p) in since.marks and since.next_seqs.get(str(p)) == n})
        marked = {p: b.end - 1 for p, b in bounds.items()
                  if b.end > b.oldest and str(p) not in kept}
        reads = _journal.read_partitions(self.client, cache, marked, dict.fromkeys(marked, 1))
        if self.cluster_id() != lineage:
            raise GridError(f"cache {cache!r}: the cluster restarted while its journal was read")
        marks = dict(kept)
        for read in reads:
            if read.seqs != [marked[read.partition]]:
                raise GridError(
                    f"cache {cache!r}: partition {read.partition} answered no event at "
                    f"{marked[read.partition]}, inside its journal"
                )
            marks[str(read.partition)] = _mark(read.events[0])
        return start, Position(lineage, {str(p): s for p, s in nexts.items()}, marks)

    def cut(self, cache: str, begin: Position, end: Position) -> Position:
        """``end`` with the marks of the partitions it stops short in (the event just
        before each one's next sequence, read from the journal)."""
        nexts = self._check_lineage(cache, end)
        wanted = {p: seq - 1 for p, seq in nexts.items()  # the partitions that moved
                  if str(p) not in end.marks and seq > begin.next_seqs.get(str(p), seq)}
        reads = _journal.read_partitions(self.client, cache, wanted, dict.fromkeys(wanted, 1))
        marks = dict(end.marks)
        for read in reads:
            if read.seqs != [wanted[read.partition]]:
                raise GridError(f"cache {cache!r}: partition {read.partition} answered no "
                                f"event at {wanted[read.partition]}, inside its journal")
            marks[str(read.partition)] = _mark(read.events[0])
        return Position(end.lineage, dict(end.next_seqs), marks)

    def start_position(self, cache: str) -> Position:
        lineage, bounds = self._bounds(cache)
        return Position(lineage, {str(p): b.oldest for p, b in bounds.items()})

    def read_changes(self, cache: str, position: Position, max_changes: int) -> ChangeBatch:
        """Changes from ``position``. Each partition the position marks is read from the
        event just before its next sequence, whose fingerprint must match the mark (else
        the map was re-created: ``PositionLostError`` with detail ``"recreated"``)."""
        if max_changes < 1:
            raise ConfigError(f"max_changes must be positive, not {max_changes}")
        nexts = self._check_lineage(cache, position)
        marks = _marks(cache, position, nexts)
        lineage, bounds = self._bounds(cache)
        if lineage != position.lineage:
            raise _lineage_lost(cache, position.lineage, lineage)
        if set(nexts) != set(bounds):
            raise ConfigError(
                f"cache {cache!r}: the position names partitions {len(nexts)}, the cluster "
                f"has {len(bounds)}: not a position of this grid"
            )
        for p, seq in nexts.items():
            _check_seq(cache, p, seq, bounds[p])
            if p in marks and seq - 1 < bounds[p].oldest:
                raise PositionLostError(
                    f"cache {cache!r}: partition {p}'s journal now starts at "
                    f"{bounds[p].oldest}: the event before the stored sequence {seq} is "
                    "gone (journal overflow)",
                    cache=cache, detail="overflow",
                )
        pending = {p: bounds[p].end - seq for p, seq in nexts.items() if bounds[p].end > seq}
        sizes, _ = _allocate(pending, max_changes, _start_partition(nexts), len(bounds))
        starts = {p: nexts[p] - 1 if p in marks else nexts[p] for p in set(sizes) | set(marks)}
        counts = {p: sizes.get(p, 0) + (1 if p in marks else 0) for p in starts}
        reads = _journal.read_partitions(self.client, cache, starts, counts) if starts else []
        if self.cluster_id() != lineage:
            raise _lineage_lost(cache, position.lineage, self.cluster_id())
        changes: list[Change] = []
        new_marks = {str(p): m for p, m in marks.items()}
        for read in reads:
            seqs, events = read.seqs, read.events
            if read.partition in marks:
                if not seqs or _mark(events[0]) != marks[read.partition]:
                    raise PositionLostError(
                        f"cache {cache!r}: partition {read.partition}'s event at "
                        f"{nexts[read.partition] - 1} is not the one the position saw: the "
                        "map was destroyed and re-created",
                        cache=cache, detail="recreated",
                    )
                seqs, events = seqs[1:], events[1:]
            for seq, event in zip(seqs, events, strict=True):
                changes.append(_change(self, cache, read.partition, seq, event))
            if seqs:
                nexts[read.partition] = seqs[-1] + 1
                new_marks[str(read.partition)] = _mark(events[-1])
        return ChangeBatch(
            changes, Position(lineage, {str(p): s for p, s in nexts.items()}, new_marks)
        )

    def _check_lineage(self, cache: str, position: Position) -> dict[int, int]:
        current = self.cluster_id()
        if position.lineage != current:
            raise _lineage_lost(cache, position.lineage, current)
        try:
            return {int(stream): seq for stream, seq in position.next_seqs.items()}
        except ValueError as exc:
            raise ConfigError(
                f"cache {cache!r}: position streams must be partition ids: {exc}"
            ) from exc

    def decode_key(self, cache: str, data: Any) -> Key:
        try:
            plain = _codec.plain_key(bytes(data.buffer))
            if plain is not None:
                return plain
            return _key(cache, self.client._serialization_service.to_object(data))
        except (HazelcastSerializationError, UnicodeDecodeError) as exc:
            raise GridError(
                f"cache {cache!r}: a key cannot be read: {_journal.brief(exc)}"
            ) from exc

    def decode_value(self, cache: str, data: Any, key: Key | None = None) -> Value:
        """A journal event's value (``key``, when known, names the entry in errors)."""
        try:
            text = _codec.json_text(bytes(data.buffer))
            if text is not None:
                return json_object(cache, text, key)
            return value_of(cache, self.client._serialization_service.to_object(data), key)
        except (HazelcastSerializationError, UnicodeDecodeError) as exc:
            raise GridError(
                f"{entry_name(cache, key)}: a value cannot be read: {_journal.brief(exc)}"
            ) from exc

    # -- writes -------------------------------------------------------------------------

    def apply(self, cache: str, writes: Sequence[Write], *, overwrite: bool = True) -> None:
        """Puts and removes, creating the map if missing.

        Without versions, in the batch's order (runs of puts as one ``put_all``, runs of
        removes in parallel): the last write wins. With a version on every write, each
        key's newest write is applied unless the grid holds, for the config's ``source``,
        a version that is not older, in transactions (see ``_writes``). Either way,
        re-running a batch (after a failure anywhere in it) leaves every key it names as
        its first complete run did. ``overwrite=False``: each key's first put, only if
        the key is absent (``putIfAbsent``; with versions, inside the transaction).
        """
        try:
            entries = self._map(cache)
        except HazelcastError as exc:
            raise GridError(f"cache {cache!r}: cannot open the map: {_journal.brief(exc)}"
                            ) from exc
        encoded: dict[int, HazelcastJsonValue] = {}  # each value checked and encoded once
        for write in writes:
            _check_key(cache, write.key)
            if write.value is not None:
                encoded[id(write)] = _json(cache, write)

        def encode(write: Write) -> HazelcastJsonValue:
            return encoded[id(write)]

        versioned = any(w.version is not None for w in writes)
        if not overwrite:
            writes = first_puts(writes)
        try:
            if versioned:
                _writes.apply_versioned(
                    self.client, cache, writes, encode,
                    source=self.config.source, timeout_s=2 * self.config.invocation_timeout_s,
                    overwrite=overwrite,
                )
            elif overwrite:
                _writes.apply_plain(entries, writes, encode)
            else:
                _writes.apply_absent(entries, writes, encode)
        except HazelcastError as exc:
            raise GridError(f"cache {cache!r}: write failed: {_journal.brief(exc)}") from exc
        except GridError as exc:
            raise GridError(f"cache {cache!r}: {exc}") from exc


def _check_cache(cache: str) -> str:
    if not cache or cache.startswith(INTERNAL_PREFIX):
        raise GridError(f"hazelcast: {cache!r} is not a cache name (empty or internal)")
    return cache


def _lineage_lost(cache: str, stored: str, current: str) -> PositionLostError:
    return PositionLostError(
        f"cache {cache!r}: the position belongs to cluster {stored}, the cluster is now "
        f"{current} (restarted as a whole): its event journal is gone",
        cache=cache, detail="lineage",
    )


def _check_seq(cache: str, p: int, seq: int, bounds: _journal.Bounds) -> None:
    if seq < bounds.oldest:
        raise PositionLostError(
            f"cache {cache!r}: partition {p}'s journal now starts at {bounds.oldest}, after "
            f"the stored sequence {seq}: events were lost (journal overflow)",
            cache=cache, detail="overflow",
        )
    if seq > bounds.end:
        raise PositionLostError(
            f"cache {cache!r}: partition {p}'s journal ends at {bounds.end}, before the "
            f"stored sequence {seq} (the map was destroyed or the journal reset)",
            cache=cache, detail="ahead",
        )


def _change(
    adapter: HazelcastAdapter, cache: str, partition: int, seq: int, event: JournalEvent
) -> Change:
    if event.key is None:
        raise GridError(f"cache {cache!r}: journal event {partition}/{seq} has no key")
    key = adapter.decode_key(cache, event.key)
    if event.event_type in _PUT_EVENTS and event.new_value is not None:
        value: Value | None = adapter.decode_value(cache, event.new_value, key)
    elif event.event_type in _GONE_EVENTS:
        value = None
    else:
        raise GridError(
            f"cache {cache!r}: journal event {partition}/{seq} has type {event.event_type} "
            "and no value: not a put or a removal"
        )
    return Change(cache, key, value, seq, str(partition), seq)


def _check_key(cache: str, key: Key) -> Key:
    if type(key) is str or (type(key) is int and _LONG_MIN <= key <= _LONG_MAX):
        return key
    raise GridError(f"cache {cache!r}: a key must be a string or a 64-bit integer")


def _key(cache: str, key: object) -> Key:
    if type(key) is str or type(key) is int:
        return key
    raise GridError(f"cache {cache!r}: a key of type {type(key).__name__} is not a cache key")


def _json(cache: str, write: Write) -> HazelcastJsonValue:
    if not isinstance(write.value, dict):
        raise GridError(f"cache {cache!r}: a value must be a JSON object")
    try:
        return HazelcastJsonValue(orjson.dumps(write.value).decode())
    except TypeError as exc:
        raise GridError(f"cache {cache!r}: a value cannot be written as JSON: {exc}") from exc
