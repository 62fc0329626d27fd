"""Grid keys and values as JSON bytes, exactly: what the connectors' ``json`` formats,
the pipeline API's grid sinks and sources and their serializers share.

- a float JSON cannot hold (NaN, infinities) is a ``CodecError`` (never ``null``);
- an integer beyond 64 bits is a ``CodecError`` both ways, in keys and values (orjson
  alone read one as a rounded float).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from gridstream.errors import CodecError
from gridstream.grid.contract import Key

__all__ = ["decode_key", "dumps_value", "encode_key", "loads"]

_DIGIT_TABLE = bytes(48 if 48 <= b <= 57 else 45 if b == 45 else 32 for b in range(256))
"""Every digit → ``0``, ``-`` stays, anything else → a space (``bytes.translate``)."""
_LONG, _LONG_NEGATIVE = b"0" * 20, b"-" + b"0" * 19
"""Maybe an integer orjson reads as a float (beyond -2**63 ... 2**64-1): 20 digits in a
row, or 19 after a minus (19-digit nanosecond timestamps are read by orjson exactly).
Found with C-speed byte operations (a regular expression cost 1-2 µs a value)."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_integers(value: Any, path: str) -> None:
    """``CodecError`` for an integer beyond 64 bits anywhere in ``value``."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not -(2**63) <= value < 2**64:
            raise CodecError(f"{f'field {path!r}' if path else 'the value'}: {value} is an "
                             "integer beyond 64 bits")
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_integers(item, f"{path}.{name}" if path else str(name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_integers(item, f"{path}[{index}]")


def loads(data: bytes) -> Any:
    """``data`` parsed as JSON. orjson reads an integer beyond its 64-bit range as a
    rounded float (a silently changed value): text with such a run of digits is read
    again exactly, and such an integer is a ``CodecError`` naming its field (integers beyond
    64 bits are refused when written too; no grid holds them).
    ``orjson.JSONDecodeError`` for what is not JSON."""
    value = orjson.loads(data)
    shape = data.translate(_DIGIT_TABLE)
    if _LONG in shape or _LONG_NEGATIVE in shape:
        # orjson has validated the text (UTF-8, no NaN): only the numbers can differ
        try:
            exact = json.loads(data, parse_constant=_no_constant)
        except ValueError as exc:  # an integer of more digits than Python converts
            raise orjson.JSONDecodeError(str(exc), data.decode(errors="replace"), 0) from exc
        _check_integers(exact, "")
    return value


def encode_key(key: Key, kind: str = "json") -> bytes:
    if kind == "string":
        return str(key).encode()
    try:
        return orjson.dumps(key)
    except TypeError as exc:  # an integer beyond 64 bits, a key of another type
        raise CodecError(f"key cannot be written as JSON: {exc}") from exc


def decode_key(data: bytes | None, kind: str = "json") -> Key | None:
    """The key, or None for a record without one. ``CodecError`` when it is not a string
    or an integer."""
    if data is None:
        return None
    if kind == "string":
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise CodecError(f"key is not UTF-8: {exc}") from exc
    try:
        key = loads(data)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"key is not JSON: {exc}") from exc
    except CodecError as exc:
        raise CodecError(f"key: {exc}") from exc
    if isinstance(key, bool) or not isinstance(key, str | int):
        raise CodecError(f"key must be a JSON string or integer, not {type(key).__name__}")
    return key


_SCALARS = (str, int, bool, type(None))
_LEAVES = (str, int, float, type(None), dt.date, dt.time, uuid.UUID, orjson.Fragment)
"""What orjson writes natively with nothing inside (``datetime`` is a ``date``)."""
_Default = Callable[[Any], Any] | None


def _inside(value: Any, default: _Default) -> Iterable[tuple[str | int | None, Any]] | None:
    """What orjson writes inside ``value``: (field name, index, or None for the same
    place) and item pairs; None for a leaf. Mirrors orjson: mappings and lists (their
    subclasses too), exact tuples, dataclasses (their ``__dict__``, else their fields; no
    name starting with ``_``), enums (their value); any other type goes through
    ``default``."""
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, list) or type(value) is tuple:
        return enumerate(value)
    if isinstance(value, _LEAVES):
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        attrs = getattr(value, "__dict__", None)
        pairs = attrs.items() if attrs is not None else \
            [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
        return [(name, item) for name, item in pairs if not name.startswith("_")]
    if isinstance(value, enum.Enum):
        return [(None, value.value)]
    if default is None:
        return None
    try:
        return [(None, default(value))]
    except Exception:  # orjson has written the value: its default did not fail there
        return None


def _all_finite(value: Any, default: _Default = None) -> bool:
    """Whether no float orjson writes of ``value`` is NaN or infinite (the fast check)."""
    kind = type(value)
    items: Iterable[Any]
    if kind is dict:
        items = value.values()
    elif kind is list or kind is tuple:
        items = value
    elif isinstance(value, float):
        return math.isfinite(value)
    else:
        inner = _inside(value, default)
        if inner is None:
            return True
        items = [item for _, item in inner]
    for item in items:  # noqa: SIM110 - a loop: twice as fast as all() over a generator
        if type(item) not in _SCALARS and not _all_finite(item, default):
            return False
    return True


def _check_finite(value: Any, path: str, default: _Default = None) -> None:
    """``CodecError`` for a float JSON cannot hold (NaN, infinities) anywhere orjson
    writes in ``value`` (what ``_all_finite`` checks, with the place named)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError(f"{f'field {path!r}' if path else 'the value'}: {value} has "
                             "no JSON form")
        return
    for name, item in _inside(value, default) or ():
        inner = path if name is None else f"{path}[{name}]" if isinstance(name, int) else \
            f"{path}.{name}" if path else str(name)
        _check_finite(item, inner, default)


def dumps_value(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """``value`` as JSON (orjson; ``default`` for types orjson lacks). ``CodecError`` for
    what JSON cannot hold: NaN and infinities (orjson would write ``null``), integers
    beyond 64 bits, other types without ``default``."""
    try:
        data = orjson.dumps(value, default=default)
    except TypeError as exc:
        raise CodecError(f"value cannot be written as JSON: {exc}") from exc
    if b"null" in data and not _all_finite(value, default):
        _check_finite(value, "", default)  # orjson wrote NaN or an infinity as null
    return data
