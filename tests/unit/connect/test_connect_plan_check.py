"""The fault tests' checker (``tests/integration/support/connect_plan.py``) reports each way a
connector can get a key's changes wrong: it can fail."""

from __future__ import annotations

from typing import Any

from tests.integration.support.connect_plan import (
    Seen,
    check,
    expected_tokens,
    final_state,
    plan,
)

CACHES = ("A", "B", "C", "D")


def _records(ops: list[Any]) -> dict[tuple[str, str], list[Seen]]:
    """What a perfect connector writes: every op once, in order, versions growing."""
    seen: dict[tuple[str, str], list[Seen]] = {}
    for op in ops:
        seen.setdefault((op.cache, op.key), []).append(
            Seen(op.value, version=op.index + 1, where=f"t@{op.index}"))
    return seen


def test_a_perfect_copy_passes() -> None:
    ops = plan(7, 3000, CACHES, 50)
    verdict = check(expected_tokens(ops), final_state(ops), _records(ops))
    assert verdict.ok, verdict.details()
    assert verdict.expected == verdict.records == 3000
    assert {op.kind for op in ops} == {"put", "update", "remove"}


def test_the_plan_is_a_function_of_its_seed() -> None:
    assert plan(3, 500, CACHES, 10) == plan(3, 500, CACHES, 10)
    assert plan(3, 500, CACHES, 10) != plan(4, 500, CACHES, 10)


def _key_with_removal(ops: list[Any]) -> tuple[str, str]:
    tokens = expected_tokens(ops)
    return next(slot for slot, t in tokens.items()
                if len(t) > 6 and any(kind == "rm" for kind, _ in t[1:-2]))


def test_one_duplicate_one_missing_one_out_of_order_are_each_reported() -> None:
    ops = plan(11, 4000, CACHES, 30)
    seen = _records(ops)
    dup_slot, miss_slot, order_slot = list(seen)[:3]
    seen[dup_slot].insert(3, seen[dup_slot][2])           # a change written twice
    missing = seen[miss_slot].pop(2)                        # a change never written
    records = seen[order_slot]
    records[1], records[2] = records[2], records[1]         # two changes swapped
    verdict = check(expected_tokens(ops), final_state(ops), seen)
    assert not verdict.ok
    assert len(verdict.duplicates) == 1 and verdict.duplicates[0].startswith(
        f"{dup_slot[0]}/{dup_slot[1]} ")
    assert any(m.startswith(f"{miss_slot[0]}/{miss_slot[1]} ") for m in verdict.missing)
    assert missing.value is None or f"('v', {missing.value['n']})" in " ".join(verdict.missing)
    assert any(o.startswith(f"{order_slot[0]}/{order_slot[1]} ") for o in verdict.out_of_order)
    assert verdict.final_mismatch == []


def test_a_duplicated_or_missing_tombstone_is_reported() -> None:
    ops = plan(5, 4000, CACHES, 20)
    slot = _key_with_removal(ops)
    seen = _records(ops)
    records = seen[slot]
    at = next(i for i, r in enumerate(records) if i > 0 and r.value is None)
    before = records[at - 1].value
    assert before is not None
    removal = f"{slot[0]}/{slot[1]} ('rm', {before['n'] + 1})"
    doubled = {**seen, slot: records[:at + 1] + [records[at]] + records[at + 1:]}
    verdict = check(expected_tokens(ops), final_state(ops), doubled)
    assert [d.split(" again")[0] for d in verdict.duplicates] == [removal]
    dropped = {**seen, slot: records[:at] + records[at + 1:]}
    verdict = check(expected_tokens(ops), final_state(ops), dropped)
    assert removal in verdict.missing


def test_a_version_going_back_and_a_wrong_final_value_are_reported() -> None:
    ops = plan(9, 2000, CACHES, 20)
    seen = _records(ops)
    slot = next(s for s, r in seen.items() if len(r) > 3 and r[-1].value is not None)
    records = seen[slot]
    records[2] = Seen(records[2].value, version=records[0].version, where="x")
    last = records[-1]
    assert last.value is not None
    records[-1] = Seen({**last.value, "pad": "changed"}, last.version, last.where)
    verdict = check(expected_tokens(ops), final_state(ops), seen)
    assert len(verdict.out_of_order) == 1 and "version" in verdict.out_of_order[0]
    assert len(verdict.final_mismatch) == 1 and verdict.final_mismatch[0].startswith(
        f"{slot[0]}/{slot[1]}: ")
    assert not verdict.missing and not verdict.duplicates


def test_a_change_never_made_is_reported() -> None:
    ops = plan(2, 500, CACHES, 10)
    seen = _records(ops)
    slot = next(iter(seen))
    first = seen[slot][0]
    assert first.value is not None
    seen[slot].append(Seen({**first.value, "n": 999}, version=10**6))
    verdict = check(expected_tokens(ops), final_state(ops), seen)
    assert verdict.unexpected == [f"{slot[0]}/{slot[1]} ('v', 999)"]
    assert len(verdict.final_mismatch) == 1
