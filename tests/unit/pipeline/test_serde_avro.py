"""Confluent-framed Avro serializers against a registry in memory."""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path
from typing import Any

import fastavro
import orjson
import pytest

from gridstream.errors import CodecError, ConfigError
from gridstream.pipeline.serde import deserializer, serializer
from gridstream.pipeline.serde._avro import AvroDeserializer, AvroSerializer
from gridstream.pipeline.serde._avro_types import avro_ddl
from tests.support.fake_registry import FakeRegistry

URL = "http://user:s3cret@registry:8081"
V1 = {"type": "record", "name": "Log", "namespace": "gs.test", "fields": [
    {"name": "service", "type": "string"}, {"name": "n", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"],
                       {"name": "level", "type": ["null", "string"], "default": None}]}


def _props(**more: Any) -> dict[str, Any]:
    return {"schema.registry.url": URL, "value.serializer": "KafkaAvroSerializer",
            "value.deserializer": "io.confluent.kafka.serializers.KafkaAvroDeserializer",
            "key.serializer": "Avro", "key.deserializer": "Avro", **more}


def _ser(registry: FakeRegistry, more: dict[str, Any] | None = None, *,
         is_key: bool = False) -> AvroSerializer:
    return AvroSerializer.from_props(_props(**(more or {})), is_key=is_key, registry=registry)


def _de(registry: FakeRegistry, more: dict[str, Any] | None = None, *,
        is_key: bool = False) -> AvroDeserializer:
    return AvroDeserializer.from_props(_props(**(more or {})), is_key=is_key,
                                       registry=registry)


def _framed(schema_id: int, schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def test_names_select_avro() -> None:
    assert isinstance(deserializer(_props(), is_key=False), AvroDeserializer)
    assert isinstance(serializer(_props(), is_key=True), AvroSerializer)


def test_round_trip_registers_under_the_topic_subject_and_frames_the_id() -> None:
    registry = FakeRegistry()
    data = _ser(registry, {"value.schema": orjson.dumps(V1).decode()}).python(
        "logs", {"service": "api", "n": -3})
    assert data is not None and data[0] == 0
    (schema_id,) = struct.unpack(">I", data[1:5])
    assert registry.subjects == {"logs-value": [schema_id]}
    assert data == _framed(schema_id, V1, {"service": "api", "n": -3})
    assert _de(registry).python("logs", data) == {"service": "api", "n": -3}
    key = _ser(registry, is_key=True).python("logs", "k1")
    assert "logs-key" in registry.subjects
    assert _de(registry, is_key=True).python("logs", key) == "k1"


@pytest.mark.parametrize(("strategy", "subject"), [
    ("record", "gs.test.Log"), ("topic_record", "logs-gs.test.Log"),
    ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "logs-gs.test.Log"),
    ("TopicNameStrategy", "logs-value")])
def test_subject_name_strategies(strategy: str, subject: str) -> None:
    registry = FakeRegistry()
    _ser(registry, {"value.schema": orjson.dumps(V1).decode(),
                      "value.subject.name.strategy": strategy}).python(
        "logs", {"service": "a", "n": 1})
    assert list(registry.subjects) == [subject]


def test_declared_schema_from_an_avsc_file(tmp_path: Path) -> None:
    path = tmp_path / "log.avsc"
    path.write_bytes(orjson.dumps(V1))
    registry = FakeRegistry()
    data = _ser(registry, {"value.schema": str(path)}).python("t", {"service": "a", "n": 1})
    assert _de(registry).python("t", data) == {"service": "a", "n": 1}


def test_registration_is_cached_and_a_refusal_too() -> None:
    registry = FakeRegistry(refuse='"Log"')
    ser = _ser(registry, {"value.schema": orjson.dumps(V1).decode()})
    for _ in range(3):
        with pytest.raises(CodecError, match="subject 'logs-value'.*compatibility rule"):
            ser.python("logs", {"service": "a", "n": 1})
    assert [c for c, _ in registry.calls].count("register") == 1
    ok = FakeRegistry()
    ser = _ser(ok, {"value.schema": orjson.dumps(V1).decode()})
    for n in range(3):
        ser.python("logs", {"service": "a", "n": n})
    assert [c for c, _ in ok.calls].count("register") == 1


def test_auto_register_false_and_use_latest_version() -> None:
    registry = FakeRegistry()
    text = orjson.dumps(V1).decode()
    with pytest.raises(CodecError, match="holds no such schema"):
        _ser(registry, {"value.schema": text, "auto.register.schemas": "false"}).python(
            "t", {"service": "a", "n": 1})
    assert registry.subjects == {}
    schema_id = registry.register("t-value", text)
    data = _ser(registry, {"value.schema": text, "auto.register.schemas": False}).python(
        "t", {"service": "a", "n": 1})
    assert data is not None and data[1:5] == struct.pack(">I", schema_id)
    latest = _ser(registry, {"use.latest.version": "true"}).python(
        "t", {"service": "b", "n": 2})
    assert latest is not None and latest[1:5] == struct.pack(">I", schema_id)
    with pytest.raises(CodecError, match="has no schema"):
        _ser(registry, {"use.latest.version": "true"}).python("other", {"n": 1})
    with pytest.raises(ConfigError, match="needs value.schema"):
        _ser(registry, {"use.latest.version": "true", "value.subject.name.strategy": "record"})


def test_values_that_do_not_fit_are_codec_errors() -> None:
    ser = _ser(FakeRegistry(), {"value.schema": orjson.dumps(V1).decode()})
    with pytest.raises(CodecError, match="does not fit"):
        ser.python("t", {"service": "a", "n": "x"})
    with pytest.raises(CodecError, match="does not fit"):  # undeclared field: not dropped
        ser.python("t", {"service": "a", "n": 1, "extra": True})
    with pytest.raises(CodecError, match="needs a declared value.schema"):
        _ser(FakeRegistry()).python("t", {"service": "a"})


def test_decode_errors_name_the_reason() -> None:
    registry = FakeRegistry()
    schema_id = registry.register("t-value", orjson.dumps(V1).decode())
    de = _de(registry)
    with pytest.raises(CodecError, match="magic byte 1"):
        de.python("t", b"\x01\x00\x00\x00\x01\x02")
    with pytest.raises(CodecError, match="5-byte header"):
        de.python("t", b"\x00\x00")
    with pytest.raises(CodecError, match="schema id 99 is unknown"):
        de.python("t", struct.pack(">bI", 0, 99) + b"\x02")
    with pytest.raises(CodecError, match=f"does not match schema id {schema_id}"):
        de.python("t", struct.pack(">bI", 0, schema_id) + b"\x02")
    good = _framed(schema_id, V1, {"service": "a", "n": 1})
    with pytest.raises(CodecError, match="bytes beyond the record"):
        de.python("t", good + b"\x00")


def test_new_ids_are_looked_up_once_each() -> None:
    registry = FakeRegistry()
    one = registry.register("t-value", orjson.dumps(V1).decode())
    de = _de(registry)
    assert de.python("t", _framed(one, V1, {"service": "a", "n": 1}))["n"] == 1
    two = registry.register("t-value", orjson.dumps(V2).decode())  # while running
    for _ in range(3):
        assert de.python("t", _framed(two, V2, {"service": "a", "n": 2, "level": "W"})) == \
            {"service": "a", "n": 2, "level": "W"}
    assert [c for c in registry.calls if c[0] == "schema"] == [("schema", one), ("schema", two)]


def test_declared_reader_schema_missing_fields_and_extra() -> None:
    registry = FakeRegistry()
    old = registry.register("t-value", orjson.dumps(V1).decode())
    new = registry.register("t-value", orjson.dumps(
        {**V2, "fields": [*V2["fields"], {"name": "tags", "type": {
            "type": "array", "items": "string"}, "default": []}]}).decode())
    reader = orjson.dumps(V2).decode()
    de = _de(registry, {"value.schema": reader})
    assert de.python("t", _framed(old, V1, {"service": "a", "n": 1})) == \
        {"service": "a", "n": 1, "level": None, "_extra": {}}
    newer = {**V2, "fields": [*V2["fields"], {"name": "tags", "type": {
        "type": "array", "items": "string"}, "default": []}]}
    data = _framed(new, newer, {"service": "b", "n": 2, "level": "E", "tags": ["x"]})
    assert de.python("t", data) == {"service": "b", "n": 2, "level": "E",
                                    "_extra": {"tags": '["x"]'}}
    dropped = _de(registry, {"value.schema": reader, "unknown.fields": "drop"})
    assert dropped.python("t", data) == {"service": "b", "n": 2, "level": "E"}
    assert de.ddl == ("struct<`service`: string, `n`: bigint, `level`: string, "
                      "_extra: map<string, string>>")


def test_a_writer_the_reader_cannot_resolve_is_a_decode_error() -> None:
    registry = FakeRegistry()
    wrong = {**V1, "fields": [{"name": "service", "type": "long"},
                              {"name": "n", "type": "long"}]}
    schema_id = registry.register("t-value", orjson.dumps(wrong).decode())
    de = _de(registry, {"value.schema": orjson.dumps(V1).decode()})
    with pytest.raises(CodecError, match=f"schema id {schema_id} cannot be read as the "
                                         "declared value.schema"):
        de.python("t", _framed(schema_id, wrong, {"service": 1, "n": 1}))


def test_secrets_stay_out_of_reprs_and_pickles_travel_without_clients() -> None:
    props = _props(**{"basic.auth.user.info": "alice:pa55"})
    de = deserializer(props, is_key=False)
    ser = serializer(props, is_key=False)
    for obj in (de, ser):
        assert "pa55" not in repr(obj) and "s3cret" not in repr(obj)
        assert "pa55" not in repr(vars(obj))
        assert "pa55" not in repr(vars(getattr(obj, "settings")))  # noqa: B009
    assert isinstance(de, AvroDeserializer)
    de._cache_writers[1] = object()  # type: ignore[assignment]
    copy = pickle.loads(pickle.dumps(de))
    assert copy._cache_writers == {} and copy._registry is None
    assert copy.settings.user_info is not None and copy.settings.user_info.value == "alice:pa55"


@pytest.mark.parametrize(("props", "match"), [
    ({"schema.registry.url": None}, "needs schema.registry.url"),
    ({"value.subject.name.strategy": "bogus"}, "not a subject name strategy"),
    ({"auto.register.schemas": "maybe"}, "true or false"),
    ({"unknown.fields": "keep"}, "extra or drop"),
    ({"value.schema": "{nope"}, "not JSON"),
    ({"value.schema": "/no/such.avsc"}, "cannot read"),
    ({"value.schema": '{"type": "record", "name": "R", "fields": [{"name": "a", '
                      '"type": "nope"}]}'}, "not a valid Avro schema"),
])
def test_config_errors(props: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        deserializer(_props(**props), is_key=False)


def test_avro_ddl() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": ["null", "long"]},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                               "scale": 2}},
        {"name": "m", "type": {"type": "map", "values": "double"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
        {"name": "again", "type": "E"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    assert avro_ddl(schema, extra=False) == (
        "struct<`a`: bigint, `d`: decimal(9,2), `m`: map<string, double>, `e`: string, "
        "`again`: string, `ts`: timestamp>")
    with pytest.raises(ConfigError, match="union"):
        avro_ddl(["long", "string"], extra=False)


# ------------------------------------------------------------------ the JVM plan


def test_the_jvm_plan_reads_the_topics_subjects_and_the_learned_ids() -> None:
    """``prepare`` lists every version of the topics' subjects; ids a re-plan learned
    join them (a schema of another subject), or become error rows (unknown, not Avro);
    without topics, a declared schema or with extra fields kept, Python decodes and
    says why."""
    registry = FakeRegistry()
    one = registry.register("logs-value", orjson.dumps(V1).decode())
    two = registry.register("logs-value", orjson.dumps(V2).decode())
    other = registry.register("other-value", orjson.dumps({**V2, "fields": [
        *V2["fields"], {"name": "host", "type": "string", "default": "?"}]}).decode())
    de = _de(registry, {"value.schema": orjson.dumps(V2).decode(), "unknown.fields": "drop"})
    de.for_topics(["logs"])
    de.prepare()
    plan = de._plan
    assert plan is not None and de.why_python == ""
    assert sorted(plan.writers) == [one, two] and plan.subjects == ("logs-value",)
    assert de.learn({other, 999}) and not de.learn({999})
    de.prepare()
    assert de._plan is not None and sorted(de._plan.writers) == [one, two, other]
    assert de._plan.refused == {999: "value: schema id 999 is unknown to the registry"}

    keep = _de(registry, {"value.schema": orjson.dumps(V2).decode()})  # extra kept
    keep.for_topics(["logs"])
    keep.learn({other})
    keep.prepare()
    assert keep._plan is None and keep.why_python == (
        f"schema id {other} has fields the declared value.schema lacks, which "
        "unknown.fields=extra keeps in _extra")
    for more, topics, why in (({}, ["logs"], "no declared value.schema"),
                              ({"value.schema": orjson.dumps(V2).decode()}, None,
                               "topics by pattern: the subjects are not known before the "
                               "query")):
        python = _de(registry, more)
        python.for_topics(topics)
        python.prepare()
        assert python._plan is None and python.why_python == why


def test_the_jvm_encode_is_skipped_for_a_schema_spark_cannot_type_or_the_registry_refuses(
        ) -> None:
    """A recursive record has no Spark type and a refused schema no id: the Python
    pass encodes (each record then an encode error, by the policy), the query starts."""
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}]}
    assert _ser(FakeRegistry(), {"value.schema": orjson.dumps(node).decode()}).jvm_type is None
    refusing = FakeRegistry(refuse="service")
    ser = _ser(refusing, {"value.schema": orjson.dumps(V1).decode()})
    assert ser.jvm_type == avro_ddl(V1, extra=False)
    assert ser.jvm(object(), "logs") is None  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="refused"):
        ser.python("logs", {"service": "a", "n": 1})
