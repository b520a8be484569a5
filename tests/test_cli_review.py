"""What a new user's review of the command line and the examples found: ``run --strict`` and
``call --strict`` read a strict model's nulls, ``call`` says how to pass arguments, the run
summary counts in words, and the examples say how to run them and fail when they should."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one import ToolRegistry
from harness_one._cli import EXIT_CODES, main
from harness_one.state import State

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
#: The line the review piped into ``run``: what a model given ``export --strict`` sends for current_time.
STRICT_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "current_time", "arguments": json.dumps({"timezone": None, "format": None})},
}


@pytest.fixture(autouse=True)
def _logging_reset() -> Any:
    import structlog

    yield
    structlog.reset_defaults()  # the CLI configures structlog; later tests expect a library default


def invoke(runner: CliRunner, *args: str, input: str | None = None) -> Any:
    return runner.invoke(main, list(args), input=input, catch_exceptions=False, prog_name="harness-one")


def answers(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines()]


# --------------------------------------------------------------------------- --strict


def test_run_strict_takes_back_what_the_strict_export_asked_for(runner: CliRunner) -> None:
    """Every parameter the strict export made nullable and required, sent as null, is read as absent."""
    exported = json.loads(invoke(runner, "export", "--strict", "--name", "current_time").stdout)[0]["function"]
    parameters = exported["parameters"]
    made_nullable = [name for name, schema in parameters["properties"].items() if "null" in schema["type"]]
    assert exported["strict"] is True and made_nullable == parameters["required"] == ["timezone", "format"]
    nulls = json.dumps(dict.fromkeys(made_nullable))
    lines = [
        STRICT_CALL,
        {"type": "function_call", "call_id": "fc_2", "name": "current_time", "arguments": nulls},  # Responses
        {"id": 3, "name": "current_time", "arguments": json.loads(nulls)},  # a plain request
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    strict = invoke(runner, "run", "--strict", input=text)
    assert strict.exit_code == 0
    got = answers(strict.stdout)
    assert [a["id"] for a in got] == ["call_1", "fc_2", 3] and all(a["ok"] for a in got), got
    assert all(a["result"]["timezone"] == "UTC" for a in got)  # the default applied
    assert "3 requests, 3 ok, 0 errors" in strict.stderr
    plain = answers(invoke(runner, "run", input=text).stdout)  # without --strict a null is a value
    assert [a["error"]["type"] for a in plain] == ["ToolArgumentError"] * 3


def test_run_strict_keeps_the_nulls_strict_mode_does_not_send(runner: CliRunner) -> None:
    """A null for a required parameter is an error still; Anthropic calls (no strict export) keep their nulls."""
    lines = [
        {"id": "r", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": null}'}},
        {"type": "tool_use", "id": "a", "name": "current_time", "input": {"timezone": None}},
    ]
    done = invoke(runner, "run", "--strict", input="".join(json.dumps(line) + "\n" for line in lines))
    got = answers(done.stdout)
    assert [(a["id"], a["ok"]) for a in got] == [("r", False), ("a", False)]
    assert [a["error"]["problems"][0]["path"] for a in got] == ["$.expression", "$.timezone"]


def test_call_strict_reads_the_arguments_as_the_strict_export_asked(runner: CliRunner) -> None:
    nulls = STRICT_CALL["function"]["arguments"]  # type: ignore[index]
    done = invoke(runner, "call", "current_time", "--args", nulls, "--strict")
    assert done.exit_code == 0 and json.loads(done.stdout)["result"]["timezone"] == "UTC"
    assert invoke(runner, "call", "current_time", "--args", nulls).exit_code == EXIT_CODES["invalid_arguments"]


# --------------------------------------------------------------------------- call's usage and output


def test_call_with_the_arguments_as_a_word_says_to_use_args(runner: CliRunner) -> None:
    done = invoke(runner, "call", "calculate", '{"expression":"1+1"}')
    assert done.exit_code == EXIT_CODES["usage"] and done.stdout == ""
    assert "Usage: harness-one call [OPTIONS] NAME" in done.stderr
    error = done.stderr.splitlines()[-1]
    assert error.startswith('Error: unexpected extra argument (\'{"expression":"1+1"}\')'), error
    suggested = error.split("e.g. ", 1)[1]
    assert suggested == 'harness-one call calculate --args \'{"expression":"1+1"}\''
    command = shlex.split(suggested)[1:]  # the suggestion works as written
    assert json.loads(invoke(runner, *command).stdout)["result"]["result"] == 2
    two = invoke(runner, "call", "calculate", "1+1", "x")
    assert two.exit_code == EXIT_CODES["usage"]
    assert "unexpected extra arguments (1+1 x): pass the tool's arguments with --args" in two.stderr
    assert "harness-one call calculate --args '{...}'" in two.stderr


def test_call_prints_the_models_text_on_stderr_only_for_an_error(runner: CliRunner) -> None:
    ok = invoke(runner, "call", "calculate", "--args", '{"expression": "1+1"}')
    assert ok.exit_code == 0 and json.loads(ok.stdout)["result"]["result"] == 2 and ok.stderr == ""
    bad = invoke(runner, "call", "calculate", "--args", '{"expression": "1+"}')
    assert bad.exit_code == EXIT_CODES["invalid_arguments"]
    assert json.loads(bad.stdout)["error"]["kind"] == "invalid_arguments"
    assert bad.stderr.startswith("Error: Invalid arguments for tool 'calculate' (1 problem):\n- $.expression: ")


# --------------------------------------------------------------------------- run's summary


@pytest.mark.parametrize(
    ("lines", "summary"),
    [
        (['{"id": 1, "name": "nope"}'], "harness-one run: 1 request, 0 ok, 1 error (ToolNotFound: 1)"),
        (['{"id": 1, "name": "current_time"}'], "harness-one run: 1 request, 1 ok, 0 errors"),
        (['{"id": 1, "name": "nope"}', '{"id": 2, "name": "nope"}'], "harness-one run: 2 requests, 0 ok, 2 errors"),
        ([], "harness-one run: 0 requests, 0 ok, 0 errors"),
    ],
)
def test_the_run_summary_counts_in_words(runner: CliRunner, lines: list[str], summary: str) -> None:
    done = invoke(runner, "run", input="".join(line + "\n" for line in lines))
    assert done.exit_code == 0 and done.stderr.splitlines()[-1].startswith(summary), done.stderr


# --------------------------------------------------------------------------- the examples


def test_make_demo_db_without_a_path_prints_its_usage(tmp_path: Path) -> None:
    script = str(EXAMPLES / "make_demo_db.py")
    bare = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=60, check=False)
    assert bare.returncode == 2 and "Traceback" not in bare.stderr
    assert bare.stderr.startswith("usage: make_demo_db.py [-h] PATH\n") and "required: PATH" in bare.stderr
    made = tmp_path / "demo" / "shop.sqlite3"
    subprocess.run([sys.executable, script, str(made)], timeout=60, check=True)
    import sqlite3

    with sqlite3.connect(made) as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (3,)


def test_the_quickstart_says_how_to_run_it() -> None:
    """The command its docstring gives runs the quickstart (``make demo`` runs the scripted session instead)."""
    doc = (EXAMPLES / "quickstart.py").read_text()
    found = re.search(r"Run with ``([^`]+)``", doc)
    assert found is not None
    words = shlex.split(found[1])
    assert words == [".venv/bin/python", "examples/quickstart.py"]
    assert "quickstart" not in (EXAMPLES / "run-demo.sh").read_text()
    done = subprocess.run([sys.executable, *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.startswith("Tools the model sees:\n")


def redis_workers(url: str, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """``examples/redis_workers.py URL --seconds 1``, its output captured."""
    command = [sys.executable, str(EXAMPLES / "redis_workers.py"), url, "--seconds", "1"]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def test_the_redis_workers_example_fails_when_redis_is_unavailable() -> None:
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    done = redis_workers(url, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines()[-1].startswith(f"Redis at {url} is unavailable: "), done.stderr


#: A ``sitecustomize`` that makes every spawned worker process start 2.5 s late, as the review's
#: loaded machine did (the example used to start its clock 2 s after starting the workers).
SLOW_START = """
import sys, time
if "--multiprocessing-fork" in sys.argv:
    time.sleep(2.5)
"""


def test_the_redis_workers_example_waits_for_workers_that_start_late(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sitecustomize.py").write_text(SLOW_START)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    done = redis_workers(redis_url, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"total (\d+) \(one shared limit: 10 \+ 20/s x ([\d.]+) s = (\d+) \+-1\)", done.stdout)
    assert found is not None, done.stdout
    total, window, expected = int(found[1]), float(found[2]), int(found[3])
    assert window > 0.75, done.stdout  # the clock started once the workers were ready: about --seconds
    assert expected == 10 + int(20 * window) and abs(total - expected) <= 1, done.stdout


def test_the_redis_workers_example_fails_when_the_limit_does_not_hold(redis_url: str) -> None:
    """Another client of the example's bucket takes its burst before the run and competes during it:
    the example admits far fewer than 10 + 20/s over its window, and says so."""
    other = ToolRegistry(state=State(redis_url, prefix="example:"), autoload=False)  # the example's keys
    other.add(lambda: "ok", name="search", rate_limit={"rate": 20.0, "burst": 10})
    drained = threading.Event()
    stop = threading.Event()

    def compete() -> None:
        while not stop.is_set():
            if not other.try_call("search").ok:
                drained.set()  # the burst is gone; from here on the bucket is shared

    thread = threading.Thread(target=compete, daemon=True)
    thread.start()
    try:
        assert drained.wait(30)
        done = redis_workers(redis_url, timeout=300)
    finally:
        stop.set()
        thread.join(30)
        other.state.close()
    assert done.returncode == 1, done.stdout + done.stderr
    found = re.search(r"total (\d+) \(one shared limit: 10 \+ 20/s x ([\d.]+) s = (\d+) \+-1\)", done.stdout)
    assert found is not None, done.stdout
    total, expected = int(found[1]), int(found[3])
    assert total < expected - 1
    assert done.stderr.splitlines()[-1].startswith(f"the shared limit did not hold: {total} calls admitted in "), done.stderr


def test_a_tools_file_that_fails_on_its_dsn_is_reported_masked(runner: Any, tmp_path: Path) -> None:
    """``--tools`` showed an import's exception as it was: a database password on the terminal and in doctor."""
    tools = tmp_path / "db_tools.py"
    tools.write_text("raise RuntimeError('cannot connect to postgres://app:hunter2@db/x; password=hunter2')\n")
    result = runner.invoke(main, ["--tools", str(tools), "list"])
    assert result.exit_code == 2 and "hunter2" not in result.output
    assert "postgres://[REDACTED]@db/x" in result.output and "RuntimeError" in result.output


def test_a_plugin_failing_to_prepare_a_tools_calls_is_reported_masked() -> None:
    from harness_one import PluginError, applies_to, hookimpl

    class Flaky:
        @hookimpl
        @applies_to(lambda plugin, tool: plugin.broken())
        def harness_pre_call(self, call: Any) -> None:
            return None

        def broken(self) -> bool:
            raise ConnectionError("redis://:hunter2@cache:6379 refused")

    reg = ToolRegistry(plugins={"flaky": Flaky()}, autoload=False)
    reg.add(lambda: 1, name="one")
    error = reg.try_call("one").error
    assert isinstance(error, PluginError) and "hunter2" not in error.message and "redis://[REDACTED]@cache" in error.message
