"""The chain, the run options, guarantee lowering and real-time refusals (no Spark)."""

from __future__ import annotations

from typing import Any

import pytest

from gridstream.errors import ConfigError
from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline
from gridstream.pipeline.api import ItemStep
from gridstream.pipeline.base import Flow, Sink
from gridstream.pipeline.compile import plan

PROPS = {"bootstrap.servers": "127.0.0.1:9092", "key.deserializer": "StringDeserializer",
         "value.deserializer": "StringDeserializer", "auto.offset.reset": "earliest"}
OUT = {"bootstrap.servers": "127.0.0.1:9092", "value.serializer": "StringSerializer"}


def _pipeline(**sink: Any) -> Pipeline:
    p = Pipeline.create(name="t")
    (p.read_from(KafkaSources.kafka(PROPS, "in"))
      .map(str).filter(bool).write_to(KafkaSinks.kafka(OUT, "out", **sink)))
    return p


class _BatchSink(Sink):
    def describe(self) -> str:
        return "batch sink"

    def encode(self, item: Any) -> dict[str, Any]:
        return {"value": item}

    def columns(self) -> str:
        return "value string"

    def start(self, flow: Flow, context: Any, on_batch: Any) -> Any:
        raise AssertionError("not started in unit tests")


def test_a_chain_has_one_source_one_sink_and_no_branches() -> None:
    p = Pipeline.create()
    stage = p.read_from(KafkaSources.kafka(PROPS, "in"))
    stage.map(str)
    with pytest.raises(ConfigError, match="no branches"):
        stage.filter(bool)
    with pytest.raises(ConfigError, match="one source"):
        p.read_from(KafkaSources.kafka(PROPS, "in"))
    with pytest.raises(ConfigError, match="no sink"):
        p.job()


def test_consecutive_item_steps_form_one_group() -> None:
    p = Pipeline.create()
    (p.read_from(KafkaSources.kafka(PROPS, "in")).map(str, schema="v string").filter(bool)
      .map_batch(lambda b: b).flat_map(list).map(str).write_to(KafkaSinks.kafka(OUT, "o")))
    groups = plan(p.steps)
    assert [[s.label for s in g] for g in groups] == [
        ["map#1", "filter#2"], ["map_batch#3"], ["flat_map#4", "map#5"]]
    assert all(isinstance(s, ItemStep) for s in groups[0])


@pytest.mark.parametrize("guarantee", [Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE])
def test_a_checkpoint_is_required_above_none(guarantee: Guarantee) -> None:
    with pytest.raises(ConfigError, match="checkpoint"):
        _pipeline().job(guarantee)
    assert _pipeline().job(Guarantee.NONE).guarantee == Guarantee.NONE


def test_a_sink_lowers_the_guarantee_and_describe_says_so() -> None:
    job = _pipeline(guarantee="AT_LEAST_ONCE").job(Guarantee.EXACTLY_ONCE, "/tmp/ck")
    assert job.guarantee == Guarantee.AT_LEAST_ONCE
    assert "AT_LEAST_ONCE (asked EXACTLY_ONCE, lowered by the sink)" in job.describe()
    # never raised: a NONE pipeline stays NONE with an exactly-once sink
    assert _pipeline().job(Guarantee.NONE).guarantee == Guarantee.NONE


def test_error_policy_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="errors 'drop'"):
        _pipeline().job(errors="drop")
    with pytest.raises(ConfigError, match="dead_letter_topic"):
        _pipeline().job(errors="dead_letter")
    with pytest.raises(ConfigError, match="trigger"):
        _pipeline().job(trigger="soon")


def test_real_time_refuses_exactly_once() -> None:
    with pytest.raises(ConfigError, match="real-time mode.*EXACTLY_ONCE"):
        _pipeline().job(Guarantee.EXACTLY_ONCE, "/tmp/ck", "real_time")
    job = _pipeline().job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", "real_time",
                          real_time_python=True)
    assert job.guarantee == Guarantee.AT_LEAST_ONCE


def test_real_time_refuses_python_steps_unless_asked() -> None:
    with pytest.raises(ConfigError, match=r"Python steps \(map#1, filter#2\).*MapInArrowExec"):
        _pipeline().job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", "real_time")


def test_real_time_refuses_stateful_steps() -> None:
    p = Pipeline.create()
    (p.read_from(KafkaSources.kafka(PROPS, "in")).map(str, schema="v string")
      .jvm_step("window", lambda flow: flow, stateful=True)
      .write_to(KafkaSinks.kafka(OUT, "o")))
    with pytest.raises(ConfigError, match=r"stateful steps \(window#2\)"):
        p.job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", "real_time", real_time_python=True)


def test_real_time_refuses_foreach_batch_sinks() -> None:
    p = Pipeline.create()
    p.read_from(KafkaSources.kafka(PROPS, "in")).write_to(_BatchSink())
    with pytest.raises(ConfigError, match="foreachBatch sink"):
        p.job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", "real_time")


def test_sources_and_sinks_check_their_properties() -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        KafkaSources.kafka({}, "in")
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        KafkaSources.kafka({**PROPS, "auto.offset.reset": "none"}, "in")
    with pytest.raises(ConfigError, match="guarantee"):
        KafkaSinks.kafka(OUT, "o", guarantee="SOMETIMES")


def test_describe_never_shows_secrets() -> None:
    source = KafkaSources.kafka({**PROPS, "sasl.password": "hunter2"}, "in")
    assert "hunter2" not in source.describe() and "hunter2" not in repr(source.options)


class _Writer:
    """Records what ``configure`` asks of a ``DataStreamWriter``."""

    def __init__(self) -> None:
        self.calls: dict[str, Any] = {}

    def option(self, key: str, value: str) -> _Writer:
        self.calls[key] = value
        return self

    def queryName(self, name: str) -> _Writer:  # noqa: N802 - Spark's name
        return self

    def outputMode(self, mode: str) -> _Writer:  # noqa: N802 - Spark's name
        return self

    def trigger(self, **options: Any) -> _Writer:
        self.calls["trigger"] = options
        return self


def test_real_time_writes_the_checkpoint_at_the_asked_interval() -> None:
    from gridstream.pipeline.streaming import configure

    job = _pipeline().job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", "real_time",
                          real_time_python=True, checkpoint_interval="30 seconds")
    writer = _Writer()
    configure(writer, job.context("/tmp/ck"))  # type: ignore[arg-type]
    assert writer.calls["trigger"] == {"realTime": "30000 milliseconds"}


def test_real_time_runs_short_batches_by_default_only_with_a_python_pass() -> None:
    """Spark hands a Python pass's output on at the end of a real-time batch: with one,
    the default batch is 200 ms; without, Spark's 5 s; an interval given wins."""
    from gridstream.pipeline.compile import Compiled
    from gridstream.pipeline.streaming import configure

    job = _pipeline().job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", "real_time",
                          real_time_python=True)
    for passes, expected in ((0, "5000 milliseconds"), (1, "200 milliseconds")):
        job._compiled = Compiled(None, True, python_passes=passes)  # type: ignore[arg-type]
        writer = _Writer()
        configure(writer, job.context("/tmp/ck"))  # type: ignore[arg-type]
        assert writer.calls["trigger"] == {"realTime": expected}
    given = _pipeline().job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", "real_time",
                            real_time_python=True, checkpoint_interval="2 seconds")
    given._compiled = Compiled(None, True, python_passes=1)  # type: ignore[arg-type]
    writer = _Writer()
    configure(writer, given.context("/tmp/ck"))  # type: ignore[arg-type]
    assert writer.calls["trigger"] == {"realTime": "2000 milliseconds"}


@pytest.mark.parametrize("interval", ["99 ms", "0 seconds", "available_now", "soon"])
def test_a_checkpoint_interval_under_100_ms_or_not_a_duration_is_refused(
        interval: str) -> None:
    with pytest.raises(ConfigError, match="checkpoint_interval"):
        _pipeline().job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", "real_time",
                        real_time_python=True, checkpoint_interval=interval)
    with pytest.raises(ConfigError, match="checkpoint_interval"):
        _pipeline().job(Guarantee.AT_LEAST_ONCE, "/tmp/ck", checkpoint_interval=interval)


@pytest.mark.parametrize("typo", ["value.deserialzer", "key.deserialiser", "value.shema",
                                  "schema.registry.ulr", "basic.auth.user.inf"])
def test_a_misspelt_deserializer_property_is_refused_not_ignored(typo: str) -> None:
    props = {"bootstrap.servers": "127.0.0.1:9092", typo: "StringDeserializer"}
    with pytest.raises(ConfigError, match=f"unknown .*{typo}.*known: .*value.deserializer"):
        KafkaSources.kafka(props, "in")


def test_a_misspelt_serializer_property_is_refused_not_ignored() -> None:
    with pytest.raises(ConfigError, match="value.serialiser.*known: .*value.serializer"):
        KafkaSinks.kafka({"bootstrap.servers": "b:9092",
                          "value.serialiser": "StringSerializer"}, "out")


@pytest.mark.parametrize("option", ["value.serializer", "auto.register.schemas",
                                    "use.latest.version"])
def test_a_source_refuses_serializer_options(option: str) -> None:
    with pytest.raises(ConfigError, match=f"{option} is a serializer option"):
        KafkaSources.kafka({**PROPS, option: "true"}, "in")


@pytest.mark.parametrize("option", ["value.deserializer", "unknown.fields"])
def test_a_sink_refuses_deserializer_options(option: str) -> None:
    with pytest.raises(ConfigError, match=f"{option} is a deserializer option"):
        KafkaSinks.kafka({**OUT, option: "String"}, "out")


@pytest.mark.parametrize("guarantee", [Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE])
@pytest.mark.parametrize(("prop", "value", "why"), [
    ("acks", "1", "acks='1' cannot give"), ("acks", 0, "acks=0 cannot give"),
    ("enable.idempotence", "false", "enable.idempotence=false cannot give"),
    ("enable.idempotence", False, "enable.idempotence=false cannot give")])
def test_a_kafka_sink_refuses_producer_settings_that_break_the_guarantee(
        guarantee: Guarantee, prop: str, value: Any, why: str) -> None:
    p = Pipeline.create(name="t")
    p.read_from(KafkaSources.kafka(PROPS, "in")).write_to(
        KafkaSinks.kafka({**OUT, prop: value}, "out"))
    with pytest.raises(ConfigError, match=why):
        p.job(guarantee, "/tmp/ck")
    for fine in ("all", "-1"):  # and acks=all or NONE are fine
        q = Pipeline.create(name="t")
        q.read_from(KafkaSources.kafka(PROPS, "in")).write_to(
            KafkaSinks.kafka({**OUT, "acks": fine}, "out"))
        assert q.job(guarantee, "/tmp/ck").guarantee == guarantee
    assert p.job(Guarantee.NONE).guarantee == Guarantee.NONE


def test_a_kafka_source_refuses_read_uncommitted_under_exactly_once() -> None:
    def job(guarantee: Guarantee, sink_guarantee: str | None = None) -> Any:
        p = Pipeline.create(name="t")
        p.read_from(KafkaSources.kafka({**PROPS, "isolation.level": "read_uncommitted"},
                                       "in")).write_to(
            KafkaSinks.kafka(OUT, "out", guarantee=sink_guarantee))
        return p.job(guarantee, "/tmp/ck")

    with pytest.raises(ConfigError, match="isolation.level='read_uncommitted' cannot give"):
        job(Guarantee.EXACTLY_ONCE)
    assert job(Guarantee.AT_LEAST_ONCE).guarantee == Guarantee.AT_LEAST_ONCE
    assert job(Guarantee.EXACTLY_ONCE, "AT_LEAST_ONCE").guarantee == Guarantee.AT_LEAST_ONCE


@pytest.mark.parametrize("spelt", ["at_least_once", "At_Least_Once", "AT_LEAST_ONCE"])
def test_a_kafka_sink_guarantee_is_read_in_any_case(spelt: str) -> None:
    assert KafkaSinks.kafka(OUT, "out", guarantee=spelt).cap == Guarantee.AT_LEAST_ONCE


def test_a_guarantee_is_read_one_way_by_the_run_and_every_sink() -> None:
    """``Guarantee.parse`` is the one reading: the run's options and each sink refuse a
    wrong spelling with the choices, naming what was given."""
    from gridstream.pipeline import GridSinks, StoreSinks
    from gridstream.pipeline.run import RunOptions

    assert Guarantee.parse("exactly_once") is Guarantee.EXACTLY_ONCE
    assert Guarantee.parse(Guarantee.NONE) is Guarantee.NONE
    choices = "use one of NONE, AT_LEAST_ONCE, EXACTLY_ONCE"
    for build in (lambda: RunOptions.of("twice", "/tmp/ck", None),
                  lambda: KafkaSinks.kafka(OUT, "out", guarantee="twice"),
                  lambda: StoreSinks.parquet("/tmp/p", guarantee="twice")):
        with pytest.raises(ConfigError, match=f"^guarantee 'twice': {choices}$"):
            build()
    with pytest.raises(ConfigError, match=f"^grid sink 'm': guarantee 'twice': {choices}$"):
        GridSinks.map({"kind": "hazelcast"}, "m", guarantee="twice")


def test_real_time_checks_the_guarantee_the_sink_lowered() -> None:
    job = _pipeline(guarantee="AT_LEAST_ONCE").job(
        Guarantee.EXACTLY_ONCE, "/tmp/ck", "real_time", real_time_python=True)
    assert job.guarantee == Guarantee.AT_LEAST_ONCE


def test_a_kafka_source_bounds_each_micro_batch_by_default() -> None:
    """Unbounded, a backlog is one batch: one transaction of the exactly-once writer,
    which the broker aborts once it outlasts ``transaction.timeout.ms``."""
    from gridstream.pipeline.base import RunContext
    from gridstream.spark.kafka_source import MAX_OFFSETS_PER_TRIGGER

    context = RunContext("t", Guarantee.EXACTLY_ONCE, "/tmp/ck", trigger="5 seconds")
    assert KafkaSources.kafka(PROPS, "in").options(context)["maxOffsetsPerTrigger"] == str(
        MAX_OFFSETS_PER_TRIGGER) == "100000"
    bounded = KafkaSources.kafka(PROPS, "in", max_offsets_per_trigger=500)
    assert bounded.options(context)["maxOffsetsPerTrigger"] == "500"
    everything = KafkaSources.kafka(PROPS, "in", max_offsets_per_trigger=None)
    assert "maxOffsetsPerTrigger" not in everything.options(context)
    # Spark refuses the option in real-time mode, which reads without batches
    real_time = RunContext("t", Guarantee.AT_LEAST_ONCE, "/tmp/ck", trigger="real_time")
    assert "maxOffsetsPerTrigger" not in KafkaSources.kafka(PROPS, "in").options(real_time)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="max_offsets_per_trigger"):
            KafkaSources.kafka(PROPS, "in", max_offsets_per_trigger=bad)  # type: ignore[arg-type]


def test_a_step_schema_may_not_name_a_hidden_column_or_an_origin_part() -> None:
    """Names starting with ``_gs_`` are the pipeline's: a step's schema naming one is a
    ``ConfigError``, the origin's parts (``ORIGIN_PARTS``) among them."""
    from pyspark.sql.types import LongType, StructField, StructType

    from gridstream.pipeline.base import ORIGIN_PARTS
    from gridstream.pipeline.compile import _with_hidden_struct

    for name in ("_gs_where", *ORIGIN_PARTS):
        with pytest.raises(ConfigError, match=f"reserved: {name}"):
            _with_hidden_struct(StructType([StructField(name, LongType())]))

