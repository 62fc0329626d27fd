"""The JVM Avro plan of the store feeds: which writer schemas it knows, what it refuses,
and the ids a failure names (the decode itself runs on Spark: the integration test)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gridstream.errors import ConfigError
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import OperationEncoder
from gridstream.protocol.avro import AvroCodec, LocalSchemaRegistry, avro_schema
from gridstream.spark.avro_envelopes import AvroPlanner, EnvelopePlan, learned_ids

KIND = TypeDescriptor(name="Thing", id_property="id",
                      fixed=(PropertySpec("id", "str"), PropertySpec("n", "int")))


def test_local_ids_come_from_the_declared_types_and_the_schema_files(tmp_path: Path) -> None:
    planner = AvroPlanner(types={KIND.name: KIND})
    schema_id = LocalSchemaRegistry.schema_id(avro_schema(KIND))
    assert list(planner.plan.writers) == [schema_id]
    assert planner.plan.writers[schema_id][1] == KIND.fixed
    encoder = OperationEncoder(AvroCodec(LocalSchemaRegistry(tmp_path)))
    encoder.encode(Operation(OpType.WRITE, KIND.name, "a", 1, {"id": "a"}, 0, 0), KIND, "t")
    (tmp_path / "123.avsc").write_bytes(orjson.dumps({"type": "record", "name": "X",
                                                      "fields": []}))
    from_files = AvroPlanner(avro_schema_dir=str(tmp_path))
    assert list(from_files.plan.writers) == [schema_id]
    assert "not a gridstream envelope schema" in from_files.plan.refused[123]
    assert not from_files.learn({schema_id, 123})  # known already
    assert from_files.learn({77})
    assert from_files.plan.refused[77] == "unknown avro schema id 77"


def test_a_registry_plan_starts_empty_and_never_shows_the_password() -> None:
    planner = AvroPlanner(schema_registry_url="http://u:pw-secret-3@127.0.0.1:1/apis",
                          types={KIND.name: KIND})
    assert planner.plan.writers == {} and planner.plan.refused == {}
    assert "pw-secret-3" not in planner.describe() and "pw-secret-3" not in repr(planner)
    with pytest.raises(ConfigError, match="not both"):
        AvroPlanner(schema_registry_url="http://127.0.0.1:1", avro_schema_dir="/tmp/x")


def test_a_plan_refuses_what_is_not_an_envelope_schema() -> None:
    plan = EnvelopePlan()
    plan.add(5, None)
    plan.add(6, {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]})
    plan.add(7, avro_schema(KIND))
    assert plan.refused[5] == "unknown avro schema id 5"
    assert plan.refused[6].startswith("avro schema id 6: not a gridstream envelope schema")
    assert list(plan.writers) == [7] and plan.knows(5) and not plan.knows(8)
    assert plan.describe() == "ids 7"


def test_the_ids_a_failure_names() -> None:
    text = ("org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] "
            "gridstream.errors.NewSchemaError: value: schema id 42 is not in the plan "
            "... NewSchemaError: key: schema id 7 ...")
    assert learned_ids(text, "value") == {42}
    assert learned_ids(text, "key") == {7}
    assert learned_ids("no such failure", "value") == set()


def test_a_wrapped_new_schema_failure_is_still_learned() -> None:
    from gridstream.spark.avro_envelopes import causes

    try:
        try:
            raise RuntimeError("gridstream.errors.NewSchemaError: value: schema id 3 ...")
        except RuntimeError as inner:
            raise ValueError("writing change-log batch 0 failed") from inner
    except ValueError as outer:
        chain = causes(outer)
    assert [type(c) for c in chain] == [ValueError, RuntimeError]
    assert any("NewSchemaError" in str(c) for c in chain)


def test_a_schema_of_an_envelopes_names_but_other_types_is_refused(tmp_path: Path) -> None:
    schema = avro_schema(KIND)
    fields = [dict(f, type="string") if f["name"] == "id" else f for f in schema["fields"]]
    plan = EnvelopePlan()
    plan.add(9, {**schema, "fields": fields})
    assert "field types are not those of an envelope schema" in plan.refused[9]
    (tmp_path / "10.avsc").write_text("{not json")
    planner = AvroPlanner(avro_schema_dir=str(tmp_path))
    assert "not JSON" in planner.plan.refused[10]


def test_registry_text_never_reaches_sparks_variable_substitution() -> None:
    from gridstream.spark.avro_envelopes import _literal

    assert _literal("${env:SECRET} it's") == "'\\u0024{env:SECRET} it\\'s'"
