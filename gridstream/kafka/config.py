"""Kafka client properties: passed through as a dict, with secrets kept out of reprs.

librdkafka takes flat ``str -> str|int|bool`` properties. gridstream passes the user's
properties through unchanged, adds safe defaults underneath and lets explicit fields
win; values of secret keys are held as ``SecretStr`` so that a repr, a log line or an
exception never shows them.

A property is secret by a rule on its name (``is_secret``), not by a fixed list: any
dot/underscore/dash-separated word of the name containing ``password``, ``passwd``,
``secret``, ``token``, ``credential``, ``jaas`` or ``private``; inline key material
(a ``key`` word together with ``pem``, ``der``, ``data`` or ``material``, e.g.
``ssl.key.pem``; ``ssl.certificate.pem`` is public), the Java client's inline private
key ``ssl.keystore.key`` (Spark's Kafka source and sink take Java names); HTTP basic-auth
``user.info`` (``user:password``); and the SASL/OAUTHBEARER configuration strings
(``sasl.oauthbearer.config``, ``sasl.oauthbearer.extensions``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

__all__ = ["SECRET_MARKERS", "SHARED_PREFIXES", "KafkaProperties", "LossySetting",
           "PropertyValue", "client_config", "is_secret", "lossy_producer_setting",
           "property_text", "redact", "scrub", "secret_properties", "shared_config"]

PropertyValue = str | int | float | bool
SECRET_MARKERS = ("password", "passwd", "secret", "token", "credential", "jaas", "private")
"""A property with a name word containing one of these is a secret."""
SHARED_PREFIXES = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.", "socket.",
                   "broker.", "api.version", "metadata.", "reconnect.", "debug", "log_level",
                   "connections.max.idle.ms", "topic.metadata")
"""Client properties every kind of client shares with a producer (connection, security,
logging): what a plain consumer or an admin client takes from the producer's."""
_KEY_MATERIAL = frozenset({"pem", "der", "data", "material"})
_SASL_CONFIG = frozenset({"config", "extensions"})
_WORDS = re.compile(r"[._\-]+")


def is_secret(key: str) -> bool:
    """Whether the property named ``key`` holds a secret (see the module docstring)."""
    words = [w for w in _WORDS.split(key.lower()) if w]
    if any(marker in word for word in words for marker in SECRET_MARKERS):
        return True
    if "key" in words and _KEY_MATERIAL.intersection(words):
        return True
    if words[-1:] == ["key"] and "keystore" in words:  # Java's ssl.keystore.key (PEM)
        return True
    if any(a == "user" and b == "info" for a, b in zip(words, words[1:], strict=False)):
        return True  # basic.auth.user.info: user:password
    return "sasl" in words and "oauthbearer" in words and bool(_SASL_CONFIG.intersection(words))



def redact(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``properties`` fit for logs: secret values replaced by ``***``."""
    return {k: ("***" if is_secret(k) else v) for k, v in properties.items()}


def scrub(text: str, properties: Mapping[str, Any]) -> str:
    """``text`` with every secret value of ``properties`` replaced by ``***`` (for
    messages built from a client's error, which may quote a property's value)."""
    for key, value in properties.items():
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if is_secret(key) and isinstance(value, str) and value:
            text = text.replace(value, "***")
    return text


class KafkaProperties(Mapping[str, PropertyValue]):
    """An immutable set of librdkafka properties whose secrets never print."""

    __slots__ = ("_plain", "_secret")

    def __init__(self, properties: Mapping[str, Any] | None = None) -> None:
        self._plain: dict[str, PropertyValue] = {}
        self._secret: dict[str, SecretStr] = {}
        for key, value in (properties or {}).items():
            if isinstance(value, SecretStr):
                self._secret[key] = value
            elif is_secret(key):
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


def shared_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a client config that every kind of client takes (``SHARED_PREFIXES``)."""
    return {k: v for k, v in config.items() if k.startswith(SHARED_PREFIXES)}


def property_text(value: Any) -> str:
    """A client property's value as the clients take it: a secret unwrapped (never print
    it), booleans as ``true``/``false``."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def client_config(bootstrap_servers: str, properties: Mapping[str, Any]) -> dict[str, str]:
    """A confluent-kafka (librdkafka) client's config of any kind from a flow's servers
    and properties: what every kind takes (``shared_config``), secrets revealed (never
    print it)."""
    return shared_config({"bootstrap.servers": bootstrap_servers,
                          **{k: property_text(v) for k, v in properties.items()}})


@dataclass(frozen=True)
class LossySetting:
    """A producer property under which a delivery guarantee does not hold: the
    ``option``, its ``setting`` as given (``acks='1'``), ``why`` and the ``fix``."""

    option: str
    setting: str
    why: str
    fix: str


def lossy_producer_setting(properties: Mapping[str, Any]) -> LossySetting | None:
    """The property of ``properties`` under which a producer may lose a record (``acks``
    other than ``all`` / ``-1``) or write one twice or out of order
    (``enable.idempotence=false``), or None. The one rule for every gridstream producer
    that promises more than ``NONE`` (the pipeline API's Kafka sink, the source
    connector): both refuse such a setting when their config is loaded."""
    acks = properties.get("acks")
    if acks is not None and str(acks).strip().lower() not in ("all", "-1"):
        return LossySetting("acks", f"acks={acks!r}",
                            "a record the leader alone holds is lost with it", "use acks=all")
    idempotence = properties.get("enable.idempotence")
    if idempotence is not None and str(idempotence).strip().lower() == "false":
        return LossySetting("enable.idempotence", "enable.idempotence=false",
                            "a retried send may write a record twice or out of order",
                            "leave it true")
    return None


def secret_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """``properties`` with the value of every secret name (``is_secret``) held as a
    ``SecretStr``, so that no repr shows it."""
    return {k: SecretStr(str(v)) if is_secret(k) and not isinstance(v, SecretStr) else v
            for k, v in properties.items()}
