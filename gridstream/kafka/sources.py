"""Kafka client properties from a Java-style ``.properties`` file and from the
environment, so that secrets need not appear on a command line (visible in ``ps``).

Environment: every variable ``GRIDSTREAM_KAFKA_<NAME>`` sets the property whose name is
``<NAME>`` lower-cased with ``_`` turned into ``.`` (``GRIDSTREAM_KAFKA_SASL_PASSWORD``
→ ``sasl.password``), except the variables ``gridstream stack`` reads for the broker
it runs (``STACK_VARIABLES``: ``GRIDSTREAM_KAFKA_PORT``, ``_CONTROLLER_PORT``, ``_HEAP``,
``_JVM_OPTS``), which are no client properties.
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from pathlib import Path

from gridstream.errors import ConfigError

__all__ = ["ENV_PREFIX", "STACK_VARIABLES", "parse_properties", "properties_from_env",
           "read_properties_file"]

ENV_PREFIX = "GRIDSTREAM_KAFKA_"
STACK_VARIABLES = frozenset({"PORT", "CONTROLLER_PORT", "HEAP", "JVM_OPTS"})
"""``GRIDSTREAM_KAFKA_*`` names (after the prefix) that configure the stack's broker
(``gridstream.stack.kafka``), not a client."""
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def properties_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The properties set by ``GRIDSTREAM_KAFKA_*`` variables."""
    env = os.environ if environ is None else environ
    props: dict[str, str] = {}
    for name, value in env.items():
        rest = name[len(ENV_PREFIX):]
        if name.startswith(ENV_PREFIX) and rest and rest not in STACK_VARIABLES:
            props[rest.lower().replace("_", ".")] = value
    return props


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """The properties of a Java-style ``.properties`` file (UTF-8)."""
    try:
        text = Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read kafka properties file {str(path)!r}: "
                          f"{type(exc).__name__}") from exc
    return parse_properties(text, source=str(path))


def parse_properties(text: str, source: str = "<properties>", *,
                     unique: bool = False) -> dict[str, str]:
    """Java ``.properties`` syntax: ``#``/``!`` comments, ``key=value``, ``key: value``
    or ``key value``, a trailing ``\\`` continues the line, ``\\`` escapes a character
    (``\\t``, ``\\n``, ``\\uXXXX`` as in Java). A repeated name takes the last value,
    as in Java, or is a ``ConfigError`` with ``unique``. Error messages never quote a
    value."""
    props: dict[str, str] = {}
    lines_of: dict[str, int] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continued(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continued(line):
            line = line[:-1]
        key, value = _split(line)
        if not key:
            raise ConfigError(f"{source}:{number}: a property line has no name")
        name = _unescape(key, source, number)
        if unique and name in props:
            raise ConfigError(f"{source}:{number}: option {name!r} is given twice (first "
                              f"on line {lines_of[name]})")
        props[name] = _unescape(value, source, number)
        lines_of[name] = number
    return props


def _continued(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _split(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str, source: str, number: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not all(c in string.hexdigits for c in digits):
                raise ConfigError(f"{source}:{number}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
