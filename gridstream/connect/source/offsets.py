"""The source's offsets and how the next one is planned (pure logic, no Spark, no grid).

An offset (what Spark checkpoints for the source) holds, per cache, a ``CacheState``:

- **streaming**: ``pos``, the position the next batch reads from;
- **snapshotting**: ``snap`` (an immutable snapshot file), ``row`` of ``rows`` emitted
  so far, and ``pos``, the position taken BEFORE the scan, where the stream resumes;
- **skip** (``FailoverPolicy.NONE`` after a restart): the batch ending at this state
  counts the changes from the previous position to ``pos`` and emits none of them.

A streaming state may keep ``snap`` and ``until`` (the position after the scan) while
the stream passes the snapshot's window: on grids whose entries carry versions, a
change of that window whose version the snapshot already holds is not emitted again.

``plan`` turns the previous offset and a ``GridView`` (what the grid says now) into the
next offset: every cache advances towards its end position (a heartbeat: positions move
even without own changes), snapshots advance by ``batch_size`` rows, caches appear and
disappear, lost positions fail or re-snapshot. Batches read exactly what lies between
two offsets, so a batch re-run after a crash reads the same records.

A batch is bounded: the changes it streams (counted as sequence numbers between two
positions, an upper bound of the records) are at most the ``limit`` given to ``plan``;
a backlog drains as many batches. Where caches have streams of their own (Hazelcast:
a journal per map and partition) the limit is shared out fairly (every stream behind
gets the same share, at least one change); where every cache reads one shared stream
(``GridView.shared_stream``: the Space's log), the stream's span is counted once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from gridstream.connect.config import FailoverPolicy
from gridstream.connect.source.bounds import limited, upto
from gridstream.errors import ConfigError, PositionLostError
from gridstream.grid.contract import Position

__all__ = ["VERSION", "CacheState", "Event", "GridView", "Planner", "SnapshotMade",
           "SourceOffset", "Work", "batch_work", "initial_offset", "planned_changes",
           "position_dict", "position_from"]

VERSION = 1


def position_dict(position: Position) -> dict[str, Any]:
    raw: dict[str, Any] = {"lineage": position.lineage, "next": dict(position.next_seqs)}
    if position.marks:
        raw["marks"] = dict(position.marks)
    return raw


def position_from(raw: Mapping[str, Any]) -> Position:
    import orjson

    return Position.from_json(orjson.dumps(dict(raw)))


def brief(position: Position) -> str:
    """A position in a few words (a Hazelcast position names 271 partitions)."""
    seqs = position.next_seqs
    if len(seqs) <= 3:
        return ", ".join(f"{s}@{n}" for s, n in sorted(seqs.items())) or "-"
    return f"{len(seqs)} streams, {sum(seqs.values())} changes in"


def reached(position: Position, target: Position) -> bool:
    """Whether ``position`` is at or past ``target`` on every stream of ``target``."""
    return all(position.next_seqs.get(s, 0) >= seq for s, seq in target.next_seqs.items())


@dataclass(frozen=True)
class CacheState:
    pos: Position
    snap: str | None = None
    row: int | None = None
    rows: int | None = None
    until: Position | None = None
    skip: bool = False
    since: Position | None = None
    """With ``skip``, for a cache the previous offset lacks: where the skipped changes
    start."""

    @property
    def snapshotting(self) -> bool:
        return self.row is not None

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"pos": position_dict(self.pos)}
        if self.snap is not None:
            raw["snap"] = self.snap
        if self.row is not None:
            raw["row"], raw["rows"] = self.row, self.rows
        if self.until is not None:
            raw["until"] = position_dict(self.until)
        if self.skip:
            raw["skip"] = True
        if self.since is not None:
            raw["since"] = position_dict(self.since)
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CacheState:
        try:
            until, since = raw.get("until"), raw.get("since")
            row, rows = raw.get("row"), raw.get("rows")
            if (row is None) != (rows is None) or (row is not None and raw.get("snap") is None):
                raise TypeError("row, rows and snap go together")
            return cls(position_from(raw["pos"]), raw.get("snap"),
                       None if row is None else int(row), None if rows is None else int(rows),
                       None if until is None else position_from(until), bool(raw.get("skip")),
                       None if since is None else position_from(since))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"not a source cache offset: {exc}") from exc


@dataclass(frozen=True)
class Event:
    """Something the source reports with the batch that follows: ``kind`` is one of
    ``snapshot`` (started), ``skipped`` (NONE: changes made while stopped not emitted),
    ``lost`` (a lost position, re-snapshotted), ``discovered``, ``dropped``."""

    kind: Literal["snapshot", "skipped", "lost", "discovered", "dropped"]
    cache: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "cache": self.cache, "detail": self.detail}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Event:
        return cls(raw["kind"], str(raw["cache"]), str(raw.get("detail", "")))

    def text(self) -> str:
        return f"{self.kind} {self.cache}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class SourceOffset:
    caches: Mapping[str, CacheState] = field(default_factory=dict)
    time_ms: int = 0
    """When the batch ending here was planned: the records' ``timestamp_ms``."""
    events: Sequence[Event] = ()
    initial: bool = False
    """The offset of a new query (no checkpoint): nothing read yet."""

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"v": VERSION, "t": self.time_ms,
                               "caches": {c: s.to_dict() for c, s in sorted(self.caches.items())}}
        if self.events:  # a dict (Spark offsets are nested dicts of primitives)
            raw["events"] = {str(i): e.to_dict() for i, e in enumerate(self.events)}
        if self.initial:
            raw["initial"] = True
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SourceOffset:
        if not isinstance(raw, Mapping) or raw.get("v") != VERSION:
            raise ConfigError(f"not a gridstream source offset (version {VERSION}): {raw!r}")
        try:
            caches = {str(c): CacheState.from_dict(s) for c, s in raw.get("caches", {}).items()}
            events = tuple(Event.from_dict(raw["events"][k])
                           for k in sorted(raw.get("events", {}), key=int))
            return cls(caches, int(raw.get("t", 0)), events, bool(raw.get("initial")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"not a gridstream source offset: {exc}") from exc


def initial_offset() -> dict[str, Any]:
    """A new query's start: constant (Spark asks again when it re-runs batch 0)."""
    return SourceOffset(initial=True).to_dict()


@dataclass(frozen=True)
class SnapshotMade:
    """A materialised snapshot: its file, its row count, and the positions taken before
    and after the scan (``after`` only where entries carry versions)."""

    file: str
    rows: int
    before: Position
    after: Position | None


class GridView(Protocol):
    """What the planner asks the grid (the stream reader implements it over an adapter)."""

    def list_caches(self) -> list[str]: ...

    def end_position(self, cache: str) -> Position: ...

    def start_position(self, cache: str) -> Position: ...

    def span(self, cache: str, since: Position | None = None) -> tuple[Position, Position]:
        """``(start_position, end_position)`` at once (``GridAdapter.span``)."""

    def check(self, cache: str, position: Position) -> None:
        """Raise ``PositionLostError`` when ``position`` can no longer be read."""

    def snapshot(self, cache: str) -> SnapshotMade: ...

    @property
    def shared_stream(self) -> bool:
        """Whether every cache's position is a position in one shared stream (the
        Space's log), so a span of sequence numbers counts every cache's changes."""

    def cut(self, cache: str, begin: Position, end: Position) -> Position:
        """A position to end a bounded batch at, from ``end`` (short of the cache's end
        position): valid for the grid (the Space: a transaction's start, moved down, or
        up when down would not pass ``begin``) and with its marks."""


class Planner:
    """Plans offsets for one run of the source (one stream reader instance): the first
    plan of a run applies the failover policy."""

    def __init__(self, *, policy: FailoverPolicy, on_position_lost: str,
                 load_initial: bool, batch_size: int, whitelist: Sequence[str] = (),
                 blacklist: Sequence[str] = (), list_interval_ms: int = 5000) -> None:
        self.policy = policy
        self.on_position_lost = on_position_lost
        self.load_initial = load_initial
        self.batch_size = batch_size
        self.whitelist = [re.compile(p) for p in whitelist]
        self.blacklist = [re.compile(p) for p in blacklist]
        self.list_interval_ms = list_interval_ms
        self.first = True
        self._listed_at: int | None = None
        self._known: list[str] = []

    def wanted(self, cache: str) -> bool:
        """Whitelist first (empty: every cache), then blacklist; full matches."""
        if self.whitelist and not any(p.fullmatch(cache) for p in self.whitelist):
            return False
        return not any(p.fullmatch(cache) for p in self.blacklist)

    def _caches(self, grid: GridView, now_ms: int, force: bool = False) -> list[str]:
        due = self._listed_at is None or now_ms - self._listed_at >= self.list_interval_ms
        if force or due:
            self._known = [c for c in grid.list_caches() if self.wanted(c)]
            self._listed_at = now_ms
        return self._known

    def plan(self, start: SourceOffset, grid: GridView, now_ms: int, limit: int | None = None,
             target: Mapping[str, Position] | None = None) -> SourceOffset:
        """The next offset after ``start``; ``start`` itself (same content) when nothing
        moved, so Spark runs no batch. The changes streamed are at most ``limit`` (None:
        all); with ``target`` (a run that ends: Spark's available-now trigger), no cache
        goes past its position there, and caches it lacks are not read. A plan that
        raises leaves the planner as it was (the first plan of a run stays the first
        until one succeeds)."""
        planned = self._plan(start, grid, now_ms, limit, target)
        self.first = False
        return planned

    def _plan(self, start: SourceOffset, grid: GridView, now_ms: int, limit: int | None,
              target: Mapping[str, Position] | None) -> SourceOffset:
        first = self.first
        caches = self._caches(grid, now_ms, force=first)
        events: list[Event] = []
        out: dict[str, CacheState] = {}
        for cache in caches:
            state = start.caches.get(cache)
            if target is not None and cache not in target and state is None:
                continue  # appeared after the available-now run began: not this run's
            try:
                out[cache] = self._next(cache, state, start, grid, first, events)
            except PositionLostError as lost:
                if cache not in self._caches(grid, now_ms, force=True):
                    continue  # dropped meanwhile: reported below
                if self.on_position_lost != "snapshot":
                    raise PositionLostError(
                        f"source: cache {cache!r}: {lost} (onPositionLost='fail'; with "
                        "onPositionLost='snapshot' the cache is loaded again)",
                        cache=cache, detail=lost.detail) from lost
                out[cache] = self._snapshot(cache, grid, events, "lost",
                                            f"{lost.detail}: {lost}")
        for cache in sorted(set(start.caches) - set(out)):
            events.append(Event("dropped", cache, "no longer in the grid or the lists"))
        out = _bound(start, out, target, limit, grid)
        if not events and {c: s.to_dict() for c, s in out.items()} == {
                c: s.to_dict() for c, s in start.caches.items()}:
            return start if not start.initial and not start.events else SourceOffset(
                out, start.time_ms)
        return SourceOffset(out, now_ms, events)

    def _next(self, cache: str, state: CacheState | None, start: SourceOffset,
              grid: GridView, first: bool, events: list[Event]) -> CacheState:
        if state is None:
            return self._new(cache, start, grid, first, events)
        if first and self.policy is FailoverPolicy.FULL_SNAPSHOT:
            return self._snapshot(cache, grid, events, "snapshot", "FULL_SNAPSHOT start")
        if state.snapshotting:
            assert state.row is not None and state.rows is not None
            if state.row < state.rows:
                return replace(state, row=min(state.rows, state.row + self.batch_size))
            # every row emitted: stream from the position taken before the scan
            state = CacheState(state.pos, state.snap if state.until else None,
                               until=state.until)
        if first:
            grid.check(cache, state.pos)
        end = self._end(cache, state.pos, grid)
        if first and self.policy is FailoverPolicy.NONE:
            if end.to_json() == state.pos.to_json():
                return CacheState(end)
            events.append(Event("skipped", cache, f"NONE start: changes from "
                                f"{brief(state.pos)} to {brief(end)} not emitted"))
            return CacheState(end, skip=True)
        return self._streaming(state, end)

    def _new(self, cache: str, start: SourceOffset, grid: GridView, first: bool,
             events: list[Event]) -> CacheState:
        if start.initial or (first and self.policy is FailoverPolicy.FULL_SNAPSHOT):
            if self.load_initial or self.policy is FailoverPolicy.FULL_SNAPSHOT:
                return self._snapshot(cache, grid, events, "snapshot", "initial load")
            return CacheState(grid.end_position(cache))
        begin = grid.start_position(cache)
        if first and self.policy is FailoverPolicy.NONE:
            # created while the connector was down: its changes are skipped, counted
            end = grid.end_position(cache)
            events.append(Event("skipped", cache, f"NONE start, a cache created while "
                                f"stopped: changes from {brief(begin)} to {brief(end)} "
                                "not emitted"))
            return CacheState(end, skip=True, since=begin)
        events.append(Event("discovered", cache, "streams from its oldest change"))
        return CacheState(begin)

    def _snapshot(self, cache: str, grid: GridView, events: list[Event], kind: Any,
                  why: str) -> CacheState:
        made = grid.snapshot(cache)
        events.append(Event(kind, cache, f"{why}; {made.rows} entries, stream resumes at "
                            f"{brief(made.before)}"))
        return CacheState(made.before, made.file, min(made.rows, self.batch_size), made.rows,
                          made.after)

    def _end(self, cache: str, pos: Position, grid: GridView) -> Position:
        oldest, end = grid.span(cache, pos)
        if end.lineage != pos.lineage:
            raise PositionLostError(f"the position belongs to lineage {pos.lineage!r}, the "
                                    f"grid is now {end.lineage!r}", cache=cache,
                                    detail="lineage")
        if dict(end.next_seqs) == dict(pos.next_seqs):
            return end  # nothing written since: nothing can have overflowed
        for stream, seq in pos.next_seqs.items():
            if seq < oldest.next_seqs.get(stream, 0):
                raise PositionLostError(
                    f"stream {stream} now starts at {oldest.next_seqs[stream]}, after the "
                    f"stored {seq} (overflow or retention)", cache=cache, detail="overflow")
            if seq > end.next_seqs.get(stream, seq):
                raise PositionLostError(f"stream {stream} ends at {end.next_seqs[stream]}, "
                                        f"before the stored {seq}", cache=cache,
                                        detail="ahead")
        return end

    @staticmethod
    def _streaming(state: CacheState, end: Position) -> CacheState:
        if state.until is not None and reached(state.pos, state.until):
            return CacheState(end)
        return CacheState(end, state.snap, until=state.until)


def _bound(start: SourceOffset, out: dict[str, CacheState],
           target: Mapping[str, Position] | None, limit: int | None,
           grid: GridView) -> dict[str, CacheState]:
    """``out`` with every streaming cache's end held at ``target`` (a cache it lacks does
    not move) and its changes bounded by ``limit`` (snapshots are bounded by
    ``batch_size`` rows; a skip only counts, it writes nothing). A cut end is the grid's
    to place (``GridView.cut``: a valid position, with its marks)."""
    moving: dict[str, tuple[Position, Position]] = {}
    streaming: dict[str, CacheState] = {}
    for cache, state in out.items():
        before = start.caches.get(cache)
        if state.snapshotting or state.skip or before is None:
            continue
        if before.snapshotting:  # every row emitted: streams from the position before it
            before = CacheState(before.pos, before.snap if before.until else None,
                                until=before.until)
        streaming[cache] = before
        end = state.pos
        if target is not None:
            held = target.get(cache)
            end = (before.pos if held is None or held.lineage != end.lineage
                   else upto(before.pos, end, held.next_seqs))
        moving[cache] = (before.pos, end)
    if limit is not None and moving:
        moving = limited(moving, limit, grid.shared_stream)
    result = dict(out)
    for cache, (begin, end) in moving.items():
        if end != out[cache].pos:
            if end.next_seqs != begin.next_seqs:
                end = grid.cut(cache, begin, end)
            result[cache] = Planner._streaming(streaming[cache], end)
    return result


def planned_changes(start: SourceOffset, end: SourceOffset, shared: bool) -> int:
    """How many changes and snapshot rows the batch from ``start`` to ``end`` reads at
    most (spans of sequence numbers; on a shared stream, caches standing at the same
    position read one span, counted once — as ``_limited`` shares them out)."""
    rows = 0
    high: dict[tuple[str, str, int], int] = {}
    for cache, state in end.caches.items():
        before = start.caches.get(cache)
        if state.snapshotting:
            same = before is not None and before.snap == state.snap and before.row is not None
            rows += (state.row or 0) - (before.row or 0 if same and before else 0)
            continue
        if before is None or state.skip:
            continue
        for stream, seq in state.pos.next_seqs.items():
            begin = before.pos.next_seqs.get(stream, seq)
            key = ("", stream, begin) if shared else (cache, stream, begin)
            high[key] = max(high.get(key, seq), seq)
    return rows + sum(max(n - begin, 0) for (_, _, begin), n in high.items())


@dataclass(frozen=True)
class Work:
    """What one batch reads of one cache: snapshot rows ``[row_from, row_to)`` of
    ``snap``, or the changes from ``start`` to ``end`` (only counted when ``skip``;
    settled against ``snap`` below ``until``)."""

    cache: str
    snap: str | None = None
    row_from: int = 0
    row_to: int = 0
    start: Position | None = None
    end: Position | None = None
    skip: bool = False
    until: Position | None = None


def batch_work(cache: str, start: CacheState | None, end: CacheState) -> Work | None:
    """What the batch from ``start`` to ``end`` reads of ``cache`` (None: nothing)."""
    if end.skip:
        # a finished snapshot's ``pos`` is where its stream was due to resume: skip from it
        begin = start.pos if start is not None else end.since
        if begin is None or begin.to_json() == end.pos.to_json():
            return None
        return Work(cache, start=begin, end=end.pos, skip=True)
    if end.snapshotting:
        assert end.row is not None
        same = start is not None and start.snapshotting and start.snap == end.snap
        first = start.row if same and start is not None and start.row is not None else 0
        if end.row <= first:
            return None
        return Work(cache, snap=end.snap, row_from=first, row_to=end.row)
    if start is None or start.pos.to_json() == end.pos.to_json():
        return None
    snap = end.snap or start.snap
    until = end.until or start.until
    return Work(cache, snap=snap if until else None, start=start.pos, end=end.pos,
                until=until)
