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
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)

from gridstream.errors import ConfigError
from gridstream.stores.cassandra._driver import CONSISTENCY_LEVELS
from gridstream.stores.cassandra.naming import validate_keyspace
from gridstream.stores.cassandra.serializers import available_serializers

__all__ = ["CassandraConfig"]


class CassandraConfig(BaseModel):
    """Where and how to write: cluster, keyspace, consistency and the mapping's choices."""

    model_config = ConfigDict(
        frozen=True, populate_by_name=True, extra="forbid", hide_input_in_errors=True
    )

    keyspace: str = Field(validation_alias=AliasChoices("keyspace", "keyspaceName"))
    contact_points: tuple[str, ...] = Field(
        default=("127.0.0.1",), validation_alias=AliasChoices("contact_points", "hosts")
    )
    port: int = Field(default=9042, ge=1, le=65535)
    local_dc: str | None = None
    username: str | None = None
    password: SecretStr | None = None
    consistency_level: str = Field(
        default="LOCAL_QUORUM", validation_alias=AliasChoices("consistency_level", "consistency")
    )
    replication_factor: int = Field(default=1, ge=1)
    create_keyspace: bool = True
    concurrency: int = Field(default=64, ge=1)
    batch_partitions: int = Field(default=10, ge=1)
    batch_max_bytes: int = Field(default=4096, ge=0)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    request_timeout_s: float = Field(default=30.0, gt=0)
    fixed_serializer: str = Field(
        default="msgpack",
        validation_alias=AliasChoices("fixed_serializer", "fixedPropertyValueSerializer"),
    )
    dynamic_serializer: str = Field(
        default="msgpack",
        validation_alias=AliasChoices("dynamic_serializer", "dynamicPropertyValueSerializer"),
    )
    max_nesting_level: int = Field(default=10, ge=0)
    replace_on_write: bool = True
    replace_mode: Literal["tombstone", "nulls"] = "tombstone"
    write_id_only_entries: bool = False

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
        if isinstance(value, str):
            return tuple(h.strip() for h in value.split(",") if h.strip())
        return value

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
