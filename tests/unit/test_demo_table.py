"""The demo's reconciliation table and the differences printed under it."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from gridstream.demo import DemoResult, _differences, _hz_table, _table
from gridstream.reconcile import Entity, Holding, compare


def _holding(place: str, city: str) -> Holding:
    data = {"id": "c-1", "address": {"city": city}}
    return Holding(place, {("demo.Customer", "c-1"): Entity(3, data)}, {}, operations=3)


def test_a_place_that_differs_is_marked_and_its_first_difference_printed() -> None:
    grid = _holding("grid", "Oslo")
    result = DemoResult(grid, [compare(grid, _holding("kafka", "Oslo")),
                               compare(grid, _holding("sql", "Lyon"))], [], Path("."))
    console = Console(width=100, record=True)
    console.print(_table(result))
    for line in _differences(result):
        console.print(line)
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if "│" in line}
    assert "yes" in rows["kafka"] and "NO" in rows["sql"]
    assert "sql: 0 missing, 0 extra, 1 different" in text
    assert 'first difference: demo.Customer c-1 address.city: grid "Oslo", place "Lyon"' in text
    assert result.exit_code == 1
    assert DemoResult(grid, result.comparisons[:1], [], Path(".")).exit_code == 0


def test_a_hazelcast_map_that_differs_fails_the_demo_and_is_printed() -> None:
    grid = _holding("grid", "Oslo")
    want, got = _holding("expected", "Oslo"), _holding("hz paid-orders", "Kyiv")
    result = DemoResult(grid, [compare(grid, _holding("kafka", "Oslo"))],
                        [("its paid orders", compare(want, got))], Path("."))
    assert result.exit_code == 1
    console = Console(width=120, record=True)
    console.print(_hz_table(result))
    for line in _differences(result):
        console.print(line)
    text = console.export_text()
    row = next(line for line in text.splitlines() if "paid-orders" in line and "│" in line)
    assert "its paid orders" in row and "NO" in row
    assert "hz paid-orders: 0 missing, 0 extra, 1 different" in text
    matching = [("its paid orders", compare(want, want))]
    assert DemoResult(grid, result.comparisons, matching, Path(".")).exit_code == 0
