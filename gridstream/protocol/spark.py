"""The envelope's Spark SQL schema, so pipelines decode JSON records in the JVM.

``from_json(col("value").cast("string"), spark_schema_ddl(descriptor))`` yields the
envelope with ``data`` typed per the descriptor's fixed properties. Dynamic properties
are not in the schema (Spark drops them); decimals stay STRING (lossless; cast as
needed); bytes are BINARY (Spark decodes the base64 text); list/set elements, dict
values and ``any`` properties are STRING holding their JSON text.
"""

from __future__ import annotations

import re

from gridstream.kinds import KindVisitor, kind_table
from gridstream.operations import PropertySpec, TypeDescriptor

__all__ = ["envelope_ddl", "spark_schema_ddl", "spark_type"]



class _SparkTypes(KindVisitor[str]):
    """A kind's Spark SQL type (an ``object`` with nested properties: a ``STRUCT``)."""

    def str_(self) -> str:
        return "STRING"

    def int_(self) -> str:
        return "BIGINT"

    def float_(self) -> str:
        return "DOUBLE"

    def bool_(self) -> str:
        return "BOOLEAN"

    def bytes_(self) -> str:
        return "BINARY"

    def datetime(self) -> str:
        return "TIMESTAMP"

    def date(self) -> str:
        return "DATE"

    def list_(self) -> str:
        return "ARRAY<STRING>"

    set_ = list_

    def dict_(self) -> str:
        return "MAP<STRING, STRING>"

    decimal = uuid = object_ = any_ = str_


_SIMPLE: dict[str, str] = {k.value: t for k, t in kind_table(_SparkTypes()).items()}


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else \
        "`" + name.replace("`", "``") + "`"


def spark_type(spec: PropertySpec) -> str:
    """The Spark SQL type of one declared property."""
    if spec.kind == "object" and spec.nested:
        return _struct(spec.nested)
    return _SIMPLE.get(spec.kind, "STRING")


def _struct(specs: tuple[PropertySpec, ...]) -> str:
    return "STRUCT<" + ", ".join(f"{_quote(s.name)}: {spark_type(s)}" for s in specs) + ">"


def envelope_ddl(data_type: str, id_type: str = "STRING") -> str:
    """The envelope DDL around a given ``data`` type."""
    return (
        f"op STRING, type STRING, id {id_type}, version BIGINT, txn STRING, ts BIGINT, "
        f"`partition` INT, data {data_type}, removed ARRAY<STRING>"
    )


def spark_schema_ddl(descriptor: TypeDescriptor | None = None) -> str:
    """The envelope DDL with ``data`` typed per ``descriptor`` (a JSON string column
    holding ``data``'s raw text when no descriptor is given)."""
    if descriptor is None:
        return envelope_ddl("STRING")
    id_spec = next((s for s in descriptor.fixed if s.name == descriptor.id_property), None)
    id_type = "BIGINT" if id_spec is not None and id_spec.kind == "int" else "STRING"
    data_type = _struct(descriptor.fixed) if descriptor.fixed else "MAP<STRING, STRING>"
    return envelope_ddl(data_type, id_type)
