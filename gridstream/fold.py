"""Folding operations into an entity's current state, for row-versioned sinks (SQL, lake).

Pure Python (no Spark): the space and the stores can use it as well.

Cassandra versions each cell; a SQL row or a lake row has one version, so partial
operations must be applied in version order onto the state the sink already holds.
The fold follows the space's semantics:

- WRITE / UPDATE: ``data`` is the whole entry.
- PARTIAL_UPDATE, CHANGE: applied with ``gridstream.paths.apply_logged``, the rule the
  space itself applies (non-null top-level properties; changed paths set, removed
  paths unset: a declared property, nested ones included, becomes null, others
  disappear).
- REMOVE / TAKE: the entry is gone; a tombstone keeps the delete's version so that a
  late replay of an older write cannot bring it back.

An operation whose version is not above the state's is stale (already applied, or
older than what the sink holds) and is ignored: that is what makes a replayed batch
harmless.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gridstream.errors import CodecError, InvalidEntryError
from gridstream.operations import OpType
from gridstream.paths import apply_logged
from gridstream.protocol import Envelope
from gridstream.protocol.values import wire_default

__all__ = ["OP_NAMES", "EntityState", "FoldResult", "OpRow", "data_text", "fold", "is_whole",
           "op_row", "parse_data", "whole_state"]


@dataclass(frozen=True, slots=True)
class OpRow:
    """One operation as a row-versioned sink sees it (``data`` still JSON text)."""

    op: str
    version: int
    ts: int
    data: str | None
    removed: tuple[str, ...] = ()


@dataclass(slots=True)
class EntityState:
    """An entity as stored: ``data`` is JSON text (``None`` for a tombstone)."""

    version: int
    deleted: bool
    op: str
    ts: int
    data: str | None


@dataclass(frozen=True, slots=True)
class FoldResult:
    """The new state (``None`` if nothing applied) and how many operations were stale."""

    state: EntityState | None
    applied: int
    stale: int


def parse_data(text: str | None, where: str) -> dict[str, Any] | None:
    """``data``'s JSON text as a dict; ``CodecError`` names the record otherwise."""
    if text is None:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"{where}: data is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CodecError(f"{where}: data is not a JSON object")
    return value


_FULL = frozenset({"WRITE", "UPDATE"})
_DELETE = frozenset({"REMOVE", "TAKE"})
_WHOLE = _FULL | _DELETE
OP_NAMES = {op: op.value for op in OpType}
"""An ``OpType``'s name without the enum's ``value`` property (~1 µs a call on 3.11)."""


def is_whole(op: str) -> bool:
    """Whether an operation named ``op`` sets the whole state (a write or a removal):
    its new state does not depend on the one before (``whole_state``)."""
    return op in _WHOLE


def whole_state(op: str, version: int, ts: int, data: str | None) -> EntityState:
    """The state after a write (``data``: the whole entry's JSON text) or a removal (a
    tombstone keeping the version) named ``op`` (``is_whole``)."""
    if op in _DELETE:
        return EntityState(version, True, op, ts, None)
    return EntityState(version, False, op, ts, data)


def fold(base: EntityState | None, ops: Iterable[OpRow],
         fixed_names: frozenset[str] = frozenset()) -> FoldResult:
    """Apply ``ops`` (any order) to ``base``; see the module docstring. ``fixed_names``
    holds the type's declared property paths (``TypeDescriptor.declared_paths``)."""
    current = base
    parsed: dict[str, Any] | None = None
    applied = stale = 0
    for row in sorted(ops, key=lambda r: r.version):
        if current is not None and row.version <= current.version:
            stale += 1
            continue
        applied += 1
        if row.op in _WHOLE:
            current, parsed = whole_state(row.op, row.version, row.ts, row.data), None
        else:
            if parsed is None:
                parsed = _start(current)
            _apply_partial(parsed, row, fixed_names)
            current = EntityState(row.version, False, row.op, row.ts, None)
    if current is not None and parsed is not None:
        current.data = orjson.dumps(parsed, option=orjson.OPT_NON_STR_KEYS).decode()
    return FoldResult(current if applied else None, applied, stale)


def _start(state: EntityState | None) -> dict[str, Any]:
    if state is None or state.deleted or state.data is None:
        return {}
    return parse_data(state.data, f"stored state version {state.version}") or {}


def _apply_partial(data: dict[str, Any], row: OpRow, fixed_names: frozenset[str]) -> None:
    values = parse_data(row.data, f"{row.op} version {row.version}") or {}
    try:
        apply_logged(data, row.op, values, row.removed, fixed_names)
    except InvalidEntryError as exc:
        raise InvalidEntryError(f"{row.op} version {row.version}: {exc}") from exc


def data_text(data: Mapping[str, Any], where: str) -> str:
    """An operation's ``data`` in its wire JSON form (the text the fold keeps): orjson's
    compact JSON of an object whose keys are unique, so that decoding and encoding it
    again gives it back (a source passes it to Kafka as it is); ``CodecError`` naming
    ``where`` for a value with no wire form."""
    value = data if type(data) is dict else dict(data)
    try:
        return orjson.dumps(value, default=wire_default).decode()
    except TypeError:
        pass  # an integer key of a nested map, most likely: written as text below
    try:
        text = orjson.dumps(value, default=wire_default, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:
        raise CodecError(f"{where}: data has no wire form: {exc}") from exc
    return orjson.dumps(orjson.loads(text)).decode()  # keys 1 and "1": one, as JSON has


def op_row(envelope: Envelope) -> OpRow:
    """An envelope as the fold sees it: ``data`` back in its wire JSON form."""
    op = OP_NAMES[envelope.op]
    text: str | None = None
    if envelope.data is not None and op not in _DELETE:
        text = data_text(envelope.data, f"{envelope.type} id={envelope.id!r} "
                                        f"version={envelope.version}")
    return OpRow(op, envelope.version, envelope.ts, text, tuple(envelope.removed))
