"""The command line's answers against a hostile review: what a tool prints stays off the answers
of ``run`` and ``call``, a tool that reads stdin under ``run`` reads nothing (not the requests),
``call`` says so when its answer cannot be written, and ``doctor`` masks secret plugin options."""

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


# --------------------------------------------------------------------------- what a tool reads

#: A tools file whose tool reads stdin one way or another and returns what it got.
NOSY_TOOLS = """
import os, subprocess, sys
from harness_one import defineTool

@defineTool(registry=None)
def nosy(how: str, pad: str = "") -> str:
    \"\"\"Reads stdin.\"\"\"
    if how == "input":
        try:
            return "line: " + input()
        except EOFError:
            return "EOF"
    if how == "read":
        return sys.stdin.read() or "EOF"
    if how == "fd":
        return os.read(0, 1 << 20).decode() or "EOF"
    child = [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read() or 'EOF')"]
    return subprocess.run(child, capture_output=True, text=True, check=True).stdout
"""


@pytest.fixture
def nosy(tmp_path: Path) -> str:
    tools = tmp_path / "nosy_tools.py"
    tools.write_text(NOSY_TOOLS)
    return str(tools)


def nosy_requests(how: str, count: int = 6) -> bytes:
    """``count`` requests of ``nosy``, 4 KiB each: more than one read of stdin's buffer holds."""
    pad = "p" * 4096
    return b"".join(
        json.dumps({"id": n, "name": "nosy", "arguments": {"how": how, "pad": pad}}).encode() + b"\n" for n in range(1, count + 1)
    )


@pytest.mark.parametrize("how", ["input", "read", "fd", "child"])
def test_a_tool_that_reads_stdin_under_run_reads_nothing_and_every_request_is_answered(nosy: str, how: str) -> None:
    done = harness("--tools", nosy, "run", input=nosy_requests(how))
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(a["id"], a["ok"], a.get("result")) for a in answers] == [(n, True, "EOF") for n in range(1, 7)], done.stderr
    assert "6 requests, 6 ok, 0 errors" in done.stderr.decode()


def test_a_tool_under_run_with_input_reads_nothing_from_stdin_either(nosy: str, tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(nosy_requests("read", 2))
    done = harness("--tools", nosy, "run", "--input", str(requests), input=b"not for the tool\n")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["result"] for line in done.stdout.splitlines()] == ["EOF", "EOF"]


def test_run_with_stdin_closed_answers_nothing_and_exits_0() -> None:
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", sys.executable, "-m", "harness_one", "run"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == b"", done.stderr
    assert done.stderr.decode().splitlines() == ["harness-one run: 0 requests, 0 ok, 0 errors"]


def test_stdin_is_given_back_once_run_ends(nosy: str) -> None:
    """In process (a test runner's input, not fd 0): the tool reads nothing, and ``sys.stdin`` is
    the runner's again afterwards."""
    runner = CliRunner()
    with runner.isolation(input=nosy_requests("input", 3)) as (out, _, _):
        before = sys.stdin
        with pytest.raises(SystemExit) as code:
            main(["--tools", nosy, "run"], prog_name="harness-one")
        assert code.value.code == 0 and sys.stdin is before
    assert [json.loads(line)["result"] for line in out.getvalue().splitlines()] == ["EOF", "EOF", "EOF"]


def test_call_leaves_stdin_to_the_tool(nosy: str) -> None:
    """``call`` reads no request from stdin (its arguments come from --args), so stdin is the tool's."""
    done = harness("--tools", nosy, "call", "nosy", "--args", '{"how": "read"}', input=b"for the tool\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "for the tool\n"


# --------------------------------------------------------------------------- embedded: text-only streams

#: A tools file whose tool says its text back (and prints it), and one that reads stdin.
ECHO_TOOLS = """
import sys
from harness_one import defineTool

@defineTool(registry=None)
def echo(text: str) -> str:
    \"\"\"Says it back.\"\"\"
    print("print:", text)
    return text

@defineTool(registry=None)
def peek() -> str:
    \"\"\"Reads stdin.\"\"\"
    return sys.stdin.read() or "EOF"
"""

#: Requests as text: non-ASCII, a tool reading stdin, a lone surrogate (not UTF-8), a line of
#: 300,000 characters but 600,000 bytes (over run's 512 KiB line limit), then one more.
TEXT_REQUESTS = "".join(
    line + "\n"
    for line in [
        json.dumps({"id": 1, "name": "echo", "arguments": {"text": "h\u00e9llo \u2713 \U0001f600"}}, ensure_ascii=False),
        json.dumps({"id": 2, "name": "peek", "arguments": {}}),
        '{"id": 3, "name": "echo", "arguments": {"text": "\ud800"}}',
        json.dumps({"id": 4, "name": "echo", "arguments": {"text": "\u00e9" * 300_000}}, ensure_ascii=False),
        json.dumps({"id": 5, "name": "echo", "arguments": {"text": "done"}}),
    ]
)


@pytest.fixture
def echo_tools(tmp_path: Path) -> str:
    tools = tmp_path / "echo_tools.py"
    tools.write_text(ECHO_TOOLS)
    return str(tools)


def test_call_embedded_with_a_text_only_stdout_answers_into_it(echo_tools: str) -> None:
    """``contextlib.redirect_stdout(io.StringIO())``: the answer is written to it as text."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        args = json.dumps({"text": "h\u00e9llo \u2713"}, ensure_ascii=False)
        main(["--tools", echo_tools, "call", "echo", "--args", args], standalone_mode=False)
        assert sys.stdout is out
    assert json.loads(out.getvalue())["result"] == "h\u00e9llo \u2713"  # the whole of it is the answer
    assert "print: h\u00e9llo \u2713" in err.getvalue()


def test_run_embedded_with_text_only_stdin_and_stdout_answers_every_request_as_clirunner_does(
    echo_tools: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sys.stdin = io.StringIO(requests)`` and a ``io.StringIO`` stdout: every request is read and
    answered, with the text of exactly the bytes ``CliRunner`` (binary streams) gets; the tool
    reading stdin reads nothing, and both streams are given back."""
    stdin, out, err = io.StringIO(TEXT_REQUESTS), io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdin", stdin)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(["--tools", echo_tools, "run"], standalone_mode=False)
        assert sys.stdout is out and sys.stdin is stdin
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(a["id"], a["ok"], a.get("result", a.get("error", {}).get("message"))) for a in answers] == [
        (1, True, "h\u00e9llo \u2713 \U0001f600"),
        (2, True, "EOF"),
        (3, False, "line 3: the line is not valid UTF-8 (byte 0xed at position 49)"),  # its id reads
        (4, False, "line 4: the line is longer than 524288 bytes"),  # its id read from the line's start, as serve reads it
        (5, True, "done"),
    ]
    assert "5 requests, 3 ok, 2 errors" in err.getvalue()
    binary = CliRunner().invoke(main, ["--tools", echo_tools, "run"], input=TEXT_REQUESTS.encode("utf-8", "surrogatepass"))
    assert binary.exit_code == 0, binary.stderr
    assert binary.stdout_bytes.decode("utf-8") == out.getvalue()


def test_in_process_a_missing_stream_is_closed_not_text_only(echo_tools: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sys.stdin`` None holds no requests (exit 0); ``sys.stdout`` None is a closed stdout (exit 70)."""
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdin", None)
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
        assert not main(["--tools", echo_tools, "run"], standalone_mode=False)
    assert out.getvalue() == "" and err.getvalue().splitlines() == ["harness-one run: 0 requests, 0 ok, 0 errors"]
    monkeypatch.setattr(sys, "stdout", None)
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["--tools", echo_tools, "run"], standalone_mode=False) == 70
    assert err.getvalue().splitlines() == ["harness-one run: cannot write answers: stdout is closed"]


def _closed_text() -> io.TextIOWrapper:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stream.close()
    return stream


def _detached_text() -> io.TextIOWrapper:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stream.detach()
    return stream


def _closed_string() -> io.StringIO:
    stream = io.StringIO()
    stream.close()
    return stream


@pytest.mark.parametrize("closed", [_closed_text, _detached_text, _closed_string])
def test_in_process_a_closed_stream_object_is_a_closed_stream(
    closed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedding host closed ``sys.stdout``: "stdout is closed" and the tool not called (was a
    ValueError after the call); a closed ``sys.stdin`` holds no requests (was "the loop failed", exit 70)."""
    tools, marks = tmp_path / "mark_tools.py", tmp_path / "marks"
    tools.write_text(MARK_TOOLS)
    request = json.dumps({"id": 1, "name": "mark", "arguments": {"path": str(marks)}}) + "\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(request))
    for command, said in [
        (["call", "mark", "--args", json.dumps({"path": str(marks)})], "harness-one call: cannot write the answer"),
        (["run"], "harness-one run: cannot write answers"),
    ]:
        monkeypatch.setattr(sys, "stdout", closed())
        with contextlib.redirect_stderr(io.StringIO()) as err:
            assert main(["--tools", str(tools), *command], standalone_mode=False) == 70
        assert err.getvalue().splitlines() == [f"{said}: stdout is closed"]
    assert not marks.exists()
    monkeypatch.setattr(sys, "stdin", closed())
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        assert not main(["--tools", str(tools), "run"], standalone_mode=False)
    assert out.getvalue() == "" and err.getvalue().splitlines() == ["harness-one run: 0 requests, 0 ok, 0 errors"]


def test_embedded_after_the_host_closed_sys_stdout_call_says_stdout_is_closed(tmp_path: Path) -> None:
    """A fresh interpreter (fd 1 still open: closing ``sys.stdout`` leaves it): structlog's first
    import asked the closed stream ``isatty()`` and the command died with a traceback."""
    tools, marks = tmp_path / "mark_tools.py", tmp_path / "marks"
    tools.write_text(MARK_TOOLS)
    args = ["--tools", str(tools), "call", "mark", "--args", json.dumps({"path": str(marks)})]
    code = f"import sys\nsys.stdout.close()\nfrom harness_one._cli import main\nsys.exit(main({args!r}, standalone_mode=False))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, check=False)
    assert done.returncode == 70, done.stderr
    assert done.stdout == b"" and done.stderr.decode().splitlines() == [
        "harness-one call: cannot write the answer: stdout is closed"
    ]
    assert not marks.exists()


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


def test_doctor_shows_the_key_names_of_secret_keys_options(runner: CliRunner, tmp_path: Path) -> None:
    """``secret_keys`` and ``extra_secret_keys`` list key names, not secrets: shown (they were
    masked for the "secret" in their names); ``secret_values`` and a masked text stay masked."""
    (tmp_path / "harness-one.toml").write_text(
        "[plugins.logging]\n"
        'secret_keys = ["api_key", "password"]\n'
        'extra_secret_keys = ["x_sig", "token=sk-HUNTER2"]\n'
        f'secret_values = ["{SECRET}"]\n'
        "[plugins.otel]\n"
        'extra_secret_keys = "session_ref"\n'
    )
    data = runner.invoke(main, ["doctor", "--json"])
    assert data.exit_code == 0, data.output
    assert "HUNTER2" not in data.output
    options = {p["name"]: p["options"] for p in json.loads(data.output)["plugins"]}
    assert options["logging"] == {
        "secret_keys": ["api_key", "password"],
        "extra_secret_keys": ["x_sig", "token=[REDACTED]"],
        "secret_values": "[REDACTED]",
    }
    assert options["otel"] == {"extra_secret_keys": "session_ref"}
    text = runner.invoke(main, ["doctor"])
    assert "HUNTER2" not in text.output
    [line] = [line for line in text.output.splitlines() if line.strip().startswith("logging ")]
    assert line.endswith(
        '{"secret_keys": ["api_key", "password"], "extra_secret_keys": ["x_sig", "token=[REDACTED]"], "secret_values": "[REDACTED]"}'
    ), line


def test_a_claim_that_runs_out_of_descriptors_keeps_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of descriptors at the second copy, the first is closed, not leaked, and fd 1 is left as it was."""
    from harness_one import _stdout

    real_dup, made, closed = os.dup, [], []

    def dup(fd: int) -> int:
        if made:
            raise OSError(24, "Too many open files")
        made.append(real_dup(fd))
        return made[-1]

    def close(fd: int) -> None:
        closed.append(fd)
        os_close(fd)

    os_close = os.close
    monkeypatch.setattr(_stdout.os, "dup", dup)
    monkeypatch.setattr(_stdout.os, "close", close)
    with pytest.raises(OSError, match="Too many open files"):
        _stdout.claim_stdout()
    assert closed == made and len(made) == 1
