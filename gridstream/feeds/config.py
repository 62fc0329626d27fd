"""Typed configuration of a store feed: Kafka source, sink, checkpoint, trigger, errors.

Spark's Kafka source option names are accepted next to the snake_case fields
(``subscribe``/``topics``, ``subscribePattern``/``pattern``, ``startingOffsets``,
``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``minPartitions``), and so are the seeds'
(``errorHandlingPolicy``) and Kafka Connect's (``errors.deadletterqueue.topic.name``).
Kafka client properties pass through under ``kafka`` (secrets never printed).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from gridstream._config import StrictModel, comma_separated, importance
from gridstream.spark.dead_letter import ErrorPolicy
from gridstream.spark.kafka_source import MAX_OFFSETS_PER_TRIGGER
from gridstream.spark.sinks.config import CassandraSinkConfig, SinkConfig
from gridstream.spark.triggers import parse_trigger

__all__ = ["FeedConfig"]


def _policy(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    lowered = value.strip().lower()
    if lowered in ("stop_task", "stop", "none"):
        return ErrorPolicy.FAIL
    if lowered in ("dlq", "dead_letter", "dead-letter", "deadletter"):
        return ErrorPolicy.DEAD_LETTER
    if lowered in ("log_only", "skip", "all"):
        raise ValueError(f"{value!r} would drop malformed records; use 'dead_letter'")
    return lowered


class FeedConfig(StrictModel):
    """One ``[[feed]]``: Kafka topics → one sink, checkpointed."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """The feed's name (letters, digits, ``_.-``), unique among the run's feeds, pipelines
    and connectors; it names the feed in progress lines, errors and dead letters."""
    topics: tuple[str, ...] | None = Field(
        default=None, validation_alias=AliasChoices("topics", "subscribe"))
    """The topics to read: a list or comma-separated text. Exactly one of ``topics`` and
    ``pattern``."""
    pattern: str | None = Field(
        default=None, validation_alias=AliasChoices("pattern", "subscribePattern", "topics.regex"))
    """A regular expression of the topics to read (Spark's ``subscribePattern``: a topic
    whose whole name matches); it must not match ``dead_letter_topic``."""
    bootstrap_servers: str | None = Field(
        default=None, validation_alias=AliasChoices("bootstrap_servers", "bootstrap.servers"),
        json_schema_extra=importance("high")
    )
    """The Kafka cluster the feed reads (and writes its dead letters to). Unset:
    ``[kafka]``'s; ``[kafka]``'s properties apply either way."""
    starting_offsets: str = Field(
        default="earliest", validation_alias=AliasChoices("starting_offsets", "startingOffsets"))
    """Where a feed without a checkpoint starts: ``earliest``, ``latest`` or Spark's
    JSON of offsets per partition; a checkpoint's offsets always win."""
    max_offsets_per_trigger: int | None = Field(
        default=MAX_OFFSETS_PER_TRIGGER, ge=1,
        validation_alias=AliasChoices("max_offsets_per_trigger", "maxOffsetsPerTrigger"))
    """The most records a micro-batch reads (Spark's ``maxOffsetsPerTrigger``): a backlog
    drains as many batches (from Python, ``None`` reads everything available in one
    batch, as Spark does by default)."""
    fail_on_data_loss: bool = Field(
        default=True, validation_alias=AliasChoices("fail_on_data_loss", "failOnDataLoss"))
    """Fail the query when offsets it should read are gone (out of retention, a topic
    deleted); ``false`` skips them, and the feed's start line says so."""
    min_partitions: int | None = Field(
        default=None, ge=1, validation_alias=AliasChoices("min_partitions", "minPartitions"),
        json_schema_extra=importance("low")
    )
    """Spark's ``minPartitions``: a batch is read by at least this many Spark tasks,
    Kafka partitions split when there are fewer. Unset: one task per Kafka partition.
    Refused with the ``cassandra`` sink (it could reorder an entity's operations)."""
    isolation_level: Literal["read_committed", "read_uncommitted"] = "read_committed"
    """The consumer's ``isolation.level``: ``read_committed`` reads only committed Kafka
    transactions (the mirror writes transactions), ``read_uncommitted`` aborted ones too."""
    kafka: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """The feed's Kafka consumer properties, over ``[kafka]``'s ``properties``; those
    Spark's Kafka source manages itself (``auto.offset.reset``, ``enable.auto.commit``,
    deserializers, ``interceptor.classes``) are refused. Secret ones never appear in
    progress lines or errors."""
    checkpoint: str = Field(
        min_length=1, validation_alias=AliasChoices("checkpoint", "checkpointLocation"))
    """The Spark checkpoint directory (any Hadoop path): the offsets a restarted
    feed resumes from. One per feed or connector."""
    trigger: str = "5 seconds"
    """The micro-batch interval, a duration (``"500 ms"``, ``"5 seconds"``, ``"1 minute"``),
    or ``available_now``: read what is there, then stop."""
    error_handling_policy: ErrorPolicy = Field(
        default=ErrorPolicy.FAIL,
        validation_alias=AliasChoices("error_handling_policy", "errorHandlingPolicy"))
    """What a malformed record does: ``fail`` (``STOP_TASK``) fails the batch naming it,
    ``dead_letter`` sends it to ``dead_letter_topic`` and applies the rest. ``LOG_ONLY``
    is refused: it would drop records."""
    dead_letter_topic: str | None = Field(
        default=None, validation_alias=AliasChoices(
            "dead_letter_topic", "deadLetterTopic", "errors.deadletterqueue.topic.name"))
    """The topic malformed records go to under ``dead_letter`` (required with it, unused
    under ``fail``), with their headers and the reason; never a topic the feed
    reads."""
    unknown_types: Literal["dynamic", "fail"] = "dynamic"
    """A type not declared under ``[types]``: ``dynamic`` takes it as its id property
    (``default_id_property``) plus dynamic properties; ``fail`` makes it a batch error."""
    default_id_property: str = "id"
    """The id property of a type not declared under ``[types]`` (with ``unknown_types =
    "dynamic"``)."""
    codec: Literal["json", "msgpack", "avro"] = "json"
    """The codec the mirror wrote the topics with (``gridstream.spark.value_codecs``)."""
    schema_registry_url: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("schema_registry_url",
                                                    "schema.registry.url"))
    """``avro``: the registry holding the writer schemas; not with ``avro_schema_dir``.
    Kept secret (never printed): it may carry credentials."""
    basic_auth_user_info: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("basic_auth_user_info",
                                                    "basic.auth.user.info"))
    """``user:password`` for the registry's basic authentication (only with
    ``schema_registry_url``); kept secret (never printed)."""
    avro_schema_dir: str | None = None
    """``avro`` without a registry: the local registry's ``<id>.avsc`` files (else the
    ids derive from the declared ``[types]``)."""
    sink: SinkConfig
    """Where the feed writes: a table whose ``kind`` (``cassandra``, ``sql``,
    ``parquet`` or ``delta``) picks the sink, with that sink's options."""

    @field_validator("error_handling_policy", mode="before")
    @classmethod
    def _error_policy(cls, value: Any) -> Any:
        return _policy(value)

    @field_validator("topics", mode="before")
    @classmethod
    def _split_topics(cls, value: Any) -> Any:
        return comma_separated(value)

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        parse_trigger(value)
        return value

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"pattern {value!r} is not a regular expression: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _consistent(self) -> FeedConfig:
        if (self.topics is None) == (self.pattern is None):
            raise ValueError("give exactly one of 'topics' (subscribe) or 'pattern' "
                             "(subscribePattern)")
        if self.topics is not None and not self.topics:
            raise ValueError("'topics' is empty")
        dead_letter = self.error_handling_policy is ErrorPolicy.DEAD_LETTER
        if dead_letter and not self.dead_letter_topic:
            raise ValueError("errorHandlingPolicy 'dead_letter' needs 'dead_letter_topic'")
        self._no_dead_letter_loop()
        registry = [name for name, given in (
            ("schema_registry_url", self.schema_registry_url is not None),
            ("basic_auth_user_info", self.basic_auth_user_info is not None),
            ("avro_schema_dir", self.avro_schema_dir is not None)) if given]
        if registry and self.codec != "avro":
            raise ValueError(f"{', '.join(registry)}: only used with codec 'avro' "
                             f"(not {self.codec!r})")
        if self.basic_auth_user_info is not None and self.schema_registry_url is None:
            raise ValueError("basic_auth_user_info is only used with schema_registry_url")
        if self.schema_registry_url is not None and self.avro_schema_dir is not None:
            raise ValueError("give schema_registry_url or avro_schema_dir, not both")
        if self.min_partitions is not None and isinstance(self.sink, CassandraSinkConfig):
            raise ValueError(
                f"minPartitions ({self.min_partitions}) cannot be used with the cassandra "
                "sink: it splits a Kafka partition into concurrent Spark tasks, so an "
                "entity's operations could be applied out of order (a nested change "
                "read-modify-writes a whole column and would lose a newer edit); remove "
                "minPartitions")
        return self

    def _no_dead_letter_loop(self) -> None:
        """Refuse a source that would read the feed's own dead letters (they are
        malformed, so they would be dead-lettered again, forever)."""
        topic = self.dead_letter_topic
        if not topic:
            return
        if self.topics is not None and topic in self.topics:
            raise ValueError(f"the dead-letter topic {topic!r} is one of the feed's "
                             "topics: the feed would read its own dead letters forever")
        # Spark's subscribePattern takes a topic whose whole name matches (Java's
        # Pattern.matches), as re.fullmatch does
        if self.pattern is not None and re.fullmatch(self.pattern, topic):
            raise ValueError(f"the pattern {self.pattern!r} matches the dead-letter topic "
                             f"{topic!r}: the feed would read its own dead letters "
                             "forever; narrow the pattern or rename the dead-letter topic")
