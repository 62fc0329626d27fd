"""The pipeline's fused Python pass alone, without Spark (CPU time of one core, not a
whole-process timing): ``ItemPass.batch`` of the benchmark pipeline (String key and
value, ``map(upper_entry)``, the Kafka sink's encode) over one Arrow batch of
``--rows`` rows shaped as the JVM hands it over (the hidden columns included).
Prints µs per record; ``--profile`` adds cProfile's top functions.

Usage: python benchmarks/_pipeline_pass.py [--rows 10000] [--repeat 30] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._pipeline_map import upper_entry


def _tail(sink: Any) -> tuple[Any, Any]:
    """The pass's tail and column encode as ``compile`` builds them for this sink (this
    version's rule)."""
    from gridstream.pipeline import compile as compiled

    halves = getattr(sink, "column_encoder", lambda: None)()
    if halves is not None:
        return halves
    rows = getattr(sink, "row_encoder", lambda: None)() or getattr(sink, "encode_row", None)
    return (rows if rows is not None else compiled._Encoded(sink.encode, ("key", "value")),
            None)


def main() -> int:
    import pyarrow as pa

    from gridstream.pipeline import KafkaSinks
    from gridstream.pipeline.passes import ItemPass
    from gridstream.pipeline.serde import ArrowDecode
    from gridstream.pipeline.serde._basic import StringDeserializer

    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    sink = KafkaSinks.kafka({"bootstrap.servers": "127.0.0.1:9092",
                             "key.serializer": "StringSerializer",
                             "value.serializer": "StringSerializer"}, "out")
    # as the compiler gives it under errors="fail" (the default): the origin's parts in
    # (partition and offset: one topic), for error rows; out, the sink's columns alone
    # (nothing after the pass reads the rest)
    schema = pa.schema([("key", pa.binary()), ("value", pa.binary())])
    tail, encode = _tail(sink)
    fused = ItemPass(pipeline="bench", errors="fail", shape="entry", decode=None,
                     steps=[("map", upper_entry, "map#1")], tail=tail,
                     tail_stage="encode", schema=schema, head=ArrowDecode(
                         StringDeserializer(is_key=True), StringDeserializer(is_key=False)),
                     origin_topic="in", **({} if encode is None else {"encode": encode}))
    n = args.rows
    batch = pa.RecordBatch.from_arrays([
        pa.array([f"{i:012d}".encode() for i in range(n)], pa.binary()),
        pa.array([(f"{i:012d}-" + "abcdefghij" * 8).encode() for i in range(n)], pa.binary()),
        pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64())],
        names=["key", "value", "_gs_origin_partition", "_gs_origin_offset"])
    for _ in range(3):
        fused.batch(batch)
    began = time.process_time()
    for _ in range(args.repeat):
        fused.batch(batch)
    per_record = (time.process_time() - began) / args.repeat / n * 1e6
    print(f"{per_record:.2f} µs per record (CPU, one core)")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [fused.batch(batch) for _ in range(10)])
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
