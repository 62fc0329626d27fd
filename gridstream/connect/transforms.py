"""Transforms (SMT-like), chained from config: ``build_chain(configs)(record)``.

Each step takes a ``Record`` and returns a new one; a step that cannot apply to a
record raises ``CodecError`` naming the step (the caller names the record and applies
the error policy). Bad config (an unknown type, a missing, unknown or malformed option)
is a ``ConfigError`` naming the step's index, its type and the option, raised by
``build_chain`` before any record flows.

Types and their options (``fields`` lists may be given as ``"a, b"``; mappings as
``"old:new, a:b"``, Kafka Connect's form, in ``.properties`` files):

- ``rename`` — ``fields`` = {old = new}. A missing field is left alone; renaming onto a
  field the value keeps (one not renamed itself) is an error: nothing is overwritten
  silently. Swapping two names works.
- ``drop`` — ``fields`` = [names]. Missing fields are left alone.
- ``mask`` — ``fields`` = [names], ``replacement`` (optional). Like Kafka Connect's
  MaskField: a string becomes ``replacement`` (default ``""``), a number ``0`` (or
  ``replacement`` read as a number of the same kind), a boolean ``false``; null stays
  null. An object or array cannot be masked (error), nor a boolean with a replacement.
- ``insert`` — ``field``, ``value``: sets a static value (overwrites the field); the value
  must be plain JSON (no NaN or infinities, integers within 64 bits, no TOML dates).
- ``timestamp`` — ``field``: sets ``record.timestamp_ms`` when the record has one (the
  source sets it to its micro-batch's planned time, so a re-run batch is identical),
  else the current time; milliseconds since the epoch.
- ``route`` — ``regex``, ``replacement``: Kafka Connect's RegexRouter on the topic. The
  regex must match the whole topic, else the topic is unchanged; the replacement takes
  ``$1`` / ``${name}`` group references and ``\\`` escapes (Java's syntax).
- ``route_by_cache`` — ``topics`` = {cache = topic}: records of a listed cache go to its
  topic, the others keep theirs.
- ``value_to_key`` — ``fields`` = [names]: the key becomes the value of one field, or
  for several fields the JSON array text of their values (``["eu",12]``, compact, in
  the order given): the same rule as the sink's ``keyPolicy = "value"``
  (``key_from_fields``). Each field must be present and hold a string or an integer.
- ``flatten`` — ``delimiter`` (default ``"."``): nested objects become fields named by
  their path (``address.city``); arrays and empty objects stay as they are. Two paths
  giving the same name are an error.

Field names are top-level names (a name may contain the delimiter after a ``flatten``).
Removals (``value`` None) pass through every step that reads or writes the value
(everything but ``route`` and ``route_by_cache``) unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from gridstream.connect.config import TransformConfig
from gridstream.connect.record import Record
from gridstream.errors import CodecError, ConfigError
from gridstream.grid.contract import Key, Value

__all__ = ["IDENTITY", "TRANSFORM_TYPES", "Chain", "StepConfigError", "build_chain",
           "key_from_fields"]

Chain = Callable[[Record], Record]


def IDENTITY(record: Record) -> Record:  # noqa: N802 - a constant that is a function
    """The chain of no transforms (``build_chain([])``): the record as it is."""
    return record

Step = Callable[[Record], Record]


def key_from_fields(value: Value, fields: Sequence[str]) -> Key:
    """The key a value gives by ``fields``: one field's own value, or the compact JSON
    array text of several (``["eu",12]``). ``CodecError`` when a field is missing or
    holds anything but a string or an integer."""
    parts: list[Key] = []
    for name in fields:
        if name not in value:
            raise CodecError(f"key field {name!r} is missing")
        part = value[name]
        if isinstance(part, bool) or not isinstance(part, str | int):
            raise CodecError(f"key field {name!r} holds {type(part).__name__}, "
                             "not a string or an integer")
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    try:
        return orjson.dumps(parts).decode()
    except TypeError as exc:  # orjson: an integer beyond 64 bits
        raise CodecError(f"key fields {list(fields)} cannot be written as JSON: {exc}") from exc


class StepConfigError(ConfigError):
    """A step's option is missing, unknown or malformed: ``index`` of the step,
    ``option`` (None: the type itself is unknown) and ``problem``."""

    def __init__(self, message: str, *, index: int, option: str | None, problem: str) -> None:
        super().__init__(message)
        self.index = index
        self.option = option
        self.problem = problem


class _Options:
    """A step's options, read once each; what is left unread is an unknown option."""

    def __init__(self, index: int, config: TransformConfig) -> None:
        self.index = index
        self.type = config.type
        self.left = dict(config.model_extra or {})

    def error(self, option: str, problem: str) -> StepConfigError:
        return StepConfigError(f"transforms[{self.index}] (type {self.type!r}): option "
                               f"{option!r}: {problem}", index=self.index, option=option,
                               problem=problem)

    def take(self, name: str, default: Any = ...) -> Any:
        if name in self.left:
            return self.left.pop(name)
        if default is ...:
            raise self.error(name, "is required")
        return default

    def text(self, name: str, default: Any = ..., *, empty: bool = False) -> str:
        value = self.take(name, default)
        if not isinstance(value, str) or (not value and not empty):
            raise self.error(name, "must be a non-empty string")
        return value

    def names(self, name: str) -> tuple[str, ...]:
        value = self.take(name)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if (not isinstance(value, list | tuple) or not value
                or not all(isinstance(v, str) and v for v in value)):
            raise self.error(name, "must be a non-empty list of field names")
        if len(set(value)) != len(value):
            raise self.error(name, "names a field twice")
        return tuple(value)

    def mapping(self, name: str) -> dict[str, str]:
        value = self.take(name)
        if isinstance(value, str):
            pairs = [p.strip() for p in value.split(",") if p.strip()]
            if not all(p.count(":") == 1 for p in pairs):
                raise self.error(name, "must be 'from:to' pairs separated by commas")
            value = dict((a.strip(), b.strip()) for a, b in (p.split(":") for p in pairs))
        if (not isinstance(value, Mapping) or not value
                or not all(isinstance(k, str) and k and isinstance(v, str) and v
                           for k, v in value.items())):
            raise self.error(name, "must be a non-empty table of names to names")
        return dict(value)

    def done(self) -> None:
        if self.left:
            raise self.error(sorted(self.left)[0], "is not an option of this transform")


def _values(step: Callable[[Value], Value]) -> Step:
    """A step that changes the value only (removals pass unchanged)."""
    def apply(record: Record) -> Record:
        if record.value is None:
            return record
        return dataclasses.replace(record, value=step(record.value))
    return apply


def _rename(o: _Options) -> Step:
    renames = o.mapping("fields")
    if len(set(renames.values())) != len(renames):
        raise o.error("fields", "renames two fields to the same name")

    def step(value: Value) -> Value:
        out: Value = {}
        for name, field in value.items():
            new = renames.get(name, name)
            if new in out:
                raise CodecError(f"rename: two fields of the value become {new!r}")
            out[new] = field
        return out
    return _values(step)


def _drop(o: _Options) -> Step:
    names = frozenset(o.names("fields"))
    return _values(lambda value: {k: v for k, v in value.items() if k not in names})


def _masked(name: str, field: Any, replacement: str | int | float | None) -> Any:
    if field is None:
        return None
    if isinstance(field, bool):
        if replacement is not None:
            raise CodecError(f"mask: field {name!r} is a boolean; a replacement cannot "
                             "mask it")
        return False
    if isinstance(field, str):
        return "" if replacement is None else str(replacement)
    if isinstance(field, int | float):
        kind = type(field)
        if replacement is None:
            return kind(0)
        try:
            masked = kind(replacement)
        except (TypeError, ValueError) as exc:
            raise CodecError(f"mask: field {name!r} is a number; the replacement is not a "
                             f"{kind.__name__}") from exc
        # int(2.5) would be 2 and float("nan") NaN: the replacement must be that number
        if (kind is int and isinstance(replacement, float) and masked != replacement) or (
                kind is float and not math.isfinite(masked)):
            raise CodecError(f"mask: field {name!r} is a number; the replacement is not a "
                             f"finite {kind.__name__}")
        return masked
    raise CodecError(f"mask: field {name!r} holds {type(field).__name__}; only strings, "
                     "numbers and booleans can be masked")


def _mask(o: _Options) -> Step:
    names = o.names("fields")
    replacement = o.take("replacement", None)
    if isinstance(replacement, bool) or not isinstance(replacement, str | int | float | None):
        raise o.error("replacement", "must be a string or a number")

    def step(value: Value) -> Value:
        out = dict(value)
        for name in names:
            if name in out:
                out[name] = _masked(name, out[name], replacement)
        return out
    return _values(step)


def _json_problem(value: Any) -> str | None:
    """Why ``value`` is not a plain JSON value every converter writes unchanged (None if
    it is one). orjson alone would pass NaN (written as null) and TOML's dates (written
    as text)."""
    if value is None or isinstance(value, bool | str):
        return None
    if isinstance(value, int):
        return None if -(2**63) <= value < 2**63 else f"{value} is beyond 64 bits"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} has no JSON form"
    if isinstance(value, list):
        return next((p for p in map(_json_problem, value) if p), None)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return "a table's keys must be text"
        return next((p for p in map(_json_problem, value.values()) if p), None)
    return f"a {type(value).__name__} is not a JSON value (write a date or time as text)"


def _insert(o: _Options) -> Step:
    field = o.text("field")
    static = o.take("value")
    problem = _json_problem(static)
    if problem is not None:
        raise o.error("value", f"must be a JSON value: {problem}")
    return _values(lambda value: {**value, field: static})


def _timestamp(o: _Options) -> Step:
    field = o.text("field")

    def apply(record: Record) -> Record:
        if record.value is None:
            return record
        stamp = record.timestamp_ms
        if stamp is None:
            stamp = time.time_ns() // 1_000_000
        return dataclasses.replace(record, value={**record.value, field: stamp})
    return apply


def _java_template(o: _Options, pattern: re.Pattern[str],
                   replacement: str) -> Callable[[re.Match[str]], str]:
    """Java's ``Matcher.replaceAll`` syntax: ``$1`` (further digits join the number while
    it stays a group of the regex), ``${name}``, ``\\x`` → ``x``."""
    parts: list[str | int] = []
    text: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            if i + 1 == len(replacement):
                raise o.error("replacement", "ends with a lone '\\'")
            text.append(replacement[i + 1])
            i += 2
            continue
        if char != "$":
            text.append(char)
            i += 1
            continue
        parts.append("".join(text))
        text = []
        group, i = _group_ref(o, pattern, replacement, i + 1)
        parts.append(group)
    parts.append("".join(text))

    def expand(match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)
    return expand


def _group_ref(o: _Options, pattern: re.Pattern[str], text: str, i: int) -> tuple[int, int]:
    """The group a ``$`` reference at ``text[i:]`` names, and where the text goes on."""
    if text.startswith("{", i):
        end = text.find("}", i)
        name = text[i + 1:end] if end > 0 else ""
        if name not in pattern.groupindex:
            raise o.error("replacement", f"names group {name!r}, which the regex lacks")
        return pattern.groupindex[name], end + 1
    if i >= len(text) or not text[i].isdigit():
        raise o.error("replacement", "has a '$' without a group (write '\\$')")
    number, i = int(text[i]), i + 1
    if number > pattern.groups:
        raise o.error("replacement", f"refers to group {number}; the regex has "
                                     f"{pattern.groups}")
    while i < len(text) and text[i].isdigit() and number * 10 + int(text[i]) <= pattern.groups:
        number, i = number * 10 + int(text[i]), i + 1
    return number, i


def _route(o: _Options) -> Step:
    raw = o.text("regex")
    try:
        pattern = re.compile(raw)
    except re.error as exc:
        raise o.error("regex", f"is not a regular expression: {exc}") from exc
    expand = _java_template(o, pattern, o.text("replacement", empty=True))

    def apply(record: Record) -> Record:
        match = pattern.fullmatch(record.topic)
        if match is None:
            return record
        topic = expand(match)
        if not topic:
            raise CodecError(f"route: topic {record.topic!r} routes to an empty name")
        return dataclasses.replace(record, topic=topic)
    return apply


def _route_by_cache(o: _Options) -> Step:
    topics = o.mapping("topics")

    def apply(record: Record) -> Record:
        topic = topics.get(record.cache)
        return record if topic is None else dataclasses.replace(record, topic=topic)
    return apply


def _value_to_key(o: _Options) -> Step:
    fields = o.names("fields")

    def apply(record: Record) -> Record:
        if record.value is None:
            return record
        try:
            key = key_from_fields(record.value, fields)
        except CodecError as exc:
            raise CodecError(f"value_to_key: {exc}") from exc
        return dataclasses.replace(record, key=key)
    return apply


def _flatten(o: _Options) -> Step:
    delimiter = o.text("delimiter", ".")

    def walk(prefix: str, value: Mapping[str, Any], out: Value) -> None:
        for name, field in value.items():
            path = f"{prefix}{delimiter}{name}" if prefix else name
            if isinstance(field, dict) and field:
                walk(path, field, out)
                continue
            if path in out:
                raise CodecError(f"flatten: two fields flatten to {path!r}")
            out[path] = field

    def step(value: Value) -> Value:
        out: Value = {}
        walk("", value, out)
        return out
    return _values(step)


TRANSFORM_TYPES: dict[str, Callable[[_Options], Step]] = {
    "rename": _rename,
    "drop": _drop,
    "mask": _mask,
    "insert": _insert,
    "timestamp": _timestamp,
    "route": _route,
    "route_by_cache": _route_by_cache,
    "value_to_key": _value_to_key,
    "flatten": _flatten,
}
"""Every transform type, by the name ``type`` gives."""


def _labelled(index: int, kind: str, step: Step) -> Step:
    def apply(record: Record) -> Record:
        try:
            return step(record)
        except CodecError as exc:
            raise CodecError(f"transforms[{index}] ({kind}): {exc}") from exc
    return apply


def build_chain(configs: Sequence[TransformConfig]) -> Chain:
    """One function applying every step in order; ``ConfigError`` for an unknown type or
    a bad option (naming the step's index and the option)."""
    steps: list[Step] = []
    for index, config in enumerate(configs):
        factory = TRANSFORM_TYPES.get(config.type)
        if factory is None:
            problem = f"unknown type {config.type!r} (one of {', '.join(TRANSFORM_TYPES)})"
            raise StepConfigError(f"transforms[{index}]: {problem}", index=index, option=None,
                                  problem=problem)
        options = _Options(index, config)
        step = factory(options)
        options.done()
        steps.append(_labelled(index, config.type, step))
    if not steps:
        return IDENTITY

    def chain(record: Record) -> Record:
        for step in steps:
            record = step(record)
        return record
    return chain
