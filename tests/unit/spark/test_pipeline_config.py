"""Pipeline config files: typed, aliases of the seeds and Spark, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridstream.errors import ConfigError
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.pipeline_config import build_pipelines, load_config
from gridstream.spark.config import CassandraSinkConfig, SqlSinkConfig, parse_trigger
from gridstream.spark.dead_letter import ErrorPolicy
from gridstream.spark.types import TypeRegistry, descriptor_from_table, descriptor_to_table

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

MINIMAL = """
[[pipeline]]
name = "p"
topics = ["a", "b"]
checkpoint = "/tmp/ck"
sink = { kind = "sql", url = "sqlite:///x.db" }
"""


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return load_config(path)


def test_example_files_are_valid() -> None:
    files = sorted(EXAMPLES.glob("pipeline*.toml"))
    assert files
    for path in files:
        config = load_config(path)
        assert config.pipeline


def test_minimal_file_and_defaults(tmp_path: Path) -> None:
    config = load_config({"pipeline": [{"name": "p", "subscribe": "a, b", "checkpoint": "/c",
                                        "sink": {"kind": "sql", "url": "sqlite:///x.db"}}]})
    p = config.pipeline[0]
    assert p.topics == ("a", "b") and p.starting_offsets == "earliest"
    assert p.fail_on_data_loss is True and p.error_handling_policy is ErrorPolicy.FAIL
    assert isinstance(p.sink, SqlSinkConfig)
    assert "x.db" not in repr(p.sink)  # the URL may hold a password


def test_seed_and_spark_option_names(tmp_path: Path) -> None:
    config = _load(tmp_path, """
[[pipeline]]
name = "c"
subscribePattern = "grid\\\\..*"
startingOffsets = "latest"
maxOffsetsPerTrigger = 10
failOnDataLoss = false
errorHandlingPolicy = "STOP_TASK"
checkpointLocation = "/tmp/ck"
sink = { kind = "cassandra", keyspaceName = "grid", hosts = "h1, h2" }
""")
    p = config.pipeline[0]  # type: ignore[attr-defined]
    assert p.pattern == "grid\\..*" and p.starting_offsets == "latest"
    assert p.max_offsets_per_trigger == 10 and p.fail_on_data_loss is False
    assert isinstance(p.sink, CassandraSinkConfig)
    assert p.sink.cassandra.contact_points == ("h1", "h2")


@pytest.mark.parametrize(("text", "needle"), [
    ("[[pipeline]]\nname='p'\ncheckpoint='/c'\nsink={kind='sql', url='sqlite:///x'}",
     "exactly one of 'topics'"),
    (MINIMAL.replace('kind = "sql"', 'kind = "mongo"'), "pipeline.0.sink"),
    (MINIMAL.replace("sqlite:///x.db", "mysql://x"), "sqlite:///"),
    (MINIMAL + 'errorHandlingPolicy = "LOG_ONLY"\n', "would drop"),
    (MINIMAL + 'errorHandlingPolicy = "dead_letter"\n', "dead_letter_topic"),
    (MINIMAL + 'trigger = "often"\n', "trigger"),
    (MINIMAL + 'colour = "blue"\n', "colour"),
    (MINIMAL + MINIMAL, "unique"),
    ("[types.P]\nproperties = { a = 'strng' }\n" + MINIMAL, "unknown kind"),
    ("this is = not toml =", "not valid TOML"),
])
def test_bad_files_name_the_problem(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        _load(tmp_path, text)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.toml")


def test_forbidden_consumer_properties(tmp_path: Path) -> None:
    config = _load(tmp_path, MINIMAL.replace('checkpoint', 'kafka = { "enable.auto.commit" = true }'
                                             '\ncheckpoint'))
    with pytest.raises(ConfigError, match="enable.auto.commit"):
        build_pipelines(config)  # type: ignore[arg-type]


def test_triggers() -> None:
    assert parse_trigger("5 seconds") == {"processingTime": "5000 milliseconds"}
    assert parse_trigger("250 ms") == {"processingTime": "250 milliseconds"}
    assert parse_trigger("1 minute") == {"processingTime": "60000 milliseconds"}
    assert parse_trigger("available-now") == {"availableNow": True}


def test_type_tables_round_trip_and_dynamic_fallback() -> None:
    descriptor = TypeDescriptor("P", "id", fixed=(
        PropertySpec("id", "str"),
        PropertySpec("address", "object", (PropertySpec("city", "str"),)),
    ), indexes=("address.city",))
    assert descriptor_from_table("P", descriptor_to_table(descriptor)) == descriptor
    registry = TypeRegistry.of([descriptor])
    assert registry.get("P") is descriptor
    dynamic = registry.get("Other")
    assert dynamic.id_property == "id" and dynamic.fixed == ()
    assert TypeRegistry.from_payload(registry.to_payload()).declared == registry.declared
    strict = TypeRegistry.of([descriptor], unknown_types="fail")
    with pytest.raises(Exception, match="not declared"):
        strict.get("Other")
