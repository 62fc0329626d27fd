"""The demo's entry types and a deterministic workload over them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from gridstream.model import SpaceDocument, space_class
from gridstream.space import Change, Space

__all__ = ["DemoTypes", "make_types", "run_workload"]


@dataclass
class Address:
    street: str
    city: str
    zip: str


@dataclass(frozen=True)
class DemoTypes:
    customer: type
    customer_topic: str
    order_type: str
    order_topic: str


def make_types(run_id: str) -> DemoTypes:
    """Entry types whose topics are unique to this run (a re-run never reads old data)."""
    customer_topic = f"gridstream-demo-{run_id}.customers"

    @space_class(type_name="demo.Customer", topic=customer_topic, indexes=("tier",))
    @dataclass
    class Customer:
        id: str
        name: str
        tier: str
        balance: float
        address: Address
        tags: list[str] = field(default_factory=list)

    return DemoTypes(Customer, customer_topic, "demo.Order", f"gridstream-demo-{run_id}.orders")


_CITIES = ("Lyon", "Porto", "Kyiv", "Oslo", "Quito")


def _customer(types: DemoTypes, rng: random.Random, cid: str) -> Any:
    address = Address(f"{rng.randint(1, 99)} Main St", rng.choice(_CITIES),
                      f"{rng.randint(10000, 99999)}")
    return types.customer(cid, f"name-{cid}-{rng.randint(0, 999)}", rng.choice("ABC"),
                          round(rng.uniform(0, 500), 2), address,
                          [f"t{rng.randint(0, 5)}" for _ in range(rng.randint(0, 3))])


def _order(types: DemoTypes, rng: random.Random, oid: str) -> SpaceDocument:
    props: dict[str, Any] = {"id": oid, "customer": f"c-{rng.randint(0, 49)}",
                             "amount": rng.randint(1, 10_000), "status": "NEW",
                             "kafka.topic": types.order_topic}
    if rng.random() < 0.3:
        props["coupon"] = {"code": f"SAVE{rng.randint(5, 30)}", "stackable": rng.random() < 0.5}
    return SpaceDocument(types.order_type, props)


def _one(space: Any, types: DemoTypes, rng: random.Random) -> None:
    """One random operation; ``space`` is the space or an open transaction."""
    if rng.random() < 0.6:
        cid = f"c-{rng.randint(0, 49)}"
        roll = rng.random()
        if roll < 0.35 or space.read(types.customer, cid) is None:
            space.write(_customer(types, rng, cid))
        elif roll < 0.50:
            space.update(_customer(types, rng, cid))
        elif roll < 0.65:
            doc = SpaceDocument("demo.Customer", {"id": cid, "tier": rng.choice("ABC")})
            space.partial_update(doc)
        elif roll < 0.85:
            space.change(types.customer, cid, [Change.increment("balance", 10),
                                               Change.set("address.city", rng.choice(_CITIES))])
        else:
            space.remove(types.customer, cid)
        return
    oid = f"o-{rng.randint(0, 149)}"
    roll = rng.random()
    if roll < 0.6 or space.read(types.order_type, oid) is None:
        space.write(_order(types, rng, oid))
    elif roll < 0.85:
        space.change(types.order_type, oid, {"status": rng.choice(["PAID", "SHIPPED"])})
    else:
        space.take(types.order_type, oid)


def run_workload(space: Space, types: DemoTypes, operations: int, seed: int = 7) -> int:
    """Roughly ``operations`` operations, a fifth of them in transactions of 2–5."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not a secret
    done = 0
    while done < operations:
        if rng.random() < 0.2:
            size = rng.randint(2, 5)
            with space.transaction() as tx:
                for _ in range(size):
                    _one(tx, types, rng)
            done += size
        else:
            _one(space, types, rng)
            done += 1
    return done
