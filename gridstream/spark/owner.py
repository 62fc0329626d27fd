"""What gridstream keeps in a checkpoint beside Spark's files: which flow it belongs to
(a checkpoint of one kind of flow given to another fails before Spark reads it, naming
its owner, instead of Spark's own error about an offset it cannot parse), and the
records a flow passed over on purpose (``skipped.jsonl``)."""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import orjson

from gridstream.errors import ConfigError

__all__ = ["OWNER_FILE", "SKIPS_FILE", "claim_checkpoint", "record_skips"]

OWNER_FILE = "gridstream-owner.json"
SKIPS_FILE = "skipped.jsonl"


def _local(location: str) -> Path | None:
    if location.startswith("file:"):
        location = re.sub(r"^file:(//)?", "", location)
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", location):
        return None  # another file system: not checked here
    return Path(location)


def _guess(directory: Path) -> str | None:
    """The kind of an older checkpoint without an owner file, from its last offsets."""
    offsets = directory / "offsets"
    with contextlib.suppress(OSError, ValueError):
        last = max((p for p in offsets.iterdir() if p.name.isdigit()),
                   key=lambda p: int(p.name))
        text = last.read_text(encoding="utf-8")
        if '"caches"' in text and '"v":' in text:
            return "source connector"
    return None


def claim_checkpoint(location: str, kind: str, name: str) -> None:
    """Record that ``location`` belongs to the ``kind`` flow ``name`` (its first start),
    or ``ConfigError`` when it belongs to a flow of another kind. A renamed flow keeps
    its checkpoint (the name is recorded anew)."""
    directory = _local(location)
    if directory is None:
        return
    path = directory / OWNER_FILE
    owner: dict[str, str] | None = None
    with contextlib.suppress(FileNotFoundError):
        owner = orjson.loads(path.read_bytes())
    if owner is None:
        guessed = _guess(directory)
        if guessed is not None:
            owner = {"kind": guessed, "name": "?"}
    if owner is not None and owner.get("kind") != kind:
        raise ConfigError(f"{kind} {name!r}: checkpoint {location} belongs to "
                          f"{owner.get('kind')} {owner.get('name')!r}; give each flow a "
                          "checkpoint of its own")
    if owner == {"kind": kind, "name": name}:
        return
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{OWNER_FILE}.{uuid.uuid4().hex}")
    tmp.write_bytes(orjson.dumps({"kind": kind, "name": name}))
    os.replace(tmp, path)


def record_skips(location: str, name: str, batch_id: int, positions: Sequence[str]) -> None:
    """Append one line per record ``name`` skipped on purpose in batch ``batch_id`` to the
    checkpoint's ``skipped.jsonl`` (``{"at", "flow", "batch", "record"}``): where it is
    found later, with the checkpoint it concerns. A checkpoint on another file system
    keeps none (the run's log has each skip)."""
    directory = _local(location)
    if directory is None or not positions:
        return
    directory.mkdir(parents=True, exist_ok=True)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(directory / SKIPS_FILE, "ab") as out:
        for position in positions:
            out.write(orjson.dumps({"at": at, "flow": name, "batch": batch_id,
                                    "record": position}) + b"\n")
