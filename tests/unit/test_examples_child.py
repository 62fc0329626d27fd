"""The child that runs the pipeline examples in one process reports each one apart: a
failing example fails its own test, not the others', and says why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.support.examples_child import sections

ROOT = Path(__file__).resolve().parents[2]


def test_each_example_gets_its_status_and_output(tmp_path: Path) -> None:
    scripts = {
        "fails.py": "print('before')\nraise SystemExit('the pipeline failed: boom')\n",
        "raises.py": "raise ValueError('bad input')\n",
        "quiet.py": "import sys\nsys.stdout.write('no newline at the end')\n",
        "argv.py": "import sys\nprint(sys.argv[1:])\nraise SystemExit(0)\n",
    }
    for name, text in scripts.items():
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.support.examples_child",
         *(str(tmp_path / name) for name in scripts)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    found = sections(done.stdout)
    assert sorted(found) == sorted(scripts)
    assert found["fails.py"] == (1, "before\nthe pipeline failed: boom\n")
    code, out = found["raises.py"]
    assert code == 1 and "ValueError: bad input" in out
    assert found["quiet.py"] == (0, "no newline at the end")
    assert found["argv.py"] == (0, "[]\n")
