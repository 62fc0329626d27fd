"""Hypothesis strategies shared by the Cassandra mapping tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import strategies as st

from gridstream.operations import PropertySpec

NAMES = st.text(min_size=1, max_size=6).filter(lambda n: n not in ("_version", "id"))

ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
floats = st.floats(allow_nan=False)
datetimes = st.datetimes(timezones=st.none() | st.just(dt.UTC))
decimals = st.decimals(allow_nan=False, allow_infinity=False)

SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "str": st.text(max_size=10),
    "int": ints,
    "float": floats,
    "bool": st.booleans(),
    "bytes": st.binary(max_size=10),
    "datetime": datetimes,
    "date": st.dates(),
    "decimal": decimals,
    "uuid": st.uuids(),
}

hashables = st.one_of(
    st.text(max_size=5),
    ints,
    st.booleans(),
    st.uuids(),
    st.dates(),
    decimals,
    st.tuples(st.integers(), st.text(max_size=3)),
)
dynamic_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.text(max_size=8),
        st.integers(),
        floats,
        st.booleans(),
        st.binary(max_size=8),
        datetimes,
        st.dates(),
        st.times(),
        decimals,
        st.uuids(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.sets(hashables, max_size=3),
        st.frozensets(hashables, max_size=3),
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
        st.dictionaries(hashables, inner, max_size=3),
    ),
    max_leaves=8,
)

COLLECTIONS: dict[str, st.SearchStrategy[Any]] = {
    "list": st.lists(dynamic_values, max_size=3),
    "set": st.sets(hashables, max_size=3),
    "dict": st.dictionaries(st.text(max_size=4), dynamic_values, max_size=3),
    "any": dynamic_values,
}
LEAF_KINDS = sorted(SCALARS) + sorted(COLLECTIONS)


def _unique(specs: list[PropertySpec]) -> bool:
    return len({s.name for s in specs}) == len(specs)


def spec_trees(max_depth: int = 4) -> st.SearchStrategy[tuple[PropertySpec, ...]]:
    leaf = st.builds(PropertySpec, NAMES, st.sampled_from(LEAF_KINDS))
    if max_depth == 0:
        children = st.lists(leaf, min_size=1, max_size=4)
    else:
        obj = spec_trees(max_depth - 1).map(lambda nested: ("object", nested))
        node = st.one_of(
            leaf, st.builds(lambda name, pair: PropertySpec(name, pair[0], pair[1]), NAMES, obj)
        )
        children = st.lists(node, min_size=1, max_size=4)
    return children.filter(_unique).map(tuple)


@st.composite
def entry_for(draw: st.DrawFn, specs: tuple[PropertySpec, ...]) -> dict[str, Any]:
    """Data for ``specs``: some fixed properties missing or null, some dynamic extras."""
    data: dict[str, Any] = {}
    for spec in specs:
        if draw(st.booleans()) and draw(st.booleans()):
            continue  # a quarter of the properties are missing
        data[spec.name] = draw(value_for(spec))
    fixed = {s.name for s in specs}
    extras = draw(
        st.dictionaries(NAMES.filter(lambda n: n not in fixed), dynamic_values, max_size=3)
    )
    data.update(extras)
    return data


def value_for(spec: PropertySpec) -> st.SearchStrategy[Any]:
    if spec.kind == "object":
        return st.none() | entry_for(spec.nested)
    strategy = SCALARS[spec.kind] if spec.kind in SCALARS else COLLECTIONS[spec.kind]
    return st.none() | strategy
