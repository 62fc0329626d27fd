"""The Kafka sink's encode of a batch's columns at once, in its Python pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gridstream.errors import INFRASTRUCTURE, CodecError
from gridstream.pipeline.serde._base import Serializer

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ArrowEncode"]


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
