"""Rows as the JSON that ``INSERT ... JSON`` reads.

A whole-row replacement is one ``INSERT INTO t JSON ? DEFAULT NULL``: Cassandra itself
writes null into every column the JSON leaves out, including dynamic columns that
another writer added a moment ago, so no read and no delete are needed.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gridstream.errors import StoreError

__all__ = ["row_json"]

_BIGINT_MIN = -(2**63)
_BIGINT_MAX = 2**63 - 1
_EPOCH = dt.datetime(1970, 1, 1)


def _bigint(value: Any) -> Any:
    number = int(value)
    if not _BIGINT_MIN <= number <= _BIGINT_MAX:
        raise ValueError(f"{number} does not fit a bigint")
    return number


def _double(value: Any) -> Any:
    number = float(value)
    if math.isfinite(number):
        return number
    return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")


def _timestamp(value: Any) -> Any:
    if not isinstance(value, dt.datetime):
        raise TypeError(f"a timestamp needs a datetime, not a {type(value).__name__}")
    # the driver's own conversion, so both write paths store the same millisecond; sent
    # as a date string because Cassandra refuses small JSON integers for timestamps
    millis = int(calendar.timegm(value.utctimetuple()) * 1e3 + value.microsecond / 1e3)
    at = _EPOCH + dt.timedelta(milliseconds=millis)
    return (
        f"{at.year:04d}-{at.month:02d}-{at.day:02d} "
        f"{at.hour:02d}:{at.minute:02d}:{at.second:02d}.{at.microsecond // 1000:03d}+0000"
    )


def _date(value: Any) -> Any:
    if not isinstance(value, dt.date):
        raise TypeError(f"a date needs a datetime.date, not a {type(value).__name__}")
    return dt.date(value.year, value.month, value.day).isoformat()


def _blob(value: Any) -> Any:
    return "0x" + bytes(value).hex()


def _text(value: Any) -> Any:
    if not isinstance(value, str):
        raise TypeError(f"text needs a str, not a {type(value).__name__}")
    return value


def _boolean(value: Any) -> Any:
    if not isinstance(value, bool):
        raise TypeError(f"boolean needs a bool, not a {type(value).__name__}")
    return value


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "text": _text,
    "bigint": _bigint,
    "double": _double,
    "boolean": _boolean,
    "blob": _blob,
    "timestamp": _timestamp,
    "date": _date,
    "decimal": str,
    "uuid": str,
}


def row_json(values: Mapping[str, Any], cql_types: Mapping[str, str]) -> str:
    """The JSON object for ``values`` (column → encoded value); keys are quoted so that
    Cassandra keeps their case and punctuation."""
    doc: dict[str, Any] = {}
    for name, value in values.items():
        cql_type = cql_types[name]
        try:
            doc[f'"{name}"'] = None if value is None else _CONVERTERS[cql_type](value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise StoreError(f"column {name!r} ({cql_type}): {exc}") from exc
    return orjson.dumps(doc).decode("utf-8")
