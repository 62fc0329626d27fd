"""Kafka producers kept across batches in an executor's Python worker.

A new transactional producer costs a connection and ``init_transactions`` (a round trip
to the transaction coordinator, fencing the id's earlier producers) — tens to hundreds
of milliseconds a task, every batch. Flink's KafkaSink keeps its producers; so does this
pool: one producer per transactional id (or per configuration, non-transactional) per
worker process, ``init_transactions`` once.

A task of a slot may run in another worker next time. That worker's new producer fences
the cached one here, which would fail at its next use — after rows were taken from the
task's input, which cannot be read again. So every ``init_transactions`` records its
owner (process id and a fresh token) in a small file per id in the machine's temporary
directory, and a cached producer is used only while the file still names it: on one
machine (local mode, or one executor host) a moved slot re-initialises before it
produces. Across machines a fenced producer fails its task, which Spark retries with a
new one (the failed one is never cached again).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from gridstream.errors import ConfigError, KafkaClientError
from gridstream.kafka import KafkaProperties
from gridstream.kafka.errors import error_of, kafka_error

__all__ = ["claim", "close_producer", "discard", "idempotent", "new_producer",
           "flush_delivered", "transactional", "undelivered"]

_LOCK = threading.Lock()
_MAX_KEPT = 64
"""Producers a worker keeps at most (the oldest is closed beyond it)."""
_TXN: dict[str, tuple[Producer, str]] = {}
_PLAIN: dict[str, Producer] = {}
_FAILED: dict[str, list[KafkaError]] = {}
_OWNERS = Path(tempfile.gettempdir()) / "gridstream-txn-owners"


def close_producer(producer: Producer) -> None:
    with warnings.catch_warnings():
        # a fenced or failed producer warns that it cannot abort on close
        warnings.simplefilter("ignore", RuntimeWarning)
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        producer.close()


def _owner_file(bootstrap: str, txn_id: str) -> Path:
    digest = hashlib.blake2b(f"{bootstrap}\0{txn_id}".encode(), digest_size=12).hexdigest()
    return _OWNERS / digest


def claim(bootstrap: str, txn_id: str) -> str:
    """Record that this process now owns ``txn_id`` (call right after its
    ``init_transactions``); returns the token naming this ownership."""
    token = f"{os.getpid()}:{uuid.uuid4().hex}"
    path = _owner_file(bootstrap, txn_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    tmp.write_text(token)
    os.replace(tmp, path)
    return token


def _owned(bootstrap: str, txn_id: str, token: str) -> bool:
    try:
        return _owner_file(bootstrap, txn_id).read_text() == token
    except OSError:
        return False


_RECONNECT_MS = 10
"""A new producer's first connection to the transaction coordinator waits
``reconnect.backoff.ms`` (librdkafka's default 100: ``init_transactions`` took 53 ms on
loopback, 14 ms with 10). A slot whose task runs in another Python worker than last batch
makes a new producer (Spark hands tasks to its idle workers in turn), up to every slot
every batch. Failing connections still back off exponentially (to
``reconnect.backoff.max.ms``); the operator's value wins."""


_DENSE = {"enable.sparse.connections": False}
"""A new transactional producer connects to every broker it learns of at once. With
librdkafka's default (sparse: a broker is connected when first needed), its
``init_transactions`` found no connected broker to ask for the transaction coordinator
about one time in ten on loopback and waited for librdkafka's coordinator query timer:
0.50 s instead of 0.014 s (30 inits a run, 2–5 slow; dense: 0.002 s, none slow). A
pipeline's exactly-once batch whose task ran in another Python worker than the slot's
last one paid it (``docs/benchmarks.md``). The operator's value wins."""


def new_producer(properties: KafkaProperties, txn_id: str, timeout_s: float) -> Producer:
    config = {"reconnect.backoff.ms": _RECONNECT_MS, **_DENSE, **properties.client_config(),
              "transactional.id": txn_id}
    try:
        producer = Producer(config)
    except KafkaException as exc:
        raise kafka_error("invalid kafka producer configuration", exc, config) from exc
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            producer.init_transactions(timeout_s)
            return producer
        except KafkaException as exc:
            err = error_of(exc)
            if err is not None and err.name() == "INVALID_TRANSACTION_TIMEOUT":
                producer.close()
                raise ConfigError("the broker refuses transaction.timeout.ms (above its "
                                  "transaction.max.timeout.ms)") from exc
            if err is None or not err.retriable() or time.monotonic() > deadline:
                producer.close()
                raise kafka_error(f"cannot initialize transactions of {txn_id}", exc,
                                  config) from exc
            time.sleep(0.2)


def transactional(properties: KafkaProperties, txn_id: str,
                  init: Callable[[], Producer]) -> Producer:
    """This worker's producer of ``txn_id``, initialised (``init``) once and again
    whenever another producer of the id was initialised since on this machine."""
    bootstrap = str(properties.get_str("bootstrap.servers"))
    key = f"{bootstrap}\0{txn_id}\0{_fingerprint(properties)}"
    with _LOCK:
        cached = _TXN.pop(key, None)
    if cached is not None:
        producer, token = cached
        if _owned(bootstrap, txn_id, token):
            with _LOCK:
                _TXN[key] = (producer, token)
            return producer
        close_producer(producer)  # fenced by a newer producer of the id
    producer = init()
    token = claim(bootstrap, txn_id)
    with _LOCK:
        _TXN[key] = (producer, token)
        oldest = next(iter(_TXN)) if len(_TXN) > _MAX_KEPT else None
        old = _TXN.pop(oldest) if oldest is not None else None
    if old is not None:
        close_producer(old[0])
    return producer


def idempotent(properties: KafkaProperties) -> Producer:
    """This worker's idempotent (non-transactional) producer for ``properties``; its
    delivery callbacks are called for failed records only (``delivery.report.only.error``,
    unless ``properties`` say otherwise): a callback per record cost ~1 µs. A record
    produced without a callback of its own that fails is kept for ``undelivered``."""
    key = _fingerprint(properties)
    with _LOCK:
        producer = _PLAIN.get(key)
        if producer is None:
            config: dict[str, Any] = properties.client_config()
            config.setdefault("delivery.report.only.error", True)  # reports of failures
            failed = _FAILED[key] = []

            def delivered(err: KafkaError | None, _msg: object) -> None:
                if err is not None:
                    with _LOCK:
                        failed.append(err)

            config["on_delivery"] = delivered
            producer = _PLAIN[key] = Producer(config)
        return producer


def flush_delivered(producer: Producer, timeout_s: float | None, what: str,
                    config: dict[str, Any]) -> None:
    """Flush ``idempotent``'s producer (``timeout_s`` None: until librdkafka's own
    delivery timeout settles every record); ``KafkaClientError`` (the producer dropped
    from the pool) when a record since the last ``undelivered`` failed or is still
    queued. ``what`` names the writer in the message; ``config`` scrubs secrets."""
    try:
        left = producer.flush() if timeout_s is None else producer.flush(timeout_s)
    except KafkaException as exc:
        discard(producer)
        raise kafka_error(f"{what}: flush failed", exc, config) from exc
    failed = undelivered(producer)
    if failed is None:  # dropped from the pool meanwhile: its failures cannot be told
        raise KafkaClientError(f"{what}: the producer was closed before its records were "
                               "acknowledged", code=None)
    if left or failed:
        discard(producer)
        first = failed[0] if failed else None
        # the wait is named only when records are still queued after it
        waited = "" if timeout_s is None else f" after {timeout_s:g}s"
        queued = f" and {left} still queued{waited}" if left else ""
        raise KafkaClientError(
            f"{what}: {len(failed)} record(s) not delivered{queued}"
            + (f": {first.str()}" if first is not None else ""),
            code=first.name() if first is not None else None)


def undelivered(producer: Producer) -> list[KafkaError] | None:
    """The delivery errors of ``idempotent``'s producer since the last call (taken);
    None for a producer no longer in the pool (its failures are not known)."""
    with _LOCK:
        for key, plain in _PLAIN.items():
            if plain is producer:
                failed = _FAILED[key]
                taken, failed[:] = list(failed), []
                return taken
    return None


def discard(producer: Producer) -> None:
    """Drop a producer that failed from the pool and close it: the next task makes a new
    one."""
    with _LOCK:
        for key, (cached, _) in list(_TXN.items()):
            if cached is producer:
                del _TXN[key]
        for key, plain in list(_PLAIN.items()):
            if plain is producer:
                del _PLAIN[key]
                _FAILED.pop(key, None)
    with contextlib.suppress(KafkaException, RuntimeError):
        close_producer(producer)


def _fingerprint(properties: KafkaProperties) -> str:
    """A digest of the whole client configuration (secrets included, never shown)."""
    items = sorted((k, str(v)) for k, v in properties.client_config().items())
    return hashlib.blake2b(repr(items).encode(), digest_size=16).hexdigest()
