"""Typed configuration of the Cassandra store, with the seed's option names accepted.

``hosts`` / ``keyspaceName`` / ``fixedPropertyValueSerializer`` /
``dynamicPropertyValueSerializer`` (the seed's names) are accepted next to the snake_case
fields. Serializers are chosen by registered name only; custom serializers, filters and
name converters are passed as objects in Python. The password never appears in reprs,
logs or exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)

from gridstream._config import StrictModel, comma_separated, importance
from gridstream.errors import ConfigError
from gridstream.stores.cassandra._driver import CONSISTENCY_LEVELS
from gridstream.stores.cassandra.naming import validate_keyspace
from gridstream.stores.cassandra.serializers import available_serializers

__all__ = ["CassandraConfig"]


class CassandraConfig(StrictModel):
    """Where and how to write: cluster, keyspace, consistency and the mapping's choices."""

    keyspace: str = Field(validation_alias=AliasChoices("keyspace", "keyspaceName"))
    """The keyspace holding the tables (1 to 48 characters of ``[A-Za-z0-9_]``); created
    when missing unless ``create_keyspace`` is off."""
    contact_points: tuple[str, ...] = Field(
        default=("127.0.0.1",), validation_alias=AliasChoices("contact_points", "hosts"),
        json_schema_extra=importance("high")
    )
    """The nodes the driver first connects to (host names or addresses, all on ``port``):
    a list or comma-separated text."""
    port: int = Field(default=9042, ge=1, le=65535)
    """The CQL native port of the contact points."""
    local_dc: str | None = None
    """The local data centre, whose nodes the driver sends requests to. Unset: the first
    data centre the driver sees."""
    username: str | None = Field(default=None, json_schema_extra=importance("high"))
    """The user of Cassandra's password authentication (with ``password``). Unset: no
    authentication."""
    password: SecretStr | None = Field(default=None, json_schema_extra=importance("high"))
    """The password of ``username`` (unused without it); kept secret (never printed)."""
    consistency_level: str = Field(
        default="LOCAL_QUORUM", validation_alias=AliasChoices("consistency_level", "consistency"),
        json_schema_extra=importance("high")
    )
    """The consistency level of every write and read: ``ANY``, ``ONE``, ``TWO``,
    ``THREE``, ``QUORUM``, ``ALL``, ``LOCAL_QUORUM``, ``EACH_QUORUM`` or ``LOCAL_ONE``
    (any case)."""
    replication_factor: int = Field(default=1, ge=1)
    """The replication factor (``SimpleStrategy``) of the keyspace when it is created
    here (``create_keyspace``); an existing keyspace keeps its own."""
    create_keyspace: bool = True
    """Create the keyspace (``SimpleStrategy``, ``replication_factor``) if it does not
    exist; ``false``: it must exist already."""
    concurrency: int = Field(default=64, ge=1, json_schema_extra=importance("low"))
    """The most requests a writer has in flight at once (the Spark sink has one writer
    per Python worker)."""
    batch_partitions: int = Field(default=10, ge=1, json_schema_extra=importance("low"))
    """The most rows in one request: rows owned by the same replicas travel together in
    an unlogged batch; 1 sends one request per row."""
    batch_max_bytes: int = Field(default=4096, ge=0, json_schema_extra=importance("low"))
    """The most bytes of bound values in one request (with ``batch_partitions``); a row
    larger than this goes alone. The defaults stay under Cassandra's batch warnings."""
    connect_timeout_s: float = Field(default=10.0, gt=0, json_schema_extra=importance("low"))
    """How long, in seconds, the driver tries to open a connection to a node (TCP,
    handshake and authentication) before giving up on it."""
    request_timeout_s: float = Field(default=30.0, gt=0, json_schema_extra=importance("low"))
    """How long, in seconds, the driver waits for the answer to a request (a write, a
    read, a schema change) before failing it."""
    fixed_serializer: str = Field(
        default="msgpack",
        validation_alias=AliasChoices("fixed_serializer", "fixedPropertyValueSerializer"),
    )
    """The serializer, by registered name (``msgpack``, ``json`` or one added with
    ``register_serializer``), of fixed ``list``, ``set``, ``dict``, ``object`` and ``any``
    properties, each stored in one blob column."""
    dynamic_serializer: str = Field(
        default="msgpack",
        validation_alias=AliasChoices("dynamic_serializer", "dynamicPropertyValueSerializer"),
    )
    """The serializer, by registered name (``msgpack``, ``json`` or one added with
    ``register_serializer``), of every dynamic property, each stored in one blob column."""
    max_nesting_level: int = Field(default=10, ge=0, json_schema_extra=importance("low"))
    """Fixed object properties up to this nesting level (top-level properties are level
    1) are flattened into columns such as ``address.city``; deeper ones are one blob
    column. A flatten filter passed in Python replaces this rule."""
    replace_on_write: bool = True
    """A WRITE replaces the row whole, as an UPDATE does (the space reports an overwrite
    as WRITE); ``false``: the seed's insert of the non-null columns only."""
    replace_mode: Literal["tombstone", "nulls"] = "tombstone"
    """How a row is replaced whole, in one request: ``tombstone`` inserts the non-null
    columns and deletes the row at the version before; ``nulls`` is one ``INSERT ... JSON
    ... DEFAULT NULL`` that nulls every other column (no deletion, for CDC consumers)."""
    write_id_only_entries: bool = False
    """Write an entry that carries nothing but its id as a row of its id and version;
    ``false`` (the seed's way) writes nothing for it and counts it in
    ``skipped_id_only``."""

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> CassandraConfig:
        """Validate a config mapping (file or CLI); errors become ``ConfigError``."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise ConfigError(f"invalid Cassandra configuration: {exc}") from exc

    @field_validator("contact_points", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        return comma_separated(value)

    @field_validator("keyspace")
    @classmethod
    def _keyspace(cls, value: str) -> str:
        try:
            return validate_keyspace(value)
        except Exception as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("consistency_level")
    @classmethod
    def _consistency(cls, value: str) -> str:
        if value.upper() not in CONSISTENCY_LEVELS:
            raise ValueError(f"unknown consistency level {value!r}; one of {CONSISTENCY_LEVELS}")
        return value.upper()

    @field_validator("fixed_serializer", "dynamic_serializer")
    @classmethod
    def _serializer(cls, value: str) -> str:
        if value not in available_serializers():
            raise ValueError(f"unknown serializer {value!r}; one of {available_serializers()}")
        return value
