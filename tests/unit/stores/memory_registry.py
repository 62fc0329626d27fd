"""An in-memory table-name registry for unit tests."""

from __future__ import annotations

from collections.abc import Mapping

from gridstream.stores.naming import TableNameTakenError


class MemoryRegistry:
    """A registry in memory, comparing table names as its store would."""

    def __init__(self, *, case_sensitive: bool = True) -> None:
        self.rows: dict[str, str] = {}
        self.case_sensitive = case_sensitive
        self.loads = 0

    def _key(self, table: str) -> str:
        return table if self.case_sensitive else table.casefold()

    def load(self) -> Mapping[str, str]:
        self.loads += 1
        return dict(self.rows)

    def record(self, type_name: str, table: str) -> str:
        if type_name in self.rows:
            return self.rows[type_name]
        for owner, held in self.rows.items():
            if self._key(held) == self._key(table):
                raise TableNameTakenError(f"{table} is held by {owner}", table=table, owner=owner)
        self.rows[type_name] = table
        return table
