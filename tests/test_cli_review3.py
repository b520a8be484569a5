"""A third review of the command line: what reaches the operator's terminal is escaped, every
command keeps stdout for its answer (UTF-8, exit 70 when it cannot be written), arguments that
are not UTF-8 are usage errors, the configuration names what it refuses, ``call`` answers as
``run`` does, an unknown tool is exit 3 everywhere, ``doctor`` lists only real blocked plugins."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one._cli import main
from harness_one._config import ConfigError, load_settings

TOOLS = '''
import itertools
from harness_one import define_tool

print("loading my tools...")
_flaky = itertools.count()


@define_tool(registry=None)
def lookup(key: str) -> str:
    """Look a key up \u2014 caf\u00e9."""
    raise LookupError(f"no such key: {key}")


@define_tool(registry=None)
def echo(text: str) -> str:
    """Echoes the text."""
    return text


@define_tool(registry=None, idempotent=True, retry={"attempts": 3, "initial": 0, "on": [ConnectionError]})
def flaky() -> str:
    """Fails on its first run."""
    if next(_flaky) == 0:
        raise ConnectionError("first try fails")
    return "done"


def _bad(text: str) -> str:
    return text


_bad.__doc__ = "Bad \\ud800 description"
bad = define_tool(_bad, name="bad", registry=None)
'''

OSC = "\x1b]52;c;ZWNobyBwd25lZA==\x07\rFAKE LINE"


@pytest.fixture
def tools(tmp_path: Path) -> str:
    path = tmp_path / "review3_tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return str(path)


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(main, list(args), catch_exceptions=False, prog_name="harness-one")


def harness(*args: str, **options: Any) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_ONE_CONFIG"}
    env.update(options.pop("env", {}))
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.run([sys.executable, "-m", "harness_one", *args], env=env, timeout=120, check=False, **options)


# --------------------------------------------------------------------------- 1. escapes on the terminal


def test_call_shows_the_error_text_with_its_control_characters_escaped(runner: CliRunner, tools: str) -> None:
    """The error quotes the model's argument: an OSC 52 clipboard write, a bell and a carriage
    return reached the terminal raw (only CSI was stripped)."""
    result = invoke(runner, "--tools", tools, "call", "lookup", "--args", json.dumps({"key": OSC}))
    assert result.exit_code == 7
    assert result.stderr.splitlines()[-1] == (
        "Error: Tool 'lookup' failed: LookupError: no such key: \\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x0dFAKE LINE"
    )
    assert json.loads(result.stdout)["error"]["message"].endswith(OSC)  # the answer keeps the text as it was


def test_describe_escapes_an_unknown_name_and_exits_3(runner: CliRunner) -> None:
    """A newline in the name forged an ``Error:`` line; the message is one ``Error:`` line, exit 3."""
    result = invoke(runner, "describe", "a\nError: fake line\x1b]0;t\x07")
    assert result.exit_code == 3 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "Error: Unknown tool 'a\\x0aError: fake line\\x1b]0;t\\x07'. Available tools: "
    )


def test_export_of_an_unknown_name_is_exit_3_as_in_call_and_describe(runner: CliRunner) -> None:
    result = invoke(runner, "export", "--name", "nope")
    assert result.exit_code == 3 and result.stdout == ""
    assert result.stderr.startswith("Error: Unknown tool 'nope'. Available tools: ") and "Usage:" not in result.stderr


# --------------------------------------------------------------------------- 2. stdout is the answer's


@pytest.mark.parametrize(
    "command", [["export", "--name", "echo"], ["list", "--json"], ["describe", "echo"], ["doctor", "--json"]]
)
def test_what_a_tools_file_prints_as_it_loads_stays_out_of_the_json(runner: CliRunner, tools: str, command: list[str]) -> None:
    result = runner.invoke(main, ["--tools", tools, *command], prog_name="harness-one")
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # the whole of stdout is the JSON
    assert "loading my tools..." in result.stderr


@pytest.mark.parametrize("command", [["export", "--name", "lookup"], ["list"], ["describe", "lookup"], ["doctor"]])
def test_catalog_commands_write_utf8_whatever_the_locale(tools: str, tmp_path: Path, command: list[str]) -> None:
    """Under a Latin-1 stdout an em dash was a UnicodeEncodeError (exit 1), and ``é`` came out as
    Latin-1 in JSON that claims UTF-8."""
    env = {"PYTHONIOENCODING": "latin-1", "HARNESS_ONE_STATE": "memory:", "COLUMNS": "1000"}
    done = harness("--tools", tools, *command, env=env)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("utf-8")  # strict: every byte is UTF-8
    assert "loading my tools..." not in text
    if command[0] in ("export", "describe"):
        assert "Look a key up \u2014 caf\u00e9." in json.dumps(json.loads(text), ensure_ascii=False)
    elif command[0] == "list":
        assert "Look a key up \u2014 caf\u00e9." in text


def test_list_shows_a_description_holding_a_lone_surrogate(runner: CliRunner, tools: str) -> None:
    result = invoke(runner, "--tools", tools, "list")
    assert result.exit_code == 0, result.output
    assert [line.split("  ")[-1] for line in result.stdout.splitlines() if line.startswith("bad ")] == ["Bad \ufffd description"]


@pytest.mark.parametrize("command", [["export"], ["list"], ["list", "--json"], ["describe", "calculate"], ["doctor", "--json"]])
def test_catalog_commands_with_stdout_closed_say_so_and_exit_70(
    command: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """They exited 0 in silence (``>&-``)."""
    monkeypatch.setenv("HARNESS_ONE_STATE", "memory:")
    monkeypatch.setattr(sys, "stdout", None)
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(command, standalone_mode=False) == 70
    assert err.getvalue().splitlines() == [f"harness-one {command[0]}: cannot write the answer: stdout is closed"]


@pytest.mark.parametrize("command", [["export"], ["doctor", "--json"], ["list"]])
def test_catalog_commands_to_a_pipe_with_no_reader_say_so_and_exit_70(command: list[str]) -> None:
    """They exited 1 in silence on a broken pipe."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = harness(*command, stdout=write, env={"HARNESS_ONE_STATE": "memory:"})
    finally:
        os.close(write)
    assert done.returncode == 70, done.stderr
    assert done.stderr.decode().splitlines() == [
        f"harness-one {command[0]}: cannot write the answer: BrokenPipeError: [Errno 32] Broken pipe"
    ]


def test_catalog_commands_with_fd_1_closed_exit_70() -> None:
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "harness_one", "export"],
        capture_output=False,
        stderr=subprocess.PIPE,
        env={**os.environ, "HARNESS_ONE_STATE": "memory:"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 70
    assert done.stderr.decode().splitlines() == ["harness-one export: cannot write the answer: stdout is closed"]


# --------------------------------------------------------------------------- 3. arguments that are not UTF-8


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (
            ["call", "echo", "--args", '{"text":"a\udcffb"}'],
            "Invalid value for '--args': not valid UTF-8 (byte 0xff at position 10)",
        ),
        (
            ["call", "echo", "--context", '{"u":"\udcfe"}'],
            "Invalid value for '--context': not valid UTF-8 (byte 0xfe at position 6)",
        ),
        (["call", "ec\udcffho"], "Invalid value for 'NAME': not valid UTF-8 (byte 0xff at position 2)"),
        (
            ["call", "echo", "--idempotency-key", "k\udcff"],
            "Invalid value for '--idempotency-key': not valid UTF-8 (byte 0xff at position 1)",
        ),
        (
            ["call", "echo", "--idempotency-key", "k\ud800"],
            "Invalid value for '--idempotency-key': not valid UTF-8 (a lone surrogate U+D800 at position 1)",
        ),
    ],
)
def test_call_refuses_arguments_that_are_not_utf8_as_usage_errors(
    runner: CliRunner, tools: str, args: list[str], shown: str
) -> None:
    """Such bytes reached the tool as ``"a\\udcffb"`` (the tool failed, exit 7) or the key as invalid arguments (exit 4)."""
    result = invoke(runner, "--tools", tools, *args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"Error: {shown}"


def test_call_refuses_a_byte_that_is_not_utf8_from_the_real_command_line(tools: str) -> None:
    done = subprocess.run(
        [
            os.fsencode(sys.executable),
            b"-m",
            b"harness_one",
            b"--tools",
            os.fsencode(tools),
            b"call",
            b"echo",
            b"--args",
            b'{"text":"a\xffb"}',
        ],
        capture_output=True,
        env={**os.environ, "HARNESS_ONE_STATE": "memory:"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert (
        done.stderr.decode().splitlines()[-1] == "Error: Invalid value for '--args': not valid UTF-8 (byte 0xff at position 10)"
    )


@pytest.mark.parametrize(
    ("command", "shown"), [([b"describe", b"ad\xffd"], "'NAME'"), ([b"export", b"--name", b"ad\xffd"], "'--name'")]
)
def test_describe_and_export_refuse_a_name_that_is_not_utf8_as_call_does(tools: str, command: list[bytes], shown: str) -> None:
    """They answered 'Unknown tool' (exit 3) for a name no tool can have; `call` says what is wrong with it."""
    done = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"harness_one", b"--tools", os.fsencode(tools), *command],
        capture_output=True,
        env={**os.environ, "HARNESS_ONE_STATE": "memory:"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().splitlines()[-1] == f"Error: Invalid value for {shown}: not valid UTF-8 (byte 0xff at position 2)"


# --------------------------------------------------------------------------- 4, 7. the configuration names what it refuses


@pytest.mark.parametrize("key", ["url", "redis_url"])
def test_an_empty_state_url_in_the_file_is_refused(tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``url = ""`` meant in-memory state (keys stopped replaying across commands); ``redis_url = ""`` alone a KeyError."""
    for var in ("HARNESS_ONE_STATE", "HARNESS_ONE_REDIS_URL", "HARNESS_ONE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "h.toml"
    path.write_text(f'[state]\n{key} = " "\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(str(path))
    assert str(caught.value) == (
        f"{path}: [state] {key} is empty: give a state URL ('memory:', a SQLite file, 'redis://host:6379/0'), "
        "or leave the key out for the default SQLite file"
    )


def test_the_cli_refuses_an_empty_state_url_with_exit_2(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HARNESS_ONE_STATE")
    (tmp_path / "f.toml").write_text('[state]\nurl = ""\n')
    result = invoke(runner, "--config", "f.toml", "doctor")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Error: f.toml: [state] url is empty: ")


@pytest.mark.parametrize(
    ("toml", "env", "message"),
    [
        ('[logging]\nlevel = "verbose"\n', {}, "{path}: [logging] level must be debug, info, warning or error, not 'verbose'"),
        ('[logging]\nformat = "xml"\n', {}, "{path}: [logging] format must be 'console' or 'json', not 'xml'"),
        ("", {"HARNESS_ONE_LOG_LEVEL": "loud"}, "HARNESS_ONE_LOG_LEVEL must be debug, info, warning or error, not 'loud'"),
        ("", {"HARNESS_ONE_LOG_FORMAT": "xml"}, "HARNESS_ONE_LOG_FORMAT must be 'console' or 'json', not 'xml'"),
        (
            '[logging]\nlevel = "verbose"\n',
            {"HARNESS_ONE_LOG_LEVEL": "loud"},
            "HARNESS_ONE_LOG_LEVEL must be debug, info, warning or error, not 'loud'",
        ),
    ],
)
def test_a_bad_log_setting_names_its_key_and_where_it_was_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, env: dict[str, str], message: str
) -> None:
    for var in ("HARNESS_ONE_LOG_LEVEL", "HARNESS_ONE_LOG_FORMAT", "HARNESS_ONE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    path = tmp_path / "h.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(str(path))
    assert str(caught.value) == message.format(path=path)


# --------------------------------------------------------------------------- 6. call answers as run does


def test_call_says_an_answer_was_replayed_and_how_many_attempts_it_took(runner: CliRunner, tools: str) -> None:
    """``call`` dropped ``"ran": false`` and ``attempts``, which ``run`` gives: a replayed idempotent
    answer could not be told from a fresh run. (The runner's state is a SQLite file: kept across commands.)"""
    first = json.loads(
        invoke(runner, "--tools", tools, "call", "echo", "--args", '{"text": "x"}', "--idempotency-key", "k").stdout
    )
    again = json.loads(
        invoke(runner, "--tools", tools, "call", "echo", "--args", '{"text": "x"}', "--idempotency-key", "k").stdout
    )
    assert (first["result"], "ran" in first) == ("x", False)
    assert (again["result"], again["ran"]) == ("x", False)
    retried = json.loads(invoke(runner, "--tools", tools, "call", "flaky").stdout)
    assert (retried["result"], retried["attempts"], "ran" in retried) == ("done", 2, False)
    request = json.dumps({"id": 1, "name": "echo", "arguments": {"text": "x"}, "idempotency_key": "k"})
    ran = runner.invoke(main, ["--tools", tools, "run"], input=request + "\n", catch_exceptions=False)
    assert json.loads(ran.stdout) == {"id": 1, "ok": True, "result": "x", "ran": False}


# --------------------------------------------------------------------------- 9. doctor's blocked plugins


def test_doctor_lists_only_installed_blocked_plugins_and_reports_a_misspelt_one(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_ONE_BLOCK_PLUGINS", "cache,cahce")
    report = invoke(runner, "doctor", "--json")
    data = json.loads(report.stdout)
    assert data["blocked_plugins"] == ["cache"]
    assert report.exit_code == 1 and any(
        "names plugin 'cahce', which is not installed; did you mean 'cache'?" in line for line in data["failures"]
    )
    text = invoke(runner, "doctor").stdout
    assert "; blocked: cache):" in text and "cahce):" not in text


# --------------------------------------------------------------------------- 10. --args in run's words


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("null", "must be a JSON object, not null"),
        ("[1]", "must be a JSON object, not an array"),
        ('"x"', "must be a JSON object, not a string"),
        ("7", "must be a JSON object, not a number"),
        ('{"text": ' + "1" * 5000 + "}", "$.text: a number of 5000 digits is too long to read"),
    ],
)
def test_call_says_what_is_wrong_with_args_in_json_words(runner: CliRunner, tools: str, given: str, said: str) -> None:
    result = invoke(runner, "--tools", tools, "call", "echo", "--args", given)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"Error: Invalid value for --args: {said}"


def test_a_long_number_is_named_the_same_by_call_and_run(runner: CliRunner, tools: str) -> None:
    digits = "1" * 5000
    called = invoke(runner, "--tools", tools, "call", "echo", "--args", '{"text": ' + digits + "}")
    line = '{"name": "echo", "arguments": {"text": ' + digits + "}}\n"
    ran = runner.invoke(main, ["--tools", tools, "run"], input=line, catch_exceptions=False)
    said = "$.arguments.text: a number of 5000 digits is too long to read"
    assert json.loads(ran.stdout)["error"]["message"] == f"line 1: {said}"
    assert called.stderr.splitlines()[-1] == f"Error: Invalid value for --args: {said.replace('arguments.', '')}"
