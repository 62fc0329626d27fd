"""The Spark driver's log4j2.properties: each logger's filter is one that Log4j applies,
and the real-time messages it drops are exactly the two it names."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import gridstream.spark

LOG_CONF = Path(gridstream.spark.__file__).with_name("log4j2.properties")

_RT = "org.apache.spark.sql.execution.streaming.runtime.RealTimeModeAllowlist"


def _properties() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in LOG_CONF.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def test_each_logger_has_at_most_one_filter() -> None:
    # of several filters declared on one logger Log4j applies one (picked by id, not by
    # the file's order): another one would be silently off
    filters: defaultdict[str, set[str]] = defaultdict(set)
    for key in _properties():
        parts = key.split(".")
        if parts[0] == "logger" and len(parts) > 3 and parts[2] == "filter":
            filters[parts[1]].add(parts[3])
    assert filters, "the file declares no filter: the parse is wrong"
    assert {name: ids for name, ids in filters.items() if len(ids) > 1} == {}


def _real_time_filter() -> re.Pattern[str]:
    props = _properties()
    (logger,) = (key.split(".")[1] for key, value in props.items()
                 if key.endswith(".name") and value == _RT)
    (regex,) = (value for key, value in props.items()
                if key.startswith(f"logger.{logger}.filter.") and key.endswith(".regex"))
    (deny,) = (value for key, value in props.items()
               if key.startswith(f"logger.{logger}.filter.") and key.endswith(".onMatch"))
    assert deny == "DENY"
    return re.compile(regex)


def test_the_real_time_filter_drops_the_python_operator_and_the_noop_sink_only() -> None:
    pattern = _real_time_filter()
    dropped = [
        "The operator(s): org.apache.spark.sql.execution.python.MapInArrowExec is not in "
        "the operator allowlist for Real-Time Mode.",
        "The sink: org.apache.spark.sql.execution.datasources.noop.NoopTable$ is not in "
        "the sink allowlist for Real-Time Mode.",
    ]
    kept = [
        "The operator(s): org.apache.spark.sql.execution.SortExec is not in the operator "
        "allowlist for Real-Time Mode.",
        "The operator(s): org.apache.spark.sql.execution.python.MapInArrowExec, "
        "org.apache.spark.sql.execution.SortExec are not in the operator allowlist for "
        "Real-Time Mode.",
        "The sink: org.apache.spark.sql.execution.streaming.ConsoleTable$ is not in the "
        "sink allowlist for Real-Time Mode.",
    ]
    assert [m for m in dropped if not pattern.fullmatch(m)] == []
    assert [m for m in kept if pattern.fullmatch(m)] == []
