"""Acceptance: the source connector under BACKLOG is exactly-once into Kafka while its
Spark driver is SIGKILLed again and again, on both grids, and across grid faults (a
restart of the Space's owning process; the loss of one Hazelcast member of two).

A workload process makes a seeded plan of changes (puts carrying a per-key counter,
updates, removes) on four caches while the connector runs; its driver is killed at
seeded random moments and started again from its checkpoint. Once its topics hold each
key's final value, a ``read_committed`` consumer reads them all: per key, every change
exactly once (counted as Kafka's own tests count: the counters read against the counters
written), counters and ``gs.version`` only increasing, and the last record equal to the
grid's whole value (``connect_plan.check``; its own tests show it fails when it should).

Every run here is ``slow`` (``make test-slow``): the short ones per grid, and the long
ones (≥ 50,000 changes, ≥ 10 kills). The default suite restarts the connector cleanly
(``test_connect_source.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.grid.space import SpaceAdapter, SpaceGridConfig
from gridstream.stack.hazelcast import HazelcastService
from gridstream.stack.service import LocalService
from tests.integration.support.connect_kills import Run, Scenario, run_kills
from tests.integration.support.hazelcast_cluster import PrivateCluster, private_cluster


def space_scenario(tmp: Path, **options: Any) -> Scenario:
    data_dir, name = str(tmp / "space"), "kills"
    return Scenario(
        grid={"kind": "space", "data_dir": data_dir, "space_name": name},
        workload_grid={"grid": "space", "data_dir": data_dir, "space_name": name},
        adapter=lambda: SpaceAdapter(SpaceGridConfig(data_dir, name)), **options)


def hazelcast_scenario(cluster_name: str, members: tuple[str, ...], **options: Any
                       ) -> Scenario:
    return Scenario(
        grid={"kind": "hazelcast", "cluster_name": cluster_name, "members": list(members)},
        workload_grid={"grid": "hazelcast", "cluster_name": cluster_name,
                       "members": list(members)},
        adapter=lambda: HazelcastAdapter(HazelcastGridConfig(cluster_name=cluster_name,
                                                             members=members)),
        **options)


def stack_hazelcast(service: LocalService, **options: Any) -> Scenario:
    assert isinstance(service, HazelcastService)
    return hazelcast_scenario(service.settings.cluster_name, (service.address,), **options)


def assert_exactly_once(verdict: Any, figures: dict[str, Any], kills: int,
                        changes: int) -> None:
    assert verdict.ok, verdict.summary() + "\n" + verdict.details()
    assert figures["kills"] >= kills and figures["changes"] >= changes
    assert figures["missing"] == figures["duplicates"] == 0
    assert figures["records_read"] == changes


@pytest.fixture()
def two_members(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PrivateCluster]:
    yield from private_cluster(tmp_path, monkeypatch, members=2, journal_capacity=271 * 2000)


# -------------------------------------------- short runs (fault suites: slow, ~2.5-3 min each)


@pytest.mark.slow
def test_space_backlog_survives_driver_kills(kafka_bootstrap: str, tmp_path: Path) -> None:
    scenario = space_scenario(tmp_path, ops=5000, kills=3, seed=101, keys_per_cache=100)
    verdict, figures = run_kills(scenario, tmp_path, kafka_bootstrap)
    assert_exactly_once(verdict, figures, 3, 5000)


@pytest.mark.slow
def test_hazelcast_backlog_survives_driver_kills(kafka_bootstrap: str, tmp_path: Path,
                                                 hazelcast_service: LocalService) -> None:
    scenario = stack_hazelcast(hazelcast_service, ops=5000, kills=3, seed=102,
                               keys_per_cache=100)
    verdict, figures = run_kills(scenario, tmp_path, kafka_bootstrap)
    assert_exactly_once(verdict, figures, 3, 5000)


# ------------------------------------------------------------------ slow: the acceptance


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_space_backlog_50k_changes_10_driver_kills(kafka_bootstrap: str,
                                                   tmp_path: Path) -> None:
    scenario = space_scenario(tmp_path, ops=50_000, kills=10, seed=201)
    verdict, figures = run_kills(scenario, tmp_path, kafka_bootstrap)
    assert_exactly_once(verdict, figures, 10, 50_000)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_hazelcast_backlog_50k_changes_10_driver_kills(
        kafka_bootstrap: str, tmp_path: Path, hazelcast_service: LocalService) -> None:
    scenario = stack_hazelcast(hazelcast_service, ops=50_000, kills=10, seed=202)
    verdict, figures = run_kills(scenario, tmp_path, kafka_bootstrap)
    assert_exactly_once(verdict, figures, 10, 50_000)


def _restart_space_owner(run: Run) -> None:
    """SIGKILL the process owning the Space mid-workload and start it again."""
    run.restart_workload(kill=True)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_space_backlog_survives_restarts_of_the_space_owner(kafka_bootstrap: str,
                                                            tmp_path: Path) -> None:
    scenario = space_scenario(tmp_path, ops=20_000, kills=4, seed=203, workload_s=150,
                              faults={1: _restart_space_owner, 2: _restart_space_owner})
    verdict, figures = run_kills(scenario, tmp_path, kafka_bootstrap)
    assert figures["workload_restarts"] == 2
    assert_exactly_once(verdict, figures, 4, 20_000)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_hazelcast_backlog_survives_the_loss_of_one_member_of_two(
        kafka_bootstrap: str, tmp_path: Path, two_members: PrivateCluster) -> None:
    def lose_member(run: Run) -> None:
        assert run.workload is not None and run.workload.poll() is None, "workload ended"
        two_members.kill(2)
        run.figures["member_killed"] = 2

    scenario = hazelcast_scenario(two_members.settings.cluster_name, two_members.addresses,
                                  ops=20_000, kills=4, seed=204, workload_s=120,
                                  faults={1: lose_member})
    verdict, figures = run_kills(scenario, tmp_path, kafka_bootstrap)
    assert figures["member_killed"] == 2
    assert_exactly_once(verdict, figures, 4, 20_000)
