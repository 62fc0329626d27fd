"""The Python passes: the functions ``mapInArrow`` runs on the executors.

``ItemPass`` is the fused pass: for each row of an Arrow batch, the source's decode (or
the item shape), every per-item step, then the tail (the sink's ``encode``, or the
conversion of items to the rows of a structured flow); a sink with a column encoder
(``Sink.column_encoder``) has its tail split each item into values that are encoded a
batch's column at a time. ``BatchPass`` runs a
``map_batch`` function on the error-free rows of a batch. Both copy the hidden columns
(``_gs_ts``, ``_gs_where``, the raw bytes) from each output row's input row, and turn a
row whose decode, step or encode raises into an error row (``_gs_error``, ``_gs_stage``
set, visible columns null) — or, under ``errors="fail"``, raise ``RecordError``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from gridstream.errors import INFRASTRUCTURE, CodecError, RecordError
from gridstream.pipeline._fit import misfit, misfits
from gridstream.pipeline.api import KafkaRecord
from gridstream.pipeline.base import HIDDEN, ItemShape
from gridstream.pipeline.base import visible as visible_names
from gridstream.pipeline.serde._columns import DecodeError
from gridstream.spark import worker

if TYPE_CHECKING:
    import pyarrow as pa

    from gridstream.pipeline.base import ColumnEncode

__all__ = ["BatchPass", "ItemPass", "item_reader", "one_to_one", "to_row"]

log = logging.getLogger("gridstream.pipeline")

_COPIED = ("_gs_ts", "_gs_where", "_gs_raw_key", "_gs_raw_value")

Head = Callable[["pa.RecordBatch"], tuple[dict[str, list[Any]], dict[int, tuple[str, str]]]]
"""A pass's batch decode (``serde.ArrowDecode``): decoded columns, failed rows."""

@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while one batch is built: a batch's output rows
    (bounded by Spark's Arrow batch size) live until the batch is converted, and each
    young collection would scan them again (half the pass's time). Reference counting
    still frees everything else at once; cycles are collected after the batch."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def one_to_one(kinds: Iterable[str]) -> bool:
    """Whether steps of these kinds give at most one item for one (maps and filters)."""
    return all(kind in ("map", "filter") for kind in kinds)


def to_row(names: Sequence[str]) -> Callable[[Any], list[Any]]:
    """An item of a structured step → its values in field order (a dict by name, a
    tuple or list in order, a single value for a one-column schema)."""
    width = len(names)
    known = frozenset(names)

    def convert(item: Any) -> list[Any]:
        if isinstance(item, dict):
            if not known.issuperset(item):
                extra = [k for k in item if k not in known]
                raise CodecError(f"an item of a structured step has the key {extra[0]!r}, "
                                 f"which is not a field of {list(names)}")
            return [item.get(n) for n in names]
        if isinstance(item, tuple | list) and len(item) == width:
            return list(item)
        if width == 1 and not isinstance(item, tuple | list):
            return [item]
        raise CodecError(f"an item of a structured step must be a dict of {list(names)} or "
                         f"a tuple of {width} values, not {type(item).__name__}")
    return convert


def item_reader(shape: ItemShape, decode: Callable[[dict[str, Any]], Any] | None,
                columns: dict[str, list[Any]]) -> Callable[[int], Any]:
    """Row ``i`` of the batch's visible columns → the item the first step sees."""
    if decode is not None:
        names = list(columns)
        return lambda i: decode({n: columns[n][i] for n in names})
    if shape == "entry":
        keys, values = columns.get("key") or [None] * _length(columns), columns["value"]
        return lambda i: (keys[i], values[i])
    if shape == "value":
        values = columns["value"]
        return lambda i: values[i]
    if shape == "record":
        c = columns
        return lambda i: KafkaRecord(c["topic"][i], c["partition"][i], c["offset"][i],
                                     c["timestamp"][i], c["key"][i], c["value"][i],
                                     _headers(c["headers"][i] if "headers" in c else None))
    names = list(columns)
    return lambda i: {n: columns[n][i] for n in names}


def _expanded(result: Any) -> Any:
    """What a ``flat_map`` function returned, as the items to go on with: text, bytes
    and dicts are iterable but hold no items (characters, byte values, keys)."""
    if isinstance(result, str | bytes | bytearray | memoryview | Mapping):
        raise CodecError(f"flat_map must return an iterable of items (a list, a tuple, a "
                         f"generator...), not a {type(result).__name__}")
    return result


def _length(columns: dict[str, list[Any]]) -> int:
    return len(next(iter(columns.values()))) if columns else 0


def _headers(raw: Any) -> tuple[tuple[str, bytes | None], ...]:
    if not raw:
        return ()
    return tuple((h["key"], h["value"]) for h in raw)


@dataclass(frozen=True)
class _Out:
    schema: pa.Schema
    names: tuple[str, ...]


class _Builder:
    """The output rows of one batch, in order: each row's visible values, its input row's
    index, and (by output row) the reason and stage of the error rows."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.rows: list[Sequence[Any]] = []
        self.source: list[int] = []
        self.failed: dict[int, tuple[str, str]] = {}
        self._empty = (None,) * width

    def add(self, row: Sequence[Any], source: int) -> None:
        self.rows.append(row)
        self.source.append(source)

    def add_error(self, source: int, reason: str, stage: str) -> None:
        self.failed[len(self.rows)] = (reason, stage)
        self.rows.append(self._empty)
        self.source.append(source)

    def columns(self) -> list[list[Any]]:
        """The visible values by column; ``ValueError`` for a row of another width than
        the schema's (a bug of the pass's tail, not an error row)."""
        widths = set(map(len, self.rows))
        if widths - {self.width}:
            raise ValueError(f"a row of {min(widths - {self.width})} values for "
                             f"{self.width} columns")
        # a column at a time (``zip(*rows)`` over a batch's rows costs 10× as much)
        return [list(map(itemgetter(c), self.rows)) for c in range(self.width)]


class _Policy:
    def __init__(self, pipeline: str, errors: str) -> None:
        self.pipeline, self.errors = pipeline, errors

    def judge(self, where: str, stage: str, reason: str, cause: BaseException | None) -> None:
        """A row in error: ``RecordError`` under ``fail``, a warning under ``log``."""
        if self.errors == "fail":
            raise RecordError(reason, where=where, stage=stage) from cause
        if self.errors == "log":
            log.warning("pipeline %s: %s: %s: %s (row skipped)", self.pipeline, where, stage,
                        reason)

    def error(self, out: _Builder, source: int, where: str, stage: str, reason: str,
              cause: BaseException | None) -> None:
        """Input row ``source`` in error: judged, then an error row of the output."""
        self.judge(where, stage, reason, cause)
        out.add_error(source, reason, stage)


class _Where:
    """``_gs_where`` of row ``i``, read only for the rows in error: the batch's column, or
    its text made from the origin's parts (``ORIGIN_PARTS``, the topic ``topic`` when the
    batch has no topic column), as the JVM writes it."""

    def __init__(self, batch: pa.RecordBatch, topic: str | None = None) -> None:
        names = batch.schema.names
        self.column = batch.column("_gs_where") if "_gs_where" in names else None
        self.parts = None if self.column is not None else (
            batch.column("_gs_origin_topic") if "_gs_origin_topic" in names else None,
            batch.column("_gs_origin_partition"), batch.column("_gs_origin_offset"))
        self.topic = topic

    def __getitem__(self, index: int) -> str:
        if self.parts is None:
            assert self.column is not None
            return str(self.column[index].as_py())
        topics, partitions, offsets = self.parts
        topic = self.topic if topics is None else topics[index].as_py()
        return f"{topic}[{partitions[index].as_py()}]@{offsets[index].as_py()}"


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _row_failed(policy: _Policy, out: _Builder, row: int, where: _Where, stage: str,
                exc: Exception) -> None:
    """Row ``row``'s decode, step or encode raised: by the policy, an error row naming
    the stage (a ``DecodeError`` names the deserializer that failed) or ``RecordError``."""
    if isinstance(exc, DecodeError):
        stage = exc.stage
    policy.error(out, row, where[row], stage, _reason(exc), exc)


def _finish(batch: pa.RecordBatch, out: _Builder, target: _Out, policy: _Policy,
            stage: str, where: _Where, encode: ColumnEncode | None = None) -> pa.RecordBatch:
    """The output batch: visible values converted to Arrow (a row whose values do not
    fit the schema becomes an error row) or, with ``encode``, encoded by it (a row it
    cannot encode becomes one), hidden columns taken from the input rows."""
    import pyarrow as pa

    visible = [f for f in target.schema if f.name not in HIDDEN]
    values = out.columns()
    if encode is not None:
        arrays, unencoded = encode(values)
        if unencoded:
            for row, exc in sorted(unencoded.items()):
                if row not in out.failed:
                    _unfit(out, values, row, _reason(exc), stage, exc, policy, where)
            arrays, unencoded = encode(values)  # the failed rows' values are null now
            if unencoded:
                raise ValueError(f"{encode!r} failed on a null row {min(unencoded)}")
    else:
        if any(misfits(v, f.type) for v, f in zip(values, visible, strict=True)):
            _mark_unfit(out, values, visible, policy, stage, where)  # Arrow would convert
        try:
            arrays = [pa.array(v, type=f.type) for v, f in zip(values, visible, strict=True)]
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            _mark_unfit(out, values, visible, policy, stage, where)
            arrays = [pa.array(v, type=f.type) for v, f in zip(values, visible, strict=True)]
    rows = len(out.source)
    hidden: dict[str, pa.Array] = {}
    copied = [name for name in _COPIED if name in target.names]  # given as input too
    if copied:
        index = pa.array(out.source, type=pa.int64())
        for name in copied:
            hidden[name] = batch.column(name).take(index).cast(target.schema.field(name).type)
    if out.failed:
        failed = [out.failed.get(row) for row in range(rows)]
        hidden["_gs_error"] = pa.array([f and f[0] for f in failed], type=pa.string())
        hidden["_gs_stage"] = pa.array([f and f[1] for f in failed], type=pa.string())
    else:  # the usual batch: no error row
        hidden["_gs_error"] = hidden["_gs_stage"] = pa.nulls(rows, type=pa.string())
    columns = iter(arrays)
    return pa.RecordBatch.from_arrays(
        [hidden[f.name] if f.name in HIDDEN else next(columns) for f in target.schema],
        schema=target.schema)


def _mark_unfit(out: _Builder, values: list[list[Any]], visible: list[Any],
                policy: _Policy, stage: str, where: _Where) -> None:
    import pyarrow as pa

    for row in range(len(out.source)):
        if row in out.failed:
            continue
        for column, field in zip(values, visible, strict=True):
            cause: BaseException | None = None
            why = misfit(column[row], field.type)
            if why is None:
                try:
                    pa.array([column[row]], type=field.type)
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                    cause, why = exc, _reason(exc)
            if why is not None:
                _unfit(out, values, row, f"column {field.name!r} ({field.type}): {why}",
                       stage, cause, policy, where)
                break


def _unfit(out: _Builder, values: list[list[Any]], row: int, reason: str, stage: str,
           cause: BaseException | None, policy: _Policy, where: _Where) -> None:
    """Output row ``row``, whose values could not be converted or encoded, becomes an
    error row (its values null) by the policy, or ``RecordError``."""
    policy.judge(where[out.source[row]], stage, reason, cause)
    for c in values:
        c[row] = None
    out.failed[row] = (reason, stage)


class _Pass(ABC):
    """A ``mapInArrow`` function (picklable: shipped to the executors)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        worker.prepare()
        for batch in batches:
            yield self.batch(batch)

    def batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        with _gc_paused():
            return self._batch(batch)

    @abstractmethod
    def _batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """One Arrow batch in, the pass's batch out."""


class ItemPass(_Pass):
    """The fused per-item pass."""

    def __init__(self, *, pipeline: str, errors: str, shape: ItemShape,
                 decode: Callable[[dict[str, Any]], Any] | None,
                 steps: Sequence[tuple[str, Callable[[Any], Any], str]],
                 tail: Callable[[Any], Sequence[Any]], tail_stage: str,
                 schema: pa.Schema, head: Head | None = None,
                 encode: ColumnEncode | None = None, origin_topic: str | None = None) -> None:
        self.policy = _Policy(pipeline, errors)
        self.shape, self.decode, self.steps = shape, decode, tuple(steps)
        self.head = head
        """The batch's key and value decoded at once (``serde.ArrowDecode``), or None."""
        self.tail, self.tail_stage = tail, tail_stage
        self.encode = encode
        """The tail's values encoded by columns (``Sink.column_encoder``), or None (the
        tail gives the row's final values)."""
        self.target = _Out(schema, tuple(schema.names))
        self.origin_topic = origin_topic
        """The topic of a batch given the origin's parts without a topic column."""
        self.one_to_one = one_to_one(kind for kind, _, _ in self.steps)
        """Every step gives at most one item for one: the rows run without a list of
        items per step (``_one_to_one``)."""
        if encode is not None and not self.one_to_one:
            # an input row's outputs fail or pass together: the tail encodes each one
            raise ValueError("a column encode needs a chain of maps and filters")

    def _batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = visible_names(batch.schema.names)
        decoded, failed = self.head(batch) if self.head is not None else ({}, {})
        columns = {n: decoded[n] if n in decoded else batch.column(n).to_pylist()
                   for n in names}
        where = _Where(batch, self.origin_topic)
        # the usual case: no error in (a first pass whose source cannot fail sends none)
        given = "_gs_error" in batch.schema.names
        clean = not failed and (not given or batch.column("_gs_error").null_count
                                == batch.num_rows)
        in_errors: list[Any] = [] if clean else (
            batch.column("_gs_error").to_pylist() if given else [None] * batch.num_rows)
        in_stages: list[Any] = [] if clean else (
            batch.column("_gs_stage").to_pylist() if given else [None] * batch.num_rows)
        for failing, (reason, why) in failed.items():
            if in_errors[failing] is None:
                in_errors[failing], in_stages[failing] = reason, why
        read = item_reader(self.shape, self.decode, columns)
        width = len([n for n in self.target.names if n not in HIDDEN])
        out, policy, steps, tail = _Builder(width), self.policy, self.steps, self.tail
        if self.one_to_one:
            try:
                self._one_to_one(batch.num_rows, read, in_errors, in_stages, where, out)
            except RecordError as failed:
                if self.encode is not None:  # an earlier row that does not encode first
                    with contextlib.suppress(ValueError):  # a tail's bug: the row's stands
                        _finish(batch, out, self.target, policy, self.tail_stage, where,
                                self.encode)
                raise failed
            return _finish(batch, out, self.target, policy, self.tail_stage, where,
                           self.encode)
        for i in range(batch.num_rows):
            if not clean and in_errors[i] is not None:
                policy.error(out, i, where[i], in_stages[i] or "decode", in_errors[i], None)
                continue
            stage = "decode"
            try:
                items = [read(i)]
                for kind, fn, label in steps:
                    stage = label
                    if kind == "map":
                        items = [fn(item) for item in items]
                    elif kind == "filter":
                        items = [item for item in items if fn(item)]
                    else:
                        items = [o for item in items for o in _expanded(fn(item))]
                    if not items:
                        break
                stage = self.tail_stage
                rows = [tail(item) for item in items]
            except INFRASTRUCTURE:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of user code is the row's
                _row_failed(policy, out, i, where, stage, exc)
                continue
            for row in rows:
                out.add(row, i)
        return _finish(batch, out, self.target, policy, self.tail_stage, where, self.encode)


    def _one_to_one(self, rows: int, read: Callable[[int], Any], in_errors: list[Any],
                    in_stages: list[Any], where: _Where, out: _Builder) -> None:
        """The rows of a chain of maps and filters: the same outcome as the general
        loop of ``batch``, without a list of items per step and row."""
        policy, steps, tail, tail_stage = self.policy, self.steps, self.tail, self.tail_stage
        rows_append, sources = out.rows.append, out.source.append
        for i in range(rows):
            if in_errors and in_errors[i] is not None:
                policy.error(out, i, where[i], in_stages[i] or "decode", in_errors[i], None)
                continue
            stage = "decode"
            row = None
            try:
                item = read(i)
                for kind, fn, label in steps:
                    stage = label
                    if kind == "map":
                        item = fn(item)
                    elif not fn(item):
                        break
                else:
                    stage = tail_stage
                    row = tail(item)
            except INFRASTRUCTURE:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of user code is the row's
                _row_failed(policy, out, i, where, stage, exc)
                continue
            if row is not None:  # its width is checked with the batch's (``columns``)
                rows_append(row)
                sources(i)


class BatchPass(_Pass):
    """A ``map_batch`` pass: ``fn`` gets the error-free rows' visible columns."""

    def __init__(self, *, pipeline: str, errors: str, fn: Callable[[Any], Any],
                 kind: str, stage: str, schema: pa.Schema) -> None:
        self.policy = _Policy(pipeline, errors)
        self.fn, self.kind, self.stage = fn, kind, stage
        self.target = _Out(schema, tuple(schema.names))

    def _batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow as pa
        import pyarrow.compute as pc

        where = _Where(batch)
        errors = batch.column("_gs_error")
        good = pc.is_null(errors)
        names = visible_names(batch.schema.names)
        visible = [n for n in self.target.names if n not in HIDDEN]
        out = _Builder(len(visible))
        for i, (reason, stage) in enumerate(zip(errors.to_pylist(),
                                                 batch.column("_gs_stage").to_pylist(),
                                                 strict=True)):
            if reason is not None:
                self.policy.error(out, i, where[i], stage or "decode", reason, None)
        rows = batch.filter(good)
        index = [i for i, ok in enumerate(good.to_pylist()) if ok]
        try:
            result = self._call(rows.select(names))
            values = _columns(result, visible)
        except INFRASTRUCTURE:
            raise
        except Exception as exc:  # noqa: BLE001 - the whole batch is the step's input
            for i in index:
                self.policy.error(out, i, where[i], self.stage, _reason(exc), exc)
            return _finish(batch, out, self.target, self.policy, self.stage, where)
        if result.num_rows != len(index):
            # rows added or removed: the hidden columns follow the first input row
            # (event time and origin cannot be known per row)
            index = [index[0] if index else 0] * result.num_rows
        out.rows.extend(zip(*values, strict=True) if values else [()] * len(index))
        out.source.extend(index)
        if batch.num_rows == 0:
            return pa.RecordBatch.from_pylist([], schema=self.target.schema)
        return _finish(batch, out, self.target, self.policy, self.stage, where)

    def _call(self, rows: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow as pa

        if self.kind == "pandas":
            frame = self.fn(rows.to_pandas())
            return pa.RecordBatch.from_pandas(frame, preserve_index=False)
        result = self.fn(rows)
        if isinstance(result, pa.Table):
            return result.combine_chunks().to_batches()[0] if result.num_rows else \
                pa.RecordBatch.from_pylist([], schema=result.schema)
        if not isinstance(result, pa.RecordBatch):
            raise CodecError(f"map_batch must return a pyarrow.RecordBatch, not "
                             f"{type(result).__name__}")
        return result


def _columns(batch: pa.RecordBatch, names: list[str]) -> list[list[Any]]:
    missing = [n for n in names if n not in batch.schema.names]
    if missing:
        raise CodecError(f"map_batch returned no column {', '.join(missing)}")
    return [batch.column(n).to_pylist() for n in names]
