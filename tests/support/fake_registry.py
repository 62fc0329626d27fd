"""The one schema registry fake of the tests: in memory (the ``Registry`` protocol of
``gridstream.protocol.registry``), counting its calls. Ids count from 1 per distinct
schema text; a subject holds each schema once, in the order registered (its versions).
"""

from __future__ import annotations

from typing import Any

from gridstream.errors import CodecError


class FakeRegistry:
    def __init__(self, refuse: str = "", *, refuse_subject: str = "") -> None:
        self.schemas: dict[int, str] = {}
        self.subjects: dict[str, list[int]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.refuse = refuse
        """A schema containing this text is refused as incompatible."""
        self.refuse_subject = refuse_subject
        """Every schema for this subject is refused as incompatible."""

    def register(self, subject: str, schema: str) -> int:
        self.calls.append(("register", subject))
        if (self.refuse and self.refuse in schema) or subject == self.refuse_subject:
            raise CodecError(f"the registry refused the schema for subject {subject!r} as "
                             "incompatible (compatibility rule BACKWARD): a reason")
        schema_id = next((i for i, t in self.schemas.items() if t == schema), None)
        if schema_id is None:
            schema_id = len(self.schemas) + 1
            self.schemas[schema_id] = schema
        versions = self.subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return schema_id

    def schema(self, schema_id: int) -> str | None:
        self.calls.append(("schema", schema_id))
        return self.schemas.get(schema_id)

    def latest(self, subject: str) -> str | None:
        self.calls.append(("latest", subject))
        ids = self.subjects.get(subject)
        return self.schemas[ids[-1]] if ids else None

    def lookup(self, subject: str, schema: str) -> int | None:
        self.calls.append(("lookup", subject))
        return next((i for i in self.subjects.get(subject, [])
                     if self.schemas[i] == schema), None)

    def versions(self, subject: str, after: int = 0) -> list[tuple[int, int, str]]:
        self.calls.append(("versions", subject))
        return [(n, i, self.schemas[i]) for n, i in enumerate(self.subjects.get(subject, []), 1)
                if n > after]

    def close(self) -> None:
        self.calls.append(("close", None))
