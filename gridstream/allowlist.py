"""Functions named by import path, from an allow-list only.

Configuration never loads arbitrary code: ``load_function("myapp.logs:parse",
allowed=["myapp"])`` imports ``myapp.logs`` only because the operator listed it
(``[run] allowed_modules`` in the run file, or ``GRIDSTREAM_ALLOWED_MODULES``,
comma-separated), and only returns a function defined in an allowed module. The
connectors' ``cacheFilter`` (``gridstream.connect.filters``), the pipeline steps, key and
value functions of a run file all load through it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence

from gridstream.errors import ConfigError

__all__ = ["ALLOWED_ENV", "allowed_modules", "load_function"]

ALLOWED_ENV = "GRIDSTREAM_ALLOWED_MODULES"

def allowed_modules(configured: Sequence[str] = ()) -> tuple[str, ...]:
    """The run's allow-list: ``configured`` plus the environment's."""
    extra = [m.strip() for m in os.environ.get(ALLOWED_ENV, "").split(",") if m.strip()]
    return tuple(dict.fromkeys([*configured, *extra]))


def _split(path: str, what: str) -> tuple[str, str]:
    if ":" in path:
        module, _, name = path.partition(":")
    else:
        module, _, name = path.rpartition(".")
    if not module or not name or not name.isidentifier():
        raise ConfigError(f"{what} {path!r}: give 'module:function'")
    return module, name


def _allowed(module: str, allowed: Sequence[str]) -> bool:
    return any(a and (module == a or module.startswith(a + ".")) for a in allowed)


def load_function(path: str, allowed: Sequence[str], *,
                  what: str = "function") -> Callable[..., object]:
    """The function at ``path`` (``"module:function"`` or ``"module.function"``);
    ``ConfigError`` unless its module is allowed exactly (or is a submodule of an allowed
    package), it is callable and it is defined in an allowed module (not merely
    imported by one). ``what`` names the option in errors."""
    module, name = _split(path, what)
    if not _allowed(module, allowed):
        raise ConfigError(f"{what} {path!r}: module {module!r} is not in the allow-list "
                          f"(allowed_modules / {ALLOWED_ENV}); configuration never imports "
                          "code the operator has not allowed")
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{what} {path!r}: cannot import {module!r}: {exc}") from exc
    fn = getattr(loaded, name, None)
    if not callable(fn):
        raise ConfigError(f"{what} {path!r}: {module}.{name} is not a function")
    # a name the allowed module imported from elsewhere (os.system, subprocess.run, ...)
    # is not the operator's code: the function must be defined in an allowed module
    home = getattr(fn, "__module__", None)
    if not isinstance(home, str) or not _allowed(home, allowed):
        raise ConfigError(f"{what} {path!r}: {module}.{name} is defined in module "
                          f"{home!r}, which is not in the allow-list ({ALLOWED_ENV} / "
                          "allowed_modules); only functions defined in an allowed module "
                          "are used")
    return fn  # type: ignore[no-any-return]
