"""Connector configuration: ``[[connector]]`` sections (or a ``.properties`` file).

Option names are the seeds' (GridGain's Kafka connector: ``failoverPolicy``,
``cacheWhitelist``, ``shallLoadInitialData``, ``tasks.max``, ...); the snake_case
equivalents are accepted too. Unknown options and bad values are ``ConfigError``s naming
the option (``gridstream.run.config`` turns pydantic's errors into them). Every
option, its default and what it guarantees: ``docs/connectors.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from gridstream._config import StrictModel, comma_separated
from gridstream.grid.settings import GridSettings
from gridstream.kafka.config import lossy_producer_setting, secret_properties
from gridstream.kafka.where import KafkaPosition, kafka_where, parse_kafka_where
from gridstream.spark.kafka_source import MAX_OFFSETS_PER_TRIGGER
from gridstream.spark.triggers import parse_trigger

__all__ = [
    "GET_PAST",
    "ConnectorConfig",
    "ConverterConfig",
    "DeliveryGuarantee",
    "ErrorHandling",
    "FailoverPolicy",
    "KeyPolicy",
    "SinkConnectorConfig",
    "SourceConnectorConfig",
    "TransformConfig",
]



def _flag(value: Any) -> Any:
    """A yes/no option: a boolean, or the text ``true`` / ``false`` (a ``.properties``
    file holds text); anything else (``"yes"``, ``1``) is refused, not guessed."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, not {value!r}")


def _count(value: Any) -> Any:
    """A number option: never a boolean (``true`` would read as 1)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not {value!r}")
    return value


Flag = Annotated[bool, BeforeValidator(_flag)]
Count = Annotated[int, BeforeValidator(_count)]


def _alias(*names: str) -> Any:
    return AliasChoices(*names)


class FailoverPolicy(StrEnum):
    """What a (re)started source does about the changes made while it was down."""

    NONE = "NONE"
    FULL_SNAPSHOT = "FULL_SNAPSHOT"
    BACKLOG = "BACKLOG"


class ErrorHandling(StrEnum):
    """What happens to a record that cannot be filtered, transformed, converted or
    applied: stop (position not advanced), skip (counted, logged) or dead-letter."""

    STOP_TASK = "STOP_TASK"
    LOG_ONLY = "LOG_ONLY"
    DEAD_LETTER = "DEAD_LETTER"


class KeyPolicy(StrEnum):
    """Where a sink takes a grid entry's key from."""

    KEY = "key"
    VALUE = "value"
    KAFKA = "kafka"


class DeliveryGuarantee(StrEnum):
    """How a source writes to Kafka: through the transactional writer, or Spark's own
    (at-least-once) Kafka sink."""

    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"


def _upper(value: Any) -> Any:
    return value.strip().upper().replace("-", "_") if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.strip().lower().replace("-", "_") if isinstance(value, str) else value


def _split_patterns(text: str) -> list[str]:
    """Comma-separated regular expressions, split only at commas outside groups,
    character classes and ``{m,n}`` counts (``a{1,3},b`` is two patterns, not three)."""
    parts: list[str] = []
    current: list[str] = []
    depth, in_class, i = 0, False, 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "({":
            depth += 1
        elif char in ")}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _regexes(value: Any) -> Any:
    """A list of regular expressions (a comma-separated string is split at the commas
    between patterns)."""
    if isinstance(value, str):
        value = _split_patterns(value)
    if isinstance(value, list | tuple):
        for pattern in value:
            try:
                re.compile(str(pattern))
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from exc
        return tuple(str(v) for v in value)
    return value


# ------------------------------------------------------------------------- shared parts


class TransformConfig(StrictModel):
    """One step of a transform chain (``transforms = [{ type = "rename", ... }]``).

    ``type`` is one of: ``rename`` (``fields`` = {old = new}), ``drop`` (``fields`` =
    [names]), ``mask`` (``fields`` = [names], ``replacement``), ``insert`` (``field``,
    ``value``), ``timestamp`` (``field``: the record's time, else now; ms since the epoch),
    ``route`` (``regex`` + ``replacement`` on the topic), ``route_by_cache``
    (``topics`` = {cache = topic}), ``value_to_key`` (``fields``), ``flatten``
    (``delimiter``). Which keys each type takes: ``gridstream.connect.transforms``."""

    model_config = ConfigDict(extra="allow")  # a transform type's own keys
    type: str = Field(min_length=1)


class ConverterConfig(StrictModel):
    """How values (and keys) are written to / read from Kafka.

    ``value.converter``: ``json`` (a JSON object), ``json_schema`` (Kafka Connect's
    ``{"schema": ..., "payload": ...}`` envelope) or ``avro`` (Confluent wire format:
    magic byte, schema id, Avro body; schemas in the registry at ``schema.registry.url``).
    Kafka Connect class names are accepted for the three. ``key.converter``: ``json``
    (a JSON scalar: ``"k-1"`` or ``12``) or ``string`` (UTF-8 text, read back as a string).
    """

    value: Literal["json", "json_schema", "avro"] = Field(
        default="json", validation_alias=_alias("value", "value.converter", "value_converter"))
    key: Literal["json", "string"] = Field(
        default="json", validation_alias=_alias("key", "key.converter", "key_converter"))
    schema_registry_url: str | None = Field(
        default=None, repr=False,
        validation_alias=_alias("schema_registry_url", "schema.registry.url"))
    """May carry credentials (``https://user:pass@host/...``): never printed."""
    schema_registry_user_info: SecretStr | None = Field(
        default=None, validation_alias=_alias(
            "schema_registry_user_info", "basic.auth.user.info",
            "schema.registry.basic.auth.user.info"))
    """``user:password`` for the registry's basic authentication."""
    subject_name_strategy: Literal["topic", "record", "topic_record"] = Field(
        default="topic", validation_alias=_alias("subject_name_strategy",
                                                 "value.subject.name.strategy"))
    avro_schemas: dict[str, str] = Field(
        default_factory=dict, validation_alias=_alias("avro_schemas", "avro.schemas"))
    """Source side, Avro: cache name → ``.avsc`` file. A cache without one gets a schema
    inferred from its entries (every field optional)."""

    @field_validator("value", mode="before")
    @classmethod
    def _value_class(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        known = {"org.apache.kafka.connect.json.jsonconverter": "json_schema",
                 "io.confluent.connect.avro.avroconverter": "avro",
                 "io.apicurio.registry.utils.converter.avroconverter": "avro"}
        return known.get(value.strip().lower(), _lower(value))

    @field_validator("key", mode="before")
    @classmethod
    def _key_class(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        known = {"org.apache.kafka.connect.json.jsonconverter": "json",
                 "org.apache.kafka.connect.storage.stringconverter": "string"}
        return known.get(value.strip().lower(), _lower(value))

    @model_validator(mode="after")
    def _registry(self) -> ConverterConfig:
        if self.value == "avro" and not self.schema_registry_url:
            raise ValueError("value.converter 'avro' needs schema.registry.url")
        if self.value != "avro":
            ignored = [name for name, given in (
                ("schema.registry.url", self.schema_registry_url is not None),
                ("basic.auth.user.info", self.schema_registry_user_info is not None),
                # a non-default strategy only: a config dumped and read again (the source's
                # data source options) names every field
                ("value.subject.name.strategy", self.subject_name_strategy != "topic"),
                ("avro.schemas", bool(self.avro_schemas))) if given]
            if ignored:
                raise ValueError(f"{', '.join(ignored)}: only used with value.converter "
                                 f"'avro' (not {self.value!r})")
        return self


GET_PAST = ("to get past it: errorHandlingPolicy LOG_ONLY (errors.tolerance=all) skips and "
            "logs bad records, DEAD_LETTER with deadLetterTopic "
            "(errors.deadletterqueue.topic.name) keeps them in a topic")
"""What a connector stopped by a bad record says to do about it."""

_POLICY_NAMES = ("error_handling_policy", "errorHandlingPolicy", "errors.tolerance")
_DEAD_LETTER_NAMES = ("dead_letter_topic", "deadLetterTopic", "errors.deadletterqueue.topic.name")


class _Common(StrictModel):
    """Options both connector kinds take."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    grid: GridSettings
    checkpoint: str = Field(min_length=1, validation_alias=_alias(
        "checkpoint", "checkpointLocation", "checkpoint_location"))
    bootstrap_servers: str | None = Field(
        default=None, validation_alias=_alias("bootstrap_servers", "bootstrap.servers"))
    kafka: dict[str, str | int | float | bool | SecretStr] = Field(default_factory=dict)
    """Kafka client properties (producer on the source side, consumer on the sink side);
    secrets are never printed."""
    converter: ConverterConfig = Field(default_factory=ConverterConfig)
    transforms: tuple[TransformConfig, ...] = ()
    cache_filter: str | None = Field(
        default=None, validation_alias=_alias("cache_filter", "cacheFilter"))
    """``module:function`` (or ``module.function``): an entry predicate ``(cache, key,
    value) -> bool``, imported only from a module of the run's ``allowed_modules``."""
    error_handling_policy: ErrorHandling = Field(
        default=ErrorHandling.STOP_TASK,
        validation_alias=_alias(*_POLICY_NAMES))
    dead_letter_topic: str | None = Field(
        default=None, validation_alias=_alias(*_DEAD_LETTER_NAMES))

    @field_validator("kafka")
    @classmethod
    def _secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return secret_properties(value)

    @field_validator("error_handling_policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        value = _upper(value)
        # Kafka Connect's errors.tolerance: none = stop, all = skip (logged)
        return {"NONE": "STOP_TASK", "ALL": "LOG_ONLY", "DLQ": "DEAD_LETTER"}.get(value, value)

    @model_validator(mode="before")
    @classmethod
    def _tolerance_with_queue(cls, data: Any) -> Any:
        """Kafka Connect: ``errors.tolerance=all`` with a dead-letter queue topic sends bad
        records to that topic: ``DEAD_LETTER`` here (``LOG_ONLY`` would drop them)."""
        if not isinstance(data, dict):
            return data
        policies = [k for k in _POLICY_NAMES if k in data]
        queue = any(data.get(k) for k in _DEAD_LETTER_NAMES)
        if (queue and len(policies) == 1 and isinstance(data[policies[0]], str)
                and data[policies[0]].strip().lower() == "all"):
            return {**data, policies[0]: "DEAD_LETTER"}
        return data

    @model_validator(mode="after")
    def _dead_letter(self) -> _Common:
        if self.error_handling_policy is ErrorHandling.DEAD_LETTER and not self.dead_letter_topic:
            raise ValueError("errorHandlingPolicy DEAD_LETTER needs deadLetterTopic")
        if self.dead_letter_topic and self.error_handling_policy is not ErrorHandling.DEAD_LETTER:
            raise ValueError(f"deadLetterTopic is only used with errorHandlingPolicy "
                             f"DEAD_LETTER (not {self.error_handling_policy.value}): bad "
                             "records would not go to it")
        return self


def _interval_ms(value: Any) -> Any:
    """``2000`` (ms) or ``"2 seconds"`` → milliseconds."""
    if isinstance(value, str) and not value.strip().isdigit():
        parsed = parse_trigger(value).get("processingTime")
        if not isinstance(parsed, str):
            raise ValueError(f"{value!r} is not an interval")
        return int(parsed.split()[0])
    return value


class SourceConnectorConfig(_Common):
    """``kind = "source"``: grid caches → Kafka topics."""

    kind: Literal["source"] = "source"
    failover_policy: FailoverPolicy = Field(
        default=FailoverPolicy.NONE, validation_alias=_alias("failover_policy", "failoverPolicy"))
    on_position_lost: Literal["fail", "snapshot"] = Field(
        default="fail", validation_alias=_alias("on_position_lost", "onPositionLost"))
    shall_load_initial_data: Flag = Field(
        default=True, validation_alias=_alias("shall_load_initial_data", "shallLoadInitialData"))
    shall_process_removals: Flag = Field(
        default=False, validation_alias=_alias("shall_process_removals", "shallProcessRemovals"))
    cache_whitelist: tuple[str, ...] = Field(
        default=(), validation_alias=_alias("cache_whitelist", "cacheWhitelist"))
    cache_blacklist: tuple[str, ...] = Field(
        default=(), validation_alias=_alias("cache_blacklist", "cacheBlacklist"))
    cache_list_poll_interval_ms: Count = Field(
        default=5000, ge=100, validation_alias=_alias(
            "cache_list_poll_interval_ms", "cacheListPollInterval"))
    poll_interval_ms: Count = Field(
        default=100, ge=10, validation_alias=_alias("poll_interval_ms", "pollInterval"))
    idle_poll_interval_ms: Count = Field(
        default=2000, ge=10, validation_alias=_alias("idle_poll_interval_ms",
                                                     "idlePollInterval"))
    batch_size: Count = Field(
        default=10_000, ge=1, validation_alias=_alias("batch_size", "batchSize"))
    max_changes_per_batch: Count = Field(
        default=100_000, ge=1, validation_alias=_alias("max_changes_per_batch",
                                                       "maxChangesPerBatch"))
    topic_prefix: str = Field(default="", validation_alias=_alias("topic_prefix", "topicPrefix"))
    topic_partitions: Count = Field(default=1, ge=1, validation_alias=_alias(
        "topic_partitions", "topic.creation.default.partitions"))
    delivery_guarantee: DeliveryGuarantee = Field(
        default=DeliveryGuarantee.EXACTLY_ONCE,
        validation_alias=_alias("delivery_guarantee", "deliveryGuarantee",
                                "exactly.once.support"))
    transaction_timeout_ms: Count = Field(default=60_000, gt=0, validation_alias=_alias(
        "transaction_timeout_ms", "transaction.timeout.ms"))

    @field_validator("failover_policy", mode="before")
    @classmethod
    def _failover(cls, value: Any) -> Any:
        return _upper(value)

    @field_validator("on_position_lost", mode="before")
    @classmethod
    def _lost(cls, value: Any) -> Any:
        return _lower(value)

    @field_validator("delivery_guarantee", mode="before")
    @classmethod
    def _guarantee(cls, value: Any) -> Any:
        value = _lower(value)
        # Kafka Connect's exactly.once.support: required / requested
        return {"required": "exactly_once", "requested": "exactly_once"}.get(value, value)

    @field_validator("cache_whitelist", "cache_blacklist", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _regexes(value)

    @field_validator("cache_list_poll_interval_ms", "poll_interval_ms",
                     "idle_poll_interval_ms", mode="before")
    @classmethod
    def _ms(cls, value: Any) -> Any:
        return _interval_ms(value)

    @model_validator(mode="after")
    def _exactly_once(self) -> SourceConnectorConfig:
        if (self.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
                and self.transaction_timeout_ms <= 2 * self.poll_interval_ms):
            raise ValueError(f"transaction.timeout.ms ({self.transaction_timeout_ms}) must "
                             f"exceed twice pollInterval ({self.poll_interval_ms} ms)")
        return self

    @model_validator(mode="after")
    def _producer(self) -> SourceConnectorConfig:
        problem = self.producer_problem(self.kafka)
        if problem is not None:
            raise ValueError(problem)
        return self

    def producer_problem(self, properties: Mapping[str, Any],
                         origin: str = "its Kafka properties") -> str | None:
        """Why the connector cannot produce with the Kafka ``properties`` (from
        ``origin``), or None: both guarantees need ``acks=all`` and the idempotent
        producer (``gridstream.kafka.config.lossy_producer_setting``, the pipeline's Kafka
        sink's rule too)."""
        lossy = lossy_producer_setting(properties)
        if lossy is None:
            return None
        return (f"source connector {self.name!r}: option {lossy.option!r} of {origin} "
                f"({lossy.setting}) cannot give {self.delivery_guarantee.value} "
                f"({lossy.why}); {lossy.fix}")

    @property
    def trigger(self) -> str:
        return f"{self.poll_interval_ms} ms"


class SinkConnectorConfig(_Common):
    """``kind = "sink"``: Kafka topics → grid caches."""

    kind: Literal["sink"] = "sink"
    topics: tuple[str, ...] | None = Field(default=None, validation_alias=_alias("topics"))
    topics_regex: str | None = Field(default=None, validation_alias=_alias(
        "topics_regex", "topics.regex"))
    cache_prefix: str = Field(default="", validation_alias=_alias("cache_prefix", "cachePrefix"))
    tasks_max: Count = Field(default=1, ge=1, le=256, validation_alias=_alias(
        "tasks_max", "tasks.max"))
    push_interval_ms: Count = Field(default=2000, ge=10, validation_alias=_alias(
        "push_interval_ms", "pushInterval"))
    flush_on_offset_commit: Flag = Field(default=False, validation_alias=_alias(
        "flush_on_offset_commit", "flushOnOffsetCommit"))
    shall_process_updates: Flag = Field(default=False, validation_alias=_alias(
        "shall_process_updates", "shallProcessUpdates"))
    key_policy: KeyPolicy = Field(default=KeyPolicy.KEY, validation_alias=_alias(
        "key_policy", "keyPolicy"))
    key_fields: tuple[str, ...] = Field(default=(), validation_alias=_alias(
        "key_fields", "keyFields"))
    starting_offsets: Literal["earliest", "latest"] = Field(
        default="earliest", validation_alias=_alias("starting_offsets", "startingOffsets"))
    max_offsets_per_trigger: Count | None = Field(
        default=MAX_OFFSETS_PER_TRIGGER, ge=1, validation_alias=_alias(
            "max_offsets_per_trigger", "maxOffsetsPerTrigger"))
    skip_records: tuple[str, ...] = Field(default=(), validation_alias=_alias(
        "skip_records", "skipRecords"))
    """Records passed over on purpose, ``topic[partition]@offset`` each (a poisoned
    record that stops the connector): counted as skipped, logged, and listed in the
    checkpoint's ``skipped.jsonl``."""

    @field_validator("topics", "key_fields", "skip_records", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return comma_separated(value)

    @field_validator("key_policy", mode="before")
    @classmethod
    def _key_policy(cls, value: Any) -> Any:
        return _lower(value)

    @field_validator("push_interval_ms", mode="before")
    @classmethod
    def _ms(cls, value: Any) -> Any:
        return _interval_ms(value)

    @field_validator("skip_records")
    @classmethod
    def _positions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(kafka_where(*parse_kafka_where(v)) for v in value)

    @property
    def skip_positions(self) -> frozenset[KafkaPosition]:
        return frozenset(parse_kafka_where(v) for v in self.skip_records)

    @field_validator("topics_regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            _regexes([value])
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SinkConnectorConfig:
        if (self.topics is None) == (self.topics_regex is None):
            raise ValueError("give exactly one of 'topics' or 'topics.regex'")
        if self.topics is not None and not self.topics:
            raise ValueError("'topics' is empty")
        if self.key_policy is KeyPolicy.VALUE and not self.key_fields:
            raise ValueError("keyPolicy 'value' needs keyFields")
        if self.key_policy is not KeyPolicy.VALUE and self.key_fields:
            raise ValueError("keyFields is only used with keyPolicy 'value'")
        if self.converter.avro_schemas:
            raise ValueError("avro.schemas is only used by a source (a sink reads each "
                             "record with its writer's schema from the registry)")
        topic = self.dead_letter_topic
        if topic and ((self.topics and topic in self.topics) or (
                self.topics_regex and re.fullmatch(self.topics_regex, topic))):
            raise ValueError(f"the dead-letter topic {topic!r} is one of the sink's topics: "
                             "it would read its own dead letters forever")
        return self

    @property
    def trigger(self) -> str:
        return f"{self.push_interval_ms} ms"


ConnectorConfig = Annotated[SourceConnectorConfig | SinkConnectorConfig,
                            Field(discriminator="kind")]
