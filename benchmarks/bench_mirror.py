"""Mirror throughput against the raw confluent-kafka producer, and write→visible latency.

1. Throughput: N single-operation bulks of ~200-byte entries, mirrored exactly-once
   (one Kafka transaction per batch) and at-least-once, against a raw idempotent
   producer sending the very same keys, values and headers in the same run.
2. Latency: a space is written at a fixed rate while ``python -m gridstream.mirror`` runs
   as a separate process; a read_committed consumer, in a third process (so that it
   does not share an interpreter lock with the writer), measures the time from the
   write, as the envelope's ``ts`` carries it (the space's commit timestamp; for the raw
   floors the record's due time), to the record being visible in Kafka (p50/p99). The
   record's own Kafka timestamp is not the start: the mirror stamps records with their
   send time by default (``record_timestamp="send"``), which leaves out the time a
   change waited for the mirror. By default (``--consumer receipt``) each record is
   stamped when ``poll()`` hands it over; the records are decoded and checked after the
   measurement (decoding them in the loop would delay the stamps of the records behind
   them in the same fetch).
   ``--consumer batch`` is the older measure: ``OperationConsumer`` batches of up to
   1000 records (5 ms timeout), stamped after the whole batch was decoded, which adds
   the batch wait and the decoding of the records before it.

   The variants, each on a fresh 3-partition topic, at the same rate and duration and
   read by the same consumer (``--no-latency-baselines``: the exactly-once mirror only):
   ``mirror_exactly_once`` and ``mirror_at_least_once`` (the mirror's ``--mode``); and
   two raw floors, each a producer with ``PRODUCER_DEFAULTS`` in a process of its own
   (as the mirror has) sending batches one at a time, back to back, each carrying every
   record written while the previous one was being delivered (no log, no position
   record): ``raw_transactional``, what exactly-once minimally needs, one transaction
   per batch, the transactions alternating between two transactional ids (``<id>``,
   ``<id>.1``, both initialized before the run), as the exactly-once mirror's do; and
   ``raw_idempotent``, the at-least-once floor, each batch produced then flushed, as
   the at-least-once mirror flushes each of its batches. The raw records are the
   mirror's envelopes (``OperationEncoder``), stamped with their due time, or with the
   time the batch takes them if that is earlier. Every writer is paced alike, in steps
   of 1 ms. Each repeat runs every variant once, the order rotated from one repeat to
   the next; the medians, each run, and the ratios of the mirror's p99 to the raw ones
   are reported (``--variants`` runs only some).

Prints one JSON line (and on stderr the throughput figures as soon as they are measured,
then a line per latency run). Usage:
python benchmarks/bench_mirror.py [--ops N] [--repeat 3] [--rate R] [--seconds S]
    [--latency-repeat 3] [--consumer receipt|batch] [--latency-only]
    [--no-latency-baselines | --variants V [V ...]] [--mirror-arg=ARG ...] [--smoke]
(``--smoke``: 300 operations, one round; every latency variant once, 300 records at
300/s: seconds, and the figures mean nothing.)
(``--mirror-arg`` passes an argument through to ``python -m gridstream.mirror``,
e.g. ``--mirror-arg=-Xlinger.ms=1``; ``--mode`` is set by the variant.)
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from benchmarks import _smoke
from gridstream import stack
from gridstream.consumer import OperationConsumer
from gridstream.mirror import PRODUCER_DEFAULTS, KafkaEndpointConfig, KafkaSyncEndpoint, Mirror
from gridstream.mirror.testing import InMemoryLog
from gridstream.model import SpaceDocument
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import KafkaMessage, OperationDecoder, OperationEncoder
from gridstream.space import Space

REPO = Path(__file__).resolve().parents[1]
FIXED = (PropertySpec("id", "str"), PropertySpec("name", "str"), PropertySpec("qty", "int"),
         PropertySpec("note", "str"))
VARIANTS = ("mirror_exactly_once", "mirror_at_least_once", "raw_transactional",
            "raw_idempotent")
_STEP_S = 0.001  # writers pace in steps of 1 ms
Run = Callable[[], dict[str, float]]
"""Writes the run's records at the run's rate; returns the achieved rate (and more)."""


def _descriptor(topic: str) -> TypeDescriptor:
    return TypeDescriptor(name="Item", id_property="id", topic=topic, fixed=FIXED)


def _entry(i: int) -> dict[str, Any]:
    return {"id": f"item-{i % 10_000}", "name": f"name-{i}", "qty": i % 97, "note": "n" * 20}


def _operation(i: int, timestamp_ms: int = 0) -> Operation:
    return Operation(OpType.WRITE, "Item", f"item-{i % 10_000}", i, _entry(i), i % 4,
                     timestamp_ms)


def _log(topic: str, ops: int) -> InMemoryLog:
    log = InMemoryLog([_descriptor(topic)])
    for i in range(ops):
        log.append([_operation(i)])
    return log


def _encoder(topic: str) -> Callable[[int, int], KafkaMessage]:
    """(i, timestamp_ms) → record i's envelope, as the mirror encodes it."""
    encoder, descriptor = OperationEncoder(), _descriptor(topic)
    return lambda i, ts: encoder.encode(_operation(i, ts), descriptor, topic)


def _produce(producer: Producer, m: KafkaMessage) -> None:
    while True:
        try:
            producer.produce(m.topic, m.value, m.key, timestamp=m.timestamp_ms,
                             headers=list(m.headers))
            return
        except BufferError:
            producer.poll(0.05)


def _mirror_rate(bootstrap: str, topic: str, ops: int, exactly_once: bool) -> dict[str, float]:
    log = _log(topic, ops)
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=bootstrap,
                                                    exactly_once=exactly_once))
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
        _produce(producer, m)
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
        # from the write (the envelope's ts), not the record's timestamp: the mirror
        # stamps records with their send time (see the module docstring)
        envelope = decoder.decode(msg.value(), msg.headers())
        if envelope.ts <= 0:
            raise AssertionError(f"record at offset {msg.offset()} carries no write time")
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
    # the writer starts ~3 s (--settle) later and runs total/rate seconds; 5 minutes
    # bound a stall
    results.put(consume(bootstrap, topic, group, total, time.monotonic() + 300))


def _percentiles(values: list[float], prefix: str) -> dict[str, float]:
    ordered = sorted(values)
    return {f"{prefix}p50_ms": ordered[len(ordered) // 2],
            f"{prefix}p99_ms": ordered[int(len(ordered) * 0.99)],
            f"{prefix}max_ms": ordered[-1]}


def _paced(total: int, rate: int, write: Callable[[range, float], object]) -> float:
    """Hand ``write`` the records written by now, in steps of 1 ms: record i is due
    i/rate s after the start and is written up to a step early (after a slow ``write``,
    every record that came due meanwhile goes at once); ``write`` also gets the wall-clock
    time (ms) record 0 was due. Returns the achieved rate."""
    started, start_ms = time.monotonic(), time.time() * 1000
    done = 0
    while done < total:
        elapsed = time.monotonic() - started
        due = min(total, int((elapsed + _STEP_S) * rate) + 1)
        if due > done:
            write(range(done, due), start_ms)
            done = due
        else:
            # steps, not a sleep per write (10 000 a second): those would cost the writer
            # more CPU than the writes, on the same cores as the mirror and broker
            time.sleep(max(0.0, done / rate - elapsed))
    return total / (time.monotonic() - started)


@contextmanager
def _mirror_writer(bootstrap: str, topic: str, name: str, rate: int, total: int,
                   mirror_args: tuple[str, ...]) -> Iterator[Run]:
    """A space written in this process, mirrored by ``python -m gridstream.mirror``."""
    with tempfile.TemporaryDirectory() as data_dir:
        space = Space.embedded("bench", data_dir=data_dir)
        space.introduce_type(_descriptor(topic))
        cmd = [sys.executable, "-m", "gridstream.mirror", "--data-dir", data_dir,
               "--bootstrap", bootstrap, "--name", name, "--metrics-interval", "0",
               "--log-level", "WARNING", *mirror_args]
        proc = subprocess.Popen(cmd, cwd=REPO)

        def write(records: range, _start_ms: float) -> None:
            for i in records:
                space.write(SpaceDocument("Item", _entry(i)))

        try:
            yield lambda: {"achieved_ops_per_s": _paced(total, rate, write)}
        finally:
            proc.terminate()
            proc.wait(30)
            space.close()


def _raw_process(bootstrap: str, topic: str, rate: int, total: int, transactional: bool,
                 ready: Any, start: Any, results: Any) -> None:
    """Back-to-back batches, each of every record written since the last began (see
    the module docstring)."""
    config = {"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS}
    if transactional:  # two ids taking turns, as the exactly-once mirror's producers
        base = f"bench-raw-{uuid.uuid4().hex[:8]}"
        producers = [Producer({**config, "transactional.id": t}) for t in (base, f"{base}.1")]
        for producer in producers:
            producer.init_transactions(30)
    else:
        producers = [Producer(config)]
    encode = _encoder(topic)
    spans: list[float] = []

    def batch(records: range, start_ms: float) -> None:
        began, now_ms = time.monotonic(), time.time() * 1000
        producer = producers[len(spans) % len(producers)]
        if transactional:
            producer.begin_transaction()
        for i in records:  # written at its due time, or now if taken a little early
            _produce(producer, encode(i, int(min(now_ms, start_ms + i * 1000 / rate))))
        if transactional:
            producer.commit_transaction(30)
        # the at-least-once mirror flushes each batch (which overrides linger.ms) and
        # gathers the next one only then: so does this floor, with the same producer
        # configuration
        elif producer.flush(30):
            raise AssertionError("records undelivered after 30 s")
        spans.append((time.monotonic() - began) * 1000)

    ready.set()
    start.wait(60)
    achieved = _paced(total, rate, batch)
    results.put({"achieved_ops_per_s": achieved, "batches": len(spans),
                 "batches_per_s": len(spans) * achieved / total,
                 **_percentiles(spans, "batch_")})


@contextmanager
def _raw_writer(bootstrap: str, topic: str, rate: int, total: int,
                transactional: bool) -> Iterator[Run]:
    """``_raw_process`` in a process of its own (an interpreter lock of its own, as the
    mirror has)."""
    context = multiprocessing.get_context("spawn")
    ready, start, results = context.Event(), context.Event(), context.Queue()
    proc = context.Process(target=_raw_process, args=(bootstrap, topic, rate, total,
                                                      transactional, ready, start, results))
    proc.start()
    ready.wait(60)

    def run() -> dict[str, float]:
        start.set()
        stats: dict[str, float] = results.get(timeout=360)
        return stats

    try:
        yield run
    finally:
        proc.join(60 if start.is_set() else 0)
        proc.terminate()  # nothing once it has exited
        proc.join()


def _latency(variant: str, bootstrap: str, topic: str, rate: int, seconds: float,
             consumer: str = "receipt", mirror_args: tuple[str, ...] = (),
             settle_s: float = 3.0) -> dict[str, float]:
    """One run of ``variant`` (see the module docstring): its figures and the writer's."""
    context = multiprocessing.get_context("spawn")
    total = int(rate * seconds)
    name = f"bench-lat-{uuid.uuid4().hex[:8]}"
    ready, results = context.Event(), context.Queue()
    reader = context.Process(target=_consumer_process,
                             args=(consumer, bootstrap, topic, name, total, ready, results))
    reader.start()
    ready.wait(60)
    if variant.startswith("mirror_"):
        mode = variant.removeprefix("mirror_").replace("_", "-")
        writer = _mirror_writer(bootstrap, topic, name, rate, total,
                                (*mirror_args, f"--mode={mode}"))
    else:
        writer = _raw_writer(bootstrap, topic, rate, total, variant == "raw_transactional")
    with writer as run:
        time.sleep(settle_s)  # the consumer joins, the writer connects
        stats = run()
        latencies: list[float] = results.get(timeout=360)
    reader.join(60)
    return {"received": len(latencies), **_percentiles(latencies, ""), **stats}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="throughput rounds (the medians are reported)")
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--latency-repeat", type=int, default=3,
                        help="latency runs of each variant (each run, and the medians)")
    parser.add_argument("--latency-baselines", action=argparse.BooleanOptionalAction,
                        default=True, help="measure every latency variant, not only the "
                        "exactly-once mirror (see the docstring)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS,
                        help="only these latency variants (run in the docstring's order)")
    parser.add_argument("--consumer", choices=["receipt", "batch"], default="receipt",
                        help="how the latency consumer stamps records (see the docstring)")
    parser.add_argument("--latency-only", action="store_true",
                        help="skip the throughput measurements")
    parser.add_argument("--mirror-arg", action="append", default=[],
                        help="an argument for the mirror process (repeatable)")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds between the start of a latency run's processes and "
                        "its first write (the consumer joins, the writer connects)")
    args = _smoke.parse_args(parser, argv, ops=300, repeat=1, rate=300, seconds=1.0,
                             latency_repeat=1, settle=0.5)
    if args.latency_repeat < 1:
        parser.error("--latency-repeat must be at least 1")
    if args.variants and not args.latency_baselines:
        parser.error("--variants and --no-latency-baselines exclude each other")
    variants = (tuple(v for v in VARIANTS if v in args.variants) if args.variants
                else VARIANTS if args.latency_baselines else VARIANTS[:1])
    # each repeat starts one variant further on, so that none always runs first
    orders = [variants[r % len(variants):] + variants[:r % len(variants)]
              for r in range(args.latency_repeat)]
    (kafka,) = stack.services(["kafka"])
    kafka.up()
    bootstrap = kafka.address
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # three for throughput, then a fresh one per latency run (its consumer reads from the start)
    topics = [f"bench-mirror-{uuid.uuid4().hex[:8]}"
              for _ in range(3 + args.latency_repeat * len(variants))]
    from confluent_kafka.cimpl import NewTopic

    for future in admin.create_topics([NewTopic(t, 3, 1) for t in topics]).values():
        future.result(30)
    result: dict[str, Any] = {}
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    try:
        if not args.latency_only:
            result = _throughput(bootstrap, topics, args.ops, args.repeat)
            # kept should a latency run fail
            print(json.dumps({"throughput": result}), file=sys.stderr, flush=True)
        latency_topics = iter(topics[3:])
        for order in orders:
            for variant in order:
                run = _latency(variant, bootstrap, next(latency_topics), args.rate,
                               args.seconds, args.consumer, tuple(args.mirror_arg),
                               args.settle)
                runs[variant].append(run)
                print(json.dumps({"variant": variant, **_rounded(run)}), file=sys.stderr,
                      flush=True)
    finally:
        for future in admin.delete_topics(topics).values():
            future.result(30)
    if args.mirror_arg:
        result["mirror_args"] = args.mirror_arg
    result["latency"] = {"consumer": args.consumer, "target_ops_per_s": args.rate,
                         "seconds": args.seconds, "orders": orders,
                         **{v: _latency_summary(r) for v, r in runs.items()}}
    if ratios := _p99_ratios(runs):
        result["latency"]["p99_ratios"] = ratios
    print(json.dumps(result))
    return 0


def _rounded(run: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in run.items()}


def _latency_summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    """The median of each figure over the runs (of ``received``: the least), and each run."""
    summary: dict[str, Any] = {k: round(statistics.median(r[k] for r in runs), 1)
                               for k in runs[0]}
    summary["received"] = min(r["received"] for r in runs)
    summary["runs"] = [_rounded(r) for r in runs]
    return summary


def _p99_ratios(runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Each mirror mode's p99 over each raw floor's (of those run): the ratio of the
    medians, and the ratio within each repeat."""
    ratios: dict[str, Any] = {}
    for mirror in (v for v in VARIANTS[:2] if v in runs):
        for raw in (v for v in VARIANTS[2:] if v in runs):
            pairs = [(m["p99_ms"], r["p99_ms"]) for m, r in zip(runs[mirror], runs[raw],
                                                                 strict=True)]
            median = (statistics.median(m for m, _ in pairs)
                      / statistics.median(r for _, r in pairs))
            ratios[f"{mirror}/{raw}"] = {"of_medians": round(median, 2),
                                         "per_repeat": [round(m / r, 2) for m, r in pairs]}
    return ratios


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
    sys.exit(main())
