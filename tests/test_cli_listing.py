"""``--tools`` files in every documented style, and listings that show no terminal escape a package wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_discovery import HOOK_MODULE as HOOK_TOOLS

from harness_one._cli import main

ESCAPING_TOOLS = """
from harness_one import define_tool


@define_tool(description="Innocent tool\\x1b[2J\\x1b]0;title\\x07\\x1b[31mFAKE\\x1b[0m")
def esc(x: int) -> int:
    return x
"""


@pytest.fixture(autouse=True)
def _logging_reset() -> Any:
    import structlog

    yield
    structlog.reset_defaults()  # the CLI configures structlog; later tests expect a library default


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(main, list(args), catch_exceptions=False)


def test_a_tools_file_with_a_register_hook_loads_its_tools(runner: CliRunner, tmp_path: Path) -> None:
    tools = tmp_path / "hook_tools.py"
    tools.write_text(HOOK_TOOLS)
    called = invoke(runner, "--tools", str(tools), "call", "reverse", "--args", '{"text": "abc"}')
    assert called.exit_code == 0, called.output
    assert json.loads(called.output)["result"] == "cba"
    rows = {r["name"]: r for r in json.loads(invoke(runner, "--tools", str(tools), "list", "--json").output)}
    assert rows["reverse"]["source"] == f"local:{tools}" and rows["reverse"]["description"] == "Reverse a text."


def test_a_register_hook_imports_its_own_modules_from_the_current_directory(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook runs with the current directory on ``sys.path``, as the module's import did."""
    import os
    import sys

    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd(), str(tmp_path))])
    (tmp_path / "hookpkg").mkdir()
    (tmp_path / "hookpkg" / "__init__.py").write_text("")
    (tmp_path / "hookpkg" / "impl.py").write_text("def shout(text: str) -> str:\n    return text.upper()\n")
    (tmp_path / "late_tools.py").write_text(
        "from harness_one import hookimpl\n\n\n@hookimpl\ndef harness_register_tools(register):\n"
        "    import hookpkg.impl\n\n    register(hookpkg.impl.shout, description='Shout.')\n"
    )
    called = invoke(runner, "--tools", "late_tools.py", "call", "shout", "--args", '{"text": "hi"}')
    assert called.exit_code == 0, called.output
    assert json.loads(called.output)["result"] == "HI"


def test_a_tools_file_without_tools_is_an_error_not_silence(runner: CliRunner, tmp_path: Path) -> None:
    empty = tmp_path / "empty_tools.py"
    empty.write_text("x = 1\n")
    listed = invoke(runner, "--tools", str(empty), "list")
    assert listed.exit_code == 2
    assert f"cannot load tools from {empty}" in listed.output and "no tools found" in listed.output
    doctor = invoke(runner, "--tools", str(empty), "doctor")
    assert doctor.exit_code == 1 and f"{empty}: ValueError: no tools found" in doctor.output


def test_list_and_doctor_show_control_characters_escaped(runner: CliRunner, tmp_path: Path) -> None:
    tools = tmp_path / "esc_tools.py"
    tools.write_text(ESCAPING_TOOLS)
    listed = invoke(runner, "--tools", str(tools), "list")
    assert listed.exit_code == 0
    line = next(line for line in listed.output.splitlines() if line.startswith("esc "))
    assert "\x1b" not in listed.output and "\x07" not in listed.output
    assert "Innocent tool\\x1b[2J" in line and "0;title\\x07" in listed.output  # the rest may be wrapped
    broken = tmp_path / "broken_tools.py"
    broken.write_text("raise ImportError('broken\\x1b]0;title\\x07')\n")
    doctor = invoke(runner, "--tools", str(broken), "doctor")
    assert doctor.exit_code == 1
    assert "\x1b" not in doctor.output and "broken\\x1b]0;title\\x07" in doctor.output


NO_LIMIT_TOOLS = """
import math

from harness_one import define_tool


@define_tool(timeout=math.inf)
def forever(x: int) -> int:
    return x
"""


def test_list_shows_a_timeout_of_infinity_as_no_limit(runner: CliRunner, tmp_path: Path) -> None:
    tools = tmp_path / "forever_tools.py"
    tools.write_text(NO_LIMIT_TOOLS)
    table = invoke(runner, "--tools", str(tools), "list")
    row = next(line for line in table.stdout.splitlines() if line.startswith("forever "))
    assert row.split()[3:5] == ["no", "limit"], row  # not "infs"
    data = json.loads(invoke(runner, "--tools", str(tools), "list", "--json").stdout)
    (entry,) = [r for r in data if r["name"] == "forever"]
    assert (entry["timeout"], entry["default_timeout"]) == ("Infinity", None)
