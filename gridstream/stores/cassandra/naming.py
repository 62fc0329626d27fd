"""Type names to Cassandra table names, and CQL identifier quoting.

Cassandra table (and index) names are at most 48 characters of ``[A-Za-z0-9_]``. The
default converter follows the seed's algorithm and adds what it lacked: any other
invalid character is replaced too, and a name changed that way always carries an MD5
suffix, so distinct type names stay distinct. Names keep their case and are always
quoted in CQL.
"""

from __future__ import annotations

import hashlib
import re
from typing import Protocol, runtime_checkable

from gridstream.errors import ConfigError, StoreError

__all__ = [
    "MAX_NAME_LENGTH",
    "DefaultTableNameConverter",
    "TableNameConverter",
    "index_name",
    "quote_identifier",
    "qualified_table",
    "validate_keyspace",
]

MAX_NAME_LENGTH = 48
"""Cassandra's limit for keyspace and table names."""

_SUFFIX_CHARS = 6
_INVALID = re.compile(r"[^A-Za-z0-9_]")
_SEGMENT_SPLIT = re.compile(r"[.$]")
_VALID_NAME = re.compile(r"[A-Za-z0-9_]{1,48}")


@runtime_checkable
class TableNameConverter(Protocol):
    """Turns a type name (``com.example.Person``) into a table name."""

    def to_table_name(self, type_name: str) -> str:
        """A valid table name (``[A-Za-z0-9_]{1,48}``), the same for the same input."""
        ...


def _md5_suffix(text: str) -> str:
    digest = hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()
    return digest[:_SUFFIX_CHARS]


def _with_suffix(stem: str, suffix: str) -> str:
    keep = MAX_NAME_LENGTH - len(suffix) - 1
    return f"{stem[:keep]}_{suffix}"


class DefaultTableNameConverter:
    """The seed's converter, made total.

    ``.`` and ``$`` become ``_``; a name of at most 48 characters is kept; a longer one
    becomes its last segment, ``_`` and 6 hex characters of the MD5 of the full type name
    (the segment cut to 41 characters if needed). Other invalid characters become ``_``
    and then force the suffix, so ``a-b`` and ``a_b`` map to different tables.
    """

    def to_table_name(self, type_name: str) -> str:
        if not type_name:
            raise StoreError("an empty type name has no table name")
        suffix = _md5_suffix(type_name)
        underscored = type_name.replace(".", "_").replace("$", "_")
        sanitized = _INVALID.sub("_", underscored)
        if sanitized == underscored and len(sanitized) <= MAX_NAME_LENGTH:
            return sanitized
        if len(sanitized) + 1 + _SUFFIX_CHARS <= MAX_NAME_LENGTH:
            return _with_suffix(sanitized, suffix)
        segment = _INVALID.sub("_", _SEGMENT_SPLIT.split(type_name)[-1]) or "t"
        return _with_suffix(segment, suffix)


def quote_identifier(name: str) -> str:
    """``name`` as a quoted CQL identifier (case kept, any character allowed)."""
    if not name:
        raise StoreError("an empty name is not a CQL identifier")
    return '"' + name.replace('"', '""') + '"'


def qualified_table(keyspace: str, table: str) -> str:
    """``"keyspace"."table"`` for CQL statements."""
    return f"{quote_identifier(keyspace)}.{quote_identifier(table)}"


def validate_keyspace(name: str) -> str:
    """Return ``name`` if it is a valid keyspace name, else raise ``ConfigError``."""
    if not _VALID_NAME.fullmatch(name):
        raise ConfigError(
            f"keyspace name {name!r} must be 1 to {MAX_NAME_LENGTH} characters of [A-Za-z0-9_]"
        )
    return name


def index_name(table: str, column: str) -> str:
    """A valid, deterministic index name for ``column`` of ``table``."""
    stem = f"{table}_{column}_idx"
    sanitized = _INVALID.sub("_", stem)
    if sanitized == stem and len(stem) <= MAX_NAME_LENGTH:
        return stem
    return _with_suffix(sanitized, _md5_suffix(f"{table}\x00{column}"))
