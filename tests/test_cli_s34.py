"""The command line, review 34: a state URL that does not parse, secrets in the usage error and the approval
hint of ``call``, where an unusable state store was set, and a ``--tools`` file whose import never ends."""

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
from harness_one._config import environment_state

ROOT = Path(__file__).resolve().parents[1]
APPROVAL_TOOLS = str(ROOT / "tests" / "approval_tools.py")  # transfer: more than 100 needs approval
BAD = "redis://user:pw@[bad/0"  # an unclosed '[': urlparse raises ValueError
SAID = "state URL 'redis://[REDACTED]@[bad/0' is malformed: Invalid IPv6 URL"


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(main, list(args), catch_exceptions=False, prog_name="harness-one")


# --------------------------------------------------------------------------- 1. a state URL that does not parse


def test_a_state_option_that_does_not_parse_is_a_usage_error(runner: CliRunner) -> None:
    for command in (["list"], ["doctor", "--json"]):
        done = invoke(runner, "--state", BAD, *command)
        assert done.exit_code == 2 and done.stdout == ""
        assert done.stderr.splitlines()[-1] == f"Error: Invalid value for --state: {SAID}"


@pytest.mark.parametrize("key", ["url", "redis_url"])
def test_a_state_url_of_the_file_that_does_not_parse_names_its_key(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.delenv("HARNESS_ONE_STATE")
    (tmp_path / "s.toml").write_text(f'[state]\n{key} = "{BAD}"\n')
    done = invoke(runner, "--config", "s.toml", "list")
    assert done.exit_code == 2 and done.stderr == f"Error: s.toml: [state] {key}: {SAID}\n"
    (tmp_path / "s.toml").write_text('[state]\nurl = "sqlite://[x"\n')
    done = invoke(runner, "--config", "s.toml", "list")
    assert done.exit_code == 2
    assert done.stderr == "Error: s.toml: [state] url: state URL 'sqlite://[x' is malformed: Invalid IPv6 URL\n"


@pytest.mark.parametrize("variable", ["HARNESS_ONE_STATE", "HARNESS_ONE_REDIS_URL"])
def test_a_state_variable_that_does_not_parse_is_named(runner: CliRunner, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, BAD)
    done = invoke(runner, "list")
    assert done.exit_code == 2 and done.stderr == f"Error: {variable}: {SAID}\n"
    with pytest.raises(ValueError, match=rf"^{variable}: state URL .* is malformed: Invalid IPv6 URL$"):
        environment_state()  # the library's default registry reads it too


# --------------------------------------------------------------------------- 2, 3. secrets call shows a person


def test_arguments_given_without_args_are_shown_masked(runner: CliRunner) -> None:
    done = invoke(runner, "-O", 'logging.secret_values=["s3cr3t-v"]', "call", "leak", '{"api_key":"hunter40"}', "s3cr3t-v")
    assert done.exit_code == 2 and "hunter40" not in done.output and "s3cr3t-v" not in done.output
    assert "('{\"api_key\":\"[REDACTED]\"}' '[REDACTED]')" in done.stderr
    done = invoke(runner, "call", "leak", '{"api_key":"hunter40"}')
    assert done.exit_code == 2 and "hunter40" not in done.output
    assert done.stderr.rstrip().endswith("""e.g. harness-one call leak --args '{"api_key":"[REDACTED]"}'""")


def test_the_call_line_of_the_approval_hint_masks_the_configured_logging_secrets(runner: CliRunner) -> None:
    """What the logging plugin is told to mask (``secret_values``, ``extra_secret_keys``), the hint masks too."""
    options = ["-O", 'logging.secret_values=["bo-secret"]', "-O", 'logging.extra_secret_keys=["memo"]']
    args = ["call", "transfer", "--args", '{"to": "bo-secret", "amount": 500}', "--context", '{"memo": "xyz123"}']
    done = invoke(runner, *options, "--tools", APPROVAL_TOOLS, *args)
    assert done.exit_code == 8
    lines = done.stderr.splitlines()
    assert "bo-secret" not in done.stderr and "xyz123" not in done.stderr
    assert "(put back the secrets masked in its options and in the call)" in lines[1]
    request = json.loads(lines[2])
    assert request["arguments"] == {"to": "[REDACTED]", "amount": 500} and request["context"] == {"memo": "[REDACTED]"}


# --------------------------------------------------------------------------- 4. where the state store was set


@pytest.mark.parametrize("given", ["--state", "HARNESS_ONE_STATE", "file", "default"])
def test_an_unusable_state_store_names_where_it_was_set(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    (tmp_path / "blocker").write_text("")  # a file where a directory should be
    url = str(tmp_path / "blocker" / "state.sqlite3")
    monkeypatch.delenv("HARNESS_ONE_STATE")
    args = ["list"]
    if given == "--state":
        monkeypatch.setenv("HARNESS_ONE_STATE", str(tmp_path / "ok.sqlite3"))  # --state wins over it
        args = ["--state", url, "list"]
    elif given == "HARNESS_ONE_STATE":
        monkeypatch.setenv("HARNESS_ONE_STATE", url)
    elif given == "file":
        (tmp_path / "c.toml").write_text(f'[state]\nurl = "{url}"\n')
        args = ["--config", "c.toml", "list"]
    else:
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "blocker"))
    done = invoke(runner, *args)
    assert done.exit_code == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith("Error: cannot open the state store ")
    said = {
        "--state": "(set by --state)",
        "HARNESS_ONE_STATE": "(set by HARNESS_ONE_STATE)",
        "file": "(set by c.toml: [state] url)",
        "default": "(the default: choose another with --state or HARNESS_ONE_STATE)",
    }
    assert last.endswith(said[given])


# --------------------------------------------------------------------------- 5. a tools file whose import hangs


@pytest.mark.parametrize("where", ["--tools", "file"])
def test_a_tools_file_whose_import_hangs_is_given_up_at_the_import_timeout(tmp_path: Path, where: str) -> None:
    (tmp_path / "hang.py").write_text("import time\n\ntime.sleep(1000)\n")
    (tmp_path / "c.toml").write_text('tools = ["hang.py"]\n')
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_ONE_CONFIG", "HARNESS_ONE_TOOLS")}
    env.update(HARNESS_ONE_IMPORT_TIMEOUT="0.5", HARNESS_ONE_STATE="memory:")
    given = ["--tools", "hang.py"] if where == "--tools" else ["--config", "c.toml"]
    done = subprocess.run(  # a regression hangs: the timeout fails it
        [sys.executable, "-m", "harness_one", *given, "list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == b""
    last = done.stderr.decode().splitlines()[-1]
    assert last.startswith("Error: cannot load tools from ") and "hang.py" in last
    assert last.endswith(": ImportTimeout: the import did not finish within 0.5 s (HARNESS_ONE_IMPORT_TIMEOUT)")


def test_a_tools_file_that_needs_the_main_thread_is_told_how_to_import_it_there(tmp_path: Path) -> None:
    """signal.signal at import fails in the bounding helper thread: the error says how to import it in the main one."""
    (tmp_path / "sig.py").write_text(
        "import signal\n\nfrom harness_one.tools import defineTool\n\nsignal.signal(signal.SIGUSR1, signal.SIG_IGN)\n\n\n"
        "@defineTool\ndef ping() -> str:\n    '''Ping.'''\n    return 'pong'\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("HARNESS_ONE_CONFIG", "HARNESS_ONE_TOOLS", "HARNESS_ONE_IMPORT_TIMEOUT")
    }
    env.update(HARNESS_ONE_STATE="memory:")
    command = [sys.executable, "-m", "harness_one", "--tools", "sig.py", "list"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "0 imports it in the main thread" in done.stderr.decode()
    done = subprocess.run(
        command, cwd=tmp_path, env={**env, "HARNESS_ONE_IMPORT_TIMEOUT": "0"}, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0 and "ping" in done.stdout.decode()
