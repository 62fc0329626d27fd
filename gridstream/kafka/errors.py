"""Turn confluent-kafka errors into ``KafkaClientError`` keeping librdkafka's code name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from gridstream.errors import KafkaClientError
from gridstream.kafka.config import scrub

__all__ = ["error_of", "is_abortable", "is_fatal", "kafka_error"]


def error_of(exc: BaseException) -> KafkaError | None:
    """The ``KafkaError`` inside a ``KafkaException`` (or the error itself)."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def is_fatal(exc: BaseException) -> bool:
    err = error_of(exc)
    return bool(err is not None and err.fatal())


def is_abortable(exc: BaseException) -> bool:
    err = error_of(exc)
    return bool(err is not None and err.txn_requires_abort())


def kafka_error(context: str, exc: BaseException | Any,
                config: Mapping[str, Any] | None = None) -> KafkaClientError:
    """A ``KafkaClientError`` for ``exc`` (raise it ``from exc``); ``code`` is the
    librdkafka name, e.g. ``_FENCED`` or ``TOPIC_AUTHORIZATION_FAILED``. With the
    client's ``config``, any secret value the client quoted is replaced by ``***``."""
    err = error_of(exc) if isinstance(exc, BaseException) else exc
    if isinstance(err, KafkaError):
        code = err.name()
        retriable = bool(err.retriable()) and not err.fatal()
        message = f"{context}: {code}: {err.str()}"
        return KafkaClientError(scrub(message, config or {}), code=code, retriable=retriable)
    return KafkaClientError(scrub(f"{context}: {type(exc).__name__}: {exc}", config or {}),
                            code=None)
