"""Review 23 of the command line and its configuration: a broken stderr keeps the command's outcome, the
approval hint masks a secret ``-O`` value, a foreign ``./harness-one.toml`` is refused, a deep or BOM-led
TOML file is one ``Error:`` line, an MCP server that never answers leaves no stray traceback, ``make demo``
ignores the caller's environment, a boolean request id is refused, a blank state URL is refused, and a bad
``--idempotency-key`` is a usage error."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one._cli import main
from harness_one._config import ConfigError, load_settings
from harness_one._requests import BadRequest, parse_line
from harness_one._stdout import _GuardedStderr, guard_stderr

ROOT = Path(__file__).resolve().parent.parent

SIDE_EFFECT_TOOLS = '''
from harness_one import define_tool


@define_tool(registry=None)
def pay(amount: int, log: str) -> str:
    """Pays, then fails."""
    with open(log, "a") as f:
        f.write(f"paid {amount}\\n")
    raise RuntimeError("receipt printer jammed")


@define_tool(registry=None, options={"requires_approval": True})
def transfer(to: str, amount: int) -> str:
    """Moves money."""
    return "done"
'''


@pytest.fixture
def tools(tmp_path: Path) -> str:
    path = tmp_path / "review23_tools.py"
    path.write_text(SIDE_EFFECT_TOOLS, encoding="utf-8")
    return str(path)


def invoke(runner: CliRunner, *args: str, **options: Any) -> Any:
    return runner.invoke(main, list(args), catch_exceptions=False, prog_name="harness-one", **options)


def harness(*args: str, stderr: Any = subprocess.PIPE, env: dict[str, str] | None = None, **options: Any) -> Any:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_ONE_") or k == "HARNESS_ONE_CACHE_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "harness_one", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
        **options,
    )


def broken_pipe() -> int:
    """The write end of a pipe whose reader is gone (a dead log shipper): a write to it fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    return write


# --------------------------------------------------------------------------- 1. a broken stderr


@pytest.mark.parametrize(
    ("args", "code", "answered"),
    [
        (["call", "pay", "--args", "{}"], 7, True),  # the arguments filled in below
        (["call", "nope"], 3, True),
        (["export", "--format", "gemini"], 0, True),  # notes on stderr after the answer
        (["--config", "/nonexistent/h.toml", "list"], 2, False),
    ],
    ids=["tool_failed", "unknown_tool", "export_notes", "config_error"],
)
def test_a_broken_stderr_keeps_the_answer_and_the_exit_code(
    tmp_path: Path, tools: str, args: list[str], code: int, answered: bool
) -> None:
    """The error text went to stderr before the answer: with stderr's reader gone the write raised EPIPE, click
    exited 1 ("could not start") and the answer of a tool that had run was never written, so a script ran it again."""
    log = tmp_path / "payments.log"
    if args[:2] == ["call", "pay"]:
        args = ["call", "pay", "--args", json.dumps({"amount": 5, "log": str(log)})]
    err = broken_pipe()
    try:
        done = harness("--tools", tools, "--state", "memory:", *args, stderr=err)
    finally:
        os.close(err)
    assert done.returncode == code
    if answered:
        assert done.stdout.strip()
        json.loads(done.stdout)  # the whole answer, as JSON
    else:
        assert done.stdout == b""
    if args[:2] == ["call", "pay"]:
        assert json.loads(done.stdout)["error"]["type"] == "ToolExecutionError"
        assert log.read_text() == "paid 5\n"  # run once, its outcome reported


def test_run_with_a_broken_stderr_answers_and_exits_0(tmp_path: Path) -> None:
    """The summary (and the info logs) on a broken stderr made ``run`` exit 1 after answering every line."""
    err = broken_pipe()
    try:
        done = harness(
            "--log-level",
            "info",
            "--state",
            "memory:",
            "run",
            input=b'{"id": 1, "name": "calculate", "arguments": {"expression": "1+1"}}\n{"id": 2, "name": "nope"}\n',
            stderr=err,
        )
    finally:
        os.close(err)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert (done.returncode, [a["id"] for a in answers], answers[0]["result"]["result"]) == (0, [1, 2], 2)


def test_call_writes_its_answer_before_the_error_text(tmp_path: Path, tools: str) -> None:
    """The answer is the outcome of a tool that ran: it goes out before anything goes to stderr."""
    log = tmp_path / "payments.log"
    done = harness(
        "--tools", tools, "--state", "memory:", "call", "pay", "--args", json.dumps({"amount": 5, "log": str(log)}),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    text = done.stdout.decode()
    assert done.returncode == 7
    assert text.index('"type": "ToolExecutionError"') < text.index("receipt printer jammed\n")


CHILD_TOOLS = '''
import os
import subprocess
import sys

from harness_one import define_tool


@define_tool(registry=None)
def child(wait: bool = False) -> str:
    """Runs a command that prints (as git, pip, make do), to stdout and to stderr."""
    if wait:  # until the test has closed stderr's reader: then a write finds it broken
        with open(os.environ["REVIEW23_GO"]) as go:
            go.read()
        print("first words", file=sys.stderr, flush=True)
    out = subprocess.run(["sh", "-c", "echo out; echo err >&2"], check=False)
    return f"child exit {out.returncode}"
'''


@pytest.mark.parametrize("command", ["call", "run"])
def test_a_child_process_of_a_tool_is_not_killed_by_a_stderr_broken_from_the_start(tmp_path: Path, command: str) -> None:
    """fd 2 (and fd 1, its copy while the answers have their own) still went to the broken pipe until a write of
    the CLI's failed: a child process writing to either was killed by SIGPIPE (exit -13), not so with 2>&-."""
    path = tmp_path / "child_tools.py"
    path.write_text(CHILD_TOOLS, encoding="utf-8")
    err = broken_pipe()
    try:
        if command == "call":
            result = harness("--state", "memory:", "--tools", str(path), "call", "child", stderr=err)
            assert result.returncode == 0 and json.loads(result.stdout)["result"] == "child exit 0"
        else:
            line = b'{"id": 1, "name": "child", "arguments": {}}\n'
            result = harness("--state", "memory:", "--tools", str(path), "run", stderr=err, input=line)
            assert result.returncode == 0 and json.loads(result.stdout)["result"] == "child exit 0"
    finally:
        os.close(err)


def test_the_guarded_stderr_drops_what_follows_a_broken_pipe() -> None:
    """Once a write fails, what follows for stderr goes to the null device; the command never sees the failure."""
    err = broken_pipe()
    stream = io.TextIOWrapper(io.FileIO(err, "w", closefd=True), encoding="utf-8", line_buffering=True)
    guarded = _GuardedStderr(stream)
    assert guarded.write("first line\n") == len("first line\n")
    assert guarded.broken
    guarded.write("second line\n")
    guarded.writelines(["third\n", "fourth\n"])
    guarded.flush()
    assert guarded.encoding == "utf-8" and not guarded.closed and guarded.name == os.devnull  # the null device's
    with contextlib.suppress(OSError):
        stream.close()


def test_guard_stderr_leaves_a_closed_stderr_and_gives_the_old_one_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", None)
    with guard_stderr():
        assert sys.stderr is None  # click drops what goes to a closed stderr
    kept = io.StringIO()
    monkeypatch.setattr(sys, "stderr", kept)
    with guard_stderr():
        assert isinstance(sys.stderr, _GuardedStderr)
        print("noted", file=sys.stderr)
    assert sys.stderr is kept and kept.getvalue() == "noted\n"


# --------------------------------------------------------------------------- 2. the approval hint's -O values


def test_the_approval_hint_masks_a_secret_plugin_option_value(runner: CliRunner, tools: str) -> None:
    """``-O 'logging.secret_values=["sk-..."]'`` was repeated in clear in the hint on stderr: the value is masked
    as ``doctor`` masks it, and the hint says a secret was masked in its options."""
    result = invoke(
        runner,
        "--tools",
        tools,
        "-O",
        'logging.secret_values=["sk-live-TOPSECRET"]',
        "-O",
        "rate_limit.max_wait=2",
        "--state",
        "memory:",
        "call",
        "transfer",
        "--args",
        '{"to": "bo", "amount": 5}',
    )
    assert result.exit_code == 8
    assert "TOPSECRET" not in result.stderr and "TOPSECRET" not in result.stdout
    assert (
        f"give `harness-one --tools {tools} -O 'logging.secret_values=[REDACTED]' -O rate_limit.max_wait=2 "
        "--state memory: run` (put back the secrets masked in its options)"
    ) in result.stderr


# --------------------------------------------------------------------------- 3. a foreign ./harness-one.toml


def _planted(directory: Path) -> Path:
    """A ``harness-one.toml`` naming a tools file that leaves a mark when imported."""
    (directory / "t.py").write_text(f"open({str(directory / 'ran.txt')!r}, 'w').write('ran')\n")
    config = directory / "harness-one.toml"
    config.write_text('tools = ["t.py"]\n')
    return config


@pytest.mark.parametrize(
    ("owner", "group", "mode", "why"),
    [
        (None, None, 0o666, "any user may write it"),
        (65534, None, 0o644, "it is owned by another user (uid 65534), not you (uid 0)"),
        (None, 65534, 0o664, "the users of its group (gid 65534) may write it"),
    ],
    ids=["world_writable", "other_owner", "shared_group_writable"],
)
def test_a_foreign_config_file_in_the_current_directory_is_refused(
    runner: CliRunner, tmp_path: Path, owner: int | None, group: int | None, mode: int, why: str
) -> None:
    """Any command in a directory holding a ``harness-one.toml`` ran the code it names, whoever wrote the file."""
    if (owner is not None or group is not None) and os.getuid() != 0:
        pytest.skip("chown needs root")
    config = _planted(tmp_path)
    os.chown(config, -1 if owner is None else owner, -1 if group is None else group)
    config.chmod(mode)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value) == (
        f"{config}: not read: this configuration file was found in the current directory and {why}, and its 'tools' "
        "and [mcp.servers] would run as you. If you trust it, name it: --config harness-one.toml (or "
        "HARNESS_ONE_CONFIG); else run harness-one in another directory"
    )
    result = invoke(runner, "doctor")
    assert result.exit_code == 2 and result.stderr == f"Error: {refused.value}\n"
    assert not (tmp_path / "ran.txt").exists()
    named = invoke(runner, "--config", "harness-one.toml", "doctor")  # named, it is read
    assert (tmp_path / "ran.txt").read_text() == "ran"
    assert named.exit_code == 1  # (the file defines no tool: a load failure doctor reports)


def test_the_users_own_config_file_is_read_and_named_ones_are_not_checked(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "harness-one.toml"
    config.write_text('[logging]\nlevel = "info"\n')
    config.chmod(0o644)
    assert load_settings().log_level == "info"
    config.chmod(0o666)
    monkeypatch.setenv("HARNESS_ONE_CONFIG", str(config))
    assert load_settings().log_level == "info"


# --------------------------------------------------------------------------- 4. and 9. TOML that does not read


def test_a_config_file_nested_too_deeply_is_one_error_line(tmp_path: Path) -> None:
    """tomllib's RecursionError escaped: a 3000-line traceback and exit 1."""
    deep = tmp_path / "deep.toml"
    deep.write_text("tools = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(str(deep))
    assert str(refused.value) == f"{deep}: invalid TOML: nested too deeply"
    done = harness("--config", str(deep), "list")
    assert (done.returncode, done.stdout, done.stderr.decode()) == (2, b"", f"Error: {refused.value}\n")


def test_a_config_file_with_a_byte_order_mark_says_so(tmp_path: Path) -> None:
    """It was "Invalid statement (at line 1, column 1)"; ``--args`` and ``run`` lines name the mark."""
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b'\xef\xbb\xbf[logging]\nlevel = "info"\n')
    with pytest.raises(ConfigError) as refused:
        load_settings(str(bom))
    assert str(refused.value) == (
        f"{bom}: invalid TOML: it starts with a UTF-8 byte-order mark: save the file as UTF-8 without one"
    )


# --------------------------------------------------------------------------- 5. an MCP server that never answers


def test_a_connect_timeout_leaves_no_unretrieved_future(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection's future failed after the timeout had sent its waiter away: asyncio logged "Future exception
    was never retrieved" and a traceback after the command's Error: line."""
    import mcp.client.stdio as sdk_stdio

    from harness_one import ToolRegistry
    from harness_one.mcp import McpConnectionError, McpSpec, _client, import_tools

    monkeypatch.setattr(sdk_stdio, "PROCESS_TERMINATION_TIMEOUT", 0.3)  # the SDK's grace after stdin closes
    pid_file = tmp_path / "server.pid"
    hanging = McpSpec(name="raw", command=("sh", "-c", f"echo $$ > {pid_file}; exec sleep 100"))  # never answers
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(McpConnectionError) as late:
            import_tools(ToolRegistry(autoload=False), hanging, connect_timeout=0.5)
        assert str(late.value) == "MCP server 'raw' did not answer within 0.5 s."
        for _ in range(400):  # the server's stop, after which the connection's future fails
            if pid_file.exists() and not _client._closing:
                break
            time.sleep(0.025)
        del late  # its traceback holds the connection's frames, and so its future
        gc.collect()  # the failed future goes: unretrieved, asyncio logs it
    assert not _client._closing
    assert [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()] == []


# --------------------------------------------------------------------------- 6. make demo


def test_the_demo_ignores_the_callers_harness_one_variables(tmp_path: Path) -> None:
    """``HARNESS_ONE_REDIS_URL`` won over the demo's ``HARNESS_ONE_STATE`` (every keyed call refused), and a
    ``HARNESS_ONE_CONFIG`` or ``HARNESS_ONE_PLUGINS`` of the shell applied too."""
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns(".demo", "__pycache__"))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HARNESS_ONE_REDIS_URL": "redis://127.0.0.1:1/0",
        "HARNESS_ONE_CONFIG": str(tmp_path / "missing.toml"),
        "HARNESS_ONE_PLUGINS": "validation",
    }
    done = subprocess.run(
        ["sh", str(examples / "run-demo.sh")], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "[20] calculate -> ok (not run: an earlier outcome): " in done.stdout  # the idempotency replay, on SQLite
    assert "[13] random_number -> RateLimitExceeded" in done.stdout  # every plugin, not the allow-list's one
    assert done.stderr.splitlines()[-1].startswith("harness-one run: 20 requests, 11 ok, 9 errors")


# --------------------------------------------------------------------------- 7. a boolean request id


def test_a_boolean_request_id_is_refused() -> None:
    """``{"id": true}`` was held as call id "True", which no decision line (``{"approve": true}`` is refused) names."""
    with pytest.raises(BadRequest) as refused:
        parse_line(b'{"id": true, "name": "calculate", "arguments": {}}')
    assert (str(refused.value), refused.value.request_id) == (
        "the request's id must be a string or a number, not a boolean",
        None,
    )


def test_run_answers_a_boolean_id_as_invalid_without_running_the_call(runner: CliRunner, tools: str) -> None:
    lines = '{"id": false, "name": "transfer", "arguments": {"to": "bo", "amount": 5}}\n'
    result = invoke(runner, "--tools", tools, "--state", "memory:", "run", input=lines)
    answer = json.loads(result.stdout)
    assert (result.exit_code, answer["id"], answer["error"]["message"]) == (
        0,
        None,
        "line 1: the request's id must be a string or a number, not a boolean",
    )


# --------------------------------------------------------------------------- 8. a blank state URL


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--state", " "], {}, "Invalid value for --state: it is empty"),
        (["--state", ""], {}, "Invalid value for --state: it is empty"),
        ([], {"HARNESS_ONE_STATE": " "}, "HARNESS_ONE_STATE is empty"),
        ([], {"HARNESS_ONE_REDIS_URL": "\t"}, "HARNESS_ONE_REDIS_URL is empty"),
    ],
    ids=["flag_spaces", "flag_empty", "env_state", "env_redis"],
)
def test_a_blank_state_url_is_refused(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], message: str
) -> None:
    """A state of " " made a SQLite file named " " (and its -wal, -shm) in the current directory; ``--state ''``
    was the default without a word. The file's ``url = " "`` was refused already."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = invoke(runner, *args, "call", "calculate", "--args", '{"expression": "1"}', "--idempotency-key", "k1")
    assert result.exit_code == 2 and result.stdout == ""
    unset = "leave the option out" if args else "unset it"
    assert (
        f"{message}: give a state URL ('memory:', a SQLite file, 'redis://host:6379/0'), or {unset} for the default SQLite file\n"
    ) in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_empty_state_variable_is_still_unset(runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HARNESS_ONE_STATE", "")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert load_settings().state.endswith("/xdg/harness-one/state.sqlite3")


@pytest.mark.parametrize("name", ["HARNESS_ONE_STATE", "HARNESS_ONE_REDIS_URL"])
def test_the_default_registry_refuses_a_blank_state_variable_as_a_bad_state_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    """Only the CLI refused it: ``ToolRegistry.default()`` made a SQLite file named "  " in the current directory."""
    from harness_one import ToolRegistry

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, "  ")
    old = ToolRegistry.set_default(None)
    try:
        with pytest.raises(ValueError, match=rf"^{name} is empty: give a state URL \('memory:', a SQLite file"):
            ToolRegistry.default()
    finally:
        ToolRegistry.set_default(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_given_state_wins_over_a_blank_state_variable_for_the_default_registry_too(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--state memory:`` with ``HARNESS_ONE_STATE="  "`` was a usage error: the variable was read anyway (and the
    default registry a tool file's ``@define_tool`` builds read it too)."""
    path = tmp_path / "default_tools.py"
    path.write_text(
        'from harness_one import define_tool\n\n\n@define_tool\ndef ping() -> str:\n    """Ping."""\n    return "pong"\n'
    )
    monkeypatch.chdir(tmp_path)
    result = harness("--state", "memory:", "--tools", str(path), "call", "ping", env={"HARNESS_ONE_STATE": "  "}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["result"] == "pong"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["default_tools.py"]
    monkeypatch.setenv("HARNESS_ONE_STATE", "  ")
    assert load_settings(state_given=True).state != "  "  # the variable is not read at all


# --------------------------------------------------------------------------- 10. --idempotency-key


@pytest.mark.parametrize("key", ["", "k" * 256, "a\nb"], ids=["empty", "too_long", "unprintable"])
def test_a_bad_idempotency_key_is_a_usage_error(runner: CliRunner, key: str) -> None:
    """It was the tool's invalid arguments (exit 4, "Fix the arguments and call 'calculate' again")."""
    result = invoke(runner, "--state", "memory:", "call", "calculate", "--args", '{"expression": "1"}', "--idempotency-key", key)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith("Error: Invalid value for --idempotency-key: expected 1-255 printable characters\n")
