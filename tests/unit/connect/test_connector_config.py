"""``[[connector]]`` sections of run files: kinds, shared checks with the pipelines, the
allow-list, Kafka defaults, secrets, and building connectors by kind."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gridstream.allowlist import ALLOWED_ENV
from gridstream.connect import Connector, build_connector
from gridstream.connect.config import SinkConnectorConfig, SourceConnectorConfig
from gridstream.errors import ConfigError
from gridstream.run.config import (
    build_connectors,
    connector_kafka,
    load_config,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FILTER = "tests.unit.connect.entry_filters:active"

SOURCE = """
[[connector]]
name = "src"
kind = "source"
checkpoint = "/tmp/ck/src"
grid = { kind = "space", data_dir = "/tmp/space", space_name = "demo" }
"""

SINK = """
[[connector]]
name = "snk"
"connector.class" = "gridstream.connect.GridSinkConnector"
topics = "a, b"
"tasks.max" = 4
checkpoint = "/tmp/ck/snk"
grid = { kind = "hazelcast", members = "127.0.0.1:5701" }
"""

PIPELINE = """
[[pipeline]]
name = "p"
topics = ["a"]
checkpoint = "/tmp/ck/p"
sink = { kind = "sql", url = "sqlite:///x.db" }
"""


@pytest.fixture(autouse=True)
def _no_env_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOWED_ENV, raising=False)


def _load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return load_config(path)


def test_connectors_only_and_with_pipelines(tmp_path: Path) -> None:
    config = _load(tmp_path, SOURCE + SINK)
    assert config.feed == []
    source, sink = config.connector
    assert isinstance(source, SourceConnectorConfig) and isinstance(sink, SinkConnectorConfig)
    assert sink.topics == ("a", "b") and sink.tasks_max == 4
    both = _load(tmp_path, PIPELINE + SOURCE)
    assert [p.name for p in both.feed] == ["p"] and both.connector[0].name == "src"


def test_connector_class_spellings(tmp_path: Path) -> None:
    short = _load(tmp_path, SOURCE.replace('kind = "source"',
                                           '"connector.class" = "GridSourceConnector"'))
    assert short.connector[0].kind == "source"
    agreeing = _load(tmp_path, SINK.replace('checkpoint', 'kind = "sink"\ncheckpoint'))
    assert agreeing.connector[0].kind == "sink"


def test_example_file_is_valid() -> None:
    config = load_config(EXAMPLES / "connectors.toml")
    kinds = {(c.kind, c.grid.kind) for c in config.connector}
    assert kinds == {("source", "space"), ("sink", "hazelcast")}


@pytest.mark.parametrize(("text", "needle"), [
    ("[run]\nmax_restarts = 1\n", "nothing to run"),
    (SOURCE + SOURCE.replace("/tmp/ck/src", "/tmp/ck/other"), "names must be unique: src"),
    (PIPELINE + SOURCE.replace('name = "src"', 'name = "p"'), "names must be unique: p"),
    (PIPELINE + SOURCE.replace("/tmp/ck/src", "/tmp/ck/p"), "own checkpoint.*/tmp/ck/p"),
    (PIPELINE + SOURCE.replace("/tmp/ck/src", "/tmp/ck/p/"), "own checkpoint.*/tmp/ck/p"),
    (PIPELINE + PIPELINE.replace('"p"', '"q"').replace("/tmp/ck/p", "/tmp/ck/p/"),
     "own checkpoint.*/tmp/ck/p"),
    (PIPELINE + SOURCE.replace("/tmp/ck/src", "/tmp//ck/./p"), "own checkpoint.*/tmp/ck/p"),
    (PIPELINE.replace("/tmp/ck/p", "hdfs://nn/ck/p") + SOURCE.replace(
        "/tmp/ck/src", "hdfs://nn/ck/p/"), "own checkpoint.*hdfs://nn/ck/p"),
    (SOURCE + "colour = 'blue'\n", r"connector\.0\.source\.colour"),
    (SOURCE + "failoverPolicy = 'SOMETIMES'\n", "failoverPolicy"),
    (SOURCE + "batchSize = 0\n", "batchSize"),
    (SINK.replace('topics = "a, b"', ""), "exactly one of 'topics'"),
    (SINK.replace("GridSinkConnector", "FileStreamSink"), "connector.class.*not a gridstream"),
    (SINK.replace('checkpoint', 'kind = "source"\ncheckpoint'), "connector.class says 'sink'"),
    (SOURCE + "errorHandlingPolicy = 'DEAD_LETTER'\n", "deadLetterTopic"),
    (SOURCE + "transforms = [{ type = 'mask' }]\n",
     r"connector 'src': transforms\[0\] \(type 'mask'\): option 'fields': is required"),
    (SOURCE + "transforms = [{ type = 'shout' }]\n", "connector 'src'.*unknown type 'shout'"),
])
def test_bad_connector_sections_name_the_problem(tmp_path: Path, text: str,
                                                 needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        _load(tmp_path, text)


def test_cache_filter_must_be_on_the_allow_list(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    text = SOURCE + f'cacheFilter = "{FILTER}"\n'
    with pytest.raises(ConfigError, match="connector 'src': option 'cacheFilter': .*allow-list"):
        _load(tmp_path, text)
    allowed = _load(tmp_path, '[run]\nallowed_modules = ["tests.unit.connect"]\n' + text)
    assert allowed.connector[0].cache_filter == FILTER
    monkeypatch.setenv(ALLOWED_ENV, "tests.unit.connect.entry_filters")
    assert _load(tmp_path, text).connector[0].cache_filter == FILTER
    # an allowed module's missing function is found at load time too
    with pytest.raises(ConfigError, match="option 'cacheFilter'.*not a function"):
        _load(tmp_path, text.replace(":active", ":nothing"))


def test_cache_filter_from_an_allowed_module_must_be_defined_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A function an allowed module merely imports (``os.path.exists`` here; it could be
    ``subprocess.getoutput``) is code the operator did not allow."""
    monkeypatch.setenv(ALLOWED_ENV, "tests.unit.connect.entry_filters")
    text = SOURCE + f'cacheFilter = "{FILTER.replace(":active", ":exists")}"\n'
    with pytest.raises(ConfigError, match="option 'cacheFilter'.*defined in module "
                                          "'genericpath'.*not in the allow-list"):
        _load(tmp_path, text)


def test_connectors_take_the_runs_kafka_unless_they_name_their_own(tmp_path: Path) -> None:
    kafka = ('[kafka]\nbootstrap_servers = "k1:9092"\n'
             'properties = { "client.id" = "run", "security.protocol" = "SSL" }\n')
    inherit = _load(tmp_path, kafka + SOURCE + 'kafka = { "client.id" = "own" }\n')
    servers, props = connector_kafka(inherit, inherit.connector[0])
    assert servers == "k1:9092"
    assert props == {"client.id": "own", "security.protocol": "SSL"}
    own = _load(tmp_path, kafka + SOURCE + 'bootstrap_servers = "k2:9092"\n'
                                           'kafka = { "client.id" = "own" }\n')
    servers, props = connector_kafka(own, own.connector[0])
    assert (servers, props) == ("k2:9092", {"client.id": "own"})


def test_secrets_stay_out_of_reprs_and_errors(tmp_path: Path) -> None:
    secrets = ('[kafka]\nproperties = { "sasl.password" = "hunter2" }\n' + SOURCE
               + 'kafka = { "ssl.key.password" = "swordfish" }\n')
    config = _load(tmp_path, secrets)
    assert "hunter2" not in repr(config) and "swordfish" not in repr(config)
    servers, props = connector_kafka(config, config.connector[0])
    assert props["ssl.key.password"].get_secret_value() == "swordfish"
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, secrets + "batchSize = 'hunter2'\n")
    assert "batchSize" in str(caught.value) and "hunter2" not in str(caught.value)
    assert "swordfish" not in str(caught.value)


class _FakeConnector(Connector):
    def __init__(self, config: Any, **kwargs: Any) -> None:
        super().__init__(config.name)
        self.config, self.kwargs = config, kwargs

    def describe(self) -> str:
        return self.name

    def start(self, spark: Any) -> Any:
        raise NotImplementedError

    def process_batch(self, records: Any, batch_id: int) -> Any:
        raise NotImplementedError


def test_build_connectors_dispatches_on_kind(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for module, cls in (("gridstream.connect.source", "SourceConnector"),
                        ("gridstream.connect.sink", "SinkConnector")):
        fake = types.ModuleType(module)
        setattr(fake, cls, type(cls, (_FakeConnector,), {}))
        monkeypatch.setitem(sys.modules, module, fake)
    config = _load(tmp_path, '[run]\nallowed_modules = ["m"]\n[kafka]\nbootstrap_servers = '
                             '"k:1"\n' + SOURCE + SINK)
    built = build_connectors(config, space="the space")
    assert [type(c).__name__ for c in built] == ["SourceConnector", "SinkConnector"]
    assert all(isinstance(c, _FakeConnector) for c in built)
    first = built[0]
    assert isinstance(first, _FakeConnector)
    assert first.kwargs == {"bootstrap_servers": "k:1", "kafka_properties": {},
                            "allowed_modules": ("m",), "space": "the space"}
    assert build_connector(config.connector[1], bootstrap_servers="x", kafka_properties={},
                           allowed_modules=()).name == "snk"


def test_the_connector_docs_list_every_option() -> None:
    """docs/connectors.md (generated: ``tests/unit/test_options_doc.py``) has a row for
    every option of both connector kinds."""
    from gridstream.options_doc import render

    table = render("docs/connectors.md")
    for model in (SourceConnectorConfig, SinkConnectorConfig):
        for name in model.model_fields:
            assert f"`{name}`" in table, name


def test_an_option_without_a_meaning_fails_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    from gridstream import options_doc
    from gridstream.connect import meanings

    without = dict(meanings.MEANINGS)
    del without["batch_size"]
    sections = tuple(options_doc.Section(s.title, s.model, s.fields, without, s.prefix,
                                         s.required)
                     for s in options_doc.DOCS["docs/connectors.md"])
    monkeypatch.setitem(options_doc.DOCS, "docs/connectors.md", sections)
    with pytest.raises(ConfigError, match="'batch_size' of SourceConnectorConfig has no meaning"):
        options_doc.render("docs/connectors.md")


def test_run_config_runs_pipelines_and_connectors_together(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gridstream.spark.runner as runner_module
    from gridstream.run.config import run_config

    for module, cls in (("gridstream.connect.source", "SourceConnector"),
                        ("gridstream.connect.sink", "SinkConnector")):
        fake = types.ModuleType(module)
        setattr(fake, cls, type(cls, (_FakeConnector,), {}))
        monkeypatch.setitem(sys.modules, module, fake)
    ran: dict[str, Any] = {}

    class FakeRunner:
        def __init__(self, pipelines: list[Any], spark_factory: Any, **kwargs: Any) -> None:
            ran.update(names=[p.name for p in pipelines], restarts=kwargs["restarts"],
                       log=kwargs["log"])

        def run(self) -> int:
            return 7

    monkeypatch.setattr(runner_module, "PipelineRunner", FakeRunner)
    monkeypatch.setenv("GRIDSTREAM_HOME", str(tmp_path / "home"))
    path = tmp_path / "run.toml"
    path.write_text("[run]\nstatus = false\n" + PIPELINE.replace("x.db", str(tmp_path / "x.db"))
                    + SOURCE + SINK)
    assert run_config(path) == 7
    assert ran["names"] == ["p", "src", "snk"]
    assert set(ran["restarts"]) == {"p", "src", "snk"}
    assert ran["log"].path.parent == tmp_path / "home" / "logs"  # the run's log file


@pytest.mark.parametrize(("kafka", "needle"), [
    ('kafka = { acks = "1" }\n', "option 'acks' of its Kafka properties \\(acks='1'\\) "
                                 "cannot give exactly_once"),
    ('kafka = { acks = 0 }\ndeliveryGuarantee = "at_least_once"\n',
     "option 'acks' .*\\(acks=0\\) cannot give at_least_once"),
    ('kafka = { "enable.idempotence" = false }\n',
     "option 'enable.idempotence' .*cannot give exactly_once"),
    ('kafka = { "enable.idempotence" = "false" }\n', "option 'enable.idempotence'"),
])
def test_a_source_refuses_a_lossy_producer_setting_when_the_file_is_loaded(
        tmp_path: Path, kafka: str, needle: str) -> None:
    """Under at-least-once the connector's ``acks`` would be overridden, under
    exactly-once the writer would refuse it at the first batch with output: refused at
    load, naming the connector and the option, as the pipeline's Kafka sink does."""
    with pytest.raises(ConfigError, match=f"source connector 'src': {needle}"):
        _load(tmp_path, SOURCE + kafka)


def test_a_source_refuses_a_lossy_setting_inherited_from_the_runs_kafka(
        tmp_path: Path) -> None:
    run = '[kafka]\nproperties = { acks = "leader" }\n'
    with pytest.raises(ConfigError, match="run.toml: source connector 'src': option 'acks' "
                                          "of its Kafka properties with \\[kafka\\]'s"):
        _load(tmp_path, run + SOURCE)
    # its own acks=all wins; another cluster's connector takes nothing from [kafka]
    assert _load(tmp_path, run + SOURCE + 'kafka = { acks = "all" }\n').connector
    assert _load(tmp_path, run + SOURCE + 'bootstrap_servers = "k2:9092"\n').connector
    assert _load(tmp_path, run + SINK).connector  # a consumer has no acks to lose


def test_a_source_takes_acks_all_and_idempotence_and_sets_them_itself(
        tmp_path: Path) -> None:
    from gridstream.connect.source.connector import SourceConnector

    text = SOURCE.replace("/tmp/ck/src", str(tmp_path / "ck"))
    for props in ({"acks": "all", "enable.idempotence": True}, {"acks": "-1"},
                  {"acks": -1, "enable.idempotence": "true"}):
        config = _load(tmp_path, text).connector[0]
        connector = SourceConnector(config, bootstrap_servers="k:1",
                                    kafka_properties={**props, "linger.ms": 5})
        # dropped: the writer (exactly-once) refuses them, the at-least-once sink sets them
        assert dict(connector.kafka_properties) == {"linger.ms": 5}
    with pytest.raises(ConfigError, match="source connector 'src': option 'acks'"):
        SourceConnector(config, bootstrap_servers="k:1", kafka_properties={"acks": 1})


@pytest.mark.parametrize(("option", "value", "reason"), [
    ("pollInterval", True, "expected a number, not True"),
    ("batchSize", False, "expected a number, not False"),
    ("shallLoadInitialData", "yes", "expected true or false, not 'yes'"),
    ("shallProcessRemovals", 1, "expected true or false, not 1"),
])
def test_a_flag_or_a_number_is_never_guessed(option: str, value: Any, reason: str) -> None:
    """``pollInterval = true`` read as 1 ms and ``shallProcessUpdates = "yes"`` as true."""
    from pydantic import ValidationError

    from gridstream.connect.config import SourceConnectorConfig

    raw = {"name": "s", "grid": {"kind": "space", "data_dir": "/d", "space_name": "x"},
           "checkpoint": "/tmp/c", option: value}
    with pytest.raises(ValidationError, match=reason):
        SourceConnectorConfig.model_validate(raw)


def test_flags_and_numbers_as_text_still_read_as_properties_files_write_them() -> None:
    from gridstream.connect.config import SinkConnectorConfig

    raw = {"name": "s", "grid": {"kind": "hazelcast"}, "checkpoint": "/tmp/c", "topics": "t",
           "shallProcessUpdates": "TRUE", "tasks.max": "2", "pushInterval": "500"}
    config = SinkConnectorConfig.model_validate(raw)
    assert config.shall_process_updates is True and config.tasks_max == 2


def test_a_misspelt_option_names_the_one_it_resembles(tmp_path: Any) -> None:
    from gridstream.run.config import load_config
    from gridstream.run.properties import load_properties_file

    toml = tmp_path / "run.toml"
    toml.write_text('[[connector]]\nkind = "source"\nname = "s"\ncheckpoint = "/tmp/ck"\n'
                    'pollIntervall = 200\n'
                    'grid = { kind = "space", data_dir = "/tmp/d", space_name = "x" }\n')
    with pytest.raises(ConfigError, match=r"pollIntervall: .*did you mean 'pollInterval'"):
        load_config(toml)
    props = tmp_path / "c.properties"
    props.write_text("name=s\nconnector.class=GridSourceConnector\ncheckpoint=/tmp/ck\n"
                     "grid.kind=space\ngrid.data_dir=/tmp/d\ngrid.space_name=x\n"
                     "shallLoadInitialDta=false\n")
    with pytest.raises(ConfigError, match="did you mean 'shallLoadInitialData'"):
        load_properties_file(props)


def test_skip_records_name_kafka_records_as_failures_name_them() -> None:
    from pydantic import ValidationError

    from gridstream.kafka.where import kafka_where, parse_kafka_where

    raw = {"name": "s", "grid": {"kind": "hazelcast"}, "checkpoint": "/tmp/c", "topics": "t"}
    config = SinkConnectorConfig.model_validate(
        {**raw, "skipRecords": "nc.events[0]@250, t-1[12]@0"})  # a properties file's list
    assert config.skip_records == ("nc.events[0]@250", "t-1[12]@0")
    assert config.skip_positions == {("nc.events", 0, 250), ("t-1", 12, 0)}
    assert parse_kafka_where(kafka_where("a.b", 3, 9)) == ("a.b", 3, 9)
    for wrong in ("nc.events@250", "nc.events[0]", "nc.events[-1]@2", "[0]@1", "t[0]@x"):
        with pytest.raises(ValidationError, match="topic\\[partition\\]@offset"):
            SinkConnectorConfig.model_validate({**raw, "skipRecords": [wrong]})
    assert SinkConnectorConfig.model_validate(raw).skip_positions == frozenset()
