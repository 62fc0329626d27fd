"""Connector converters: encode and decode rates (records/s); prints JSON.

    python benchmarks/bench_connect_converters.py [--records 10000] [--smoke]

Needs the stack's registry (``gridstream stack up --services registry``). Baseline of
the same run: confluent-kafka's ``AvroSerializer`` / ``AvroDeserializer`` on the same
records and schema. ``--smoke``: 20 records (seconds; the figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from benchmarks import _smoke
from gridstream.connect.config import ConverterConfig
from gridstream.connect.converters import build_converter

URL = "http://127.0.0.1:8081/apis/ccompat/v7"
SCHEMA = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "total", "type": "double"}, {"name": "paid", "type": "boolean"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}},
    {"name": "items", "type": {"type": "array", "items": "long"}}]}


def _values(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "customer": f"c-{i % 977}", "total": i * 1.25, "paid": i % 2 == 0,
             "note": None if i % 3 else "fragile",
             "address": {"city": "Lyon", "zip": f"{69000 + i % 9}"},
             "items": [i, i + 1, i + 2]} for i in range(n)]


def _rate(n: int, fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return round(n / (time.perf_counter() - start))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    n = _smoke.parse_args(parser, argv, records=20).records
    values = _values(n)
    results: dict[str, Any] = {"records": n}
    with tempfile.TemporaryDirectory() as tmp:
        avsc = Path(tmp) / "order.avsc"
        avsc.write_bytes(orjson.dumps(SCHEMA))
        configs = {
            "json": ConverterConfig(),
            "json_schema": ConverterConfig(value="json_schema"),
            "avro_inferred": ConverterConfig(value="avro", schema_registry_url=URL),
            "avro_declared": ConverterConfig(value="avro", schema_registry_url=URL,
                                             avro_schemas={"orders": str(avsc)}),
        }
        for name, config in configs.items():
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            converter = build_converter(config)
            converter.encode_value(topic, "orders", values[0])  # registry calls: once
            encoded: list[bytes | None] = []
            encode = _rate(n, lambda c=converter, t=topic, out=encoded: out.extend(
                c.encode_value(t, "orders", v) for v in values))
            reader = build_converter(config)
            reader.decode_value(topic, encoded[0])
            decode = _rate(n, lambda r=reader, t=topic, data=encoded: [
                r.decode_value(t, d) for d in data])
            results[name] = {"encode_per_s": encode, "decode_per_s": decode}
    client = SchemaRegistryClient({"url": URL})
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = AvroSerializer(client, orjson.dumps(SCHEMA).decode())
    deserializer = AvroDeserializer(client)
    first = serializer(values[0], ctx)
    deserializer(first, ctx)
    out: list[bytes | None] = []
    encode = _rate(n, lambda: out.extend(serializer(v, ctx) for v in values))
    decode = _rate(n, lambda: [deserializer(d, ctx) for d in out])
    results["confluent_avro"] = {"encode_per_s": encode, "decode_per_s": decode}
    base = results["confluent_avro"]
    for name in ("avro_inferred", "avro_declared"):
        results[name]["encode_vs_confluent"] = round(
            results[name]["encode_per_s"] / base["encode_per_s"], 2)
        results[name]["decode_vs_confluent"] = round(
            results[name]["decode_per_s"] / base["decode_per_s"], 2)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
