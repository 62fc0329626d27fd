"""Kafka client properties: passed through as a dict, with secrets kept out of reprs.

librdkafka takes flat ``str -> str|int|bool`` properties. gridstream passes the user's
properties through unchanged, adds safe defaults underneath and lets explicit fields
win; values of secret keys (passwords, JAAS configs, OAuth secrets) are held as
``SecretStr`` so that a repr, a log line or an exception never shows them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import SecretStr

__all__ = ["SECRET_MARKERS", "KafkaProperties", "PropertyValue", "redact"]

PropertyValue = str | int | float | bool
SECRET_MARKERS = ("password", "secret", "jaas", "token", "credentials")
"""A property whose name contains one of these is a secret."""


def _is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in SECRET_MARKERS)


def redact(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``properties`` fit for logs: secret values replaced by ``***``."""
    return {k: ("***" if _is_secret(k) else v) for k, v in properties.items()}


class KafkaProperties(Mapping[str, PropertyValue]):
    """An immutable set of librdkafka properties whose secrets never print."""

    __slots__ = ("_plain", "_secret")

    def __init__(self, properties: Mapping[str, Any] | None = None) -> None:
        self._plain: dict[str, PropertyValue] = {}
        self._secret: dict[str, SecretStr] = {}
        for key, value in (properties or {}).items():
            if isinstance(value, SecretStr):
                self._secret[key] = value
            elif _is_secret(key):
                self._secret[key] = SecretStr(str(value))
            else:
                self._plain[key] = value

    def layered(
        self, defaults: Mapping[str, PropertyValue], overrides: Mapping[str, PropertyValue]
    ) -> KafkaProperties:
        """``defaults`` under these properties, ``overrides`` (explicit fields) on top."""
        merged: dict[str, Any] = dict(defaults)
        merged.update(self._plain)
        merged.update(self._secret)
        merged.update(overrides)
        return KafkaProperties(merged)

    def client_config(self) -> dict[str, PropertyValue]:
        """The dict to hand to a confluent-kafka client (secrets revealed; never log it)."""
        config: dict[str, PropertyValue] = dict(self._plain)
        config.update({k: v.get_secret_value() for k, v in self._secret.items()})
        return config

    def get_str(self, key: str, default: str | None = None) -> str | None:
        """A non-secret property as text."""
        value = self._plain.get(key)
        return default if value is None else str(value)

    def __getitem__(self, key: str) -> PropertyValue:
        if key in self._secret:
            return "***"
        return self._plain[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._plain
        yield from self._secret

    def __len__(self) -> int:
        return len(self._plain) + len(self._secret)

    def __repr__(self) -> str:
        return f"KafkaProperties({redact(dict(self.items()))!r})"
