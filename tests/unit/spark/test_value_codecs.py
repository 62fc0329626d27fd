"""The transcoding of MessagePack and Avro envelopes into the JSON the JVM decodes."""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from gridstream.errors import ConfigError
from gridstream.feeds.config import FeedConfig
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import OperationEncoder
from gridstream.protocol.avro import AvroCodec, LocalSchemaRegistry
from gridstream.spark.envelope import _error
from gridstream.spark.types import TypeRegistry
from gridstream.spark.value_codecs import CODEC_ERROR, JSON_TEXT, Transcoder

PERSON = TypeDescriptor(
    name="Person", id_property="id",
    fixed=(PropertySpec("id", "str"), PropertySpec("born", "datetime"),
           PropertySpec("day", "date"), PropertySpec("balance", "decimal"),
           PropertySpec("photo", "bytes"), PropertySpec("tags", "set"),
           PropertySpec("items", "list"), PropertySpec("score", "float"),
           PropertySpec("address", "object", (PropertySpec("city", "str"),))))

OPS = [
    Operation(OpType.WRITE, "Person", "p-1", 7, {
        "id": "p-1", "born": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
        "day": dt.date(2024, 2, 29), "balance": Decimal("10.50"), "photo": b"\x00\xff",
        "tags": ["b", "a"], "items": [1, {"x": None}], "score": 2.5,
        "address": {"city": "Oslo"}, "dynamic": {"deep": [1.5, "s"]}}, 1, 1000, "t-1"),
    Operation(OpType.PARTIAL_UPDATE, "Person", 42, 8, {"score": None, "items": []}, 0, 1001),
    Operation(OpType.CHANGE, "Person", "p-1", 9, {"address.city": "Rome"}, 1, 1002,
              removed=("dynamic",)),
    Operation(OpType.REMOVE, "Person", "p-1", 10, None, 1, 1003),
]


def _json(op: Operation) -> bytes:
    return OperationEncoder().encode(op, PERSON, "people").value


@pytest.mark.parametrize("codec", ["msgpack", "avro"])
def test_the_json_is_the_json_codecs_own(codec: str, tmp_path: Any) -> None:
    if codec == "avro":
        encoder = OperationEncoder(AvroCodec(LocalSchemaRegistry(tmp_path)))
        transcoder = Transcoder("avro", avro_schema_dir=str(tmp_path))
    else:
        encoder = OperationEncoder("msgpack")
        transcoder = Transcoder("msgpack")
    for op in OPS:
        assert transcoder.json_of(encoder.encode(op, PERSON, "people").value) == _json(op)


def test_avro_local_ids_derive_from_the_declared_types() -> None:
    encoder = OperationEncoder(AvroCodec())
    types = TypeRegistry.of([PERSON]).to_payload()
    transcoder = pickle.loads(pickle.dumps(Transcoder("avro", types=types)))
    assert transcoder.json_of(encoder.encode(OPS[0], PERSON, "people").value) == _json(OPS[0])
    with pytest.raises(Exception, match="unknown avro schema id"):
        Transcoder("avro").json_of(encoder.encode(OPS[0], PERSON, "people").value)


def test_an_arrow_batch_gets_the_json_or_the_reason() -> None:
    good = OperationEncoder("msgpack").encode(OPS[0], PERSON, "people").value
    batch = pa.RecordBatch.from_pydict({"offset": [0, 1, 2, 3],
                                        "value": [good, None, b"\xc1", b"\x01"]})
    [out] = list(Transcoder("msgpack")(iter([batch])))
    assert out.schema.names == ["offset", "value", JSON_TEXT, CODEC_ERROR]
    texts, errors = out.column(JSON_TEXT).to_pylist(), out.column(CODEC_ERROR).to_pylist()
    assert texts[0] == _json(OPS[0]) and errors[0] is None
    assert texts[1] is None and errors[1] is None  # a tombstone: the JVM checks name it
    assert texts[2] is None and errors[2].startswith("msgpack value does not decode")
    assert texts[3] is None and "envelope must be an object" in errors[3]
    avro = Transcoder("avro")
    [out] = list(avro(iter([pa.RecordBatch.from_pydict({"value": [b"\x02abcd"]})])))
    assert "magic byte 0 expected" in out.column(CODEC_ERROR).to_pylist()[0]


def test_the_secret_stays_out_of_reprs_and_descriptions() -> None:
    transcoder = Transcoder("avro", schema_registry_url="http://u:pw-9@127.0.0.1:1/x",
                            basic_auth_user_info="user:s3cret")
    for text in (repr(transcoder), transcoder.describe()):
        assert "pw-9" not in text and "s3cret" not in text and "127.0.0.1:1/x" in text


def test_the_error_sql_puts_the_codec_reason_after_the_tombstone_check() -> None:
    text = _error(True, "avro", CODEC_ERROR)
    assert text.index("_no_value") < text.index(f"`{CODEC_ERROR}` IS NOT NULL") < \
        text.index("_e IS NULL")
    assert "!= 'avro'" in text and "record codec is not avro" in text


def _config(**extra: Any) -> FeedConfig:
    return FeedConfig.model_validate({"name": "p", "topics": ["t"], "checkpoint": "/c",
                                          "sink": {"kind": "parquet", "path": "/p"}, **extra})


def test_the_registry_options_need_the_avro_codec() -> None:
    with pytest.raises(ValueError, match="only used with codec 'avro'"):
        _config(codec="msgpack", **{"schema.registry.url": "http://r"})
    with pytest.raises(ValueError, match="only used with schema_registry_url"):
        _config(codec="avro", **{"basic.auth.user.info": "u:p"})
    with pytest.raises(ValueError, match="not both"):
        _config(codec="avro", schema_registry_url="http://r", avro_schema_dir="/d")
    with pytest.raises(ValueError, match="codec"):
        _config(codec="protobuf")
    config = _config(codec="avro", **{"schema.registry.url": "http://u:pw-2@r",
                                      "basic.auth.user.info": "u:s3cret"})
    assert "s3cret" not in repr(config) and "pw-2" not in repr(config)
    with pytest.raises(ConfigError, match="only msgpack and avro"):
        Transcoder("json")


def test_a_toml_pipeline_reads_the_codec_and_the_registry(tmp_path: Any) -> None:
    from gridstream.run.config import build_feeds, load_config

    path = tmp_path / "p.toml"
    path.write_text('[[pipeline]]\nname = "p"\ntopics = ["people"]\ncodec = "avro"\n'
                    '"schema.registry.url" = "http://127.0.0.1:1/apis/ccompat/v7"\n'
                    '"basic.auth.user.info" = "user:s3cret"\ncheckpoint = "/tmp/c"\n'
                    'sink = { kind = "sql", url = "sqlite:///people.db" }\n')
    [pipeline] = build_feeds(load_config(path))
    assert pipeline.transcoder is None and pipeline.avro is not None  # in the JVM
    assert ("avro values (registry http://127.0.0.1:1/apis/ccompat/v7) decoded in the JVM"
            in pipeline.describe())
    assert "s3cret" not in pipeline.describe()
    path.write_text(path.read_text().replace('codec = "avro"', 'codec = "msgpack"'))
    with pytest.raises(ConfigError, match="only used with codec 'avro'"):
        load_config(path)
