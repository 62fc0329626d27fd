"""Typed configuration of a store pipeline: Kafka source, sink, checkpoint, trigger, errors.

Spark's Kafka source option names are accepted next to the snake_case fields
(``subscribe``/``topics``, ``subscribePattern``/``pattern``, ``startingOffsets``,
``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``minPartitions``), and so are the seeds'
(``errorHandlingPolicy``) and Kafka Connect's (``errors.deadletterqueue.topic.name``).
Kafka client properties pass through under ``kafka`` (secrets never printed).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from gridstream.spark.dead_letter import ErrorPolicy
from gridstream.spark.kafka_source import MAX_OFFSETS_PER_TRIGGER
from gridstream.stores.cassandra import CassandraConfig

__all__ = [
    "CassandraSinkConfig",
    "DeltaSinkConfig",
    "ParquetSinkConfig",
    "PipelineConfig",
    "SinkConfig",
    "SqlSinkConfig",
    "parse_trigger",
]

_STRICT = ConfigDict(frozen=True, populate_by_name=True, extra="forbid",
                     hide_input_in_errors=True)
_UNIT_MS = {
    "ms": 1.0, "millisecond": 1.0, "milliseconds": 1.0, "s": 1000.0, "second": 1000.0,
    "seconds": 1000.0, "m": 60_000.0, "min": 60_000.0, "minute": 60_000.0, "minutes": 60_000.0,
}
_TRIGGER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")


class CassandraSinkConfig(BaseModel):
    """``kind = "cassandra"``; every other key is a ``CassandraConfig`` field."""

    model_config = _STRICT
    kind: Literal["cassandra"] = "cassandra"
    cassandra: CassandraConfig

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, values: Any) -> Any:
        if isinstance(values, dict) and "cassandra" not in values:
            rest = {k: v for k, v in values.items() if k != "kind"}
            return {"kind": values.get("kind", "cassandra"), "cassandra": rest}
        return values


class SqlSinkConfig(BaseModel):
    """``kind = "sql"``: ``url`` is ``sqlite:///path.db`` or ``postgresql://...``."""

    model_config = _STRICT
    kind: Literal["sql"] = "sql"
    url: SecretStr
    table_prefix: str = ""
    create_tables: bool = True

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: SecretStr) -> SecretStr:
        scheme = value.get_secret_value().split("://", 1)[0].split("+", 1)[0]
        if scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("url must start with sqlite:/// or postgresql://")
        return value


class ParquetSinkConfig(BaseModel):
    """``kind = "parquet"``: the change log's root directory (any Hadoop path)."""

    model_config = _STRICT
    kind: Literal["parquet"] = "parquet"
    path: str = Field(min_length=1)
    compression: Literal["zstd", "snappy", "gzip", "lz4", "none"] = "zstd"


class DeltaSinkConfig(BaseModel):
    """``kind = "delta"``: the current-state table's location."""

    model_config = _STRICT
    kind: Literal["delta"] = "delta"
    path: str = Field(min_length=1)


SinkConfig = Annotated[
    CassandraSinkConfig | SqlSinkConfig | ParquetSinkConfig | DeltaSinkConfig,
    Field(discriminator="kind"),
]


def parse_trigger(text: str) -> dict[str, Any]:
    """``"5 seconds"`` → ``{"processingTime": "5 seconds"}``; ``"available_now"`` →
    ``{"availableNow": True}``; ``ValueError`` otherwise."""
    lowered = text.strip().lower().replace("-", "_")
    if lowered in ("available_now", "availablenow"):
        return {"availableNow": True}
    match = _TRIGGER.match(lowered)
    if match is None or match.group(2) not in _UNIT_MS:
        raise ValueError(f"trigger {text!r}: use e.g. '5 seconds', '500 ms' or 'available_now'")
    number, unit = match.groups()
    return {"processingTime": f"{int(float(number) * _UNIT_MS[unit])} milliseconds"}


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


class PipelineConfig(BaseModel):
    """One ``[[pipeline]]``: Kafka topics → one sink, checkpointed."""

    model_config = _STRICT

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    topics: tuple[str, ...] | None = Field(
        default=None, validation_alias=AliasChoices("topics", "subscribe"))
    pattern: str | None = Field(
        default=None, validation_alias=AliasChoices("pattern", "subscribePattern", "topics.regex"))
    bootstrap_servers: str | None = Field(
        default=None, validation_alias=AliasChoices("bootstrap_servers", "bootstrap.servers"))
    starting_offsets: str = Field(
        default="earliest", validation_alias=AliasChoices("starting_offsets", "startingOffsets"))
    max_offsets_per_trigger: int | None = Field(
        default=MAX_OFFSETS_PER_TRIGGER, ge=1,
        validation_alias=AliasChoices("max_offsets_per_trigger", "maxOffsetsPerTrigger"))
    fail_on_data_loss: bool = Field(
        default=True, validation_alias=AliasChoices("fail_on_data_loss", "failOnDataLoss"))
    min_partitions: int | None = Field(
        default=None, ge=1, validation_alias=AliasChoices("min_partitions", "minPartitions"))
    isolation_level: Literal["read_committed", "read_uncommitted"] = "read_committed"
    kafka: dict[str, str | int | float | bool] = Field(default_factory=dict)
    checkpoint: str = Field(
        min_length=1, validation_alias=AliasChoices("checkpoint", "checkpointLocation"))
    trigger: str = "5 seconds"
    error_handling_policy: ErrorPolicy = Field(
        default=ErrorPolicy.FAIL,
        validation_alias=AliasChoices("error_handling_policy", "errorHandlingPolicy"))
    dead_letter_topic: str | None = Field(
        default=None, validation_alias=AliasChoices(
            "dead_letter_topic", "deadLetterTopic", "errors.deadletterqueue.topic.name"))
    unknown_types: Literal["dynamic", "fail"] = "dynamic"
    default_id_property: str = "id"
    codec: Literal["json", "msgpack", "avro"] = "json"
    """The codec the mirror wrote the topics with (``gridstream.spark.value_codecs``)."""
    schema_registry_url: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("schema_registry_url",
                                                    "schema.registry.url"))
    """``avro``: the registry holding the writer schemas (it may carry credentials)."""
    basic_auth_user_info: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("basic_auth_user_info",
                                                    "basic.auth.user.info"))
    avro_schema_dir: str | None = None
    """``avro`` without a registry: the local registry's ``<id>.avsc`` files (else the
    ids derive from the declared ``[types]``)."""
    sink: SinkConfig

    @field_validator("error_handling_policy", mode="before")
    @classmethod
    def _error_policy(cls, value: Any) -> Any:
        return _policy(value)

    @field_validator("topics", mode="before")
    @classmethod
    def _split_topics(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(t.strip() for t in value.split(",") if t.strip())
        return value

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
    def _consistent(self) -> PipelineConfig:
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
        """Refuse a source that would read the pipeline's own dead letters (they are
        malformed, so they would be dead-lettered again, forever)."""
        topic = self.dead_letter_topic
        if not topic:
            return
        if self.topics is not None and topic in self.topics:
            raise ValueError(f"the dead-letter topic {topic!r} is one of the pipeline's "
                             "topics: the pipeline would read its own dead letters forever")
        # Spark's subscribePattern takes a topic whose whole name matches (Java's
        # Pattern.matches), as re.fullmatch does
        if self.pattern is not None and re.fullmatch(self.pattern, topic):
            raise ValueError(f"the pattern {self.pattern!r} matches the dead-letter topic "
                             f"{topic!r}: the pipeline would read its own dead letters "
                             "forever; narrow the pattern or rename the dead-letter topic")
