"""Kafka sources and sinks of the pipeline API.

Properties are Kafka's (``bootstrap.servers``, ``key.deserializer``, ``value.serializer``,
``auto.offset.reset``, ``group.id``, security settings...): client properties pass
through to Spark's Kafka source and sink as ``kafka.<name>``; the (de)serializers come
from ``gridstream.pipeline.serde``; ``auto.offset.reset`` says where a query with no
checkpoint position starts. Under ``EXACTLY_ONCE`` the sink writes through
``KafkaExactlyOnceWriter`` (``foreachBatch``); under ``AT_LEAST_ONCE``, when its pass
reads a Kafka source's rows (``KafkaSink.fuses``), through the pass's own tasks and
their idempotent producer (``_fused.start_at_least_once``: the query's own tasks, no
``foreachBatch``); otherwise through Spark's Kafka sink. Above ``NONE`` a fused pass
runs in the writer's tasks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from gridstream.errors import ConfigError
from gridstream.kafka import KafkaProperties, redact
from gridstream.kafka.config import lossy_producer_setting
from gridstream.pipeline import serde
from gridstream.pipeline.base import (
    Flow,
    Guarantee,
    RunContext,
    Sink,
    Source,
)
from gridstream.pipeline.errors import route_to_kafka
from gridstream.pipeline.serde._names import check_options
from gridstream.pipeline.streaming import (
    OBSERVED,
    configure,
    good_rows,
    is_real_time,
    observed,
)
from gridstream.spark.kafka_source import (
    MAX_OFFSETS_PER_TRIGGER,
    SPARK_MANAGED,
    client_options,
    source_options,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


__all__ = ["KafkaSink", "KafkaSinks", "KafkaSource", "KafkaSources", "Projection"]

Projection = Literal["entry", "value", "record"]
_SERDE_PREFIXES = ("key.", "value.", "schema.registry.", "basic.auth.",
                   "auto.register.schemas", "use.latest.version", "unknown_fields",
                   "unknown.fields")
"""Properties of the (de)serializers, not of the Kafka clients."""
_SOURCE_OWN = frozenset({"isolation.level", "group.id"})
_PLAIN_TOPIC = re.compile(r"[A-Za-z0-9._-]+")
"""A name Kafka allows for a topic (what ``subscribe`` reads as one topic)."""


def _split(props: Mapping[str, Any], owner: str, *, sink: bool,
           ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Bootstrap servers, client properties, (de)serializer properties (``ConfigError``
    for one that is no option of the sink's serializers or the source's
    deserializers)."""
    if not isinstance(props, Mapping):
        raise ConfigError(f"{owner}: properties must be a mapping")
    bootstrap = props.get("bootstrap.servers")
    if not bootstrap:
        raise ConfigError(f"{owner}: properties need bootstrap.servers")
    client = {k: v for k, v in props.items()
              if k != "bootstrap.servers" and not k.startswith(_SERDE_PREFIXES)}
    serde_props = {k: v for k, v in props.items() if k.startswith(_SERDE_PREFIXES)}
    check_options(serde_props, serializer=sink, owner=owner)
    return str(bootstrap), client, serde_props


def _flag(value: Any) -> bool:
    return str(value).strip().lower() == "true"


class KafkaSource(Source):
    """Spark's Kafka source; items per ``projection``, at most ``max_offsets_per_trigger``
    records per micro-batch (None: all available, Spark's default; real-time mode reads
    without it, Spark refuses it there)."""

    stateless_ok = True

    def __init__(self, props: Mapping[str, Any], topics: str | Sequence[str] | None, *,
                 projection: Projection = "entry", pattern: str | None = None,
                 max_offsets_per_trigger: int | None = MAX_OFFSETS_PER_TRIGGER) -> None:
        if projection not in ("entry", "value", "record"):
            raise ConfigError(f"projection {projection!r}: use 'entry', 'value' or 'record'")
        if max_offsets_per_trigger is not None and (
                type(max_offsets_per_trigger) is not int or max_offsets_per_trigger < 1):
            raise ConfigError(f"KafkaSources.kafka: max_offsets_per_trigger "
                              f"{max_offsets_per_trigger!r}: a positive integer, or None")
        self.bootstrap, client, serde_props = _split(props, "KafkaSources.kafka", sink=False)
        self.topics = [topics] if isinstance(topics, str) else (
            list(topics) if topics is not None else None)
        if self.topics is not None and not all(self.topics):
            raise ConfigError("KafkaSources.kafka: empty topic name")
        self.pattern, self.projection = pattern, projection
        self.max_offsets_per_trigger = max_offsets_per_trigger
        reset = str(client.get("auto.offset.reset", "latest")).strip().lower()
        if reset not in ("earliest", "latest"):
            raise ConfigError(f"auto.offset.reset {reset!r}: use 'earliest' or 'latest'")
        self.starting_offsets = reset
        self.isolation_level = str(client.get("isolation.level", "read_committed"))
        self.group_id = client.get("group.id")
        self.group_commit = bool(self.group_id) and _flag(client.get("enable.auto.commit"))
        self.client = KafkaProperties({k: v for k, v in client.items()
                                       if k not in SPARK_MANAGED and k not in _SOURCE_OWN})
        self.key_de = serde.deserializer(serde_props, is_key=True)
        self.value_de = serde.deserializer(serde_props, is_key=False)
        if self.topics is None and pattern is None:
            raise ConfigError("KafkaSources.kafka: give topics or a pattern")

    def check(self, guarantee: Guarantee) -> None:
        """Under ``EXACTLY_ONCE`` records of aborted transactions must not be read."""
        if (guarantee == Guarantee.EXACTLY_ONCE
                and self.isolation_level.strip().lower() != "read_committed"):
            raise ConfigError(f"KafkaSources.kafka: isolation.level="
                              f"{self.isolation_level!r} cannot give EXACTLY_ONCE (it reads "
                              "records of aborted transactions); use read_committed")

    def nodes(self) -> list[str]:
        return [f"kafka:{t}" for t in self.topics] if self.topics else [
            f"kafka:/{self.pattern}/"]

    def describe(self) -> str:
        what = ",".join(self.topics) if self.topics else f"pattern {self.pattern!r}"
        return (f"kafka {what} @ {self.bootstrap} ({self.projection}; "
                f"key {self.key_de!r}, value {self.value_de!r}; "
                f"{redact(dict(self.client.items()))})")

    def options(self, context: RunContext, starting_offsets: str | None = None,
                ) -> dict[str, str]:
        """The Spark Kafka source's options (secrets unwrapped: never print)."""
        config = dict(self.client.client_config())
        if self.group_id:
            config["group.id"] = self.group_id
        return source_options(
            self.bootstrap, config, topics=self.topics, pattern=self.pattern,
            starting_offsets=starting_offsets or self.starting_offsets,
            isolation_level=self.isolation_level,
            include_headers=self.projection == "record",
            max_offsets_per_trigger=None if is_real_time(context.trigger)
            else self.max_offsets_per_trigger)

    def flow(self, spark: SparkSession, context: RunContext) -> Flow:
        import pyspark.sql.functions as F

        from gridstream.pipeline.groups import starting_offsets

        start = None
        if context.guarantee == Guarantee.NONE and self.group_commit:
            start = starting_offsets(self, context)
        from gridstream.pipeline.serde import decode_columns

        raw = spark.readStream.format("kafka").options(**self.options(context, start)).load()
        meta = ["topic", "partition", "offset", "timestamp"]
        if self.projection == "record":
            meta.append("headers")
        where = F.concat(F.col("topic"), F.lit("["), F.col("partition").cast("string"),
                         F.lit("]@"), F.col("offset").cast("string"))
        base = raw.select("key", "value", *meta, F.col("timestamp").alias("_gs_ts"),
                          where.alias("_gs_where"))
        decoded = decode_columns(base, self.key_de, self.value_de, topics=self.topics)
        hidden = [c for c in decoded.df.columns if c.startswith("_gs_")]
        notes = ("jvm: kafka source", *decoded.notes)
        if decoded.decode is not None:  # some side decodes in Python, at the pass's head
            df = decoded.df.select("key", "value", *meta, *hidden)
            return Flow(df, self.projection, _ItemDecode(decoded.decode, self.projection),
                        notes)
        visible = {"entry": ["key", "value"], "value": ["value"],
                   "record": ["topic", "partition", "offset", "timestamp", "key", "value",
                              "headers"]}[self.projection]
        for_pass = None
        if self.key_de.vectorized and self.value_de.vectorized:
            # a Python pass that comes first decodes both sides itself, at once
            raw_bytes = {"_gs_raw_key": F.col("key"), "_gs_raw_value": F.col("value")}
            # the key too when only the value is seen: a key that is not UTF-8 is still
            # an error row, as in the JVM
            decoded_sides = visible if "key" in visible else ["key", *visible]
            # the origin as parts besides its text: the pass takes the parts when
            # nothing after it reads the origin (compile._item_pass)
            # (one topic: a name Spark's `subscribe` does not split at a comma or trim)
            one_topic = self.topics[0] if self.topics and len(self.topics) == 1 and \
                _PLAIN_TOPIC.fullmatch(self.topics[0]) else None
            parts = {"_gs_origin_partition": F.col("partition"),
                     "_gs_origin_offset": F.col("offset"),
                     **({} if one_topic else {"_gs_origin_topic": F.col("topic")})}
            for_pass = Flow(base.withColumns({**raw_bytes, **parts}).select(
                *decoded_sides, *(c for c in hidden if c in base.columns or c in raw_bytes),
                *parts), self.projection, origin_topic=one_topic,
                notes=("jvm: kafka source", *(
                    f"{side}: {de.name} in the Python pass (Arrow)"
                    for side, de in (("key", self.key_de), ("value", self.value_de)))),
                head=serde.ArrowDecode(self.key_de, self.value_de))
        return Flow(decoded.df.select(*visible, *hidden), self.projection, None, notes,
                    for_pass=for_pass)


class _ItemDecode:
    """The Python decode head: a row of the source's columns → the item (picklable)."""

    def __init__(self, decode: Callable[[dict[str, Any]], dict[str, Any]],
                 projection: Projection) -> None:
        self.decode, self.projection = decode, projection

    def __call__(self, row: dict[str, Any]) -> Any:
        from gridstream.pipeline.api import KafkaRecord

        row = self.decode(row)
        if self.projection == "value":
            return row["value"]
        if self.projection == "entry":
            return (row["key"], row["value"])
        headers = tuple((h["key"], h["value"]) for h in row.get("headers") or ())
        return KafkaRecord(row["topic"], row["partition"], row["offset"], row["timestamp"],
                           row["key"], row["value"], headers)


class KafkaSink(Sink):
    """The exactly-once writer (``EXACTLY_ONCE``), the fused pass's idempotent producer
    (``AT_LEAST_ONCE``, ``fuses``) or Spark's Kafka sink."""

    reads_where = False  # only a dead letter's headers do

    def __init__(self, props: Mapping[str, Any], topic: str, *,
                 key_fn: Callable[[Any], Any] | None = None,
                 value_fn: Callable[[Any], Any] | None = None,
                 guarantee: Guarantee | str | None = None) -> None:
        if not topic:
            raise ConfigError("KafkaSinks.kafka: give a topic")
        self.bootstrap, client, serde_props = _split(props, "KafkaSinks.kafka", sink=True)
        self.topic, self.key_fn, self.value_fn = topic, key_fn, value_fn
        self.cap = (Guarantee.EXACTLY_ONCE if guarantee is None
                    else Guarantee.parse(guarantee))
        self.client = KafkaProperties(client)
        self.key_ser = serde.serializer(serde_props, is_key=True)
        self.value_ser = serde.serializer(serde_props, is_key=False)
        self.foreach_batch = False
        self._writer: Any = None

    def check(self, guarantee: Guarantee) -> None:
        """Above ``NONE`` every record must reach all in-sync replicas, once: ``acks``
        other than ``all`` / ``-1`` or ``enable.idempotence=false`` would lose or
        duplicate records silently."""
        if guarantee == Guarantee.NONE:
            return
        lossy = lossy_producer_setting(self.client)
        if lossy is not None:
            raise ConfigError(f"KafkaSinks.kafka: {lossy.setting} cannot give {guarantee} "
                              f"({lossy.why}); {lossy.fix}, or guarantee NONE")

    def nodes(self) -> list[str]:
        return [f"kafka:{self.topic}"]

    def describe(self) -> str:
        return (f"kafka {self.topic} @ {self.bootstrap} (key {self.key_ser!r}, value "
                f"{self.value_ser!r}; {redact(dict(self.client.items()))})")

    def columns(self) -> str:
        return "key binary, value binary"

    def encode(self, item: Any) -> dict[str, Any]:
        key, value = self.encode_row(item)
        return {"key": key, "value": value}

    def row_encoder(self) -> Callable[[Any], list[Any]] | None:
        # a subclass that changes ``encode`` keeps it as the pass's tail; one that changes
        # ``encode_row`` or ``split``, its own (a bound method: the sink is shipped)
        kind = type(self)
        if kind.encode is not KafkaSink.encode:
            return None
        if kind.encode_row is not KafkaSink.encode_row or kind.split is not KafkaSink.split:
            return self.encode_row
        return serde.RowEncode(self._split(), self.topic, self.key_ser, self.value_ser)

    def column_encoder(self) -> tuple[Callable[[Any], Sequence[Any]], serde.ArrowEncode] | None:
        # by columns when both sides have a vectorized form, and a subclass changes none
        # of the encodes (its own is then the pass's tail)
        kind = type(self)
        if (kind.encode is not KafkaSink.encode or kind.encode_row is not KafkaSink.encode_row
                or kind.row_encoder is not KafkaSink.row_encoder
                or not (self.key_ser.vectorized and self.value_ser.vectorized)):
            return None
        split = self._split() if kind.split is KafkaSink.split else self.split
        return split, serde.ArrowEncode(self.topic, self.key_ser, self.value_ser)

    def _split(self) -> serde.KeySplit:
        """The split as the pass's tail: its functions, not the sink."""
        return serde.KeySplit(self.key_fn, self.value_fn)

    def split(self, item: Any) -> Sequence[Any]:
        """An item's key and value, before their serializers (``serde.KeySplit``)."""
        return serde.split_item(item, self.key_fn, self.value_fn)

    def encode_row(self, item: Any) -> list[Any]:
        """The key's and the value's bytes, in the order of ``columns``."""
        return serde.encode_pair(self.split(item), self.topic, self.key_ser, self.value_ser)

    def jvm_encode(self, flow: Flow) -> DataFrame | None:
        """The flow's columns serialized in the JVM, or None (Python must encode)."""
        import pyspark.sql.functions as F

        if self.key_fn is not None or self.value_fn is not None:
            return None
        from pyspark.sql.types import _parse_datatype_string

        names = [c for c in flow.df.columns if not c.startswith("_gs_")]
        types = {f.name: f.dataType.simpleString() for f in flow.df.schema.fields}
        errors: list[Column] = []

        def jvm(ser: serde.Serializer, column: str) -> Column | None:
            if ser.jvm_type is None or types.get(column) != _parse_datatype_string(
                    ser.jvm_type).simpleString():
                return None  # no JVM form for this type: the Python pass encodes
            error = ser.jvm_errors(F.col(column))
            if error is not None:
                errors.append(error)
            return ser.jvm(F.col(column), self.topic)

        if flow.item == "entry" or (flow.item == "row" and set(names) == {"key", "value"}):
            key_bytes, value_bytes = jvm(self.key_ser, "key"), jvm(self.value_ser, "value")
        elif flow.item == "value" or (flow.item == "row" and names == ["value"]):
            key_bytes, value_bytes = F.lit(None).cast("binary"), jvm(self.value_ser, "value")
        else:
            return None
        if key_bytes is None or value_bytes is None:
            return None
        hidden = [c for c in flow.df.columns if c.startswith("_gs_")]
        df = flow.df
        if errors:  # a row that cannot be encoded goes to the error policy, not to to_avro
            error = F.coalesce(F.col("_gs_error"), *errors)
            stage = F.when(F.col("_gs_error").isNull() & error.isNotNull(),
                           F.lit("encode")).otherwise(F.col("_gs_stage"))
            df = df.withColumns({"_gs_error": error, "_gs_stage": stage})
            fine = F.col("_gs_error").isNull()
            key_bytes, value_bytes = F.when(fine, key_bytes), F.when(fine, value_bytes)
        return df.select(key_bytes.alias("key"), value_bytes.alias("value"), *hidden)

    def producer_options(self) -> dict[str, str]:
        """Spark Kafka sink options (secrets unwrapped: never print)."""
        return client_options(self.bootstrap, self.client.client_config())

    def fuses(self, context: RunContext) -> bool:
        """Above ``NONE``, the sink's pass runs in the writer's own tasks, which produce
        from Python: the exactly-once writer's transactions, or at least once the
        worker's idempotent producer in the query's own tasks (one Python pass a task,
        no rows back into the JVM, each Arrow batch produced as it comes); the dead-letter
        policy's routing stays in the JVM."""
        return context.guarantee != Guarantee.NONE and context.errors != "dead_letter"

    def start(self, flow: Flow, context: RunContext,
              on_batch: Callable[[int, dict[str, Any]], None]) -> StreamingQuery:
        last = flow.last_pass if self.fuses(context) else None
        if context.guarantee != Guarantee.EXACTLY_ONCE:
            if last is not None:
                from gridstream.pipeline._fused import start_at_least_once

                return start_at_least_once(last, context, self.at_least_once_properties(),
                                           self.topic)
            df = route_to_kafka(good_rows(observed(flow.df), context), context, self.topic)
            writer = df.writeStream.format("kafka").options(**self.producer_options())
            return configure(writer, context).start()
        from gridstream.pipeline._fused import counted, fused_through
        from gridstream.spark.kafka_through import check_producer
        from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter

        config = dict(self.client.client_config())
        timeout = int(config.pop("transaction.timeout.ms", 60_000))
        for owned in ("enable.idempotence", "acks", "transactional.id"):
            config.pop(owned, None)
        self.foreach_batch = True
        self._writer = writer_ = KafkaExactlyOnceWriter(
            self.bootstrap, name=context.name, properties=config,
            topic=None if last is None else self.topic, transaction_timeout_ms=timeout,
            trigger=None if context.trigger in (None, "available_now") else context.trigger)
        check_producer(writer_.properties)  # a bad property is said before the query starts
        through = None if last is None else fused_through(last)

        def batch(batch_df: DataFrame, batch_id: int) -> None:
            result = writer_.write(batch_df, batch_id, through)
            counts: dict[str, Any] = {"written": result.written, "skipped": result.skipped}
            if through is not None:  # no JVM node after the pass counts them
                counts[OBSERVED] = counted(result.written + result.skipped, result.dropped)
            on_batch(batch_id, counts)

        df = route_to_kafka(good_rows(observed(flow.df), context), context, self.topic) \
            if last is None else last.input
        return configure(df.writeStream.foreachBatch(batch), context).start()

    def at_least_once_properties(self) -> KafkaProperties:
        """The fused pass's idempotent producer's: the sink's properties (secrets kept)
        over the exactly-once writer's defaults, without the transactional ones."""
        from gridstream.spark.kafka_writer import PRODUCER_DEFAULTS

        # the secrets revealed here are wrapped again by KafkaProperties
        config = {k: v for k, v in self.client.client_config().items()
                  if k not in ("transactional.id", "transaction.timeout.ms")}
        return KafkaProperties(config).layered(PRODUCER_DEFAULTS,
                                               {"bootstrap.servers": self.bootstrap})

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class KafkaSources:
    """Factories of Kafka sources."""

    @staticmethod
    def kafka(props: Mapping[str, Any], topics: str | Sequence[str] | None = None, *,
              projection: Projection = "entry", pattern: str | None = None,
              max_offsets_per_trigger: int | None = MAX_OFFSETS_PER_TRIGGER) -> KafkaSource:
        """Read ``topics`` (or the topics matching ``pattern``): items are ``(key,
        value)`` tuples (``projection="entry"``), the value alone (``"value"``) or
        ``KafkaRecord`` (``"record"``). A micro-batch reads at most
        ``max_offsets_per_trigger`` records (default ``MAX_OFFSETS_PER_TRIGGER``,
        100,000: a backlog drains as many batches; None: everything available in one)."""
        return KafkaSource(props, topics, projection=projection, pattern=pattern,
                           max_offsets_per_trigger=max_offsets_per_trigger)


class KafkaSinks:
    """Factories of Kafka sinks."""

    @staticmethod
    def kafka(props: Mapping[str, Any], topic: str, *,
              key_fn: Callable[[Any], Any] | None = None,
              value_fn: Callable[[Any], Any] | None = None,
              guarantee: Guarantee | str | None = None) -> KafkaSink:
        """Write to ``topic``: a ``(key, value)`` item gives key and value, any other
        item is the value (no key); ``key_fn``/``value_fn`` pick them instead.
        ``guarantee`` lowers the pipeline's (never raises it)."""
        return KafkaSink(props, topic, key_fn=key_fn, value_fn=value_fn,
                         guarantee=guarantee)
