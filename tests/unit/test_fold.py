"""The state fold used by the SQL and lake sinks: semantics, order and replay safety."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.errors import InvalidEntryError
from gridstream.fold import EntityState, OpRow, fold


def _row(op: str, version: int, data: dict[str, Any] | None = None,
         removed: tuple[str, ...] = ()) -> OpRow:
    return OpRow(op, version, version * 10, None if data is None else orjson.dumps(data).decode(),
                 removed)


def _data(state: EntityState | None) -> Any:
    assert state is not None
    return None if state.data is None else orjson.loads(state.data)


def test_partial_update_writes_only_non_null_top_level_properties() -> None:
    ops = [_row("WRITE", 1, {"id": "a", "name": "x", "age": 3}),
           _row("PARTIAL_UPDATE", 2, {"name": "y", "age": None})]
    result = fold(None, ops)
    assert _data(result.state) == {"id": "a", "name": "y", "age": 3}
    assert result.applied == 2 and result.stale == 0


def test_change_sets_paths_and_unsets_declared_and_dynamic_properties() -> None:
    base = EntityState(5, False, "WRITE", 0, orjson.dumps(
        {"id": "a", "age": 3, "nick": "n", "address": {"city": "Oslo"}, "kafka.topic": "t"}
    ).decode())
    change = _row("CHANGE", 6, {"address.city": "Rome", "address.geo.lat": 1.5,
                                "kafka.topic": "u"}, removed=("age", "nick"))
    result = fold(base, [change], frozenset({"id", "age", "address"}))
    assert _data(result.state) == {"id": "a", "age": None, "kafka.topic": "u",
                                   "address": {"city": "Rome", "geo": {"lat": 1.5}}}


def test_change_nulls_a_removed_declared_nested_property() -> None:
    base = EntityState(5, False, "WRITE", 0, orjson.dumps(
        {"id": "a", "address": {"city": "Oslo", "zip": "1", "note": "x"}}).decode())
    change = _row("CHANGE", 6, {}, removed=("address.city", "address.note"))
    declared = frozenset({"id", "address", "address.city", "address.zip"})
    assert _data(fold(base, [change], declared).state) == {
        "id": "a", "address": {"city": None, "zip": "1"}}


def test_a_change_through_a_non_map_value_is_an_error_naming_the_operation() -> None:
    base = EntityState(5, False, "WRITE", 0, orjson.dumps({"id": "a", "m": 3}).decode())
    with pytest.raises(InvalidEntryError, match="CHANGE version 6: property 'm.k'"):
        fold(base, [_row("CHANGE", 6, {"m.k": 1})])


def test_remove_leaves_a_tombstone_that_rejects_older_writes() -> None:
    removed = fold(None, [_row("WRITE", 1, {"id": "a"}), _row("REMOVE", 4)]).state
    assert removed is not None and removed.deleted and removed.data is None
    late = fold(removed, [_row("WRITE", 2, {"id": "a", "late": True}),
                          _row("PARTIAL_UPDATE", 3, {"x": 1})])
    assert late.state is None and late.stale == 2
    again = fold(removed, [_row("WRITE", 7, {"id": "a", "new": 1})]).state
    assert again is not None and not again.deleted and _data(again) == {"id": "a", "new": 1}


def test_partial_update_on_a_missing_entity_starts_from_its_data() -> None:
    result = fold(None, [_row("PARTIAL_UPDATE", 3, {"x": 1, "y": None})])
    assert _data(result.state) == {"x": 1}


_OPS = st.sampled_from(["WRITE", "UPDATE", "PARTIAL_UPDATE", "CHANGE", "REMOVE"])
_VALUES = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3),
                    st.lists(st.integers(0, 3), max_size=2))
_DATA = st.dictionaries(st.sampled_from(["a", "b", "c", "d.e"]), _VALUES, max_size=3)


@st.composite
def _history(draw: st.DrawFn) -> list[OpRow]:
    kinds = draw(st.lists(_OPS, min_size=1, max_size=12))
    rows = []
    for version, kind in enumerate(kinds, start=1):
        data = None if kind == "REMOVE" else draw(_DATA)
        removed = tuple(draw(st.lists(st.sampled_from(["a", "b", "d.e"]), max_size=2))) \
            if kind == "CHANGE" else ()
        rows.append(_row(kind, version, data, removed))
    return rows


@settings(max_examples=200, deadline=None)
@given(_history(), st.randoms(use_true_random=False), st.integers(0, 12))
def test_any_order_and_any_replay_give_the_in_order_state(
        history: list[OpRow], rnd: Any, split: int) -> None:
    expected = fold(None, history).state
    shuffled = list(history)
    rnd.shuffle(shuffled)
    assert fold(None, shuffled).state == expected
    # applied in two batches (state carried over), then everything replayed
    first = fold(None, history[:split]).state
    second = fold(first, history[split:])
    carried = second.state if second.state is not None else first
    assert carried == expected
    replay = fold(carried, history)
    assert replay.state is None and replay.stale == len(history)


def test_the_folds_text_is_what_decoding_and_encoding_give_again() -> None:
    """A source passes the fold's text to Kafka as it is (the JSON converter would write
    ``orjson.dumps(orjson.loads(text))``): keys 1 and "1" of a nested map are one key
    in JSON, not two (they were written twice)."""
    import orjson

    from gridstream.fold import data_text

    for data in ({"id": "a", "m": {1: "int", "1": "str"}}, {"id": "b", "m": {2: "x"}},
                 {"id": "c", "f": 0.1, "g": -0.0, "n": 2**63, "s": "é", "l": [1, None]}):
        text = data_text(data, "t")
        assert orjson.dumps(orjson.loads(text)).decode() == text, text
    assert data_text({"m": {1: "a", "1": "b"}}, "t") == '{"m":{"1":"b"}}'
