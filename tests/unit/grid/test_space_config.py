"""The Space adapter's config and lifecycle: picklable, checked, nothing opened early."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import pytest

from gridstream.errors import ConfigError, GridError, SpaceError
from gridstream.grid import CacheEvent, Position
from gridstream.grid.space import SpaceAdapter, SpaceGridConfig
from gridstream.model import SpaceDocument
from gridstream.space import EmbeddedLogReader, Space


def test_the_config_pickles_and_is_checked() -> None:
    config = SpaceGridConfig("/data/space", "orders", writable=True, source="kafka")
    assert pickle.loads(pickle.dumps(config)) == config
    for bad in ({"data_dir": ""}, {"space_name": ""}, {"source": ""}, {"id_property": ""},
                {"poll_interval_s": 0}):
        with pytest.raises(ConfigError):
            SpaceGridConfig(**{"data_dir": "/d", "space_name": "n", **bad})  # type: ignore[arg-type]


def test_nothing_is_opened_before_open(tmp_path: Path) -> None:
    adapter = SpaceAdapter(SpaceGridConfig(str(tmp_path / "missing"), "s"))
    assert not (tmp_path / "missing").exists()
    with pytest.raises(GridError, match="not open"):
        adapter.list_caches()
    with pytest.raises(GridError, match="holds no space"):
        adapter.open()
    writable = SpaceAdapter(SpaceGridConfig(str(tmp_path / "new"), "s", writable=True))
    assert not (tmp_path / "new").exists()
    with writable:
        assert writable.list_caches() == []
    assert (tmp_path / "new" / "space.json").exists()


def test_close_stops_the_watchers(tmp_path: Path) -> None:
    with Space.embedded("s", data_dir=tmp_path, fsync="never") as space:
        adapter = SpaceAdapter(SpaceGridConfig(str(tmp_path), "s", poll_interval_s=0.01),
                               space=space)
        adapter.open()
        events: list[CacheEvent] = []
        seen = threading.Event()

        def listener(event: CacheEvent) -> None:
            events.append(event)
            seen.set()

        adapter.watch_caches(listener)
        space.write(SpaceDocument("A", {"id": 1}))
        assert seen.wait(10)
        adapter.close()
        space.write(SpaceDocument("B", {"id": 1}))
        assert not any(t.name.startswith("gridstream-space-watch") and t.is_alive()
                       for t in threading.enumerate())
        assert events == [CacheEvent("created", "A")]


def test_bad_arguments_are_config_errors(tmp_path: Path) -> None:
    with Space.embedded("s", data_dir=tmp_path, fsync="never") as space, \
            SpaceAdapter(SpaceGridConfig(str(tmp_path), "s"), space=space) as adapter:
        end = adapter.end_position("A")
        with pytest.raises(ConfigError):
            adapter.read_changes("A", end, 0)
        with pytest.raises(ConfigError):
            next(iter(adapter.snapshot("A", 0)))
        with pytest.raises(ConfigError):
            adapter.read_changes("A", Position(end.lineage, {"log": 1, "other": 1}), 5)


def test_reading_and_acknowledging_check_a_position_the_same_way(tmp_path: Path) -> None:
    """A position of another log is lost (code ``lineage``) and one without exactly the
    Space's stream is a config error, for ``read_changes`` and ``acknowledge`` alike."""
    from gridstream.errors import PositionLostError

    with Space.embedded("s", data_dir=tmp_path, fsync="never") as space, \
            SpaceAdapter(SpaceGridConfig(str(tmp_path), "s"), space=space) as adapter:
        end = adapter.end_position("A")
        other_log = Position("another-log", dict(end.next_seqs))
        two_streams = Position(end.lineage, {"log": 1, "other": 1})
        uses = {"the position": lambda pos: adapter.read_changes("A", pos, 5),
                "the acknowledged position": lambda pos: adapter.acknowledge("c1", pos)}
        for use, call in uses.items():
            with pytest.raises(PositionLostError,
                               match=f": {use} belongs to log 'another-log'") as lost:
                call(other_log)
            assert lost.value.detail == "lineage", use
            with pytest.raises(ConfigError, match="exactly one stream 'log'"):
                call(two_streams)
        adapter.acknowledge("c1", end)  # the log's own position is taken


def test_the_watcher_survives_failures_to_read_the_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    from gridstream.grid import space as space_module

    names = space_module._cache_names
    opened = space_module.open_log_reader
    failures = [SpaceError("log unreadable"), SpaceError("log unreadable"), OSError("gone")]

    def failing_open(data_dir: str) -> object:
        if failures and isinstance(failures[0], OSError):
            raise failures.pop(0)
        return opened(data_dir)

    def failing_names(reader: EmbeddedLogReader) -> list[str]:
        if failures and not isinstance(failures[0], OSError):
            raise failures.pop(0)
        return names(reader)

    with Space.embedded("s", data_dir=tmp_path, fsync="never") as space:
        adapter = SpaceAdapter(SpaceGridConfig(str(tmp_path), "s", poll_interval_s=0.01),
                               space=space)
        with adapter:
            seen = threading.Event()
            events: list[CacheEvent] = []

            def listener(event: CacheEvent) -> None:
                events.append(event)
                seen.set()

            adapter.watch_caches(listener)
            monkeypatch.setattr(space_module, "_cache_names", failing_names)
            monkeypatch.setattr(space_module, "open_log_reader", failing_open)
            space.write(SpaceDocument("A", {"id": 1}))
            assert seen.wait(10)
            assert failures == [] and events == [CacheEvent("created", "A")]
    polls = [r for r in caplog.records if r.getMessage().startswith("cannot poll")]
    assert len(polls) == 2  # once per kind of error while it lasts
