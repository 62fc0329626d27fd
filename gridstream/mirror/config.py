"""The Kafka endpoint's options, each declared once (``gridstream._config``): what
``KafkaSyncEndpoint`` takes, and the table in ``docs/mirror.md``.

Objects that are code, not settings (a ``Codec`` or ``KeyCodec`` instance, a
``MessageFactory``, a ``TopicResolver``), are the endpoint's keyword arguments instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator

from gridstream._config import StrictModel, importance
from gridstream.kafka.config import KafkaProperties, secret_properties
from gridstream.mirror._offsets import DEFAULT_OFFSETS_TOPIC, OPEN_TRANSACTION_WAIT_S
from gridstream.mirror.policy import UndeliverablePolicy

__all__ = ["PRODUCER_DEFAULTS", "REGISTRY_OPTIONS", "KafkaEndpointConfig", "MirrorSettings",
           "TopicSettings"]

PRODUCER_DEFAULTS: Mapping[str, str | int | bool] = {
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "lz4",
    "linger.ms": 5,
    "partitioner": "murmur2_random",
}
"""Safe defaults under the user's producer properties (murmur2 matches Java clients)."""

REGISTRY_OPTIONS = ("schema_registry_url", "basic_auth_user_info", "subject_strategy")
"""The options of the ``avro`` codec's schema registry (only used with it)."""


class TopicSettings(StrictModel):
    """How topics are created on demand (``-1``: the broker's default)."""

    create: bool = True
    """Create a topic the endpoint writes to when it is missing; ``false``: a missing
    topic is not created (the producer's error says so)."""
    partitions: int = Field(default=-1, ge=-1)
    """Partitions of a topic created on demand (``-1``: the broker's
    ``num.partitions``)."""
    replication_factor: int = Field(default=-1, ge=-1)
    """Replicas of a topic created on demand, the offsets topic's too (``-1``: the
    broker's ``default.replication.factor``)."""
    config: dict[str, str] = Field(default_factory=dict)
    """Topic configuration of a topic created on demand (``retention.ms``, ...); values
    are given to the broker as text."""

    @field_validator("config", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, Mapping):
            return {k: v if isinstance(v, str) else str(v) for k, v in value.items()}
        return value


class MirrorSettings(StrictModel):
    """``Mirror(source, endpoint, name=..., settings=MirrorSettings(...))`` (or the same
    options as keywords): how the mirror gathers batches and polls its log."""

    max_batch_operations: int = Field(default=10_000, ge=1,
                                      json_schema_extra=importance("medium"))
    """Operations a batch gathers at most (whole bulks: a larger bulk goes alone, never
    split)."""
    max_batch_ms: int = Field(default=2, ge=0)
    """Once a batch has operations, how long after its first bulk's commit it waits for
    more."""
    poll_interval_ms: int = Field(default=5, ge=0)
    """How often an idle mirror polls its log (0: again at once)."""
    ack_interval_ms: int = Field(default=100, ge=0)
    """How often, at most, the log is acknowledged (always when the mirror closes)."""


class KafkaEndpointConfig(StrictModel):
    """``KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=...))``: where and how
    the mirror writes to Kafka."""

    bootstrap_servers: str | None = Field(
        default=None, validation_alias=AliasChoices("bootstrap_servers", "bootstrap.servers"),
        json_schema_extra=importance("high"))
    """The Kafka cluster; else ``bootstrap.servers`` in ``producer_properties`` (one of
    the two is required)."""
    producer_properties: dict[str, Any] = Field(default_factory=dict)
    """librdkafka producer properties, over ``PRODUCER_DEFAULTS`` (``acks=all``,
    idempotence, ``lz4``, ``linger.ms=5``, ``murmur2_random``); the explicit options
    win over them; librdkafka's callbacks (``error_cb``, ``stats_cb``, ...) are taken too.
    Secret properties (``gridstream.kafka.config.is_secret``) are held as ``SecretStr``,
    never printed; a ``KafkaProperties`` is taken with its secrets."""
    exactly_once: bool = Field(default=True, json_schema_extra=importance("high"))
    """One Kafka transaction per batch, with the mirror's position in it; ``false``:
    an idempotent producer, a flush per batch, no position in Kafka (the mirror resumes
    from the log's acknowledgement)."""
    codec: str = "json"
    """The value codec by name (``json``, ``msgpack``, ``avro`` or one registered with
    ``register_codec``); a ``Codec`` object given to the endpoint replaces it."""
    key_codec: str = "id"
    """The key codec by name (``id``, ...); a ``KeyCodec`` object given to the endpoint
    replaces it."""
    schema_registry_url: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("schema_registry_url",
                                                    "schema.registry.url"))
    """``avro``: register the writer schemas in this Confluent-compatible registry
    (else local ids derived from the schemas). Kept secret: it may carry
    ``user:password@``, never shown."""
    basic_auth_user_info: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("basic_auth_user_info",
                                                    "basic.auth.user.info"))
    """``avro``: ``user:password`` for the registry's basic authentication (only with
    ``schema_registry_url``); kept secret."""
    subject_strategy: Literal["record", "topic", "topic_record"] = "record"
    """``avro``: a schema's subject: ``record`` its full name, ``topic``
    ``<topic>-value``, ``topic_record`` ``<topic>-<full name>``."""
    topic_property: str = "kafka.topic"
    """The document property naming an operation's topic when its type names none."""
    default_topic: str | None = None
    """The topic of an operation whose type and document name none (else it is
    undeliverable: ``no_topic``)."""
    on_undeliverable: UndeliverablePolicy = Field(default=UndeliverablePolicy.FAIL,
                                                  json_schema_extra=importance("high"))
    """An operation that cannot be delivered (unknown type, no topic, unserializable,
    oversized): ``fail`` stops the mirror without advancing; ``dead_letter`` sends it
    to the dead-letter topic with the reason in its headers. Never dropped."""
    dead_letter_topic: str | None = None
    """The dead-letter topic (default ``gridstream-mirror-<name>-dlq``)."""
    offsets_topic: str = DEFAULT_OFFSETS_TOPIC
    """The compacted topic holding each exactly-once mirror's position."""
    transactional_id: str | None = None
    """The transactional id (default ``gridstream-mirror-<name>``, or the
    ``transactional.id`` property); keep it stable per mirror: a restart fences its
    zombie by it."""
    topics: TopicSettings = Field(default_factory=TopicSettings)
    """How topics are created on demand (``TopicSettings``: ``create``, ``partitions``,
    ``replication_factor``, ``config``)."""
    max_record_bytes: int | None = Field(default=None, gt=0)
    """The largest record sent (key, value, headers and 512 bytes of framing,
    uncompressed), under each topic's ``max.message.bytes`` too; default: the
    producer's ``message.max.bytes`` (1 000 000). Larger is undeliverable
    (``oversized``)."""
    transaction_timeout_ms: int | None = Field(default=None, gt=0)
    """``transaction.timeout.ms`` (default 60 000): how long a dead mirror's open
    transaction holds read_committed consumers back."""
    transactional_producers: Literal[1, 2] = Field(default=2,
                                                   json_schema_extra=importance("low"))
    """Exactly-once: producers taking turns, one transaction each (ids ``<id>`` and
    ``<id>.1``), so a transaction never waits for the previous commit's markers."""
    record_timestamp: Literal["send", "commit"] = "send"
    """A record's Kafka timestamp: ``send`` when the mirror produces it (retention
    counts from delivery), ``commit`` the operation's commit time (always in the
    ``gs.ts`` header and the envelope's ``ts``)."""
    timeout_s: float = Field(default=30.0, gt=0, json_schema_extra=importance("low"))
    """The bound of each blocking Kafka call (metadata, topic creation, flush, commit)."""
    open_transaction_wait_s: float = Field(default=OPEN_TRANSACTION_WAIT_S, ge=0,
                                           json_schema_extra=importance("low"))
    """Exactly-once, on opening: how long to wait for another mirror's open transaction
    in the offsets partition to end (over the 60 s transaction timeout plus the
    broker's 10 s check) before failing with ``EndpointError``."""

    @field_validator("producer_properties", mode="before")
    @classmethod
    def _revealed(cls, value: Any) -> Any:
        # a KafkaProperties reads its secrets as "***": take them from its client config
        return value.client_config() if isinstance(value, KafkaProperties) else value

    @field_validator("producer_properties")
    @classmethod
    def _secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return secret_properties(value)

    @model_validator(mode="after")
    def _registry_with_avro(self) -> KafkaEndpointConfig:
        given = [name for name in REGISTRY_OPTIONS if name in self.model_fields_set
                 and getattr(self, name) not in (None, "record")]
        if given and self.codec != "avro":
            raise ValueError(f"{', '.join(given)}: only used with codec 'avro' (not "
                             f"{self.codec!r})")
        if self.basic_auth_user_info is not None and self.schema_registry_url is None:
            raise ValueError("basic_auth_user_info is only used with schema_registry_url")
        return self

    def registry_options(self) -> dict[str, Any]:
        """The ``avro`` codec's options (``create_codec("avro", **...)``)."""
        url, user = self.schema_registry_url, self.basic_auth_user_info
        return {"schema_registry_url": url.get_secret_value() if url else None,
                "basic_auth_user_info": user.get_secret_value() if user else None,
                "subject_strategy": self.subject_strategy}
