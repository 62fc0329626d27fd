"""The Kafka endpoint's producers: one idempotent producer, or transactional ones that
take turns.

With transactions, consecutive transactions alternate between the producers of the
given ids (one at a time, in log order, each committed before the next begins): right
after a commit the coordinator refuses to register partitions for the same id
(``CONCURRENT_TRANSACTIONS``) until the commit markers are written, and librdkafka
retries that after a fixed 20 ms. Opening initializes every id, which fences a zombie on
any of them and completes or aborts what it left open.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer

from gridstream.errors import EndpointError
from gridstream.kafka.errors import error_of, kafka_error

__all__ = ["Producers"]


class Producers:
    """``current`` takes the next transaction; ``rotate`` after a commit hands the
    following one to the other producer. No ids: one idempotent producer."""

    def __init__(self, config: Mapping[str, Any], transactional_ids: tuple[str, ...],
                 timeout_s: float) -> None:
        self.config = dict(config)
        self.transactional_ids = transactional_ids
        self.timeout_s = timeout_s
        self.current: Producer | None = None
        self.spare: Producer | None = None

    def open(self) -> None:
        """Create (and, with transactions, initialize) the producers."""
        if not self.transactional_ids:
            self.current = self._new(None)
            return
        first, *others = self.transactional_ids
        self.current = self._new(first)
        try:
            for transactional_id in others:
                self.spare = self._new(transactional_id)
        except BaseException:
            self.close(purge=True)
            raise

    def require(self) -> Producer:
        """The producer of the next transaction (or of every record, without them)."""
        if self.current is None:
            raise EndpointError("the kafka endpoint is not open")
        return self.current

    def rotate(self) -> None:
        """After a commit: the other producer takes the next transaction."""
        if self.spare is not None:
            self.current, self.spare = self.spare, self.current

    def close(self, *, purge: bool) -> None:
        """Flush (or, with ``purge``, drop what is queued) and close every producer."""
        producers = [self.current, self.spare]
        self.current = self.spare = None
        try:
            for producer in producers:
                if producer is None:
                    continue
                if purge:
                    producer.purge(in_queue=True, in_flight=True, blocking=False)
                else:
                    producer.flush(self.timeout_s)
        finally:
            with warnings.catch_warnings():
                # a fenced or failed producer warns that it cannot abort on close
                warnings.simplefilter("ignore", RuntimeWarning)
                for producer in producers:
                    if producer is not None:
                        producer.close()

    def _new(self, transactional_id: str | None) -> Producer:
        config = dict(self.config)
        config.pop("transactional.id", None)
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
        else:
            config.pop("transaction.timeout.ms", None)
            config.setdefault("delivery.report.only.error", True)  # callbacks for failures
        try:
            producer = Producer(config)
        except KafkaException as exc:
            raise kafka_error("invalid kafka producer configuration", exc, config) from exc
        if transactional_id is not None:
            try:
                self._init_transactions(producer)
            except BaseException:
                producer.close()
                raise
        return producer

    def _init_transactions(self, producer: Producer) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                producer.init_transactions(self.timeout_s)
                return
            except KafkaException as exc:
                err = error_of(exc)
                if err is None or not err.retriable() or time.monotonic() > deadline:
                    raise kafka_error("cannot initialize kafka transactions", exc,
                                      self.config) from exc
                time.sleep(0.5)
