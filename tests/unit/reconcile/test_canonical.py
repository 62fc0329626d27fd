"""The canonical form: equal for what the JSON protocol carries unchanged, exact otherwise."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.errors import ReconcileError
from gridstream.operations import OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import Envelope, JsonCodec
from gridstream.reconcile import CASSANDRA, STRICT, canonical_entity, canonical_value, show
from gridstream.reconcile.canonical import encode

GEO = PropertySpec("geo", "object", (PropertySpec("lat", "float"), PropertySpec("lon", "float")))
THING = TypeDescriptor(
    "test.Thing", "id",
    fixed=(
        PropertySpec("id", "str"), PropertySpec("name", "str"), PropertySpec("n", "int"),
        PropertySpec("score", "float"), PropertySpec("ok", "bool"),
        PropertySpec("blob", "bytes"), PropertySpec("at", "datetime"),
        PropertySpec("day", "date"), PropertySpec("amount", "decimal"),
        PropertySpec("ref", "uuid"), PropertySpec("tags", "list"),
        PropertySpec("labels", "set"), PropertySpec("attrs", "dict"),
        PropertySpec("address", "object", (PropertySpec("city", "str"),
                                            PropertySpec("since", "datetime"), GEO)),
    ),
)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: float


ints = st.integers(-(2**63), 2**63 - 1)
# NaN and infinities are left out: the JSON codec writes them as null (a protocol limit)
floats = st.floats(allow_nan=False, allow_infinity=False)
# offsets in whole minutes: orjson writes an offset such as -00:44:30 (historical zones)
# as -00:45, a protocol limit this form does not hide
offsets = st.builds(lambda m: dt.timezone(dt.timedelta(minutes=m)), st.integers(-1439, 1439))
datetimes = st.datetimes(timezones=st.one_of(st.none(), st.just(dt.UTC), offsets))
json_scalars = st.one_of(st.none(), st.booleans(), ints, floats, st.text(max_size=8))
rich_scalars = st.one_of(
    json_scalars, datetimes, st.dates(), st.decimals(allow_nan=False), st.uuids(),
    st.binary(max_size=8), st.sampled_from(Color),
    st.builds(Point, ints, floats),
    st.frozensets(st.integers(0, 50), max_size=4), st.sets(st.text(max_size=3), max_size=4),
)
keys = st.one_of(st.text(max_size=6), st.integers(0, 99))


def _no_key_collisions(value: dict[Any, Any]) -> bool:
    return len({str(k) for k in value}) == len(value)


dynamic_values = st.recursive(
    rich_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.tuples(inner, inner),
        st.dictionaries(keys, inner, max_size=3).filter(_no_key_collisions),
    ),
    max_leaves=8,
)
declared_values: dict[str, st.SearchStrategy[Any]] = {
    "name": st.one_of(st.text(max_size=8), st.sampled_from(Color)),
    "n": ints,
    "score": st.one_of(floats, st.integers(-1000, 1000)),
    "ok": st.booleans(),
    "blob": st.binary(max_size=8),
    "at": datetimes,
    "day": st.dates(),
    "amount": st.one_of(st.decimals(allow_nan=False), st.integers(-(10**6), 10**6)),
    "ref": st.uuids(),
    "tags": st.lists(dynamic_values, max_size=3),
    "labels": st.one_of(st.sets(st.integers(-5, 5), max_size=4),
                        st.frozensets(st.text(max_size=3), max_size=4)),
    "attrs": st.dictionaries(keys, dynamic_values, max_size=3).filter(_no_key_collisions),
    "address": st.fixed_dictionaries(
        {}, optional={"city": st.one_of(st.none(), st.text(max_size=5)), "since": datetimes,
                      "geo": st.fixed_dictionaries({"lat": floats, "lon": floats}),
                      "zip": st.text(max_size=5)}),
}


@st.composite
def entities(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {"id": draw(st.text(min_size=1, max_size=6))}
    for name, strategy in declared_values.items():
        choice = draw(st.sampled_from(["value", "value", "null", "absent"]))
        if choice == "value":
            data[name] = draw(strategy)
        elif choice == "null":
            data[name] = None
    extra = draw(st.dictionaries(st.text(min_size=1, max_size=6), dynamic_values, max_size=3))
    for name, value in extra.items():
        data.setdefault(f"dyn-{name}", value)
    return data


def wire_round_trip(data: dict[str, Any]) -> dict[str, Any]:
    codec = JsonCodec()
    envelope = Envelope(OpType.WRITE, THING.name, data["id"], 1, 0, 0, data)
    decoded = codec.decode(codec.encode(envelope, THING), {THING.name: THING})
    assert decoded.data is not None
    return dict(decoded.data)


@settings(max_examples=150, deadline=None)
@given(entities())
def test_canonical_survives_the_json_wire(data: dict[str, Any]) -> None:
    back = wire_round_trip(data)
    for rules in (STRICT, CASSANDRA):
        assert canonical_entity(data, THING, rules) == canonical_entity(back, THING, rules)


@settings(max_examples=100, deadline=None)
@given(entities())
def test_encoding_is_deterministic_and_faithful(data: dict[str, Any]) -> None:
    canon = canonical_entity(data, THING)
    assert encode(canon) == encode(canonical_entity(dict(reversed(data.items())), THING))
    assert isinstance(show(canon), str)


def test_a_changed_value_changes_the_canonical_form() -> None:
    data = {"id": "a", "address": {"city": "Oslo", "geo": {"lat": 1.0, "lon": 2.0}}}
    other = {"id": "a", "address": {"city": "Oslo", "geo": {"lat": 1.0, "lon": 2.5}}}
    assert canonical_entity(data, THING) != canonical_entity(other, THING)


@pytest.mark.parametrize(("left", "right", "spec", "equal"), [
    (Decimal("1.5"), 1.5, PropertySpec("amount", "decimal"), False),
    (Decimal("1.50"), Decimal("1.5"), PropertySpec("amount", "decimal"), True),
    (Decimal("1.5"), "1.5", PropertySpec("amount", "decimal"), True),  # the wire's text
    # beyond the default context's 28 digits: still compared exactly
    (Decimal("1.00000000000000000000000000000001"), Decimal("1"),
     PropertySpec("amount", "decimal"), False),
    (Decimal("12345678901234567890123456789012"), Decimal("12345678901234567890123456789000"),
     PropertySpec("amount", "decimal"), False),
    (Decimal("1.000000000000000000000000000000"), Decimal("1"),
     PropertySpec("amount", "decimal"), True),
    (Decimal("1E+2"), 100, PropertySpec("amount", "decimal"), True),
    (Decimal("-0.00"), 0, PropertySpec("amount", "decimal"), True),
    (Decimal("1.5"), 1.5, None, False),  # dynamic: text vs float
    (1, 1.0, None, False),
    (1, True, None, False),
    (3, 3.0, PropertySpec("score", "float"), True),
    ({1, 2, 3}, [3, 1, 2], PropertySpec("labels", "set"), True),
    ({1, 2, 3}, [3, 1, 2, 4], PropertySpec("labels", "set"), False),
    (frozenset({"b", "a"}), ["a", "b"], None, True),  # a dynamic set travels sorted
    ([1, 2], [2, 1], None, False),
    ((1, 2), [1, 2], None, True),
    (dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))),
     dt.datetime(2024, 1, 1, 10), PropertySpec("at", "datetime"), True),
    (dt.datetime(2024, 1, 1, 10, 0, 0, 1), dt.datetime(2024, 1, 1, 10),
     PropertySpec("at", "datetime"), False),
    (uuid.UUID(int=5), str(uuid.UUID(int=5)), PropertySpec("ref", "uuid"), True),
    (b"\x00\x01", b"\x00\x02", PropertySpec("blob", "bytes"), False),
    (Color.RED, "red", None, True),
    (Point(1, 2.0), {"x": 1, "y": 2.0}, None, True),
    ({1: "a"}, {"1": "a"}, None, True),
    (None, "", None, False),
])
def test_values(left: Any, right: Any, spec: PropertySpec | None, equal: bool) -> None:
    assert (canonical_value(left, spec) == canonical_value(right, spec)) is equal


def test_null_and_absent_are_one_only_where_the_place_cannot_tell() -> None:
    with_nulls = {"id": "a", "name": None, "nick": None,
                  "address": {"city": None, "geo": {"lat": None, "lon": None}},
                  "attrs": {"k": None}}
    without = {"id": "a", "attrs": {"k": None}}
    assert canonical_entity(with_nulls, THING) != canonical_entity(without, THING)
    assert canonical_entity(with_nulls, THING, CASSANDRA) == \
        canonical_entity(without, THING, CASSANDRA)
    # a null inside a map is a value everywhere
    assert canonical_entity(without, THING, CASSANDRA) != \
        canonical_entity({"id": "a", "attrs": {}}, THING, CASSANDRA)


def test_milliseconds_only_where_the_place_keeps_milliseconds() -> None:
    fine = {"id": "a", "at": dt.datetime(2024, 1, 1, 10, 0, 0, 123456)}
    coarse = {"id": "a", "at": dt.datetime(2024, 1, 1, 10, 0, 0, 123000)}
    assert canonical_entity(fine, THING) != canonical_entity(coarse, THING)
    assert canonical_entity(fine, THING, CASSANDRA) == canonical_entity(coarse, THING, CASSANDRA)


def test_values_without_a_canonical_form_are_refused() -> None:
    with pytest.raises(ReconcileError, match="same text"):
        canonical_value({1: "a", "1": "b"})
    with pytest.raises(ReconcileError, match="no canonical form"):
        canonical_value(object())


def test_an_aware_datetime_whose_utc_instant_is_out_of_range_is_canonical() -> None:
    """Found by the property test: 0001-01-01T00:30+01:00 is 0000-12-31T23:30Z, which
    ``astimezone`` cannot represent (OverflowError); both spellings of the instant are
    one canonical value, and a different instant is another."""
    plus_one = dt.timezone(dt.timedelta(hours=1))
    plus_two = dt.timezone(dt.timedelta(hours=2))
    first = dt.datetime(1, 1, 1, 0, 30, tzinfo=plus_one)
    same = dt.datetime(1, 1, 1, 1, 30, tzinfo=plus_two)
    later = dt.datetime(1, 1, 1, 0, 31, tzinfo=plus_one)
    spec = PropertySpec("at", "datetime")
    assert canonical_value(first, spec) == canonical_value(same, spec)
    assert canonical_value(first, spec) != canonical_value(later, spec)
