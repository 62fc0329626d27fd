"""The Cassandra mapping shared by every path that writes or reads Cassandra.

Entries are flattened into columns (``address.streetName``), fixed properties of a
native kind use native CQL types, everything else goes through a pluggable
``PropertyValueSerializer`` (dynamic properties with type tags), one table per type is
created and evolved as types appear, and every write carries the operation's version as
its write timestamp. ``CassandraWriter`` applies operations, ``CassandraReader`` reads
rows back into entries, ``CassandraSyncEndpoint`` is the mirror endpoint.

Importing this package needs no cassandra-driver; opening a writer, reader or endpoint
does (``pip install 'gridstream[cassandra]'``).
"""

from __future__ import annotations

from gridstream.stores.cassandra.columns import VERSION_COLUMN, Column, Encoding
from gridstream.stores.cassandra.config import CassandraConfig
from gridstream.stores.cassandra.connection import CassandraConnection, connect
from gridstream.stores.cassandra.endpoint import CassandraSyncEndpoint, mapping_from_config
from gridstream.stores.cassandra.flatten import (
    DefaultFlattenFilter,
    FlattenFilter,
    Location,
    PropertyContext,
    SpecVisitor,
    TypeLayout,
    visit_specs,
)
from gridstream.stores.cassandra.mapping import CassandraMapping
from gridstream.stores.cassandra.naming import DefaultTableNameConverter, TableNameConverter
from gridstream.stores.cassandra.reader import CassandraReader, EntryWriter, StoredEntry
from gridstream.stores.cassandra.schema import CassandraSchema, SchemaCounters
from gridstream.stores.cassandra.serializers import (
    JsonSerializer,
    PropertyValueSerializer,
    TaggedMsgpackSerializer,
    available_serializers,
    register_serializer,
    resolve_serializer,
)
from gridstream.stores.cassandra.writer import CassandraWriter, ReplaceMode, WriteCounters

__all__ = [
    "VERSION_COLUMN",
    "CassandraConfig",
    "CassandraConnection",
    "CassandraMapping",
    "CassandraReader",
    "CassandraSchema",
    "CassandraSyncEndpoint",
    "CassandraWriter",
    "Column",
    "DefaultFlattenFilter",
    "DefaultTableNameConverter",
    "Encoding",
    "EntryWriter",
    "FlattenFilter",
    "JsonSerializer",
    "Location",
    "PropertyContext",
    "PropertyValueSerializer",
    "ReplaceMode",
    "SchemaCounters",
    "SpecVisitor",
    "StoredEntry",
    "TableNameConverter",
    "TaggedMsgpackSerializer",
    "TypeLayout",
    "WriteCounters",
    "available_serializers",
    "connect",
    "mapping_from_config",
    "register_serializer",
    "resolve_serializer",
    "visit_specs",
]
