"""The MCP server against a third review: SIGTERM to a ``serve --mcp`` gateway, lines that are not UTF-8, a
request ``id`` holding a lone surrogate, handshake-era HTTP bodies that are no JSON-RPC message, and a
``tools/list`` cursor never issued. Real ``harness-one serve`` processes and the official SDK."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp_support import server_env, serving
from test_mcp_server_review import HEADERS, http, open_session

from harness_one import ToolRegistry
from harness_one.mcp import http_app
from harness_one.mcp._command import _sigterm_noted

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
OPENING = [
    json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO}).encode() + b"\n",
    b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
]
PING = b'{"jsonrpc": "2.0", "id": 99, "method": "ping"}\n'
TOOLS = '''
from harness_one import defineTool

@defineTool(registry=None)
def echo(text: str) -> str:
    """The code points of ``text``."""
    return " ".join(f"U+{ord(c):04X}" for c in text)
'''


def tools_file(tmp_path: Path) -> str:
    path = tmp_path / "echo_tools.py"
    path.write_text(TOOLS)
    return str(path)


def serve_echo(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness_one", "--tools", tools_file(tmp_path), "serve", *extra]


def exchange(tmp_path: Path, lines: list[bytes], answers: int) -> list[dict[str, Any]]:
    """``harness-one serve`` (the echo tool) on raw pipes: ``lines`` written, ``answers`` lines read back."""
    with serving(tmp_path, serve_echo(tmp_path)) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join(lines))
        proc.stdin.flush()
        read = [json.loads(proc.stdout.readline()) for _ in range(answers)]
        proc.stdin.close()
        assert proc.wait(30) == 0
    return read


# ---------------------------------------------------------------- 1. SIGTERM to a gateway


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and not reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _stop(proc: subprocess.Popen[Any], grandchild: int) -> None:
    """A test's cleanup: the gateway killed and reaped, the imported server's child killed if it still runs."""
    proc.kill()
    proc.wait()
    if grandchild and _running(grandchild):
        os.kill(grandchild, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sigterm_to_a_gateway_stops_what_its_imported_stdio_server_started(transport: str, tmp_path: Path) -> None:
    """SIGTERM's default action ended the gateway at once: no exit hook, so the imported server's process group
    was never stopped and its child ran on. Now SIGTERM exits 143 after closing the imported servers."""
    pid_file = tmp_path / "grandchild.pid"
    inner = f"sleep 300 & echo $! > {shlex.quote(str(pid_file))}; exec {shlex.join(serve_echo(tmp_path))}"
    spec = f"inner:in=sh -c {shlex.quote(inner)}"
    command = [sys.executable, "-m", "harness_one", "serve", "--mcp", spec]
    if transport == "http":
        command += ["--transport", "http", "--port", "0"]
    log = tmp_path / "gateway.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env={**os.environ, **server_env(tmp_path)}
        )
    grandchild = 0
    try:
        assert proc.stdin is not None and proc.stdout is not None
        if transport == "stdio":  # answered: serving, the imported server connected
            proc.stdin.write(OPENING[0])
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 0, log.read_text()
        else:
            deadline = time.monotonic() + 60
            while b"serving MCP on" not in log.read_bytes():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
        grandchild = int(pid_file.read_text())
        assert _running(grandchild)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM, log.read_text()
        assert _wait_gone(grandchild, 30), "the imported server's child still runs after the gateway ended"
    finally:
        _stop(proc, grandchild)


def test_a_sigterm_during_the_close_is_noted_and_only_over_the_default_handler() -> None:
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with _sigterm_noted(True) as noted:
        signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # noted once: a second one kills
    assert noted == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with _sigterm_noted(False) as noted:  # SIGTERM taken while serving already: the default action
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert noted == []

    seen: list[int] = []

    def own(signum: int, frame: Any) -> None:
        seen.append(signum)

    signal.signal(signal.SIGTERM, own)
    try:
        with _sigterm_noted(True) as noted:
            assert signal.getsignal(signal.SIGTERM) is own  # a host's handler is left as it is
            signal.raise_signal(signal.SIGTERM)
        assert seen == [signal.SIGTERM] and noted == [] and signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


SIGNAL_TOOLS = """
import signal
import time
from pathlib import Path

from harness_one import defineTool

@defineTool(registry=None)
async def busy(folder: str) -> str:
    \"\"\"Run on the event loop (the main thread) until the file go is there.\"\"\"
    Path(folder, "started").write_text("")
    while not Path(folder, "go").exists():
        time.sleep(0.01)
    return "done"

@defineTool(registry=None)
def stuck(folder: str) -> str:
    \"\"\"A sync tool without a timeout that never returns (on a thread of serve's pool).\"\"\"
    Path(folder, "started").write_text("")
    while signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        time.sleep(0.01)
    Path(folder, "default").write_text("")
    time.sleep(600)
    return "never"
"""


#: An MCP server of a few lines (no SDK to import: it starts at once): every request answered, no tools.
TINY_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message and "method" in message:
        result = {"tools": []} if message["method"] == "tools/list" else {}
        if message["method"] == "initialize":
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "tiny", "version": "0"}}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def _call_and_wait(tmp_path: Path, tool: str) -> subprocess.Popen[bytes]:
    """``harness-one serve`` with :data:`SIGNAL_TOOLS`, a call of ``tool`` under way (its ``started`` file written)."""
    tools = tmp_path / "signal_tools.py"
    tools.write_text(SIGNAL_TOOLS)
    command = [sys.executable, "-m", "harness_one", "--tools", str(tools), "serve"]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **server_env(tmp_path)}
    )
    assert proc.stdin is not None and proc.stdout is not None
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {"folder": str(tmp_path)}}}
    proc.stdin.write(b"".join([*OPENING, json.dumps(call).encode() + b"\n"]))
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0
    assert _wait_for(tmp_path / "started", proc), "the call did not start"
    return proc


def _wait_for(path: Path, proc: subprocess.Popen[bytes], seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_sigterm_while_an_async_tool_runs_on_the_loop_ends_serve_with_143_and_no_traceback(tmp_path: Path) -> None:
    """SIGTERM raised SystemExit in the tool's code: the call failed ("SystemExit: 143") and serving went on, or the
    raise landed in a transport callback (tracebacks, exit 1). Now the loop takes it once the tool yields."""
    proc = _call_and_wait(tmp_path, "busy")
    try:
        proc.send_signal(signal.SIGTERM)  # while the tool's code runs on the main thread
        (tmp_path / "go").write_text("")
        code = proc.wait(10)  # stdin still open: only SIGTERM ends it
        out, err = proc.communicate()
        assert code == 128 + signal.SIGTERM, err.decode()
        assert b"Traceback" not in err and b"Error" not in err, err.decode()
        assert b"SystemExit" not in out  # no call failed of it
    finally:
        proc.kill()
        proc.wait()


def test_a_second_sigterm_ends_serve_while_a_sync_tool_without_timeout_runs(tmp_path: Path) -> None:
    """The first SIGTERM cancels the call, and the exit waits for its thread; the default handler is back, so a second
    one ends the process (it took a SIGKILL: every SIGTERM raised SystemExit again)."""
    proc = _call_and_wait(tmp_path, "stuck")
    try:
        proc.send_signal(signal.SIGTERM)
        assert _wait_for(tmp_path / "default", proc, 10), "the default SIGTERM handler is not back"
        assert proc.poll() is None  # the thread still runs: the exit waits for it
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigterm_during_the_gateways_close_still_stops_the_imported_servers_child(tmp_path: Path) -> None:
    """The spec's shutdown (close stdin, wait, SIGTERM): SIGTERM came while the gateway closed its imported server
    (seconds: the SDK's exit wait, then the group's SIGTERM-to-SIGKILL grace) and ended it at once, the server's
    child left running. Now it is noted: the close ends, then the gateway exits 143."""
    pid_file, closed, server = tmp_path / "grandchild.pid", tmp_path / "closed", tmp_path / "tiny_server.py"
    server.write_text(TINY_SERVER)
    q = shlex.quote
    inner = f"sleep 300 & echo $! > {q(str(pid_file))}; {q(sys.executable)} {q(str(server))}; : > {q(str(closed))}; sleep 30"
    command = [sys.executable, "-m", "harness_one", "serve", "--mcp", f"inner:in=sh -c {q(inner)}"]
    log = tmp_path / "gateway.log"  # a file: the child left running would hold a pipe open
    with log.open("wb") as err:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env={**os.environ, **server_env(tmp_path)}
        )
    grandchild = 0
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(OPENING[0])
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        grandchild = int(pid_file.read_text())
        proc.stdin.close()  # serve returns and closes the imported server: its serve ends, its shell sleeps on
        assert _wait_for(closed, proc), "the gateway did not close the imported server"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM, log.read_text()
        assert _wait_gone(grandchild, 10), "the imported server's child still runs after the gateway ended"
    finally:
        _stop(proc, grandchild)


# ---------------------------------------------------------------- 2. a line that is not UTF-8


def test_a_line_that_is_not_utf8_is_a_parse_error_not_a_call_with_other_arguments(tmp_path: Path) -> None:
    """Decoded with U+FFFD, the call ran with "a\\ufffdb", text the client never sent; HTTP refuses the same bytes."""
    call = b'{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "%s"}}}\n'
    lines = [
        call % (b"1", b"a\xffb"),  # a bad byte in an argument: the request's id reads
        call % (b'"two\xfe"', b"ok"),  # a bad byte in the id itself: no id to answer on
        b'{"jsonrpc": "2.0", "id": 3, "result": {"x": "\xff"}}\n',  # a response: never answered
        call % (b"4", b"a\xc3\xa9b"),  # valid UTF-8 (e acute) runs as before
        PING,
    ]
    bad_arg, bad_id = lines[0].index(b"\xff"), lines[1].index(b"\xfe")  # where the bad bytes are
    answers = exchange(tmp_path, [*OPENING, *lines], 5)[1:]
    assert answers[0] == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32700, "message": f"Parse error: the line is not valid UTF-8 (byte 0xff at position {bad_arg})"},
    }
    assert answers[1] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": f"Parse error: the line is not valid UTF-8 (byte 0xfe at position {bad_id})"},
    }
    assert answers[2]["id"] == 4 and answers[2]["result"]["content"][0]["text"] == "U+0061 U+00E9 U+0062"
    assert answers[3] == {"jsonrpc": "2.0", "id": 99, "result": {}}


# ---------------------------------------------------------------- 3. an id holding a lone surrogate


def test_an_id_holding_a_lone_surrogate_is_answered_on_a_null_id(tmp_path: Path) -> None:
    """Answered on "\\ufffd" (the lone surrogate made text): the id of another request of the client's."""
    lines = [
        b'{"jsonrpc": "2.0", "id": "\\ufffd", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}\n',
        b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "id": "a\\udc00", "method": "ping", "params": 5}\n',
        PING,
    ]
    answers = exchange(tmp_path, [*OPENING, *lines], 5)[1:]
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for answer in answers:
        by_id.setdefault(answer["id"], []).append(answer)
    assert [a["result"]["content"][0]["text"] for a in by_id["\ufffd"]] == ["U+0078"]  # its own answer, only
    assert [a["error"]["code"] for a in by_id[None]] == [-32600, -32600]
    assert all(a["error"]["message"].startswith("Invalid request: ") for a in by_id[None])
    assert by_id[99] == [{"jsonrpc": "2.0", "id": 99, "result": {}}]


# ---------------------------------------------------------------- 4. handshake-era HTTP bodies that are no message


@pytest.mark.parametrize("stateless", [False, True])
async def test_an_http_body_that_is_no_message_is_answered_as_over_stdio(stateless: bool) -> None:
    """The SDK answered -32602, id null, and a pydantic dump quoting the input (and a pydantic link)."""
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: "pong", name="pong", description="Answer pong.")
    async with http(http_app(registry, stateless=stateless)) as client:
        headers = HEADERS if stateless else await open_session(client)
        cases = [
            ('[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]', None, "Invalid request: expected a JSON object, got list"),
            (
                '{"jsonrpc": "2.0", "id": 3, "method": 5}',
                3,
                "Invalid request: JSONRPCRequest.method: Input should be a valid string",
            ),
            (
                '{"jsonrpc": "1.0", "id": "x", "method": "ping"}',
                "x",
                "Invalid request: JSONRPCRequest.jsonrpc: Input should be '2.0'",
            ),
            ('{"jsonrpc": "2.0", "id": "\\ud800", "method": 5}', None, None),  # the SDK's parser refuses it: its -32700
            ("[1]", None, "Invalid request: expected a JSON object, got list"),
            # a malformed response: its id is one of the server's requests, never answered on
            (
                '{"jsonrpc": "2.0", "id": 14, "result": 5, "error": {}}',
                None,
                "Invalid request: JSONRPCRequest.method: Field required",
            ),
        ]
        for body, request_id, message in cases:
            response = await client.post("/mcp", content=body, headers=headers)
            assert response.status_code == 400
            reply = response.json()
            if message is None:
                assert reply["error"]["code"] == -32700, reply
                continue
            assert reply == {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": message}}
            assert int(response.headers["content-length"]) == len(response.content)
        # Without a session, and after the SDK's own checks: a bad Host is still its 421.
        first = await client.post("/mcp", content="[1]", headers=HEADERS)
        assert first.status_code == 400 and first.json()["error"] == {
            "code": -32600,
            "message": "Invalid request: expected a JSON object, got list",
        }
        foreign = await client.post("/mcp", content="[1]", headers={**headers, "host": "evil.example"})
        assert foreign.status_code == 421 and foreign.text == "Invalid Host header"
        assert (await client.post("/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "ping"}, headers=headers)).status_code == 200


# ---------------------------------------------------------------- 5. a tools/list cursor never issued


async def test_a_tools_list_cursor_is_refused_over_stdio(tmp_path: Path) -> None:
    """A forged or stale cursor returned the whole listing again; the spec says -32602."""
    command = serve_echo(tmp_path)
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_path), cwd=str(tmp_path))
    async with Client(params) as client:
        listed = await client.list_tools()
        assert "echo" in [t.name for t in listed.tools] and listed.next_cursor is None
        with pytest.raises(MCPError) as refused:
            await client.list_tools(cursor="forged-or-stale", cache_mode="refresh")
        assert refused.value.error.code == -32602
        assert refused.value.error.message == "Invalid cursor: this server sends every tool on one page"


async def test_a_tools_list_cursor_is_refused_over_http() -> None:
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: "pong", name="pong", description="Answer pong.")
    async with http(http_app(registry, json_response=True)) as client:
        headers = await open_session(client)
        body = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": "x"}}
        refused = (await client.post("/mcp", json=body, headers=headers)).json()
        assert refused == {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32602, "message": "Invalid cursor: this server sends every tool on one page"},
        }
        listed = (await client.post("/mcp", json={**body, "params": {}}, headers=headers)).json()
        assert [t["name"] for t in listed["result"]["tools"]] == ["pong"] and "nextCursor" not in listed["result"]
