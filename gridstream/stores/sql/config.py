"""The SQL store's options, each declared once (``gridstream._config``): what
``SqlStore`` takes, and (with ``kind``) a store sink's ``sink = { kind = "sql", ... }``."""

from __future__ import annotations

from pydantic import SecretStr, field_validator

from gridstream._config import StrictModel

__all__ = ["SCOPE", "SqlStoreConfig"]

SCOPE = "\x1f"
"""Starts and ends the table prefix in a ``gs_tables`` key (``gridstream.stores.sql.store``),
so a prefix cannot hold it."""


class SqlStoreConfig(StrictModel):
    """``SqlStore(SqlStoreConfig(url=..., table_prefix=...))``; ``url`` is
    ``sqlite:///path.db`` or ``postgresql://...``."""

    url: SecretStr
    """The database: ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or
    ``postgresql://user:pw@host/db``; kept secret (never printed)."""
    table_prefix: str = ""
    """Starts every type's table name (``shop.Order`` → prefix + ``shop_Order``); stores
    with other prefixes on the same database never share a table."""
    create_tables: bool = True
    """Create a type's table when it is first needed; ``false``: each type's table must
    exist already (the ``gs_tables`` registry is still created)."""

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: SecretStr) -> SecretStr:
        scheme = value.get_secret_value().split("://", 1)[0].split("+", 1)[0]
        if scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("url must start with sqlite:/// or postgresql://")
        return value

    @field_validator("table_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if SCOPE in value:
            raise ValueError("a table prefix cannot contain the character U+001F")
        return value
