"""What is checked before a flow of a run file starts, so that a missing service or input
is one clear line, not a Java trace after the first batch's timeout.

For each flow, before its query starts (and again before each restart):

- the Kafka cluster it reads or writes answers (``StackError``: transient, restarted);
- the topics it reads exist; a topic that another flow of the same file writes (its
  source creates it with its first record) is ``NotYet``: the runner waits, checking
  every few seconds, as long as it takes; a topic nobody in the file writes is waited
  for ``wait_for_inputs_s`` (another application may create it), and said so;
- a Hazelcast member of its grid answers (``GridError``: transient);
- a Space it reads exists (``ConfigError``: permanent, with what to do).

A flow's checkpoint is checked by the flow itself (``gridstream.spark.owner``: a
checkpoint of another flow or kind fails at once, naming its owner).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gridstream.errors import ConfigError, GridError, StackError
from gridstream.ops.failures import NotYet

__all__ = ["Preflight", "kafka_of"]



def kafka_of(flow: Any) -> tuple[str, dict[str, Any]] | None:
    """The bootstrap servers and client properties (secrets revealed: never print them)
    a flow's Kafka clients use."""
    servers = getattr(flow, "bootstrap_servers", None)
    if isinstance(servers, str):
        properties = getattr(flow, "kafka_properties", None) or {}
        reveal = getattr(properties, "client_config", None)  # KafkaProperties hides them
        return servers, dict(reveal() if callable(reveal) else properties)
    for part in (getattr(flow, "source", None), getattr(flow, "sink", None)):
        servers = getattr(part, "bootstrap", None)
        if isinstance(servers, str):
            client = getattr(part, "client", None)
            return servers, (client.client_config() if client is not None else {})
    return None


def _grids_of(flow: Any) -> list[tuple[str, Any]]:
    """(role, grid settings) of the grids a flow reads ("source") or writes ("sink")."""
    grids = []
    config = getattr(flow, "config", None)
    grid = getattr(config, "grid", None)
    if grid is not None:
        grids.append((getattr(config, "kind", "sink"), grid))
    for role in ("source", "sink"):
        part = getattr(flow, role, None)
        grid = getattr(part, "grid", None)
        if grid is not None:
            grids.append((role, grid))
    return grids


class Preflight:
    """The checks of one run file; ``check(flow)`` before each start of a flow."""

    def __init__(self, flows: Sequence[Any], timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s
        self._writers: list[tuple[str, str]] = []
        """(topic or topic pattern, flow) of every topic a flow of the file writes."""
        for flow in flows:
            endpoints = getattr(flow, "endpoints", None)
            for node in (endpoints()[1] if endpoints is not None else []):
                if node.startswith("kafka:"):
                    self._writers.append((node.removeprefix("kafka:"), flow.name))

    def _writer_of(self, topic: str) -> str | None:
        for pattern, flow in self._writers:
            try:
                if pattern == topic or re.fullmatch(pattern, topic):
                    return flow
            except re.error:
                continue
        return None

    def check(self, flow: Any) -> None:
        kafka = kafka_of(flow)
        if kafka is not None:
            self._kafka(flow, *kafka)
        for role, grid in _grids_of(flow):
            if grid.kind == "hazelcast":
                self._hazelcast(grid)
            elif role == "source":
                self._space(grid)

    def _kafka(self, flow: Any, servers: str, properties: dict[str, Any]) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        from gridstream.kafka.config import client_config, scrub

        config: dict[str, str | int | float | bool] = {
            **client_config(servers, properties),
            "log_level": 0}  # no lines of its own
        try:
            admin = AdminClient(config)
        except (KafkaException, ValueError, TypeError):
            return  # properties only Java's client takes (JAAS): not checked from here
        try:
            topics = set(admin.list_topics(timeout=self.timeout_s).topics)
        except (KafkaException, ValueError, TypeError) as exc:
            raise StackError(f"Kafka at {servers} does not answer ({scrub(str(exc), config)}): "
                             "start it (gridstream stack up --services kafka) or fix "
                             "bootstrap_servers") from None
        endpoints = getattr(flow, "endpoints", None)
        reads = endpoints()[0] if endpoints is not None else []
        missing = sorted(node.removeprefix("kafka:") for node in reads
                         if node.startswith("kafka:") and not node.endswith("/")
                         and node.removeprefix("kafka:") not in topics)
        if not missing:
            return
        writers = sorted({w for w in map(self._writer_of, missing) if w is not None}
                         - {flow.name})
        them = "them" if len(missing) > 1 else "it"
        who = (f"{', '.join(writers)} (this file) creates {them}" if writers
               else f"no flow of this file writes {them}: create {them}, or start what does")
        raise NotYet(f"waiting for topic{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(missing)} at {servers}: {who}", created_here=bool(writers))

    def _hazelcast(self, grid: Any) -> None:
        from gridstream.stack._process import port_open

        for member in grid.members:
            host, _, port = member.rpartition(":")
            if not host or not port.isdigit():
                host, port = member, "5701"
            if port_open(host.strip("[]"), int(port), timeout=min(self.timeout_s, 2.0)):
                return
        raise GridError(f"no Hazelcast member answers at {', '.join(grid.members)}: start "
                        "one (gridstream stack up --services hazelcast) or fix grid.members")

    @staticmethod
    def _space(grid: Any) -> None:
        if not (Path(grid.data_dir) / "space.json").exists():
            raise ConfigError(f"no Space in {grid.data_dir} (no space.json): a Space source "
                              "reads a Space that its application created; fix "
                              "grid.data_dir, or create it (the examples' Space: python "
                              "examples/seed_space.py)")

