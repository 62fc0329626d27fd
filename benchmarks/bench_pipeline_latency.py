"""End-to-end latency of a stateless Kafka → Kafka pipeline: Spark's real-time mode
(``trigger="real_time"``) against the same pipeline with a micro-batch trigger, in the
same run.

For each trigger: fresh input and output topics (``--partitions``, default 2: real-time
mode runs one long-running task per Kafka partition and needs a core for each, so
``local[2]`` and at most 2 partitions), the pipeline started as a process of its own
(``benchmarks/_pipeline_side.py``: the map uppercases the value), then a producer
process sends ``--rate`` records/s (default 10 000, paced every millisecond) for
``--warmup`` + ``--seconds`` seconds, each record's value starting with its send time
(``time.time_ns()``); this process consumes the output topic (read_uncommitted: the
sides are at-least-once) and stamps each record as ``consume`` hands it over.
Latency = receive time − send time, of the records sent after the warm-up; p50 / p95 /
p99 / max, the rate achieved by the producer and the records missing at the end (a run
that loses records or delivers none fails).

Sides (``--side``, default both, one after the other): ``gridstream`` (the pipeline API,
AT_LEAST_ONCE: ``.map(upper)`` in the fused ``mapInArrow`` pass) and ``native`` (Spark's
own query, the map in SQL). Micro-batch trigger: ``--micro-batch`` (default ``"0 seconds"``:
each batch as soon as the previous one ends, the lowest latency micro-batches give).

Prints JSON. Usage: python benchmarks/bench_pipeline_latency.py [--side gridstream,native]
[--rate 10000] [--seconds 40] [--warmup 10] [--partitions 2] [--micro-batch "0 seconds"]
[--checkpoint-interval "200 milliseconds"] [--broker-warmup 10] [--smoke]

``--broker-warmup``: before the first side, a native real-time run of that many seconds
at the run's rate whose figures are dropped (a broker started a moment before would
charge its own warm-up to whichever side runs first).

``steady``: the same percentiles over the second half of the measured records (a query
that falls behind at its start and catches up shows it in the whole figures and in the
series per 5 s, not there). With both sides, ``ratios`` gives the pipeline's real-time
p50 and p99 over native's, over the measured records and over their second half (the
goal: p99 at most 2×). Each Spark side's ``query`` has the medians of its batches'
phases (``batch_ms_median``, ``triggerExecution`` the whole turnaround).

``--smoke``: the gridstream side, 1 partition, 200 records/s for 1 s, no warm-up: a Spark
start per trigger, and the figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from benchmarks import _smoke
from benchmarks._pipeline_bench import (
    BOOTSTRAP,
    FILLER,
    ROOT,
    create_topics,
    delete_topics,
    fresh_topic,
    last_json,
    spark_env,
)

_STAMP = 19  # digits of time.time_ns()


# ------------------------------------------------------------------------- producer


def produce(topic: str, rate: int, seconds: float) -> dict[str, Any]:
    """Send ``rate`` records/s for ``seconds``, paced every millisecond; value
    ``"<send ns>-<seq>-"`` + filler (lowercase, ~100 bytes)."""
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 0,
                         "enable.idempotence": True})
    pad = FILLER[: max(0, 100 - _STAMP - 14)]
    total = int(rate * seconds)
    sent = 0
    started = time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - started) * rate) + 1)
        while sent < due:
            value = b"%019d-%012d-" % (time.time_ns(), sent) + pad
            try:
                producer.produce(topic, value, b"%d" % sent)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    elapsed = time.perf_counter() - started
    if producer.flush(60):
        raise AssertionError("records undelivered after 60 s")
    return {"sent": sent, "send_s": elapsed, "rate": sent / elapsed}


# ------------------------------------------------------------------------- consumer


class LatencyReader(threading.Thread):
    """Reads the output topic from the start, recording (sequence, latency ns) of each
    record as ``consume`` hands it over; ``arrived`` counts those of the producer's
    records (sequence ≥ 0, not the probes)."""

    def __init__(self, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.seen: list[tuple[int, int]] = []
        self.arrived = 0
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": uuid.uuid4().hex,
                             "isolation.level": "read_uncommitted",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        try:
            parts = consumer.list_topics(self.topic, timeout=30).topics[self.topic].partitions
            consumer.assign([TopicPartition(self.topic, p, 0) for p in parts])
            self.ready.set()
            while not self.stop_event.is_set():
                for m in consumer.consume(1000, timeout=0.05):
                    now = time.time_ns()
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    value = m.value() or b""
                    seq = int(value[_STAMP + 1:_STAMP + 13])
                    self.seen.append((seq, now - int(value[:_STAMP])))
                    if seq >= 0:
                        self.arrived += 1
        except BaseException as exc:  # reported by the main thread
            self.error = exc
            self.ready.set()
        finally:
            consumer.close()


def _series(seen: list[tuple[int, int]], rate: int, q: float = 0.5) -> list[float]:
    """The ``q`` quantile of the latency (ms) of the records sent in each 5 s of the
    run (warm-up included): how it settles."""
    buckets: dict[int, list[int]] = {}
    for seq, lat in seen:
        buckets.setdefault(seq // (5 * rate), []).append(lat)
    return [_at(sorted(v), q) for _, v in sorted(buckets.items())]


def _at(ordered: list[int], q: float) -> float:
    """The ``q`` quantile (ms) of sorted latencies (ns)."""
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6, 1)


def percentiles(latencies_ns: list[int]) -> dict[str, float]:
    ordered = sorted(latencies_ns)
    return {"p50_ms": _at(ordered, 0.50), "p95_ms": _at(ordered, 0.95),
            "p99_ms": _at(ordered, 0.99), "max_ms": round(ordered[-1] / 1e6, 1)}


# ------------------------------------------------------------------------- one run


def _start_side(side: str, source: str, target: str, trigger: str,
                interval: str | None = None) -> subprocess.Popen[str]:
    name = "native" if side == "native" else "gridstream-alo"
    proc = subprocess.Popen([sys.executable, "benchmarks/_pipeline_side.py", name, source,
                             target, trigger, *([interval] if interval else [])],
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env=spark_env())
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until READY or the process ends
    if line.strip() != "READY":
        proc.wait(30)
        raise AssertionError(f"{name} ({trigger}) did not start: exit {proc.returncode}")
    return proc


def _stop_side(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate("stop\n", timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"the pipeline exited {proc.returncode}")
    return last_json(out)


def _prime(side: subprocess.Popen[str], topic: str, reader: LatencyReader,
           timeout_s: float = 180.0) -> float:
    """Send a probe record every 0.2 s until one comes out: the pipeline is moving
    records (its start-up is not part of the latencies). The probes' sequence numbers
    are negative; the seconds it took."""
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 0})
    started = time.monotonic()
    probe = 0
    while not any(seq < 0 for seq, _ in reader.seen):
        if side.poll() is not None:
            raise AssertionError(f"the pipeline exited {side.returncode} before any output")
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"no output {timeout_s} s after the pipeline started")
        probe -= 1
        producer.produce(topic, b"%019d-%012d-" % (time.time_ns(), probe), b"probe")
        producer.flush(10)
        time.sleep(0.2)
    return time.monotonic() - started


def _run_producer(side: subprocess.Popen[str], topic: str,
                  args: argparse.Namespace) -> dict[str, Any]:
    """The producer process, run to its end (killed, and an error, if the pipeline's
    process ends meanwhile)."""
    producer = subprocess.Popen(
        [sys.executable, __file__, "--produce", topic, str(args.rate),
         str(args.warmup + args.seconds)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=spark_env())
    while producer.poll() is None:
        if side.poll() is not None:
            producer.kill()
            producer.communicate()
            raise AssertionError(f"the pipeline exited {side.returncode} while records "
                                 "were produced")
        time.sleep(0.2)
    out, err = producer.communicate()
    if producer.returncode != 0:
        raise AssertionError(f"the producer failed: {err[-2000:]}")
    return last_json(out)


def measure(side: str, trigger: str, args: argparse.Namespace) -> dict[str, Any]:
    source, target = fresh_topic("gs-bench-lat-in"), fresh_topic("gs-bench-lat-out")
    try:
        create_topics([source, target], args.partitions)
        reader = LatencyReader(target)
        reader.start()
        reader.ready.wait(30)
        proc = _start_side(side, source, target, trigger,
                           args.checkpoint_interval if side != "native" else None)
        try:
            primed_s = _prime(proc, source, reader)
            reader.seen.clear()
            sent = _run_producer(proc, source, args)
            deadline = time.monotonic() + args.drain_timeout
            # probes sent while the first was on its way still come out after the clear:
            # they must not count towards the records awaited
            while reader.arrived < sent["sent"] and time.monotonic() < deadline:
                if reader.error is not None or proc.poll() is not None:
                    break
                time.sleep(0.1)
        finally:
            reader.stop_event.set()
            reader.join(30)
            query = _stop_side(proc) if proc.poll() is None else {"exit": proc.returncode}
    finally:
        delete_topics([source, target])
    if reader.error is not None:
        raise AssertionError(f"the latency reader failed: {reader.error}")
    reader.seen = [(seq, lat) for seq, lat in reader.seen if seq >= 0]  # late probes
    distinct = {seq for seq, _ in reader.seen}
    missing = sent["sent"] - len(distinct)
    first_measured = int(args.rate * args.warmup)
    measured = [lat for seq, lat in reader.seen if seq >= first_measured]
    if missing or not measured:
        raise AssertionError(f"{side} ({trigger}): {missing} of {sent['sent']} records "
                             f"never reached the output topic")
    # the second half of the measured records: the steady state, apart from a start
    # that falls behind and catches up (the series above shows it)
    steady = [lat for seq, lat in reader.seen
              if seq >= int(args.rate * (args.warmup + args.seconds / 2))]
    return {"trigger": trigger, "sent": sent["sent"], "produce_rate": round(sent["rate"]),
            "received": len(reader.seen), "duplicates": len(reader.seen) - len(distinct),
            "measured": len(measured), **percentiles(measured),
            "steady": {"measured": len(steady), **(percentiles(steady) if steady else {})},
            "p50_ms_per_5s": _series(reader.seen, args.rate),
            "p99_ms_per_5s": _series(reader.seen, args.rate, 0.99),
            "primed_s": round(primed_s, 1), "query": query}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--side", default="gridstream,native",
                        help="gridstream, native, or both (comma-separated)")
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--micro-batch", default="0 seconds",
                        help="the micro-batch side's processing-time interval")
    parser.add_argument("--checkpoint-interval", default=None,
                        help="the pipeline's real-time batch length (checkpoint_interval; "
                        "default: the product's)")
    parser.add_argument("--drain-timeout", type=float, default=60.0)
    parser.add_argument("--broker-warmup", type=float, default=10.0,
                        help="seconds of a throw-away native real-time run before the "
                        "first side (0: none)")
    parser.add_argument("--produce", nargs=3, metavar=("TOPIC", "RATE", "SECONDS"),
                        help=argparse.SUPPRESS)
    args = _smoke.parse_args(parser, argv, side="gridstream", rate=200, seconds=1.0,
                             warmup=0.0, partitions=1, broker_warmup=0.0)
    if args.produce:
        topic, rate, seconds = args.produce
        print(json.dumps(produce(topic, int(rate), float(seconds))), flush=True)
        return 0
    result: dict[str, Any] = {
        "benchmark": "pipeline_latency", "rate": args.rate, "seconds": args.seconds,
        "warmup": args.warmup, "partitions": args.partitions, "spark_master": "local[2]"}
    if args.broker_warmup > 0:
        # a broker started a moment before serves the first side's first seconds slower
        # (a real-time pipeline run first fell 4-9 s behind in its first 10-15 s; native
        # run first, 1.1 s in its first 5 s against 0.6-0.9 s run second), and a plain
        # produce-and-consume does not warm what a real-time query asks of it: a native
        # real-time run, its figures dropped
        warm = argparse.Namespace(**{**vars(args), "warmup": 0.0,
                                     "seconds": args.broker_warmup})
        result["broker_warmup_s"] = args.broker_warmup
        measure("native", "real_time", warm)
    for side in args.side.split(","):
        runs = {}
        for trigger in ("real_time", args.micro_batch):
            runs["real_time" if trigger == "real_time" else "micro_batch"] = measure(
                side, trigger, args)
            print(json.dumps({side: runs}), file=sys.stderr, flush=True)
        rt, mb = runs["real_time"], runs["micro_batch"]
        result[side] = {
            **runs,
            "p50_micro_batch_over_real_time": round(mb["p50_ms"] / rt["p50_ms"], 1),
            "p99_micro_batch_over_real_time": round(mb["p99_ms"] / rt["p99_ms"], 1)}
    if "gridstream" in result and "native" in result:
        ours, spark = result["gridstream"]["real_time"], result["native"]["real_time"]
        result["ratios"] = {
            f"{q}_real_time_pipeline_over_native{part}":
            round(a[f"{q}_ms"] / b[f"{q}_ms"], 2)
            for part, a, b in (("", ours, spark),
                               ("_steady", ours["steady"], spark["steady"]))
            for q in ("p50", "p99") if a.get(f"{q}_ms") and b.get(f"{q}_ms")}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
