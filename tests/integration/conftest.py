"""Session fixtures: the real services, started once (or reused when already running).

Integration tests never skip: a service that cannot be started fails the session loudly.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gridstream import stack
from gridstream.stack.service import LocalService


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.integration)


def _running() -> set[str]:
    """The stack's processes that run now (each Hazelcast member apart)."""
    every = stack.services(list(stack.SERVICES))
    return {service.marker for service in every if service.status().state != "down"}


@pytest.fixture(scope="session", autouse=True)
def _stack_left_as_found() -> Iterator[None]:
    """Stops, at the session's end, every stack process the session started, however it
    was started (a helper's own ``up()`` too: the stack's Hazelcast member was left
    running after every ``make test``); what ran before the session keeps running."""
    before = _running()
    yield
    if os.environ.get("GRIDSTREAM_KEEP_STACK"):
        return
    failed = []
    for service in stack.services(list(stack.SERVICES)):
        try:
            if service.marker not in before and service.status().state != "down":
                service.down()
        except Exception as exc:  # noqa: BLE001 - the others are stopped all the same
            failed.append(f"{service.name}: {exc}")
    assert not failed, f"could not stop what the session started: {failed}"


def _ensure(name: str) -> Iterator[LocalService]:
    """The service, started unless it runs (``_stack_left_as_found`` stops it after)."""
    service = stack.services([name])[0]  # a cluster's first member stands for it
    service.up()  # idempotent; raises StackError with the log tail when it cannot start
    yield service


@pytest.fixture(scope="session")
def kafka_service() -> Iterator[LocalService]:
    yield from _ensure("kafka")


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_service: LocalService) -> str:
    return kafka_service.address


@pytest.fixture()
def topic_factory(kafka_bootstrap: str) -> Iterator[Callable[..., str]]:
    """``make_topic(partitions=3, **config) -> name``: uuid topics, deleted afterwards.
    They keep their records however old their timestamps (``retention.ms=-1`` unless
    ``config`` says otherwise): tests write event times years back, and the broker's
    7-day retention deletes such a segment whenever its check (every 5 min) comes
    during the test."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created: list[str] = []

    def make_topic(partitions: int = 3, name: str | None = None, **config: Any) -> str:
        topic = name or f"gs-test-{uuid.uuid4().hex[:12]}"
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1,
                      config={"retention.ms": "-1",
                              **{k.replace("_", "."): str(v) for k, v in config.items()}})]
        )
        futures[topic].result(timeout=30)
        created.append(topic)
        return topic

    yield make_topic
    if created:
        for fut in admin.delete_topics(created).values():
            fut.result(timeout=30)


@pytest.fixture(scope="session")
def cassandra_service() -> Iterator[LocalService]:
    yield from _ensure("cassandra")


@pytest.fixture(scope="session")
def cassandra_session(cassandra_service: LocalService) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    host, port = cassandra_service.address.rsplit(":", 1)
    cluster = Cluster([host], port=int(port), protocol_version=5)
    session = cluster.connect()
    yield session
    cluster.shutdown()


@pytest.fixture()
def keyspace(cassandra_session: Any) -> Iterator[str]:
    """A fresh keyspace per test (SimpleStrategy, RF 1), dropped afterwards."""
    name = f"gs_test_{uuid.uuid4().hex[:12]}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    yield name
    cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


@pytest.fixture(scope="session")
def postgres_service() -> Iterator[LocalService]:
    yield from _ensure("postgres")


@pytest.fixture(params=["sqlite", "postgres"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A fresh SQL store URL: a SQLite file, then a new PostgreSQL database (dropped
    afterwards); the URL names the password file, never the password."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    import psycopg
    from psycopg import sql

    from gridstream.stack.postgres import PostgresService

    service = request.getfixturevalue("postgres_service")
    assert isinstance(service, PostgresService)
    name = f"gs_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(service.database_url("postgres"), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield service.database_url(name)
    with psycopg.connect(service.database_url("postgres"), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="session")
def hazelcast_service() -> Iterator[LocalService]:
    yield from _ensure("hazelcast")


@pytest.fixture(scope="session")
def registry_service() -> Iterator[LocalService]:
    yield from _ensure("registry")


@pytest.fixture()
def registry_url(registry_service: LocalService) -> str:
    """The stack's registry (its Confluent-compatible API)."""
    from gridstream.stack.registry import RegistryService

    assert isinstance(registry_service, RegistryService)
    return registry_service.url()


@pytest.fixture()
def client(registry_url: str) -> Iterator[Any]:
    """A confluent-kafka ``SchemaRegistryClient`` of the stack's registry."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    registry = SchemaRegistryClient({"url": registry_url})
    yield registry
    registry.close()


@pytest.fixture(scope="session")
def spark(kafka_service: LocalService) -> Iterator[Any]:
    from gridstream.spark import get_spark

    session = get_spark(app_name="gridstream-tests")
    yield session
    session.stop()
