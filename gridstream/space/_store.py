"""The space's in-memory state: per type, id → slot, plus equality indexes.

A slot keeps the entry's data encoded (immutable bytes): reads decode a private copy,
snapshots write it as is, and nothing a caller holds can change the state behind the
space's back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from gridstream.operations import EntityId
from gridstream.space._change import MISSING, get_path
from gridstream.space._codec import decode_data

__all__ = ["Slot", "Store"]


class Slot(NamedTuple):
    """One stored entry: its version (the seq of its last operation) and encoded data."""

    version: int
    data: bytes
    partition: int
    routing: Any


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class _Index:
    """Equality index on one property path (unhashable values are scanned)."""

    __slots__ = ("by_value", "path", "unhashable")

    def __init__(self, path: str) -> None:
        self.path = path
        self.by_value: dict[Any, set[EntityId]] = {}
        self.unhashable: set[EntityId] = set()

    def add(self, ident: EntityId, data: Mapping[str, Any]) -> None:
        value = get_path(data, self.path)
        if value is MISSING:
            return
        if _hashable(value):
            self.by_value.setdefault(value, set()).add(ident)
        else:
            self.unhashable.add(ident)

    def discard(self, ident: EntityId, data: Mapping[str, Any]) -> None:
        value = get_path(data, self.path)
        if value is MISSING:
            return
        if _hashable(value):
            ids = self.by_value.get(value)
            if ids is not None:
                ids.discard(ident)
                if not ids:
                    del self.by_value[value]
        else:
            self.unhashable.discard(ident)

    def lookup(self, value: Any) -> set[EntityId]:
        found = self.by_value.get(value, set()) if _hashable(value) else set()
        return found | self.unhashable


class Store:
    """Entries by type and id. Not thread-safe: the space's lock guards it."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[EntityId, Slot]] = {}
        self._indexes: dict[str, list[_Index]] = {}

    def table(self, type_name: str) -> dict[EntityId, Slot]:
        table = self.tables.get(type_name)
        if table is None:
            table = self.tables[type_name] = {}
        return table

    def get(self, type_name: str, ident: EntityId) -> Slot | None:
        table = self.tables.get(type_name)
        return table.get(ident) if table is not None else None

    def set_indexes(self, type_name: str, paths: Iterable[str]) -> None:
        """(Re)build the indexes of a type over its current entries."""
        indexes = [_Index(p) for p in dict.fromkeys(paths)]
        if not indexes:
            self._indexes.pop(type_name, None)
            return
        for ident, slot in self.table(type_name).items():
            data = decode_data(slot.data)
            for index in indexes:
                index.add(ident, data)
        self._indexes[type_name] = indexes

    def put(
        self, type_name: str, ident: EntityId, slot: Slot | None, old: Slot | None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        """Store (or, with ``slot=None``, delete) an entry; ``data`` is ``slot``'s
        decoded data when the caller has it (saves decoding for indexes)."""
        table = self.table(type_name)
        if slot is None:
            table.pop(ident, None)
        else:
            table[ident] = slot
        indexes = self._indexes.get(type_name)
        if indexes:
            self._reindex(indexes, ident, slot, old, data)

    @staticmethod
    def _reindex(
        indexes: list[_Index], ident: EntityId, slot: Slot | None, old: Slot | None,
        data: Mapping[str, Any] | None,
    ) -> None:
        if old is not None:
            old_data = decode_data(old.data)
            for index in indexes:
                index.discard(ident, old_data)
        if slot is not None:
            new_data = data if data is not None else decode_data(slot.data)
            for index in indexes:
                index.add(ident, new_data)

    def indexed_ids(self, type_name: str, criteria: Mapping[str, Any]) -> set[EntityId] | None:
        """Candidate ids from the indexes covering ``criteria``; ``None`` if none does."""
        found: set[EntityId] | None = None
        for index in self._indexes.get(type_name, ()):
            if index.path in criteria:
                ids = index.lookup(criteria[index.path])
                found = ids if found is None else found & ids
        return found

    def indexed_paths(self, type_name: str) -> tuple[str, ...]:
        return tuple(i.path for i in self._indexes.get(type_name, ()))

    def clear(self) -> None:
        self.tables.clear()
        for type_name, indexes in list(self._indexes.items()):
            self.set_indexes(type_name, [i.path for i in indexes])
