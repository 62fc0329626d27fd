"""The Cassandra mapping as a direct mirror endpoint (the seed's sync endpoint).

Writes are idempotent by version (``USING TIMESTAMP``), so the endpoint keeps no
position of its own: on redelivery after a crash the mirror replays bulks and the table
ends in the same state (effectively-once). A bulk is applied with bounded concurrency;
Cassandra has no multi-partition transactions, so a reader may briefly see part of a
grid transaction while it is being applied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from gridstream.errors import EndpointError, GridstreamError
from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.operations import Bulk, TypeDescriptor
from gridstream.stores.cassandra._driver import consistency_level
from gridstream.stores.cassandra.config import CassandraConfig
from gridstream.stores.cassandra.connection import CassandraConnection, connect
from gridstream.stores.cassandra.flatten import DefaultFlattenFilter, FlattenFilter
from gridstream.stores.cassandra.mapping import CassandraMapping
from gridstream.stores.cassandra.naming import TableNameConverter
from gridstream.stores.cassandra.reader import CassandraReader
from gridstream.stores.cassandra.serializers import PropertyValueSerializer
from gridstream.stores.cassandra.writer import CassandraWriter, WriteCounters

__all__ = ["CassandraSyncEndpoint", "mapping_from_config"]

log = logging.getLogger(__name__)


def mapping_from_config(
    config: CassandraConfig,
    *,
    fixed_serializer: PropertyValueSerializer | None = None,
    dynamic_serializer: PropertyValueSerializer | None = None,
    flatten_filter: FlattenFilter | None = None,
    name_converter: TableNameConverter | None = None,
) -> CassandraMapping:
    """The mapping a config describes; objects passed here win over config names."""
    return CassandraMapping(
        name_converter=name_converter,
        flatten_filter=flatten_filter or DefaultFlattenFilter(config.max_nesting_level),
        fixed_serializer=fixed_serializer or config.fixed_serializer,
        dynamic_serializer=dynamic_serializer or config.dynamic_serializer,
    )


class CassandraSyncEndpoint(SyncEndpoint):
    """Delivers the mirror's bulks to Cassandra tables, one table per type."""

    name = "cassandra"

    def __init__(
        self,
        config: CassandraConfig,
        *,
        fixed_serializer: PropertyValueSerializer | None = None,
        dynamic_serializer: PropertyValueSerializer | None = None,
        flatten_filter: FlattenFilter | None = None,
        name_converter: TableNameConverter | None = None,
        session: Any = None,
    ) -> None:
        self.config = config
        self.mapping = mapping_from_config(
            config,
            fixed_serializer=fixed_serializer,
            dynamic_serializer=dynamic_serializer,
            flatten_filter=flatten_filter,
            name_converter=name_converter,
        )
        self._session = session
        self._connection: CassandraConnection | None = None
        self._writer: CassandraWriter | None = None
        self._counters = WriteCounters()

    def __repr__(self) -> str:
        return f"CassandraSyncEndpoint({self.config!r})"

    def open(self, mirror_name: str) -> None:
        try:
            if self._session is None:
                self._connection = connect(self.config)
                self._session = self._connection.session
            self._writer = CassandraWriter.from_config(self._session, self.config, self.mapping)
            if self.config.create_keyspace:
                self._writer.schema.ensure_keyspace()
        except GridstreamError as exc:
            self.close()
            raise EndpointError(f"cassandra endpoint of mirror {mirror_name!r}: {exc}") from exc
        log.info(
            "cassandra endpoint open for mirror %s, keyspace %s", mirror_name, self.config.keyspace
        )

    def position(self) -> int | None:
        return None

    def write_batch(self, bulks: Sequence[Bulk], types: Mapping[str, TypeDescriptor]) -> None:
        if self._writer is None:
            raise EndpointError("the cassandra endpoint is not open")
        operations = [op for bulk in bulks for op in bulk.operations]
        try:
            self._counters.add(self._writer.apply(operations, types))
        except GridstreamError as exc:
            raise EndpointError(f"cassandra endpoint: {exc}") from exc

    def close(self) -> None:
        self._writer = None
        if self._connection is not None:
            self._connection.close()
            self._connection = None
            self._session = None

    @property
    def counters(self) -> WriteCounters:
        """What the endpoint has written, deleted and skipped since it was created."""
        return self._counters

    @property
    def session(self) -> Any:
        """The driver session while open (for queries of your own)."""
        if self._session is None:
            raise EndpointError("the cassandra endpoint is not open")
        return self._session

    def reader(self) -> CassandraReader:
        """A reader over the same session and mapping (for the initial load)."""
        if self._session is None:
            raise EndpointError("the cassandra endpoint is not open")
        return CassandraReader(
            self._session,
            self.config.keyspace,
            self.mapping,
            consistency_level=consistency_level(self.config.consistency_level),
        )
