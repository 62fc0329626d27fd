"""The checks of the pipeline kill tests fail when they should: a lost, duplicated,
altered or foreign record, and a map with a missing, extra, wrong or stale value."""

from __future__ import annotations

from tests.integration.support.pipeline_check import (
    check_exactly_once,
    check_map,
    expected_map,
    grid_key,
    grid_value,
    mapped,
)


def _output(numbers: list[int]) -> list[tuple[bytes | None, bytes | None]]:
    return [(str(i).encode(), mapped(str(i)).encode()) for i in numbers]


def test_every_number_once_with_its_mapped_value_passes() -> None:
    verdict = check_exactly_once(reversed(_output(list(range(1000)))), 1000)
    assert verdict.ok, verdict.summary()
    assert verdict.figures() == {"expected": 1000, "read": 1000, "missing": 0,
                                 "duplicated": 0, "extra_copies": 0, "altered": 0,
                                 "unexpected": 0}


def test_mapped_depends_on_the_number() -> None:
    assert mapped("12") == "12:95028"
    assert len({mapped(str(i)) for i in range(10_000)}) == 10_000


def test_a_lost_record_is_missing() -> None:
    verdict = check_exactly_once(_output([i for i in range(100) if i != 42]), 100)
    assert not verdict.ok
    assert verdict.missing == [42]
    assert verdict.figures()["read"] == 99


def test_an_injected_duplicate_is_caught() -> None:
    verdict = check_exactly_once(_output([*range(100), 7, 7, 99]), 100)
    assert not verdict.ok
    assert verdict.duplicates == {7: 3, 99: 2}
    assert verdict.extra_copies == 3
    assert verdict.missing == []


def test_an_aborted_transaction_read_uncommitted_shows_as_duplicates() -> None:
    # what a read_uncommitted consumer sees after a kill inside a transaction: the
    # aborted rows of the batch, then the same batch committed by the re-run
    aborted, committed = _output(list(range(40, 60))), _output(list(range(100)))
    verdict = check_exactly_once(committed[:40] + aborted + committed[40:], 100)
    assert not verdict.ok
    assert sorted(verdict.duplicates) == list(range(40, 60))


def test_a_value_not_mapped_from_its_key_is_altered() -> None:
    records = _output(list(range(10)))
    records[3] = (b"3", b"3")                      # the input value, unmapped
    records[5] = (b"5", mapped("6").encode())      # another record's value
    records[6] = (b"6", None)
    verdict = check_exactly_once(records, 10)
    assert [key for key, _ in verdict.altered] == [b"3", b"5", b"6"]
    assert verdict.missing == [] and not verdict.ok


def test_a_key_outside_the_numbers_is_unexpected() -> None:
    records = [*_output(list(range(10))), (b"10", mapped("10").encode()), (None, b"x"),
               (b"-1", b"x"), (b"\xff", b"x")]
    verdict = check_exactly_once(records, 10)
    assert len(verdict.unexpected) == 4 and not verdict.ok


def test_expected_map_keeps_each_keys_last_update() -> None:
    expected = expected_map(25, 10)
    assert len(expected) == 10
    assert expected["k3"] == {"n": 23, "m": mapped("23")}
    assert expected["k7"] == {"n": 17, "m": mapped("17")}
    assert grid_key(23, 10) == "k3"


def test_the_expected_map_passes() -> None:
    expected = expected_map(1000, 100)
    held = {key: dict(value) for key, value in expected.items()}
    verdict = check_map(held, expected, 100)
    assert verdict.ok, verdict.summary()


def test_a_stale_value_a_missing_and_an_extra_key_fail() -> None:
    expected = expected_map(1000, 100)
    held: dict[str, object] = {key: dict(value) for key, value in expected.items()}
    held["k5"] = grid_value("805")        # an older update of k5 (last is 905)
    held["k6"] = {"n": 906, "m": "906"}   # the right number, a wrong mapped value
    del held["k9"]
    held["k100"] = grid_value("100")
    verdict = check_map(held, expected, 100)
    assert not verdict.ok
    assert verdict.missing == ["k9"] and verdict.unexpected == ["k100"]
    assert sorted(verdict.wrong) == ["k5", "k6"]
    assert verdict.stale == 1
    assert verdict.figures() == {"missing_keys": 1, "unexpected_keys": 1,
                                 "wrong_values": 2, "stale_values": 1}
