"""The change log names its files after the query and the batch: a batch outside a
streaming query needs a query id, and a malformed one is refused (it becomes a glob)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gridstream.errors import ConfigError, StoreError
from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.spark.sinks import ParquetSink


def _pipeline() -> StoreFeed:
    return StoreFeed(FeedConfig.model_validate({
        "name": "log", "topics": ["t"], "checkpoint": "/tmp/ck",
        "sink": {"kind": "parquet", "path": "/tmp/changes"}}))


@pytest.mark.parametrize("query_id", ["*", "a/b", "q?", "[0-9]", "x" * 65, "q\n"])
def test_a_malformed_query_id_is_refused(query_id: str) -> None:
    records: Any = None  # refused before the batch is read
    with pytest.raises(ConfigError, match="query id"):
        _pipeline().process_batch(records, 3, query_id=query_id)


def test_the_change_log_needs_a_query_id_and_forgets_it_between_batches() -> None:
    sink = ParquetSink("/tmp/changes")
    frame: Any = SimpleNamespace(sparkSession=None)
    with pytest.raises(StoreError, match="no query id"):
        sink.write(frame, 3)
    sink.bind_query("q-1")
    assert sink.query_id == "q-1"
    sink.bind_query(None)  # a later batch by hand without one must not reuse it
    with pytest.raises(StoreError, match="no query id"):
        sink.write(frame, 3)
