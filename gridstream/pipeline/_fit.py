"""Whether Python values fit an Arrow type exactly.

``pyarrow.array(values, type=...)`` converts some values it should refuse for a
structured flow: a float for an integer type (``1.7`` → ``1``), a ``Decimal`` likewise,
``bytes`` for a string and ``str`` for a binary type, a dict with keys a struct does not
have (the keys dropped). ``misfit`` names such a value; ``misfits`` finds the rows of a
column holding one, cheaply when the column's values all have plain types.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["checker", "misfit", "misfits"]

_BYTES = (bytes, bytearray, memoryview)


Check = Callable[[Any], "str | None"]


def misfit(value: Any, kind: pa.DataType) -> str | None:
    """Why ``value`` does not fit ``kind`` exactly (None: Arrow's own conversion, which
    refuses what remains, decides)."""
    check = checker(kind)
    return None if check is None or value is None else check(value)


def checker(kind: pa.DataType) -> Check | None:
    """The check of a (non-null) value against ``kind``, built once per type; None when
    Arrow's conversion needs no help for ``kind``."""
    import pyarrow as pa

    t = pa.types
    if t.is_integer(kind):
        def integer(value: Any) -> str | None:
            if isinstance(value, float | Decimal):
                return f"{type(value).__name__} {value!r} is not an integer ({kind})"
            return None
        return integer
    if t.is_string(kind) or t.is_large_string(kind):
        def text(value: Any) -> str | None:
            return f"{type(value).__name__} is not text ({kind})" \
                if isinstance(value, _BYTES) else None
        return text
    if t.is_binary(kind) or t.is_large_binary(kind) or t.is_fixed_size_binary(kind):
        def binary(value: Any) -> str | None:
            return f"str is not bytes ({kind})" if isinstance(value, str) else None
        return binary
    if t.is_struct(kind):
        return _struct_checker(kind)
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return _list_checker(checker(kind.value_type))
    if t.is_map(kind):
        return _map_checker(checker(kind.key_type), checker(kind.item_type))
    return None


def _list_checker(item: Check | None) -> Check | None:
    if item is None:
        return None

    def check(value: Any) -> str | None:
        if isinstance(value, list | tuple):
            for i, element in enumerate(value):
                reason = None if element is None else item(element)
                if reason is not None:
                    return f"[{i}]: {reason}"
        return None
    return check


def _map_checker(key: Check | None, item: Check | None) -> Check | None:
    if key is None and item is None:
        return None

    def check(value: Any) -> str | None:
        pairs = value.items() if isinstance(value, dict) else (
            value if isinstance(value, list | tuple) else ())
        for pair in pairs:
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                return None  # Arrow refuses it
            for part, part_check in zip(pair, (key, item), strict=True):
                reason = None if part is None or part_check is None else part_check(part)
                if reason is not None:
                    return f"[{pair[0]!r}]: {reason}"
        return None
    return check


def _struct_checker(kind: pa.StructType) -> Check:
    names = [kind.field(i).name for i in range(kind.num_fields)]
    checks = {n: checker(kind.field(i).type) for i, n in enumerate(names)}
    known = frozenset(names)

    def check(value: Any) -> str | None:
        if isinstance(value, dict):
            if not known.issuperset(value):
                extra = [k for k in value if k not in known]
                return (f"field {extra[0]!r} is not in {kind} (a struct value holds only "
                        "its fields)")
            pairs: Any = value.items()
        elif isinstance(value, list | tuple) and len(value) == len(names):
            pairs = zip(names, value, strict=True)
        else:
            return None
        for name, item in pairs:
            field_check = checks[name]
            reason = None if item is None or field_check is None else field_check(item)
            if reason is not None:
                return f"field {name!r}: {reason}"
        return None
    return check


def misfits(values: list[Any], kind: pa.DataType) -> dict[int, str]:
    """The rows of ``values`` that do not fit ``kind`` exactly, with the reason. For a
    flat type the reason depends on the value's Python type alone: one value of each
    type is looked at, the rows only when one of them does not fit."""
    import pyarrow as pa

    check = checker(kind)
    if check is None:
        return {}
    if not pa.types.is_nested(kind):
        kinds = set(map(type, values)) - {type(None)}  # no Python call per value
        if all(check(next(v for v in values if type(v) is k)) is None for k in kinds):
            return {}
    bad: dict[int, str] = {}
    for i, value in enumerate(values):
        reason = None if value is None else check(value)
        if reason is not None:
            bad[i] = reason
    return bad
