"""Confluent-framed Avro decoded in the JVM: Spark's ``from_avro``, one branch per writer
schema id.

A plan is made on the driver before the query starts: the writer schemas of the
subjects the source's topics use (their versions then), each read as the declared reader
schema. A record's 5-byte header picks its branch; its body is decoded with that
writer's schema and resolved to the reader's (Avro schema resolution, as fastavro does
it in the Python path). What a branch cannot tell from a good record is marked by an
extra reader field with a default (``_gs_decoded``, true in every good record, null when
``from_avro`` found the body malformed), dropped from the value.

A record whose id is not in the plan (a schema registered after the query started, or an
id of another subject) stops the query with ``NewSchemaError`` naming the id: the
runner re-plans at once from the checkpoint with that id added (nothing is skipped, the
batch re-runs). An id the registry does not know is then an error row, as in Python.

What stays in Python (the fused pass's head): values with no declared reader schema
(they have no fixed Spark type), a reader that is not a record, topics given by a
pattern under the topic name strategy (the subjects are not known before the query),
and ``unknown.fields=extra`` with a writer that has fields the reader lacks (their JSON
text is written the Python way). Unlike fastavro, ``from_avro`` does not refuse bytes
beyond the record (neither does Confluent's Java deserializer).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.protocol.confluent import frame
from gridstream.spark.avro_envelopes import learned_ids

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["OK_FIELD", "AvroPlan", "known_subjects", "learned_ids", "plan_columns", "staged_column",
           "writer_extra"]

OK_FIELD = "_gs_decoded"


@dataclass
class AvroPlan:
    """What the JVM decodes: writer schema text by id, ids the registry did not know."""

    side: str
    reader: dict[str, Any]
    ddl: str
    extra: bool
    writers: dict[int, str] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)
    """Learned ids the JVM cannot decode → the error text of their rows (an id the
    registry does not know, a schema that is not Avro)."""
    subjects: tuple[str, ...] = ()

    def describe(self) -> str:
        ids = ", ".join(str(i) for i in sorted(self.writers)) or "none yet"
        return f"ids {ids} of {', '.join(self.subjects)}"


def writer_extra(reader: Any, writer: Any) -> tuple[str, ...]:
    """The writer's record fields the reader lacks (none unless both are records)."""
    if not all(isinstance(s, dict) and s.get("type") == "record" for s in (reader, writer)):
        return ()
    names = {f["name"] for f in reader.get("fields", ())}
    return tuple(f["name"] for f in writer.get("fields", ()) if f["name"] not in names)


def _checked_reader(reader: dict[str, Any]) -> str:
    fields = [*reader.get("fields", ()), {"name": OK_FIELD, "type": "boolean",
                                           "default": True}]
    return orjson.dumps({**reader, "fields": fields}).decode()


def staged_column(raw: Column, plan: AvroPlan) -> Column | None:
    """The column of the ``from_avro`` whose branch the record's header picks (the
    reader's struct and its ``_gs_decoded``; null when no id of the plan matched), or
    None when the plan has no id yet. A column of its own, computed in a projection
    before the ones that read it: one decode a row however often it is read."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.avro.functions import from_avro

    header = F.substring(raw, 1, 5)
    body = F.substring(raw, 6, 2**31 - 1)
    reader = _checked_reader(plan.reader)
    found: Any = None
    for writer_id, text in sorted(plan.writers.items()):
        hit = header == F.lit(frame(writer_id))
        value = from_avro(body, text, {"avroSchema": reader, "mode": "PERMISSIVE"})
        found = F.when(hit, value) if found is None else found.when(hit, value)
    return found  # type: ignore[no-any-return]


def plan_columns(raw: Column, found: Column | None, plan: AvroPlan) -> tuple[Column, Column]:
    """(decoded column of type ``plan.ddl``, error column) for the binary ``raw``, given
    the staged column ``found`` (``staged_column``)."""
    from pyspark.sql import functions as F  # noqa: N812

    side = plan.side
    header = F.substring(raw, 1, 5)
    length = F.length(raw)
    schema_id = F.conv(F.hex(F.substring(raw, 2, 4)), 16, 10)
    error = F.when(raw.isNull(), F.lit(None).cast("string")).when(length < 5, F.concat(
        F.lit(f"{side} is not Confluent-framed Avro: "), length.cast("string"),
        F.lit(" bytes, a 5-byte header (magic byte 0, schema id) expected"))).when(
        F.substring(raw, 1, 1) != F.lit(b"\x00"), F.concat(
            F.lit(f"{side} is not Confluent-framed Avro: magic byte "),
            F.conv(F.hex(F.substring(raw, 1, 1)), 16, 10), F.lit(", 0 expected")))
    for refused, reason in sorted(plan.refused.items()):
        error = error.when(header == F.lit(frame(refused)), F.lit(reason))
    if found is not None:
        error = error.when(found.isNotNull() & found[OK_FIELD].isNull(), F.concat(
            F.lit(f"{side}: Avro body does not match schema id "), schema_id,
            F.lit(f" (or cannot be read as the declared {side}.schema)")))
    # the name in two literals: the plan's text (in the failure) does not read as the error
    error = error.when(F.lit(True) if found is None else found.isNull(), F.raise_error(
        F.concat(F.lit("gridstream"), F.lit(f".errors.NewSchemaError: {side}: schema id "),
                 schema_id,
                 F.lit(f" is not in the plan the query started with ({plan.describe()}): "
                       "re-planning reads it"))))
    if found is None:
        return F.lit(None).cast(plan.ddl), error
    decoded = found.dropFields(OK_FIELD)
    if plan.extra:
        decoded = decoded.withField("_extra", F.create_map().cast("map<string,string>"))
    return decoded.cast(plan.ddl), error.cast("string")


def known_subjects(strategy: str, topics: Iterable[str] | None, reader: dict[str, Any],
                   *, is_key: bool) -> tuple[str, ...] | None:
    """The subjects a source's records are written under, None when not known before
    the query (topics given by a pattern)."""
    from gridstream.protocol.confluent import subject_name

    if strategy == "record":
        return (subject_name(strategy, "", reader, is_key=is_key),)
    if topics is None:
        return None
    return tuple(subject_name(strategy, t, reader, is_key=is_key) for t in topics)
