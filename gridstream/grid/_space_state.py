"""The state of one Space type at a log sequence number, folded from the operation log.

The log's PARTIAL_UPDATE and CHANGE carry only what changed, while a change stream gives
the whole value after each change. The Space adapter therefore keeps, per cache, the
state just before its position and folds every operation onto it with the one rule
(``gridstream.fold``, i.e. ``gridstream.paths.apply_logged``) — never a second one.

A state at sequence number ``seq`` is rebuilt from the best base the log still offers:

1. the state the Space last saved (``LogReader.state_snapshot``), when it is not newer
   than ``seq``, then the log from its ``next_seq`` up to ``seq``;
2. else, when the log still starts at 1, nothing, then the whole log up to ``seq``;
3. else (retention removed the start, and the saved state is newer than ``seq``) only
   the keys the retained log writes whole (or removes) before ``seq`` are known. The
   others become known when the stream reaches the saved state's ``next_seq`` (an entry
   not touched between ``seq`` and there is the saved one). A partial operation on a
   key still unknown cannot be folded: ``UnknownBase`` (the position is lost).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gridstream.errors import GridError, OperationLogError
from gridstream.fold import (
    OP_NAMES,
    EntityState,
    OpRow,
    data_text,
    fold,
    is_whole,
    op_row,
    whole_state,
)
from gridstream.operations import EntityId, Operation, OpType
from gridstream.protocol import Envelope
from gridstream.space.contract import LogReader, StateSnapshot

__all__ = ["TypeState", "UnknownBase", "rebuild", "roll"]

_READ_OPS = 10_000
_REBUILD_ATTEMPTS = 3


class UnknownBase(Exception):  # noqa: N818 - internal signal, turned into PositionLostError
    """A partial operation met a key whose earlier state the log no longer holds."""

    def __init__(self, key: EntityId, seq: int) -> None:
        super().__init__(f"id {key!r} at seq {seq}")
        self.key = key
        self.seq = seq


def _row(op: Operation) -> OpRow:
    return op_row(Envelope.from_operation(op))


_PARTIAL = frozenset(op for op in OpType if op.is_partial)
_DELETES = frozenset(op for op in OpType if op.is_delete)


@dataclass(slots=True)
class TypeState:
    """Every entry of ``type_name`` just before ``next_seq`` (tombstones included).

    ``complete``: a key not in ``known`` is absent. Otherwise it is unknown until the
    fold reaches ``late_seq``, where ``late`` (the saved state) settles it.
    """

    type_name: str
    next_seq: int
    known: dict[EntityId, EntityState] = field(default_factory=dict)
    complete: bool = True
    late_seq: int = 0
    late: dict[EntityId, EntityState] | None = None

    @classmethod
    def from_snapshot(cls, type_name: str, snap: StateSnapshot) -> TypeState:
        return cls(type_name, snap.next_seq, _states(type_name, snap.entries))

    @classmethod
    def awaiting(cls, type_name: str, next_seq: int, snap: StateSnapshot | None) -> TypeState:
        """Case 3: only what the log from ``next_seq`` writes whole will be known."""
        if snap is None:
            return cls(type_name, next_seq, complete=False, late_seq=2**63)
        return cls(type_name, next_seq, complete=False, late_seq=snap.next_seq,
                   late=_states(type_name, snap.entries))

    def settle(self, seq: int) -> None:
        """Reaching ``late_seq``: every key still unknown takes its saved state."""
        if self.complete or seq < self.late_seq:
            return
        for key, state in (self.late or {}).items():
            self.known.setdefault(key, state)
        self.complete, self.late = True, None

    def apply(self, op: Operation, declared: frozenset[str], *, strict: bool
              ) -> EntityState | None:
        """Fold one operation of this type; its key's new state. A partial operation on
        an unknown key raises ``UnknownBase`` when ``strict``, else leaves it unknown."""
        self.settle(op.version)
        base = self.known.get(op.id)
        name = OP_NAMES[op.op]
        state: EntityState | None
        if is_whole(name):  # the hot path: no envelope, no fold of one row
            if base is not None and op.version <= base.version:
                state = None
            else:
                text = None if op.data is None or op.op in _DELETES else data_text(
                    op.data, f"{op.type_name} id={op.id!r} version={op.version}")
                state = whole_state(name, op.version, op.timestamp_ms, text)
        elif base is None and not self.complete and op.op in _PARTIAL:
            if strict:
                raise UnknownBase(op.id, op.version)
            return None
        else:
            state = fold(base, [_row(op)], declared).state
        if state is None:  # an operation not above the key's version: the log is broken
            raise GridError(f"{self.type_name} id {op.id!r}: seq {op.version} is not above "
                            f"the entry's version {base.version if base else '-'}")
        if state.deleted and self.complete:
            self.known.pop(op.id, None)
        else:
            self.known[op.id] = state
        return state

    def live(self) -> list[tuple[EntityId, EntityState]]:
        """The entries present (only when ``complete``)."""
        if not self.complete:
            raise GridError(f"{self.type_name}: the state before seq {self.next_seq} is "
                            "not fully known")
        return [(k, s) for k, s in self.known.items() if not s.deleted]


def _states(type_name: str, entries: Iterable[Operation]) -> dict[EntityId, EntityState]:
    out: dict[EntityId, EntityState] = {}
    for op in entries:
        if op.type_name == type_name:
            state = fold(None, [_row(op)]).state
            if state is not None:
                out[op.id] = state
    return out


def rebuild(reader: LogReader, type_name: str, seq: int,
            declared: frozenset[str]) -> TypeState:
    """The state of ``type_name`` just before ``seq`` (a bulk start the log retains),
    from the best base available (see the module docstring)."""
    for _ in range(_REBUILD_ATTEMPTS):
        first = reader.first_seq()
        snap = reader.state_snapshot([type_name])
        if snap is not None and first <= snap.next_seq <= seq:
            state = TypeState.from_snapshot(type_name, snap)
        elif first <= 1:
            state = TypeState(type_name, 1)
        else:
            state = TypeState.awaiting(type_name, reader.resume_seq(first), snap)
        try:
            roll(reader, state, seq, declared)
        except OperationLogError:
            if reader.first_seq() <= state.next_seq:
                raise
            continue  # retention passed the base while it was read: choose again
        return state
    raise GridError(f"{type_name}: retention kept removing the log while its state "
                    f"before seq {seq} was rebuilt")


def roll(reader: LogReader, state: TypeState, target: int, declared: frozenset[str]) -> None:
    """Fold the log from ``state.next_seq`` up to ``target`` (a bulk start) into ``state``
    (partial operations on unknown keys leave them unknown)."""
    while reader.resume_seq(state.next_seq) < target:
        bulks = reader.read(state.next_seq, _READ_OPS)
        if not bulks or bulks[0].first_seq >= target:
            raise GridError(f"{state.type_name}: the log has no bulk from seq "
                            f"{state.next_seq} before seq {target}")
        for bulk in bulks:
            if bulk.first_seq >= target:
                break
            if bulk.next_seq > target:
                raise GridError(f"seq {target} is inside the bulk starting at "
                                f"{bulk.first_seq}: not a position of this log")
            for op in bulk.operations:
                if op.type_name == state.type_name:
                    state.apply(op, declared, strict=False)
            state.next_seq = bulk.next_seq
    state.next_seq = max(state.next_seq, target)
    state.settle(state.next_seq)
