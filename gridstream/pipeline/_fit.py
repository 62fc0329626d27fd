"""Whether Python values fit an Arrow type exactly.

``pyarrow.array(values, type=...)`` converts some values it should refuse for a
structured flow: a float for an integer type (``1.7`` → ``1``), a ``Decimal`` likewise,
``bytes`` for a string and ``str`` for a binary type, a dict with keys a struct does not
have (the keys dropped). ``misfit`` names such a value; ``misfits`` finds the rows of a
column holding one, cheaply when the column's values all have plain types.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["misfit", "misfits"]

_BYTES = (bytes, bytearray, memoryview)


def misfit(value: Any, kind: pa.DataType) -> str | None:
    """Why ``value`` does not fit ``kind`` exactly (None: Arrow's own conversion, which
    refuses what remains, decides)."""
    import pyarrow as pa

    if value is None:
        return None
    t = pa.types
    if t.is_integer(kind):
        if isinstance(value, float | Decimal):
            return f"{type(value).__name__} {value!r} is not an integer ({kind})"
        return None
    if t.is_string(kind) or t.is_large_string(kind):
        if isinstance(value, _BYTES):
            return f"{type(value).__name__} is not text ({kind})"
        return None
    if t.is_binary(kind) or t.is_large_binary(kind) or t.is_fixed_size_binary(kind):
        if isinstance(value, str):
            return f"str is not bytes ({kind})"
        return None
    if t.is_struct(kind):
        return _struct_misfit(value, kind)
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                reason = misfit(item, kind.value_type)
                if reason is not None:
                    return f"[{i}]: {reason}"
        return None
    if t.is_map(kind):
        pairs = value.items() if isinstance(value, dict) else (
            value if isinstance(value, list | tuple) else ())
        for pair in pairs:
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                return None  # Arrow refuses it
            reason = misfit(pair[0], kind.key_type) or misfit(pair[1], kind.item_type)
            if reason is not None:
                return f"[{pair[0]!r}]: {reason}"
        return None
    return None


def _struct_misfit(value: Any, kind: pa.StructType) -> str | None:
    fields = {kind.field(i).name: kind.field(i).type for i in range(kind.num_fields)}
    if isinstance(value, dict):
        extra = [k for k in value if k not in fields]
        if extra:
            return (f"field {extra[0]!r} is not in {kind} (a struct value holds only its "
                    "fields)")
        for name, item in value.items():
            reason = misfit(item, fields[name])
            if reason is not None:
                return f"field {name!r}: {reason}"
    elif isinstance(value, list | tuple) and len(value) == len(fields):
        for (name, field_kind), item in zip(fields.items(), value, strict=True):
            reason = misfit(item, field_kind)
            if reason is not None:
                return f"field {name!r}: {reason}"
    return None


def misfits(values: list[Any], kind: pa.DataType) -> dict[int, str]:
    """The rows of ``values`` that do not fit ``kind`` exactly, with the reason. For a
    flat type the reason depends on the value's Python type alone: one value of each
    type is looked at, the rows only when one of them does not fit."""
    import pyarrow as pa

    if not pa.types.is_nested(kind):
        samples = {type(v): v for v in values}
        if all(misfit(v, kind) is None for v in samples.values()):
            return {}
    bad: dict[int, str] = {}
    for i, value in enumerate(values):
        reason = misfit(value, kind)
        if reason is not None:
            bad[i] = reason
    return bad
