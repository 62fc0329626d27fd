"""The space refuses values of the wrong kind for declared properties, on every path in."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gridstream.errors import InvalidEntryError as Invalid
from gridstream.model import DocumentType, SpaceDocument
from gridstream.space import Change, Space

from .models import Address, Order, Person


def test_writes_with_a_value_of_the_wrong_kind_are_refused(space: Space) -> None:
    with pytest.raises(Invalid, match=r"test\.Person: property 'tags' is declared set"):
        space.write(Person(1, "Ann", tags=5))  # type: ignore[arg-type]
    with pytest.raises(Invalid, match="'placed' is declared datetime; a value of type int"):
        space.write(Order("o", placed=5))  # type: ignore[arg-type]
    with pytest.raises(Invalid, match="'amount' is declared decimal; a value of type list"):
        space.write(Order("o", amount=[1]))  # type: ignore[arg-type]
    with pytest.raises(Invalid, match="'address.city' is declared str; a value of type int"):
        space.write(Person(1, address=Address(5)))  # type: ignore[arg-type]
    space.introduce_type(DocumentType("Doc", fixed={"id": "str", "n": "int"}))
    with pytest.raises(Invalid, match="'n' is declared int; a value of type str"):
        space.write(SpaceDocument("Doc", {"id": "d", "n": "5"}))
    assert space.next_seq == 1  # nothing was logged


def test_change_and_partial_update_are_checked(space: Space) -> None:
    space.write(Person(1, "Ann", 30, Address("Paris")))
    space.write(Order("o", amount=Decimal("1.5"), placed=dt.datetime(2024, 1, 1)))
    with pytest.raises(Invalid, match="'age' is declared int; a value of type str"):
        space.change(Person, 1, {"age": "31"})
    with pytest.raises(Invalid, match="'age' is declared int; a value of type float"):
        space.change(Person, 1, [Change.increment("age", 0.5)])
    with pytest.raises(Invalid, match="'address.city' is declared str; a value of type int"):
        space.change(Person, 1, [Change.set("address.city", 7)])
    with pytest.raises(Invalid, match="'tags' is declared set; 'tags.x' cannot"):
        space.change(Person, 1, [Change.set("tags.x", 1)])
    with pytest.raises(Invalid, match="'placed' is declared datetime; a value of type date"):
        space.partial_update(Order("o", placed=dt.date(2024, 1, 2)))  # type: ignore[arg-type]
    assert space.next_seq == 3  # nothing was logged
    # accepted coercions: an int for a decimal
    space.change(Order, "o", [Change.increment("amount", 2)])
    space.partial_update(Order("o", amount=4))  # type: ignore[arg-type]
    assert space.read(Order, "o").amount == 4
