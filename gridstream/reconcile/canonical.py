"""One canonical form of an entity's properties, the same for every place that holds it.

Every place (the grid, a fold of the Kafka topics, SQL, Cassandra, Delta) gives back an
entity's properties in its own Python types; ``canonical_entity`` turns them into a tree
of tagged tuples that compare exactly and hash the same in every process:

- declared (fixed) properties are compared as the protocol restores them: ``datetime``
  as one ISO form in UTC with microseconds (a naive datetime is taken as UTC, as the
  stores do), ``date`` as ISO, ``decimal`` exactly (its numeric value, never a float,
  at every digit: ``1.50`` equals ``1.5``, ``1.5`` never equals the float ``1.5``),
  ``uuid``, ``bytes``, ``set`` as a set (sorted canonically), ``float`` as a float (an
  int in a float property is its float), nested ``object`` properties recursively by
  their own specs;
- every other value (dynamic properties, and declared ``str int bool list dict any``)
  is compared in the form the JSON protocol carries it (``wire_default``): a dynamic
  ``Decimal`` equals its text, a dynamic ``datetime`` its ``isoformat()``, a dynamic
  set the sorted list the wire sends, a tuple a list, an enum its value, a dataclass
  its fields, map keys their text. ``bool``, ``int`` and ``float`` stay distinct
  (``1``, ``1.0`` and ``True`` differ), floats compare by ``repr`` (so ``NaN`` equals
  ``NaN``).

None and absent: a property that is null differs from one that is absent, except where
a place cannot tell them apart (``PlaceRules.null_is_absent``, Cassandra: a null column
is a missing column). There, on both sides, null properties (top-level, and inside a
flattened declared object) are left out and a declared object left without properties
is absent; nulls inside maps and lists are values and always kept. Where a place keeps
datetimes in milliseconds (``PlaceRules.datetime_millis``, Cassandra's ``timestamp``
columns), declared datetimes are compared at millisecond precision on both sides.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from gridstream.errors import ReconcileError
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.protocol.values import wire_default

__all__ = [
    "CASSANDRA",
    "STRICT",
    "Canon",
    "PlaceRules",
    "canonical_entity",
    "canonical_value",
    "encode",
    "show",
]

Canon = tuple[Any, ...]
"""A canonical value: ``(kind, payload)``; kinds: null bool int float str bytes decimal
datetime date time uuid list set map (a map's payload is ``((key, value), ...)``
sorted by key; a list's and a set's payload are tuples of canonical values)."""

NULL: Canon = ("null",)


@dataclass(frozen=True, slots=True)
class PlaceRules:
    """What a place cannot tell apart (see the module docstring)."""

    null_is_absent: bool = False
    datetime_millis: bool = False


STRICT = PlaceRules()
"""Places that keep every value as the grid does: Kafka, SQL, Delta."""

CASSANDRA = PlaceRules(null_is_absent=True, datetime_millis=True)
"""A Cassandra table read back through the mapping."""


def canonical_entity(data: Mapping[str, Any], descriptor: TypeDescriptor | None = None,
                     rules: PlaceRules = STRICT) -> Canon:
    """An entity's properties (``data`` includes the id property) in canonical form."""
    specs = descriptor.fixed if descriptor is not None else ()
    return _props(data, specs, rules, "")


def canonical_value(value: Any, spec: PropertySpec | None = None,
                    rules: PlaceRules = STRICT) -> Canon:
    """One value: as the declared property ``spec``, or as a dynamic value."""
    if spec is None:
        return _dynamic(value, "")
    return _declared(value, spec, rules, spec.name)


def _props(data: Any, specs: tuple[PropertySpec, ...], rules: PlaceRules,
           prefix: str) -> Canon:
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}
    declared = {s.name: s for s in specs}
    items: dict[str, Canon] = {}
    for key, value in data.items():
        name = _key(key, prefix)
        path = prefix + name
        spec = declared.get(name)
        canon = _declared(value, spec, rules, path) if spec else _dynamic(value, path)
        if canon == NULL and rules.null_is_absent:
            continue
        if name in items:
            raise ReconcileError(f"property {path!r}: two keys with the same text")
        items[name] = canon
    return ("map", tuple(sorted(items.items())))


def _declared(value: Any, spec: PropertySpec, rules: PlaceRules, path: str) -> Canon:
    if value is None:
        return NULL
    kind = spec.kind
    if kind == "object" and spec.nested and (
            isinstance(value, Mapping)
            or (dataclasses.is_dataclass(value) and not isinstance(value, type))):
        nested = _props(value, spec.nested, rules, path + ".")
        return NULL if rules.null_is_absent and not nested[1] else nested
    typed = _typed(value, kind, rules)
    return typed if typed is not None else _dynamic(value, path)


def _typed(value: Any, kind: str, rules: PlaceRules) -> Canon | None:
    """A declared scalar in its kind's form, after the conversion ``restore`` applies to
    its wire form; ``None`` when the value is not of the kind (then compared as is)."""
    if isinstance(value, enum.Enum):
        value = value.value
    if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        return ("float", repr(float(value)))
    if kind == "decimal":
        return _decimal(value)
    if kind == "datetime":
        return _datetime(value, rules.datetime_millis)
    if kind == "date" and not isinstance(value, dt.datetime):
        if isinstance(value, str):
            value = _parse(dt.date.fromisoformat, value)
        return ("date", value.isoformat()) if isinstance(value, dt.date) else None
    if kind == "uuid":
        if isinstance(value, str):
            value = _parse(uuid.UUID, value)
        return ("uuid", str(value)) if isinstance(value, uuid.UUID) else None
    if kind == "bytes":
        if isinstance(value, str):
            value = _parse(lambda v: base64.b64decode(v, validate=True), value)
        if isinstance(value, bytes | bytearray | memoryview):
            return ("bytes", base64.b64encode(bytes(value)).decode("ascii"))
        return None
    if kind == "set" and isinstance(value, set | frozenset | list | tuple):
        items = {_dynamic(v, "") for v in value}
        return ("set", tuple(sorted(items, key=encode)))
    return None


def _parse(parse: Any, text: str) -> Any:
    try:
        return parse(text)
    except (ValueError, TypeError, InvalidOperation):
        return text  # not of the kind: compared as the text it is


def _decimal(value: Any) -> Canon | None:
    if isinstance(value, int) and not isinstance(value, bool):
        value = Decimal(value)
    elif isinstance(value, str):
        value = _parse(Decimal, value)
    if not isinstance(value, Decimal):
        return None
    if value.is_nan():
        return ("decimal", "NaN")
    if value.is_zero():
        return ("decimal", "0")
    # trailing zeros dropped exactly: ``normalize()`` would also round to the context's
    # 28 digits and make values that differ further down equal
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):  # an infinity
        return ("decimal", str(value))
    while len(digits) > 1 and digits[-1] == 0:
        digits, exponent = digits[:-1], exponent + 1
    return ("decimal", str(Decimal((sign, digits, exponent))))


def _datetime(value: Any, millis: bool) -> Canon | None:
    if isinstance(value, str):
        value = _parse(dt.datetime.fromisoformat, value)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if not isinstance(value, dt.datetime):
        return None
    try:
        at = value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    except OverflowError:
        # an aware value near year 1 or 9999 whose UTC instant is outside datetime's
        # range: every spelling of that instant overflows, so it is named by its
        # microseconds since the epoch
        offset = value.utcoffset() or dt.timedelta(0)
        micros = (value.replace(tzinfo=None) - _EPOCH - offset) // dt.timedelta(microseconds=1)
        if millis:
            micros -= micros % 1000
        return ("datetime", f"{micros}us since 1970-01-01T00:00:00+00:00")
    if millis:
        at = at.replace(microsecond=at.microsecond // 1000 * 1000)
    return ("datetime", at.isoformat(timespec="microseconds"))


_EPOCH = dt.datetime(1970, 1, 1)


def _dynamic(value: Any, path: str) -> Canon:
    """A value in the form the JSON protocol carries it."""
    if value is None:
        return NULL
    if isinstance(value, enum.Enum):
        return _dynamic(value.value, path)
    if isinstance(value, bool):
        return ("bool", bool(value))
    if isinstance(value, str):
        return ("str", str(value))
    if isinstance(value, int):
        return ("int", int(value))
    if isinstance(value, float):
        return ("float", repr(float(value)))
    if isinstance(value, Mapping):
        return _props(value, (), STRICT, path + "." if path else "")
    if isinstance(value, list | tuple):
        return ("list", tuple(_dynamic(v, f"{path}[{i}]") for i, v in enumerate(value)))
    try:
        wire = wire_default(value)
    except TypeError as exc:
        raise ReconcileError(f"property {path!r}: a {type(value).__qualname__} has no "
                             "canonical form") from exc
    return _dynamic(wire, path)


def _key(key: Any, prefix: str) -> str:
    """A map key as the JSON wire writes it (``OPT_NON_STR_KEYS``)."""
    if isinstance(key, str):
        return str(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(int(key))
    raise ReconcileError(f"property {prefix}{key!r}: a {type(key).__qualname__} map key has "
                         "no canonical form")


def _plain(canon: Canon) -> Any:
    kind = canon[0]
    if kind == "null":
        return ["n"]
    if kind == "int":
        return ["i", str(canon[1])]
    if kind in ("list", "set"):
        return [kind, [_plain(c) for c in canon[1]]]
    if kind == "map":
        return ["m", [[k, _plain(v)] for k, v in canon[1]]]
    return [kind, canon[1]]


def encode(canon: Canon) -> bytes:
    """Canonical bytes of a canonical value (for hashing and sorting)."""
    return orjson.dumps(_plain(canon))


def show(canon: Canon | None, limit: int = 80) -> str:
    """A short human form (``absent`` for ``None``)."""
    text = "absent" if canon is None else _show(canon)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(canon: Canon) -> str:
    kind = canon[0]
    if kind == "null":
        return "null"
    if kind == "bool":
        return "true" if canon[1] else "false"
    if kind in ("int", "float"):
        return str(canon[1])
    if kind == "str":
        return orjson.dumps(canon[1]).decode()
    if kind == "list":
        return "[" + ", ".join(_show(c) for c in canon[1]) + "]"
    if kind == "set":
        return "{" + ", ".join(_show(c) for c in canon[1]) + "}"
    if kind == "map":
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in canon[1]) + "}"
    return f"{kind}({canon[1]})"
