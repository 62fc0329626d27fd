"""How the Space adapter applies a batch of writes: one transaction, idempotent.

A write with a ``version`` is skipped when the adapter already applied, for the same
source, cache and key, a write whose version is not older. Each (source, cache, key)'s
last applied version is kept in the Space itself, as an entry of the bookkeeping type
``APPLIED_TYPE``, written in the same transaction as the entry: it survives every
restart, and a crash keeps both or neither, so they never disagree. A remove keeps its
mark (a tombstone): a late put with an older version cannot bring the entry back.

A write without a version is applied unless it changes nothing: a put of the value the
entry already holds, or a remove of an absent key, is skipped, so a re-run logs nothing.

Without overwrite, only each key's first put is considered (``first_puts``) and it is
applied only when the key is absent (and, with a version, when the version is newer than
the one held), so a re-run finds every key present and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gridstream.errors import CodecError, GridError, SpaceError
from gridstream.grid.contract import Key, Value, Write, first_puts
from gridstream.model import DocumentType, SpaceDocument
from gridstream.operations import TypeDescriptor
from gridstream.protocol.values import restore, wire_default
from gridstream.space import Space, Transaction

__all__ = ["APPLIED_TYPE", "apply_writes", "mark_id", "wire"]

APPLIED_TYPE = "gridstream.grid.applied"
"""The bookkeeping type holding the last applied version per (source, cache, key)."""

_APPLIED = DocumentType(APPLIED_TYPE, id="id",
                        fixed={"id": "str", "source": "str", "cache": "str", "version": "int"})


def wire(data: Any) -> Any:
    """``data`` in wire form (what the adapter returns as a value)."""
    return orjson.loads(orjson.dumps(data, default=wire_default, option=orjson.OPT_NON_STR_KEYS))


def mark_id(source: str, cache: str, key: Key) -> str:
    """The bookkeeping entry's id: unambiguous for ``1`` and ``"1"``."""
    return orjson.dumps([source, cache, key]).decode()


def apply_writes(space: Space, cache: str, writes: Sequence[Write], id_property: str,
                 source: str, *, overwrite: bool = True) -> int:
    """Apply ``writes`` to ``cache`` in one transaction; how many were not skipped.
    ``overwrite=False``: puts of absent keys only (see the module docstring)."""
    for w in writes:
        if type(w.key) not in (str, int):
            raise GridError(f"{cache}: a key must be a str or an int, not "
                            f"{type(w.key).__name__}")
        if w.version is not None and (type(w.version) is not int or w.version < 0):
            raise GridError(f"{cache} key {w.key!r}: a version must be a non-negative int")
    if not overwrite:
        writes = first_puts(writes)
    try:
        descriptor = _ensure_type(space, cache, id_property)
        if any(w.version is not None for w in writes):
            space.introduce_type(_APPLIED)
        applied = 0
        with space.transaction() as tx:
            for w in writes:
                applied += _apply_one(tx, cache, descriptor, w, source, overwrite)
    except SpaceError as exc:
        raise GridError(f"{cache}: the Space refused the batch (nothing applied): "
                        f"{exc}") from exc
    return applied


def _ensure_type(space: Space, cache: str, id_property: str) -> TypeDescriptor:
    found = space.types().get(cache)
    if found is not None:
        return found
    return space.introduce_type(DocumentType(cache, id=id_property))


def _apply_one(tx: Transaction, cache: str, descriptor: TypeDescriptor, w: Write,
               source: str, overwrite: bool) -> int:
    mark = mark_id(source, cache, w.key) if w.version is not None else None
    if mark is not None and w.version is not None:
        held = tx.read_versioned(SpaceDocument(APPLIED_TYPE), mark)
        if held is not None and held.entry.get("version", -1) >= w.version:
            return 0
    template = SpaceDocument(cache)
    current = tx.read_versioned(template, w.key)
    if not overwrite and current is not None:
        return 0
    done = 0
    if w.value is None:
        if current is not None:
            tx.remove(template, w.key)
            done = 1
    else:
        data = _entry_data(cache, descriptor, w.key, w.value)
        if current is None or wire(current.entry.properties) != wire(data):
            tx.write(SpaceDocument(cache, data))
            done = 1
    if mark is not None:
        tx.write(SpaceDocument(APPLIED_TYPE, {"id": mark, "source": source, "cache": cache,
                                              "key": w.key, "version": w.version}))
        done = 1
    return done


def _entry_data(cache: str, descriptor: TypeDescriptor, key: Key,
                value: Value) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise GridError(f"{cache} key {key!r}: a value must be a JSON object")
    id_prop = descriptor.id_property
    if id_prop in value and (type(value[id_prop]) is not type(key) or value[id_prop] != key):
        raise GridError(f"{cache} key {key!r}: the value's {id_prop!r} names another id")
    try:
        return restore({**value, id_prop: key}, descriptor.fixed)
    except CodecError as exc:
        raise GridError(f"{cache} key {key!r}: a declared property does not hold a value "
                        "of its kind") from exc
