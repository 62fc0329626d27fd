"""Spark's Kafka source as every gridstream job reads it (store pipelines, the sink
connector): the source options from typed settings, the consumer properties Spark manages
itself, and the lag a query's progress shows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import SecretStr

from gridstream.errors import ConfigError
from gridstream.kafka.config import shared_config

__all__ = ["FETCH_MAX_WAIT_MS", "MAX_OFFSETS_PER_TRIGGER", "SPARK_MANAGED",
           "c_client_config", "check_consumer_properties", "client_options", "kafka_lag",
           "kafka_lags",
           "kafka_offsets", "source_options"]

MAX_OFFSETS_PER_TRIGGER = 100_000
"""The default most records per micro-batch of every Kafka source gridstream reads (store
pipelines, the sink connector, the pipeline API): a backlog drains as many batches, each
far inside the exactly-once writer's ``transaction.timeout.ms`` (one minute by default)
and the memory of one batch, where Spark's own default reads all of it in one."""

FETCH_MAX_WAIT_MS = 10
"""The default ``fetch.max.wait.ms`` of every Kafka source gridstream reads (Kafka's own:
500). Spark's consumer reads a partition's range of a batch up to its end offset; near the
log's end the broker holds a fetch for up to this long before it answers, and a task
reading several partitions waits that long for each, one after another: with Kafka's
default, a batch that reads up to the tail of 8 partitions in one task waited 8 × 0.5 s
(measured: 6.2 s → 2.5 s for a 100,000-record batch of the sink connector). The consumer
polls only while a task reads its range, so a short wait costs no idle polling."""

SPARK_MANAGED = frozenset({"auto.offset.reset", "enable.auto.commit", "key.deserializer",
                           "value.deserializer", "interceptor.classes"})
"""Consumer properties Spark's Kafka source manages itself."""


def check_consumer_properties(properties: Mapping[str, Any], owner: str) -> None:
    """``ConfigError`` (naming ``owner``) when ``properties`` set one Spark manages."""
    bad = SPARK_MANAGED & set(properties)
    if bad:
        raise ConfigError(f"{owner}: Spark's Kafka source manages {', '.join(sorted(bad))} "
                          "itself; remove them")


def client_options(bootstrap_servers: str, properties: Mapping[str, Any]) -> dict[str, str]:
    """``kafka.*`` options of a Spark Kafka source or sink (secrets included, unwrapped:
    never print them)."""
    options = {"kafka.bootstrap.servers": bootstrap_servers}
    options.update({f"kafka.{k}": _text(v) for k, v in properties.items()})
    return options


def c_client_config(bootstrap_servers: str, properties: Mapping[str, Any]) -> dict[str, str]:
    """The same client options for a confluent-kafka (librdkafka) client of any kind:
    what every kind takes (``shared_config``), secrets revealed (never print it)."""
    return shared_config({key.removeprefix("kafka."): value for key, value in
                          client_options(bootstrap_servers, properties).items()})


def source_options(bootstrap_servers: str, properties: Mapping[str, Any], *,
                   topics: Sequence[str] | None, pattern: str | None,
                   starting_offsets: str, isolation_level: str = "read_committed",
                   fail_on_data_loss: bool = True, include_headers: bool = False,
                   max_offsets_per_trigger: int | None = None,
                   min_partitions: int | None = None) -> dict[str, str]:
    """The Kafka source's options: ``subscribe`` (``topics``) or ``subscribePattern``
    (``pattern``), offsets, isolation, headers, rate limit."""
    if (topics is None) == (pattern is None):
        raise ConfigError("a Kafka source takes topics or a pattern, exactly one")
    options = client_options(bootstrap_servers, properties)
    options.setdefault("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
    options["kafka.isolation.level"] = isolation_level
    if topics is not None:
        options["subscribe"] = ",".join(topics)
    else:
        options["subscribePattern"] = str(pattern)
    options.update(startingOffsets=starting_offsets, includeHeaders=_text(include_headers),
                   failOnDataLoss=_text(fail_on_data_loss))
    if max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    if min_partitions is not None:
        options["minPartitions"] = str(min_partitions)
    return options


def kafka_lag(progress: Mapping[str, Any] | None) -> int | None:
    """Records between the last batch's end offsets and the latest offsets (all sources,
    all partitions), from a query's progress; None before the first batch."""
    lags = kafka_lags(progress)
    return sum(lags.values()) if lags else None


def kafka_lags(progress: Mapping[str, Any] | None) -> dict[tuple[str, str], int]:
    """(topic, partition) → records between the last batch's end offset and the latest
    offset, from a query's progress; empty before the first batch."""
    lags: dict[tuple[str, str], int] = {}
    for source in (progress or {}).get("sources", []):
        end = kafka_offsets(source.get("endOffset"))
        for key, value in kafka_offsets(source.get("latestOffset")).items():
            if key in end:
                lags[key] = lags.get(key, 0) + max(0, value - end[key])
    return lags


def kafka_offsets(raw: Any) -> dict[tuple[str, str], int]:
    """``{"topic": {"0": 12}}`` (a dict or its JSON text) → ``{(topic, "0"): 12}``. Only
    Kafka-like members count (every value an integer): a source connector's offsets
    (positions, snapshot progress) are not Kafka offsets."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    return {(t, p): o for t, parts in raw.items() if isinstance(parts, dict)
            and all(type(o) is int for o in parts.values())
            for p, o in parts.items()}


def _text(value: Any) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
