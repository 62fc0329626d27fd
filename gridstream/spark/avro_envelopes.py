"""The mirror's Avro envelopes decoded in the JVM: ``from_avro``, one branch per writer
schema id, into the columns ``gridstream.spark.envelope.decode_envelopes`` gives.

A record's 5-byte header (magic byte ``0``, schema id) picks its writer schema (one
envelope schema per type: ``gridstream.protocol.avro.avro_schema``). Each id of the plan
is decoded in a column of its own (``from_avro`` in ``PERMISSIVE`` mode: a row of nulls
for a body that does not match, whose ``op`` tells), computed once a row in a projection
before the ones that read it.
``data`` is then written as the very JSON text the mirror's ``json`` codec writes for
the same operation: the keys ``present`` lists, in its order; a declared property in
its wire form (datetimes as ISO 8601 in UTC, ``+00:00``, without a fraction when its
microseconds are 0; bytes as base64; dates as ``YYYY-MM-DD``; the JSON-text kinds
embedded as the JSON they carry; a declared nested object with every nested property);
a dynamic one as the JSON text ``extra`` carries. Numbers are written by Spark's JSON
writer (``1.0E20`` where orjson writes ``1e+20``: the same number; NaN and infinities
are ``null``, as orjson writes them).

The plan starts with the ids known before the first batch (the declared types' local
ids, the ``.avsc`` files of a schema directory); a record whose id is not in it stops
the batch's job with ``NewSchemaError``, and the feed learns every such id of the
batch (``unplanned_ids``) and runs the batch again (nothing is skipped). A learned id
the registry does not know, or whose schema is not an envelope schema, is an error row.
Unlike fastavro, ``from_avro`` does not refuse bytes beyond the record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from gridstream.errors import CodecError
from gridstream.kinds import KindVisitor, visit
from gridstream.operations import OpType, PropertySpec, TypeDescriptor
from gridstream.protocol.avro import KIND, avro_schema, data_specs
from gridstream.protocol.confluent import frame
from gridstream.spark.value_codecs import avro_reader, schema_source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["AvroPlanner", "EnvelopePlan", "decode_avro_envelopes", "learned_ids",
           "new_schema_error", "unplanned_ids"]

_NEW_ID = re.compile(r"NewSchemaError: (key|value): schema id (\d+)")


def learned_ids(text: str, side: str) -> set[int]:
    """The ids of ``side`` (key / value) a ``NewSchemaError`` in a failure's text names."""
    return {int(number) for named, number in _NEW_ID.findall(text) if named == side}


def new_schema_error(side: str, schema_id: str, plan: str) -> str:
    """The SQL of the failure a record whose id ``schema_id`` (SQL) is not in the plan
    raises (``learned_ids`` reads it back). The class name in two literals: the plan's
    SQL text, which a failure quotes, does not read as the error."""
    return (f"raise_error(concat('gridstream', '.errors.NewSchemaError: {side}: schema id ', "
            f"{schema_id}, {_literal(f' is not in the plan the query started with ({plan})')}))")


@dataclass
class EnvelopePlan:
    """What the JVM decodes: each writer schema id's text and declared properties, and
    the learned ids it cannot decode (→ the reason their rows get)."""

    writers: dict[int, tuple[str, tuple[PropertySpec, ...]]] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)

    def add(self, schema_id: int, schema: object) -> None:
        """Plan ``schema_id`` with its writer ``schema`` (parsed JSON), or refuse it when
        it is not an envelope schema (``None``: the registry does not know it)."""
        if schema is None:
            self.refused[schema_id] = f"unknown avro schema id {schema_id}"
            return
        try:
            specs = data_specs(schema)  # type: ignore[arg-type]
            expected = avro_schema(TypeDescriptor(name="x", id_property="id", fixed=specs))
            if _shape(schema) != _shape(expected):
                raise CodecError("its field types are not those of an envelope schema "
                                 "for its properties' kinds")
        except CodecError as exc:
            self.refused[schema_id] = f"avro schema id {schema_id}: {exc}"
            return
        self.writers[schema_id] = (orjson.dumps(schema).decode(), specs)

    def knows(self, schema_id: int) -> bool:
        return schema_id in self.writers or schema_id in self.refused

    def describe(self) -> str:
        return "ids " + (", ".join(str(i) for i in sorted(self.writers)) or "none yet")


_NAMING = frozenset({"name", "namespace", "default", "doc", "aliases", "order"})


def _shape(schema: object) -> object:
    """``schema`` without its names, defaults and docs (what ``from_avro``'s types and
    the decode's SQL depend on); field names stay."""
    if isinstance(schema, dict):
        kept = {k: _shape(v) for k, v in schema.items() if k not in _NAMING and k != KIND}
        if "fields" in schema:
            kept["fields"] = [(f.get("name"), _shape(f.get("type"))) for f in schema["fields"]]
        return kept
    if isinstance(schema, list):
        return [_shape(item) for item in schema]
    return schema


def _literal(text: str) -> str:
    """``text`` as a Spark SQL string literal; ``$`` as its escape, so that Spark's
    ``${...}`` substitution in SQL text never reads what a registry wrote."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("$", "\\u0024")
    return f"'{escaped}'"


def _scalar(sql: str) -> str:
    """The JSON text of a scalar (``null`` for null): Spark's JSON writer on a one-item
    array, without the brackets (a JSON scalar never starts or ends with one)."""
    return f"trim(BOTH '[]' FROM to_json(array({sql})))"


_STAMP = "yyyy-MM-dd'T'HH:mm:ss"


def _non_finite(sql: str) -> str:
    """True when the double ``sql`` is NaN or infinite (the json codec writes null)."""
    return f"isnan({sql}) OR abs({sql}) = double('infinity')"


class _WireText(KindVisitor[str]):
    """A declared property's SQL: the JSON text of its Avro value at ``self.sql`` as the
    ``json`` codec writes it (null when the value is null)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def str_(self) -> str:  # the one kind whose text needs JSON's escapes
        return f"CASE WHEN {self.sql} IS NOT NULL THEN {_scalar(self.sql)} END"

    def int_(self) -> str:
        return f"CAST({self.sql} AS STRING)"

    bool_ = int_

    def float_(self) -> str:  # Java's Double.toString, as Spark's JSON writer has it
        return f"CASE WHEN {_non_finite(self.sql)} THEN 'null' ELSE CAST({self.sql} AS STRING) END"

    decimal = uuid = str_

    def date(self) -> str:
        return f"concat('\"', CAST({self.sql} AS STRING), '\"')"

    def bytes_(self) -> str:  # Spark's base64() breaks lines past 76 characters
        return self.str_()

    def datetime(self) -> str:
        def text(pattern: str) -> str:
            options = f"map('timeZone', 'UTC', 'timestampFormat', {_literal(pattern)})"
            return f"trim(BOTH '[]' FROM to_json(array({self.sql}), {options}))"

        return (f"CASE WHEN {self.sql} IS NULL THEN NULL WHEN unix_micros({self.sql}) % 1000000 "
                f"= 0 THEN {text(_STAMP + 'xxx')} ELSE {text(_STAMP + '.SSSSSSxxx')} END")

    def list_(self) -> str:
        return self.sql  # the JSON text the mirror wrote

    set_ = dict_ = object_ = any_ = list_


def _key(name: str) -> str:
    return _literal(orjson.dumps(name).decode() + ":")


def _wire(spec: PropertySpec, sql: str) -> str:
    """The JSON text of the property ``spec`` whose Avro value is at ``sql``."""
    if spec.kind == "object" and spec.nested:
        parts = ", ',', ".join(f"{_key(n.name)}, coalesce({_wire(n, _field(sql, n.name))}, 'null')"
                              for n in spec.nested)
        return f"CASE WHEN {sql} IS NOT NULL THEN concat('{{', {parts}, '}}') END"
    return visit(spec.kind, _WireText(sql))


def _field(sql: str, name: str) -> str:
    return f"{sql}.`{name.replace('`', '``')}`"


def _in_order(staged: str, specs: tuple[PropertySpec, ...]) -> str:
    """True when ``present`` is every declared name in the declared order and ``extra``
    is empty (a declared type's write, as a model class makes it): ``data`` is then
    written without a lambda, in generated code (a lambda is evaluated row by row
    outside it: twice the decode's time)."""
    names = ", ".join(_literal(s.name) for s in specs)
    return (f"cardinality({staged}.extra) = 0 AND "
            f"{staged}.present = CAST(array({names}) AS ARRAY<STRING>)")


def _text(staged: str, spec: PropertySpec) -> str:
    """The SQL of ``"name":value`` for the declared property ``spec``."""
    value = _wire(spec, _field(staged + ".data", spec.name))
    return f"concat({_key(spec.name)}, coalesce({value}, 'null'))"


_AS_SPARK_WRITES = frozenset({"str", "int", "float", "bool", "bytes", "date", "decimal", "uuid"})
"""Kinds whose text Spark's JSON writer spells as the ``json`` codec does (floats but
NaN and infinities, which ``_finite`` keeps out)."""


def _spark_writes(specs: tuple[PropertySpec, ...]) -> bool:
    """Whether ``to_json`` of the whole record is the ``json`` codec's text."""
    return all(_spark_writes(s.nested) if s.kind == "object" and s.nested
               else s.kind in _AS_SPARK_WRITES for s in specs)


def _finite(sql: str, specs: tuple[PropertySpec, ...]) -> list[str]:
    """The SQL that holds when each float property (at any depth) is not NaN or
    infinite (Spark's JSON writer spells those as strings; the json codec as null)."""
    found = []
    for spec in specs:
        place = _field(sql, spec.name)
        if spec.kind == "object" and spec.nested:
            found += _finite(place, spec.nested)
        elif spec.kind == "float":
            found.append(f"coalesce(NOT ({_non_finite(place)}), true)")
    return found


def _every_text(staged: str, specs: tuple[PropertySpec, ...]) -> tuple[str, str]:
    """(condition, text): ``data``'s JSON text when ``_in_order`` and the condition
    hold (every declared property, in order). One ``to_json`` of the whole record when
    Spark's JSON writer spells each value as the json codec does (1 µs a call here: one
    a row, not one a property), else the properties' texts joined."""
    if _spark_writes(specs):
        finite = _finite(f"{staged}.data", specs)
        return (" AND ".join(finite) or "true",
                f"to_json({staged}.data, map('ignoreNullFields', 'false'))")
    every = ", ',', ".join(_text(staged, s) for s in specs)
    return "true", f"concat('{{', {every}, '}}')"


def _general_text(staged: str, specs: tuple[PropertySpec, ...]) -> str:
    """``data``'s JSON text, the keys of ``present`` in its order (a lambda)."""
    cases = " ".join(f"WHEN _k = {_literal(s.name)} THEN {_text(staged, s)}" for s in specs)
    extra = (f"WHEN map_contains_key({staged}.extra, _k) THEN concat({_scalar('_k')}, ':', "
             f"{staged}.extra[_k])")
    return (f"concat('{{', array_join(transform({staged}.present, _k -> "
            f"CASE {extra} {cases} END), ','), '}}')")


def _data_text(staged: str, specs: tuple[PropertySpec, ...]) -> str:
    """The SQL of ``data``'s JSON text from the decoded record ``staged``."""
    general = _general_text(staged, specs)
    if not specs:
        return f"CASE WHEN {staged}.data IS NOT NULL THEN {general} END"
    condition, every = _every_text(staged, specs)
    return (f"CASE WHEN {staged}.data IS NULL THEN NULL WHEN {_in_order(staged, specs)} "
            f"AND {condition} THEN {every} ELSE {general} END")


def _json_fields(sql: str, specs: tuple[PropertySpec, ...]) -> list[str]:
    """The SQL of each property (at any depth) that carries JSON text."""
    found = []
    for spec in specs:
        place = _field(sql, spec.name)
        if spec.kind == "object" and spec.nested:
            found += _json_fields(place, spec.nested)
        elif visit(spec.kind, _WireText(place)) == place:  # embedded as it is
            found.append(place)
    return found


def _not_one_value(sql: str) -> str:
    """True unless the text ``sql`` is exactly one JSON value (``try_parse_json`` reads
    a value and ignores what follows it: ``[1],"k":2`` would pass)."""
    return f"coalesce(json_array_length(concat('[', {sql}, ']')), 0) != 1"


def _unparsed(staged: str, specs: tuple[PropertySpec, ...]) -> str:
    """True when a JSON-text property or an ``extra`` value does not parse: embedded as
    it is, it would not be the json codec's value (or would add keys)."""
    checks = [f"({place} IS NOT NULL AND {_not_one_value(place)})"
              for place in _json_fields(f"{staged}.data", specs)]
    checks.append(f"(cardinality({staged}.extra) > 0 AND exists(map_values({staged}.extra), "
                  f"_v -> {_not_one_value('_v')}))")
    return f"({staged}.data IS NOT NULL AND ({' OR '.join(checks)}))"


def _missing_key(staged: str, specs: tuple[PropertySpec, ...]) -> str:
    """True when ``present`` names a key neither declared nor in ``extra``."""
    names = ", ".join(_literal(s.name) for s in specs) or "''"
    checked = (f"exists({staged}.present, _k -> NOT map_contains_key({staged}.extra, _k) "
               f"AND NOT _k IN ({names}))")
    if not specs:
        return f"{staged}.data IS NOT NULL AND {checked}"
    return (f"CASE WHEN {staged}.data IS NULL OR {_in_order(staged, specs)} THEN false "
            f"ELSE {checked} END")


def _header(schema_id: int) -> str:
    return "X'" + frame(schema_id).hex().upper() + "'"


_HEADER = "substring(`value`, 1, 5)"
_SCHEMA_ID = "conv(hex(substring(`value`, 2, 4)), 16, 10)"
_STRUCT = ("op: STRING, type: STRING, id: STRING, id_int: BOOLEAN, version: BIGINT, "
           "txn: STRING, ts: BIGINT, `partition`: INT, data: STRING, removed: ARRAY<STRING>, "
           "bad: BOOLEAN")


def _branch(staged: str, specs: tuple[PropertySpec, ...]) -> str:
    """One writer's decoded record → the common output struct."""
    return (f"named_struct('op', {staged}.op, 'type', {staged}.type, 'id', "
            f"coalesce({staged}.id.member0, CAST({staged}.id.member1 AS STRING)), 'id_int', "
            f"{staged}.id.member1 IS NOT NULL, 'version', {staged}.version, 'txn', "
            f"{staged}.txn, 'ts', {staged}.ts, 'partition', {staged}.`partition`, 'data', "
            f"{_data_text(staged, specs)}, 'removed', {staged}.removed, 'bad', "
            f"{_missing_key(staged, specs)} OR {_unparsed(staged, specs)})")


def decode_avro_envelopes(records: DataFrame, plan: EnvelopePlan, *, codec_checked: bool = True
                          ) -> DataFrame:
    """Kafka source rows → ``decode_envelopes``' columns (see the module docstring);
    ``codec_checked``: a ``gs.codec`` header naming another codec is an error row."""
    from gridstream.spark.envelope import codec_header_check

    has_headers = "headers" in records.columns
    ids = sorted(plan.writers)
    staged = records.selectExpr("*", *(
        f"CASE WHEN {_HEADER} = {_header(i)} THEN from_avro(substring(`value`, 6), "
        f"{_literal(plan.writers[i][0])}, map('mode', 'PERMISSIVE')) END AS `_a{i}`"
        for i in ids))
    # PERMISSIVE gives a body that does not match a row of nulls: ``op`` is never null
    picked = " ".join(f"WHEN `_a{i}`.op IS NOT NULL THEN "
                      f"{_branch(f'`_a{i}`', plan.writers[i][1])}" for i in ids)
    out = f"CAST({f'CASE {picked} END' if ids else 'NULL'} AS STRUCT<{_STRUCT}>)"
    decoded = staged.selectExpr("*", f"{out} AS _o")
    checks = _checks(plan, ids)
    if has_headers and codec_checked:
        checks.insert(0, codec_header_check("avro"))
    cases = " ".join(f"WHEN {condition} THEN {reason}" for condition, reason in checks)
    headers = ("`headers`" if has_headers
               else "CAST(NULL AS ARRAY<STRUCT<key: STRING, value: BINARY>>)")
    return decoded.selectExpr(
        "`topic`", "`partition` AS kafka_partition", "`offset`", "`key`", "`value`",
        f"{headers} AS headers", "_o.op AS op", "_o.type AS type", "_o.id AS id",
        "_o.id_int AS id_int", "_o.version AS version", "_o.txn AS txn", "_o.ts AS ts",
        "_o.`partition` AS `partition`", "_o.data AS data",
        "coalesce(_o.removed, CAST(array() AS ARRAY<STRING>)) AS removed",
        f"CASE {cases} ELSE CAST(NULL AS STRING) END AS error")


def _checks(plan: EnvelopePlan, ids: list[int]) -> list[tuple[str, str]]:
    """(condition, reason SQL) of an Avro record's problems, in order."""
    checks = [
        ("`value` IS NULL", _literal("record has no value (a tombstone), not an operation")),
        ("length(`value`) < 5", "concat('value is not Confluent-framed Avro: ', "
         "CAST(length(`value`) AS STRING), ' bytes, a 5-byte header (magic byte 0, schema id) "
         "expected')"),
        ("substring(`value`, 1, 1) != X'00'", "concat('avro value does not decode: not a "
         "Confluent-framed Avro record (magic byte 0 expected, found ', "
         "conv(hex(substring(`value`, 1, 1)), 16, 10), ')')"),
    ]
    checks += [(f"{_HEADER} = {_header(i)}", _literal(f"avro value does not decode: {reason}"))
               for i, reason in sorted(plan.refused.items())]
    checks.append(("_o IS NULL AND (" + (" OR ".join(f"{_HEADER} = {_header(i)}" for i in ids)
                                         or "false") + ")",
                   f"concat('avro value does not decode: avro body does not match schema ', "
                   f"{_SCHEMA_ID})"))
    checks.append(("_o IS NULL", new_schema_error("value", _SCHEMA_ID, plan.describe())))
    checks += [
        ("_o.bad", _literal("avro value does not decode: avro record is not a gridstream "
                            "envelope: present names a key neither declared nor in extra, "
                            "or a JSON-text value does not parse")),
        (f"_o.op NOT IN ({', '.join(_literal(op.value) for op in OpType)})",
         _literal("envelope field 'op' is not an operation type")),
        ("_o.type IS NULL OR _o.type = ''", _literal("envelope field 'type' is missing")),
    ]
    return checks


def unplanned_ids(records: DataFrame, plan: EnvelopePlan, limit: int = 1000) -> set[int]:
    """The schema ids of ``records``' framed values that ``plan`` does not know (one
    small job: run only after a ``NewSchemaError``)."""
    known = ", ".join(_header(i) for i in [*plan.writers, *plan.refused])
    where = ("`value` IS NOT NULL AND length(`value`) >= 5 AND substring(`value`, 1, 1) = X'00'"
             + (f" AND NOT {_HEADER} IN ({known})" if known else ""))
    rows = (records.where(where).selectExpr(f"CAST({_SCHEMA_ID} AS BIGINT) AS id")
            .distinct().limit(limit).collect())
    return {int(r["id"]) for r in rows}


def causes(failure: BaseException) -> list[BaseException]:
    """``failure`` and every exception it was raised from or during, outermost first."""
    found: list[BaseException] = []
    current: BaseException | None = failure
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


class AvroPlanner:
    """Where a feed's plan comes from (on the driver): the writer schemas by id from
    the registry (``schema_registry_url``), else from a schema directory's ``<id>.avsc``
    files and the declared types' local ids (``gridstream.protocol.avro``)."""

    def __init__(self, *, schema_registry_url: str | None = None,
                 basic_auth_user_info: str | None = None, avro_schema_dir: str | None = None,
                 types: Mapping[str, TypeDescriptor] | None = None) -> None:
        from gridstream.protocol.avro import LocalSchemaRegistry

        self._url = schema_registry_url
        self._schema_dir = avro_schema_dir
        self._codec = avro_reader(schema_registry_url, basic_auth_user_info, avro_schema_dir)
        self.plan = EnvelopePlan()
        if not schema_registry_url:  # local ids derive from the schemas
            for descriptor in (types or {}).values():
                schema = avro_schema(descriptor)
                self.plan.add(LocalSchemaRegistry.schema_id(schema), schema)
            if avro_schema_dir:
                for path in sorted(Path(avro_schema_dir).glob("*.avsc")):
                    if path.stem.isdigit() and not self.plan.knows(int(path.stem)):
                        self.learn({int(path.stem)})

    def __repr__(self) -> str:
        return f"AvroPlanner({self.describe()})"

    def describe(self) -> str:
        where = schema_source(self._url, self._schema_dir)
        return f"avro values ({where}) decoded in the JVM, {self.plan.describe()}"

    def learn(self, ids: Iterable[int]) -> bool:
        """Plan the ids not planned yet (their schemas looked up); False when none is new.
        ``RegistryError`` when the registry cannot be reached."""
        new = False
        for schema_id in sorted(set(ids)):
            if self.plan.knows(schema_id):
                continue
            new = True
            try:
                schema = self._codec.registry.lookup(schema_id)
            except (CodecError, ValueError) as exc:  # a schema (file) that is not JSON
                self.plan.refused[schema_id] = f"avro schema id {schema_id}: not JSON: {exc}"
                continue
            self.plan.add(schema_id, schema)
        return new

    def relearn(self, records: DataFrame, failure: BaseException) -> bool:
        """After a batch's job failed: when ``NewSchemaError`` stopped it (the failure
        or one it was raised from: a sink wraps it), plan every unplanned id of the
        batch and say True (run the batch again); else False."""
        if not any("NewSchemaError" in f"{cause}" for cause in causes(failure)):
            return False
        return self.learn(unplanned_ids(records, self.plan))
