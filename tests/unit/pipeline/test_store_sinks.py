"""StoreSinks: the change rows they accept, what they refuse, their options."""

from __future__ import annotations

import pickle
from typing import Any

import orjson
import pytest

from gridstream.errors import CodecError, ConfigError
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.pipeline import Guarantee, StoreSinks
from gridstream.protocol import Envelope, OperationEncoder
from gridstream.protocol.avro import AvroCodec, LocalSchemaRegistry

PERSON = TypeDescriptor(name="Person", id_property="id",
                        fixed=(PropertySpec("id", "str"), PropertySpec("tags", "set")))
OP = Operation(OpType.CHANGE, "Person", 7, 12, {"tags": ["b", "a"], "x": b"\x01"}, 2, 99,
               "t-1", ("old",))
ROW = {"op": "CHANGE", "type": "Person", "id": "7", "id_int": True, "version": 12,
       "txn": "t-1", "ts": 99, "partition": 2, "data": '{"tags":["b","a"],"x":"AQ=="}',
       "removed": ["old"]}


def _sink(**options: Any) -> Any:
    return StoreSinks.sql("sqlite:///unused.db", [PERSON], **options)


def test_every_form_of_a_change_row_encodes_to_the_same_columns(tmp_path: Any) -> None:
    sink = _sink()
    wire = OperationEncoder().encode(OP, PERSON, "t").value
    for item in (OP, Envelope.from_operation(OP), orjson.loads(wire), wire, (b"7", wire),
                 {**orjson.loads(wire), "data": orjson.loads(wire)["data"]},
                 {**orjson.loads(wire), "data": orjson.dumps(orjson.loads(wire)["data"])
                  .decode()}):
        assert sink.encode(item) == ROW, item
    assert set(ROW) == {c.split(" ")[0].strip("`") for c in sink.columns().split(", ")}
    msgpack = OperationEncoder("msgpack").encode(OP, PERSON, "t").value
    assert _sink(codec="msgpack").encode(msgpack) == ROW
    avro = OperationEncoder(AvroCodec(LocalSchemaRegistry(tmp_path))).encode(OP, PERSON, "t")
    assert _sink(codec="avro", avro_schema_dir=str(tmp_path)).encode(avro.value) == ROW
    assert _sink(codec="avro").encode(avro.value) == ROW  # local ids from the declared types


def test_a_string_id_stays_a_string() -> None:
    row = _sink().encode({"op": "WRITE", "type": "T", "id": "7", "version": 1, "ts": 1,
                          "partition": 0, "data": {"id": "7"}})
    assert (row["id"], row["id_int"], row["data"], row["removed"]) == ("7", False,
                                                                       '{"id":"7"}', [])


@pytest.mark.parametrize("item", [
    "text", 42, {"op": "EXPLODE", "type": "T", "id": 1, "version": 1, "ts": 1, "partition": 0},
    {"op": "WRITE", "type": "T", "id": 1, "version": 1, "ts": 1, "partition": 0,
     "data": "{not json"},
    b"not json", {"op": "WRITE", "type": "T", "id": 1.5, "version": 1, "ts": 1,
                  "partition": 0},
])
def test_what_is_not_a_change_row_is_a_codec_error(item: Any) -> None:
    with pytest.raises(CodecError):
        _sink().encode(item)
    with pytest.raises(CodecError, match="magic byte"):
        _sink(codec="avro").encode(b"\x05abc")


def test_bad_options_are_config_errors_and_secrets_stay_hidden() -> None:
    with pytest.raises(ConfigError, match="store sink: sql.url"):
        StoreSinks.sql("mysql://h/db")
    with pytest.raises(ConfigError, match="kind"):
        StoreSinks.from_config({"kind": "excel", "path": "x"})
    with pytest.raises(ConfigError, match="codec 'yaml'"):
        _sink(codec="yaml")
    with pytest.raises(ConfigError, match="only used with codec 'avro'"):
        _sink(schema_registry_url="http://r")
    with pytest.raises(ConfigError, match="guarantee"):
        _sink(guarantee="twice")
    assert _sink(guarantee="at_least_once").cap == Guarantee.AT_LEAST_ONCE
    sink = StoreSinks.sql("postgresql://u:pw-7@127.0.0.1:1/db", codec="avro",
                          schema_registry_url="http://v:pw-8@127.0.0.1:2/r",
                          basic_auth_user_info="user:s3cret")
    for secret in ("pw-7", "pw-8", "s3cret"):
        assert secret not in sink.describe()
    assert "127.0.0.1:2/r" in sink.describe()
    pickled = pickle.dumps(sink)  # to the executors: no driver connection, no store password
    assert b"pw-7" not in pickled
    shipped = pickle.loads(pickled)
    assert shipped._sink is None and shipped.config is None
    with pytest.raises(CodecError, match="magic byte"):
        shipped.encode(b"\x07")


def test_each_store_kind_has_a_factory(tmp_path: Any) -> None:
    assert StoreSinks.delta(str(tmp_path)).config.kind == "delta"
    assert StoreSinks.parquet(str(tmp_path)).config.kind == "parquet"
    assert StoreSinks.cassandra(keyspace="ks").config.kind == "cassandra"
    assert StoreSinks.from_config({"kind": "sql", "url": "sqlite:///x.db"}).config.kind == "sql"
