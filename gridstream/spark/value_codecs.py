"""The mirror's MessagePack and Avro values → envelope JSON, in Python.

The store feeds decode envelopes in the JVM from their JSON form
(``gridstream.spark.envelope``), and Avro ones in the JVM too
(``gridstream.spark.avro_envelopes``). A topic the mirror wrote with ``msgpack`` is
first transcoded, on Arrow batches (``mapInArrow``: one Python pass per batch, never a
row-by-row UDF), into the very JSON the mirror's ``json`` codec writes for the same
operation; the envelope checks, the error policy and the sinks then run unchanged, so a
store fed from any of the codecs holds the same content. The pipeline API's store sinks
take Avro values here too (``json_of``: their items are in Python already).

- MessagePack: the value is unpacked as it is (no descriptor needed): bytes become
  base64 text, everything else keeps its wire form, exactly as the JSON codec writes it.
- Avro (Confluent wire format): magic byte ``0``, the writer schema by its id (from the
  schema registry, ``schema_registry_url``; or local ids: the schema files of an
  ``avro_schema_dir`` or the pipeline's declared types), the body decoded with fastavro;
  the JSON-text kinds and ``extra`` are parsed back and ``data`` keeps exactly the keys
  ``present`` lists. Avro datetimes are UTC (a naive datetime was written as UTC, an
  offset other than UTC comes back as the same instant in UTC).
- A value that does not decode (wrong magic byte, unknown schema id, a body that does
  not match its schema, bytes that are not MessagePack, not an envelope) keeps its raw
  bytes and gets the reason in ``codec_error``: the pipeline's error policy takes it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gridstream.errors import CodecError, ConfigError
from gridstream.protocol.codecs import JsonCodec
from gridstream.protocol.registry import redacted_url
from gridstream.spark import worker

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from gridstream.protocol.avro import AvroCodec
    from gridstream.protocol.codec_base import Codec

__all__ = ["CODEC_ERROR", "JSON_TEXT", "VALUE_CODECS", "Transcoder", "avro_reader",
           "one_schema_source", "schema_source"]

VALUE_CODECS = ("json", "msgpack", "avro")
"""The codecs a store feed reads (the mirror's built-in ones)."""
JSON_TEXT = "_gs_json"
"""The transcoded envelope's JSON (null when the value did not decode)."""
CODEC_ERROR = "_gs_codec_error"
"""Why the value did not decode (null when it did)."""
_HEADERS_DDL = "ARRAY<STRUCT<key: STRING, value: BINARY>>"



def one_schema_source(schema_registry_url: str | None, avro_schema_dir: str | None) -> None:
    """``ConfigError`` when both a registry and a schema directory are given."""
    if schema_registry_url and avro_schema_dir:
        raise ConfigError("give schema_registry_url or avro_schema_dir, not both")


def schema_source(schema_registry_url: str | None, avro_schema_dir: str | None) -> str:
    """Where the writer schemas come from, for a description (no credentials)."""
    return (f"registry {redacted_url(schema_registry_url)}" if schema_registry_url
            else f"schemas in {avro_schema_dir}" if avro_schema_dir else "local ids")


def avro_reader(schema_registry_url: str | None, basic_auth_user_info: str | None,
                avro_schema_dir: str | None) -> AvroCodec:
    """The codec that looks the writer schemas up: the registry's, else the local ids
    (``avro_schema_dir``'s ``<id>.avsc`` files, and those derived from descriptors)."""
    from gridstream.protocol.avro import AvroCodec, LocalSchemaRegistry

    one_schema_source(schema_registry_url, avro_schema_dir)
    if schema_registry_url:
        return AvroCodec(schema_registry_url=schema_registry_url,
                         basic_auth_user_info=basic_auth_user_info)
    return AvroCodec(LocalSchemaRegistry(avro_schema_dir))


class Transcoder:
    """The ``mapInArrow`` function of one pipeline (picklable: shipped to the executors,
    where it builds its codec, and its registry client, on first use)."""

    def __init__(self, codec: str, *, schema_registry_url: str | None = None,
                 basic_auth_user_info: str | None = None, avro_schema_dir: str | None = None,
                 types: Mapping[str, Any] | None = None) -> None:
        if codec not in ("msgpack", "avro"):
            raise ConfigError(f"codec {codec!r}: only msgpack and avro are transcoded")
        if codec != "avro" and (schema_registry_url or avro_schema_dir):
            raise ConfigError("schema_registry_url and avro_schema_dir are only used with "
                              "codec 'avro'")
        one_schema_source(schema_registry_url, avro_schema_dir)
        self.codec = codec
        self._url = schema_registry_url
        self._user_info = basic_auth_user_info
        self._schema_dir = avro_schema_dir
        self._types = dict(types or {})
        self._decoder: Codec | None = None
        self._known: dict[str, Any] | None = None

    def __repr__(self) -> str:
        where = (f", registry={redacted_url(self._url)!r}" if self._url
                 else f", schema_dir={self._schema_dir!r}" if self._schema_dir else "")
        return f"Transcoder({self.codec!r}{where})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_decoder"] = state["_known"] = None  # built again where it runs
        return state

    def describe(self) -> str:
        """What decodes the values (for the pipeline's description)."""
        if self.codec == "msgpack":
            return "msgpack values → JSON on Arrow batches"
        return f"avro values ({schema_source(self._url, self._schema_dir)}) → JSON on Arrow batches"

    def _codec(self) -> Codec:
        if self._decoder is None:
            from gridstream.protocol.codecs import MsgpackCodec

            if self.codec == "msgpack":
                self._decoder = MsgpackCodec()
            else:
                self._decoder = self._avro()
        return self._decoder

    def _avro(self) -> AvroCodec:
        return avro_reader(self._url, self._user_info, self._schema_dir)

    def _descriptors(self) -> Mapping[str, Any]:
        """The declared types (the local registry derives ids from them)."""
        if self._known is None:
            from gridstream.spark.types import TypeRegistry

            self._known = (dict(TypeRegistry.from_payload(self._types).declared)
                           if self._types else {})
        return self._known

    def json_of(self, value: bytes) -> bytes:
        """The JSON the mirror's json codec writes for the operation ``value`` carries;
        ``CodecError`` if it carries none."""
        codec = self._codec()
        if self.codec == "avro":
            from gridstream.protocol.avro import AvroCodec

            assert isinstance(codec, AvroCodec)
            envelope = codec.decode_wire(value, self._descriptors())
        else:
            envelope = codec.decode(value, {})  # no descriptor: the values' wire form
        return _JSON.encode(envelope, None)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        worker.prepare()
        for batch in batches:
            texts: list[bytes | None] = []
            errors: list[str | None] = []
            for value in batch.column("value").to_pylist():
                if value is None:  # a tombstone: the JVM checks name it
                    texts.append(None)
                    errors.append(None)
                    continue
                try:
                    texts.append(self.json_of(value))
                    errors.append(None)
                except CodecError as exc:
                    texts.append(None)
                    errors.append(f"{self.codec} value does not decode: {exc}")
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(texts, pa.binary()), pa.array(errors, pa.string())],
                names=[*batch.schema.names, JSON_TEXT, CODEC_ERROR])

    def apply(self, records: DataFrame) -> DataFrame:
        """``records`` (Kafka source rows) with ``JSON_TEXT`` and ``CODEC_ERROR``."""
        columns = ["topic", "partition", "offset", "key", "value"]
        ddl = ("topic STRING, `partition` INT, offset BIGINT, key BINARY, value BINARY")
        if "headers" in records.columns:
            columns.append("headers")
            ddl += f", headers {_HEADERS_DDL}"
        ddl += f", {JSON_TEXT} BINARY, {CODEC_ERROR} STRING"
        return records.select(*columns).mapInArrow(self, ddl)


_JSON = JsonCodec()
