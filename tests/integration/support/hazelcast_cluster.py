"""A private Hazelcast cluster on loopback for fault tests: its own home, ports and name."""

from __future__ import annotations

import os
import random
import signal
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.runtime.home import gridstream_home
from gridstream.stack import _process
from gridstream.stack.hazelcast import HazelcastService, HazelcastSettings


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> int:
    """A port p below the ephemeral range with p .. p + count - 1 free on loopback."""
    for _ in range(100):
        base = random.randrange(20000, 32000)
        if all(_bindable(base + i) for i in range(count)):
            return base
    raise AssertionError("no free consecutive ports on loopback")


class PrivateCluster:
    """Members 1..n of a cluster nobody else uses; ``stop()`` ends every member."""

    def __init__(self, home: Path, members: int, journal_capacity: int) -> None:
        self.settings = HazelcastSettings(
            port=free_ports(members), members=members,
            cluster_name=f"gs-test-{uuid.uuid4().hex[:8]}", journal_capacity=journal_capacity,
        )
        self.members = [
            HazelcastService(home, m, settings=self.settings, cluster_size=members)
            for m in range(1, members + 1)
        ]

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(m.address for m in self.members)

    def config(self, **overrides: float) -> HazelcastGridConfig:
        return HazelcastGridConfig(
            cluster_name=self.settings.cluster_name, members=self.addresses, **overrides
        )

    def adapter(self, **overrides: float) -> HazelcastAdapter:
        adapter = HazelcastAdapter(self.config(**overrides))
        adapter.open()
        return adapter

    def start(self) -> None:
        for member in self.members:
            assert member.up().state == "up"

    def kill(self, member: int) -> None:
        """SIGKILL one member (numbered from 1) and wait until its process is gone."""
        pid = self.members[member - 1].status().pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        _process.wait_until(lambda: not _process.alive(pid), timeout_s=30,
                            alive=lambda: True, what="the killed member")

    def stop(self) -> None:
        for member in self.members:
            member.down()
        for member in self.members:
            _process.wait_until(lambda m=member: not _process.port_open("127.0.0.1", m.port),
                                timeout_s=60, alive=lambda: True, what="a member's stop")


def private_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, members: int, journal_capacity: int
) -> Iterator[PrivateCluster]:
    """Start a private cluster (the shared home's resolved jars, a home of its own)."""
    shared_jvm = gridstream_home() / "jvm"
    home = tmp_path / "home"
    home.mkdir()
    (home / "jvm").symlink_to(shared_jvm, target_is_directory=True)
    monkeypatch.setenv("GRIDSTREAM_HOME", str(home))
    cluster = PrivateCluster(home, members, journal_capacity)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
