"""A deterministic change workload for the source connector's fault tests, and the check
of what a connector wrote to Kafka against it (Kafka's own counting: every change of a
key exactly once, in order).

Every change of a key carries a per-key counter ``n`` (1, 2, 3, ... for that key): a put
writes a whole new value, an update changes some fields of the existing one (the Space:
a change set, folded by the adapter; Hazelcast: the whole value put again), a remove
deletes the key (the counter is then carried by nothing: a tombstone stands for the
change after the last counter seen, since a key is never removed twice in a row and is
always put again after a remove). The plan is a function of its seed, so the test knows
every change the workload makes without being told.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["put", "update", "remove"]
Token = tuple[str, int]
"""One change of a key as counted: ``("v", n)`` for a value carrying counter ``n``,
``("rm", n)`` for the removal that was the key's ``n``-th change."""


@dataclass(frozen=True, slots=True)
class Op:
    index: int
    cache: str
    key: str
    kind: Kind
    counter: int
    value: dict[str, Any] | None
    """The key's whole value after the change (``None``: removed)."""
    fields: dict[str, Any] = field(default_factory=dict)
    """An update's changed fields (what the Space's change set sets)."""

    @property
    def token(self) -> Token:
        return ("rm", self.counter) if self.kind == "remove" else ("v", self.counter)


def plan(seed: int, ops: int, caches: Sequence[str], keys_per_cache: int) -> list[Op]:
    """``ops`` changes over ``caches``: first one put per cache (key ``k00000``, so every
    cache holds an entry before the connector first starts), then random puts, updates
    and removes of ``keys_per_cache`` keys per cache."""
    rng = random.Random(seed)
    state: dict[tuple[str, str], dict[str, Any] | None] = {}
    counters: dict[tuple[str, str], int] = {}
    out: list[Op] = []
    for i in range(ops):
        if i < len(caches):
            cache, key = caches[i], _key(0)
        else:
            cache, key = rng.choice(caches), _key(rng.randrange(keys_per_cache))
        slot = (cache, key)
        counter = counters.get(slot, 0) + 1
        counters[slot] = counter
        current = state.get(slot)
        roll = rng.random()
        if current is None:
            kind: Kind = "put"
        elif roll < 0.15:
            kind = "remove"
        elif roll < 0.6:
            kind = "update"
        else:
            kind = "put"
        changed: dict[str, Any] = {}
        if kind == "put":
            value: dict[str, Any] | None = {"id": key, "n": counter, "cache": cache,
                                            "pad": "p" * (counter % 40), "made": counter}
        elif kind == "update":
            assert current is not None
            changed = {"n": counter, "u": f"u{counter}"}
            value = {**current, **changed}
        else:
            value = None
        state[slot] = value
        out.append(Op(i, cache, key, kind, counter, value, changed))
    return out


def _key(i: int) -> str:
    return f"k{i:05d}"


def expected_tokens(ops: Sequence[Op]) -> dict[tuple[str, str], list[Token]]:
    """Per (cache, key): its changes in order."""
    tokens: dict[tuple[str, str], list[Token]] = {}
    for op in ops:
        tokens.setdefault((op.cache, op.key), []).append(op.token)
    return tokens


def final_state(ops: Sequence[Op]) -> dict[tuple[str, str], dict[str, Any] | None]:
    """Per (cache, key) ever written: its value after every op (``None``: removed)."""
    state: dict[tuple[str, str], dict[str, Any] | None] = {}
    for op in ops:
        state[(op.cache, op.key)] = op.value
    return state


# ------------------------------------------------------------------ the check


@dataclass(frozen=True, slots=True)
class Seen:
    """One record of a key read back from Kafka, in the order read."""

    value: Mapping[str, Any] | None
    version: int | None = None
    """The record's ``gs.version`` header, when it has one."""
    where: str = ""
    """topic[partition]@offset, for the report."""


@dataclass
class Verdict:
    """What a check found; every list empty means exactly once, in order."""

    keys: int = 0
    expected: int = 0
    records: int = 0
    missing: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    final_mismatch: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicates or self.unexpected or self.out_of_order
                    or self.final_mismatch)

    def summary(self) -> str:
        return (f"keys {self.keys}, changes {self.expected}, records {self.records}, "
                f"missing {len(self.missing)}, duplicates {len(self.duplicates)}, "
                f"unexpected {len(self.unexpected)}, out of order {len(self.out_of_order)}, "
                f"final mismatches {len(self.final_mismatch)}")

    def details(self, limit: int = 20) -> str:
        parts = []
        for name in ("missing", "duplicates", "unexpected", "out_of_order", "final_mismatch"):
            items: list[str] = getattr(self, name)
            if items:
                parts.append(f"{name} ({len(items)}): " + "; ".join(items[:limit]))
        return "\n".join(parts)


def tokens_of(records: Sequence[Seen]) -> Iterator[tuple[Token, Seen]]:
    """Each record as the change it stands for: a value by its counter ``n``, a tombstone
    as the change after the last counter seen before it."""
    last = 0
    for record in records:
        if record.value is None:
            yield ("rm", last + 1), record
        else:
            n = record.value.get("n")
            if type(n) is not int:
                raise AssertionError(f"a value without its counter at {record.where}: "
                                     f"{dict(record.value)!r}")
            last = n
            yield ("v", n), record


def check(expected: Mapping[tuple[str, str], Sequence[Token]],
          final: Mapping[tuple[str, str], Mapping[str, Any] | None],
          seen: Mapping[tuple[str, str], Sequence[Seen]]) -> Verdict:
    """Per key: every expected change read exactly once (missing, duplicates, changes
    never made), counters and ``gs.version`` headers only increasing, and the last record
    equal to ``final`` (the grid's state: the whole value, ``None`` for an absent key)."""
    verdict = Verdict(keys=len(set(expected) | set(seen)),
                      expected=sum(len(t) for t in expected.values()),
                      records=sum(len(r) for r in seen.values()))
    for slot in sorted(set(expected) | set(seen) | set(final)):
        name = f"{slot[0]}/{slot[1]}"
        want = list(expected.get(slot, ()))
        records = list(seen.get(slot, ()))
        counts: dict[Token, int] = {}
        previous: Seen | None = None
        last_counter = 0
        for token, record in tokens_of(records):
            counts[token] = counts.get(token, 0) + 1
            if counts[token] == 2:
                verdict.duplicates.append(f"{name} {token} again at {record.where}")
            if token[0] == "v" and token[1] <= last_counter and counts[token] == 1:
                verdict.out_of_order.append(
                    f"{name} counter {token[1]} after {last_counter} at {record.where}")
            if token[0] == "v":
                last_counter = max(last_counter, token[1])
            if (previous is not None and previous.version is not None
                    and record.version is not None and record.version <= previous.version):
                verdict.out_of_order.append(
                    f"{name} version {record.version} after {previous.version} "
                    f"at {record.where}")
            previous = record
        wanted = set(want)
        verdict.missing.extend(f"{name} {t}" for t in want if t not in counts)
        verdict.unexpected.extend(f"{name} {t}" for t in counts if t not in wanted)
        if slot in final:
            last = records[-1].value if records else None
            grid = final[slot]
            if (dict(last) if last is not None else None) != (
                    dict(grid) if grid is not None else None):
                verdict.final_mismatch.append(f"{name}: topic {last!r} vs grid {grid!r}")
    return verdict
