"""The transform chain: every type, its options, and the errors of both kinds."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridstream.connect.config import TransformConfig
from gridstream.connect.record import Record
from gridstream.connect.transforms import TRANSFORM_TYPES, build_chain, key_from_fields
from gridstream.errors import CodecError, ConfigError


def _step(**options: Any) -> TransformConfig:
    return TransformConfig.model_validate(options)


def _run(*steps: dict[str, Any], record: Record | None = None) -> Record:
    chain = build_chain([_step(**s) for s in steps])
    return chain(record or _record())


def _record(value: dict[str, Any] | None = None, **fields: Any) -> Record:
    base: dict[str, Any] = {"topic": "grid.people", "cache": "people", "key": "k-1",
                            "value": {"id": "k-1", "name": "Ann", "age": 41}}
    if value is not None:
        base["value"] = value
    base.update(fields)
    return Record(**base)


def _removal() -> Record:
    return Record("grid.people", "people", "k-1", None)


def test_empty_chain_is_identity() -> None:
    record = _record()
    assert build_chain([])(record) is record


def test_rename() -> None:
    out = _run({"type": "rename", "fields": {"name": "full_name", "gone": "x"}})
    assert out.value == {"id": "k-1", "full_name": "Ann", "age": 41}
    assert list(out.value) == ["id", "full_name", "age"]  # keeps the field order
    # Kafka Connect's text form
    assert _run({"type": "rename", "fields": "name:n, age:years"}).value == {
        "id": "k-1", "n": "Ann", "years": 41}


def test_rename_onto_an_existing_field_is_a_record_error() -> None:
    for value in ({"id": 1, "name": "Ann"}, {"name": "Ann", "id": 1}):  # either order
        with pytest.raises(CodecError, match=r"transforms\[0\] \(rename\).*become 'id'"):
            _run({"type": "rename", "fields": {"name": "id"}}, record=_record(value))
    swapped = _run({"type": "rename", "fields": {"name": "id", "id": "name"}})
    assert swapped.value == {"name": "k-1", "id": "Ann", "age": 41}


def test_rename_two_fields_to_one_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"transforms\[0\].*'fields'.*same name"):
        build_chain([_step(type="rename", fields={"a": "c", "b": "c"})])


def test_drop() -> None:
    assert _run({"type": "drop", "fields": ["age", "missing"]}).value == {"id": "k-1",
                                                                         "name": "Ann"}
    assert _run({"type": "drop", "fields": "age, name"}).value == {"id": "k-1"}


def test_mask_like_kafka_connect() -> None:
    value = {"s": "secret", "i": 7, "f": 2.5, "b": True, "n": None, "keep": "x"}
    out = _run({"type": "mask", "fields": ["s", "i", "f", "b", "n", "absent"]},
               record=_record(value))
    assert out.value == {"s": "", "i": 0, "f": 0.0, "b": False, "n": None, "keep": "x"}
    assert type(out.value["i"]) is int and type(out.value["f"]) is float
    masked = _run({"type": "mask", "fields": ["s", "i", "f"], "replacement": "42"},
                  record=_record(value))
    assert masked.value is not None
    assert (masked.value["s"], masked.value["i"], masked.value["f"]) == ("42", 42, 42.0)


@pytest.mark.parametrize(("value", "replacement", "needle"), [
    ({"a": {"x": 1}}, None, "holds dict"),
    ({"a": [1, 2]}, None, "holds list"),
    ({"a": 3}, "****", "not a int"),
    ({"a": True}, "no", "boolean"),
])
def test_mask_errors_are_record_errors(value: dict[str, Any], replacement: str | None,
                                       needle: str) -> None:
    step: dict[str, Any] = {"type": "mask", "fields": ["a"]}
    if replacement is not None:
        step["replacement"] = replacement
    with pytest.raises(CodecError, match=needle):
        _run(step, record=_record(value))


def test_insert_static_value() -> None:
    out = _run({"type": "insert", "field": "origin", "value": "grid-eu"},
               {"type": "insert", "field": "age", "value": 1})
    assert out.value == {"id": "k-1", "name": "Ann", "age": 1, "origin": "grid-eu"}


def test_timestamp_takes_the_records_time_else_now() -> None:
    planned = _run({"type": "timestamp", "field": "ts"}, record=_record(timestamp_ms=1234))
    assert planned.value is not None and planned.value["ts"] == 1234
    before = time.time_ns() // 1_000_000
    now = _run({"type": "timestamp", "field": "ts"})
    after = time.time_ns() // 1_000_000
    assert now.value is not None and before <= now.value["ts"] <= after


def test_route_is_kafka_connects_regex_router() -> None:
    step = {"type": "route", "regex": r"grid\.(.*)", "replacement": "mirror-$1"}
    assert _run(step).topic == "mirror-people"
    # the regex must match the whole topic: a partial match leaves it unchanged
    partial = {"type": "route", "regex": "grid", "replacement": "x"}
    assert _run(partial).topic == "grid.people"
    named = {"type": "route", "regex": r"(?P<ns>\w+)\.(?P<name>\w+)",
             "replacement": r"${name}\$${ns}"}
    assert _run(named).topic == "people$grid"
    # $12 with one group: Java reads $1 then the text "2"
    assert _run({"type": "route", "regex": r"grid\.(.*)",
                 "replacement": "$12"}).topic == "people2"
    assert _run({"type": "route", "regex": r".*", "replacement": "all"},
                record=_removal()).topic == "all"


def test_route_to_an_empty_topic_is_a_record_error() -> None:
    with pytest.raises(CodecError, match="empty"):
        _run({"type": "route", "regex": ".*", "replacement": ""})


@pytest.mark.parametrize(("replacement", "needle"), [
    ("$2", "group 2"), ("${nope}", "'nope'"), ("a$", "without a group"), ("a\\", "lone"),
])
def test_bad_route_replacements_are_config_errors(replacement: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=rf"transforms\[0\].*'replacement'.*{needle}"):
        build_chain([_step(type="route", regex="(a)", replacement=replacement)])


def test_route_by_cache() -> None:
    step = {"type": "route_by_cache", "topics": {"people": "t.people", "orders": "t.o"}}
    assert _run(step).topic == "t.people"
    assert _run(step, record=_record(cache="other")).topic == "grid.people"
    assert _run({"type": "route_by_cache", "topics": "people:x"}).topic == "x"


def test_value_to_key_one_field_and_several() -> None:
    value = {"id": 12, "region": "eu", "name": "Ann"}
    assert _run({"type": "value_to_key", "fields": ["id"]}, record=_record(value)).key == 12
    several = _run({"type": "value_to_key", "fields": ["region", "id"]}, record=_record(value))
    assert several.key == '["eu",12]'
    assert key_from_fields(value, ["region", "id"]) == several.key


@pytest.mark.parametrize(("value", "needle"), [
    ({"name": "Ann"}, "'id' is missing"),
    ({"id": 1.5}, "float"),
    ({"id": True}, "bool"),
    ({"id": {"a": 1}}, "dict"),
])
def test_value_to_key_errors(value: dict[str, Any], needle: str) -> None:
    with pytest.raises(CodecError, match=rf"transforms\[0\] \(value_to_key\).*{needle}"):
        _run({"type": "value_to_key", "fields": ["id"]}, record=_record(value))


def test_flatten() -> None:
    value = {"id": 1, "address": {"city": "Oslo", "geo": {"lat": 1.0}}, "tags": [{"a": 1}],
             "empty": {}}
    out = _run({"type": "flatten"}, record=_record(value))
    assert out.value == {"id": 1, "address.city": "Oslo", "address.geo.lat": 1.0,
                         "tags": [{"a": 1}], "empty": {}}
    under = _run({"type": "flatten", "delimiter": "_"}, record=_record(value))
    assert under.value is not None and "address_geo_lat" in under.value


def test_flatten_collision_is_a_record_error() -> None:
    with pytest.raises(CodecError, match="'a.b'"):
        _run({"type": "flatten"}, record=_record({"a.b": 1, "a": {"b": 2}}))


@pytest.mark.parametrize("step", [
    {"type": "rename", "fields": {"name": "x"}},
    {"type": "drop", "fields": ["name"]},
    {"type": "mask", "fields": ["name"]},
    {"type": "insert", "field": "f", "value": 1},
    {"type": "timestamp", "field": "f"},
    {"type": "value_to_key", "fields": ["id"]},
    {"type": "flatten"},
])
def test_removals_pass_value_transforms_unchanged(step: dict[str, Any]) -> None:
    removal = _removal()
    assert _run(step, record=removal) == removal


def test_steps_apply_in_order() -> None:
    out = _run({"type": "flatten"}, {"type": "rename", "fields": {"a.b": "ab"}},
               {"type": "value_to_key", "fields": ["ab"]},
               {"type": "route_by_cache", "topics": {"people": "p"}},
               {"type": "route", "regex": "p", "replacement": "q"},
               record=_record({"a": {"b": "key-from-value"}}))
    assert (out.topic, out.key, out.value) == ("q", "key-from-value", {"ab": "key-from-value"})


def test_every_type_is_tested_here() -> None:
    assert set(TRANSFORM_TYPES) == {"rename", "drop", "mask", "insert", "timestamp", "route",
                                    "route_by_cache", "value_to_key", "flatten"}


@pytest.mark.parametrize(("steps", "needle"), [
    ([{"type": "nope"}], r"transforms\[0\]: unknown type 'nope'"),
    ([{"type": "flatten"}, {"type": "drop"}], r"transforms\[1\] \(type 'drop'\).*'fields'.*"
                                              "required"),
    ([{"type": "drop", "fields": ["a"], "colour": 1}], r"'colour'.*not an option"),
    ([{"type": "drop", "fields": []}], r"'fields'.*non-empty list"),
    ([{"type": "drop", "fields": ["a", "a"]}], r"'fields'.*twice"),
    ([{"type": "rename", "fields": ["a"]}], r"'fields'.*table"),
    ([{"type": "rename", "fields": "a=b"}], r"'fields'.*'from:to'"),
    ([{"type": "mask", "fields": ["a"], "replacement": [1]}], r"'replacement'"),
    ([{"type": "insert", "field": "f"}], r"'value'.*required"),
    ([{"type": "insert", "field": "", "value": 1}], r"'field'.*non-empty"),
    ([{"type": "timestamp"}], r"'field'.*required"),
    ([{"type": "route", "regex": "(", "replacement": "x"}], r"'regex'.*not a regular"),
    ([{"type": "route", "regex": "x"}], r"'replacement'.*required"),
    ([{"type": "route_by_cache", "topics": {"a": 1}}], r"'topics'"),
    ([{"type": "flatten", "delimiter": ""}], r"'delimiter'"),
])
def test_bad_steps_are_config_errors(steps: list[dict[str, Any]], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        build_chain([_step(**s) for s in steps])


_NAMES = st.text(alphabet="abcxyz_", min_size=1, max_size=4)
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3),
                    st.lists(st.integers(), max_size=2))
_NESTED = st.recursive(_LEAVES, lambda inner: st.dictionaries(_NAMES, inner, max_size=3),
                       max_leaves=8)


def _leaves(value: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, field in value.items():
        if isinstance(field, dict) and field:
            out += _leaves(field, (*path, name))
        else:
            out.append((".".join((*path, name)), field))
    return out


# generation time depends on the machine's load, not on the code under test
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_NAMES, _NESTED, max_size=3))
def test_flatten_keeps_every_leaf_under_its_path(value: dict[str, Any]) -> None:
    out = _run({"type": "flatten"}, record=_record(value)).value
    assert out is not None
    assert sorted(out.items(), key=lambda kv: kv[0]) == sorted(_leaves(value),
                                                               key=lambda kv: kv[0])
    assert not any(isinstance(v, dict) and v for v in out.values())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["$1", "$2", "${b}", "-", "x", "\\$"])),
                min_size=1, max_size=6),
       st.from_regex(r"[a-z]{1,4}\.[a-z]{1,4}", fullmatch=True))
def test_route_expands_like_java(parts: list[str], topic: str) -> None:
    replacement = "".join(parts)
    python_form = "".join({"$1": r"\1", "$2": r"\2", "${b}": r"\g<b>", "\\$": "$"}.get(p, p)
                          for p in parts)
    out = _run({"type": "route", "regex": r"([a-z]+)\.(?P<b>[a-z]+)",
                "replacement": replacement}, record=_record(topic=topic))
    expected = re.fullmatch(r"([a-z]+)\.(?P<b>[a-z]+)", topic)
    assert expected is not None and out.topic == expected.expand(python_form)
