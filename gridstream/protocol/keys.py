"""Record keys. The default key is the entity id as UTF-8 text, so Kafka keeps each
entity's operations in order on one partition and log compaction keeps its last state."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

from gridstream.errors import CodecError, ConfigError
from gridstream.operations import EntityId

__all__ = [
    "IdKeyCodec",
    "KeyCodec",
    "TypeIdKeyCodec",
    "create_key_codec",
    "key_codec_names",
    "register_key_codec",
]


class KeyCodec(ABC):
    """Builds the record key of an entity, and reads it back."""

    name: ClassVar[str]

    @abstractmethod
    def encode(self, type_name: str, entity_id: EntityId) -> bytes:
        """The key bytes."""

    @abstractmethod
    def decode(self, key: bytes) -> tuple[str | None, str]:
        """``(type name or None, id as text)``."""


class IdKeyCodec(KeyCodec):
    """``str(id)`` as UTF-8: one type per topic (the default)."""

    name = "id"

    def encode(self, type_name: str, entity_id: EntityId) -> bytes:
        return str(entity_id).encode()

    def decode(self, key: bytes) -> tuple[str | None, str]:
        return None, _text(key)


class TypeIdKeyCodec(KeyCodec):
    """``"<type>:<id>"`` as UTF-8, for topics shared by several types."""

    name = "type_id"

    def encode(self, type_name: str, entity_id: EntityId) -> bytes:
        if ":" in type_name:
            raise CodecError(f"type name {type_name!r} contains ':'; cannot build a type_id key")
        return f"{type_name}:{entity_id}".encode()

    def decode(self, key: bytes) -> tuple[str | None, str]:
        type_name, sep, entity_id = _text(key).partition(":")
        if not sep:
            raise CodecError("a type_id key must look like '<type>:<id>'")
        return type_name, entity_id


def _text(key: bytes) -> str:
    try:
        return key.decode()
    except UnicodeDecodeError as exc:
        raise CodecError("record key is not UTF-8 text") from exc


_REGISTRY: dict[str, Callable[[], KeyCodec]] = {"id": IdKeyCodec, "type_id": TypeIdKeyCodec}


def register_key_codec(name: str, factory: Callable[[], KeyCodec], *, replace: bool = False
                       ) -> None:
    """Allow a custom key codec under ``name``."""
    if name in _REGISTRY and not replace:
        raise ConfigError(f"a key codec named {name!r} is already registered")
    _REGISTRY[name] = factory


def key_codec_names() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


def create_key_codec(name: str) -> KeyCodec:
    """A key codec by allowed name; ``ConfigError`` for any other name."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(f"unknown key codec {name!r}; allowed: {', '.join(key_codec_names())}")
    return factory()
