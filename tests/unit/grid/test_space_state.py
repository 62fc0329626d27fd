"""Rebuilding a Space type's state at a sequence number from the bases the log offers."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import orjson
import pytest

from gridstream.errors import GridError, OperationLogError
from gridstream.grid._space_state import TypeState, UnknownBase, rebuild, roll
from gridstream.operations import Bulk, EntityId, Operation, OpType, TypeDescriptor
from gridstream.space.contract import LogReader, StateSnapshot

T = "Person"


def op(kind: str, key: EntityId, data: dict[str, Any] | None = None, type_name: str = T,
       removed: tuple[str, ...] = ()) -> Operation:
    return Operation(OpType(kind), type_name, key, 0, data, 0, 0, removed=removed)


class FakeLog(LogReader):
    """Bulks numbered from 1; ``start`` is the first retained seq."""

    def __init__(self, bulks: Sequence[Sequence[Operation]]) -> None:
        self.bulks: list[Bulk] = []
        seq = 1
        for ops in bulks:
            numbered = tuple(Operation(o.op, o.type_name, o.id, seq + i, o.data, 0, 0,
                                       removed=o.removed) for i, o in enumerate(ops))
            self.bulks.append(Bulk(seq, numbered))
            seq += len(ops)
        self.start = 1
        self.saved: StateSnapshot | None = None

    def save(self, next_seq: int, state: Mapping[EntityId, tuple[int, dict[str, Any]]]) -> None:
        """Record the saved state (as the Space would have it before ``next_seq``)."""
        self.saved = StateSnapshot(next_seq, [
            Operation(OpType.WRITE, T, k, v, d, 0, 0) for k, (v, d) in state.items()])

    def first_seq(self) -> int:
        return self.start

    def end_seq(self) -> int:
        return self.bulks[-1].next_seq if self.bulks else 1

    def read(self, from_seq: int, max_operations: int) -> Sequence[Bulk]:
        if from_seq < self.start:
            raise OperationLogError(f"seq {from_seq} is no longer retained")
        return [b for b in self.bulks if b.first_seq >= from_seq][:3]

    def acknowledge(self, consumer: str, next_seq: int) -> None:
        raise NotImplementedError

    def register(self, consumer: str) -> int:
        raise NotImplementedError

    def types(self) -> Mapping[str, TypeDescriptor]:
        return {}

    def state_snapshot(self, type_names: Collection[str] | None = None) -> StateSnapshot | None:
        return self.saved

    def close(self) -> None:
        pass


def values(state: TypeState) -> dict[EntityId, Any]:
    return {k: orjson.loads(s.data or "null") for k, s in state.live()}


HISTORY = [
    [op("WRITE", "a", {"id": "a", "n": 1, "m": {"x": 1}})],          # 1
    [op("WRITE", "b", {"id": "b", "n": 1})],                         # 2
    [op("CHANGE", "a", {"m.y": 2}, removed=("n",)),                  # 3
     op("WRITE", "z", {"id": "z"}, type_name="Other")],              # 4
    [op("PARTIAL_UPDATE", "b", {"n": 5, "k": None})],                # 5
    [op("REMOVE", "b", {"id": "b", "n": 5})],                        # 6
    [op("WRITE", "c", {"id": "c", "n": 3})],                         # 7
    [op("CHANGE", "a", {"n": 9})],                                   # 8
]
AT_6 = {"a": (3, {"id": "a", "m": {"x": 1, "y": 2}}), "b": (5, {"id": "b", "n": 5})}


def test_the_whole_log_folds_every_operation_with_the_one_rule() -> None:
    state = rebuild(FakeLog(HISTORY), T, 9, frozenset())
    assert state.complete and state.next_seq == 9
    assert values(state) == {"a": {"id": "a", "m": {"x": 1, "y": 2}, "n": 9},
                             "c": {"id": "c", "n": 3}}
    assert {k: s.version for k, s in state.live()} == {"a": 8, "c": 7}


def test_a_saved_state_not_newer_than_the_position_is_the_base() -> None:
    log = FakeLog(HISTORY)
    log.save(6, AT_6)
    log.start = 6  # retention removed what the saved state covers
    state = rebuild(log, T, 8, frozenset())
    assert state.complete
    assert values(state) == {"a": {"id": "a", "m": {"x": 1, "y": 2}}, "c": {"id": "c", "n": 3}}


def test_the_state_between_two_positions_is_exact() -> None:
    log = FakeLog(HISTORY)
    state = rebuild(log, T, 5, frozenset())
    assert values(state) == {"a": {"id": "a", "m": {"x": 1, "y": 2}}, "b": {"id": "b", "n": 1}}
    roll(log, state, 7, frozenset())
    assert values(state) == {"a": {"id": "a", "m": {"x": 1, "y": 2}}}


def test_after_retention_a_saved_state_newer_than_the_position_settles_untouched_keys() -> None:
    log = FakeLog(HISTORY)
    log.save(6, AT_6)
    log.start = 3  # the log before seq 3 is gone, the saved state is at 6
    state = rebuild(log, T, 5, frozenset())
    assert not state.complete and state.next_seq == 5
    assert "a" not in state.known and "b" not in state.known  # written whole before 3
    for o in log.read(5, 100)[0].operations:  # seq 5: a partial update of "b"
        with pytest.raises(UnknownBase) as caught:
            state.apply(o, frozenset(), strict=True)
        assert (caught.value.key, caught.value.seq) == ("b", 5)


def test_keys_untouched_until_the_saved_state_take_its_values() -> None:
    log = FakeLog(HISTORY)
    log.save(6, AT_6)
    log.start = 3
    state = rebuild(log, T, 6, frozenset())  # reaching the saved state settles every key
    assert state.complete
    assert values(state) == {"a": {"id": "a", "m": {"x": 1, "y": 2}}, "b": {"id": "b", "n": 5}}
    for bulk in log.read(6, 100):
        for o in bulk.operations:
            if o.type_name == T:
                state.apply(o, frozenset(), strict=True)
    assert values(state) == {"a": {"id": "a", "m": {"x": 1, "y": 2}, "n": 9},
                             "c": {"id": "c", "n": 3}}


def test_a_key_written_whole_in_the_retained_log_is_known_before_the_saved_state() -> None:
    log = FakeLog([*HISTORY, [op("CHANGE", "c", {"n": 4})]])
    log.save(9, {**AT_6, "c": (7, {"id": "c", "n": 3})})
    log.start = 7
    state = rebuild(log, T, 8, frozenset())
    assert not state.complete and set(state.known) == {"c"}
    change = log.read(9, 100)[0].operations[0]
    entity = state.apply(change, frozenset(), strict=True)
    assert entity is not None and orjson.loads(entity.data or "") == {"id": "c", "n": 4}


def test_retention_while_rebuilding_chooses_the_base_again() -> None:
    log = FakeLog(HISTORY)
    log.save(6, AT_6)
    reads = 0
    real_read = log.read

    def racing_read(from_seq: int, max_operations: int) -> Sequence[Bulk]:
        nonlocal reads
        reads += 1
        if reads == 1:
            log.start = 6  # retention passed the log's start meanwhile
        return real_read(from_seq, max_operations)

    log.read = racing_read  # type: ignore[method-assign]
    state = rebuild(log, T, 8, frozenset())
    assert values(state) == {"a": {"id": "a", "m": {"x": 1, "y": 2}}, "c": {"id": "c", "n": 3}}


def test_a_position_inside_a_bulk_is_refused() -> None:
    with pytest.raises(GridError, match="inside the bulk"):
        rebuild(FakeLog(HISTORY), T, 4, frozenset())


def test_declared_paths_are_unset_to_null() -> None:
    log = FakeLog([[op("WRITE", "a", {"id": "a", "n": 1, "d": 2})],
                   [op("CHANGE", "a", {}, removed=("n", "d"))]])
    state = rebuild(log, T, 3, frozenset({"n"}))
    assert values(state) == {"a": {"id": "a", "n": None}}


def test_every_operation_gives_the_state_the_fold_gives() -> None:
    """The state's own path for whole writes and removals (no envelope, no fold of one
    row) gives, field for field, what ``fold`` gives for every kind of operation, a
    value with a wire form (a date) included."""
    import datetime as dt

    from gridstream.fold import EntityState, fold, op_row
    from gridstream.protocol import Envelope

    ops = [op("WRITE", "a", {"id": "a", "n": 1, "d": dt.date(2026, 1, 2)}),
           op("UPDATE", "a", {"id": "a", "n": 2}),
           op("PARTIAL_UPDATE", "a", {"n": 3}),
           op("CHANGE", "a", {"m.y": 2}, removed=("n",)),
           op("REMOVE", "a", {"id": "a"}),
           op("WRITE", "a", {"id": "a", "n": 4}),
           op("TAKE", "a", {"id": "a", "n": 4})]
    state = TypeState(T, 1)
    expected = None
    states: list[EntityState | None] = []
    for seq, o in enumerate(ops, start=1):
        numbered = Operation(o.op, T, "a", seq, o.data, 0, 7 * seq, removed=o.removed)
        got = state.apply(numbered, frozenset(), strict=True)
        expected = fold(expected, [op_row(Envelope.from_operation(numbered))]).state
        assert got == expected, o.op
        states.append(got)
    # and literally (the fold and the fast path share whole_state)
    assert states[0] == EntityState(1, False, "WRITE", 7, '{"id":"a","n":1,"d":"2026-01-02"}')
    assert states[2] == EntityState(3, False, "PARTIAL_UPDATE", 21, '{"id":"a","n":3}')
    assert states[4] == EntityState(5, True, "REMOVE", 35, None)
    assert states[6] == EntityState(7, True, "TAKE", 49, None)
    state.apply(Operation(OpType.WRITE, T, "b", 9, {"id": "b"}, 0, 0), frozenset(), strict=True)
    for kind in ("WRITE", "REMOVE", "CHANGE"):  # a version not above the entry's: broken
        with pytest.raises(GridError, match="not above"):
            state.apply(Operation(OpType(kind), T, "b", 9, {"id": "b"}, 0, 0), frozenset(),
                        strict=True)
