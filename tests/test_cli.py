"""The harness-one command line: listing, calling with exit codes, export, doctor, and the agent loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one._cli import EXIT_CODES, main, parse_request

ROOT = Path(__file__).resolve().parents[1]
DEMO_TOOLS = str(ROOT / "examples" / "demo_tools.py")
BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def _logging_reset() -> Any:
    import structlog

    yield
    structlog.reset_defaults()  # the CLI configures structlog, as applications do; later tests expect a library default


def invoke(runner: CliRunner, *args: str, input: str | None = None) -> Any:
    return runner.invoke(main, list(args), input=input, catch_exceptions=False)


def test_list_table_and_json(runner: CliRunner) -> None:
    table = invoke(runner, "list")
    assert table.exit_code == 0
    assert table.output.splitlines()[0].split() == ["NAME", "SOURCE", "RATE_LIMIT", "TIMEOUT", "IDEMPOTENT", "DESCRIPTION"]
    assert any(line.startswith("calculate") and "harness-one-calculate" in line for line in table.output.splitlines())
    assert any("5/s burst 5" in line for line in table.output.splitlines() if line.startswith("random_number"))
    rows = json.loads(invoke(runner, "list", "--json").output)
    by_name = {r["name"]: r for r in rows}
    assert by_name["sql_query"]["idempotent"] is True and by_name["random_number"]["rate_limit"] == {"rate": 5, "burst": 5}
    assert by_name["calculate"]["timeout"] is None or isinstance(by_name["calculate"]["timeout"], (int, float))


def test_describe(runner: CliRunner) -> None:
    info = json.loads(invoke(runner, "describe", "sql_query").output)
    assert info["parameters"]["required"] == ["sql"] and info["policies"]["idempotent"] is True
    assert info["source"] == "harness-one-sql-query" and info["hints"]["read_only"] is True
    assert invoke(runner, "describe", "nope").exit_code == EXIT_CODES["not_found"]


@pytest.mark.parametrize(
    ("args", "code", "error_type"),
    [
        (["call", "calculate", "--args", '{"expression": "6 * 7"}'], 0, None),
        (["call", "nope"], 3, "ToolNotFound"),
        (["call", "calculate", "--args", '{"expression": 1}'], 4, "ToolArgumentError"),
        (["--tools", DEMO_TOOLS, "call", "slow_report", "--args", '{"seconds": 3}'], 6, "ToolTimeout"),
        (["call", "sql_query", "--args", '{"sql": "SELECT 1"}'], 8, "ToolError"),
    ],
)
def test_call_exit_codes(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, args: list[str], code: int, error_type: str | None
) -> None:
    monkeypatch.delenv("HARNESS_ONE_SQL_DB", raising=False)
    result = runner.invoke(main, args)
    assert result.exit_code == code, result.output
    answer = json.loads(result.stdout)
    if error_type is None:
        assert answer["ok"] and answer["result"]["result"] == 42
    else:
        assert answer["error"]["type"] == error_type


def test_call_rate_limited_and_tool_failed(runner: CliRunner, tmp_path: Path) -> None:
    tools = tmp_path / "my_tools.py"
    tools.write_text(
        "from harness_one import defineTool\n"
        "@defineTool(registry=None, rate_limit={'rate': 0.001, 'burst': 1})\n"
        "def once() -> int:\n    return 1\n"
        "@defineTool(registry=None)\n"
        "def broken() -> int:\n    raise RuntimeError('disk on fire')\n"
    )
    result = runner.invoke(main, ["--tools", str(tools), "call", "broken"])
    assert result.exit_code == EXIT_CODES["tool_failed"] and "disk on fire" in result.stdout
    # one process, one bucket: the rate limit shows within a single `run`
    lines = "\n".join(json.dumps({"id": i, "name": "once"}) for i in range(2))
    answers = [json.loads(x) for x in invoke(runner, "--tools", str(tools), "run", input=lines).stdout.splitlines()]
    assert answers[0]["ok"] and answers[1]["error"]["type"] == "RateLimitExceeded" and answers[1]["error"]["retry_after"] > 0


def test_export(runner: CliRunner) -> None:
    openai = {t["function"]["name"]: t for t in json.loads(invoke(runner, "export", "--format", "openai").output)}
    assert openai["calculate"]["type"] == "function" and openai["calculate"]["function"]["parameters"]["required"] == [
        "expression"
    ]
    anthropic = {t["name"]: t for t in json.loads(invoke(runner, "export", "--format", "anthropic").output)}
    assert anthropic["calculate"]["input_schema"]["type"] == "object"


def test_export_strict_auto_and_names(runner: CliRunner, tmp_path: Path) -> None:
    tools = tmp_path / "free_form.py"
    tools.write_text(
        "from harness_one import defineTool\n\n\n"
        "@defineTool(registry=None)\n"
        "def count_labels(labels: dict[str, int]) -> int:\n"
        '    """Count the labels."""\n'
        "    return len(labels)\n"
    )
    args = ["--tools", str(tools), "export", "--strict-auto", "--name", "count_labels", "--name", "calculate"]
    done = runner.invoke(main, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    exported = {t["function"]["name"]: t["function"] for t in json.loads(done.stdout)}
    assert list(exported) == ["count_labels", "calculate"]  # only the named tools, in that order
    assert exported["calculate"]["strict"] is True and not exported["count_labels"].get("strict")
    assert "count_labels: exported without strict mode: $.labels: a map of arbitrary keys" in done.stderr
    both = runner.invoke(main, ["export", "--strict", "--strict-auto"])
    assert both.exit_code == 2 and "--strict and --strict-auto exclude each other" in both.output


def test_doctor(runner: CliRunner, tmp_path: Path) -> None:
    report = json.loads(invoke(runner, "doctor", "--json").output)
    assert "harness-one-calculate" in report["tool_packages"] and report["failures"] == [] and report["conflicts"] == []
    assert report["hook_order"]["pre_call"][0] == "idempotency"
    bad = tmp_path / "bad_tools.py"
    bad.write_text("raise ImportError('needs frobnicate')\n")
    result = runner.invoke(main, ["--tools", str(bad), "doctor"])
    assert result.exit_code == 1 and "needs frobnicate" in result.output


def test_options_for_an_unknown_plugin_name_are_reported(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "harness-one.toml").write_text("[plugins.rate_limt]\nmax_wait = 2\n")
    result = runner.invoke(main, ["doctor"])
    assert result.exit_code == 1 and "did you mean 'rate_limit'?" in result.output, result.output
    (tmp_path / "harness-one.toml").write_text("[plugins]\nstrict = true\n")
    flag = runner.invoke(main, ["-O", "timeuot.default=1", "list"])
    assert flag.exit_code == 2 and "'timeuot'" in flag.output and "did you mean 'timeout'?" in flag.output, flag.output


def test_config_file_and_errors(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "harness-one.toml"
    config.write_text('[plugins]\nblock = ["rate_limit"]\n\n[plugins.timeout]\ndefault = 0.2\n')
    report = json.loads(invoke(runner, "doctor", "--json").output)  # ./harness-one.toml is picked up
    assert "rate_limit" not in [p["name"] for p in report["plugins"]] and report["config"].endswith("harness-one.toml")
    assert {p["name"]: p["options"] for p in report["plugins"]}["timeout"] == {"default": 0.2}
    config.write_text("[plugin]\nblock = 1\n")
    result = runner.invoke(main, ["list"])
    assert result.exit_code == 2 and "unknown section [plugin]" in result.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[plugins]\nallow = "validation"\n', "[plugins] allow must be a list of plugin names, not 'validation'"),
        ('[plugins]\nautoload = "no"\n', "[plugins] autoload must be true or false, not 'no'"),
        ("[plugins]\nstrict = 1\n", "[plugins] strict must be true or false, not 1"),
        ("[logging]\nlevel = 5\n", "[logging] level must be a string, not 5"),
        ("[state]\nurl = 5\n", "[state] url must be a string"),
        (b"\xff\xfe", "not UTF-8 text (byte 0xff at position 0)"),
    ],
    ids=["allow", "autoload", "strict", "level", "state url", "not utf-8"],
)
def test_a_configuration_value_of_the_wrong_type_is_a_usage_error(
    runner: CliRunner, tmp_path: Path, text: str | bytes, message: str
) -> None:
    config = tmp_path / "harness-one.toml"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    result = runner.invoke(main, ["list"])
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize("value", ["{bad", "[" * 5000])  # and nested deeper than the JSON decoder reads
def test_a_plugin_option_refused_by_its_plugin_is_a_usage_error(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_RATE_LIMIT", value)
    result = runner.invoke(main, ["list"])
    assert result.exit_code == 2 and "HARNESS_ONE_PLUGIN_RATE_LIMIT must be a JSON object" in result.output
    assert "state store" not in result.output


def test_a_deeply_nested_option_value_is_refused_by_its_plugin_in_a_short_message(runner: CliRunner) -> None:
    result = runner.invoke(main, ["-O", "timeout.default=" + "[" * 100_000, "doctor"])
    assert result.exit_code == 2, result.output  # a usage error, as for any value the plugin refuses
    assert "Plugin 'timeout' cannot be built with its options ['default']" in result.output
    assert "timeout default must be a positive number" in result.output and len(result.output) < 2600


def test_a_misspelt_plugin_option_is_a_usage_error_not_an_unlimited_run(runner: CliRunner, tmp_path: Path) -> None:
    """``defualt = {...}`` under ``[plugins.rate_limit]`` left the plugin out and every call unlimited (exit 0)."""
    (tmp_path / "harness-one.toml").write_text("[plugins.rate_limit]\ndefualt = { rate = 1, burst = 1 }\n")
    result = runner.invoke(main, ["call", "random_number", "--args", "{}"])
    assert result.exit_code == 2 and "did you mean 'default'?" in result.output, result.output


def test_an_option_of_a_plugin_with_a_dotted_name(runner: CliRunner, dists: Any) -> None:
    """``-O acme.audit.level=debug`` is option ``level`` of plugin ``acme.audit``, as ``[plugins."acme.audit"]``."""
    plugin = "class Audit:\n    def __init__(self, level='info'):\n        self.level = level\n"
    dists.make("acme-dotted", {"acme_dotted": plugin}, {"harness_one.plugins": {"acme.audit": "acme_dotted:Audit"}})
    result = runner.invoke(main, ["-O", "acme.audit.level=debug", "doctor", "--json"])
    assert result.exit_code == 0, result.output
    [audit] = [p for p in json.loads(result.stdout)["plugins"] if p["name"] == "acme.audit"]
    assert audit["options"] == {"level": "debug"}


def test_parse_request_shapes() -> None:
    assert parse_request('{"id": 1, "name": "t", "arguments": {"a": 1}}').arguments == {"a": 1}
    openai = parse_request('{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{\\"a\\": 1}"}}')
    assert (openai.id, openai.name, openai.arguments) == ("c1", "t", '{"a": 1}')
    anthropic = parse_request('{"type": "tool_use", "id": "tu1", "name": "t", "input": {"a": 2}}')
    assert (anthropic.id, anthropic.arguments) == ("tu1", {"a": 2})
    responses = parse_request('{"type": "function_call", "call_id": "fc1", "name": "t", "arguments": "{}"}')
    assert responses.id == "fc1"


def test_run_loop_answers_every_line(runner: CliRunner) -> None:
    lines = [
        '{"id": 1, "name": "calculate", "arguments": {"expression": "1 + 1"}}',
        "this is not json",
        "",
        '{"id": 3, "arguments": {}}',
        '{"id": 4, "type": "function", "function": {"name": "calculate", "arguments": "{\\"expression\\": "}}',
        '{"type": "tool_use", "id": "tu5", "name": "calculate", "input": {"expression": "2 ** 10"}}',
    ]
    result = invoke(runner, "run", input="\n".join(lines) + "\n")
    answers = [json.loads(x) for x in result.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, None, 3, 4, "tu5"]
    assert answers[0] == {"id": 1, "ok": True, "result": {"expression": "1 + 1", "result": 2}}
    assert answers[1]["error"]["type"] == "InvalidRequest" and "line 2" in answers[1]["error"]["message"]
    assert answers[2]["error"]["message"].endswith("the request has no tool 'name'")
    assert answers[3]["error"]["type"] == "ToolArgumentError" and "not valid JSON" in answers[3]["error"]["message"]
    assert answers[4]["result"]["result"] == 1024
    assert "5 requests, 2 ok, 3 errors (InvalidRequest: 2, ToolArgumentError: 1)" in result.stderr


def test_run_marks_an_answer_its_tool_did_not_run_for(runner: CliRunner) -> None:
    """The second call under an idempotency key replays the first outcome: its answer says ``"ran": false``."""
    line = '{"id": %d, "name": "calculate", "arguments": {"expression": "6 * 7"}, "idempotency_key": "k-%s"}'
    result = invoke(
        runner, "--state", "memory:", "run", input="\n".join([line % (1, "a"), line % (2, "a"), line % (3, "b")]) + "\n"
    )
    answers = [json.loads(x) for x in result.stdout.splitlines()]
    assert [a.get("ran") for a in answers] == [None, False, None]
    assert all(a["ok"] and a["result"]["result"] == 42 for a in answers)


def test_run_concurrently_keeps_ids(runner: CliRunner) -> None:
    lines = [json.dumps({"id": i, "name": "calculate", "arguments": {"expression": f"{i} * 2"}}) for i in range(40)]
    result = invoke(runner, "run", "--concurrency", "8", input="\n".join(lines) + "\n")
    answers = {a["id"]: a for a in map(json.loads, result.stdout.splitlines())}
    assert sorted(answers) == list(range(40))
    assert all(answers[i]["result"]["result"] == i * 2 for i in range(40))


def test_scripted_session_shows_every_outcome() -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("HARNESS_ONE_CONFIG", None)
    done = subprocess.run(
        ["sh", str(ROOT / "examples" / "run-demo.sh")], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    out = done.stdout
    assert "[1] current_time -> ok" in out
    assert "[toolu_3] sql_query -> ok" in out and "[call_2] calculate -> ok" in out
    assert "[4] current_time -> ToolArgumentError" in out and "$.timezone: expected string" in out
    assert "[7] fetch_url -> ToolArgumentError" in out and "169.254.169.254" in out
    assert "[13] random_number -> RateLimitExceeded (retry after" in out
    assert "[15] slow_report -> ToolTimeout" in out
    assert "[16] flaky_lookup -> ok (after 2 attempts)" in out
    assert "[19] calculate -> ok: " in out and "[20] calculate -> ok (not run: an earlier outcome): " in out  # demo-19's replay
    assert "InvalidRequest" in out and "Did you mean: 'calculate'?" in out
    assert "20 requests" in done.stderr


def test_help_imports_no_tools() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "harness_one", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "Usage: harness-one" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert not any(
        name.startswith(("harness_one_calculate", "harness_one_fetch_url", "httpx", "harness_one_plugins")) for name in imported
    )


def test_export_all_formats(runner: CliRunner, tmp_path: Path) -> None:
    for fmt in ("openai-responses", "gemini", "mcp"):
        tools = json.loads(invoke(runner, "export", "--format", fmt).stdout)
        assert {t["name"] for t in tools} >= {"calculate", "fetch_url"}
    strict = json.loads(invoke(runner, "export", "--format", "openai", "--strict").stdout)
    assert all(t["function"]["strict"] for t in strict)
    loose = tmp_path / "loose.py"
    loose.write_text(
        "from harness_one import defineTool\n@defineTool(registry=None)\ndef tags(counts: dict[str, int]) -> int:\n    return len(counts)\n"
    )
    result = runner.invoke(main, ["--tools", str(loose), "export", "--strict"])
    assert (
        result.exit_code == 1
        and "cannot be exported in strict mode" in result.output
        and "map of arbitrary keys" in result.output
    )


def test_unusable_state_store_is_a_clear_error(runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("HARNESS_ONE_STATE", str(blocker / "state.sqlite3"))
    result = runner.invoke(main, ["list"])
    assert result.exit_code == 1 and "cannot open the state store" in result.output


def test_a_state_file_that_is_not_a_database_is_a_clear_error(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The SQLite store opens its file at its first operation: the CLI's start-up check opens it, so a
    command says so at once rather than at its first keyed call."""
    spoiled = tmp_path / "state.sqlite3"
    spoiled.write_bytes(b"not a database " * 100)
    monkeypatch.setenv("HARNESS_ONE_STATE", str(spoiled))
    result = runner.invoke(main, ["list"])
    assert result.exit_code == 1 and "cannot open the state store" in result.output
    assert "file is not a database" in result.output


def test_doctor_reports_name_conflicts(runner: CliRunner, dists: Any) -> None:
    clash = "from harness_one import defineTool\n@defineTool(registry=None)\ndef calculate(expression: str) -> str:\n    return expression\n"
    dists.make("aa-shadow-calc", {"aa_shadow": clash}, {"harness_one.tools": {"calculate": "aa_shadow:calculate"}})
    result = runner.invoke(main, ["doctor"])
    assert result.exit_code == 1
    assert "tool 'calculate': kept harness-one-calculate, skipped aa-shadow-calc" in result.output


def test_log_format_follows_the_terminal_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    import structlog

    from harness_one._cli import configure_logging
    from harness_one._config import load_settings

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, looks_json in ((io.StringIO(), True), (Terminal(), False)):
        undo = configure_logging(None, "info", stream)
        undo()  # the root logger's handler and level, given back: structlog's part stays
        structlog.get_logger("harness_one.calls").info("tool_call", tool="t")
        line = stream.getvalue().strip()
        assert line.startswith("{") is looks_json and "tool_call" in line
    monkeypatch.setenv("HARNESS_ONE_LOG_FORMAT", "json")
    monkeypatch.setenv("HARNESS_ONE_LOG_LEVEL", "info")
    settings = load_settings(None)
    assert (settings.log_format, settings.log_level) == ("json", "info")


@pytest.mark.parametrize("spec", ["nosuchmodule_for_the_cli_test", "./broken_tools.py"])
def test_tools_that_fail_to_load_are_a_usage_error(runner: CliRunner, tmp_path: Path, spec: str) -> None:
    (tmp_path / "broken_tools.py").write_text("raise ImportError('needs frobnicate')\n")
    result = runner.invoke(main, ["--tools", spec, "list"])
    assert result.exit_code == 2, result.output
    assert ("needs frobnicate" if spec.endswith(".py") else "nosuchmodule_for_the_cli_test") in result.output


@pytest.mark.parametrize("flag", ["--args", "--context"])
def test_malformed_call_options_are_usage_errors_not_argument_errors(runner: CliRunner, flag: str) -> None:
    args = ["call", "calculate", "--args", '{"expression": "1"}']
    args += [flag, "{not json"] if flag == "--context" else []
    if flag == "--args":
        args[3] = "{not json"
    result = runner.invoke(main, args)
    assert result.exit_code == 2 and flag in result.output and "ToolArgumentError" not in result.output


def test_list_json_is_typed_data(runner: CliRunner) -> None:
    rows = {r["name"]: r for r in json.loads(invoke(runner, "list", "--json").output)}
    calc = rows["calculate"]
    assert isinstance(calc["read_only"], bool) and isinstance(calc["idempotent"], bool)
    assert all(isinstance(v, (str, int, float, bool, dict, list, type(None))) for v in calc.values())
    assert not any(v in ("-", "yes", "no") for row in rows.values() for v in row.values())


def test_the_list_table_wraps_descriptions_to_the_terminal(runner: CliRunner) -> None:
    wide = runner.invoke(main, ["list"], env={"COLUMNS": "400"}, catch_exceptions=False).output.splitlines()
    narrow = runner.invoke(main, ["list"], env={"COLUMNS": "100"}, catch_exceptions=False).output.splitlines()
    assert len(narrow) > len(wide)  # descriptions wrapped onto more lines, under their column
    longest = max(len(line) for line in wide)
    assert longest > 100 and all(len(line) <= max(100, len(narrow[0])) for line in narrow)
    indent = len(narrow[0]) - len("DESCRIPTION")
    assert any(line.startswith(" " * indent) and line.strip() for line in narrow[1:])


def test_run_shows_progress_on_a_terminal_and_not_otherwise() -> None:
    import pty

    lines = b'{"id": 1, "name": "current_time", "arguments": {"timezone": "UTC"}}\n{"id": 2, "name": "nope"}\n'
    command = [sys.executable, "-m", "harness_one", "run"]
    main_fd, terminal = pty.openpty()
    try:
        proc = subprocess.run(command, input=lines, stdout=subprocess.PIPE, stderr=terminal, timeout=60, check=False)
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:  # the terminal is closed and drained
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(main_fd)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2
    assert b"\r2 answered, 1 error" in shown and b"1 errors" not in shown
    assert b"harness-one run: 2 requests, 1 ok, 1 error (ToolNotFound: 1)" in shown
    piped = subprocess.run(command, input=lines, capture_output=True, timeout=60, check=False)
    assert b"answered," not in piped.stderr and b"harness-one run: 2 requests" in piped.stderr


HANGING_TOOL = """
import pathlib, sys, threading
from harness_one import defineTool

@defineTool(registry=None)
def hang(marker: str) -> str:
    pathlib.Path(marker).write_text("started")
    threading.Event().wait()  # never returns
    return "never"
"""


@pytest.mark.parametrize("busy", [False, True])
def test_ctrl_c_ends_run_at_once_whether_idle_or_in_a_hung_tool(tmp_path: Path, busy: bool) -> None:
    import signal
    import time

    tools = tmp_path / "hang_tools.py"
    tools.write_text(HANGING_TOOL)
    marker = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness_one", "--tools", str(tools), "run"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b'{"id": 1, "name": "current_time", "arguments": {"timezone": "UTC"}}\n')
        if busy:
            proc.stdin.write(json.dumps({"id": 2, "name": "hang", "arguments": {"marker": str(marker)}}).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["ok"] is True  # running; the stdin reader now waits
        for _ in range(600):  # the hung tool has started (bounded: 60 s)
            if not busy or marker.exists():
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)  # stdin stays open: nothing but Ctrl-C ends the loop
        assert proc.stderr is not None
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    lost = "; 1 NOT ANSWERED" if busy else ""
    requests = "2 requests" if busy else "1 request"
    assert f"{requests}, 1 ok, 0 errors{lost} (interrupted)".encode() in err
    assert b"Traceback" not in err and b"Fatal Python error" not in err


def test_run_stops_reading_once_answers_cannot_be_written(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    tools = tmp_path / "count_tools.py"
    tools.write_text(
        "from harness_one import defineTool\n"
        "@defineTool(registry=None)\n"
        f"def mark(n: int) -> int:\n    open({str(log)!r}, 'a').write(f'{{n}}\\n')\n    return n\n"
    )
    lines = b"".join(b'{"id": %d, "name": "mark", "arguments": {"n": %d}}\n' % (i, i) for i in range(200))
    read, write = os.pipe()
    os.close(read)  # stdout is a pipe nobody reads: the first answer fails
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "harness_one", "--tools", str(tools), "run"],
            input=lines,
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert proc.returncode == 70 and b"cannot write answers" in proc.stderr
    assert len(log.read_text().split()) == 1  # the call whose answer failed; no later request ran


def test_text_output_shows_control_characters_escaped(runner: CliRunner) -> None:
    lines = json.dumps({"id": "\x1b[31mRED", "name": "nope\x1b]0;title\x07", "arguments": {}}) + "\n"
    shown = invoke(runner, "run", "--output", "text", input=lines).stdout
    assert "\x1b" not in shown and "\x07" not in shown
    assert shown.startswith("[\\x1b[31mRED] nope\\x1b]0;title\\x07 -> ToolNotFound:\n      Unknown tool 'nope\\x1b]0;title\\x07'")


def test_the_extras_install_what_the_integration_pages_use() -> None:
    import tomllib

    extras = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("pydantic-ai-slim[openai]") for r in extras["pydantic-ai"])  # the model the page builds
    assert any(r.startswith("autogen-ext[openai]") for r in extras["autogen"])  # its model client
    assert any(r.startswith("langchain>=") for r in extras["langgraph"])  # create_agent
    assert any(r.startswith("langchain>=") for r in extras["langchain"])
    assert any(r.startswith("agent-framework-core") for r in extras["agent-framework"])
    pages = Path(__file__).parent.parent / "docs" / "integrations"
    for page, extra in [("pydantic-ai.md", "pydantic-ai"), ("autogen.md", "autogen"), ("langchain.md", "langchain")]:
        assert f"harness-one[{extra}]" in (pages / page).read_text(), page  # the page names the extra it needs


def test_run_answers_a_line_with_an_unreadable_number_on_its_own_id(runner: CliRunner) -> None:
    long = "9" * 5000
    lines = [
        f'{{"name": "calculate", "arguments": {{"id": 7, "x": {long}}}, "id": 1}}',
        f'{{"id": {"1" * 35}, "name": "calculate", "arguments": {{"x": {long}}}}}',
        f'{{"id": 1.5, "name": "calculate", "arguments": {{"x": {long}}}}}',
        f'{{"type": "function_call", "call_id": "fc4", "name": "calculate", "arguments": {{"x": {long}}}}}',
        f'{{"id": {long}, "name": "calculate"}}',
    ]
    result = invoke(runner, "run", input="\n".join(lines) + "\n")
    answers = [json.loads(x) for x in result.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, int("1" * 35), 1.5, "fc4", None]  # the last one's id is the long number
    assert all(a["error"]["type"] == "InvalidRequest" and "5000 digits" in a["error"]["message"] for a in answers)


def test_run_refuses_an_id_that_is_an_array_or_an_object(runner: CliRunner) -> None:
    """Such an id was answered as its JSON text ("[1, 2]"), which no agent can match: JSON-RPC's ids are a string or a number."""
    lines = [
        '{"id": [1, 2], "name": "calculate", "arguments": {"expression": "1 + 1"}}',
        '{"id": {"n": 1}, "type": "function", "function": {"name": "calculate", "arguments": "{}"}}',
        '{"id": 3, "name": "calculate", "arguments": {"expression": "1 + 2"}}',
    ]
    result = invoke(runner, "run", input="\n".join(lines) + "\n")
    answers = [json.loads(x) for x in result.stdout.splitlines()]
    assert [a["id"] for a in answers] == [None, None, 3] and answers[2]["ok"]
    assert [a["error"]["type"] for a in answers[:2]] == ["InvalidRequest"] * 2
    assert "id must be a string or a number, not an array" in answers[0]["error"]["message"]
    assert "id must be a string or a number, not an object" in answers[1]["error"]["message"]


def test_run_answers_a_line_nested_too_deeply_on_its_own_id(runner: CliRunner) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    lines = [
        f'{{"id": 5, "name": "calculate", "arguments": {{"x": {deep}}}}}',
        f'{{"type": "function_call", "call_id": "fc6", "name": "calculate", "arguments": {deep}}}',
        f'{{"name": "calculate", "arguments": {deep}, "id": 7}}',  # after the deep member: not read
    ]
    result = invoke(runner, "run", input="\n".join(lines) + "\n")
    answers = [json.loads(x) for x in result.stdout.splitlines()]
    assert [a["id"] for a in answers] == [5, "fc6", None]
    assert all(a["error"]["type"] == "InvalidRequest" and "nested too deeply" in a["error"]["message"] for a in answers)


def test_the_environment_overrides_the_files_plugin_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """File, then environment, then flags (docs/configuration.md): the file's tables reach the
    library as code, which otherwise wins over the environment."""
    from harness_one._config import ConfigError, load_settings

    config = tmp_path / "harness-one.toml"
    config.write_text('[plugins]\nallow = ["validation", "rate_limit"]\nstrict = false\n[plugins.rate_limit]\nmax_wait = 1.0\n')
    settings = load_settings(str(config))
    assert (settings.allow, settings.strict, settings.plugin_options) == (
        ["validation", "rate_limit"],
        False,
        {"rate_limit": {"max_wait": 1.0}},
    )
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_RATE_LIMIT", '{"max_wait": 2}')
    monkeypatch.setenv("HARNESS_ONE_PLUGINS", "validation")
    monkeypatch.setenv("HARNESS_ONE_STRICT_PLUGINS", "1")
    settings = load_settings(str(config))
    assert (settings.allow, settings.strict, settings.plugin_options) == (None, None, {"rate_limit": {"max_wait": 2}})
    result = CliRunner().invoke(main, ["--config", str(config), "--state", "memory:", "doctor", "--json"])
    assert [p["name"] for p in json.loads(result.output)["plugins"]] == ["validation"]
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_RATE_LIMIT", "{not json")
    with pytest.raises(ConfigError, match="HARNESS_ONE_PLUGIN_RATE_LIMIT must be a JSON object"):
        load_settings(str(config))


def test_an_environment_allow_list_naming_no_plugin_keeps_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_one._config import load_settings

    config = tmp_path / "harness-one.toml"
    config.write_text('[plugins]\nallow = ["validation"]\n')
    monkeypatch.setenv("HARNESS_ONE_PLUGINS", " , ")
    assert load_settings(str(config)).allow == ["validation"]  # was None: every plugin


def test_a_package_whose_import_hangs_is_reported_not_waited_for(
    runner: CliRunner, dists: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HARNESS_ONE_IMPORT_TIMEOUT`` bounds each entry point's import: list, doctor and call go on without it."""
    from harness_one import _entrypoints

    monkeypatch.setattr(_entrypoints, "_import_timeout", None)  # the CLI sets it for its process
    release = threading.Event()
    monkeypatch.setattr(sys, "hx_release", release, raising=False)  # the hung import waits for it (the test ends it)
    hang = "import sys\nsys.hx_release.wait()\n"
    dists.make("zz-hang", {"zz_hang": hang}, {"harness_one.tools": {"zz_hang": "zz_hang"}})
    monkeypatch.setenv("HARNESS_ONE_IMPORT_TIMEOUT", "0.2")
    try:
        doctor = runner.invoke(main, ["doctor"])
        assert doctor.exit_code == 1
        assert "zz_hang from zz-hang: ImportTimeout: the import did not finish within 0.2 s" in doctor.output
        listed = runner.invoke(main, ["list", "--json"])
        assert listed.exit_code == 0 and "calculate" in {tool["name"] for tool in json.loads(listed.stdout)}
        called = runner.invoke(main, ["call", "calculate", "--args", '{"expression": "2*3"}'])
        assert called.exit_code == 0 and json.loads(called.stdout)["result"]["result"] == 6
    finally:
        release.set()
    for bad in ("-1", "soon", "inf", "1e20"):
        monkeypatch.setenv("HARNESS_ONE_IMPORT_TIMEOUT", bad)
        refused = runner.invoke(main, ["list"])
        assert refused.exit_code == 2 and "HARNESS_ONE_IMPORT_TIMEOUT must be a number of seconds up to 1e6" in refused.output


def test_doctor_keeps_the_state_password_out(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ONE_STATE", "redis://admin:hunter2@127.0.0.1:1/0")  # never reached: doctor only names it
    result = runner.invoke(main, ["doctor"])
    assert "State: redis://[REDACTED]@127.0.0.1:1/0" in result.output and "hunter2" not in result.output
    monkeypatch.setenv("HARNESS_ONE_STATE", "redis://127.0.0.1:1/0?password=hunter2")
    result = runner.invoke(main, ["doctor"])
    assert "State: redis://127.0.0.1:1/0?password=[REDACTED]" in result.output and "hunter2" not in result.output
