"""Which topic an operation goes to."""

from __future__ import annotations

from abc import ABC, abstractmethod

from gridstream.operations import Operation, TypeDescriptor

__all__ = ["DEFAULT_TOPIC_PROPERTY", "DefaultTopicResolver", "TopicResolver"]

DEFAULT_TOPIC_PROPERTY = "kafka.topic"


class TopicResolver(ABC):
    """Chooses the topic of an operation; ``None`` means it has none (an error the
    endpoint handles by policy, never a silent drop)."""

    @abstractmethod
    def resolve(self, operation: Operation, descriptor: TypeDescriptor | None) -> str | None:
        """The topic name, or None."""


class DefaultTopicResolver(TopicResolver):
    """The type's topic (class decorator); else the document property
    ``topic_property``; else ``default_topic``; else None. ``topic_prefix`` is prepended.

    A REMOVE that carries no last state cannot name its document topic: give the type a
    topic, or a ``default_topic``, when documents are removed that way.
    """

    def __init__(self, *, topic_property: str = DEFAULT_TOPIC_PROPERTY,
                 default_topic: str | None = None, topic_prefix: str = "") -> None:
        self.topic_property = topic_property
        self.default_topic = default_topic
        self.topic_prefix = topic_prefix

    def resolve(self, operation: Operation, descriptor: TypeDescriptor | None) -> str | None:
        topic = descriptor.topic if descriptor is not None else None
        if not topic and operation.data is not None:
            value = operation.data.get(self.topic_property)
            topic = value if isinstance(value, str) else None
        topic = topic or self.default_topic
        return f"{self.topic_prefix}{topic}" if topic else None
