"""Fetch, start, health-check and stop the local services (Kafka, Cassandra, PostgreSQL,
Hazelcast, a schema registry) on loopback."""

from __future__ import annotations

from collections.abc import Iterable

from gridstream.errors import StackError
from gridstream.runtime.artifacts import ARTIFACT_SETS, classpath, ensure_artifacts
from gridstream.runtime.home import gridstream_home
from gridstream.stack.cassandra import CassandraService
from gridstream.stack.hazelcast import HazelcastService
from gridstream.stack.kafka import KafkaService
from gridstream.stack.postgres import PostgresService
from gridstream.stack.registry import RegistryService
from gridstream.stack.service import JvmService, LocalService, ServiceStatus

__all__ = [
    "ARTIFACT_SETS",
    "DEFAULT_SERVICES",
    "SERVICES",
    "CassandraService",
    "HazelcastService",
    "JvmService",
    "KafkaService",
    "LocalService",
    "PostgresService",
    "RegistryService",
    "ServiceStatus",
    "classpath",
    "ensure_artifacts",
    "gridstream_home",
    "services",
]

SERVICES: dict[str, type[LocalService]] = {
    "kafka": KafkaService,
    "cassandra": CassandraService,
    "postgres": PostgresService,
    "hazelcast": HazelcastService,
    "registry": RegistryService,
}
DEFAULT_SERVICES = ("kafka", "cassandra")
"""What ``stack up`` starts when no service is named."""


def services(names: Iterable[str] | None = None) -> list[LocalService]:
    """Service objects by name; unknown names are an error. ``None``: the default
    services, and any other that runs (so ``status`` shows it and ``down`` stops it)."""
    home = gridstream_home()
    if names is None:
        chosen = [s for n in SERVICES for s in SERVICES[n].instances(home)]
        return [s for s in chosen if s.name in DEFAULT_SERVICES or s.status().state != "down"]
    wanted = list(names)
    unknown = [n for n in wanted if n not in SERVICES]
    if unknown:
        raise StackError(
            f"unknown service {', '.join(map(repr, unknown))}; known: {', '.join(SERVICES)}"
        )
    return [s for n in wanted for s in SERVICES[n].instances(home)]
