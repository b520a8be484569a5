"""What a new user reads from the command line: effective defaults in ``list``, the MCP servers and
blocked plugins in ``doctor``, and a configuration problem told as one (not as a mistyped command)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp_support import TOOLS

from harness_one._cli import EXIT_CODES, main


@pytest.fixture(autouse=True)
def _logging_reset() -> Any:
    import structlog

    yield
    structlog.reset_defaults()


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(main, list(args), catch_exceptions=False)


PLAIN = 'from harness_one import define_tool\n\n\n@define_tool\ndef plain() -> str:\n    """Say hi."""\n    return \'hi\'\n'


def test_list_shows_the_plugins_default_rate_limit_and_timeout_as_defaults(runner: CliRunner) -> None:
    Path("plain_tools.py").write_text(PLAIN)  # one tool that declares no policy
    options = ("-O", 'rate_limit.default={"rate": 10, "burst": 20}', "-O", "timeout.default=30", "--tools", "plain_tools.py")
    table = invoke(runner, *options, "list")
    assert table.exit_code == 0, table.output
    rows = {line.split()[0]: line for line in table.output.splitlines()[1:] if line[:1].strip()}
    assert "10/s burst 20 (default)" in rows["plain"] and "30s (default)" in rows["plain"]
    assert "5/s burst 5 " in rows["random_number"] and "(default)  " not in rows["random_number"].split("30s")[0]
    listed = {row["name"]: row for row in json.loads(invoke(runner, *options, "list", "--json").stdout)}
    plain, declared = listed["plain"], listed["random_number"]
    assert plain["rate_limit"] is None and plain["timeout"] is None  # what the tool declares: unchanged for scripts
    assert plain["default_rate_limit"] == {"rate": 10, "burst": 20} and plain["default_timeout"] == 30
    assert declared["rate_limit"] == {"rate": 5, "burst": 5} and declared["default_rate_limit"] is None
    bare = {row["name"]: row for row in json.loads(invoke(runner, "--tools", "plain_tools.py", "list", "--json").stdout)}
    assert bare["plain"]["default_rate_limit"] is None and bare["plain"]["default_timeout"] is None  # none configured


def test_doctor_text_names_the_blocked_plugins(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "blocking.toml"
    config.write_text('[plugins]\nblock = ["cache"]\n')
    done = invoke(runner, "--config", str(config), "doctor")
    assert "Plugins (" in done.output
    heading = next(line for line in done.output.splitlines() if line.startswith("Plugins ("))
    assert heading.endswith("; blocked: cache):"), heading
    assert "  cache " not in done.output


def test_doctor_lists_the_mcp_servers_and_their_tools(tmp_path: Path) -> None:
    server = shlex.join([sys.executable, "-m", "harness_one", "--tools", TOOLS, "serve"])
    env = {**os.environ, "HARNESS_ONE_STATE": f"sqlite:///{tmp_path / 'state.sqlite3'}"}
    command = [sys.executable, "-m", "harness_one", "--mcp", f"remote:r_={server}", "doctor"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "MCP servers (1):" in lines, done.stdout
    row = lines[lines.index("MCP servers (1):") + 1].split()
    assert row[0] == "remote" and row[2] == "tools:" and int(row[1]) > 1
    assert "r_add," in row and int(row[1]) == len(row) - 3
    report = json.loads(
        subprocess.run(
            [*command, "--json"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False
        ).stdout
    )
    assert "r_add" in report["mcp_servers"]["remote"] and len(report["mcp_servers"]["remote"]) == int(row[1])


def test_a_missing_tools_entry_of_the_configuration_names_the_file_without_usage_text(runner: CliRunner) -> None:
    Path("harness-one.toml").write_text('tools = ["examples/demo_tools.py"]\n')
    done = invoke(runner, "list")
    assert done.exit_code == EXIT_CODES["usage"]
    assert "Usage:" not in done.output and "Try " not in done.output
    wanted = f"an entry of the 'tools' key of {Path('harness-one.toml').absolute()}"
    assert done.output.startswith("Error: cannot load tools from ") and wanted in done.output, done.output
    typed = invoke(runner, "--config", "none.toml", "--tools", "missing_module_xyz", "list")
    assert typed.exit_code == EXIT_CODES["usage"] and "cannot read the configuration file" in typed.output
    assert "Usage:" not in typed.output  # the file named is missing: a configuration problem
    Path("empty.toml").write_text("")
    given = invoke(runner, "--config", "empty.toml", "--tools", "missing_module_xyz", "list")
    assert given.exit_code == EXIT_CODES["usage"] and "Usage: main list" in given.output  # typed: usage text
    assert "an entry of" not in given.output


def test_an_environment_tools_entry_is_named_as_such(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ONE_TOOLS", "missing_module_xyz")
    done = invoke(runner, "list")
    assert done.exit_code == EXIT_CODES["usage"] and "Usage:" not in done.output
    assert "cannot load tools from missing_module_xyz (an entry of $HARNESS_ONE_TOOLS)" in done.output, done.output


def test_an_unreachable_mcp_server_stops_the_command_before_any_request(tmp_path: Path) -> None:
    env = {**os.environ, "HARNESS_ONE_STATE": f"sqlite:///{tmp_path / 'state.sqlite3'}"}
    gone = shlex.join([sys.executable, "-c", "pass"])  # a stdio server that exits at once
    done = subprocess.run(
        [sys.executable, "-m", "harness_one", "--mcp", f"gone={gone}", "run"],
        input='{"id": 1, "name": "calculate", "arguments": {"expression": "1+1"}}\n',
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("Error: cannot import MCP tools: ") and "'gone'" in done.stderr, done.stderr
