"""Decode a Kafka DataFrame's ``key`` and ``value``: in the JVM where a deserializer has
an exact form, the rest by a Python step fused into the pipeline's Python pass.

A row that does not decode keeps flowing with ``_gs_error`` (the reason) and
``_gs_stage`` (``key.deserializer`` / ``value.deserializer``) set and its input bytes in
``_gs_raw_key`` / ``_gs_raw_value``: the sink hands it to the error policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridstream.errors import CodecError
from gridstream.pipeline.serde._base import Deserializer

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["ArrowDecode", "DecodeError", "Decoded", "PythonDecode", "decode_columns"]


class DecodeError(CodecError):
    """A record's key or value did not decode; ``stage`` names the property
    (``key.deserializer`` / ``value.deserializer``)."""

    def __init__(self, message: str, *, stage: str) -> None:
        super().__init__(message)
        self.stage = stage


class PythonDecode:
    """The Python half of the decoding, for ``Flow.decode``: a row (a dict of the
    columns, ``topic`` among them) → the same dict with ``key`` / ``value`` decoded.
    Raises ``DecodeError`` for a row that does not decode. A row already in error is
    returned untouched. Picklable (the deserializers open their clients lazily)."""

    def __init__(self, key: Deserializer | None, value: Deserializer | None) -> None:
        self.key = key
        self.value = value

    def __repr__(self) -> str:
        return f"PythonDecode(key={self.key!r}, value={self.value!r})"

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        if row.get("_gs_error") is not None:
            return row
        topic = str(row.get("topic") or "")
        for column, deser in (("key", self.key), ("value", self.value)):
            if deser is None:
                continue
            try:
                row[column] = deser.python(topic, row.get(column))
            except CodecError as exc:
                raise DecodeError(str(exc), stage=f"{column}.deserializer") from exc
        return row


class ArrowDecode:
    """The head of a Python pass that follows the source: a batch's binary ``key`` and
    ``value`` decoded at once (``Deserializer.arrow``) instead of by the JVM. A batch
    with a row that does not decode is decoded row by row (``python``): such a row's
    value is None and its reason and stage (``key.deserializer`` before
    ``value.deserializer``, as in the JVM) are returned by row. Picklable."""

    def __init__(self, key: Deserializer, value: Deserializer) -> None:
        if not (key.vectorized and value.vectorized):
            raise ValueError("ArrowDecode needs two vectorized deserializers")
        self.key, self.value = key, value

    def __repr__(self) -> str:
        return f"ArrowDecode(key={self.key!r}, value={self.value!r})"

    def __call__(self, batch: pa.RecordBatch
                 ) -> tuple[dict[str, list[Any]], dict[int, tuple[str, str]]]:
        columns: dict[str, list[Any]] = {}
        failed: dict[int, tuple[str, str]] = {}
        for name, deser in (("key", self.key), ("value", self.value)):
            if name not in batch.schema.names:
                continue
            raw = batch.column(name)
            try:
                columns[name] = deser.arrow(raw).to_pylist()
                continue
            except CodecError:
                pass
            values: list[Any] = []
            for row, data in enumerate(raw.to_pylist()):
                try:
                    values.append(deser.python("", data))
                except CodecError as exc:
                    values.append(None)
                    failed.setdefault(row, (str(exc), f"{name}.deserializer"))
            columns[name] = values
        return columns, failed


@dataclass(frozen=True)
class Decoded:
    df: DataFrame
    """The input with ``key`` / ``value`` decoded where the JVM could (still binary
    where ``decode`` finishes them) and the hidden columns ``_gs_error``, ``_gs_stage``,
    ``_gs_raw_key``, ``_gs_raw_value`` set."""
    decode: PythonDecode | None
    """None when the JVM decoded both sides; else the step to fuse at the head of the
    first Python pass (the flow needs one)."""
    notes: tuple[str, ...]
    """What runs where, e.g. ``"key: String in the JVM"``."""


def _first(*errors: tuple[Column | None, str]) -> tuple[Column, Column]:
    """(error, stage) of the first side in error."""
    from pyspark.sql import functions as F  # noqa: N812

    error: Column = F.lit(None).cast("string")
    stage: Column = F.lit(None).cast("string")
    for column, name in reversed(errors):
        if column is None:
            continue
        error = F.when(column.isNotNull(), column).otherwise(error)
        stage = F.when(column.isNotNull(), F.lit(name)).otherwise(stage)
    return error, stage


def decode_columns(df: DataFrame, key: Deserializer, value: Deserializer, *,
                   topics: Sequence[str] | None = None) -> Decoded:
    """Decode ``df``'s binary ``key`` and ``value`` columns (a Kafka source's, of
    ``topics``: None for a pattern); see ``Decoded``. An ``_gs_error`` already set on a
    row is kept."""
    from pyspark.sql import functions as F  # noqa: N812

    columns = set(df.columns)
    out: dict[str, Column] = {"_gs_raw_key": F.col("key"), "_gs_raw_value": F.col("value")}
    errors: list[tuple[Column | None, str]] = []
    python: dict[str, Deserializer | None] = {"key": None, "value": None}
    notes = []
    staged: dict[str, Column] = {}
    for column, deser in (("key", key), ("value", value)):
        deser.for_topics(topics)
        deser.prepare()
        staged.update(deser.staged(F.col(column)))
    if staged:
        df = df.withColumns(staged)
    for column, deser in (("key", key), ("value", value)):
        form = deser.jvm(F.col(column))
        if form is None:
            python[column] = deser
            why = f" ({deser.why_python})" if deser.why_python else ""
            notes.append(f"{column}: {deser.name} in Python{why}")
            continue
        decoded, error = form
        out[column] = decoded
        errors.append((error, f"{column}.deserializer"))
        notes.append(f"{column}: {deser.name} in the JVM")
    error, stage = _first(*errors)
    if "_gs_error" in columns:
        keep = F.col("_gs_error").isNotNull()
        error = F.when(keep, F.col("_gs_error")).otherwise(error)
        stage = F.when(keep, F.col("_gs_stage")).otherwise(stage)
    if "_gs_raw_key" in columns:
        out.pop("_gs_raw_key")
        out.pop("_gs_raw_value")
    out["_gs_error"] = error
    out["_gs_stage"] = stage
    # a row in error shows no visible key/value (the raw bytes carry them)
    for column in ("key", "value"):
        if column in out:
            out[column] = F.when(error.isNull(), out[column])
    result = df.withColumns(out).drop(*staged)
    decode = None if python["key"] is None and python["value"] is None else \
        PythonDecode(python["key"], python["value"])
    return Decoded(result, decode, tuple(notes))
