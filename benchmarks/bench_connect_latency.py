"""Grid put → visible to a read_committed consumer: the Hazelcast source connector
(BACKLOG, exactly-once) against a listener + producer bridge, same run.

A writer process puts stamped values into a fresh Hazelcast map with the plain client
at a fixed rate (``put_all`` of the due entries every millisecond); a consumer process
(``read_committed``) stamps each record when ``poll`` hands it over; a record's latency
is its arrival minus its stamp (one machine, one clock); the ``steady_*`` percentiles
leave out the records written in the first ``--warmup-s`` seconds. Sides:

- **connector** — ``SourceConnector`` (``failoverPolicy`` BACKLOG, ``shallLoadInitialData``
  false, exactly-once, ``pollInterval`` ``--poll-ms`` or the connector's default) in
  this process's Spark session,
  started and past its first batch before the writer starts;
- **bridge** — what fifteen lines give: an entry listener of the plain client producing
  each event with an idempotent producer (at-least-once; it loses events on any
  disconnect and cannot resume): the floor of what a Python bridge reaches.

``--sustained`` instead raises the rate step by step (``--rates``) for each side and
reports the highest whose lag stayed bounded: every record delivered within
``--drain-s`` after the writer stopped, and the latency of the last third of the run
not above twice that of the first third plus a second.

Usage: python benchmarks/bench_connect_latency.py [--rates 500 10000] [--seconds 300]
    [--poll-ms MS] [--sides connector bridge] [--sustained] [--smoke]
Prints JSON (p50 / p99 / max in ms per side and rate, the load average, and the CPU
seconds each process role spent from the writer's start to the last arrival).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _cpu, _smoke
from benchmarks._connect_bench import create_topics, delete_topics, services_up, spark_unless

HERE = Path(__file__).resolve()
PAD = "p" * 60
CLUSTER = [os.environ.get("GS_BENCH_HZ_CLUSTER", "dev")]


# ------------------------------------------------------------------ child roles

def _writer(members: str, cache: str, rate: int, seconds: float, keys: int) -> None:
    """Puts ``rate`` stamped values a second for ``seconds``, in 1 ms steps."""
    import hazelcast
    from hazelcast.core import HazelcastJsonValue

    client = hazelcast.HazelcastClient(cluster_members=[members], cluster_name=CLUSTER[0])
    try:
        target = client.get_map(cache)
        start = time.perf_counter()
        sent = 0
        total = int(rate * seconds)
        pending = []
        while sent < total:
            due = min(total, int((time.perf_counter() - start) * rate) + 1)
            if due > sent:
                now = time.time()
                batch = {f"k{i % keys}": HazelcastJsonValue(json.dumps(
                    {"i": i, "t": now, "pad": PAD})) for i in range(sent, due)}
                pending.append(target.put_all(batch))
                sent = due
                if len(pending) > 64:
                    pending.pop(0).result()
            else:
                time.sleep(0.0005)
        for future in pending:
            future.result()
        print(json.dumps({"sent": sent, "seconds": round(time.perf_counter() - start, 3),
                          "cpu_s": round(time.process_time(), 2)}), flush=True)
    finally:
        client.shutdown()


def _consumer(bootstrap: str, topic: str, expected: int, timeout_s: float) -> None:
    """Stamps every record's arrival; prints the latencies' summary as JSON."""
    import orjson
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    consumer.subscribe([topic])
    latencies: list[float] = []
    stamps: list[float] = []
    seen: set[int] = set()
    first = last = 0.0
    deadline = time.monotonic() + timeout_s
    print("ready", flush=True)
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.05):
                if msg.error() is not None or msg.value() is None:
                    continue
                now = time.time()
                value = orjson.loads(msg.value())
                latencies.append(now - value["t"])
                stamps.append(value["t"])
                seen.add(value["i"])
                first = first or now
                last = now
    finally:
        consumer.close()
    print(json.dumps({"received": len(latencies), "distinct": len(seen),
                      "cpu_s": round(time.process_time(), 2), "first": first, "last": last,
                      "stamps": stamps, "latencies_ms": [
                          round(x * 1000, 2) for x in latencies]}), flush=True)


# ------------------------------------------------------------------ sides

def _bridge(members: str, cache: str, bootstrap: str, topic: str) -> tuple[Any, Any]:
    """An entry listener producing each event (the baseline): (client, producer)."""
    import hazelcast
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "compression.type": "lz4"})
    client = hazelcast.HazelcastClient(cluster_members=[members], cluster_name=CLUSTER[0])

    def on_event(event: Any) -> None:
        producer.produce(topic, str(event.value).encode(), str(event.key).encode())
        producer.poll(0)

    client.get_map(cache).blocking().add_entry_listener(
        include_value=True, added_func=on_event, updated_func=on_event)
    return client, producer


def _connector(spark: Any, members: str, cache: str, bootstrap: str, prefix: str,
               poll_ms: int | None, ckpt: str) -> Any:
    from gridstream.connect.config import SourceConnectorConfig
    from gridstream.connect.source import SourceConnector

    config = SourceConnectorConfig.model_validate({
        "name": f"lat-{uuid.uuid4().hex[:8]}", "checkpoint": ckpt,
        "grid": {"kind": "hazelcast", "members": [members], "cluster_name": CLUSTER[0]},
        "failoverPolicy": "BACKLOG", "shallLoadInitialData": False,
        "cacheWhitelist": [cache], "topicPrefix": prefix,
        **({} if poll_ms is None else {"pollInterval": poll_ms}),
        "deliveryGuarantee": "exactly_once", "topic.creation.default.partitions": 2})
    connector = SourceConnector(config, bootstrap_servers=bootstrap)
    query = connector.start(spark)
    deadline = time.monotonic() + 120
    while not connector.reports and not query.lastProgress:
        if connector.failure is not None or not query.isActive:
            raise RuntimeError(f"connector failed: {connector.failure or query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError("the connector planned no first batch in 120 s")
        time.sleep(0.1)
    return connector, query


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    ordered = sorted(values)
    return {"p50": ordered[len(ordered) // 2],
            "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "max": ordered[-1]}


def run_side(side: str, rate: int, seconds: float, args: argparse.Namespace,
             spark: Any, bootstrap: str, members: str) -> dict[str, Any]:
    import hazelcast

    tag = uuid.uuid4().hex[:8]
    cache, prefix = f"lat{tag}", f"lat-{tag}-"
    topic = prefix + cache
    create_topics(bootstrap, [topic], 2)
    client = hazelcast.HazelcastClient(cluster_members=[members], cluster_name=CLUSTER[0])
    client.get_map(cache).blocking().put("seed", "x")  # the map exists, its journal too
    client.get_map(cache).blocking().remove("seed")
    client.shutdown()
    expected = int(rate * seconds)
    consumer = subprocess.Popen(
        [sys.executable, str(HERE), "--role", "consumer", bootstrap, topic, str(expected),
         str(seconds + args.drain_s + 60)], stdout=subprocess.PIPE, text=True)
    assert consumer.stdout is not None
    consumer.stdout.readline()  # ready
    ckpt = tempfile.mkdtemp(prefix="gs-lat-")
    stop: list[Any] = []
    try:
        if side == "bridge":
            stop.extend(_bridge(members, cache, bootstrap, topic))
        else:
            stop.extend(_connector(spark, members, cache, bootstrap, prefix, args.poll_ms, ckpt))
        started = time.time()
        cpu_before = _cpu.snapshot()
        writer = subprocess.run(
            [sys.executable, str(HERE), "--role", "writer", members, cache, str(rate),
             str(seconds), str(args.keys)], capture_output=True, text=True, check=True)
        wrote = json.loads(writer.stdout.strip().splitlines()[-1])
        out, _ = consumer.communicate(timeout=seconds + args.drain_s + 120)
        cpu = _cpu.spent(cpu_before, _cpu.snapshot())
        failed = _failed(side, stop)
    finally:
        if consumer.poll() is None:
            consumer.kill()
        _stop(side, stop)
        shutil.rmtree(ckpt, ignore_errors=True)
        delete_topics(bootstrap, [topic])
        client = hazelcast.HazelcastClient(cluster_members=[members], cluster_name=CLUSTER[0])
        client.get_map(cache).blocking().destroy()  # a member's heap holds every map
        client.shutdown()
    got = json.loads(out.strip().splitlines()[-1])
    lat = got.pop("latencies_ms")
    stamps = got.pop("stamps")
    begin = min(stamps, default=0.0)
    steady = [x for x, t in zip(lat, stamps, strict=True) if t >= begin + args.warmup_s]
    third = max(len(lat) // 3, 1)
    result = {"side": side, "rate": rate, "seconds": seconds, "sent": wrote["sent"],
              "writer_s": wrote["seconds"], "received": got["received"],
              "distinct": got["distinct"], "lost": wrote["sent"] - got["distinct"],
              "duplicates": got["received"] - got["distinct"],
              **{f"{k}_ms": round(v, 1) for k, v in _percentiles(lat).items()},
              **{f"steady_{k}_ms": round(v, 1) for k, v in _percentiles(steady).items()},
              "p99_first_third_ms": round(_percentiles(lat[:third])["p99"], 1),
              "p99_last_third_ms": round(_percentiles(lat[-third:])["p99"], 1),
              "drained_after_writer_s": round(got["last"] - started - wrote["seconds"], 2)
              if got["last"] else None,
              "load_average": os.getloadavg(), "failed": failed}
    cpu["writer"], cpu["consumer"] = wrote["cpu_s"], got["cpu_s"]
    result["cpu_s"] = dict(sorted(cpu.items(), key=lambda kv: -kv[1]))
    result["cores_busy"] = round(cpu["machine"] / cpu["wall"], 2)
    result["cpu_us_per_change"] = {role: round(s * 1e6 / max(wrote["sent"], 1), 1)
                                   for role, s in result["cpu_s"].items()
                                   if role not in ("machine", "wall")}
    result["bounded"] = (failed is None and result["lost"] == 0
                         and result["drained_after_writer_s"] is not None
                         and result["drained_after_writer_s"] <= args.drain_s
                         and result["p99_last_third_ms"]
                         <= 2 * result["p99_first_third_ms"] + 1000)
    print(json.dumps(result), file=sys.stderr, flush=True)
    return result


def _failed(side: str, parts: list[Any]) -> str | None:
    """The connector's failure (its query's first error line), if it failed: at a rate
    it cannot keep up with, its position falls out of the journal and it stops by
    policy (``onPositionLost = fail``) rather than skip changes."""
    if side != "connector" or not parts:
        return None
    error = parts[1].exception()
    if error is None:
        return None
    lines = [line for line in str(error).splitlines() if "PositionLostError" in line]
    return (lines or str(error).splitlines() or ["failed"])[-1].strip()[:300]


def _stop(side: str, parts: list[Any]) -> None:
    if not parts:
        return
    if side == "bridge":
        client, producer = parts
        producer.flush(30)
        client.shutdown()
    else:
        connector, query = parts
        query.stop()
        connector.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[500, 10_000])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--poll-ms", type=int, default=None,
                        help="the connector's pollInterval (default: the connector's own)")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--drain-s", type=float, default=30.0)
    parser.add_argument("--warmup-s", type=float, default=10.0,
                        help="records written in the first seconds are left out of the "
                        "steady_* percentiles (a query's first batches warm the JVM and "
                        "start Python workers)")
    parser.add_argument("--sides", nargs="+", default=["connector", "bridge"],
                        choices=["connector", "bridge"])
    parser.add_argument("--sustained", action="store_true")
    args = _smoke.parse_args(parser, argv, rates=[200], seconds=3.0, keys=50, drain_s=60.0,
                             warmup_s=1.0)
    bootstrap, hz = services_up()
    members = hz.address
    CLUSTER[0] = os.environ["GS_BENCH_HZ_CLUSTER"] = hz.settings.cluster_name
    result: dict[str, Any] = {"benchmark": "connect_latency", "poll_ms": args.poll_ms,
                              "load_average_start": os.getloadavg()}
    spark = spark_unless("connector" not in args.sides, "bench-connect-latency", result)
    runs = []
    for side in args.sides:
        for rate in sorted(args.rates):
            run = run_side(side, rate, args.seconds, args, spark, bootstrap, members)
            runs.append(run)
            if side == "connector" and (run["duplicates"]
                                        or run["lost"] and run["failed"] is None):
                raise SystemExit(f"{side} at {rate}/s lost or duplicated records: {run}")
            if args.sustained and not run["bounded"]:
                break
    result["runs"] = runs
    if args.sustained:
        result["sustained"] = {side: max((r["rate"] for r in runs if r["side"] == side
                                          and r["bounded"]), default=0)
                               for side in args.sides}
    result["load_average_end"] = os.getloadavg()
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        role, rest = sys.argv[2], sys.argv[3:]
        if role == "writer":
            _writer(rest[0], rest[1], int(rest[2]), float(rest[3]), int(rest[4]))
        else:
            _consumer(rest[0], rest[1], int(rest[2]), float(rest[3]))
    else:
        main()
