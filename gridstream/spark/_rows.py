"""Arrow batches of decoded envelopes → ``Operation`` objects (in Spark's Python workers).

Only ``data`` is parsed here (orjson, one call per row inside an Arrow batch); the
envelope fields were decoded and checked in the JVM. Declared properties are restored to
their Python types with the protocol's own rules, so a store sees the same values as
the mirror's direct endpoint would.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gridstream.fold import parse_data
from gridstream.operations import EntityId, Operation, OpType
from gridstream.protocol.values import restore
from gridstream.spark.types import TypeRegistry

__all__ = ["entity_id", "operations_from_arrow"]


def entity_id(text: str, is_int: bool) -> EntityId:
    """The envelope's id back in its wire type."""
    return int(text) if is_int else text


def operations_from_arrow(batch: Any, types: TypeRegistry) -> Iterator[Operation]:
    """The operations of an Arrow record batch with ``OPERATION_COLUMNS``."""
    cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
    for i in range(batch.num_rows):
        type_name: str = cols["type"][i]
        where = f"{type_name} id={cols['id'][i]!r} version={cols['version'][i]}"
        data = parse_data(cols["data"][i], where)
        declared = types.declared.get(type_name)
        if data is not None and declared is not None and declared.fixed:
            data = restore(data, declared.fixed)
        yield Operation(
            op=OpType(cols["op"][i]),
            type_name=type_name,
            id=entity_id(cols["id"][i], bool(cols["id_int"][i])),
            version=int(cols["version"][i]),
            data=data,
            partition=int(cols["partition"][i]),
            timestamp_ms=int(cols["ts"][i]),
            txn_id=cols["txn"][i],
            removed=tuple(cols["removed"][i] or ()),
        )
