"""The status page in a real browser (headless Chromium, installed by the test bootstrap):
it draws the topology and shows each flow's live numbers, errors and snapshot progress
from ``/status``. A monitor fed as the runner feeds it stands behind the page; a
screenshot is saved (``GRIDSTREAM_SCREENSHOT`` names the file, default in tmp)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gridstream.ops.counts import BatchCounts
from gridstream.ops.server import StatusServer
from gridstream.ops.status import Monitor


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no Chromium: scripts/bootstrap.sh --tests installs Debian's "
                         "chromium (apt-get install chromium)")


def _browser(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--virtual-time-budget=5000", "--window-size=1400,800", *args, url],
        capture_output=True, text=True, timeout=120, check=False)


def _monitor() -> Monitor:
    monitor = Monitor()
    monitor.log_file = "/var/log/gridstream/run-demo.log"
    monitor.add("hz-source", "source connector", "hz-source: hazelcast → kafka",
                (["hazelcast:people"], ["kafka:hz.people"]))
    monitor.add("evens", "pipeline", "pipeline evens", (["kafka:hz.people"], ["kafka:evens"]))
    monitor.add("back", "sink connector", "back: kafka → hazelcast",
                (["kafka:evens"], ["hazelcast:copy_evens"]))
    for name in ("hz-source", "evens", "back"):
        monitor.state(name, "running")
    monitor.batch("hz-source", BatchCounts(1234, 1234, seconds=0.4))
    monitor.batch("evens", BatchCounts(1234, 617, filtered=617, seconds=0.3))
    progress = {"sources": [{"endOffset": {"evens": {"0": 300}},
                             "latestOffset": {"evens": {"0": 342}}}]}
    monitor.progress("back", progress)
    monitor.progress("hz-source", {"sources": [{"endOffset": '{"caches": {"people": '
                                                '{"row": 1234, "rows": 5000}}}'}]})
    monitor.state("back", "failed", "RecordError: evens[0]@301: convert: value is not JSON")
    now = time.time()
    for name, rate in (("hz-source", 1000), ("evens", 500)):  # the last minute, for the lines
        history = monitor.flow(name).history
        history.clear()
        history.extend((now - 60 + s, rate * s + (s % 7) * 40, (s * 37) % 90)
                       for s in range(0, 61, 2))
    return monitor


def test_the_page_shows_the_topology_and_live_numbers(tmp_path: Path) -> None:
    monitor = _monitor()
    server = StatusServer(monitor, 0)
    try:
        dom = _browser(server.url + "/", "--dump-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        html = dom.stdout
        assert "data-updated" in html, html[:3000]  # the script ran and rendered

        def cell(flow: str, field: str) -> str:
            row = re.search(rf'<tr class="\w+" data-flow="{flow}">(.*?)</tr>', html, re.S)
            assert row is not None, (flow, html[:3000])
            found = re.search(rf'data-field="{field}">([^<]*)<', row.group(1))
            assert found is not None, (flow, field, row.group(1))
            return found.group(1)

        assert cell("hz-source", "read") == "1234" and cell("hz-source", "written") == "1234"
        assert cell("evens", "written") == "617" and cell("evens", "filtered") == "617"
        assert cell("back", "lag") == "42" and cell("back", "state") == "failed"
        assert ('data-error="back">back: FAILED: RecordError: evens[0]@301: convert: value '
                'is not JSON<') in html
        assert 'data-snapshot="hz-source/people">hz-source: snapshot of people: 1234 rows' in html
        assert "failed: back" in html  # the health badge
        for node in ("hazelcast:people", "kafka:hz.people", "evens", "kafka:evens",
                     "hazelcast:copy_evens"):
            assert f'data-node="{node}"' in html, node
        monitor.batch("evens", BatchCounts(10, 5, filtered=5, seconds=0.1))
        again = _browser(server.url + "/", "--dump-dom").stdout
        assert re.search(r'data-flow="evens">.*?data-field="read">1244<', again, re.S)
        shot = Path(os.environ.get("GRIDSTREAM_SCREENSHOT", str(tmp_path / "status.png")))
        taken = _browser(server.url + "/", f"--screenshot={shot}")
        assert taken.returncode == 0 and shot.stat().st_size > 10_000, taken.stderr[-2000:]
    finally:
        server.close()


@pytest.mark.parametrize("path", ["/metrics", "/status", "/healthz", "/nope"])
def test_every_path_answers(path: str) -> None:
    import urllib.error
    import urllib.request

    monitor = _monitor()
    server = StatusServer(monitor, 0)
    try:
        try:
            with urllib.request.urlopen(server.url + path, timeout=10) as answer:  # noqa: S310
                code, body = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            code, body = exc.code, exc.read()
    finally:
        server.close()
    expected = {"/metrics": 200, "/status": 200, "/healthz": 503, "/nope": 404}[path]
    assert code == expected, body[:500]
    if path == "/metrics":
        assert b'gridstream_flow_lag_records{flow="back",source="evens/0"} 42.0' in body
