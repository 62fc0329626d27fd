"""The source connector under hard kills: one run of a workload, a connector whose Spark
driver is SIGKILLed at random moments and started again from its checkpoint, optional
grid faults, and the check of its topics (``connect_plan.check``)."""

from __future__ import annotations

import logging
import random
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.support.connect_harness import (
    Child,
    TopicReader,
    caught_up,
    delete_topics,
    grid_state,
    ready_checkpoint,
    start_connector,
    start_workload,
    write_json,
)
from tests.integration.support.connect_plan import (
    Verdict,
    check,
    expected_tokens,
    final_state,
    plan,
)

log = logging.getLogger(__name__)

Fault = Callable[["Run"], None]
"""Done once, between two connector runs (``Run.fault_at``), with the connector running."""


@dataclass
class Scenario:
    grid: dict[str, Any]
    """The connector's ``grid`` option."""
    workload_grid: dict[str, Any]
    """The workload's grid options (``connect_workload``)."""
    adapter: Callable[[], Any]
    """An unopened grid adapter, to read the final state."""
    ops: int
    kills: int
    seed: int
    keys_per_cache: int = 400
    caches: int = 4
    kill_delay_s: tuple[float, float] = (3.0, 30.0)
    """A kill comes this long (uniform, seeded) after the driver's Spark session is up."""
    after_batch_share: float = 0.5
    """The share of kills timed from the run's first batch line instead (most runs are
    killed before a batch completes otherwise: a restarted driver re-runs the batch in
    flight, which takes most of the startup delay)."""
    after_batch_delay_s: tuple[float, float] = (0.0, 4.0)
    faults: dict[int, Fault] = field(default_factory=dict)
    """Connector run number → a grid fault done during that run."""
    catch_up_s: float = 900
    workload_s: float | None = None
    """How long the workload's changes are spread over (default: 20 s per kill)."""


@dataclass
class Run:
    scenario: Scenario
    tmp: Path
    bootstrap: str
    caches: list[str]
    workload_config: dict[str, Any]
    workload: Child | None = None
    connector: Child | None = None
    workload_restarts: int = 0
    runs_with_batches: int = 0
    """Connector runs killed after at least one batch of theirs was reported."""
    figures: dict[str, Any] = field(default_factory=dict)

    def restart_workload(self, kill: bool = True) -> None:
        """Kill (or let finish) the workload's process and start it again where it was."""
        assert self.workload is not None
        assert self.workload.poll() is None, "the workload ended before its process's restart"
        if kill:
            self.workload.kill()
        first = self.workload.last_op + 1
        config = {**self.workload_config, "first": first, "hold": None}
        path = write_json(self.tmp / f"workload-{self.workload_restarts + 1}.json", config)
        self.workload_restarts += 1
        log.warning("workload restarted at op %d", first)
        self.workload = start_workload(path, self.tmp / "workload.log")


def run_kills(scenario: Scenario, tmp: Path, bootstrap: str) -> tuple[Verdict, dict[str, Any]]:
    """Run the scenario; the checker's verdict and the figures (also printed)."""
    tag = uuid.uuid4().hex[:8]
    caches = [f"Kill{tag}c{i}" for i in range(scenario.caches)]
    prefix = f"gs-src-{tag}-"
    topics = {prefix + cache: cache for cache in caches}
    ops = plan(scenario.seed, scenario.ops, caches, scenario.keys_per_cache)
    rng = random.Random(scenario.seed)
    hold = tmp / "go"
    spread = scenario.workload_s or max(20.0, scenario.kills * 20.0)
    workload_config = {**scenario.workload_grid, "caches": caches, "seed": scenario.seed,
                       "ops": scenario.ops, "keys_per_cache": scenario.keys_per_cache,
                       "rate": scenario.ops / spread, "hold": str(hold)}
    run = Run(scenario, tmp, bootstrap, caches, workload_config)
    connector_config = write_json(tmp / "connector.json", {
        "bootstrap_servers": bootstrap,
        "connector": {
            "name": f"kills-{tag}", "grid": scenario.grid,
            "checkpoint": str(tmp / "checkpoint"), "failoverPolicy": "BACKLOG",
            "shallProcessRemovals": True, "shallLoadInitialData": True,
            "cacheWhitelist": [re.escape(c) for c in caches], "topicPrefix": prefix,
            "topic.creation.default.partitions": 2, "pollInterval": 500,
            "cacheListPollInterval": 1000, "batchSize": 5000,
        },
    })
    started = time.monotonic()
    reader = TopicReader(bootstrap, topics)
    print(f"seed {scenario.seed}: {scenario.ops} changes over {caches}, "
          f"{scenario.kills} kills, delays {scenario.kill_delay_s}", flush=True)
    try:
        run.workload = start_workload(write_json(tmp / "workload.json", workload_config),
                                      tmp / "workload.log")
        run.workload.wait_for(lambda line: line.startswith("caches ready"))
        run.connector = start_connector(connector_config, tmp / "connector.log")
        reader.assign()
        ready_checkpoint(reader, caches, alive=lambda: _alive(run.connector))
        hold.touch()
        delays: list[str] = []
        for number in range(scenario.kills):
            assert run.connector is not None
            run.connector.wait_for(lambda line: line.startswith("spark ready"))
            if rng.random() < scenario.after_batch_share:
                # after this run's first batch: most likely inside one planned after it
                run.connector.wait_for(lambda line: " batch " in line)
                delay = rng.uniform(*scenario.after_batch_delay_s)
                delays.append(f"batch+{delay:.2f}")
            else:
                delay = rng.uniform(*scenario.kill_delay_s)
                delays.append(f"{delay:.2f}")
            fault = scenario.faults.get(number)
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline:
                _alive(run.connector)
                reader.poll(0.2)
                if fault is not None:
                    fault(run)
                    fault = None
            run.connector.kill()
            run.runs_with_batches += any(" batch " in line for line in run.connector.seen)
            run.connector = start_connector(connector_config, tmp / "connector.log")
        print(f"kill delays (s after the session is up, or after a batch): {delays}",
              flush=True)
        _finish_workload(run)
        final_grid = grid_state(scenario.adapter, caches)
        planned = {slot: value for slot, value in final_state(ops).items()
                   if value is not None}
        assert {k: dict(v) for k, v in final_grid.items()} == planned, \
            "the grid does not hold what the workload made"
        final = {slot: final_grid.get(slot) for slot in final_state(ops)}
        deadline = time.monotonic() + scenario.catch_up_s
        while lagging := caught_up(reader, final):
            _alive(run.connector)
            assert time.monotonic() < deadline, (
                f"not caught up after {scenario.catch_up_s}s: {len(lagging)} keys behind, "
                f"e.g. {lagging[:5]}")
            reader.poll(1)
        caught = time.monotonic() - started
        assert run.connector is not None
        run.connector.stop()
        reader.close()
        reader = TopicReader(bootstrap, topics)
        reader.assign()
        reader.read_to_end()
        verdict = check(expected_tokens(ops), final, reader.records)
        figures = {"grid": scenario.grid["kind"], "seed": scenario.seed,
                   "kills": scenario.kills, "workload_restarts": run.workload_restarts,
                   "killed_runs_with_batches": run.runs_with_batches,
                   "changes": len(ops), "records_read": reader.count,
                   "missing": len(verdict.missing), "duplicates": len(verdict.duplicates),
                   "out_of_order": len(verdict.out_of_order),
                   "unexpected": len(verdict.unexpected),
                   "final_mismatches": len(verdict.final_mismatch),
                   "caught_up_s": round(caught, 1),
                   "wall_s": round(time.monotonic() - started, 1), **run.figures}
        print(f"figures: {figures}", flush=True)
        log.warning("figures: %s", figures)
        return verdict, figures
    finally:
        for child in (run.connector, run.workload):
            if child is not None:
                child.kill()
        reader.close()
        delete_topics(bootstrap, topics)


def _alive(connector: Child | None) -> None:
    assert connector is not None
    code = connector.poll()
    assert code is None, f"the connector ended by itself ({code}):\n{connector.tail()}"


def _finish_workload(run: Run) -> None:
    """Wait for the workload to make its last change (restarting it if it was killed)."""
    assert run.workload is not None
    deadline = time.monotonic() + 1800
    while True:
        _alive(run.connector)
        code = run.workload.poll()
        if code is not None:
            assert code == 0, f"the workload failed ({code}):\n{run.workload.tail()}"
            assert any(line.startswith("finished") for line in run.workload.seen)
            return
        assert time.monotonic() < deadline, "the workload did not finish"
        time.sleep(0.5)
