"""Open-source Hazelcast members on loopback: one by default, a small cluster on request.

Every member binds 127.0.0.1 only, joins its peers through a TCP/IP member list of
loopback addresses (multicast and auto-detection off), never phones home, and keeps an
event journal for every map (the change feed gridstream reads).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from gridstream._optional import require
from gridstream.errors import NotInstalledError, StackError
from gridstream.stack import _process
from gridstream.stack._settings import env_int
from gridstream.stack.service import LOOPBACK, JvmService, LocalService

__all__ = ["HazelcastService", "HazelcastSettings", "member_accepts_client"]

MAX_MEMBERS = 9
PARTITIONS = 271
"""Hazelcast's default partition count: the journal holds at least one event per partition."""

# Java 17 module flags a Hazelcast member needs (its own start scripts pass the same).
_JAVA17_FLAGS = [
    "--add-modules", "java.se",
    "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.management/sun.management=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
]
_DEFAULT_PORT = 5701
_DEFAULT_CLUSTER = "gridstream"
_DEFAULT_JOURNAL = 100_000
_DEFAULT_HEAP = "512m"
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True)
class HazelcastSettings:
    """The cluster's settings, from ``GRIDSTREAM_HAZELCAST_*`` environment variables."""

    port: int = _DEFAULT_PORT
    members: int = 1
    cluster_name: str = _DEFAULT_CLUSTER
    journal_capacity: int = _DEFAULT_JOURNAL
    heap: str = _DEFAULT_HEAP

    @classmethod
    def from_env(cls) -> HazelcastSettings:
        cluster = os.environ.get("GRIDSTREAM_HAZELCAST_CLUSTER") or _DEFAULT_CLUSTER
        if not _CLUSTER_NAME.fullmatch(cluster):
            raise StackError(
                f"GRIDSTREAM_HAZELCAST_CLUSTER={cluster!r}: use 1 to 64 letters, digits, "
                "'_', '.' or '-'"
            )
        return cls(
            port=env_int("GRIDSTREAM_HAZELCAST_PORT", _DEFAULT_PORT, 1024, 65535 - MAX_MEMBERS),
            members=env_int("GRIDSTREAM_HAZELCAST_MEMBERS", 1, 1, MAX_MEMBERS),
            cluster_name=cluster,
            journal_capacity=env_int(
                "GRIDSTREAM_HAZELCAST_JOURNAL_CAPACITY", _DEFAULT_JOURNAL,
                PARTITIONS, 2**31 - 1,
            ),
            heap=os.environ.get("GRIDSTREAM_HAZELCAST_HEAP") or _DEFAULT_HEAP,
        )

    def member_port(self, member: int) -> int:
        return self.port + member - 1


class HazelcastService(JvmService):
    """One member of the local cluster; member ``n`` listens on ``port + n - 1``."""

    name = "hazelcast"
    artifact_set = "hazelcast"
    start_timeout_s = 120.0

    def __init__(
        self, home: Path, member: int = 1, *, settings: HazelcastSettings | None = None,
        cluster_size: int | None = None,
    ) -> None:
        super().__init__(home)
        self.settings = settings or HazelcastSettings.from_env()
        if not 1 <= member <= MAX_MEMBERS:
            raise StackError(f"hazelcast: member {member} is out of range (1..{MAX_MEMBERS})")
        self.member = member
        self.cluster_size = max(cluster_size or self.settings.members, member)
        self.port = self.settings.member_port(member)
        self.dir = home / "services" / self.name / f"member-{member}"
        self.pid_file = self.dir / f"{self.name}.pid"
        self.log_file = self.dir / "logs" / f"{self.name}.out"

    @classmethod
    def instances(cls, home: Path) -> list[LocalService]:
        """Members 1..N: N is ``GRIDSTREAM_HAZELCAST_MEMBERS`` or the highest running one."""
        settings = HazelcastSettings.from_env()
        running = [
            m for m in range(1, MAX_MEMBERS + 1)
            if cls(home, m, settings=settings)._pid() is not None
        ]
        size = max([settings.members, *running])
        return [cls(home, m, settings=settings, cluster_size=size) for m in range(1, size + 1)]

    @property
    def marker(self) -> str:
        suffix = "" if self.member == 1 else f"-{self.member}"
        return _process.jvm_marker(f"{self.name}{suffix}")

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def ports(self) -> list[int]:
        return [self.port]

    @property
    def config_file(self) -> Path:
        return self.dir / "hazelcast.xml"

    def config_xml(self) -> str:
        """The member's configuration (every peer of the cluster is listed)."""
        s = self.settings
        peers = "\n".join(
            f"        <member>{LOOPBACK}:{s.member_port(m)}</member>"
            for m in range(1, self.cluster_size + 1)
        )
        return f"""\
<?xml version="1.0" encoding="UTF-8"?>
<hazelcast xmlns="http://www.hazelcast.com/schema/config">
  <cluster-name>{escape(s.cluster_name)}</cluster-name>
  <properties>
    <property name="hazelcast.phone.home.enabled">false</property>
    <property name="hazelcast.socket.bind.any">false</property>
    <property name="hazelcast.logging.type">jdk</property>
    <property name="hazelcast.wait.seconds.before.join">1</property>
  </properties>
  <network>
    <port auto-increment="false" port-count="1">{self.port}</port>
    <interfaces enabled="true">
      <interface>{LOOPBACK}</interface>
    </interfaces>
    <join>
      <auto-detection enabled="false"/>
      <multicast enabled="false"/>
      <tcp-ip enabled="true" connection-timeout-seconds="2">
{peers}
      </tcp-ip>
    </join>
  </network>
  <jet enabled="true" resource-upload-enabled="false"/>
  <map name="*">
    <backup-count>1</backup-count>
    <event-journal enabled="true">
      <capacity>{s.journal_capacity}</capacity>
      <time-to-live-seconds>0</time-to-live-seconds>
    </event-journal>
  </map>
</hazelcast>
"""

    def prepare(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(self.config_xml())

    def command(self, java: Path, jars: list[Path]) -> list[str]:
        heap = self.settings.heap
        return [
            str(java), f"-Xms{heap}", f"-Xmx{heap}", *_JAVA17_FLAGS,
            "-Djava.net.preferIPv4Stack=true", "-Djava.awt.headless=true",
            self.marker,
            f"-Dhazelcast.config={self.config_file}",
            "-cp", os.pathsep.join(str(j) for j in jars),
            "com.hazelcast.core.server.HazelcastMemberStarter",
        ]

    def healthy(self) -> bool:
        if not _process.port_open(LOOPBACK, self.port):
            return False
        return member_accepts_client(self.settings.cluster_name, self.address)


def member_accepts_client(cluster_name: str, address: str, timeout_s: float = 5.0) -> bool:
    """True when the member at ``address`` admits a client of ``cluster_name`` within
    about ``timeout_s`` (twice that at most: a member that takes the connection but never
    answers — e.g. stuck in garbage collection — holds the client's connect past its own
    timeout, so the check runs in a daemon thread and is given up on)."""
    try:
        HazelcastClient = require("hazelcast.client",  # noqa: N806
                                  "the Hazelcast service").HazelcastClient
    except NotInstalledError as exc:  # a StackError: the member just started is stopped
        raise StackError(str(exc)) from exc
    answer: list[bool] = []

    def check() -> None:
        try:
            client = HazelcastClient(
                cluster_name=cluster_name, cluster_members=[address], smart_routing=False,
                cluster_connect_timeout=timeout_s,
            )
        except Exception:  # noqa: BLE001 - any failure to connect means "not yet"
            answer.append(False)
            return
        try:
            answer.append(bool(client.cluster_service.get_members()))
        finally:
            client.shutdown()

    thread = threading.Thread(target=check, name="gridstream-hazelcast-health", daemon=True)
    thread.start()
    thread.join(2 * timeout_s)
    return bool(answer) and answer[0]
