"""MCP serving and consuming: ``Call.wants_progress`` (what an imported tool reads to ask its server for progress),
a call of a tool ``serve`` does not have answered ``-32602`` whatever its arguments, and the SDK's log of a stdio
reply it cannot parse, cut to its first problem (it quoted the reply's head and tail)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import mcp.client.stdio as sdk_stdio
import pytest
from mcp import MCPError, StdioServerParameters
from mcp_support import Session, serve_command, serve_file, server_env

from harness_one import Call, ToolExecutionError, ToolRegistry, ToolTimeout
from harness_one.mcp import McpSpec, import_tools

# --------------------------------------------------------------------------- 1. Call.wants_progress


def test_wants_progress_says_whether_the_caller_passed_on_progress() -> None:
    registry = ToolRegistry(autoload=False)
    seen: list[bool] = []

    def probe(call: Call) -> str:
        """Note whether anyone listens for progress."""
        seen.append(call.wants_progress)
        return "ok"

    registry.add(probe)

    def listen(*report: Any) -> None:
        pass

    registry.call("probe")
    registry.call("probe", on_progress=listen)
    registry.try_call("probe", context={"who": "me"})  # a call made by Call(...) rather than the fast path
    registry.try_call("probe", context={"who": "me"}, on_progress=listen)
    asyncio.run(registry.acall("probe"))
    asyncio.run(registry.acall("probe", on_progress=listen))
    assert seen == [False, True, False, True, False, True]


def test_wants_progress_is_read_only() -> None:
    registry = ToolRegistry(autoload=False)
    calls: list[Call] = []

    def probe(call: Call) -> str:
        """Keep the call."""
        calls.append(call)
        return "ok"

    registry.add(probe)

    registry.call("probe")
    with pytest.raises(AttributeError):
        calls[0].wants_progress = True  # type: ignore[misc]


# --------------------------------------------------------------------------- 2. serve: a call of an unknown tool

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
OPENING = [
    json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO}),
    '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
]


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


async def _sdk_answers(tmp_path: Path, name: str) -> list[Any]:
    """What the SDK's client gets from a stdio ``harness-one serve`` for calls of ``name``: arguments the SDK reads,
    holding an integer past the int-to-text limit (answered by serve itself), nested past the SDK's reader's 200
    levels (read again, passed on)."""
    command = serve_command()
    target = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_path))
    found: list[Any] = []
    async with Session(target) as client:
        for arguments in ({"a": 1}, {"n": 10**5000}, {"a": _deep(250)}):
            try:
                found.append(await asyncio.wait_for(client.call_tool(name, arguments), 30))
            except MCPError as exc:
                found.append((exc.code, exc.message))
    return found


async def test_a_call_of_an_unknown_tool_is_answered_minus_32602_whatever_its_arguments(tmp_path: Path) -> None:
    """Arguments serve answers itself (an integer past the int-to-text limit) got an isError result naming the tool."""
    unknown = await _sdk_answers(tmp_path, "nope")
    assert unknown[0][0] == -32602 and unknown[0][1].startswith("Unknown tool 'nope'.")
    assert unknown == [unknown[0]] * 3
    known = await _sdk_answers(tmp_path, "noisy")  # a tool the registry has: its isError results, as before
    assert [result.is_error for result in known[1:]] == [True, True]
    assert "$.n: a number of 5001 digits is too long to read" in known[1].content[0].text
    assert "nested more than" in known[2].content[0].text


def test_a_call_of_an_unknown_tool_nested_too_deeply_to_read_is_answered_minus_32602(tmp_path: Path) -> None:
    """Nesting too deep for Python's JSON reader too, and arguments that are no object, which the SDK's client
    never sends (raw lines); the SDK refuses the latter before the name is seen, alike for every name."""
    call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "%s", "arguments": %s}}'
    deep = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    lines = [*OPENING, call % (1, "nope", "{}"), call % (2, "nope", deep), call % (3, "noisy", deep)]
    lines += [call % (4, "nope", "[1, 2]"), call % (5, "noisy", "[1, 2]")]
    done = serve_file(tmp_path, "\n".join([*lines, ""]).encode())
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.decode().splitlines())}
    assert answers[1]["error"]["code"] == -32602 and answers[1]["error"]["message"].startswith("Unknown tool 'nope'.")
    assert answers[2]["error"] == answers[1]["error"]
    assert answers[3]["result"]["isError"] is True
    assert "$: arguments are nested too deeply to read" in answers[3]["result"]["content"][0]["text"]
    assert answers[4]["error"] == answers[5]["error"]
    assert answers[4]["error"] == {
        "code": -32602,
        "message": "Invalid request parameters: params.arguments: Input should be a valid dictionary",
        "data": "",
    }


# --------------------------------------------------------------------------- 3. the SDK's log of an unreadable reply

#: A raw stdio server whose every tools/call answer the SDK cannot parse: ``lone`` a 1 MB line with a lone surrogate
#: escape before its last characters (the secret), ``junk`` JSON that is no JSON-RPC message, the secret first.
SERVER = textwrap.dedent(
    """
    import json, sys
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if method == "initialize":
            info = {"name": "raw", "version": "1"}
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": info}
            out = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("lone", "junk")]
            out = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
        elif method == "tools/call" and message["params"]["name"] == "lone":
            text = "x" * 1_000_000 + "\\\\ud800 password=hunter2-tail"
            out = '{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", "text": "%s"}]}}' % (
                json.dumps(request_id), text)
        elif method == "tools/call":
            out = json.dumps({"password": "hunter2-head", "jsonrpc": "2.0", "id": request_id, "result": None})
        elif request_id is not None:
            out = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            continue
        sys.stdout.write(out + "\\n")
        sys.stdout.flush()
    """
)


def test_an_unreadable_stdio_reply_is_logged_as_its_first_problem_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The SDK logged a traceback and pydantic's dump, which quoted the reply's head and tail (a secret unmasked)."""
    script = tmp_path / "raw_server.py"
    script.write_text(SERVER)
    registry = ToolRegistry(autoload=False)
    spec = McpSpec(name="raw", command=(sys.executable, str(script)))
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    remote = import_tools(registry, spec, connect_timeout=30, call_timeout=30)
    try:
        for name in ("lone", "junk"):
            error = registry.try_call(name).error
            assert isinstance(error, ToolExecutionError) and not isinstance(error, ToolTimeout)
            assert "the reply could not be read" in error.message
    finally:
        remote.close()
    records = [r for r in caplog.records if r.name == sdk_stdio.__name__]
    assert [r.getMessage() for r in records] == [
        "Failed to parse JSONRPC message from server (MCP server 'raw'): "
        "Invalid JSON: unexpected end of hex escape at line 1 column 1000084",
        "Failed to parse JSONRPC message from server (MCP server 'raw'): JSONRPCRequest.method: Field required",
    ]
    assert all(r.levelno == logging.ERROR and r.exc_info is None for r in records)
    assert "hunter2" not in caplog.text and "Traceback" not in caplog.text and "input_value" not in caplog.text
    assert len(caplog.text) < 2_000  # of a 1 MB reply


def test_the_sdks_log_outside_a_connection_is_left_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    """An SDK client the application opens itself keeps the SDK's own record (the filter acts in harness-one's
    connections only)."""
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    assert isinstance(sdk_stdio._parse_line('{"password": "hunter2"}'), ValueError)
    (record,) = [r for r in caplog.records if r.name == sdk_stdio.__name__]
    assert record.getMessage() == "Failed to parse JSONRPC message from server" and record.exc_info is not None
