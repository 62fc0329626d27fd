"""The runner's lag figure is read from Kafka-shaped offsets only: a query whose source
keeps other offsets (the source connector's per-cache positions) runs without one."""

from __future__ import annotations

import json

from gridstream.spark.runner import _lag


def test_kafka_offsets_give_the_lag() -> None:
    progress = {"sources": [{"endOffset": {"t": {"0": 5, "1": 7}},
                             "latestOffset": json.dumps({"t": {"0": 9, "1": 7}})}]}
    assert _lag(progress) == 4


def test_a_source_connector_s_offsets_give_no_lag_and_no_error() -> None:
    position = {"lineage": "5c1d", "next": {"log": 120}}
    offset = {"v": 1, "t": 1700000000000,
              "caches": {"Orders": {"stream": position},
                         "Users": {"snapshot": {"file": "s-1", "rows": 0, "done": 0},
                                   "stream": position}},
              "events": {"0": {"kind": "discovered", "cache": "Users"}}}
    progress = {"sources": [{"endOffset": json.dumps(offset), "latestOffset": offset}]}
    assert _lag(progress) is None
