"""``python -m gridstream.mirror`` / ``gridstream mirror``: mirror a space's durable
operation log to Kafka until stopped (SIGTERM or Ctrl-C stop it cleanly)."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from gridstream._stopping import stop_on_signals
from gridstream.errors import ConfigError, GridstreamError
from gridstream.kafka import KafkaProperties
from gridstream.kafka.config import is_secret
from gridstream.kafka.sources import properties_from_env, read_properties_file
from gridstream.mirror._offsets import DEFAULT_OFFSETS_TOPIC
from gridstream.mirror.config import KafkaEndpointConfig, MirrorSettings
from gridstream.mirror.kafka import KafkaSyncEndpoint
from gridstream.mirror.policy import UndeliverablePolicy
from gridstream.mirror.service import Mirror, RetryPolicy
from gridstream.ops.server import StatusServer
from gridstream.ops.status import Monitor
from gridstream.protocol import codec_names, key_codec_names
from gridstream.protocol.avro import SUBJECT_STRATEGIES

__all__ = ["REGISTRY_PROPERTIES", "build_parser", "endpoint_config", "kafka_properties", "main"]

REGISTRY_PROPERTIES = ("schema.registry.url", "basic.auth.user.info")
"""Properties of the Avro codec's schema registry, read from the same places as the
producer's (file, ``GRIDSTREAM_KAFKA_*``, ``-X``) and never passed to the producer."""

log = logging.getLogger("gridstream.mirror")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gridstream mirror",
                                description="Mirror a space's operation log to Kafka.")
    p.add_argument("--data-dir", required=True, help="the space's data directory")
    p.add_argument("--bootstrap", default="127.0.0.1:9092", help="bootstrap.servers")
    p.add_argument("--name", required=True, help="mirror name (stable across restarts)")
    p.add_argument("--mode", choices=["exactly-once", "at-least-once"], default="exactly-once")
    p.add_argument("--codec", choices=codec_names(), default="json")
    p.add_argument("--key", choices=key_codec_names(), default="id", help="key codec")
    p.add_argument("--schema-registry-url", metavar="URL",
                   help="avro codec: register the schemas in this Confluent-compatible "
                        "registry (default: local ids derived from the schemas); also "
                        "schema.registry.url in the properties; its credentials go in "
                        "basic.auth.user.info in --kafka-properties or "
                        "GRIDSTREAM_KAFKA_BASIC_AUTH_USER_INFO")
    p.add_argument("--subject-strategy", choices=SUBJECT_STRATEGIES, default="record",
                   help="avro codec: the subject of a schema (record: its full name; "
                        "topic: <topic>-value; topic_record: <topic>-<full name>)")
    p.add_argument("--default-topic")
    p.add_argument("--topic-property", default="kafka.topic")
    p.add_argument("--on-undeliverable", choices=[p.value for p in UndeliverablePolicy],
                   default="fail")
    p.add_argument("--dead-letter-topic")
    p.add_argument("--offsets-topic", default=DEFAULT_OFFSETS_TOPIC)
    p.add_argument("--partitions", type=int, default=-1, help="for topics created on demand")
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--no-create-topics", action="store_true")
    for option, field in MirrorSettings.model_fields.items():  # each declared once
        p.add_argument(f"--{option.replace('_', '-')}", type=int, default=field.default,
                       help=field.description)
    p.add_argument("--max-attempts", type=int, default=10, help="retries of a failed batch")
    p.add_argument("--record-timestamp", choices=["send", "commit"], default="send",
                   help="Kafka record time: when the mirror sends it (default) or the "
                        "operation's commit time (always in the gs.ts header)")
    p.add_argument("--transactional-producers", type=int, choices=[1, 2], default=2,
                   help="exactly-once: producers taking turns, one transaction each")
    p.add_argument("--kafka-properties", metavar="FILE",
                   help="librdkafka properties from a Java-style .properties file (the "
                        "place for secrets: a command line is visible in ps)")
    p.add_argument("-X", "--producer-property", action="append", default=[],
                   metavar="KEY=VALUE", help="librdkafka producer property (repeatable; "
                   "overrides the file and GRIDSTREAM_KAFKA_* variables; no secrets here)")
    p.add_argument("--metrics-interval", type=float, default=10.0,
                   help="seconds between metric lines on stderr (0: none)")
    p.add_argument("--status-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus /metrics, JSON /status and the status page on "
                        "127.0.0.1:PORT (0: any free port, printed), as gridstream run does")
    p.add_argument("--log-level", default="INFO")
    return p


def _properties(pairs: Sequence[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for number, pair in enumerate(pairs, 1):
        key, sep, value = pair.partition("=")
        if not sep or not key:  # never quoted: the text may hold a secret value
            raise ConfigError(f"producer property -X number {number} must be KEY=VALUE")
        props[key.strip()] = value
    return props


def kafka_properties(args: argparse.Namespace,
                     environ: Mapping[str, str] | None = None) -> KafkaProperties:
    """The producer properties: the ``--kafka-properties`` file, then the
    ``GRIDSTREAM_KAFKA_*`` environment variables, then ``-X`` (each layer wins over the
    one before). A secret given with ``-X`` is used, with a warning that names it only."""
    merged: dict[str, str] = {}
    if args.kafka_properties:
        merged.update(read_properties_file(args.kafka_properties))
    merged.update(properties_from_env(environ))
    command_line = _properties(args.producer_property)
    for key in command_line:
        if is_secret(key):
            log.warning("secret property %s given with -X is visible in the process list; "
                        "use --kafka-properties or GRIDSTREAM_KAFKA_* instead", key)
    merged.update(command_line)
    return KafkaProperties(merged)


def endpoint_config(args: argparse.Namespace,
                    props: KafkaProperties) -> KafkaEndpointConfig:
    """The endpoint's options from the arguments and the properties; the registry's
    properties (``REGISTRY_PROPERTIES``) are the codec's, never the producer's."""
    config = props.client_config()
    options: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap,
        "producer_properties": {k: v for k, v in config.items()
                                if k not in REGISTRY_PROPERTIES},
        "exactly_once": args.mode == "exactly-once", "codec": args.codec,
        "key_codec": args.key, "topic_property": args.topic_property,
        "default_topic": args.default_topic, "on_undeliverable": args.on_undeliverable,
        "dead_letter_topic": args.dead_letter_topic, "offsets_topic": args.offsets_topic,
        "transactional_producers": args.transactional_producers,
        "record_timestamp": args.record_timestamp,
        "topics": {"create": not args.no_create_topics, "partitions": args.partitions,
                   "replication_factor": args.replication_factor}}
    registry = {"schema_registry_url": args.schema_registry_url
                or config.get("schema.registry.url"),
                "basic_auth_user_info": config.get("basic.auth.user.info"),
                "subject_strategy": args.subject_strategy
                if args.subject_strategy != "record" else None}
    options.update({k: v for k, v in registry.items() if v})
    try:
        return KafkaEndpointConfig.model_validate(options)
    except ValidationError as exc:
        raise ConfigError(f"invalid mirror options: {exc}") from None


def _endpoint(args: argparse.Namespace) -> KafkaSyncEndpoint:
    return KafkaSyncEndpoint(endpoint_config(args, kafka_properties(args)))


def _report(mirror: Mirror, every_s: float, done: threading.Event) -> None:
    while not done.wait(every_s):
        m = mirror.metrics()
        log.info("mirror %s: %s position=%d lag=%d ops=%d batches=%d rate=%.0f/s retries=%d%s",
                 m.name, m.state, m.position, m.lag_operations, m.operations_total,
                 m.batches_total, m.throughput_ops_per_s, m.retries_total,
                 f" last_error={m.last_error}" if m.last_error else "")


_STATES = {"new": "starting", "running": "running", "retrying": "restarting",
           "failed": "failed", "stopped": "stopped"}


def _serve(mirror: Mirror, args: argparse.Namespace, done: threading.Event) -> StatusServer:
    """The mirror's status endpoint (``--status-port``), fed every second."""
    monitor = Monitor()
    monitor.add(mirror.name, "mirror", f"mirror {mirror.name}: {args.data_dir} → Kafka "
                f"{args.bootstrap} ({args.mode})", ([f"space:{args.data_dir}"], ["kafka:*"]))
    server = StatusServer(monitor, args.status_port)
    print(f"status: {server.url}/ (metrics: {server.url}/metrics)", file=sys.stderr, flush=True)

    def feed() -> None:
        while True:
            m = mirror.metrics()
            monitor.totals(mirror.name, read=m.operations_total, written=m.operations_total,
                           batches=m.batches_total, lag={"log": m.lag_operations})
            monitor.state(mirror.name, _STATES.get(m.state, "running"), m.last_error)
            if done.wait(1.0):
                return

    threading.Thread(target=feed, name="mirror-status", daemon=True).start()
    return server


def main(argv: Sequence[str] | None = None) -> int:
    """Run the mirror until SIGTERM/SIGINT; 0 on a clean stop, 2 on failure."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from gridstream.space import open_log_reader

    try:
        settings = MirrorSettings.model_validate(
            {option: getattr(args, option) for option in MirrorSettings.model_fields})
    except ValidationError as exc:
        print(f"gridstream mirror: error: {exc}", file=sys.stderr)
        return 2
    try:
        endpoint = _endpoint(args)
        reader = open_log_reader(args.data_dir)
    except GridstreamError as exc:
        print(f"gridstream mirror: error: {exc}", file=sys.stderr)
        return 2
    mirror = Mirror(reader, endpoint, name=args.name, settings=settings,
                    retry=RetryPolicy(max_attempts=args.max_attempts))
    done = threading.Event()
    if args.metrics_interval > 0:
        threading.Thread(target=_report, args=(mirror, args.metrics_interval, done),
                         daemon=True).start()
    try:
        server = _serve(mirror, args, done) if args.status_port is not None else None
    except GridstreamError as exc:
        done.set()
        reader.close()
        print(f"gridstream mirror: error: {exc}", file=sys.stderr)
        return 2
    try:
        with stop_on_signals(mirror.request_stop):
            mirror.run()
    except GridstreamError as exc:
        print(f"gridstream mirror: error: {exc}", file=sys.stderr)
        return 2
    finally:
        done.set()
        reader.close()
        if server is not None:
            server.close()
    return 0
