"""The README's quick start runs as written and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

from harness_one import ToolRegistry

ROOT = Path(__file__).resolve().parents[1]


def test_readme_quick_start(fresh_default: ToolRegistry) -> None:
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S)
    assert code is not None
    out = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(code.group(1), namespace)
    promised = [line.strip()[2:] for line in code.group(1).splitlines() if line.strip().startswith("# ") and "print" not in line]
    printed = out.getvalue().splitlines()
    assert printed == [p for p in promised if p in printed] and len(printed) == 4
    assert namespace["result"] == 8


def test_readme_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[2] == "```sh" and lines[3].startswith("make demo") and lines[4].startswith("make test") and lines[5] == "```"


def test_demo_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True, text=True, timeout=60, check=True
    )
    assert "burst past the rate limit" in done.stdout and "Did you mean: 'add'?" in done.stdout
