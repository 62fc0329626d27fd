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
    from pyspark.sql import DataFrame

__all__ = [
    "ENVELOPE_DDL",
    "OPERATION_COLUMNS",
    "MalformedEnvelopeError",
    "codec_header_check",
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


def _sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _field(name: str) -> str:
    """The parsed envelope's field ``name``, in SQL."""
    return f"_e.`{name}`"


_CODEC_HEADER = (
    f"array_position(reverse(`headers`.`key`), {_sql_string(H_CODEC)})"
)
"""How far from the end the record's last ``gs.codec`` header is (0 if absent).

Array functions, not a lambda: a higher-order function is evaluated row by row outside
Spark's generated code, and was the costliest part of the checks."""

_CODEC_VALUE = (
    f"CASE WHEN {_CODEC_HEADER} > 0 THEN CAST(element_at(`headers`.`value`, "
    f"CAST(-{_CODEC_HEADER} AS INT)) AS STRING) END"
)
"""The value of the record's last ``gs.codec`` header (null if absent)."""

_ID_KIND = f"schema_of_variant({_field('id')})"

_CHECKS: tuple[tuple[str, str], ...] = (
    ("_no_value", "record has no value (a tombstone), not an operation"),
    (f"_e IS NULL OR ({_field('op')} IS NULL AND {_field('type')} IS NULL "
     f"AND {_field('version')} IS NULL)", "value is not a JSON envelope"),
    (f"{_field('op')} IS NULL", "envelope field 'op' is missing"),
    (f"{_field('op')} NOT IN ({', '.join(_sql_string(op.value) for op in OpType)})",
     "envelope field 'op' is not an operation type"),
    (f"{_field('type')} IS NULL OR {_field('type')} = ''", "envelope field 'type' is missing"),
    (f"{_field('id')} IS NULL OR is_variant_null({_field('id')})",
     "envelope field 'id' is missing"),
    (f"{_ID_KIND} NOT IN ('STRING', 'BIGINT', 'INT', 'SMALLINT', 'TINYINT')",
     "envelope field 'id' must be a string or a 64-bit integer"),
    (f"{_field('version')} IS NULL", "envelope field 'version' is missing or not an integer"),
    (f"{_field('ts')} IS NULL", "envelope field 'ts' is missing or not an integer"),
    (f"{_field('partition')} IS NULL",
     "envelope field 'partition' is missing or not an integer"),
    (f"{_field('data')} IS NOT NULL AND NOT (startswith({_field('data')}, '{{') "
     f"OR startswith(ltrim({_field('data')}), '{{'))",
     "envelope field 'data' must be an object or null"),
)
"""The checks of an envelope, in order: the first that holds names its problem.

Every check of a valid envelope runs on every record, so the common case is kept cheap:
``type`` is compared with ``''`` (no character count) and ``data`` is only left-trimmed
(a copy of the text) when it does not already start with ``{``."""


def codec_header_check(codec: str) -> tuple[str, str]:
    """(condition, reason) SQL of a record whose ``gs.codec`` header names a codec other
    than ``codec`` (the feed's); a record without the header passes."""
    # a null (no header) compares as null, which no WHEN takes
    reason = ("record codec is not json (only json decodes in the JVM)" if codec == "json"
              else f"record codec is not {codec} (the feed's codec)")
    return f"({_CODEC_VALUE}) != {_sql_string(codec)}", _sql_string(reason)


def _error(has_headers: bool, codec: str = "json", codec_error: str | None = None) -> str:
    """The SQL of the first problem of an envelope, or null.

    ``codec``: the codec the pipeline expects (a ``gs.codec`` header naming another one is
    the problem); ``codec_error``: a column with the reason a value that is not JSON
    could not be turned into an envelope (null when it could)."""
    checks = [(condition, _sql_string(reason)) for condition, reason in _CHECKS]
    if codec_error is not None:  # after the tombstone check
        checks.insert(1, (f"`{codec_error}` IS NOT NULL", f"`{codec_error}`"))
    if has_headers:
        checks.insert(0, codec_header_check(codec))
    cases = " ".join(f"WHEN {condition} THEN {reason}" for condition, reason in checks)
    return f"CASE {cases} ELSE CAST(NULL AS STRING) END"


def decode_envelopes(records: DataFrame, *, codec: str = "json", text: str = "value",
                     codec_error: str | None = None,
                     carry: tuple[str, ...] = ()) -> DataFrame:
    """Kafka source rows → source columns + decoded operation columns + ``error``.

    ``text`` is the column holding the envelope's JSON (the record's ``value``, or what a
    MessagePack or Avro value was transcoded to: ``gridstream.spark.value_codecs``, whose
    failures ``codec_error`` holds); ``codec`` the codec the records' ``gs.codec``
    header must name; ``carry``: more columns of ``records`` kept as they are.

    ``records`` has the Kafka source's columns (``headers`` optional). Valid rows have a
    null ``error``; a malformed row keeps its raw key, value and headers. Filter on
    ``error`` behind a cache or an ``observe``: Spark pushes a filter through these
    projections and would evaluate ``from_json`` once per field the checks read.

    The expressions are SQL text, parsed in the JVM: built with column functions they
    took some 1,200 Py4J calls (0.1–0.2 s of every batch).
    """
    has_headers = "headers" in records.columns
    # ``from_json`` is evaluated outside Spark's generated code, in a projection of its
    # own whose output rows are copied; testing ``value`` for null there too keeps the raw
    # value out of those rows when nothing downstream needs it (the change log).
    staged = records.selectExpr(
        "*", f"from_json(CAST(`{text}` AS STRING), {_sql_string(ENVELOPE_DDL)}) AS _e",
        "`value` IS NULL AS _no_value")
    headers = ("`headers`" if has_headers
               else "CAST(NULL AS ARRAY<STRUCT<key: STRING, value: BINARY>>)")
    return staged.selectExpr(
        "`topic`",
        "`partition` AS kafka_partition",
        "`offset`",
        "`key`",
        "`value`",
        f"{headers} AS headers",
        f"{_field('op')} AS op",
        f"{_field('type')} AS type",
        f"variant_get({_field('id')}, '$', 'string') AS id",
        f"{_ID_KIND} != 'STRING' AS id_int",
        f"{_field('version')} AS version",
        f"{_field('txn')} AS txn",
        f"{_field('ts')} AS ts",
        f"{_field('partition')} AS `partition`",
        f"{_field('data')} AS data",
        f"coalesce({_field('removed')}, CAST(array() AS ARRAY<STRING>)) AS removed",
        f"{_error(has_headers, codec, codec_error)} AS error",
        *(f"`{name}`" for name in carry),
    )
