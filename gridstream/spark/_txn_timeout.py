"""The exactly-once writer's transaction timeout, checked against its trigger and the
broker's ``transaction.max.timeout.ms`` (``KafkaExactlyOnceWriter``)."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._resource import ResourceType

from gridstream.errors import ConfigError, KafkaClientError
from gridstream.kafka.errors import kafka_error
from gridstream.spark.triggers import parse_trigger

__all__ = ["broker_max", "check_transaction_timeout"]


def check_transaction_timeout(timeout_ms: int, trigger: str | None,
                              broker_max_ms: int | None = None) -> None:
    """``ConfigError`` unless ``timeout_ms`` exceeds twice the trigger interval and fits
    under the broker's ``transaction.max.timeout.ms``."""
    if timeout_ms <= 0:
        raise ConfigError("transaction.timeout.ms must be positive")
    if trigger is not None:
        try:
            parsed = parse_trigger(trigger)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        interval = parsed.get("processingTime")
        interval_ms = int(interval.split()[0]) if isinstance(interval, str) else 0
        if timeout_ms <= 2 * interval_ms:
            raise ConfigError(
                f"transaction.timeout.ms ({timeout_ms}) must exceed twice the trigger "
                f"interval ({interval_ms} ms): a task's transaction lasts up to one batch, "
                "and the broker aborts it after the timeout (the batch then fails)")
    if broker_max_ms is not None and timeout_ms > broker_max_ms:
        raise ConfigError(
            f"transaction.timeout.ms ({timeout_ms}) exceeds the broker's "
            f"transaction.max.timeout.ms ({broker_max_ms}); lower it or raise the broker's")


def broker_max(admin: AdminClient, timeout_s: float) -> int | None:
    """The broker's ``transaction.max.timeout.ms`` (None if it does not say);
    ``KafkaClientError`` if it cannot be described (``check_broker_timeout=False``
    skips the check)."""
    try:
        brokers = admin.list_topics(timeout=timeout_s).brokers
        if not brokers:
            raise KafkaClientError("no broker in the cluster's metadata: cannot check "
                                   "transaction.max.timeout.ms", code=None)
        resource = ConfigResource(ResourceType.BROKER, str(next(iter(brokers))))
        configs = admin.describe_configs([resource])[resource].result(timeout_s)
    except KafkaException as exc:
        raise kafka_error("cannot read the broker's transaction.max.timeout.ms (to skip "
                          "the check: check_broker_timeout=False)", exc) from exc
    entry = configs.get("transaction.max.timeout.ms")
    return int(entry.value) if entry is not None and entry.value else None
