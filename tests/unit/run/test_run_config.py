"""Pipeline config files: typed, aliases of the seeds and Spark, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridstream.errors import ConfigError
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.run.config import build_feeds, load_config
from gridstream.spark.dead_letter import ErrorPolicy
from gridstream.spark.sinks.config import CassandraSinkConfig, SqlSinkConfig
from gridstream.spark.triggers import parse_trigger
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
    files = sorted([*EXAMPLES.glob("pipeline*.toml"), *EXAMPLES.glob("feeds*.toml")])
    assert files
    for path in files:
        config = load_config(path)
        assert config.feed or config.api_pipelines


def test_a_feed_is_a_feed_table_or_a_pipeline_table_without_a_source(tmp_path: Path) -> None:
    """``[[feed]]`` is the feed's table; ``[[pipeline]]`` without a ``source`` (its
    earlier form) is still read as one, after the ``[[feed]]`` tables, and an error in
    it names the table it is written in."""
    feed = MINIMAL.replace("[[pipeline]]", "[[feed]]").replace('"p"', '"f"').replace(
        "/tmp/ck", "/tmp/ck-f")
    config = _load(tmp_path, MINIMAL + feed)
    assert [f.name for f in config.feed] == ["f", "p"]  # type: ignore[attr-defined]
    bad = MINIMAL.replace('kind = "sql"', 'kind = "mongo"')
    with pytest.raises(ConfigError, match=r"\n  pipeline\.0\.sink: Input tag 'mongo'"):
        _load(tmp_path, feed + bad)
    with pytest.raises(ConfigError, match=r"\n  feed\.0\.sink: Input tag 'mongo'"):
        _load(tmp_path, bad.replace("[[pipeline]]", "[[feed]]") + MINIMAL)


def test_minimal_file_and_defaults(tmp_path: Path) -> None:
    config = load_config({"pipeline": [{"name": "p", "subscribe": "a, b", "checkpoint": "/c",
                                        "sink": {"kind": "sql", "url": "sqlite:///x.db"}}]})
    p = config.feed[0]
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
    p = config.feed[0]  # type: ignore[attr-defined]
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
        build_feeds(config)  # type: ignore[arg-type]


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


def _pipeline(**fields: object) -> dict[str, object]:
    return {"pipeline": [{"name": "p", "checkpoint": "/c", "errorHandlingPolicy": "dead_letter",
                          "sink": {"kind": "sql", "url": "sqlite:///x.db"}, **fields}]}


@pytest.mark.parametrize("pattern", ["grid\\..*", ".*", "grid\\.(people|dlq)"])
def test_a_pattern_matching_the_dead_letter_topic_is_refused(pattern: str) -> None:
    """Its dead letters would be read again, found malformed and dead-lettered again."""
    with pytest.raises(ConfigError) as caught:
        load_config(_pipeline(subscribePattern=pattern, dead_letter_topic="grid.dlq"))
    message = str(caught.value)
    assert f"pattern {pattern!r}" in message and "'grid.dlq'" in message
    assert "own dead letters" in message


def test_a_pattern_not_matching_the_dead_letter_topic_is_accepted() -> None:
    # Spark matches the whole topic name: 'grid' alone does not take 'grid.dlq'
    for pattern, topic in (("grid\\.people.*", "grid.dlq"), ("grid", "grid.dlq"),
                           ("grid\\..*", "dlq.grid"), ("grid\\.(?!dlq$).*", "grid.dlq")):
        config = load_config(_pipeline(subscribePattern=pattern, dead_letter_topic=topic))
        assert config.feed[0].pattern == pattern


def test_a_listed_topic_equal_to_the_dead_letter_topic_is_refused() -> None:
    with pytest.raises(ConfigError, match="dead-letter topic 'b' is one of the feed's topics"):
        load_config(_pipeline(topics="a, b", dead_letter_topic="b"))
    # also when the policy is 'fail' (the topic is only named, but still never read back)
    with pytest.raises(ConfigError, match="'b' is one of the feed's topics"):
        load_config(_pipeline(topics=["a", "b"], dead_letter_topic="b",
                              errorHandlingPolicy="fail"))


def test_min_partitions_is_refused_with_the_cassandra_sink() -> None:
    """Splitting a Kafka partition across concurrent tasks loses an entity's order, and a
    nested change applied before the write it edits loses the written map entries."""
    cassandra = {"kind": "cassandra", "keyspace": "grid"}
    with pytest.raises(ConfigError, match="minPartitions .*cassandra sink"):
        load_config(_pipeline(topics=["a"], minPartitions=4, sink=cassandra,
                              errorHandlingPolicy="fail"))
    accepted = load_config(_pipeline(topics=["a"], sink=cassandra, errorHandlingPolicy="fail"))
    assert accepted.feed[0].min_partitions is None
    # order-independent sinks keep the option (they fold each entity in version order)
    sql = load_config(_pipeline(topics=["a"], minPartitions=4, errorHandlingPolicy="fail"))
    assert sql.feed[0].min_partitions == 4


def test_kafka_secrets_reach_the_source_but_never_a_repr(tmp_path: Path) -> None:
    """[kafka] secret properties are held as SecretStr (no repr of the file shows them)
    and still reach Spark's Kafka source as their real value."""
    config = _load(tmp_path, '[kafka]\nproperties = { "sasl.password" = "hunter2", '
                             '"client.id" = "c" }\n' + MINIMAL)
    assert "hunter2" not in repr(config)
    (pipeline,) = build_feeds(config)  # type: ignore[arg-type]
    options = pipeline.source_options()
    assert options["kafka.sasl.password"] == "hunter2" and options["kafka.client.id"] == "c"
    assert "hunter2" not in pipeline.describe()
