"""A single-node Apache Kafka broker in KRaft mode (broker + controller) on loopback."""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
import uuid
from pathlib import Path

from gridstream.errors import StackError
from gridstream.stack.service import LOOPBACK, JvmService

__all__ = ["KafkaService"]

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KafkaService(JvmService):
    name = "kafka"
    artifact_set = "kafka"
    start_timeout_s = 90.0

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.port = int(os.environ.get("GRIDSTREAM_KAFKA_PORT", "9092"))
        self.controller_port = int(os.environ.get("GRIDSTREAM_KAFKA_CONTROLLER_PORT", "9093"))
        self.heap = os.environ.get("GRIDSTREAM_KAFKA_HEAP", "768m")
        self.jvm_options = shlex.split(os.environ.get("GRIDSTREAM_KAFKA_JVM_OPTS", ""))

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def ports(self) -> list[int]:
        return [self.port, self.controller_port]

    @property
    def _config(self) -> Path:
        return self.dir / "server.properties"

    def _properties(self) -> str:
        data = self.dir / "data"
        lines = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},CONTROLLER://{LOOPBACK}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "3",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "10",
            # a transaction past its timeout is aborted within 2 s (default: 10 s), so an
            # over-long one fails promptly here, as it would on a busy production broker
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.segment.bytes": str(256 * 1024 * 1024),
            "delete.topic.enable": "true",
        }
        return "".join(f"{k}={v}\n" for k, v in lines.items())

    def prepare(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self._config.write_text(self._properties())
        (self.dir / "log4j2.properties").write_text(_LOG4J2)
        meta = self.dir / "data" / "meta.properties"
        if meta.exists():
            if "cluster.id=" not in meta.read_text(errors="replace"):
                raise StackError(
                    f"corrupted state: {meta} has no cluster.id; remove {self.dir / 'data'} "
                    "to start with an empty broker"
                )
            return
        self._format()

    def _format(self) -> None:
        from gridstream.runtime.artifacts import classpath
        from gridstream.stack import _process

        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        cmd = [
            str(_process.find_java()), "-cp", _cp(classpath(self.artifact_set)),
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.dir / 'logs'}",
            # "=": one id in 64 starts with "-", which "-t ID" hands the parser as an option
            "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
            "-c", str(self._config),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603
        if result.returncode != 0:
            out = "\n".join((result.stdout + result.stderr).splitlines()[-10:])
            raise StackError(f"kafka: formatting the log directory failed:\n{out}")

    def command(self, java: Path, jars: list[Path]) -> list[str]:
        return [
            str(java), f"-Xms{self.heap}", f"-Xmx{self.heap}", *self._gc_options(),
            "-Djava.awt.headless=true", *self.jvm_options,
            f"-Dgridstream.service={self.name}",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.dir / 'logs'}",
            "-cp", _cp(jars), "kafka.Kafka", str(self._config),
        ]

    def _gc_options(self) -> list[str]:
        """G1 with a 20 ms pause goal, unless ``GRIDSTREAM_KAFKA_JVM_OPTS`` picks a collector."""
        chosen = any(o.startswith("-XX:+Use") and o.endswith("GC") for o in self.jvm_options)
        return [] if chosen else ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]

    def healthy(self) -> bool:
        from confluent_kafka.admin import AdminClient

        from gridstream.stack._process import port_open

        if not port_open(LOOPBACK, self.port):
            return False
        admin = AdminClient({"bootstrap.servers": self.address, "log_level": 0})
        try:
            meta = admin.list_topics(timeout=2)
        except Exception:  # noqa: BLE001 - any client error means "not yet"
            return False
        return bool(meta.brokers)


def _cp(jars: list[Path]) -> str:
    return os.pathsep.join(str(j) for j in jars)
