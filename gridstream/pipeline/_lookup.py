"""One Arrow batch of a grid-map join: look its keys up, add the value's fields."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from gridstream.grid.contract import GridAdapter, Key, Value
from gridstream.pipeline._fit import misfits
from gridstream.pipeline.base import HIDDEN

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["enrich", "lookup_all"]


def lookup_all(adapter: GridAdapter, cache: str, keys: list[Key], chunk: int) -> dict[Key, Value]:
    found: dict[Key, Value] = {}
    for start in range(0, len(keys), chunk):
        found.update(adapter.get_all(cache, keys[start:start + chunk]))
    return found


def _convert(values: list[Any], kind: pa.DataType) -> tuple[pa.Array, dict[int, str]]:
    """The column, and the rows whose value does not fit ``kind`` (their reason)."""
    import pyarrow as pa

    loose = misfits(values, kind)  # values Arrow would convert (1.5 → 1, ...)
    if not loose:
        try:
            return pa.array(values, type=kind), {}
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            pass
    fitted: list[Any] = []
    bad: dict[int, str] = {}
    for i, value in enumerate(values):
        if i in loose:
            fitted.append(None)
            bad[i] = f"{type(value).__name__} value does not fit {kind}: {loose[i]}"
            continue
        try:
            pa.array([value], type=kind)
            fitted.append(value)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError,
                ValueError) as exc:
            fitted.append(None)
            bad[i] = f"{type(value).__name__} value does not fit {kind}: {exc}"
    return pa.array(fitted, type=kind), bad


def _field_value(value: Any, kind: Any) -> Any:
    """A JSON value as Arrow takes it: a map's object as its items."""
    import pyarrow as pa

    if isinstance(value, dict) and pa.types.is_map(kind):
        return list(value.items())
    return value


def enrich(adapter: GridAdapter, cache: str, on: str, how: str, added: StructType,
           whole: bool, batch: pa.RecordBatch, chunk: int) -> pa.RecordBatch:
    """``batch`` with the looked-up columns (``tables`` module docstring): rows without
    a match dropped (inner) or kept with nulls (left); error rows passed through; a value
    whose field does not fit its type turns its row into an error row."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    names = batch.schema.names
    keys = batch.column(on).to_pylist()
    errors = batch.column("_gs_error").to_pylist()
    wanted = list(dict.fromkeys(k for k, e in zip(keys, errors, strict=True)
                                if k is not None and e is None))
    found = lookup_all(adapter, cache, wanted, chunk)
    rows = [i for i, (k, e) in enumerate(zip(keys, errors, strict=True))
            if e is not None or how == "left" or (k is not None and k in found)]
    values = [found.get(keys[i]) if errors[i] is None and keys[i] is not None else None
              for i in rows]
    kept = batch.take(pa.array(rows, type=pa.int64()))
    arrow = to_arrow_schema(added, timezone="UTC", prefers_large_types=False)
    columns: list[pa.Array] = []
    bad: dict[int, str] = {}
    if whole:
        text = [None if v is None else orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
                for v in values]
        columns.append(pa.array(text, type=pa.string()))
    else:
        for field in arrow:
            raw = [None if v is None else _field_value(v.get(field.name), field.type)
                   for v in values]
            column, wrong = _convert(raw, field.type)
            columns.append(column)
            for i, reason in wrong.items():
                bad.setdefault(i, f"join {cache!r} field {field.name!r}: {reason}")
    out = pa.RecordBatch.from_arrays([*kept.columns, *columns],
                                     names=[*names, *arrow.names])
    return _mark_errors(out, bad, f"join:{cache}") if bad else out




def _mark_errors(batch: pa.RecordBatch, bad: dict[int, str], stage: str) -> pa.RecordBatch:
    """Rows in ``bad`` become error rows: ``_gs_error`` the reason, ``_gs_stage`` the
    join, every visible column null (the pipeline's error-row contract)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = pa.array([i in bad for i in range(batch.num_rows)], type=pa.bool_())
    arrays = []
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if name == "_gs_error":
            reasons = [bad.get(i) for i in range(batch.num_rows)]
            arrays.append(pc.if_else(mask, pa.array(reasons, type=column.type), column))
        elif name == "_gs_stage":
            arrays.append(pc.if_else(mask, pa.scalar(stage, type=column.type), column))
        elif name in HIDDEN:
            arrays.append(column)
        else:
            arrays.append(pc.if_else(mask, pa.nulls(batch.num_rows, type=column.type), column))
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
