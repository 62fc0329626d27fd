"""Hazelcast and the schema registry of the local stack, used by their real clients."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from hazelcast.client import HazelcastClient

from gridstream import stack
from gridstream.stack import _process
from gridstream.stack.hazelcast import HazelcastService
from gridstream.stack.registry import RegistryService
from gridstream.stack.service import LocalService
from tests.integration.support.hazelcast_cluster import free_ports

INCOMPATIBLE = 409  # Confluent's HTTP status and error code for an incompatible schema


def _record_schema(name: str, fields: list[dict[str, Any]]) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "gridstream.test",
                       "fields": fields})


V1 = [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]


@pytest.fixture()
def registry(registry_service: LocalService) -> Iterator[SchemaRegistryClient]:
    assert isinstance(registry_service, RegistryService)
    client = SchemaRegistryClient({"url": registry_service.url()})
    yield client
    client.close()


def test_avro_round_trip_through_the_registry(registry: SchemaRegistryClient) -> None:
    topic = f"gs-test-{uuid.uuid4().hex[:12]}"
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = AvroSerializer(registry, _record_schema("Person", V1))
    record = {"id": 7, "name": "Ada"}
    data = serializer(record, ctx)
    assert data is not None and data[0] == 0  # Confluent framing: magic byte, schema id
    registered = registry.get_latest_version(f"{topic}-value")
    assert int.from_bytes(data[1:5], "big") == registered.schema_id
    assert json.loads(registered.schema.schema_str)["fields"] == V1
    assert AvroDeserializer(registry)(data, ctx) == record


def test_backward_compatibility_is_enforced(registry: SchemaRegistryClient) -> None:
    subject = f"gs-test-{uuid.uuid4().hex[:12]}-value"
    first = registry.register_schema(subject, Schema(_record_schema("Person", V1), "AVRO"))
    registry.set_compatibility(subject, "BACKWARD")
    assert registry.get_compatibility(subject) == "BACKWARD"

    optional = [*V1, {"name": "email", "type": ["null", "string"], "default": None}]
    added = Schema(_record_schema("Person", optional), "AVRO")
    assert registry.test_compatibility(subject, added)
    second = registry.register_schema(subject, added)
    assert second != first and registry.get_versions(subject) == [1, 2]

    breaking = Schema(_record_schema("Person", [
        {"name": "id", "type": "string"}, {"name": "name", "type": "string"},
    ]), "AVRO")
    assert not registry.test_compatibility(subject, breaking)
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema(subject, breaking)
    assert refused.value.http_status_code == INCOMPATIBLE
    assert refused.value.error_code == INCOMPATIBLE
    assert registry.get_versions(subject) == [1, 2]


def test_registry_status_prints_the_confluent_url(registry_service: LocalService) -> None:
    status = registry_service.status()
    assert status.state == "up"
    assert status.url == f"http://{registry_service.address}/apis/ccompat/v7"


def test_hazelcast_client_puts_and_gets(hazelcast_service: LocalService) -> None:
    assert isinstance(hazelcast_service, HazelcastService)
    client = HazelcastClient(cluster_name=hazelcast_service.settings.cluster_name,
                             cluster_members=[hazelcast_service.address])
    try:
        entries = client.get_map(f"gs-test-{uuid.uuid4().hex[:12]}").blocking()
        entries.put("a", "1")
        entries.put_all({f"k{i}": str(i) for i in range(500)})
        assert entries.get("a") == "1"
        assert entries.size() == 501
        assert entries.get_all(["k0", "k499", "missing"]) == {"k0": "0", "k499": "499"}
        entries.destroy()
        rows = client.sql.execute("SELECT v FROM TABLE(generate_series(1, 3))").result()
        assert [row["v"] for row in rows] == [1, 2, 3]  # the SQL engine (hazelcast-sql) runs
    finally:
        client.shutdown()


@pytest.fixture()
def private_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {"GRIDSTREAM_HOME": str(tmp_path / "home"),
           "GRIDSTREAM_HAZELCAST_PORT": str(free_ports(2)),
           "GRIDSTREAM_HAZELCAST_MEMBERS": "2",
           "GRIDSTREAM_HAZELCAST_CLUSTER": f"gs-test-{uuid.uuid4().hex[:8]}"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gridstream.cli", *args],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=180, check=False)


def test_two_members_keep_the_data_when_one_is_killed(private_cluster: dict[str, str]) -> None:
    members = stack.services(["hazelcast"])
    assert len(members) == 2
    first, second = members
    assert isinstance(first, HazelcastService) and isinstance(second, HazelcastService)
    try:
        for member in members:
            assert member.up().state == "up"
        status = _cli(["stack", "status", "--services", "hazelcast"], private_cluster)
        assert status.returncode == 0, status.stderr
        for member in members:
            assert f"hazelcast up        {member.address}  pid " in status.stdout

        cluster = private_cluster["GRIDSTREAM_HAZELCAST_CLUSTER"]
        client = HazelcastClient(cluster_name=cluster,
                                 cluster_members=[first.address, second.address])
        try:
            seen = {f"{m.address.host}:{m.address.port}"
                    for m in client.cluster_service.get_members()}
            assert seen == {first.address, second.address}
            entries = client.get_map("gs-test-survivors").blocking()
            entries.put_all({f"k{i}": i for i in range(2000)})
        finally:
            client.shutdown()

        victim = second.status().pid
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        _process.wait_until(lambda: not _process.alive(victim), timeout_s=30,
                            alive=lambda: True, what="the killed member")
        assert second.status().state == "down"

        survivor = HazelcastClient(cluster_name=cluster, cluster_members=[first.address],
                                   smart_routing=False)
        try:
            _process.wait_until(lambda: len(survivor.cluster_service.get_members()) == 1,
                                timeout_s=90, alive=lambda: True, what="the member's removal")
            entries = survivor.get_map("gs-test-survivors").blocking()
            assert entries.size() == 2000
            assert entries.get_all([f"k{i}" for i in range(2000)]) == {
                f"k{i}": i for i in range(2000)
            }
        finally:
            survivor.shutdown()
    finally:
        down = _cli(["stack", "down", "--services", "hazelcast"], private_cluster)
    assert down.returncode == 0, down.stderr
    for member in members:
        assert not _process.port_open("127.0.0.1", int(member.address.rsplit(":", 1)[1]))
