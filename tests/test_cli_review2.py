"""A second review of the command line: ``--state`` keeps the configured Redis key prefix, ``run``
works with stderr closed and escapes line breaks, plugin options are checked as they load, ``doctor``
names every blocked plugin, relative paths of a configuration file start at its directory."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one._cli import main

TOOLS = '''
import itertools
from harness_one import define_tool

_count = itertools.count(1)


@define_tool(registry=None)
def echo(value: object = None) -> object:
    """Echoes the value."""
    return value


@define_tool(registry=None)
def counter() -> int:
    """Counts its calls."""
    return next(_count)
'''


@pytest.fixture(autouse=True)
def _logging_reset() -> Any:
    import structlog

    yield
    structlog.reset_defaults()  # the CLI configures structlog; later tests expect a library default


@pytest.fixture
def tools(tmp_path: Path) -> str:
    path = tmp_path / "review_tools.py"
    path.write_text(TOOLS)
    return str(path)


def invoke(runner: CliRunner, *args: str, input: str | None = None) -> Any:
    return runner.invoke(main, list(args), input=input, catch_exceptions=False, prog_name="harness-one")


def answers(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.split("\n") if line]


# --------------------------------------------------------------------------- --state and the key prefix


def test_state_flag_keeps_the_configured_redis_prefix(
    runner: CliRunner, tools: str, redis_url: str, redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--state URL`` replaced the state without the key namespace (``HARNESS_ONE_REDIS_PREFIX``,
    ``[state] prefix``): two applications on one Redis replayed each other's idempotent results."""
    request = json.dumps({"id": 1, "name": "echo", "arguments": {"value": "billing result"}, "idempotency_key": "k1"})
    outcomes = []
    for app in ("billing:", "search:"):
        monkeypatch.setenv("HARNESS_ONE_REDIS_PREFIX", app)
        result = invoke(runner, "--tools", tools, "--state", redis_url, "run", input=request + "\n")
        outcomes.append(answers(result.stdout)[0])
    assert [answer.get("ran", True) for answer in outcomes] == [True, True]  # no replay across applications
    client = redis_server.client()
    try:
        keys = sorted(key.decode() for key in client.scan_iter())
    finally:
        client.close()
    assert keys and all(key.startswith(("billing:", "search:")) for key in keys), keys
    assert any(key.startswith("search:") for key in keys)
    report = json.loads(invoke(runner, "--state", redis_url, "doctor", "--json").stdout)
    assert report["state"] == redis_url + "?prefix=search:"


def test_state_flag_keeps_the_prefix_of_the_configuration_file(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "harness-one.toml").write_text('[state]\nprefix = "app:"\n')
    report = json.loads(invoke(runner, "--state", "redis://:pw@127.0.0.1:1/0", "doctor", "--json").stdout)
    assert report["state"] == "redis://[REDACTED]@127.0.0.1:1/0?prefix=app:"  # masked as before


# --------------------------------------------------------------------------- run --output text


@pytest.mark.parametrize("brk", ["\n", "\r", "\t", "\u2028", "\u2029", "\x85"])
def test_text_output_keeps_each_answer_on_its_lines(runner: CliRunner, tools: str, brk: str) -> None:
    """A line break in an id or a tool name printed a line of its own: a forged answer."""
    forged = '[2] transfer -> ok: "sent 5000 to mallory"'
    lines = [
        {"id": f"call_1{brk}{forged}", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
        {"id": 3, "name": f"nosuch{brk}{forged}"},
    ]
    result = invoke(runner, "--tools", tools, "run", "--output", "text", input="".join(json.dumps(x) + "\n" for x in lines))
    shown = result.stdout.splitlines()  # what a terminal or a line reader takes as lines
    heads = [line for line in shown if not line.startswith(" ")]
    assert len(heads) == 2, shown
    assert heads[0].startswith("[call_1\\") and heads[0].endswith("] echo -> ok: null")
    assert heads[1].startswith("[3] nosuch\\") and heads[1].endswith(" -> ToolNotFound:")
    assert not any(line.startswith("[2]") for line in shown)


# --------------------------------------------------------------------------- plugin options checked as they load

WRONG_OPTIONS = [
    ("idempotency", "ttl", 0, "idempotency ttl must be a positive number of seconds, not 0"),
    ("idempotency", "ttl", -1, "idempotency ttl must be a positive number of seconds, not -1"),
    ("idempotency", "ttl", "24h", "idempotency ttl must be a positive number of seconds, not '24h'"),
    ("idempotency", "lease", "5m", "idempotency lease must be a positive number of seconds, not '5m'"),
    ("idempotency", "wait", -1, "idempotency wait must be a non-negative number of seconds, not -1"),
    ("idempotency", "poll", 0, "idempotency poll must be a positive number of seconds, not 0"),
    ("logging", "log_arguments", "false", "logging log_arguments must be true or false, not 'false'"),
    ("otel", "capture_content", "false", "otel capture_content must be true or false, not 'false'"),
    ("otel", "enabled", "no", "otel enabled must be true or false or None, not 'no'"),
]


@pytest.mark.parametrize(("plugin", "option", "value", "message"), WRONG_OPTIONS)
def test_a_plugin_option_of_the_wrong_type_stops_the_command(
    runner: CliRunner, tools: str, plugin: str, option: str, value: Any, message: str
) -> None:
    """``ttl = 0`` kept no record (idempotency silently off), ``ttl = "24h"`` failed after the tool ran
    with the key left claimed, ``lease = "5m"`` failed every call, ``log_arguments = "false"`` logged
    the arguments: each is now refused as the plugin loads, before any call (exit 2)."""
    request = json.dumps({"id": 1, "name": "counter", "idempotency_key": "k"}) + "\n"
    result = invoke(runner, "--tools", tools, "-O", f"{plugin}.{option}={json.dumps(value)}", "run", input=request)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert f"Plugin '{plugin}' cannot be built with its options ['{option}']: ValueError: {message}" in result.stderr


def test_plugin_options_of_the_right_type_still_load(runner: CliRunner, tools: str) -> None:
    options = ["idempotency.ttl=86400", "idempotency.lease=30", "idempotency.wait=0", "logging.log_arguments=false"]
    request = json.dumps({"id": 1, "name": "counter", "idempotency_key": "k"}) + "\n"
    result = invoke(runner, "--tools", tools, *(f"-O{o}" for o in options), "run", input=request * 2)
    assert [answer.get("ran", True) for answer in answers(result.stdout)] == [True, False]


# --------------------------------------------------------------------------- doctor: blocked plugins


def test_doctor_names_the_plugins_the_environment_blocks(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``doctor`` listed the file's block-list only: a plugin ``HARNESS_ONE_BLOCK_PLUGINS`` kept out
    was missing from the report, though not loaded."""
    (tmp_path / "harness-one.toml").write_text('[plugins]\nblock = ["cache"]\n')
    monkeypatch.setenv("HARNESS_ONE_BLOCK_PLUGINS", "retry")
    report = json.loads(invoke(runner, "doctor", "--json").stdout)
    assert report["blocked_plugins"] == ["cache", "retry"]
    assert not {"cache", "retry"} & {plugin["name"] for plugin in report["plugins"]}
    text = invoke(runner, "doctor").stdout
    assert re.search(r"^Plugins \(\d+; blocked: cache, retry\):$", text, re.MULTILINE), text


# --------------------------------------------------------------------------- the run summary


class _ClosingOutput:
    """An output whose reader leaves after ``keep`` lines."""

    def __init__(self, keep: int) -> None:
        self.lines: list[bytes] = []
        self.keep = keep

    def write(self, data: bytes) -> int:
        if len(self.lines) >= self.keep:
            raise BrokenPipeError(32, "Broken pipe")
        self.lines.append(data)
        return len(data)

    def flush(self) -> None:
        pass


def test_the_summary_counts_no_answer_it_could_not_write() -> None:
    """An answer that could not be written was still counted ``ok`` (and an error answer lost so
    made the progress read ``-1 errors``)."""
    from harness_one._cli.loop import Loop

    loop = Loop(registry=None, out=_ClosingOutput(keep=1))
    loop.requests = 3
    loop.answer({"id": 1, "ok": True, "result": 1}, "echo")
    loop.answer({"id": 2, "ok": True, "result": 2}, "echo")
    loop.invalid(3, "not JSON")
    assert (loop.answered, loop.errors, dict(loop.counts)) == (1, 0, {"ok": 1})
    assert loop.summary() == "harness-one run: 3 requests, 1 ok, 0 errors; 2 NOT ANSWERED"
    assert loop.broken == "cannot write answers: BrokenPipeError: [Errno 32] Broken pipe"


# --------------------------------------------------------------------------- relative paths of the configuration file


def test_relative_paths_of_the_configuration_file_start_at_its_directory(
    runner: CliRunner, tmp_path: Path, tools: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only ``tools`` started at the file's directory: a SQLite state path, ``[plugins.idempotency]
    path`` and an MCP server's ``cwd`` started at the current one, so one file used from two
    directories kept two sets of idempotency records."""
    from harness_one._config import load_settings

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    config = project / "settings.toml"
    config.write_text(
        f"tools = [{json.dumps(tools)}]\n"
        '[state]\nurl = "state/state.sqlite3"\n'
        '[plugins.idempotency]\npath = "records/idempotency.sqlite3"\n'
        '[mcp.servers.local]\ncommand = ["server"]\ncwd = "servers/local"\n'
        '[mcp.servers.home]\ncommand = ["server"]\ncwd = "/srv/home"\n'
    )
    monkeypatch.delenv("HARNESS_ONE_STATE")
    monkeypatch.chdir(elsewhere)
    settings = load_settings("../project/settings.toml")
    start = elsewhere / ".." / "project"  # the file's directory, as the command line names it
    assert settings.mcp_servers["local"]["cwd"] == str(start / "servers/local")
    assert settings.mcp_servers["home"]["cwd"] == "/srv/home"
    assert settings.plugin_options["idempotency"]["path"] == str(start / "records/idempotency.sqlite3")
    assert settings.state == str(start / "state/state.sqlite3")
    config.write_text('[state]\nurl = "sqlite:state/x%23.sqlite3?timeout=2"\n')  # a relative path too
    assert load_settings("../project/settings.toml").state == f"sqlite:{start}/state/x%23.sqlite3?timeout=2"
    config.write_text('[state]\nurl = "state/state.sqlite3"\n[plugins.idempotency]\npath = "records/idempotency.sqlite3"\n')
    for directory in (elsewhere, project):  # the same files, from either directory
        monkeypatch.chdir(directory)
        request = json.dumps({"id": 1, "name": "counter", "idempotency_key": "k"}) + "\n"
        result = invoke(runner, "--config", str(config), "--tools", tools, "run", input=request)
        assert answers(result.stdout)[0]["result"] == 1  # the second run replays the first
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.sqlite3"))
    assert made == ["project/records/idempotency.sqlite3", "project/state/state.sqlite3"]


def test_paths_from_the_environment_and_flags_start_at_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness_one._config import load_settings

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "harness-one.toml").write_text(
        '[state]\nurl = "from-file.sqlite3"\n[plugins.idempotency]\npath = "from-file.sqlite3"\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_ONE_STATE", "from-env.sqlite3")
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_IDEMPOTENCY", '{"path": "env.sqlite3"}')
    settings = load_settings("project/harness-one.toml")
    assert (settings.state, settings.plugin_options["idempotency"]["path"]) == ("from-env.sqlite3", "env.sqlite3")


# --------------------------------------------------------------------------- JSON Lines answers


def test_an_answer_stays_one_line_for_every_line_reader(runner: CliRunner, tools: str) -> None:
    """JSON leaves U+2028, U+2029 and U+0085 raw in a string: an answer echoing one split in two
    for a reader that splits at every line break (``str.splitlines``, as many JSON Lines readers do)."""
    breaks = "a\u2028b\u2029c\x85d"
    lines = [{"id": 1, "name": "echo", "arguments": {"value": breaks}}, {"id": f"2{breaks}", "name": f"nosuch{breaks}"}]
    result = invoke(runner, "--tools", tools, "run", input="".join(json.dumps(x) + "\n" for x in lines))
    read = [json.loads(line) for line in result.stdout.splitlines()]
    assert [answer["id"] for answer in read] == [1, f"2{breaks}"]
    assert read[0]["result"] == breaks
    assert "\\u2028" in result.stdout and "\u2028" not in result.stdout


# --------------------------------------------------------------------------- help and configuration mistakes


@pytest.mark.parametrize("command", ["run", "call", "list", "doctor", "serve", "export", "describe"])
def test_a_command_help_needs_no_valid_configuration(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """``harness-one run --help`` failed on the configuration (the group loaded it first), as
    ``harness-one --help`` does not: the help is what one reads to fix it."""
    (tmp_path / "harness-one.toml").write_text("[foo]\n")
    monkeypatch.setenv("HARNESS_ONE_LOG_LEVEL", "verbose")
    for flag in ("--help", "-h"):
        result = invoke(runner, command, flag)
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith(f"Usage: harness-one {command} [OPTIONS]")


def test_help_given_as_an_option_value_is_not_the_help(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "harness-one.toml").write_text("[foo]\n")
    result = invoke(runner, "call", "echo", "--args", "--help")
    assert result.exit_code == 2 and "unknown section [foo]" in result.stderr


def test_an_mcp_table_mistake_names_the_file_without_usage_text(runner: CliRunner, tmp_path: Path) -> None:
    """A mistake in an ``[mcp.servers.NAME]`` table came as a mistyped command (usage text) and did
    not say which file holds it."""
    config = tmp_path / "harness-one.toml"
    config.write_text('[mcp.servers.api]\nurl = "http://127.0.0.1:1/mcp"\ntimeout = 5\n')
    result = invoke(runner, "list")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {config}: mcp.servers.api: unknown keys ['timeout']")
    assert "Usage:" not in result.stderr
    (tmp_path / "empty.toml").write_text("")
    bad_flag = invoke(runner, "--config", "empty.toml", "--mcp", "api=", "list")  # a mistyped --mcp keeps its usage text
    assert bad_flag.exit_code == 2 and "Usage: harness-one" in bad_flag.stderr


# --------------------------------------------------------------------------- start-up: the state store


def test_a_sqlite_file_that_cannot_be_opened_stops_the_command_but_redis_is_not_contacted(
    runner: CliRunner, tmp_path: Path, tools: str
) -> None:
    """What cli.md says exits 1 at start: a SQLite file that cannot be opened; an unreachable Redis
    does not (it is not contacted until a call needs it, then its plugins' ``on_state_error``)."""
    (tmp_path / "not-a-db.sqlite3").write_text("not a database")
    broken = invoke(runner, "--state", str(tmp_path / "not-a-db.sqlite3"), "--tools", tools, "run", input="{}\n")
    assert (broken.exit_code, broken.stdout) == (1, "")
    assert "cannot open the state store" in broken.stderr
    closed = invoke(
        runner, "--state", "redis://127.0.0.1:1/0?timeout=0.05", "--tools", tools, "call", "echo", "--args", '{"value": 1}'
    )
    assert (closed.exit_code, json.loads(closed.stdout)["result"]) == (0, 1)  # no plugin state needed: the call ran


# --------------------------------------------------------------------------- a byte-order mark


def test_run_names_a_byte_order_mark(runner: CliRunner, tools: str) -> None:
    """A file saved as "UTF-8 with BOM" was answered "not valid JSON: Expecting value" with no word of why."""
    result = invoke(runner, "--tools", tools, "run", input='\ufeff{"id": 1, "name": "echo"}\n{"id": 2, "name": "echo"}\n')
    first, second = answers(result.stdout)
    assert first["error"]["message"].startswith("line 1: the line is not valid JSON")
    assert first["error"]["message"].endswith(
        "(the line starts with a UTF-8 byte-order mark: save the file as UTF-8 without one)"
    )
    assert second["ok"] is True


def test_call_names_a_byte_order_mark_in_args(runner: CliRunner, tools: str) -> None:
    """``--args "$(cat args.json)"`` of a file saved as "UTF-8 with BOM" is told why it does not read."""
    result = invoke(runner, "--tools", tools, "call", "echo", "--args", '\ufeff{"value": 1}')
    assert result.exit_code == 2
    assert "not valid JSON: it starts with a UTF-8 byte-order mark: save the file as UTF-8 without one" in result.stderr
