"""The Kafka sink's tail in its Python pass: an item split into its key and value
(``KeySplit``), then encoded row by row (``RowEncode``) or a batch's columns at once
(``ArrowEncode``); the pass's batches as a writer that runs it takes them
(``KeyValues``). Small picklable objects: a pass that ends in them ships none of the
sink (its client settings stay in the driver) and its workers import none of the Kafka
client modules."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from gridstream.errors import INFRASTRUCTURE, CodecError
from gridstream.pipeline.serde._base import Serializer

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ArrowEncode", "KeySplit", "KeyValues", "RowEncode", "encode_pair", "split_item"]


class KeySplit:
    """An item's key and value, before their serializers: ``key_fn`` / ``value_fn``
    when given, else a ``(key, value)`` tuple's parts, else no key and the item."""

    def __init__(self, key_fn: Callable[[Any], Any] | None,
                 value_fn: Callable[[Any], Any] | None) -> None:
        self.key_fn, self.value_fn = key_fn, value_fn

    def __call__(self, item: Any) -> Sequence[Any]:
        return split_item(item, self.key_fn, self.value_fn)


def split_item(item: Any, key_fn: Callable[[Any], Any] | None,
               value_fn: Callable[[Any], Any] | None) -> Sequence[Any]:
    """``KeySplit``'s rule (``KafkaSink.split`` applies it without an object per item)."""
    if key_fn is not None or value_fn is not None:
        return (key_fn(item) if key_fn is not None else None,
                value_fn(item) if value_fn is not None else item)
    if isinstance(item, tuple) and len(item) == 2:
        return item
    return None, item


class RowEncode:
    """An item's key's and value's bytes (``split``, then each side's serializer)."""

    def __init__(self, split: Callable[[Any], Sequence[Any]], topic: str, key: Serializer,
                 value: Serializer) -> None:
        self.split, self.topic, self.key, self.value = split, topic, key, value

    def __call__(self, item: Any) -> list[Any]:
        return encode_pair(self.split(item), self.topic, self.key, self.value)


def encode_pair(pair: Sequence[Any], topic: str, key: Serializer, value: Serializer,
                ) -> list[Any]:
    """A key's and a value's bytes (each side's serializer, in Python)."""
    return [key.python(topic, pair[0]), value.python(topic, pair[1])]


class ArrowEncode:
    """A batch's keys and values (Python values, the items' parts) encoded at once
    (``Serializer.arrow``) to the binary ``key`` and ``value`` columns. A column with a
    value that does not encode is encoded value by value (``python``): such a row's
    bytes are None and what it raised is returned by row (the key's before the value's);
    a service's failure (``INFRASTRUCTURE``) is raised, as the pass's loop does.
    Picklable."""

    def __init__(self, topic: str, key: Serializer, value: Serializer) -> None:
        if not (key.vectorized and value.vectorized):
            raise ValueError("ArrowEncode needs two vectorized serializers")
        self.topic, self.key, self.value = topic, key, value

    def __repr__(self) -> str:
        return f"ArrowEncode(key={self.key!r}, value={self.value!r})"

    def __call__(self, columns: Sequence[list[Any]]
                 ) -> tuple[list[pa.Array], dict[int, Exception]]:
        import pyarrow as pa

        arrays: list[pa.Array] = []
        failed: dict[int, Exception] = {}
        for values, ser in zip(columns, (self.key, self.value), strict=True):
            try:
                arrays.append(ser.arrow(values))
                continue
            except CodecError:
                pass
            encoded: list[bytes | None] = []
            for row, value in enumerate(values):
                try:
                    encoded.append(ser.python(self.topic, value))
                except INFRASTRUCTURE:
                    raise
                except Exception as exc:  # noqa: BLE001 - the row's, as in the pass's loop
                    encoded.append(None)
                    failed.setdefault(row, exc)
            arrays.append(pa.array(encoded, pa.binary()))
        return arrays, failed


class KeyValues:
    """The Kafka sink's pass as a writer that runs it in its own tasks takes it: each
    output batch's key and value, without the rows its error policy left out
    (``errors="log"``: counted, as the JVM counts them after a pass of its own)."""

    def __init__(self, fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
                 ) -> None:
        self.fn = fn

    def __call__(self, batches: Iterator[pa.RecordBatch],
                 ) -> Iterator[tuple[pa.RecordBatch, int]]:
        import pyarrow.compute as pc

        for out in self.fn(batches):
            dropped = 0
            if "_gs_error" in out.schema.names and \
                    out.column("_gs_error").null_count < out.num_rows:
                kept = out.filter(pc.is_null(out.column("_gs_error")))
                dropped, out = out.num_rows - kept.num_rows, kept
            yield out.select(["key", "value"]), dropped
