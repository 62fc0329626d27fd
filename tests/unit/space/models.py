"""Entry types shared by the space tests and their subprocesses."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from gridstream.model import space_class


@dataclass
class Address:
    city: str
    street: str | None = None


@space_class(type_name="test.Person", indexes=("name",), topic="people")
@dataclass
class Person:
    id: int
    name: str | None = None
    age: int | None = None
    address: Address | None = None
    tags: set[str] = field(default_factory=set)


@space_class(type_name="test.Order", routing="customer")
@dataclass
class Order:
    id: str
    customer: str | None = None
    amount: Decimal | None = None
    placed: dt.datetime | None = None
    lines: list[str] | None = None
