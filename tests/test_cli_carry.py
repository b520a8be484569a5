"""``harness-one serve`` over stdio keeps stdin for the requests: a tool that reads stdin reads nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp_support import serve_file, server_env, serving
from test_cli_answers import NOSY_TOOLS

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
WAYS = ["input", "read", "fd", "child"]


def _requests() -> bytes:
    """The handshake, a call of ``nosy`` each way it reads stdin (4 KiB each: more than one read of
    a stdin buffer), then a ping."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {
                "jsonrpc": "2.0",
                "id": 10 + n,
                "method": "tools/call",
                "params": {"name": "nosy", "arguments": {"how": how, "pad": "p" * 4096}},
            }
            for n, how in enumerate(WAYS)
        ),
        {"jsonrpc": "2.0", "id": 99, "method": "ping"},
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_a_tool_that_reads_stdin_under_serve_on_a_pipe_reads_nothing(tmp_path: Path) -> None:
    tools = tmp_path / "nosy_tools.py"
    tools.write_text(NOSY_TOOLS)
    with serving(tmp_path, [sys.executable, "-m", "harness_one", "--tools", str(tools), "serve"], watchdog=60) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(_requests())
        proc.stdin.flush()
        answers = {answer["id"]: answer for answer in (json.loads(proc.stdout.readline()) for _ in range(len(WAYS) + 2))}
        proc.stdin.close()
        assert proc.wait(10) == 0
    assert sorted(answers) == [1, 10, 11, 12, 13, 99], proc.stderr.read()
    assert [answers[10 + n]["result"]["content"][0]["text"] for n in range(len(WAYS))] == ["EOF"] * len(WAYS)


def _many(count: int) -> bytes:
    """``count`` more requests: pings, a line that is not JSON (answered -32700), then a last ping."""
    pings = [{"jsonrpc": "2.0", "id": 1000 + n, "method": "ping"} for n in range(count)]
    return b"".join(json.dumps(ping).encode() + b"\n" for ping in pings) + b"{not json\n" + PING_LAST


PING_LAST = b'{"jsonrpc": "2.0", "id": "last", "method": "ping"}\n'
MANY = 400
EXPECTED = [*sorted([1, 10, 11, 12, 13, 99, *range(1000, 1000 + MANY)]), None, "last"]


def _by_id(stdout: bytes) -> dict[Any, dict[str, Any]]:
    """Every answer line by its id (each line must be JSON: nothing else reaches the wire)."""
    answers = [json.loads(line) for line in stdout.splitlines()]
    by_id = {answer["id"]: answer for answer in answers}
    assert len(by_id) == len(answers), "an id answered twice"
    return by_id


def _ids(answers: dict[Any, dict[str, Any]]) -> list[Any]:
    return sorted(i for i in answers if type(i) is int) + [i for i in (None, "last") if i in answers]


def test_serve_from_a_file_answers_every_request_and_a_tool_that_reads_stdin_reads_nothing(tmp_path: Path) -> None:
    """``serve < requests.txt``: the SDK ended the session at the end of the file, cancelling the requests
    still running (of 3,003, about 1,500 answered), and the line it could not read went unanswered."""
    tools = tmp_path / "nosy_tools.py"
    tools.write_text(NOSY_TOOLS)
    done = serve_file(tmp_path, _requests() + _many(MANY), [sys.executable, "-m", "harness_one", "--tools", str(tools), "serve"])
    assert done.returncode == 0, done.stderr[-2000:]
    answers = _by_id(done.stdout)
    assert _ids(answers) == EXPECTED, done.stderr[-2000:]
    assert [answers[10 + n]["result"]["content"][0]["text"] for n in range(len(WAYS))] == ["EOF"] * len(WAYS)
    assert answers[None]["error"]["code"] == -32700 and answers["last"]["result"] == {}


CHATTY = (
    NOSY_TOOLS
    + """
@defineTool(registry=None)
def chatty() -> str:
    \"\"\"Prints.\"\"\"
    print("chatter from a tool")
    return "said"
"""
)


def test_serve_in_process_reads_requests_from_sys_stdin_and_a_tool_reads_nothing(tmp_path: Path) -> None:
    """``main(["serve"])`` in a process whose ``sys.stdin`` is not fd 0 (click's CliRunner): the SDK read
    ``sys.stdin.buffer`` itself, a tool's ``sys.stdin.read()`` took request lines (69 of 3,003 answered),
    and what a tool printed landed between the answers."""
    from click.testing import CliRunner

    from harness_one._cli import main

    tools = tmp_path / "chatty_tools.py"
    tools.write_text(CHATTY)
    call = {"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": {"name": "chatty", "arguments": {}}}
    lines = _requests().splitlines(keepends=True)
    # the two ways that read sys.stdin (fd 0 is the test runner's, not the requests'), then chatty
    requests = b"".join(lines[:4]) + json.dumps(call).encode() + b"\n" + lines[-1] + _many(MANY)
    result = CliRunner(env=server_env(tmp_path)).invoke(main, ["--tools", str(tools), "serve"], input=requests)
    assert result.exit_code == 0, result.output
    answers = _by_id(result.stdout_bytes)
    assert _ids(answers) == [i for i in EXPECTED if i not in (12,)], result.stderr[-2000:]
    assert [answers[10 + n]["result"]["content"][0]["text"] for n in range(2)] == ["EOF", "EOF"]
    assert answers[13]["result"]["content"][0]["text"] == "said"
    assert "chatter from a tool" in result.stderr


def test_every_command_works_with_stderr_closed(tmp_path: Path) -> None:
    """``harness-one ... 2>&-`` exited 1 before doing anything: the logs' set-up asked the closed
    stderr (``sys.stderr`` None) whether it is a terminal, and so did ``run`` for its progress. The
    logs now go nowhere, and ``run`` shows no progress."""
    tools = tmp_path / "add_tools.py"
    tools.write_text(
        "from harness_one import defineTool\n\n"
        "@defineTool(registry=None)\n"
        "def add(a: int, b: int) -> int:\n"
        '    """Adds."""\n'
        "    return a + b\n"
    )

    def run(*args: str, requests: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "harness_one", "--tools", str(tools), *args],
            input=requests,
            stdout=subprocess.PIPE,
            env={**os.environ, **server_env(tmp_path)},
            preexec_fn=lambda: os.close(2),  # the child's stderr closed, as by `2>&-`
            timeout=60,
            check=False,
        )

    listed = run("list", "--json")
    assert listed.returncode == 0
    assert "add" in {tool["name"] for tool in json.loads(listed.stdout)}
    called = run("call", "add", "--args", '{"a": 5, "b": 3}')
    assert (called.returncode, json.loads(called.stdout)["result"]) == (0, 8)
    looped = run("run", requests=b'{"id": 1, "name": "add", "arguments": {"a": 2, "b": 3}}\n')  # it asked stderr for a terminal
    assert (looped.returncode, json.loads(looped.stdout)["result"]) == (0, 5)


def test_what_a_tools_file_prints_as_it_loads_stays_off_the_serve_wire(tmp_path: Path) -> None:
    """``serve`` built its registry before taking stdout over: a banner printed by a ``--tools`` file
    at import went out on the JSON-RPC wire, ahead of the first answer."""
    tools = tmp_path / "banner_tools.py"
    tools.write_text(
        'print("BANNER at import")\n'
        "from harness_one import defineTool\n\n"
        "@defineTool(registry=None)\n"
        "def hello() -> str:\n"
        '    """Says hello."""\n'
        '    return "hi"\n'
    )
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hello", "arguments": {}}},
    ]
    requests = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    done = serve_file(tmp_path, requests, [sys.executable, "-m", "harness_one", "--tools", str(tools), "serve"])
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]  # every line is JSON-RPC
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[1]["result"]["content"][0]["text"] == "hi"
    assert b"BANNER at import" in done.stderr
