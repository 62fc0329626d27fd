"""Mirror throughput against the raw confluent-kafka producer, and write→visible latency.

1. Throughput: N single-operation bulks of ~200-byte entries, mirrored exactly-once
   (one Kafka transaction per batch) and at-least-once, against a raw idempotent
   producer sending the very same keys, values and headers in the same run.
2. Latency: a space is written at a fixed rate while ``python -m gridstream.mirror`` runs
   as a separate process; a read_committed consumer, in a third process (so that it
   does not share an interpreter lock with the writer), measures the time from the
   space's commit timestamp to the record being visible in Kafka (p50/p99). By default
   (``--consumer receipt``) each record is stamped when ``poll()`` hands it over; the
   records are decoded and checked after the measurement (decoding them in the loop
   would delay the stamps of the records behind them in the same fetch).
   ``--consumer batch`` is the older measure: ``OperationConsumer`` batches of up to
   1000 records (5 ms timeout), stamped after the whole batch was decoded, which adds
   the batch wait and the decoding of the records before it.

Prints one JSON line. Usage:
python benchmarks/bench_mirror.py [--ops N] [--repeat 3] [--rate R] [--seconds S]
    [--latency-repeat 3] [--consumer receipt|batch] [--latency-only] [--mirror-arg=ARG ...]
(``--mirror-arg`` passes an argument through to ``python -m gridstream.mirror``,
e.g. ``--mirror-arg=-Xlinger.ms=1``.)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from gridstream import stack
from gridstream.consumer import OperationConsumer
from gridstream.mirror import PRODUCER_DEFAULTS, InMemoryLog, KafkaSyncEndpoint, Mirror
from gridstream.model import SpaceDocument
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import OperationDecoder, OperationEncoder
from gridstream.space import Space

REPO = Path(__file__).resolve().parents[1]
FIXED = (PropertySpec("id", "str"), PropertySpec("name", "str"), PropertySpec("qty", "int"),
         PropertySpec("note", "str"))


def _descriptor(topic: str) -> TypeDescriptor:
    return TypeDescriptor(name="Item", id_property="id", topic=topic, fixed=FIXED)


def _entry(i: int) -> dict[str, Any]:
    return {"id": f"item-{i % 10_000}", "name": f"name-{i}", "qty": i % 97, "note": "n" * 20}


def _log(topic: str, ops: int) -> InMemoryLog:
    log = InMemoryLog([_descriptor(topic)])
    for i in range(ops):
        log.append([Operation(OpType.WRITE, "Item", f"item-{i % 10_000}", 0, _entry(i),
                              i % 4, 0)])
    return log


def _mirror_rate(bootstrap: str, topic: str, ops: int, exactly_once: bool) -> dict[str, float]:
    log = _log(topic, ops)
    endpoint = KafkaSyncEndpoint(bootstrap, exactly_once=exactly_once)
    mirror = Mirror(log, endpoint, name=f"bench-{uuid.uuid4().hex[:8]}",
                    max_batch_operations=10_000, max_batch_ms=0)
    mirror.open()
    started = time.perf_counter()
    while mirror.run_once():
        pass
    elapsed = time.perf_counter() - started
    metrics = mirror.metrics()
    mirror.stop()
    return {"ops_per_s": ops / elapsed, "batches": metrics.batches_total}


def _raw_rate(bootstrap: str, topic: str, ops: int) -> dict[str, float]:
    log = _log(topic, ops)
    encoder = OperationEncoder()
    descriptor = _descriptor(topic)
    messages = [encoder.encode(op, descriptor, topic)
                for bulk in log.read(0, ops) for op in bulk.operations]
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS})
    started = time.perf_counter()
    for m in messages:
        while True:
            try:
                producer.produce(m.topic, m.value, m.key, timestamp=m.timestamp_ms,
                                 headers=list(m.headers))
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    elapsed = time.perf_counter() - started
    size = statistics.mean(len(m.value) for m in messages)
    return {"ops_per_s": ops / elapsed, "value_bytes": size}


def _consume_on_receipt(bootstrap: str, topic: str, group: str, total: int,
                        deadline_s: float) -> list[float]:
    """Stamp each record as ``poll()`` returns it; decode and check them afterwards."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.partition.eof": False, "fetch.wait.max.ms": 10})
    received: list[tuple[float, Any]] = []
    consumer.subscribe([topic])
    try:
        while len(received) < total and time.monotonic() < deadline_s:
            msg = consumer.poll(0.05)
            if msg is None:
                continue
            received.append((time.time() * 1000, msg))
            if msg.error() is not None:
                raise KafkaException(msg.error())
    finally:
        consumer.close()
    decoder = OperationDecoder()
    latencies = []
    for seen, msg in received:
        envelope = decoder.decode(msg.value(), msg.headers())
        if envelope.ts != msg.timestamp()[1]:
            raise AssertionError(f"record timestamp {msg.timestamp()} != envelope ts {envelope.ts}")
        latencies.append(seen - envelope.ts)
    return latencies


def _consume_batches(bootstrap: str, topic: str, group: str, total: int,
                     deadline_s: float) -> list[float]:
    """Batches of decoded records, stamped once the batch is decoded."""
    consumer = OperationConsumer(bootstrap, topics=[topic], group_id=group,
                                 consumer_properties={"fetch.wait.max.ms": 10})
    latencies: list[float] = []
    with consumer:
        while len(latencies) < total and time.monotonic() < deadline_s:
            for r in consumer.consume(1000, timeout_s=0.005):
                latencies.append(time.time() * 1000 - r.envelope.ts)
    return latencies


def _consumer_process(kind: str, bootstrap: str, topic: str, group: str, total: int,
                      ready: Any, results: Any) -> None:
    consume = _consume_on_receipt if kind == "receipt" else _consume_batches
    ready.set()
    # the writer starts ~3 s later and runs total/rate seconds; 5 minutes bound a stall
    results.put(consume(bootstrap, topic, group, total, time.monotonic() + 300))


def _latency(bootstrap: str, topic: str, rate: int, seconds: float,
             consumer: str = "receipt", mirror_args: tuple[str, ...] = ()) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as data_dir:
        space = Space.embedded("bench", data_dir=data_dir)
        space.introduce_type(_descriptor(topic))
        name = f"bench-lat-{uuid.uuid4().hex[:8]}"
        cmd = [sys.executable, "-m", "gridstream.mirror", "--data-dir", data_dir,
               "--bootstrap", bootstrap, "--name", name, "--metrics-interval", "0",
               "--log-level", "WARNING", *mirror_args]
        proc = subprocess.Popen(cmd, cwd=REPO)
        total = int(rate * seconds)
        ready, results = context.Event(), context.Queue()
        reader = context.Process(target=_consumer_process,
                                 args=(consumer, bootstrap, topic, name, total, ready, results))
        reader.start()
        ready.wait(60)
        time.sleep(3.0)  # the mirror process connects and the consumer joins
        started = time.monotonic()
        for i in range(total):
            space.write(SpaceDocument("Item", _entry(i)))
            # pace in steps of 1 ms: a sleep per write (10 000 a second) costs the
            # writer more CPU than the writes, on the same cores as the mirror and broker
            ahead = (i + 1) / rate - (time.monotonic() - started)
            if ahead > 0.001:
                time.sleep(ahead)
        achieved = total / (time.monotonic() - started)
        latencies: list[float] = results.get(timeout=360)
        reader.join(60)
        proc.terminate()
        proc.wait(30)
        space.close()
    latencies.sort()
    return {
        "consumer": consumer, "target_ops_per_s": rate, "achieved_ops_per_s": achieved,
        "received": len(latencies),
        "p50_ms": latencies[len(latencies) // 2],
        "p99_ms": latencies[int(len(latencies) * 0.99)],
        "max_ms": latencies[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="throughput rounds (the medians are reported)")
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--latency-repeat", type=int, default=3,
                        help="latency runs (each run's figures, and the medians, are reported)")
    parser.add_argument("--consumer", choices=["receipt", "batch"], default="receipt",
                        help="how the latency consumer stamps records (see the docstring)")
    parser.add_argument("--latency-only", action="store_true",
                        help="skip the throughput measurements")
    parser.add_argument("--mirror-arg", action="append", default=[],
                        help="an argument for the mirror process (repeatable)")
    args = parser.parse_args()
    if args.latency_repeat < 1:
        parser.error("--latency-repeat must be at least 1")
    (kafka,) = stack.services(["kafka"])
    kafka.up()
    bootstrap = kafka.address
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # three for throughput, then a fresh one per latency run (its consumer reads from the start)
    topics = [f"bench-mirror-{uuid.uuid4().hex[:8]}" for _ in range(3 + args.latency_repeat)]
    from confluent_kafka.cimpl import NewTopic

    for future in admin.create_topics([NewTopic(t, 3, 1) for t in topics]).values():
        future.result(30)
    result: dict[str, Any] = {}
    try:
        if not args.latency_only:
            result = _throughput(bootstrap, topics, args.ops, args.repeat)
        runs = [_latency(bootstrap, topic, args.rate, args.seconds, args.consumer,
                         tuple(args.mirror_arg)) for topic in topics[3:]]
    finally:
        for future in admin.delete_topics(topics).values():
            future.result(30)
    if args.mirror_arg:
        result["mirror_args"] = args.mirror_arg
    result["latency"] = _latency_summary(runs)
    print(json.dumps(result))


def _latency_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run's settings, the median p50/p99/max over the runs, and each run."""
    keys = ("achieved_ops_per_s", "p50_ms", "p99_ms", "max_ms")
    summary = {k: v for k, v in runs[0].items() if k not in keys}
    summary.update({k: round(statistics.median(r[k] for r in runs), 1) for k in keys})
    summary["received"] = min(r["received"] for r in runs)
    summary["runs"] = [{"received": r["received"], **{k: round(r[k], 1) for k in keys}}
                       for r in runs]
    return summary


def _throughput(bootstrap: str, topics: list[str], ops: int, repeat: int) -> dict[str, Any]:
    """``repeat`` rounds of raw, exactly-once and at-least-once (each round on fresh
    records appended to the same topics); medians of the rates."""
    raw, eos, alo = [], [], []
    size = 0.0
    for _ in range(repeat):
        measured = _raw_rate(bootstrap, topics[0], ops)
        raw.append(measured["ops_per_s"])
        size = measured["value_bytes"]
        eos.append(_mirror_rate(bootstrap, topics[1], ops, exactly_once=True)["ops_per_s"])
        alo.append(_mirror_rate(bootstrap, topics[2], ops, exactly_once=False)["ops_per_s"])
    raw_rate, eos_rate, alo_rate = (statistics.median(r) for r in (raw, eos, alo))
    return {
        "ops": ops, "repeat": repeat, "value_bytes": round(size),
        "raw_producer_ops_per_s": round(raw_rate),
        "mirror_exactly_once_ops_per_s": round(eos_rate),
        "mirror_at_least_once_ops_per_s": round(alo_rate),
        "ratio_exactly_once_vs_raw": round(eos_rate / raw_rate, 3),
        "ratio_at_least_once_vs_raw": round(alo_rate / raw_rate, 3),
        "rounds_ops_per_s": {"raw": [round(r) for r in raw],
                             "exactly_once": [round(r) for r in eos],
                             "at_least_once": [round(r) for r in alo]},
    }


if __name__ == "__main__":
    main()
