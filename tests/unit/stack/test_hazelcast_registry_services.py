"""The Hazelcast and schema-registry services' pure parts: settings, config, command lines."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gridstream import stack
from gridstream.errors import StackError
from gridstream.stack.hazelcast import HazelcastService, HazelcastSettings
from gridstream.stack.registry import RUNNER, RegistryService, unpack_application

NS = {"hz": "http://www.hazelcast.com/schema/config"}
JAVA = Path("/usr/bin/java")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("PORT", "MEMBERS", "CLUSTER", "JOURNAL_CAPACITY", "HEAP"):
        monkeypatch.delenv(f"GRIDSTREAM_HAZELCAST_{var}", raising=False)
    monkeypatch.delenv("GRIDSTREAM_REGISTRY_PORT", raising=False)
    monkeypatch.setenv("GRIDSTREAM_HOME", str(tmp_path / "home"))


def _config(service: HazelcastService) -> ET.Element:
    return ET.fromstring(service.config_xml().encode())


def test_member_config_is_loopback_only_with_a_journal_for_every_map(tmp_path: Path) -> None:
    member = HazelcastService(tmp_path, settings=HazelcastSettings(journal_capacity=5000))
    root = _config(member)
    assert root.findtext("hz:cluster-name", namespaces=NS) == "gridstream"
    props = {p.get("name"): p.text for p in root.iterfind("hz:properties/hz:property", NS)}
    assert props["hazelcast.socket.bind.any"] == "false"
    assert props["hazelcast.phone.home.enabled"] == "false"
    net = root.find("hz:network", NS)
    assert net is not None
    port = net.find("hz:port", NS)
    assert port is not None and port.text == "5701" and port.get("auto-increment") == "false"
    assert [i.text for i in net.iterfind("hz:interfaces/hz:interface", NS)] == ["127.0.0.1"]
    join = net.find("hz:join", NS)
    assert join is not None
    assert join.find("hz:multicast", NS).get("enabled") == "false"  # type: ignore[union-attr]
    assert join.find("hz:auto-detection", NS).get("enabled") == "false"  # type: ignore[union-attr]
    assert [m.text for m in join.iterfind("hz:tcp-ip/hz:member", NS)] == ["127.0.0.1:5701"]
    (wildcard,) = root.iterfind("hz:map", NS)
    assert wildcard.get("name") == "*"
    journal = wildcard.find("hz:event-journal", NS)
    assert journal is not None and journal.get("enabled") == "true"
    assert journal.findtext("hz:capacity", namespaces=NS) == "5000"
    assert wildcard.findtext("hz:backup-count", namespaces=NS) == "1"


def test_two_members_use_consecutive_ports_and_their_own_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRIDSTREAM_HAZELCAST_MEMBERS", "2")
    monkeypatch.setenv("GRIDSTREAM_HAZELCAST_PORT", "6701")
    monkeypatch.setenv("GRIDSTREAM_HAZELCAST_JOURNAL_CAPACITY", "300")
    first, second = stack.services(["hazelcast"])
    assert isinstance(first, HazelcastService) and isinstance(second, HazelcastService)
    assert (first.address, second.address) == ("127.0.0.1:6701", "127.0.0.1:6702")
    assert first.dir != second.dir and first.pid_file != second.pid_file
    assert first.marker != second.marker
    for member in (first, second):
        root = _config(member)
        peers = [m.text for m in root.iterfind("hz:network/hz:join/hz:tcp-ip/hz:member", NS)]
        assert peers == ["127.0.0.1:6701", "127.0.0.1:6702"]
        assert root.findtext("hz:map/hz:event-journal/hz:capacity", namespaces=NS) == "300"
        argv = member.command(JAVA, [tmp_path / "hazelcast-5.6.0.jar"])
        assert member.marker in argv and f"-Dhazelcast.config={member.config_file}" in argv
        assert argv[-1] == "com.hazelcast.core.server.HazelcastMemberStarter"
        assert "--add-modules" in argv and "-Xmx512m" in argv


def test_one_member_by_default(tmp_path: Path) -> None:
    (only,) = stack.services(["hazelcast"])
    assert only.address == "127.0.0.1:5701"


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("GRIDSTREAM_HAZELCAST_MEMBERS", "0", "GRIDSTREAM_HAZELCAST_MEMBERS=0 is out of range"),
        ("GRIDSTREAM_HAZELCAST_MEMBERS", "two", "GRIDSTREAM_HAZELCAST_MEMBERS='two' is not a"),
        ("GRIDSTREAM_HAZELCAST_JOURNAL_CAPACITY", "10",
         "GRIDSTREAM_HAZELCAST_JOURNAL_CAPACITY=10 is out of range"),
        ("GRIDSTREAM_HAZELCAST_CLUSTER", "a<b", "GRIDSTREAM_HAZELCAST_CLUSTER='a<b'"),
    ],
)
def test_bad_settings_are_clear_errors(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(StackError, match=message.replace("(", r"\(")):
        stack.services(["hazelcast"])


def test_registry_command_and_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRIDSTREAM_REGISTRY_PORT", "18081")
    (registry,) = stack.services(["registry"])
    assert isinstance(registry, RegistryService)
    assert registry.url() == "http://127.0.0.1:18081/apis/ccompat/v7"
    argv = registry.command(JAVA, [tmp_path / RUNNER])
    assert "-Dquarkus.http.host=127.0.0.1" in argv and "-Dquarkus.http.port=18081" in argv
    assert registry.marker in argv and argv[-2:] == ["-jar", str(tmp_path / RUNNER)]
    assert not registry.healthy()  # nothing listens there


def _archive(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_the_distribution_is_unpacked_once(tmp_path: Path) -> None:
    _archive(tmp_path / "app.tar.gz", {RUNNER: b"jar", "lib/a.jar": b"a"})
    app = unpack_application(tmp_path)
    assert (app / RUNNER).read_bytes() == b"jar" and (app / "lib" / "a.jar").is_file()
    (app / "lib" / "a.jar").write_bytes(b"kept")
    assert unpack_application(tmp_path) == app
    assert (app / "lib" / "a.jar").read_bytes() == b"kept"


def test_a_distribution_without_the_runner_is_refused(tmp_path: Path) -> None:
    _archive(tmp_path / "app.tar.gz", {"README": b"x"})
    with pytest.raises(StackError, match=f"holds no {RUNNER}"):
        unpack_application(tmp_path)
    assert not (tmp_path / "app").exists()


def test_an_archive_escaping_its_folder_is_refused(tmp_path: Path) -> None:
    _archive(tmp_path / "app.tar.gz", {"../evil": b"x", RUNNER: b"jar"})
    with pytest.raises(StackError, match="cannot unpack"):
        unpack_application(tmp_path)
    assert not (tmp_path.parent / "evil").exists()


def test_running_members_beyond_the_configured_count_are_listed_and_stopped(
    tmp_path: Path,
) -> None:
    """``status`` and ``down`` cover every running member, whatever the member count says."""
    third = HazelcastService(tmp_path / "home", 3)
    third.dir.mkdir(parents=True)
    stand_in = subprocess.Popen(  # a process carrying member 3's marker
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)",
         third.marker],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        assert stand_in.stdout is not None
        assert stand_in.stdout.readline() == "ready\n"  # exec'd: its command line is final
        third.pid_file.write_text(str(stand_in.pid))
        members = stack.services(["hazelcast"])
        assert [m.address for m in members] == [f"127.0.0.1:{p}" for p in (5701, 5702, 5703)]
        assert [m.status().state for m in members[:2]] == ["down", "down"]
        assert members[2].status().pid == stand_in.pid
        members[2].down()  # SIGTERM; it may still be exiting when down() returns
        stand_in.wait(timeout=10)  # raises TimeoutExpired if the signal did not end it
        assert not third.pid_file.exists()
        assert len(stack.services(["hazelcast"])) == 1
    finally:
        if stand_in.poll() is None:
            stand_in.kill()
            stand_in.wait()
        if stand_in.stdout is not None:
            stand_in.stdout.close()
