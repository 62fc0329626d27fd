"""Value mapping between Python entries and codecs that lack rich types.

On the wire (JSON, MessagePack): ``datetime``/``date``/``time`` → ISO-8601 text,
``Decimal`` → text, ``UUID`` → text, ``bytes`` → base64 text (MessagePack keeps raw
bytes), ``set``/``frozenset``/``tuple`` → list, enums → their value, dataclasses → objects.
Decoding with the type's ``TypeDescriptor`` restores the declared (fixed) properties to
their Python types; dynamic properties come back as plain JSON values.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import enum
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from gridstream.errors import CodecError
from gridstream.operations import PropertySpec

__all__ = ["restore", "wire_default"]


def wire_default(value: Any, *, binary: bool = False) -> Any:
    """Fallback for values a serializer cannot handle natively (orjson/msgpack hook)."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        return raw if binary else base64.b64encode(raw).decode("ascii")
    if isinstance(value, set | frozenset):
        return _sorted_list(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"a value of type {type(value).__name__} has no wire form")


def _sorted_list(values: set[Any] | frozenset[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return list(values)


Converter = Callable[[Any], Any]


def _from_iso_datetime(value: Any) -> Any:
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else value


def _from_iso_date(value: Any) -> Any:
    return dt.date.fromisoformat(value) if isinstance(value, str) else value


def _to_decimal(value: Any) -> Any:
    return Decimal(value) if isinstance(value, str | int) else value


def _to_uuid(value: Any) -> Any:
    return uuid.UUID(value) if isinstance(value, str) else value


def _from_base64(value: Any) -> Any:
    return base64.b64decode(value, validate=True) if isinstance(value, str) else value


def _to_set(value: Any) -> Any:
    return set(value) if isinstance(value, list) else value


_CONVERTERS: dict[str, Converter] = {
    "datetime": _from_iso_datetime,
    "date": _from_iso_date,
    "decimal": _to_decimal,
    "uuid": _to_uuid,
    "bytes": _from_base64,
    "set": _to_set,
}

Plan = tuple[tuple[str, Converter | None, "Plan | None"], ...]


@lru_cache(maxsize=1024)
def _plan(specs: tuple[PropertySpec, ...]) -> Plan:
    """Which declared properties need converting, and how (cached per spec tuple)."""
    steps: list[tuple[str, Converter | None, Plan | None]] = []
    for spec in specs:
        if spec.kind == "object" and spec.nested:
            nested = _plan(spec.nested)
            if nested:
                steps.append((spec.name, None, nested))
        elif spec.kind in _CONVERTERS:
            steps.append((spec.name, _CONVERTERS[spec.kind], None))
    return tuple(steps)


def restore(data: Mapping[str, Any], specs: tuple[PropertySpec, ...]) -> dict[str, Any]:
    """A copy of ``data`` with declared properties converted back to Python types."""
    return _apply(dict(data), _plan(specs), "")


def _apply(data: dict[str, Any], plan: Plan, prefix: str) -> dict[str, Any]:
    for name, convert, nested in plan:
        value = data.get(name)
        if value is None:
            continue
        try:
            if nested is not None:
                if isinstance(value, Mapping):
                    data[name] = _apply(dict(value), nested, f"{prefix}{name}.")
            elif convert is not None:
                data[name] = convert(value)
        except (ValueError, InvalidOperation, binascii.Error, TypeError) as exc:
            raise CodecError(f"property {prefix}{name!s} cannot be restored: {exc}") from exc
    return data
