"""Spark's Kafka source as every gridstream job reads it (store feeds, the sink
connector, the pipeline API): the source options from typed settings and the consumer
properties Spark manages itself (the lag a query's progress shows: ``gridstream.ops.lag``;
a confluent-kafka client's config: ``gridstream.kafka.config.client_config``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gridstream.errors import ConfigError
from gridstream.kafka.config import property_text

__all__ = ["FETCH_MAX_WAIT_MS", "MAX_OFFSETS_PER_TRIGGER", "SPARK_MANAGED",
           "check_consumer_properties", "client_options", "source_options"]

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
    options.update({f"kafka.{k}": property_text(v) for k, v in properties.items()})
    return options


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
    options.update(startingOffsets=starting_offsets, includeHeaders=property_text(include_headers),
                   failOnDataLoss=property_text(fail_on_data_loss))
    if max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    if min_partitions is not None:
        options["minPartitions"] = str(min_partitions)
    return options


