"""The (de)serializer contract: a JVM form where Spark SQL computes it exactly, always a
Python form (on Arrow batches, in the pipeline's Python pass).

Objects are picklable (shipped to the executors) and open their clients lazily.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

__all__ = ["Deserializer", "Serializer", "unknown_fields"]


def unknown_fields(props: Mapping[str, Any]) -> str:
    """``unknown.fields`` (also spelt ``unknown_fields``): ``extra`` (the default) or
    ``drop`` — checked by the caller."""
    return str(props.get("unknown.fields", props.get("unknown_fields", "extra")))


class _Side:
    """One side of a record (key or value), named for messages."""

    name: str = ""
    """The short name (``String``, ``Avro``, ...)."""

    def __init__(self, *, is_key: bool) -> None:
        self.is_key = is_key

    @property
    def side(self) -> str:
        return "key" if self.is_key else "value"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.side})"


class Deserializer(_Side, ABC):
    """Kafka bytes → a value (one side of a record: key or value)."""

    ddl: str | None = None
    """The Spark type of the decoded value when it is fixed (``string``, ``bigint``, a
    declared struct), else None (any Python object: JSON without a declared schema)."""

    why_python: str = ""
    """Why ``jvm`` gave None (for ``describe``), when there is more to say than that this
    format has no JVM form."""

    def for_topics(self, topics: Sequence[str] | None) -> None:
        """The source's topics (None: a pattern), told before ``prepare``."""
        return None

    def staged(self, raw: Column) -> dict[str, Column]:
        """Columns computed in a projection before ``jvm``'s, which read them (an
        expensive decode both its columns need: computed once a row)."""
        return {}

    def jvm(self, raw: Column) -> tuple[Column, Column | None] | None:
        """The JVM decode of the binary column ``raw``: (decoded column, error column —
        the reason text, null when the row decoded — or None when it cannot fail).
        None: no exact JVM form; ``python`` decodes."""
        return None

    vectorized: bool = False
    """Whether ``arrow`` decodes a whole column at once (then a Python pass that follows
    the source decodes this side itself, sparing the JVM its decode)."""

    def arrow(self, column: pa.Array) -> pa.Array:
        """Decode a batch's binary column at once (``vectorized`` formats, which do not
        depend on the topic); ``CodecError`` when a row does not decode (the pass then
        decodes that batch row by row with ``python``, naming the rows)."""
        raise NotImplementedError(f"{self.name} has no vectorized decode")

    @abstractmethod
    def python(self, topic: str, data: bytes | None) -> Any:
        """Decode one record's bytes (``CodecError`` for bytes it cannot decode)."""

    def prepare(self) -> None:
        """On the driver, the Spark session up, before the query starts (e.g. parse a
        declared Spark schema); ``decode_columns`` calls it."""
        return None

    def close(self) -> None:
        """Release the clients opened on this side."""
        return None


class Serializer(_Side, ABC):
    """A value → Kafka bytes."""

    jvm_type: str | None = None
    """The Spark type ``jvm`` takes (``string`` for String), None without a JVM form."""

    def jvm(self, col: Column, topic: str | None = None) -> Column | None:
        """The JVM encode of ``col`` (of type ``jvm_type``) to binary, or None."""
        return None

    def jvm_errors(self, col: Column) -> Column | None:
        """The reason a row's ``col`` cannot be encoded by ``jvm`` (null when it can), for
        the error policy; None when every value of ``jvm_type`` encodes."""
        return None

    vectorized: bool = False
    """Whether ``arrow`` encodes a whole column at once (then the Kafka sink's Python
    pass encodes this side by the batch's column, with no Python call per value)."""

    def arrow(self, values: list[Any]) -> pa.Array:
        """Encode a batch's values at once to a binary column (``vectorized`` formats,
        which do not depend on the topic); ``CodecError`` when a value cannot be encoded
        (the pass then encodes that column value by value with ``python``, naming the
        rows)."""
        raise NotImplementedError(f"{self.name} has no vectorized encode")

    @abstractmethod
    def python(self, topic: str, value: Any) -> bytes | None:
        """Encode one value (``CodecError`` for a value this serializer cannot write)."""

    def close(self) -> None:
        return None
