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


def test_getting_started_examples(fresh_default: ToolRegistry) -> None:
    text = (ROOT / "docs" / "getting-started.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    namespace: dict[str, object] = {}
    out = io.StringIO()
    exec(blocks[0], namespace)  # define and call
    assert fresh_default.call_count("web_search") == 2  # as its comment says
    with contextlib.redirect_stdout(out):
        for block in blocks[1:3]:  # errors, try_call
            exec(block, namespace)
    assert out.getvalue().splitlines() == [
        "Invalid arguments for tool 'web_search' (2 problems):",
        "- $.num_results: expected a number <= 10, got 11",
        "- $.query: expected string, got integer 42",
        "Fix the arguments and call 'web_search' again.",
    ]


def test_the_home_page_starts_with_pip_install() -> None:
    text = (ROOT / "docs" / "index.md").read_text()
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    assert first_block.startswith("pip install harness-one ")
