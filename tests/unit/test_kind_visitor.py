"""Property kinds are an enum mapped by one visitor: every target maps every kind, and a
visitor that leaves a kind out fails type checking."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gridstream.kinds import KindVisitor, kind_table, visit
from gridstream.operations import Kind, PropertySpec
from gridstream.protocol.avro import _JSON_KINDS, _NATIVE
from gridstream.protocol.spark import _SIMPLE
from gridstream.stores.cassandra.columns import NATIVE_CQL_TYPES

ROOT = Path(__file__).resolve().parents[2]


class Names(KindVisitor[str]):
    def str_(self) -> str: return "str"
    def int_(self) -> str: return "int"
    def float_(self) -> str: return "float"
    def bool_(self) -> str: return "bool"
    def bytes_(self) -> str: return "bytes"
    def datetime(self) -> str: return "datetime"
    def date(self) -> str: return "date"
    def decimal(self) -> str: return "decimal"
    def uuid(self) -> str: return "uuid"
    def list_(self) -> str: return "list"
    def set_(self) -> str: return "set"
    def dict_(self) -> str: return "dict"
    def object_(self) -> str: return "object"
    def any_(self) -> str: return "any"


def test_visit_calls_each_kinds_own_method() -> None:
    assert kind_table(Names()) == {kind: kind.value for kind in Kind}
    assert visit(Kind.DATE, Names()) == "date"


def test_every_target_maps_every_kind() -> None:
    assert set(_SIMPLE) == set(Kind)
    assert set(_NATIVE) | _JSON_KINDS == set(Kind) and not set(_NATIVE) & _JSON_KINDS
    assert set(NATIVE_CQL_TYPES) == {"str", "int", "float", "bool", "bytes", "datetime",
                                     "date", "decimal", "uuid"}  # the rest: blobs


def test_a_spec_takes_a_kinds_text_and_refuses_an_unknown_one() -> None:
    spec = PropertySpec("n", "str")  # type: ignore[arg-type]
    assert spec.kind is Kind.STR and spec == PropertySpec("n", Kind.STR)
    with pytest.raises(ValueError, match="property 'n': unknown kind 'strng'; one of str, "):
        PropertySpec("n", "strng")  # type: ignore[arg-type]


def test_a_visitor_that_leaves_a_kind_out_fails_type_checking(tmp_path: Path) -> None:
    """What adding a ``Kind`` (and its abstract method) does to every visitor."""
    module = tmp_path / "partial_visitor.py"
    module.write_text(textwrap.dedent("""
        from gridstream.kinds import KindVisitor

        class Partial(KindVisitor[int]):
            def str_(self) -> int:
                return 1

        Partial()
    """))
    # the project's mypy options (pyproject.toml), incremental: the package's modules
    # come from the cache ``make lint`` left (0.8 s, against 18 s to check them all again)
    done = subprocess.run([sys.executable, "-m", "mypy", str(module)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stdout
    assert 'Cannot instantiate abstract class "Partial"' in done.stdout
    assert '"any_"' in done.stdout  # one of the kinds it leaves out


def test_a_log_type_record_with_a_kind_this_version_does_not_know_reads_it_as_any() -> None:
    """Earlier versions let a document type's fixed kinds through unchecked: a Space
    whose log holds one still opens, the property read as what it meant then."""
    import msgspec

    from gridstream.operations import TypeDescriptor
    from gridstream.space._codec import decode_descriptor, encode_descriptor

    descriptor = TypeDescriptor(name="t", id_property="id", fixed=(
        PropertySpec("a", Kind.STR),
        PropertySpec("o", Kind.OBJECT, (PropertySpec("x", Kind.INT),))))
    raw = encode_descriptor(descriptor)
    assert decode_descriptor(raw) == descriptor
    record = msgspec.msgpack.decode(raw)
    record["fixed"][0]["kind"] = "string"
    record["fixed"][1]["nested"][0]["kind"] = "long"
    read = decode_descriptor(msgspec.msgpack.encode(record))
    assert [s.kind for s in read.fixed] == [Kind.ANY, Kind.OBJECT]
    assert read.fixed[1].nested[0].kind is Kind.ANY


def test_an_avro_schema_with_an_unknown_kind_is_a_codec_error() -> None:
    from gridstream.errors import CodecError
    from gridstream.protocol.avro import KIND, _specs_of

    field = {"name": "a", "type": ["null", "string"], "default": None, KIND: "strng"}
    assert _specs_of([{**field, KIND: "str"}]) == (PropertySpec("a", Kind.STR),)
    with pytest.raises(CodecError, match="field 'a': unknown gridstream.kind 'strng'"):
        _specs_of([field])
