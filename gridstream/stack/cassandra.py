"""A single-node Apache Cassandra on loopback, sized for a small machine."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from gridstream.stack.service import LOOPBACK, JvmService

__all__ = ["CassandraService"]

# From Cassandra's own jvm17-server.options: the module flags it needs on Java 17.
_JAVA17_FLAGS = [
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
]

_LOGBACK = """\
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${cassandra.logdir}/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE" /></root>
</configuration>
"""


class CassandraService(JvmService):
    name = "cassandra"
    artifact_set = "cassandra"
    start_timeout_s = 180.0

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.port = int(os.environ.get("GRIDSTREAM_CASSANDRA_PORT", "9042"))
        self.storage_port = int(os.environ.get("GRIDSTREAM_CASSANDRA_STORAGE_PORT", "7000"))
        self.heap = os.environ.get("GRIDSTREAM_CASSANDRA_HEAP", "1g")

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def ports(self) -> list[int]:
        return [self.port, self.storage_port]

    def _yaml(self) -> str:
        data = self.dir / "data"
        return f"""\
cluster_name: gridstream
num_tokens: 16
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
commitlog_sync: periodic
commitlog_sync_period: 10000ms
data_file_directories: [{data / 'data'}]
commitlog_directory: {data / 'commitlog'}
saved_caches_directory: {data / 'saved_caches'}
hints_directory: {data / 'hints'}
cdc_raw_directory: {data / 'cdc_raw'}
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{LOOPBACK}:{self.storage_port}"
listen_address: {LOOPBACK}
rpc_address: {LOOPBACK}
storage_port: {self.storage_port}
native_transport_port: {self.port}
start_native_transport: true
endpoint_snitch: SimpleSnitch
storage_compatibility_mode: NONE
concurrent_compactors: 1
concurrent_reads: 8
concurrent_writes: 16
memtable_heap_space: 128MiB
memtable_offheap_space: 128MiB
key_cache_size: 16MiB
sasi_indexes_enabled: true
materialized_views_enabled: false
"""

    def prepare(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        (self.dir / "cassandra.yaml").write_text(self._yaml())
        (self.dir / "logback.xml").write_text(_LOGBACK)

    def command(self, java: Path, jars: list[Path]) -> list[str]:
        jamm = [j for j in jars if j.name.startswith("jamm-")]
        agent = [f"-javaagent:{jamm[0]}"] if jamm else []
        return [
            str(java), f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseG1GC",
            "-XX:+ParallelRefProcEnabled", "-XX:MaxTenuringThreshold=1",
            "-XX:+HeapDumpOnOutOfMemoryError", "-Xss256k",
            *_JAVA17_FLAGS, *agent,
            f"-Dgridstream.service={self.name}",
            f"-Dcassandra.config=file://{self.dir / 'cassandra.yaml'}",
            f"-Dcassandra.logdir={self.dir / 'logs'}",
            f"-Dcassandra.storagedir={self.dir / 'data'}",
            f"-Dlogback.configurationFile={self.dir / 'logback.xml'}",
            "-Dcassandra-foreground=yes",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            "-Dcassandra.ring_delay_ms=1000",
            "-Dcassandra.superuser_setup_delay_ms=0",
            "-Dcassandra.jmx.local.port=7199",
            "-cp", os.pathsep.join(str(j) for j in jars),
            "org.apache.cassandra.service.CassandraDaemon",
        ]

    def healthy(self) -> bool:
        return cql_ready(LOOPBACK, self.port)


def cql_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the native protocol answers an OPTIONS request with SUPPORTED."""
    options = struct.pack(">BBhBi", 0x04, 0, 0, 0x05, 0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(options)
            header = sock.recv(9)
    except OSError:
        return False
    return len(header) == 9 and header[4] == 0x06
