"""Type names to table names, one table per type, for every store.

A store's converter (the seed's rule, e.g. ``shop.Order`` → ``shop_Order``) is not
injective: ``shop.Order``, ``shop_Order`` and ``shop$Order`` all convert to one name, and
a case-insensitive store also merges ``shop_order`` and ``Shop_ORDER``. Two types must
never share a table, so each store persists which type owns which table, and this module
decides the table of a type not recorded yet.

The interface, in full:

- ``allocate(type_name, convert, recorded, *, max_length, case_sensitive, reserved)``:
  pure. The table recorded for the type if any; else the converter's (seed) name when no
  recorded table nor reserved name equals it (compared case-folded unless
  ``case_sensitive``); else the first free candidate ``<seed cut>_<8 hex>``, the hex from
  the SHA-256 of the full type name and an attempt counter. ``max_length`` counts UTF-8
  bytes. The same type and the same records always give the same table.
- ``TableRegistry``: what a store implements over its own table (``load`` every
  type → table pair; ``record`` one pair atomically, raising ``TableNameTakenError``
  when another type already holds that table).
- ``TableNames``: the per-writer (or per-reader) cache over a registry. ``table_for``
  allocates and records (writers); ``lookup`` never records (readers: the recorded table,
  else the name a writer would take now, which then holds no rows of another type).

Why concurrent writers never share a table: records are never removed, each type's
candidates come in one fixed order, and a writer whose claim loses (``record`` raises)
loads the records again and allocates afresh. Two writers claiming for one type pick the
same candidate (an earlier candidate free for one of them would be free for both), and
``record`` then returns the table already recorded for that type.

Tables existing before the registry: the first type recorded for a seed name keeps it
(its old table); the types that collided with it get new tables.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

from gridstream.errors import StoreError

__all__ = [
    "HASH_CHARS",
    "TableNameTakenError",
    "TableNames",
    "TableRegistry",
    "allocate",
]

log = logging.getLogger(__name__)

HASH_CHARS = 8
"""Hex characters of the suffix that disambiguates a colliding name."""
_MAX_CANDIDATES = 1000
_CLAIM_ATTEMPTS = 10


class TableNameTakenError(StoreError):
    """``record`` refused: another type already holds the table."""

    def __init__(self, message: str, *, table: str, owner: str) -> None:
        super().__init__(message)
        self.table = table
        self.owner = owner


@runtime_checkable
class TableRegistry(Protocol):
    """A store's persisted type → table records."""

    def load(self) -> Mapping[str, str]:
        """Every recorded type name → table name."""
        ...

    def record(self, type_name: str, table: str) -> str:
        """Record ``table`` for ``type_name`` atomically and return the type's table:
        ``table``, or the table another writer recorded for the type first. Raises
        ``TableNameTakenError`` when another type holds ``table`` (compared as the store
        compares identifiers)."""
        ...


def _fold(name: str, case_sensitive: bool) -> str:
    return name if case_sensitive else name.casefold()


def _cut(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, never inside a character."""
    while len(text.encode("utf-8")) > max_bytes:
        text = text[:-1]
    return text


def _candidate(seed: str, type_name: str, attempt: int, max_length: int) -> str:
    digest = hashlib.sha256(f"{type_name}\x00{attempt}".encode()).hexdigest()
    return f"{_cut(seed, max_length - HASH_CHARS - 1)}_{digest[:HASH_CHARS]}"


def allocate(
    type_name: str,
    convert: Callable[[str], str],
    recorded: Mapping[str, str],
    *,
    max_length: int,
    case_sensitive: bool = True,
    reserved: Iterable[str] = (),
) -> str:
    """The table of ``type_name`` given the ``recorded`` type → table pairs (pure)."""
    existing = recorded.get(type_name)
    if existing is not None:
        return existing
    if max_length <= HASH_CHARS + 1:
        raise StoreError(f"a table name limit of {max_length} leaves no room for a suffix")
    seed = convert(type_name)
    if not seed or len(seed.encode("utf-8")) > max_length:
        raise StoreError(
            f"the converter gave {seed!r} for type {type_name!r}: "
            f"not a name of 1 to {max_length} bytes"
        )
    taken = {_fold(t, case_sensitive) for t in recorded.values()}
    taken.update(_fold(t, case_sensitive) for t in reserved)
    if _fold(seed, case_sensitive) not in taken:
        return seed
    for attempt in range(_MAX_CANDIDATES):
        name = _candidate(seed, type_name, attempt, max_length)
        if _fold(name, case_sensitive) not in taken:
            return name
    raise StoreError(f"no free table name for type {type_name!r}")  # pragma: no cover


class TableNames:
    """Type → table for one writer or reader: records loaded once, then cached.

    Not thread-safe: one instance per writer (or reader), like the writers themselves.
    """

    def __init__(
        self,
        registry: TableRegistry,
        convert: Callable[[str], str],
        *,
        max_length: int,
        case_sensitive: bool = True,
        reserved: Iterable[str] = (),
    ) -> None:
        self.registry = registry
        self.convert = convert
        self.max_length = max_length
        self.case_sensitive = case_sensitive
        self.reserved = frozenset(reserved)
        self._recorded: dict[str, str] | None = None

    def reload(self) -> dict[str, str]:
        """Read the records again (another writer may have added some)."""
        self._recorded = dict(self.registry.load())
        return self._recorded

    def recorded(self) -> dict[str, str]:
        """The records as last loaded (loaded on first use)."""
        return self._recorded if self._recorded is not None else self.reload()

    def _allocate(self, type_name: str, recorded: Mapping[str, str]) -> str:
        return allocate(
            type_name, self.convert, recorded, max_length=self.max_length,
            case_sensitive=self.case_sensitive, reserved=self.reserved,
        )

    def table_for(self, type_name: str) -> str:
        """The type's table, allocated and recorded if the type is new (writers)."""
        recorded = self.recorded()
        table = recorded.get(type_name)
        if table is not None:
            return table
        for _ in range(_CLAIM_ATTEMPTS):
            candidate = self._allocate(type_name, recorded)
            try:
                table = self.registry.record(type_name, candidate)
            except TableNameTakenError as exc:
                log.info("table %s went to type %s meanwhile; allocating again for %s",
                         exc.table, exc.owner, type_name)
                recorded = self.reload()
                recorded.setdefault(exc.owner, exc.table)  # even if the reload lags behind
                continue
            recorded[type_name] = table
            if table != self.convert(type_name):
                log.info("type %s maps to table %s (its usual name is taken)", type_name, table)
            return table
        raise StoreError(
            f"no table could be recorded for type {type_name!r} after {_CLAIM_ATTEMPTS} attempts"
        )

    def lookup(self, type_name: str) -> str:
        """The type's table without recording anything (readers): the recorded one, else
        the name a writer would take now (records reloaded first)."""
        table = self.recorded().get(type_name)
        if table is not None:
            return table
        return self._allocate(type_name, self.reload())
