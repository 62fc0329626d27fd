"""Decoding the mirror's operation envelopes in the JVM (``from_json``), and checking them.

The envelope is parsed with a generic schema: the envelope fields typed, ``id`` as a
VARIANT (so an integer id stays distinguishable from a numeric-looking string id) and
``data`` as the raw JSON text of the entry. Each row gets an ``error`` column: null for
a valid envelope, else the reason it is malformed. Nothing is decoded row by row in
Python here; sinks that need Python values parse ``data`` in Arrow batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream.errors import SparkError
from gridstream.operations import OpType
from gridstream.protocol import H_CODEC

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "ENVELOPE_DDL",
    "OPERATION_COLUMNS",
    "MalformedEnvelopeError",
    "decode_envelopes",
]

ENVELOPE_DDL = (
    "op STRING, type STRING, id VARIANT, version BIGINT, txn STRING, ts BIGINT, "
    "`partition` INT, data STRING, removed ARRAY<STRING>"
)
"""The generic envelope schema (``data`` keeps the entry's raw JSON text)."""

OPERATION_COLUMNS = (
    "op", "type", "id", "id_int", "version", "txn", "ts", "partition", "data", "removed",
)
"""The decoded operation, as sinks receive it (``id`` as text, ``id_int`` true when the
envelope's id was an integer)."""

SOURCE_COLUMNS = ("topic", "kafka_partition", "offset", "key", "value", "headers")
"""Where each record came from (kept for the dead-letter topic and the change log)."""


class MalformedEnvelopeError(SparkError):
    """A record is not a valid operation envelope (policy ``fail``): names where it is."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int,
                 count: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.count = count


def _codec_header() -> Column:
    """The value of the record's last ``gs.codec`` header (null if absent).

    Array functions, not a lambda: a higher-order function is evaluated row by row
    outside Spark's generated code, and was the costliest part of the checks.
    """
    import pyspark.sql.functions as F

    from_end = F.array_position(F.reverse(F.col("headers.key")), F.lit(H_CODEC))
    value = F.element_at(F.col("headers.value"), (-from_end).cast("int"))
    return F.when(from_end > 0, value.cast("string"))


def _error(e: Column, id_kind: Column, no_value: Column, has_headers: bool) -> Column:
    """The first problem of an envelope, or null.

    Every check of a valid envelope runs on every record, so the common case is kept
    cheap: ``type`` is compared with ``''`` (no character count) and ``data`` is only
    left-trimmed (a copy of the text) when it does not already start with ``{``.
    """
    import pyspark.sql.functions as F

    ops = [op.value for op in OpType]
    checks: list[tuple[Column, str]] = []
    if has_headers:
        codec = _codec_header()
        checks.append((codec.isNotNull() & (codec != F.lit("json")),
                       "record codec is not json (only json decodes in the JVM)"))
    checks += [
        (no_value, "record has no value (a tombstone), not an operation"),
        (e.isNull() | (e["op"].isNull() & e["type"].isNull() & e["version"].isNull()),
         "value is not a JSON envelope"),
        (e["op"].isNull(), "envelope field 'op' is missing"),
        (~e["op"].isin(ops), "envelope field 'op' is not an operation type"),
        (e["type"].isNull() | (e["type"] == F.lit("")), "envelope field 'type' is missing"),
        (e["id"].isNull() | F.is_variant_null(e["id"]), "envelope field 'id' is missing"),
        (~id_kind.isin("STRING", "BIGINT", "INT", "SMALLINT", "TINYINT"),
         "envelope field 'id' must be a string or a 64-bit integer"),
        (e["version"].isNull(), "envelope field 'version' is missing or not an integer"),
        (e["ts"].isNull(), "envelope field 'ts' is missing or not an integer"),
        (e["partition"].isNull(), "envelope field 'partition' is missing or not an integer"),
        (e["data"].isNotNull() & ~(F.startswith(e["data"], F.lit("{"))
                                   | F.startswith(F.ltrim(e["data"]), F.lit("{"))),
         "envelope field 'data' must be an object or null"),
    ]
    result: Column = F.lit(None).cast("string")
    for condition, reason in reversed(checks):
        result = F.when(condition, F.lit(reason)).otherwise(result)
    return result


def decode_envelopes(records: DataFrame) -> DataFrame:
    """Kafka source rows → source columns + decoded operation columns + ``error``.

    ``records`` has the Kafka source's columns (``headers`` optional). Valid rows have a
    null ``error``; a malformed row keeps its raw key, value and headers. Filter on
    ``error`` behind a cache or an ``observe``: Spark pushes a filter through these
    projections and would evaluate ``from_json`` once per field the checks read.
    """
    import pyspark.sql.functions as F

    has_headers = "headers" in records.columns
    env = F.from_json(F.col("value").cast("string"), ENVELOPE_DDL)
    # ``from_json`` is evaluated outside Spark's generated code, in a projection of its
    # own whose output rows are copied; testing ``value`` for null there too keeps the raw
    # value out of those rows when nothing downstream needs it (the change log).
    staged = records.withColumns({"_e": env, "_no_value": F.col("value").isNull()})
    e = F.col("_e")
    id_kind = F.schema_of_variant(e["id"])
    headers = F.col("headers") if has_headers else F.lit(None).cast(
        "array<struct<key:string,value:binary>>")
    return staged.select(
        F.col("topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset"),
        F.col("key"),
        F.col("value"),
        headers.alias("headers"),
        e["op"].alias("op"),
        e["type"].alias("type"),
        F.variant_get(e["id"], "$", "string").alias("id"),
        (id_kind != F.lit("STRING")).alias("id_int"),
        e["version"].alias("version"),
        e["txn"].alias("txn"),
        e["ts"].alias("ts"),
        e["partition"].alias("partition"),
        e["data"].alias("data"),
        F.coalesce(e["removed"], F.array().cast("array<string>")).alias("removed"),
        _error(e, id_kind, F.col("_no_value"), has_headers).alias("error"),
    )
