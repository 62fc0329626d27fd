"""The wire protocol: operation envelope, record keys, headers, value codecs, topics.

See ``docs/protocol.md`` for the contract consumers can rely on.
"""

from __future__ import annotations

from gridstream.protocol.codecs import (
    Codec,
    JsonCodec,
    MsgpackCodec,
    codec_names,
    create_codec,
    register_codec,
)
from gridstream.protocol.envelope import Envelope, Header, Headers
from gridstream.protocol.keys import (
    IdKeyCodec,
    KeyCodec,
    TypeIdKeyCodec,
    create_key_codec,
    key_codec_names,
    register_key_codec,
)
from gridstream.protocol.messages import (
    H_CODEC,
    H_OP,
    H_PARTITION,
    H_TS,
    H_TXN,
    H_TYPE,
    H_VERSION,
    DefaultRecordEncoder,
    KafkaMessage,
    MessageFactory,
    OperationDecoder,
    OperationEncoder,
    header_value,
)
from gridstream.protocol.spark import envelope_ddl, spark_schema_ddl
from gridstream.protocol.topics import DEFAULT_TOPIC_PROPERTY, DefaultTopicResolver, TopicResolver

__all__ = [
    "DEFAULT_TOPIC_PROPERTY",
    "H_CODEC",
    "H_OP",
    "H_PARTITION",
    "H_TS",
    "H_TXN",
    "H_TYPE",
    "H_VERSION",
    "Codec",
    "DefaultRecordEncoder",
    "DefaultTopicResolver",
    "Envelope",
    "Header",
    "Headers",
    "IdKeyCodec",
    "JsonCodec",
    "KafkaMessage",
    "KeyCodec",
    "MessageFactory",
    "MsgpackCodec",
    "OperationDecoder",
    "OperationEncoder",
    "TopicResolver",
    "TypeIdKeyCodec",
    "codec_names",
    "create_codec",
    "create_key_codec",
    "envelope_ddl",
    "header_value",
    "key_codec_names",
    "register_codec",
    "register_key_codec",
    "spark_schema_ddl",
]
