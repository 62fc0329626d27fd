"""Fetch, start, health-check and stop the local services (Kafka, Cassandra) on loopback."""

from __future__ import annotations

from collections.abc import Iterable

from gridstream.errors import StackError
from gridstream.stack.artifacts import ARTIFACT_SETS, classpath, ensure_artifacts
from gridstream.stack.cassandra import CassandraService
from gridstream.stack.home import gridstream_home
from gridstream.stack.kafka import KafkaService
from gridstream.stack.service import LocalService, ServiceStatus

__all__ = [
    "ARTIFACT_SETS",
    "SERVICES",
    "CassandraService",
    "KafkaService",
    "LocalService",
    "ServiceStatus",
    "classpath",
    "ensure_artifacts",
    "gridstream_home",
    "services",
]

SERVICES: dict[str, type[LocalService]] = {
    "kafka": KafkaService,
    "cassandra": CassandraService,
}


def services(names: Iterable[str] | None = None) -> list[LocalService]:
    """Service objects by name (all when ``names`` is None); unknown names are an error."""
    wanted = list(names) if names is not None else list(SERVICES)
    unknown = [n for n in wanted if n not in SERVICES]
    if unknown:
        raise StackError(
            f"unknown service {', '.join(map(repr, unknown))}; known: {', '.join(SERVICES)}"
        )
    home = gridstream_home()
    return [SERVICES[n](home) for n in wanted]
