r"""Every Python block in the README and in docs/ runs as written.

A page's blocks run in order in one fresh interpreter, sharing one namespace, as a reader
pastes them into one session; top-level ``await`` is allowed. A block that cannot run here
(it needs a paid API, a terminal, or is a fragment of a larger file) is preceded by
``<!-- not run: the reason -->``, and the reason is required.

A block labelled with a file name (a line ``\`path/name.ext\`:`` just before it) is a file of
a project the page builds: it is written to that path. When a page writes a ``pyproject.toml``,
the project is built and installed (into a directory of its own, without touching the
environment) and its ``tests/`` run with pytest, as its author would run them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"(?:<!--\s*not run:(?P<reason>[^>]*)-->\s*\n)?```python\n(?P<code>.*?)```", re.S)
FILE = re.compile(r"^`(?P<path>[\w./-]+)`:\n\n```\w*\n(?P<body>.*?)```", re.S | re.M)

RUNNER = r"""
import ast, asyncio, json, sys, traceback
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
for number, code in blocks:
    try:
        compiled = compile(code, f"block {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(compiled, namespace)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    except BaseException:
        print(f"BLOCK {number} FAILED", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def files(page: Path) -> dict[str, str]:
    """The files a page builds, by path."""
    return {found.group("path"): found.group("body") for found in FILE.finditer(page.read_text())}


def blocks(page: Path) -> tuple[list[tuple[int, str]], list[str]]:
    run, skipped = [], []
    labelled = set(files(page).values())
    for number, found in enumerate(BLOCK.finditer(page.read_text()), 1):
        if found.group("code") in labelled:
            continue
        if found.group("reason") is not None:
            assert found.group("reason").strip(), f"{page.name} block {number}: 'not run' needs a reason"
            skipped.append(found.group("reason").strip())
        else:
            run.append((number, found.group("code")))
    return run, skipped


@pytest.mark.parametrize("page", [p for p in PAGES if "```python" in p.read_text()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_runs(page: Path, tmp_path: Path) -> None:
    run, _ = blocks(page)
    project = files(page)
    if not run and not project:
        pytest.skip("every block on this page says why it does not run")
    env = {
        **os.environ,
        "HARNESS_ONE_STATE": "memory:",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("HARNESS_ONE_CONFIG", None)
    if project:
        build_project(tmp_path, project, env)
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(run),
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if any(path.startswith("tests/") for path in project):
        tests = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
            check=False,
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,
            env=env,
        )
        assert tests.returncode == 0, tests.stdout[-3000:]


def build_project(root: Path, project: dict[str, str], env: dict[str, str]) -> None:
    """Write the page's files under ``root``; install a project with a ``pyproject.toml`` into ``root/site``."""
    for path, body in project.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body)
    if "pyproject.toml" in project:
        site = root / "site"
        installed = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--target",
                str(site),
                str(root),
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert installed.returncode == 0, installed.stderr[-3000:]
        env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
