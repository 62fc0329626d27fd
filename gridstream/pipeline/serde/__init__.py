"""Kafka (de)serializers chosen by name, as Kafka properties name them.

``deserializer(props, is_key=...)`` / ``serializer(props, is_key=...)`` read
``key.deserializer`` / ``value.deserializer`` / ``key.serializer`` / ``value.serializer``
(short names or Kafka / Confluent class names, see ``docs/pipeline-api.md``
"Serializers and schemas"); ``decode_columns`` decodes a Kafka DataFrame's key and
value, in the JVM where an exact form exists, and says what is left for Python.
"""

from __future__ import annotations

from gridstream.pipeline.serde._base import Deserializer, Serializer
from gridstream.pipeline.serde._columns import (
    ArrowDecode,
    Decoded,
    DecodeError,
    PythonDecode,
    decode_columns,
)
from gridstream.pipeline.serde._encode import (
    ArrowEncode,
    KeySplit,
    KeyValues,
    RowEncode,
    encode_pair,
    split_item,
)
from gridstream.pipeline.serde._names import deserializer, known_names, serializer

__all__ = ["ArrowDecode", "ArrowEncode", "DecodeError", "Decoded", "Deserializer", "KeySplit",
           "KeyValues", "PythonDecode", "RowEncode", "Serializer", "decode_columns",
           "deserializer", "encode_pair", "known_names", "serializer", "split_item"]
