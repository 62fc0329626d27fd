"""The Kafka endpoint's batch encoding without a broker: the default path (used when no
plug-in is replaced) yields exactly the records and dead letters of the general path,
under both policies, and a transaction carries records, dead letters and position."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint, UndeliverableError
from gridstream.mirror._dead_letter import DeadLetters
from gridstream.mirror._offsets import decode_position
from gridstream.mirror._producers import Producers
from gridstream.operations import Bulk, Operation, OpType, TypeDescriptor
from gridstream.protocol import (
    DefaultTopicResolver,
    MessageFactory,
    OperationDecoder,
    TopicResolver,
)

TYPES: dict[str, TypeDescriptor] = {
    "Typed": TypeDescriptor(name="Typed", id_property="id", topic="typed"),
    "Small": TypeDescriptor(name="Small", id_property="id", topic="small"),
    "Doc": TypeDescriptor(name="Doc", id_property="id"),
}
LIMITS = {"typed": 1_000_000, "small": 6_000, "docs-a": 1_000_000, "docs-b": 5_000,
          "fallback": 1_000_000, "p.typed": 1_000_000, "p.small": 6_000, "p.docs-a": 1_000_000,
          "p.docs-b": 5_000, "p.fallback": 1_000_000, "custom-Typed": 1_000_000,
          "custom-Small": 1_000_000, "custom-Doc": 1_000_000, "dlq": 1_000_000}


class PlainFactory(MessageFactory):
    """Changes nothing, but is not the default class: forces the general path."""


class ByType(TopicResolver):
    def resolve(self, operation: Operation, descriptor: TypeDescriptor | None) -> str | None:
        return None if operation.id == "no-topic" else f"custom-{operation.type_name}"


def _endpoint(*, general: bool, policy: str = "dead_letter", **options: Any) -> KafkaSyncEndpoint:
    resolver = options.pop("topic_resolver", None)
    endpoint = KafkaSyncEndpoint(
        KafkaEndpointConfig(bootstrap_servers="127.0.0.1:1", on_undeliverable=policy,
                            dead_letter_topic="dlq", **options),
        message_factory=PlainFactory() if general else None, topic_resolver=resolver)
    endpoint.mirror_name = "m"
    endpoint._limits.update(LIMITS)
    endpoint._admin = object()  # topics are all known: never used
    assert (endpoint.encoder.default_path() is None) is general
    return endpoint


def _encode(endpoint: KafkaSyncEndpoint, bulks: Sequence[Bulk],
            types: Mapping[str, TypeDescriptor] = TYPES) -> tuple[list[Any], list[Any]]:
    letters = DeadLetters(endpoint.encoder, endpoint.policy, "m")
    records = list(endpoint._records(bulks, types, letters))
    return records, endpoint._letters(letters)


def _bulks(ops: Sequence[Operation]) -> list[Bulk]:
    return [Bulk(first_seq=i, operations=(op,)) for i, op in enumerate(ops)]


def _write(type_name: str, entity_id: str, data: dict[str, Any] | None, version: int = 1,
           op: OpType = OpType.WRITE) -> Operation:
    return Operation(op, type_name, entity_id, version, data, version % 3, 1000 + version,
                     txn_id="t" if version % 2 else None)


MIXED = [
    _write("Typed", "a", {"id": "a", "n": 1}),
    _write("Doc", "b", {"id": "b", "kafka.topic": "docs-a"}, 2),
    _write("Doc", "c", {"id": "c"}, 3),  # no topic (unless a default one)
    _write("Ghost", "d", {"id": "d"}, 4),  # unknown type
    _write("Typed", "e", {"id": "e", "v": object()}, 5),  # unserializable
    _write("Small", "f", {"id": "f", "v": "x" * 6_000}, 6),  # oversized
    _write("Small", "g", {"id": "g", "v": "x" * 4_000}, 7),  # near the limit, fits
    # key + value fit, but not with the headers
    _write("Doc", "h", {"id": "h", "kafka.topic": "docs-b", "v": "y" * 4_320}, 8),
    _write("Typed", "i", None, 9, OpType.REMOVE),
    _write("Typed", "j", {1: "non-string key"}, 10),
]


@pytest.mark.parametrize("options", [{}, {"default_topic": "fallback"},
                                     {"topic_resolver": DefaultTopicResolver(
                                         default_topic="fallback", topic_prefix="p.")},
                                     {"topic_resolver": ByType()}],
                         ids=["defaults", "default topic", "prefix", "custom resolver"])
def test_default_path_yields_the_general_paths_records_and_letters(options: dict[str, Any]
                                                                   ) -> None:
    fast = _encode(_endpoint(general=False, **options), _bulks(MIXED))
    general = _encode(_endpoint(general=True, **options), _bulks(MIXED))
    assert fast == general
    records, letters = fast
    reasons = {reason for reason, _ in letters}
    assert {"unknown_type", "unserializable"} <= reasons
    assert ("oversized" in reasons) is not isinstance(options.get("topic_resolver"), ByType)
    assert all(isinstance(record[1], bytes) for record in records)


def test_oversize_counts_headers_near_the_limit() -> None:
    records, letters = _encode(_endpoint(general=False), _bulks(MIXED))
    kept = {OperationDecoder().decode(r[1], r[4]).id for r in records}
    assert "g" in kept and "h" not in kept and "f" not in kept
    assert {(reason, letter.topic) for reason, letter in letters} >= {("oversized", "dlq")}


@pytest.mark.parametrize("general", [False, True])
def test_fail_policy_raises_the_same_error_on_both_paths(general: bool) -> None:
    for bad in MIXED[2:6] + MIXED[7:8]:
        endpoint = _endpoint(general=general, policy="fail")
        with pytest.raises(UndeliverableError) as raised:
            _encode(endpoint, _bulks([MIXED[0], bad]))
        other = _endpoint(general=not general, policy="fail")
        with pytest.raises(UndeliverableError) as again:
            _encode(other, _bulks([MIXED[0], bad]))
        assert str(raised.value) == str(again.value)


def test_types_are_looked_up_per_batch() -> None:
    endpoint = _endpoint(general=False)
    op = _write("Doc", "x", {"id": "x", "kafka.topic": "docs-a"})
    (record,), _ = _encode(endpoint, _bulks([op]))
    assert record[0] == "docs-a"
    retyped = {**TYPES, "Doc": TypeDescriptor(name="Doc", id_property="id", topic="typed")}
    (record,), _ = _encode(endpoint, _bulks([op]), retyped)
    assert record[0] == "typed"
    _, letters = _encode(endpoint, _bulks([op]), {})
    assert [reason for reason, _ in letters] == ["unknown_type"]


texts = st.text(max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | texts
    | st.binary(max_size=6) | st.datetimes() | st.decimals(allow_nan=False, places=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts | st.integers(0, 3),
                                                                inner, max_size=3),
    max_leaves=8,
)


@st.composite
def operations(draw: st.DrawFn) -> Operation:
    type_name = draw(st.sampled_from(["Typed", "Small", "Doc", "Ghost"]))
    data: dict[Any, Any] | None = draw(st.none() | st.dictionaries(texts, json_values,
                                                                    max_size=4))
    if data is not None:
        if draw(st.booleans()):
            data["kafka.topic"] = draw(st.sampled_from(["docs-a", "docs-b", 7]))
        if draw(st.integers(0, 9)) == 0:
            data["bad"] = object()
        if draw(st.integers(0, 5)) == 0:
            data["big"] = "z" * draw(st.integers(3_500, 7_000))
    return Operation(draw(st.sampled_from(list(OpType))), type_name,
                     draw(texts | st.integers(-5, 10**6) | st.just("no-topic")),
                     draw(st.integers(0, 2**40)), data, draw(st.integers(0, 2000)),
                     draw(st.integers(0, 2**41)), txn_id=draw(st.none() | texts),
                     removed=tuple(draw(st.lists(texts, max_size=2))))


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(operations(), min_size=1, max_size=12),
       resolver=st.sampled_from(["defaults", "default topic", "custom"]))
def test_generated_batches_encode_identically(ops: list[Operation], resolver: str) -> None:
    options: dict[str, Any] = {"defaults": {}, "default topic": {"default_topic": "fallback"},
                               "custom": {"topic_resolver": ByType()}}[resolver]

    def outcome(general: bool) -> Any:
        try:
            return _encode(_endpoint(general=general, **options), _bulks(ops))
        except UnicodeEncodeError as exc:  # a lone surrogate cannot become a UTF-8 key
            return type(exc).__name__

    assert outcome(False) == outcome(True)


class FakeProducer:
    """Records what a transaction produced."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def begin_transaction(self) -> None:
        self.calls.append(("begin", {}))

    def produce(self, topic: str, value: bytes, key: bytes, **kwargs: Any) -> None:
        self.calls.append(("produce", {"topic": topic, "value": value, "key": key, **kwargs}))

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append(("commit", {}))

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append(("abort", {}))

    def produced(self) -> Iterator[dict[str, Any]]:
        return (call for kind, call in self.calls if kind == "produce")


def _install(endpoint: KafkaSyncEndpoint, current: FakeProducer,
             spare: FakeProducer | None = None) -> Producers:
    """Fake producers in place of the endpoint's (``spare`` takes every other one)."""
    producers = Producers({}, (), 1.0)
    producers.current, producers.spare = current, spare  # type: ignore[assignment]
    endpoint._producers = producers
    return producers


@pytest.mark.parametrize("general", [False, True])
def test_a_transaction_carries_records_then_letters_then_the_position(general: bool) -> None:
    endpoint = _endpoint(general=general)
    endpoint.bind_log("log-1")
    producer = FakeProducer()
    _install(endpoint, producer)
    endpoint.write_batch(_bulks(MIXED), TYPES)
    kinds = [kind for kind, _ in producer.calls]
    assert kinds[0] == "begin" and kinds[-1] == "commit" and "abort" not in kinds
    produced = list(producer.produced())
    records, letters = _encode(_endpoint(general=not general), _bulks(MIXED))
    assert [(p["topic"], p["value"], p["key"], p["timestamp"], p["headers"])
            for p in produced[:len(records)]] == records
    assert [p["topic"] for p in produced[len(records):-1]] == ["dlq"] * len(letters)
    position = produced[-1]
    assert position["topic"] == endpoint.offsets_topic and position["key"] == b"m"
    assert decode_position(position["value"], expected_log="log-1") == len(MIXED)
    assert orjson.loads(position["value"])["log"] == "log-1"
    assert position["partition"] == endpoint._offsets_partition
    assert endpoint.records_sent == len(records)
    assert sum(endpoint.dead_lettered.values()) == len(letters) == len(MIXED) - len(records)


def test_a_reject_under_fail_aborts_the_transaction() -> None:
    endpoint = _endpoint(general=False, policy="fail")
    producer = FakeProducer()
    _install(endpoint, producer)
    with pytest.raises(UndeliverableError):
        endpoint.write_batch(_bulks([MIXED[0], MIXED[3], MIXED[1]]), TYPES)
    kinds = [kind for kind, _ in producer.calls]
    assert kinds[0] == "begin" and kinds[-1] == "abort" and "commit" not in kinds
    assert endpoint.records_sent == 0


def test_committed_transactions_alternate_between_the_two_producers() -> None:
    endpoint = _endpoint(general=False)
    first, second = FakeProducer(), FakeProducer()
    producers = _install(endpoint, first, second)
    batch = _bulks(MIXED[:2])
    for _ in range(3):
        endpoint.write_batch(batch, TYPES)
    assert [kind for kind, _ in first.calls].count("commit") == 2
    assert [kind for kind, _ in second.calls].count("commit") == 1
    assert producers.current is second and producers.spare is first


def test_an_aborted_transaction_keeps_its_producer_for_the_retry() -> None:
    endpoint = _endpoint(general=False, policy="fail")
    first, second = FakeProducer(), FakeProducer()
    producers = _install(endpoint, first, second)
    with pytest.raises(UndeliverableError):
        endpoint.write_batch(_bulks([MIXED[0], MIXED[3]]), TYPES)
    assert producers.current is first and not second.calls
