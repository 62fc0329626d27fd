"""A Confluent-compatible schema registry, as every Avro codec of gridstream sees it.

One client for the connectors' converters, the pipelines' serializers and the mirror's
Avro codec: ``Registry`` is the protocol (a fake in unit tests),
``SchemaRegistryClientRegistry`` the implementation over confluent-kafka's
``SchemaRegistryClient`` (the stack's Apicurio registry at ``/apis/ccompat/v7``, or a
Confluent one).

- A schema the registry refuses on registration (incompatible with the subject's
  compatibility rule: HTTP 409; invalid: 422) is a ``CodecError``: the record's fault.
- A registry that cannot be reached, or answers with a server error, is a
  ``RegistryError`` (a ``ConnectorError``): the caller stops, records are not blamed.
- The URL may carry credentials (``https://user:pass@host``), or they come from
  ``basic.auth.user.info``: neither ever appears in a message or repr.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Protocol
from urllib.parse import urlsplit

from gridstream._optional import require
from gridstream.errors import CodecError, ConfigError, RegistryError

__all__ = ["MAGIC", "Registry", "SchemaRegistryClientRegistry", "redacted_url"]

MAGIC = 0
"""The Confluent wire format's first byte; the schema id follows (4 bytes, big-endian)."""
_NOT_FOUND = 404
_INCOMPATIBLE = 409
_INVALID = 422


def redacted_url(url: str) -> str:
    """``url`` without its user info (for messages)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<the registry URL>"
    return f"{parts.scheme}://{host}{port}{parts.path}"


class Registry(Protocol):
    """The registry calls the codecs make (a fake in unit tests)."""

    def register(self, subject: str, schema: str) -> int:
        """The id of ``schema`` under ``subject`` (registered if new)."""

    def schema(self, schema_id: int) -> str | None:
        """The schema text with that id, or None if unknown."""

    def latest(self, subject: str) -> str | None:
        """The subject's latest schema text, or None without one."""

    def lookup(self, subject: str, schema: str) -> int | None:
        """The id of ``schema`` if ``subject`` holds it (never registers), else None."""

    def versions(self, subject: str, after: int = 0) -> list[tuple[int, int, str]]:
        """The subject's Avro versions numbered above ``after``, oldest first: (version,
        schema id, schema text) each; none for an unknown subject."""

    def close(self) -> None:
        """Release the client."""


class SchemaRegistryClientRegistry:
    """``Registry`` over confluent-kafka's ``SchemaRegistryClient`` (built on first use)."""

    def __init__(self, url: str, user_info: str | None = None) -> None:
        self._url = url
        self._user_info = user_info
        self._client: Any = None

    def __repr__(self) -> str:
        return f"SchemaRegistryClientRegistry({redacted_url(self._url)!r})"

    def _open(self) -> Any:
        if self._client is None:
            SchemaRegistryClient = _schema_registry().SchemaRegistryClient  # noqa: N806
            conf = {"url": self._url}
            if self._user_info is not None:
                conf["basic.auth.user.info"] = self._user_info
            try:
                self._client = SchemaRegistryClient(conf)
            except (ValueError, TypeError) as exc:
                # not chained: the client's message quotes the URL, credentials included
                raise ConfigError(f"schema.registry.url {redacted_url(self._url)!r} or "
                                  f"its credentials are not usable: {type(exc).__name__}"
                                  ) from None
        return self._client

    def _scrub(self, text: str) -> str:
        """``text`` without the URL's or ``basic.auth.user.info``'s credentials."""
        secrets = [self._url, self._user_info or ""]
        try:
            parts = urlsplit(self._url)
            secrets += [parts.password or "", parts.netloc if parts.password else ""]
        except ValueError:
            pass
        for secret in sorted(filter(None, secrets), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def _failed(self, action: str, exc: Exception) -> RegistryError:
        status = getattr(exc, "http_status_code", None)
        detail = f"HTTP {status}: {getattr(exc, 'error_message', '')}" if status else \
            f"{type(exc).__name__}: {exc}"
        return RegistryError(f"schema registry {redacted_url(self._url)}: {action} "
                              f"failed ({self._scrub(detail)})")

    def register(self, subject: str, schema: str) -> int:
        Schema = _schema_registry().Schema  # noqa: N806
        SchemaRegistryError = _schema_registry(".error").SchemaRegistryError  # noqa: N806

        client = self._open()
        try:
            return int(client.register_schema(subject, Schema(schema, "AVRO")))
        except SchemaRegistryError as exc:
            if exc.http_status_code in (_INCOMPATIBLE, _INVALID):
                what = "incompatible" if exc.http_status_code == _INCOMPATIBLE else "invalid"
                rule = f" (compatibility rule {self._rule(subject)})" \
                    if exc.http_status_code == _INCOMPATIBLE else ""
                raise CodecError(f"the registry refused the schema for subject {subject!r} "
                                 f"as {what}{rule}: {exc.error_message}") from exc
            raise self._failed(f"registering subject {subject!r}", exc) from exc
        except Exception as exc:  # httpx / socket errors: the registry, not the record
            raise self._failed(f"registering subject {subject!r}", exc) from exc

    def _rule(self, subject: str) -> str:
        """The subject's compatibility rule (its own, else the registry's), for a refusal's
        message; ``unknown`` if the registry does not say."""
        client = self._open()
        for ask in (lambda: client.get_compatibility(subject), client.get_compatibility):
            try:
                level = ask()
            except Exception:  # noqa: S112 - a message detail: the refusal itself stands
                continue
            if level:
                return str(level)
        return "unknown"

    def lookup(self, subject: str, schema: str) -> int | None:
        Schema = _schema_registry().Schema  # noqa: N806

        client = self._open()
        found = self._read(f"looking up a schema in subject {subject!r}",
                           lambda: client.lookup_schema(subject, Schema(schema, "AVRO")))
        return None if found is None else int(found.schema_id)

    def schema(self, schema_id: int) -> str | None:
        client = self._open()
        found = self._read(f"looking up schema id {schema_id}",
                           partial(client.get_schema, schema_id))
        if found is None:
            return None
        if (found.schema_type or "AVRO") != "AVRO":
            raise CodecError(f"schema id {schema_id} is a {found.schema_type} schema, not Avro")
        return str(found.schema_str)

    def latest(self, subject: str) -> str | None:
        client = self._open()
        found = self._read(f"reading subject {subject!r}",
                           partial(client.get_latest_version, subject))
        if found is None or (found.schema.schema_type or "AVRO") != "AVRO":
            return None
        return str(found.schema.schema_str)

    def versions(self, subject: str, after: int = 0) -> list[tuple[int, int, str]]:
        client = self._open()
        numbers = self._read(f"reading the versions of subject {subject!r}",
                             lambda: client.get_versions(subject))
        found = []
        for number in sorted(int(n) for n in numbers or () if int(n) > after):
            version = self._read(f"reading version {number} of subject {subject!r}",
                                 partial(client.get_version, subject, number))
            if version is not None and (version.schema.schema_type or "AVRO") == "AVRO":
                found.append((number, int(version.schema_id), str(version.schema.schema_str)))
        return found

    def _read(self, action: str, call: Callable[[], Any]) -> Any:
        """``call()``; None when the registry answers 404 (unknown, or deleted since)."""
        SchemaRegistryError = _schema_registry(".error").SchemaRegistryError  # noqa: N806

        try:
            return call()
        except SchemaRegistryError as exc:
            if exc.http_status_code == _NOT_FOUND:
                return None
            raise self._failed(action, exc) from exc
        except Exception as exc:  # httpx / socket errors: the registry, not the record
            raise self._failed(action, exc) from exc

    def close(self) -> None:
        self._client = None


def _schema_registry(module: str = "") -> Any:
    """confluent-kafka's schema registry client (or a module of it), or the install
    command when the ``registry`` extra is missing."""
    return require("confluent_kafka.schema_registry" + module, "Avro with a schema registry")
