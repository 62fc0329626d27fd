"""Opening a cassandra-driver session from a ``CassandraConfig``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gridstream.errors import StoreError
from gridstream.stores.cassandra._driver import consistency_level, require_driver
from gridstream.stores.cassandra.config import CassandraConfig

__all__ = ["CassandraConnection", "connect"]


@dataclass
class CassandraConnection:
    """A driver cluster and its session; ``close`` shuts both down."""

    cluster: Any
    session: Any

    def close(self) -> None:
        self.cluster.shutdown()


def connect(config: CassandraConfig) -> CassandraConnection:
    """Connect to the cluster (token-aware, DC-aware) with the configured defaults."""
    require_driver()
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=config.local_dc)),
        consistency_level=consistency_level(config.consistency_level),
        request_timeout=config.request_timeout_s,
    )
    auth = None
    if config.username is not None:
        secret = config.password.get_secret_value() if config.password is not None else ""
        auth = PlainTextAuthProvider(username=config.username, password=secret)
    cluster = Cluster(
        list(config.contact_points),
        port=config.port,
        auth_provider=auth,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=config.connect_timeout_s,
    )
    try:
        session = cluster.connect()
    except Exception as exc:
        cluster.shutdown()
        hosts = ", ".join(config.contact_points)
        raise StoreError(f"cannot connect to Cassandra at {hosts}:{config.port}") from exc
    return CassandraConnection(cluster, session)
