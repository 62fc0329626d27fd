"""The numbered records of the pipeline kill tests and the checks of what came out (pure:
no I/O; unit-tested in ``tests/unit/pipeline/test_kill_checks.py``).

Input record ``i`` (0 ≤ i < count): value ``str(i)``; key ``str(i)`` for the Kafka →
Kafka runs, ``"k<i mod keys>"`` for the grid runs (several updates per key, in order:
the last by offset must win). The pipeline maps each record with ``mapped`` — a value
that depends on the record's number, so an output is checked for its content, not only
for its id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MODULUS = 1_000_003


def mapped(value: str) -> str:
    """The pipeline's map of one input value (the number as text)."""
    number = int(value)
    return f"{number}:{number * 7919 % MODULUS}"


MAPPED_SQL = (f"concat(CAST(value AS STRING), ':', "
              f"CAST(pmod(CAST(CAST(value AS STRING) AS BIGINT) * 7919, {MODULUS}) AS STRING))")
"""``mapped`` as a Spark SQL expression of the binary ``value`` column (the harness's own
copy drivers, which run no pipeline API)."""


def grid_key(number: int, keys: int) -> str:
    return f"k{number % keys}"


def grid_value(value: str) -> dict[str, Any]:
    """The grid map's value for one input value (a JSON object, as grids store)."""
    number = int(value)
    return {"n": number, "m": mapped(value)}


@dataclass
class Verdict:
    """What a read of the output holds against the ``expected`` numbers 0..expected-1."""

    expected: int
    read: int
    missing: list[int] = field(default_factory=list)
    """Numbers never seen."""
    duplicates: dict[int, int] = field(default_factory=dict)
    """Number → how many times it was seen (only those seen more than once)."""
    altered: list[tuple[bytes | None, bytes | None]] = field(default_factory=list)
    """Records whose value is not ``mapped`` of their key's number."""
    unexpected: list[tuple[bytes | None, bytes | None]] = field(default_factory=list)
    """Records whose key is not a number below ``expected``."""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicates or self.altered or self.unexpected)

    @property
    def extra_copies(self) -> int:
        return sum(count - 1 for count in self.duplicates.values())

    def figures(self) -> dict[str, int]:
        return {"expected": self.expected, "read": self.read, "missing": len(self.missing),
                "duplicated": len(self.duplicates), "extra_copies": self.extra_copies,
                "altered": len(self.altered), "unexpected": len(self.unexpected)}

    def summary(self) -> str:
        return (f"{self.figures()}; first missing {self.missing[:10]}, first duplicates "
                f"{list(self.duplicates.items())[:10]}, first altered {self.altered[:5]}, "
                f"first unexpected {self.unexpected[:5]}")


def check_exactly_once(records: Iterable[tuple[bytes | None, bytes | None]],
                       expected: int) -> Verdict:
    """Kafka → Kafka: every number 0..expected-1 once, each with its mapped value
    (missing = expected − seen; duplicates = seen more than once)."""
    seen: Counter[int] = Counter()
    verdict = Verdict(expected=expected, read=0)
    for key, value in records:
        verdict.read += 1
        number = _number(key)
        if number is None or not 0 <= number < expected:
            verdict.unexpected.append((key, value))
            continue
        seen[number] += 1
        if value is None or value != mapped(str(number)).encode():
            verdict.altered.append((key, value))
    verdict.missing = [i for i in range(expected) if seen[i] == 0]
    verdict.duplicates = {i: n for i, n in sorted(seen.items()) if n > 1}
    return verdict


def _number(key: bytes | None) -> int | None:
    if key is None:
        return None
    try:
        text = key.decode()
    except UnicodeDecodeError:
        return None
    return int(text) if text.isdigit() else None


def expected_map(count: int, keys: int) -> dict[str, dict[str, Any]]:
    """The grid map after records 0..count-1 were applied in order: each key's last."""
    return {grid_key(i, keys): grid_value(str(i)) for i in range(count)}


@dataclass
class MapVerdict:
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    wrong: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """Key → (held, expected)."""
    stale: int = 0
    """Wrong values that are an older update of the same key (an out-of-order apply)."""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.wrong)

    def figures(self) -> dict[str, int]:
        return {"missing_keys": len(self.missing), "unexpected_keys": len(self.unexpected),
                "wrong_values": len(self.wrong), "stale_values": self.stale}

    def summary(self) -> str:
        return (f"{self.figures()}; first missing {self.missing[:10]}, first unexpected "
                f"{self.unexpected[:10]}, first wrong {list(self.wrong.items())[:5]}")


def check_map(held: Mapping[Any, Any], expected: Mapping[str, Mapping[str, Any]],
              keys: int) -> MapVerdict:
    """Every key and every value of the map against the expected content."""
    verdict = MapVerdict()
    verdict.missing = sorted(k for k in expected if k not in held)
    verdict.unexpected = sorted(str(k) for k in held if k not in expected)
    for key, want in expected.items():
        if key in held and held[key] != want:
            got = held[key]
            verdict.wrong[key] = (got, want)
            number = got.get("n") if isinstance(got, Mapping) else None
            if (isinstance(number, int) and grid_key(number, keys) == key
                    and number < want["n"] and got == grid_value(str(number))):
                verdict.stale += 1
    return verdict
