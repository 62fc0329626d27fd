"""The ``Codec`` interface every value codec implements.

Its own module so that the codec implementations (``codecs``, ``avro``) depend on it
and the registry in ``codecs`` depends on them, one way only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from gridstream.operations import TypeDescriptor
from gridstream.protocol.envelope import Envelope

__all__ = ["Codec"]


class Codec(ABC):
    """Turns an envelope into record-value bytes and back."""

    name: ClassVar[str]

    @abstractmethod
    def encode(self, envelope: Envelope, descriptor: TypeDescriptor | None) -> bytes:
        """Serialize; ``CodecError`` if a value cannot be represented."""

    def encode_for(self, envelope: Envelope, descriptor: TypeDescriptor | None,
                   topic: str) -> bytes:
        """Serialize a record bound for ``topic`` (a codec whose bytes depend on the
        topic, as Avro's subject does, overrides this); the same as ``encode`` here."""
        return self.encode(envelope, descriptor)

    @abstractmethod
    def decode(self, payload: bytes, types: Mapping[str, TypeDescriptor]) -> Envelope:
        """Deserialize; declared properties of known types come back as Python types."""
