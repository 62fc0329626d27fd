"""Kafka Connect–style ``.properties`` connector files: parsing, the option families,
Kafka Connect's SMT classes, and errors that name the file and the option (never a
value)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gridstream.allowlist import ALLOWED_ENV
from gridstream.connect.config import ErrorHandling, SinkConnectorConfig, SourceConnectorConfig
from gridstream.errors import ConfigError
from gridstream.run.config import load_config

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

SINK = """\
name=snk
connector.class=gridstream.connect.GridSinkConnector
topics=a,b
checkpoint=/tmp/ck/snk
grid.kind=hazelcast
grid.members=127.0.0.1:5701, 127.0.0.1:5702
"""

SOURCE = """\
name=src
connector.class=gridstream.connect.GridSourceConnector
checkpoint=/tmp/ck/src
grid.kind=space
grid.data_dir=/tmp/space
grid.space_name=demo
"""


@pytest.fixture(autouse=True)
def _no_env_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOWED_ENV, raising=False)


def _load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "c.properties"
    path.write_text(text)
    return load_config(path)


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    message = str(caught.value)
    assert str(tmp_path / "c.properties") in message  # every error names the file
    return message


def test_a_sink_file(tmp_path: Path) -> None:
    config = _load(tmp_path, SINK + """\
# comment
! another comment
tasks.max : 4
bootstrap.servers=k1:9092,\\
    k2:9092
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=false
consumer.max.poll.records=500
kafka.security.protocol=SSL
producer.override.linger.ms=5
errors.tolerance=all
keyPolicy value
keyFields=region, id
spark.master=local[1]
spark.app.name=props
spark.sql.shuffle.partitions=3
run.allowed_modules=a.b, c
run.max_restarts=2
""")
    (c,) = config.connector
    assert isinstance(c, SinkConnectorConfig) and config.feed == []
    assert c.name == "snk" and c.topics == ("a", "b") and c.tasks_max == 4
    assert c.grid.kind == "hazelcast" and c.grid.members == ("127.0.0.1:5701", "127.0.0.1:5702")
    assert c.bootstrap_servers == "k1:9092,k2:9092"
    assert (c.converter.key, c.converter.value) == ("string", "json")
    assert c.kafka == {"max.poll.records": "500", "security.protocol": "SSL",
                       "linger.ms": "5"}
    assert c.error_handling_policy.value == "LOG_ONLY"
    assert c.key_policy.value == "value" and c.key_fields == ("region", "id")
    assert config.spark.master == "local[1]" and config.spark.app_name == "props"
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "3"}
    assert config.run.allowed_modules == ("a.b", "c") and config.run.max_restarts == 2


def test_a_source_file_and_converters(tmp_path: Path) -> None:
    config = _load(tmp_path, SOURCE + """\
failoverPolicy=backlog
cacheWhitelist=people,orders.*
shallProcessRemovals=true
value.converter=org.apache.kafka.connect.json.JsonConverter
""")
    (c,) = config.connector
    assert isinstance(c, SourceConnectorConfig)
    assert c.failover_policy.value == "BACKLOG" and c.cache_whitelist == ("people", "orders.*")
    assert c.shall_process_removals is True
    assert c.converter.value == "json_schema"  # JsonConverter's schemas.enable defaults true
    enabled = _load(tmp_path, SOURCE + "value.converter.schemas.enable=TRUE\n")
    assert enabled.connector[0].converter.value == "json_schema"
    avro = _load(tmp_path, SOURCE + """\
value.converter=io.confluent.connect.avro.AvroConverter
value.converter.schema.registry.url=http://127.0.0.1:8081
value.converter.avro.schemas.people=/tmp/people.avsc
""")
    converter = avro.connector[0].converter
    assert converter.value == "avro" and converter.schema_registry_url == "http://127.0.0.1:8081"
    assert converter.avro_schemas == {"people": "/tmp/people.avsc"}
    top = _load(tmp_path, SOURCE + "value.converter=avro\nschema.registry.url=http://r:1\n")
    assert top.connector[0].converter.schema_registry_url == "http://r:1"


def test_kafka_connect_smt_classes(tmp_path: Path) -> None:
    smt = "org.apache.kafka.connect.transforms."
    config = _load(tmp_path, SOURCE + f"""\
transforms=replace,insert,mask,key,flat,router,own
transforms.replace.type={smt}ReplaceField$Value
transforms.replace.renames=a:b,c:d
transforms.replace.exclude=x
transforms.insert.type={smt}InsertField$Value
transforms.insert.static.field=origin
transforms.insert.static.value=eu
transforms.insert.timestamp.field=ts
transforms.mask.type={smt}MaskField$Value
transforms.mask.fields=ssn
transforms.mask.replacement=*
transforms.key.type={smt}ValueToKey
transforms.key.fields=id
transforms.flat.type={smt}Flatten$Value
transforms.flat.delimiter=_
transforms.router.type={smt}RegexRouter
transforms.router.regex=(.*)
transforms.router.replacement=x.$1
transforms.own.type=route_by_cache
transforms.own.topics=people:p
""")
    steps = [(t.type, t.model_extra) for t in config.connector[0].transforms]
    assert steps == [
        ("drop", {"fields": "x"}), ("rename", {"fields": "a:b,c:d"}),
        ("insert", {"field": "origin", "value": "eu"}), ("timestamp", {"field": "ts"}),
        ("mask", {"fields": "ssn", "replacement": "*"}), ("value_to_key", {"fields": "id"}),
        ("flatten", {"delimiter": "_"}), ("route", {"regex": "(.*)", "replacement": "x.$1"}),
        ("route_by_cache", {"topics": "people:p"}),
    ]


def test_the_example_file_is_valid() -> None:
    (c,) = load_config(EXAMPLES / "connectors.properties").connector
    assert c.kind == "sink" and c.grid.kind == "hazelcast" and c.transforms


@pytest.mark.parametrize(("extra", "option"), [
    ("colour=blue\n", "colour"),
    ("tasks.max=lots\n", "tasks.max"),
    ("tasks.max=0\n", "tasks.max"),
    ("grid.colour=blue\n", "grid.colour"),
    ("grid.connect_timeout_s=-1\n", "grid.connect_timeout_s"),
    ("value.converter=yaml\n", "value.converter"),
    ("value.converter=avro\n", "value.converter"),
    ("value.converter=avro\nvalue.converter.schemas.enable=false\n",
     "value.converter.schemas.enable"),
    ("value.converter.schemas.enable=maybe\n", "value.converter.schemas.enable"),
    ("key.converter.schemas.enable=true\n", "key.converter.schemas.enable"),
    ("key.converter.colour=x\n", "key.converter.colour"),
    ("value.converter.colour=x\n", "value.converter.colour"),
    ("run.colour=1\n", "run.colour"),
    ("spark.app.name=a\nspark.colour=1\nrun.max_restarts=-1\n", "run.max_restarts"),
    ("shallProcessUpdates=perhaps\n", "shallProcessUpdates"),
    ("kafka.acks=all\nproducer.acks=1\n", "producer.acks"),
    ("transforms=a\n", "transforms.a.type"),
    ("transforms=a\ntransforms.a.type=shout\n", "transforms.a.type"),
    ("transforms=a\ntransforms.b.type=drop\n", "transforms.b.type"),
    ("transforms=a,a\ntransforms.a.type=flatten\n", "transforms"),
    ("transforms=a\ntransforms.a.type=drop\n", "transforms.a.fields"),
    ("transforms=a\ntransforms.a.type=drop\ntransforms.a.fields=x\ntransforms.a.colour=1\n",
     "transforms.a.colour"),
    ("transforms=a\ntransforms.a.type=org.apache.kafka.connect.transforms.ReplaceField$Value"
     "\ntransforms.a.renames=a=b\n", "transforms.a.renames"),
    ("transforms=a\ntransforms.a.type=org.apache.kafka.connect.transforms.InsertField$Value"
     "\ntransforms.a.topic.field=t\n", "transforms.a.topic.field"),
    ("transforms=a\ntransforms.a.type=org.apache.kafka.connect.transforms.InsertField$Value"
     "\ntransforms.a.static.field=t\n", "transforms.a.static.value"),
    ("transforms=a\ntransforms.a.type=org.apache.kafka.connect.transforms.RegexRouter\n",
     "transforms.a.type"),
    ("transforms=a\ntransforms.a.type=org.apache.kafka.connect.transforms.ReplaceField$Value"
     "\ntransforms.a.exclude=x\ntransforms.a.blacklist=y\n", "transforms.a.blacklist"),
    ("topics=c\n", "topics"),
])
def test_bad_options_are_named(tmp_path: Path, extra: str, option: str) -> None:
    message = _error(tmp_path, SINK + extra)
    assert f"option {option!r}" in message


@pytest.mark.parametrize(("text", "needle"), [
    (SINK.replace("connector.class=gridstream.connect.GridSinkConnector\n", ""),
     "option 'connector.class': is required"),
    (SINK.replace("GridSinkConnector", "FileStreamSink"),
     "option 'connector.class': not a gridstream connector"),
    (SINK.replace("grid.kind=hazelcast\n", ""), "option 'grid.kind'"),
    (SINK.replace("topics=a,b\n", ""), "exactly one of 'topics'"),
    (SINK + "key\\u12=x\n", "malformed"),
])
def test_bad_files_name_the_problem(tmp_path: Path, text: str, needle: str) -> None:
    assert needle in _error(tmp_path, text)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.properties")


def test_cache_filter_allow_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = SOURCE + "cacheFilter=tests.unit.connect.entry_filters:active\n"
    message = _error(tmp_path, text)
    assert "connector 'src': option 'cacheFilter'" in message and "allow-list" in message
    allowed = _load(tmp_path, text + "run.allowed_modules=tests.unit.connect\n")
    assert allowed.connector[0].cache_filter == "tests.unit.connect.entry_filters:active"
    monkeypatch.setenv(ALLOWED_ENV, "tests.unit.connect")
    assert _load(tmp_path, text).connector[0].cache_filter is not None


def test_secrets_never_appear(tmp_path: Path) -> None:
    text = SINK + "consumer.sasl.password=hunter2\nkafka.ssl.key.password=swordfish\n"
    config = _load(tmp_path, text)
    assert "hunter2" not in repr(config) and "swordfish" not in repr(config)
    for bad in ("consumer.sasl.password=hunter2\n",   # given twice
                "tasks.max=hunter2\n",                # an invalid value
                "hunter2=1\n",                        # an unknown option
                "value.converter.schemas.enable=hunter2\n"):
        message = _error(tmp_path, text + bad)
        assert "swordfish" not in message
        if not bad.startswith("hunter2"):
            assert "hunter2" not in message
    twice = _error(tmp_path, text + "consumer.sasl.password=hunter2\n")
    assert "'consumer.sasl.password' is given twice" in twice


def test_tolerance_all_with_a_dead_letter_queue_dead_letters(tmp_path: Path) -> None:
    """Kafka Connect sends bad records to errors.deadletterqueue.topic.name when
    errors.tolerance=all: LOG_ONLY would only log them, the queue silently ignored."""
    config = _load(tmp_path, SINK + "errors.tolerance=all\n"
                                    "errors.deadletterqueue.topic.name=snk.dlq\n")
    connector = config.connector[0]
    assert connector.error_handling_policy is ErrorHandling.DEAD_LETTER
    assert connector.dead_letter_topic == "snk.dlq"
    assert _load(tmp_path, SINK + "errors.tolerance=all\n").connector[0] \
        .error_handling_policy is ErrorHandling.LOG_ONLY


@pytest.mark.parametrize("policy", ["none", "STOP_TASK", "LOG_ONLY"])
def test_a_dead_letter_topic_a_policy_would_ignore_is_refused(tmp_path: Path,
                                                              policy: str) -> None:
    with pytest.raises(ConfigError, match="deadLetterTopic is only used with "
                                          "errorHandlingPolicy DEAD_LETTER"):
        _load(tmp_path, SINK + f"errorHandlingPolicy={policy}\ndeadLetterTopic=snk.dlq\n")


def test_cache_lists_split_only_between_patterns(tmp_path: Path) -> None:
    """A .properties list is comma-separated, but a comma inside a pattern (``{1,3}``,
    ``[,;]``, ``(a|b,c)``) is part of it: splitting there read other caches silently."""
    config = _load(tmp_path, SOURCE + r"cacheWhitelist=orders_\\d{2,4}, a[,;]b,(x|y,z)" "\n"
                                      r"cacheBlacklist=tmp\\,.*,old" "\n")
    connector = config.connector[0]
    assert connector.cache_whitelist == (r"orders_\d{2,4}", "a[,;]b", "(x|y,z)")
    assert connector.cache_blacklist == (r"tmp\,.*", "old")
    assert SourceConnectorConfig.model_validate({
        "name": "s", "checkpoint": "/c", "grid": {"kind": "hazelcast"},
        "cacheWhitelist": "a{1,2},b"}).cache_whitelist == ("a{1,2}", "b")


@pytest.mark.parametrize(("options", "named"), [
    ("value.converter=json\nschema.registry.url=http://r:1\n", "schema.registry.url"),
    ("value.converter.schemas.enable=true\n"
     "value.converter.value.subject.name.strategy=record\n", "value.subject.name.strategy"),
    ("value.converter=json\nvalue.converter.avro.schemas.people=p.avsc\n", "avro.schemas"),
])
def test_avro_options_with_another_converter_are_refused(tmp_path: Path, options: str,
                                                         named: str) -> None:
    """They were accepted and ignored: the operator believed values were Avro."""
    with pytest.raises(ConfigError, match=f"{named}: only used with value.converter 'avro'"):
        _load(tmp_path, SOURCE + options)


def test_avro_schemas_on_a_sink_are_refused(tmp_path: Path) -> None:
    """A sink reads with the writer's schema: a declared one was silently ignored."""
    with pytest.raises(ConfigError, match="avro.schemas is only used by a source"):
        _load(tmp_path, SINK + "value.converter=avro\nschema.registry.url=http://r:1\n"
                               "value.converter.avro.schemas.people=p.avsc\n")


@pytest.mark.parametrize("members", ["", " , "])
def test_empty_hazelcast_members_are_refused(tmp_path: Path, members: str) -> None:
    """An empty list was accepted: the client then tries its own default address."""
    text = SINK.replace("grid.members=127.0.0.1:5701, 127.0.0.1:5702", f"grid.members={members}")
    with pytest.raises(ConfigError, match="option 'grid.members'"):
        _load(tmp_path, text)


@pytest.mark.parametrize("option", ["producer.acks=1", "producer.override.acks=0",
                                    "kafka.enable.idempotence=false"])
def test_a_source_file_with_a_lossy_producer_setting_is_refused(tmp_path: Path,
                                                                option: str) -> None:
    name = option.split("=")[0].split(".", 1)[1].removeprefix("override.")
    message = _error(tmp_path, SOURCE + option + "\n")
    assert f"source connector 'src': option {name!r} of its Kafka properties" in message
    assert _load(tmp_path, SOURCE + "producer.acks=all\n").connector[0].kafka == {
        "acks": "all"}
