"""``python -m tests.integration.support.examples_child SCRIPT ...``: each example script
run as ``__main__`` in turn, in this one process, as ``python SCRIPT`` would run it (its
own ``sys.argv``, its ``SystemExit``), each one's output between two marker lines. The
Spark examples then share one driver JVM, as they would in a notebook: an example whose
``Pipeline.run`` started a session stops it as it ends, and the next one starts another
in the same JVM in a second; one that finds a session running uses it. 10-15 s less
each than a process each. The Spark console sink's lines (the JVM's stdout) land in the
right section: a query's batches are printed before the example that runs it returns.
"""

from __future__ import annotations

import runpy
import sys
import traceback
from pathlib import Path

MARK = "=== gridstream example "


def run_one(script: str) -> int:
    """The script's exit status."""
    sys.argv = [script]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code)  # as the interpreter does with SystemExit("message")
        return 1
    except BaseException:  # noqa: BLE001 - the traceback goes into the example's section
        traceback.print_exc(file=sys.stdout)
        return 1
    return 0


def sections(output: str) -> dict[str, tuple[int, str]]:
    """Each example's exit status and output, by script name, from this child's stdout."""
    found: dict[str, tuple[int, str]] = {}
    name, lines = None, []
    for line in output.splitlines():
        if line.startswith(MARK) and line.endswith(" begins"):
            name, lines = line[len(MARK):-len(" begins")], []
        elif line.startswith(MARK) and name is not None and " ended " in line:
            found[name] = (int(line.rsplit(" ", 1)[1]), "\n".join(lines))
            name = None
        elif name is not None:
            lines.append(line)
    return found


def main(scripts: list[str]) -> int:
    """1 if an example failed (its own status is in its section), else 0."""
    failed = False
    for script in scripts:
        name = Path(script).name
        print(f"{MARK}{name} begins", flush=True)
        code = run_one(script)
        # on a line of its own, whatever the example's last output ended with
        print(f"\n{MARK}{name} ended {code}", flush=True)
        failed = failed or code != 0
    return int(failed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
