"""Serializer names as Kafka properties give them: short names and class names.

Names select from this fixed table only: no class is ever loaded by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gridstream.errors import ConfigError
from gridstream.pipeline.serde import _basic as b
from gridstream.pipeline.serde._base import Deserializer, Serializer

__all__ = ["DESERIALIZERS", "DESERIALIZER_OPTIONS", "KAFKA", "SERDE_OPTIONS", "SERIALIZERS",
           "SERIALIZER_OPTIONS", "check_options", "deserializer", "known_names", "serializer"]

KAFKA = "org.apache.kafka.common.serialization."
CONFLUENT = "io.confluent.kafka.serializers."

DeserializerFactory = Callable[[Mapping[str, Any], bool], Deserializer]
SerializerFactory = Callable[[Mapping[str, Any], bool], Serializer]


def _json_deserializer(props: Mapping[str, Any], is_key: bool) -> Deserializer:
    from gridstream.pipeline.serde._shaped import json_deserializer

    return json_deserializer(props, is_key=is_key)


def _avro_deserializer(props: Mapping[str, Any], is_key: bool) -> Deserializer:
    from gridstream.pipeline.serde._avro import AvroDeserializer

    return AvroDeserializer.from_props(props, is_key=is_key)


def _avro_serializer(props: Mapping[str, Any], is_key: bool) -> Serializer:
    from gridstream.pipeline.serde._avro import AvroSerializer

    return AvroSerializer.from_props(props, is_key=is_key)


def _plain(cls: type[Any]) -> Callable[[Mapping[str, Any], bool], Any]:
    def make(props: Mapping[str, Any], is_key: bool) -> Any:
        return cls(is_key=is_key)

    return make


# kind → (aliases, deserializer factory, serializer factory); class names are added below
_KINDS: dict[str, tuple[tuple[str, ...], DeserializerFactory, SerializerFactory]] = {
    "String": ((), _plain(b.StringDeserializer), _plain(b.StringSerializer)),
    "ByteArray": (("Bytes",), _plain(b.BytesDeserializer), _plain(b.BytesSerializer)),
    "Long": ((), _plain(b.LongDeserializer), _plain(b.LongSerializer)),
    "Integer": (("Int",), _plain(b.IntegerDeserializer), _plain(b.IntegerSerializer)),
    "Short": ((), _plain(b.ShortDeserializer), _plain(b.ShortSerializer)),
    "Double": ((), _plain(b.DoubleDeserializer), _plain(b.DoubleSerializer)),
    "Float": ((), _plain(b.FloatDeserializer), _plain(b.FloatSerializer)),
    "Void": (("None",), _plain(b.VoidDeserializer), _plain(b.VoidSerializer)),
    "Json": ((), _json_deserializer, _plain(b.JsonSerializer)),
    "Avro": (("KafkaAvro",), _avro_deserializer, _avro_serializer),
}
_KAFKA_CLASSES = ("String", "ByteArray", "Bytes", "Long", "Integer", "Short", "Double",
                  "Float", "Void")


def _table(suffix: str) -> dict[str, str]:
    """Every accepted spelling (lower case) → its kind."""
    names: dict[str, str] = {}
    for kind, (aliases, _, _) in _KINDS.items():
        for alias in (kind, *aliases):
            names[alias.lower()] = kind
            names[f"{alias}{suffix}".lower()] = kind
    for alias in _KAFKA_CLASSES:
        names[f"{KAFKA}{alias}{suffix}".lower()] = names[alias.lower()]
    names[f"{CONFLUENT}KafkaAvro{suffix}".lower()] = "Avro"
    return names


DESERIALIZERS = _table("Deserializer")
SERIALIZERS = _table("Serializer")


def known_names(*, serializer: bool) -> list[str]:
    """The accepted names, for messages and the docs."""
    suffix = "Serializer" if serializer else "Deserializer"
    short = [n for kind, (aliases, _, _) in _KINDS.items() for n in (kind, *aliases)]
    return [*short, *(f"{n}{suffix}" for n in short),
            *(f"{KAFKA}{n}{suffix}" for n in _KAFKA_CLASSES),
            f"{CONFLUENT}KafkaAvro{suffix}"]


SERDE_OPTIONS = ("schema.registry.url", "basic.auth.user.info", "key.subject.name.strategy",
                 "value.subject.name.strategy", "key.schema", "value.schema")
"""The options serializers and deserializers share."""
DESERIALIZER_OPTIONS = ("key.deserializer", "value.deserializer", "unknown.fields",
                        "unknown_fields")
SERIALIZER_OPTIONS = ("key.serializer", "value.serializer", "auto.register.schemas",
                      "use.latest.version")


def check_options(props: Mapping[str, Any], *, serializer: bool, owner: str) -> None:
    """``ConfigError`` for a property among ``props`` (the serde-prefixed ones of a
    source or sink) that is no option of its (de)serializers: a misspelt one (it would
    be ignored, the default silently taken) or one of the other direction."""
    own, other = ((SERIALIZER_OPTIONS, DESERIALIZER_OPTIONS) if serializer
                  else (DESERIALIZER_OPTIONS, SERIALIZER_OPTIONS))
    known = (*own, *SERDE_OPTIONS)
    for name in props:
        if name in known:
            continue
        if name in other:
            what = "a deserializer" if serializer else "a serializer"
            raise ConfigError(f"{owner}: {name} is {what} option; a "
                              f"{'sink' if serializer else 'source'} takes: "
                              f"{', '.join(known)}")
        raise ConfigError(f"{owner}: unknown (de)serializer property {name!r}; known: "
                          f"{', '.join(known)}")


def _kind(props: Mapping[str, Any], prop: str, table: Mapping[str, str],
          serializer: bool) -> str:
    given = props.get(prop)
    if given is None:
        return "ByteArray"
    if not isinstance(given, str):
        raise ConfigError(f"{prop} must be a name (a string), not a {type(given).__name__}")
    kind = table.get(given.strip().lower())
    if kind is None:
        raise ConfigError(f"{prop} {given!r} is not a known "
                          f"{'serializer' if serializer else 'deserializer'}; known: "
                          f"{', '.join(known_names(serializer=serializer))}")
    return kind


def deserializer(props: Mapping[str, Any], *, is_key: bool) -> Deserializer:
    """The deserializer ``key.deserializer`` / ``value.deserializer`` names (ByteArray
    when the property is absent); ``ConfigError`` for an unknown name or bad options."""
    prop = "key.deserializer" if is_key else "value.deserializer"
    kind = _kind(props, prop, DESERIALIZERS, False)
    return _KINDS[kind][1](props, is_key)


def serializer(props: Mapping[str, Any], *, is_key: bool) -> Serializer:
    """The serializer ``key.serializer`` / ``value.serializer`` names (ByteArray when the
    property is absent); ``ConfigError`` for an unknown name or bad options."""
    prop = "key.serializer" if is_key else "value.serializer"
    kind = _kind(props, prop, SERIALIZERS, True)
    return _KINDS[kind][2](props, is_key)
