"""Fixtures for the embedded space tests: a fresh space directory per test."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gridstream.space import Space


@pytest.fixture
def space_dir(tmp_path: Path) -> Path:
    return tmp_path / "space"


@pytest.fixture
def open_space(space_dir: Path) -> Iterator[Callable[..., Space]]:
    """Open the test's space (again) with options; every space opened is closed."""
    opened: list[Space] = []

    def _open(**options: Any) -> Space:
        options.setdefault("fsync", "never")
        space = Space.embedded("test", data_dir=space_dir, **options)
        opened.append(space)
        return space

    yield _open
    for space in opened:
        with contextlib.suppress(Exception):  # deliberately broken by the test
            space.close()


@pytest.fixture
def space(open_space: Callable[..., Space]) -> Space:
    return open_space()
