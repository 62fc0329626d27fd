"""Unit tests call executor-side functions in the test process: each test starts with
the collector's thresholds it had and ``gridstream.spark.worker`` unprepared."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    from gridstream.spark import worker

    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)
    worker._prepared = False
