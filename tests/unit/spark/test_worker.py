"""A Spark Python worker's one-off tuning (``gridstream.spark.worker``)."""

from __future__ import annotations

import gc

from gridstream.spark import worker

# tests/unit/conftest.py restores the thresholds and ``worker._prepared`` after each test


def test_raises_the_first_threshold_and_keeps_the_others() -> None:
    gc.set_threshold(700, 11, 12)
    worker.prepare()
    assert gc.get_threshold() == (worker.GC_GEN0, 11, 12)


def test_a_higher_threshold_stays() -> None:
    gc.set_threshold(worker.GC_GEN0 * 5, 10, 10)
    worker.prepare()
    assert gc.get_threshold() == (worker.GC_GEN0 * 5, 10, 10)


def test_collection_turned_off_stays_off() -> None:
    gc.set_threshold(0, 10, 10)
    worker.prepare()
    assert gc.get_threshold()[0] == 0


def test_once_per_process() -> None:
    gc.set_threshold(700, 10, 10)
    worker.prepare()
    gc.set_threshold(500, 10, 10)  # the operator's later choice is not undone
    worker.prepare()
    assert gc.get_threshold() == (500, 10, 10)
