"""A schema registry on loopback: Apicurio Registry with in-memory storage.

Clients use its Confluent-compatible API (``/apis/ccompat/v7``), e.g. confluent-kafka's
``SchemaRegistryClient``. Schemas live in memory: a restart starts empty.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

from gridstream.errors import StackError
from gridstream.runtime.artifacts import ensure_artifacts
from gridstream.stack import _process
from gridstream.stack._settings import env_int
from gridstream.stack.service import LOOPBACK, JvmService

__all__ = ["RegistryService", "unpack_application"]

VERSION = "3.0.9"
RUNNER = f"apicurio-registry-app-{VERSION}-runner.jar"
CCOMPAT_PATH = "/apis/ccompat/v7"
_UNPACKED = "app"
_MARKER = ".unpacked"

# Settings that keep the registry local and quiet: in-memory storage, no authentication
# server, no event sink, no UI.
_QUARKUS_FLAGS = [
    "-Dapicurio.storage.kind=sql",
    "-Dapicurio.storage.sql.kind=h2",
    "-Dquarkus.oidc.tenant-enabled=false",
    "-Dapicurio.authn.enabled=false",
    "-Dapicurio.events.ksink=",
    "-Dapicurio.ui.enabled=false",
    "-Dquarkus.http.access-log.enabled=false",
]


class RegistryService(JvmService):
    name = "registry"
    artifact_set = "registry"
    start_timeout_s = 120.0

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.port = env_int("GRIDSTREAM_REGISTRY_PORT", 8081, 1024, 65535)
        self.heap = os.environ.get("GRIDSTREAM_REGISTRY_HEAP", "512m")

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def url(self) -> str:
        """The Confluent-compatible API clients use."""
        return f"http://{self.address}{CCOMPAT_PATH}"

    def ports(self) -> list[int]:
        return [self.port]

    def prepare(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)

    def argv(self) -> list[str]:
        app = unpack_application(ensure_artifacts(self.artifact_set))
        return self.command(_process.find_java(), [app / RUNNER])

    def command(self, java: Path, jars: list[Path]) -> list[str]:
        (runner,) = jars
        return [
            str(java), f"-Xms{self.heap}", f"-Xmx{self.heap}", "-Djava.awt.headless=true",
            f"-Dgridstream.service={self.name}",
            f"-Djava.io.tmpdir={self.dir / 'tmp'}",
            f"-Dquarkus.http.host={LOOPBACK}", f"-Dquarkus.http.port={self.port}",
            *_QUARKUS_FLAGS,
            "-jar", str(runner),
        ]

    def healthy(self) -> bool:
        """True when the Confluent-compatible API lists subjects."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"{self.url()}/subjects", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False


def unpack_application(artifacts: Path) -> Path:
    """Unpack the registry's distribution archive once, next to it; return the folder."""
    target = artifacts / _UNPACKED
    if (target / _MARKER).is_file() and (target / RUNNER).is_file():
        return target
    archives = sorted(artifacts.glob("*.tar.gz"))
    if len(archives) != 1:
        raise StackError(
            f"registry: expected one distribution archive in {artifacts}, found {len(archives)}"
        )
    staging = artifacts / f"{_UNPACKED}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with tarfile.open(archives[0]) as archive:
            archive.extractall(staging, filter="data")
    except (tarfile.TarError, OSError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise StackError(f"registry: cannot unpack {archives[0]}: {exc}") from exc
    if not (staging / RUNNER).is_file():
        shutil.rmtree(staging, ignore_errors=True)
        raise StackError(f"registry: {archives[0]} holds no {RUNNER}")
    (staging / _MARKER).write_text(archives[0].name + "\n")
    shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # another process unpacked it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / _MARKER).is_file():
            raise
    return target
