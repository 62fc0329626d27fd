"""The operations users call, shared by ``Space`` and ``Transaction``.

A target names a type: a ``@space_class`` (or plain dataclass) class, a type name, or
an entry used as a template (its non-null properties must match). Reads return entries
of the target's class, else of the class registered under the type's name, else
``SpaceDocument``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from gridstream.errors import SpaceError
from gridstream.model import (
    DocumentType,
    EntryParts,
    SpaceDocument,
    descriptor_of,
    from_entry,
    from_template,
    normalize_id,
    to_entry,
)
from gridstream.operations import EntityId, OpType, TypeDescriptor
from gridstream.space._change import ChangeSet, matches, matches_template
from gridstream.space._codec import decode_data
from gridstream.space._core import Core
from gridstream.space._store import Slot

__all__ = ["NO_ID", "SpaceApi", "Versioned"]

NO_ID: Any = object()
Where = Callable[[Any], bool] | Mapping[str, Any] | None


class Versioned(NamedTuple):
    """An entry and its version (pass it back as ``expected_version``)."""

    entry: Any
    version: int


class _Query(NamedTuple):
    descriptor: TypeDescriptor
    build: Callable[[dict[str, Any]], Any]
    template: dict[str, Any] | None
    criteria: dict[str, Any]
    where: Callable[[Any], bool] | None


class SpaceApi:
    """Write, change, remove, take and query entries."""

    _core: Core

    def _engine(self) -> Core:
        return self._core

    # ------------------------------------------------------------ types

    def introduce_type(self, type_: type | TypeDescriptor | DocumentType) -> TypeDescriptor:
        """Make a type known (and persisted) before its first entry; idempotent."""
        if isinstance(type_, DocumentType):
            descriptor = type_.descriptor()
        elif isinstance(type_, TypeDescriptor):
            descriptor = type_
        else:
            descriptor = descriptor_of(type_)
        self._engine().ensure_type(descriptor)
        return descriptor

    def types(self) -> Mapping[str, TypeDescriptor]:
        """The types introduced so far."""
        return dict(self._engine().types)

    # ------------------------------------------------------------ writes

    def write(self, entry: object, *, expected_version: int | None = None) -> int:
        """Insert or overwrite an entry; returns its new version. ``expected_version``
        guards the write (``0``: the entry must not exist yet)."""
        core = self._engine()
        return core.put(self._parts(core, entry), OpType.WRITE, expected_version, False)

    def update(self, entry: object, *, expected_version: int | None = None) -> int:
        """Replace an existing entry whole (``EntryNotFoundError`` if absent)."""
        core = self._engine()
        return core.put(self._parts(core, entry), OpType.UPDATE, expected_version, True)

    def partial_update(self, entry: object, *, expected_version: int | None = None) -> int:
        """Write only the entry's non-null properties into the existing entry."""
        core = self._engine()
        return core.partial(self._parts(core, entry), expected_version)

    def change(
        self, target: object, id: Any, changes: ChangeSet, *,
        expected_version: int | None = None,
    ) -> int:
        """Apply a change set (``Change.set/increment/unset``, or a dict of plain sets)."""
        core = self._engine()
        descriptor = self._descriptor(core, target)
        ident = normalize_id(id, descriptor.name, descriptor.id_property)
        return core.change(descriptor, ident, changes, expected_version)

    def remove(
        self, target: object, id: Any = NO_ID, *,
        expected_version: int | None = None,
    ) -> int | None:
        """Remove by id, or the first entry matching a template; the removal's sequence
        number, or ``None`` if nothing matched."""
        done = self._delete(target, id, OpType.REMOVE, expected_version)
        return done[0] if done is not None else None

    def take(
        self, target: object, id: Any = NO_ID, *,
        expected_version: int | None = None,
    ) -> Any | None:
        """Remove and return an entry (by id or template); ``None`` if nothing matched."""
        done = self._delete(target, id, OpType.TAKE, expected_version)
        return done[1] if done is not None else None

    def clear(self, target: object, *, where: Where = None) -> int:
        """Remove every entry of a type (matching the template/``where``), as one bulk;
        returns how many were removed."""
        core = self._engine()
        query = self._query(core, target, None, where, None)
        if query.template is None and not query.criteria and query.where is None:
            return core.clear(query.descriptor.name, None)

        def accept(_: EntityId, slot: Slot) -> bool:
            return self._accepts(query, decode_data(slot.data)) is not None

        return core.clear(query.descriptor.name, accept)

    # ------------------------------------------------------------ reads

    def read(self, target: object, id: Any = NO_ID) -> Any | None:
        """The entry with this id (or the first matching a template), else ``None``."""
        found = self.read_versioned(target, id)
        return found.entry if found is not None else None

    def read_versioned(self, target: object, id: Any = NO_ID) -> Versioned | None:
        """Like ``read``, with the entry's version."""
        core = self._engine()
        query = self._query(core, target, None, None, None)
        if id is NO_ID:
            _need_template(target)
            hits = self._select(core, query, 1)
            return hits[0][2] if hits else None
        ident = normalize_id(id, query.descriptor.name, query.descriptor.id_property)
        slot = core.get(query.descriptor.name, ident)
        if slot is None:
            return None
        return Versioned(query.build(decode_data(slot.data)), slot.version)

    def read_multiple(
        self, target: object, template: object = None, *, where: Where = None,
        index: Mapping[str, Any] | None = None, limit: int | None = None,
    ) -> list[Any]:
        """Entries of a type matching a template, ``where`` (a predicate on the entry, or
        ``{path: value}`` equalities) and ``index`` (equalities on indexed paths only)."""
        core = self._engine()
        query = self._query(core, target, template, where, index)
        return [hit[2].entry for hit in self._select(core, query, limit)]

    def count(
        self, target: object, template: object = None, *, where: Where = None,
        index: Mapping[str, Any] | None = None,
    ) -> int:
        """How many entries ``read_multiple`` would return."""
        core = self._engine()
        query = self._query(core, target, template, where, index)
        if query.template is None and not query.criteria and query.where is None:
            return len(core.items(query.descriptor.name))
        return len(self._select(core, query, None))

    # ------------------------------------------------------------ helpers

    @staticmethod
    def _parts(core: Core, entry: object) -> EntryParts:
        parts = from_entry(entry, core.types)
        core.ensure_type(parts.descriptor)
        return parts

    @staticmethod
    def _descriptor(core: Core, target: object) -> TypeDescriptor:
        if isinstance(target, str) and target in core.types:
            return core.types[target]
        descriptor = descriptor_of(target, core.types)
        return core.types.get(descriptor.name, descriptor)

    def _query(
        self, core: Core, target: object, template: object, where: Where,
        index: Mapping[str, Any] | None,
    ) -> _Query:
        tmpl_obj = template
        if not isinstance(target, type | str):
            tmpl_obj = target if template is None else template
        descriptor = self._descriptor(core, target)
        tmpl = from_template(tmpl_obj, core.types)[1] if tmpl_obj is not None else None
        criteria = dict(where) if isinstance(where, Mapping) else {}
        if index:
            indexed = set(core.store.indexed_paths(descriptor.name))
            missing = set(index) - indexed
            if missing:
                raise SpaceError(f"{descriptor.name} has no index on {sorted(missing)}")
            criteria.update(index)
        predicate = where if callable(where) else None
        return _Query(descriptor, _builder(descriptor, target), tmpl, criteria, predicate)

    def _select(
        self, core: Core, query: _Query, limit: int | None
    ) -> list[tuple[EntityId, Slot, Versioned]]:
        name = query.descriptor.name
        id_prop = query.descriptor.id_property
        if query.template is not None and query.template.get(id_prop) is not None:
            ident = normalize_id(query.template[id_prop], name, id_prop)
            items = core.items(name, [ident])
        else:
            items = core.candidates(name, query.criteria)
        hits = []
        for ident, slot in items:
            entry = self._accepts(query, decode_data(slot.data))
            if entry is not None:
                hits.append((ident, slot, Versioned(entry, slot.version)))
                if limit is not None and len(hits) >= limit:
                    break
        return hits

    @staticmethod
    def _accepts(query: _Query, data: dict[str, Any]) -> Any | None:
        if query.criteria and not matches(data, query.criteria):
            return None
        if query.template is not None and not matches_template(data, query.template):
            return None
        entry = query.build(data)
        if query.where is not None and not query.where(entry):
            return None
        return entry

    def _delete(
        self, target: object, id: Any, op: OpType, expected: int | None
    ) -> tuple[int, Any] | None:
        core = self._engine()
        with core.lock:  # find and remove atomically
            query = self._query(core, target, None, None, None)
            name = query.descriptor.name
            if id is NO_ID:
                _need_template(target)
                hits = self._select(core, query, 1)
                if not hits:
                    return None
                ident = hits[0][0]
            else:
                ident = normalize_id(id, name, query.descriptor.id_property)
            done = core.delete(name, ident, op, expected)
            if done is None:
                return None
            return done[0], query.build(decode_data(done[1].data))


def _need_template(target: object) -> None:
    if isinstance(target, type | str):
        raise SpaceError("give an id, or an entry as a template, to name the entry")


def _builder(descriptor: TypeDescriptor, target: object) -> Callable[[dict[str, Any]], Any]:
    if isinstance(target, SpaceDocument):
        return lambda data: SpaceDocument(descriptor.name, data)
    cls = target if isinstance(target, type) else None
    if cls is None and not isinstance(target, str):
        cls = type(target)
    return lambda data: to_entry(descriptor, data, cls)
