"""``[[pipeline]]`` sections of the API in a run file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridstream.errors import ConfigError
from gridstream.run.config import build_api_jobs, load_config

GOOD = """
[run]
allowed_modules = ["tests.unit.pipeline.steps"]

[[pipeline]]
name = "api"
guarantee = "AT_LEAST_ONCE"
checkpoint = "/tmp/ck-api"
[pipeline.source]
kind = "kafka"
topics = ["in"]
properties = { "value.deserializer" = "StringDeserializer" }
[[pipeline.steps]]
map = "tests.unit.pipeline.steps:upper"
[[pipeline.steps]]
filter = "tests.unit.pipeline.steps.not_empty"
[pipeline.sink]
kind = "kafka"
topic = "out"
properties = { "value.serializer" = "StringSerializer" }

[[pipeline]]
name = "store"
topics = ["people"]
checkpoint = "/tmp/ck-store"
sink = { kind = "parquet", path = "/tmp/out" }
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_api_and_store_pipelines_live_side_by_side(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, GOOD))
    assert [p.name for p in config.feed] == ["store"]
    jobs = build_api_jobs(config)
    assert [j.name for j in jobs] == ["api"]
    assert [s.label for s in jobs[0].steps] == ["map#1", "filter#2"]
    assert "127.0.0.1:9092" in jobs[0].describe()  # [kafka]'s default bootstrap servers


def test_an_unknown_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('guarantee = "AT_LEAST_ONCE"',
                                         'guarantee = "AT_LEAST_ONCE"\nretries = 3'))
    with pytest.raises(ConfigError, match=r"run.toml is invalid:\n  pipeline.0.retries"):
        load_config(path)
    path = _write(tmp_path, GOOD.replace('topics = ["in"]', 'topics = ["in"]\ntopik = 1'))
    with pytest.raises(ConfigError, match=r"pipeline.0.source.topik"):
        load_config(path)


def test_a_step_needs_exactly_one_function(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('map = "tests.unit.pipeline.steps:upper"',
                                         'map = "tests.unit.pipeline.steps:upper"\n'
                                         'filter = "tests.unit.pipeline.steps:not_empty"'))
    with pytest.raises(ConfigError, match=r"pipeline.0.steps.0: a step has exactly one"):
        load_config(path)


def test_functions_come_only_from_the_allow_list(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('allowed_modules = ["tests.unit.pipeline.steps"]',
                                         "allowed_modules = []"))
    with pytest.raises(ConfigError, match=r"steps.0.map .* not in the allow-list"):
        load_config(path)
    path = _write(tmp_path, GOOD.replace("steps:upper", "steps:loads"))
    with pytest.raises(ConfigError, match="defined in module 'json'"):
        load_config(path)


def test_an_unknown_sink_kind_lists_the_known_ones(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('kind = "kafka"\ntopic = "out"',
                                         'kind = "kafkaa"\ntopic = "out"'))
    with pytest.raises(ConfigError, match=r"pipeline.0.sink.kind: 'kafkaa' is not one of"):
        load_config(path)


def test_names_stay_unique_across_both_kinds(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('name = "store"', 'name = "api"'))
    with pytest.raises(ConfigError, match="names must be unique: api"):
        load_config(path)


@pytest.mark.parametrize(("step", "why"), [
    ('filter = "tests.unit.pipeline.steps.not_empty"\nschema = "n long"',
     "schema does not apply to a filter step"),
    ('map = "tests.unit.pipeline.steps:upper"\nkind = "pandas"',
     "kind does not apply to a map step"),
    ('flat_map = "tests.unit.pipeline.steps:upper"\nkind = "arrow"',
     "kind does not apply to a flat_map step"),
    ('window = { size = "1 minute" }\nschema = "n long"',
     "schema does not apply to a window step"),
])
def test_a_step_option_that_does_not_apply_is_refused(tmp_path: Path, step: str,
                                                      why: str) -> None:
    path = _write(tmp_path, GOOD.replace('filter = "tests.unit.pipeline.steps.not_empty"',
                                         step))
    with pytest.raises(ConfigError, match=rf"pipeline.0.steps.1: {why}"):
        load_config(path)


def test_a_kafka_source_of_a_run_file_bounds_each_micro_batch(tmp_path: Path) -> None:
    from gridstream.pipeline.base import Guarantee, RunContext

    context = RunContext("api", Guarantee.AT_LEAST_ONCE, "/tmp/ck-api")
    (default,) = build_api_jobs(load_config(_write(tmp_path, GOOD)))
    assert default.source.options(context)["maxOffsetsPerTrigger"] == "100000"
    (own,) = build_api_jobs(load_config(_write(tmp_path, GOOD.replace(
        'topics = ["in"]', 'topics = ["in"]\nmax_offsets_per_trigger = 250'))))
    assert own.source.options(context)["maxOffsetsPerTrigger"] == "250"
