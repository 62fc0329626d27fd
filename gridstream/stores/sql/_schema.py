"""The SQL store's tables and connections: one layout, two dialects (SQLite, PostgreSQL).

A type's table::

    id TEXT PRIMARY KEY, version BIGINT NOT NULL, deleted BOOLEAN NOT NULL,
    op TEXT NOT NULL, ts BIGINT NOT NULL, data JSONB

(on SQLite ``deleted`` is INTEGER 0/1 and ``data`` TEXT). The registry table
``gs_tables(type_name PRIMARY KEY, table_name UNIQUE)`` records which type owns which
table (see ``gridstream.stores.naming``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Engine

from gridstream._optional import require
from gridstream.errors import ConfigError

__all__ = [
    "COLUMNS",
    "MAX_TABLE_NAME",
    "REGISTRY_TABLE",
    "create_engine",
    "describe_url",
    "registry_table",
    "state_table",
]

COLUMNS = ("id", "version", "deleted", "op", "ts", "data")
"""The columns of every type's table, in this order."""

REGISTRY_TABLE = "gs_tables"
MAX_TABLE_NAME = 63
"""PostgreSQL's identifier limit in bytes; applied on SQLite too so a store can move."""

_BOOLEAN = sa.Boolean().with_variant(sa.Integer(), "sqlite")
JSON_TEXT = sa.Text().with_variant(JSONB(), "postgresql")
"""``data``: JSONB on PostgreSQL, TEXT elsewhere; always written and read as JSON text."""


def state_table(metadata: sa.MetaData, name: str) -> sa.Table:
    """The definition of a type's table named ``name`` (kept in ``metadata``)."""
    existing = metadata.tables.get(name)
    if existing is not None:
        return existing
    return sa.Table(
        name, metadata,
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("deleted", _BOOLEAN, nullable=False),
        sa.Column("op", sa.Text(), nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("data", JSON_TEXT, nullable=True),
    )


def registry_table(metadata: sa.MetaData) -> sa.Table:
    """``gs_tables``: type name → table name, both unique (case-folded on SQLite, whose
    table names ignore case)."""
    existing = metadata.tables.get(REGISTRY_TABLE)
    if existing is not None:
        return existing
    return sa.Table(
        REGISTRY_TABLE, metadata,
        sa.Column("type_name", sa.Text(), primary_key=True),
        sa.Column("table_name", sa.Text().with_variant(sa.Text(collation="NOCASE"), "sqlite"),
                  nullable=False, unique=True),
    )


def _sqlalchemy_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    base, _, driver = scheme.partition("+")
    if not sep:
        raise ConfigError("a SQL URL looks like sqlite:///file.db or postgresql://host/db")
    if base == "sqlite" and not driver:
        return url
    if base in ("postgresql", "postgres") and driver in ("", "psycopg"):
        return f"postgresql+psycopg://{rest}"
    raise ConfigError(f"unsupported SQL URL scheme {scheme!r}: use sqlite:/// or postgresql://")


def describe_url(url: str) -> str:
    """Where a URL points, without user or password (for logs and errors)."""
    parts = urlsplit(url)
    if parts.scheme.startswith("sqlite"):
        return f"sqlite {url.split('://', 1)[1][1:] or ':memory:'}"
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql {parts.hostname}{port}{parts.path}"


def create_engine(url: str) -> Engine:
    """An engine for ``url`` (no connection yet). SQLite transactions are made to include
    DDL (the driver would otherwise commit a CREATE TABLE on its own), so a failed batch
    leaves no table behind."""
    target = _sqlalchemy_url(url)
    try:
        describe_url(url)  # every error of the store names where the URL points
        if target.startswith("postgresql"):
            require("psycopg", "PostgreSQL")
            return sa.create_engine(target, hide_parameters=True, pool_pre_ping=True)
        engine = sa.create_engine(target, hide_parameters=True, connect_args={"timeout": 30})
    except (ValueError, sa.exc.ArgumentError) as exc:  # the messages hold no password
        raise ConfigError(f"malformed SQL URL ({type(exc).__name__}: {exc})") from exc

    @sa.event.listens_for(engine, "connect")
    def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN")

    return engine
