"""The Java runtime the JVM services and Spark's driver run on."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gridstream.errors import StackError

__all__ = ["find_java"]

def find_java() -> Path:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` if JAVA_HOME is set, else PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise StackError(f"Java not found: JAVA_HOME={home} has no executable bin/java")
        return java
    found = shutil.which("java")
    if not found:
        raise StackError("Java not found: install a Java 17 runtime or set JAVA_HOME")
    return Path(found)
