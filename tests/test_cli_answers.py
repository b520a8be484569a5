"""The command line's answers against a hostile review: what a tool prints stays off the answers
of ``run`` and ``call``, ``call`` says so when its answer cannot be written, and ``doctor``
masks secret plugin options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one._cli import main

SECRET = "sk-live-HUNTER2-abcdef123456"

#: A tools file that writes to stdout every way a tool can: at import, ``print``, fd 1, a child process.
CHATTY_TOOLS = """
import os, subprocess, sys
from harness_one import defineTool

print("import: loading chatty")

@defineTool(registry=None)
def chatty(x: int) -> int:
    \"\"\"Prints while working.\"\"\"
    print("print: working on", x)
    sys.stdout.flush()
    os.write(1, b"fd1: raw write\\n")
    subprocess.run([sys.executable, "-c", "print('child: hello')"], check=True)
    return x * 2
"""

#: A tools file whose tool leaves a mark when it runs.
MARK_TOOLS = """
from harness_one import defineTool

@defineTool(registry=None)
def mark(path: str) -> str:
    \"\"\"Leaves a mark.\"\"\"
    open(path, "a").write("ran\\n")
    return "marked"
"""

PRINTED = ["import: loading chatty", "print: working on 2", "fd1: raw write", "child: hello"]


@pytest.fixture(autouse=True)
def _logging_reset() -> Any:
    import structlog

    yield
    structlog.reset_defaults()  # the CLI configures structlog; later tests expect a library default


@pytest.fixture
def chatty(tmp_path: Path) -> str:
    tools = tmp_path / "chatty_tools.py"
    tools.write_text(CHATTY_TOOLS)
    return str(tools)


def harness(*args: str, **options: Any) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_ONE_CONFIG"}
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.run([sys.executable, "-m", "harness_one", *args], env=env, timeout=120, check=False, **options)


# --------------------------------------------------------------------------- what a tool prints


def test_what_a_tool_prints_goes_to_stderr_not_between_run_answers(chatty: str) -> None:
    lines = b'{"id": 1, "name": "chatty", "arguments": {"x": 2}}\n{"id": 2, "name": "chatty", "arguments": {"x": 3}}\n'
    done = harness("--tools", chatty, "run", input=lines)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]  # every stdout line is an answer
    assert [(a["id"], a["result"]) for a in answers] == [(1, 4), (2, 6)]
    err = done.stderr.decode()
    assert all(text in err for text in PRINTED), err
    assert "2 requests, 2 ok, 0 errors" in err


def test_what_a_tool_prints_goes_to_stderr_not_into_calls_answer(chatty: str) -> None:
    done = harness("--tools", chatty, "call", "chatty", "--args", '{"x": 2}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == 4  # the whole of stdout is the answer
    err = done.stderr.decode()
    assert all(text in err for text in PRINTED), err


def test_stdout_is_given_back_once_the_command_ends(chatty: str) -> None:
    """In process (a test runner's capture, no fd 1 of its own): prints go to stderr, and
    ``sys.stdout`` is the runner's again afterwards."""
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        before = sys.stdout
        with pytest.raises(SystemExit) as code:
            main(["--tools", chatty, "call", "chatty", "--args", '{"x": 2}'], prog_name="harness-one")
        assert code.value.code == 0 and sys.stdout is before
    assert json.loads(out.getvalue())["result"] == 4
    assert "print: working on 2" in err.getvalue().decode()
    ran = runner.invoke(main, ["--tools", chatty, "run"], input='{"id": 1, "name": "chatty", "arguments": {"x": 5}}\n')
    assert ran.exit_code == 0 and json.loads(ran.stdout) == {"id": 1, "ok": True, "result": 10}
    assert "print: working on 5" in ran.stderr


# --------------------------------------------------------------------------- an answer that cannot be written


def test_call_with_stdout_closed_says_so_and_exits_70_without_calling(tmp_path: Path) -> None:
    tools, marks = tmp_path / "mark_tools.py", tmp_path / "marks"
    tools.write_text(MARK_TOOLS)
    call = [
        sys.executable,
        "-m",
        "harness_one",
        "--tools",
        str(tools),
        "call",
        "mark",
        "--args",
        json.dumps({"path": str(marks)}),
    ]
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *call], capture_output=True, timeout=120, check=False)
    assert done.returncode == 70, done.stderr
    assert done.stderr.decode().splitlines() == ["harness-one call: cannot write the answer: stdout is closed"]
    assert not marks.exists()  # nothing ran whose answer could not be given


def test_call_whose_reader_is_gone_says_so_and_exits_70(tmp_path: Path) -> None:
    tools, marks = tmp_path / "mark_tools.py", tmp_path / "marks"
    tools.write_text(MARK_TOOLS)
    read, write = os.pipe()
    os.close(read)  # stdout is a pipe nobody reads: the answer fails with EPIPE
    try:
        done = harness("--tools", str(tools), "call", "mark", "--args", json.dumps({"path": str(marks)}), stdout=write)
    finally:
        os.close(write)
    assert done.returncode == 70
    err = done.stderr.decode().splitlines()
    assert err == ["harness-one call: cannot write the answer: BrokenPipeError: [Errno 32] Broken pipe"], err
    assert marks.read_text() == "ran\n"


def test_run_with_stdout_closed_exits_70() -> None:
    run = [sys.executable, "-m", "harness_one", "run"]
    line = b'{"id": 1, "name": "calculate", "arguments": {"expression": "1"}}\n'
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *run], input=line, capture_output=True, timeout=120, check=False)
    assert done.returncode == 70 and done.stderr.decode().splitlines() == [
        "harness-one run: cannot write answers: stdout is closed"
    ]


# --------------------------------------------------------------------------- doctor


@pytest.mark.parametrize("form", ["config", "option", "env"])
def test_doctor_masks_secret_plugin_options(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    args: list[str] = []
    if form == "config":
        (tmp_path / "harness-one.toml").write_text(f'[plugins.logging]\nsecret_values = ["{SECRET}"]\nlog_arguments = true\n')
    elif form == "option":
        args = ["-O", f'logging.secret_values=["{SECRET}"]', "-O", "logging.log_arguments=true"]
    else:
        monkeypatch.setenv("HARNESS_ONE_PLUGIN_LOGGING", json.dumps({"secret_values": [SECRET], "log_arguments": True}))
    text = runner.invoke(main, [*args, "doctor"])
    assert text.exit_code == 0, text.output
    assert SECRET not in text.output and "HUNTER2" not in text.output
    [line] = [line for line in text.output.splitlines() if line.strip().startswith("logging ")]
    assert line.endswith('{"secret_values": "[REDACTED]", "log_arguments": true}'), line  # the name shown, the value masked
    data = runner.invoke(main, [*args, "doctor", "--json"])
    assert "HUNTER2" not in data.output
    [logging] = [p for p in json.loads(data.output)["plugins"] if p["name"] == "logging"]
    assert logging["options"] == {"secret_values": "[REDACTED]", "log_arguments": True}
