"""Remote MCP servers that misbehave: a low-level SDK server over stdio, its tools and replies set per test."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness_one import ToolExecutionError, ToolRegistry, ToolTimeout
from harness_one.mcp import (
    McpConnectionError,
    McpSpec,
    RemoteServer,
    RemoteToolError,
    aimport_tools,
    attach_servers,
    import_tools,
    local_name,
    parse_mcp_spec,
)
from harness_one.mcp._spec import parse_call_timeout

ERROR_TEXT_LIMIT = 10_000  # the documented cap of remote error texts

SERVER = textwrap.dedent(
    r'''
    import asyncio, io, json, os, sys
    import anyio
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.stdio import stdio_server
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
    from mcp.shared.exceptions import MCPError

    CONFIG = json.loads(os.environ["TEST_SERVER"])
    TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in CONFIG["tools"]]
    BUS = InMemorySubscriptionBus()
    STARTED, RELEASED = asyncio.Event(), asyncio.Event()
    LISTINGS = [0]

    def text(value, error=False):
        return {"content": [{"type": "text", "text": value}], "isError": error, "resultType": "complete"}

    async def list_tools(ctx, params):
        if CONFIG.get("list_error"):
            raise MCPError(code=-32603, message=CONFIG["list_error"])
        LISTINGS[0] += 1
        return {"tools": TOOLS, "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}

    async def call_tool(ctx, params):
        name, args = params.name, params.arguments or {}
        if name == "add_tool":  # a new tool, announced both ways (handshake-era and 2026-07-28 clients)
            for added in args["name"] if isinstance(args["name"], list) else [args["name"]]:  # several at once
                TOOLS.append({"name": added, "inputSchema": {"type": "object"}})
            await BUS.publish(ToolsListChanged())
            await ctx.session.send_tool_list_changed()
            return text("added")
        if name == "announce":  # the tools changed (they did not), n times both ways
            for _ in range(args["n"]):
                await BUS.publish(ToolsListChanged())
                await ctx.session.send_tool_list_changed()
            return text("announced")
        if name == "listings":
            return text(str(LISTINGS[0]))
        if name == "huge":
            return text("x" * args["n"])
        if name in ("null_result", "not_a_list"):  # the writer below turns the marker into such a reply
            return text(name.upper())
        if name == "server_error":  # the generic JSON-RPC "server error" code
            if args.get("after_held"):
                await asyncio.wait_for(STARTED.wait(), 30)
            raise MCPError(code=-32000, message=args.get("message", "server error"))
        if name == "held":
            STARTED.set()
            await asyncio.wait_for(RELEASED.wait(), 30)
            return text("held done")
        if name == "release":
            RELEASED.set()
            return text("released")
        if name == "big_error":
            return text("E" * args["n"], error=True)
        if name == "hang":
            await asyncio.sleep(3600)
        if name == "unreadable":  # the writer below turns the marker into a lone surrogate escape
            return text("file LONESURROGATE.txt")
        return text(f"ran {name}")

    class Rewrite:
        """stdout that writes a lone surrogate escape (JSON the SDK cannot parse) for the marker."""

        def __init__(self):
            self.out = anyio.wrap_file(io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))

        async def write(self, data):
            for marker, result in (("NULL_RESULT", None), ("NOT_A_LIST", {"content": "notalist", "password": "hunter2"})):
                if marker in data:
                    data = json.dumps({"jsonrpc": "2.0", "id": json.loads(data)["id"], "result": result}) + "\n"
            return await self.out.write(data.replace("LONESURROGATE", "\\ud800"))

        async def flush(self):
            await self.out.flush()

    server = Server(
        "hostile", on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=ListenHandler(BUS)
    )

    async def main():
        async with stdio_server(stdout=Rewrite()) as (read, write):
            await server.run(read, write, server.create_initialization_options(NotificationOptions(tools_changed=True)))

    anyio.run(main)
    '''
)


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("mcp-hostile") / "hostile_server.py"
    path.write_text(SERVER)
    return str(path)


def spec(script: str, *tools: str, name: str = "h", **config: Any) -> McpSpec:
    return McpSpec(name=name, command=(sys.executable, script), env={"TEST_SERVER": json.dumps({"tools": tools, **config})})


def until(check: Any, seconds: float = 10.0) -> Any:
    """Poll ``check`` (work done on the MCP background loop) until it is true or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


def test_a_new_remote_tool_never_replaces_a_local_one(script: str) -> None:
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: "local transfer", name="transfer_funds")
    remote = import_tools(registry, spec(script, "add_tool"))
    try:
        registry.call("add_tool", {"name": "transfer_funds"})
        assert until(lambda: remote.failures or registry.get("transfer_funds").source), "the server's tools were not re-listed"
        assert registry.get("transfer_funds").source is None and registry.call("transfer_funds") == "local transfer"
        assert remote.failures == ["transfer_funds: the name 'transfer_funds' belongs to another tool; give the server a prefix."]
        assert "transfer_funds" not in remote.names
        registry.call("add_tool", {"name": "audit"})  # the server's own new tools still arrive
        assert until(lambda: "audit" in registry)
        assert registry.get("transfer_funds").source is None and registry.get("audit").source == "mcp:h"
    finally:
        remote.close()


async def test_a_remote_error_with_code_32000_is_a_tool_error_not_a_lost_connection(script: str) -> None:
    registry = ToolRegistry(autoload=False)
    remote = await aimport_tools(registry, spec(script, "held", "server_error", "release"))
    try:
        held = asyncio.create_task(registry.atry_call("held"))  # in flight on the same connection
        failed = await registry.atry_call("server_error", {"message": "database is down", "after_held": True})
        assert isinstance(failed.error, ToolExecutionError) and not isinstance(failed.error, McpConnectionError)
        assert isinstance(failed.error.cause, RemoteToolError) and failed.error.cause.text == "database is down"
        assert (await registry.acall("release")) == "released"
        done = await held
        assert done.ok and done.value == "held done"  # the connection was kept
    finally:
        await remote.aclose()


def test_hashed_names_never_collide(script: str) -> None:
    long = "a" * 55 + "z" * 20  # too long: becomes a[:55] + "_" + hash
    trap = local_name(long)  # a second remote tool with exactly that name (valid, so kept as is)
    assert local_name(long, taken={trap}) not in {trap, long}
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, spec(script, long, trap))
    try:
        assert remote.failures == [] and sorted(remote.names.values()) == sorted([long, trap])
        assert {registry.call(local) for local in remote.names} == {f"ran {long}", f"ran {trap}"}
    finally:
        remote.close()


def test_a_remote_call_has_a_default_deadline(script: str) -> None:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, spec(script, "hang", "ok"), call_timeout=0.3)
    try:
        late = registry.try_call("hang")
        assert isinstance(late.error, ToolTimeout) and late.error.kind == "timeout"
        assert "did not answer within 0.3 s" in late.error.message
        assert registry.call("ok") == "ran ok"  # the connection stays usable
    finally:
        remote.close()
    configured = ToolRegistry(autoload=False)
    [server] = attach_servers(
        configured,
        [
            McpSpec.from_table(
                "cfg",
                {
                    "command": [sys.executable, script],
                    "call_timeout": 0.3,
                    "env": {"TEST_SERVER": json.dumps({"tools": ["hang"]})},
                },
            )
        ],
    )
    try:  # a config table's call_timeout reaches the server (it always had the default)
        assert server.call_timeout == 0.3 and "within 0.3 s" in configured.try_call("hang").for_model()
    finally:
        server.close()
    with_policy = ToolRegistry(autoload=False)
    remote = import_tools(with_policy, spec(script, "hang"), call_timeout=0.3, timeout=1.5)
    try:
        late = with_policy.try_call("hang")  # the timeout policy, not the default deadline, ends it
        assert isinstance(late.error, ToolTimeout) and "timed out after 1.5 s" in late.error.message
    finally:
        remote.close()


def test_the_cli_sets_the_deadline_of_its_mcp_servers(script: str, tmp_path: Path) -> None:
    """``--mcp-call-timeout`` bounds the calls of ``--mcp`` servers' tools (a config table's ``call_timeout`` did)."""
    env = {**os.environ, "HARNESS_ONE_STATE": f"sqlite:///{tmp_path / 'state.sqlite3'}"}
    server = shlex.join(["env", f"TEST_SERVER={json.dumps({'tools': ['hang']})}", sys.executable, script])

    def cli(*options: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "harness_one", "--mcp", f"h={server}", *options, "call", "hang"]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)

    started = time.monotonic()
    late = cli("--mcp-call-timeout", "0.5")
    assert late.returncode == 6, late.stderr  # ToolTimeout's exit code
    assert "did not answer within 0.5 s" in late.stdout and time.monotonic() - started < 30
    for bad in ("0", "-1", "nan", "inf", "soon"):
        refused = cli("--mcp-call-timeout", bad)
        assert refused.returncode == 2 and "expected a positive number of seconds or 'false'" in refused.stderr, bad
    assert parse_call_timeout("false") is None and parse_call_timeout(" 2.5 ") == 2.5
    assert parse_mcp_spec("a=x").call_timeout == 300.0
    assert parse_mcp_spec("a=x", call_timeout=None).call_timeout is None


def test_an_unreadable_reply_fails_its_call_at_once(script: str) -> None:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, spec(script, "unreadable", "ok"), timeout=20)  # without the fix: 20 s, then a timeout
    try:
        result = registry.try_call("unreadable")
        assert isinstance(result.error, ToolExecutionError) and not isinstance(result.error, ToolTimeout)
        assert "the reply could not be read" in result.error.message
        assert registry.call("ok") == "ran ok"
    finally:
        remote.close()


def test_a_reply_that_is_json_but_no_json_rpc_fails_its_call_at_once(script: str) -> None:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, spec(script, "null_result", "not_a_list", "ok"), timeout=20)  # without the fix: 20 s
    try:
        result = registry.try_call("null_result")  # {"jsonrpc": "2.0", "id": N, "result": null}
        assert isinstance(result.error, ToolExecutionError) and not isinstance(result.error, ToolTimeout)
        assert "the reply could not be read" in result.error.message
        bad = registry.try_call("not_a_list").error  # a JSON-RPC response, but no CallToolResult
        assert isinstance(bad, ToolExecutionError) and isinstance(bad.cause, RemoteToolError) and bad.cause.server == "h"
        assert bad.message.startswith("Tool 'not_a_list' failed on MCP server 'h': the reply is not a valid tools/call result (")
        assert bad.message.endswith("content: Input should be a valid list)")  # where, not the remote's input
        assert "notalist" not in bad.message and "hunter2" not in bad.message and "pydantic" not in bad.message
        assert registry.call("ok") == "ran ok"
    finally:
        remote.close()


def test_a_reply_longer_than_max_reply_bytes_fails_its_call_and_keeps_the_connection(script: str) -> None:
    """The SDK's reader split all it held again at each 64 KiB chunk (quadratic: 100 MB took over a minute),
    with no bound."""
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, spec(script, "huge", "ok"), max_reply_bytes=1_000_000, timeout=20)
    try:
        assert registry.call("huge", {"n": 900_000}) == "x" * 900_000  # within the bound: read whole
        error = registry.try_call("huge", {"n": 3_000_000}).error
        assert isinstance(error, ToolExecutionError) and not isinstance(error, ToolTimeout)
        assert isinstance(error.cause, RemoteToolError) and error.cause.kind == "reply_too_large"
        assert "failed on MCP server 'h': the reply was 3,000," in error.message
        assert "more than the limit of 1,000,000 (max_reply_bytes)" in error.message
        assert registry.call("ok") == "ran ok"  # the same connection
        assert registry.call("huge", {"n": 10}) == "x" * 10
    finally:
        remote.close()
    with pytest.raises(ValueError, match="max_reply_bytes must be a positive number of bytes"):
        RemoteServer(spec(script, "ok"), max_reply_bytes=0)


def test_announcements_are_coalesced_and_re_add_only_changed_tools(script: str) -> None:
    """200 announcements re-listed the tools 200 times and re-added every tool each time (an event each)."""
    from harness_one import hookimpl

    registry = ToolRegistry(autoload=False)
    tools = ("announce", "listings", "add_tool", "ok")
    remote = import_tools(registry, spec(script, *tools), rate_limit={"rate": 0.001, "burst": 1})
    added: list[str] = []

    class Watch:
        @hookimpl
        def harness_tool_added(self, tool: Any, registry: ToolRegistry) -> None:
            added.append(tool.name)

    try:
        assert registry.call("ok") == "ran ok"  # its one call in 1,000 s
        before = registry.get("ok")
        registry.plugins.register(Watch(), name="watch")
        added.clear()  # (registering replays the tools there are)
        assert registry.call("announce", {"n": 200}) == "announced"
        time.sleep(0.5)
        assert until(lambda: remote._refreshing is None or remote._refreshing.done())
        assert int(registry.call("listings")) < 50  # one re-listing at a time, one more waiting (not 201)
        assert added == [] and registry.get("ok") is before  # nothing changed: nothing added again
        assert registry.try_call("ok").error.kind == "rate_limited"  # its bucket survived the refreshes
        registry.call("add_tool", {"name": "audit"})
        assert until(lambda: "audit" in registry)
        assert until(lambda: remote._refreshing is None or remote._refreshing.done())
        assert added == ["audit"]  # only the new tool
        assert registry.try_call("ok").error.kind == "rate_limited"
    finally:
        remote.close()


def test_a_gateway_sends_one_list_changed_per_change_not_per_tool(script: str, tmp_path: Path) -> None:
    """``serve`` with an ``--mcp`` server: 200 remote announcements of no change became 3,600 list_changed downstream."""
    from mcp_support import server_env

    remote = shlex.join(
        ["env", f"TEST_SERVER={json.dumps({'tools': ['announce', 'add_tool', 'a', 'b', 'c']})}", sys.executable, script]
    )
    command = [sys.executable, "-m", "harness_one", "--mcp", f"h={remote}", "serve"]
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **server_env(tmp_path)},
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def until_answer(request_id: int) -> list[str]:
        """The methods of what came before the answer to ``request_id``."""
        seen = []
        while (message := json.loads(proc.stdout.readline()))["id" if "id" in message else "method"] != request_id:  # type: ignore[union-attr]
            seen.append(message.get("method"))
        return seen

    try:
        send({"id": 1, "method": "initialize", "params": hello})
        until_answer(1)
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/list"})  # a handshake-era client that listed the tools is told of changes
        until_answer(2)
        send({"id": 3, "method": "tools/call", "params": {"name": "announce", "arguments": {"n": 200}}})
        until_answer(3)
        time.sleep(1)  # the refreshes, and what they would send
        send({"id": 4, "method": "tools/call", "params": {"name": "add_tool", "arguments": {"name": ["d", "e", "f"]}}})
        seen = until_answer(4)
        time.sleep(1)
        send({"id": 5, "method": "ping"})
        seen += until_answer(5)
        assert seen == ["notifications/tools/list_changed"]  # one for the 3 new tools; none for announcements of no change
    finally:
        proc.kill()
        proc.wait()


def test_remote_error_text_is_capped(script: str) -> None:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, spec(script, "big_error", "server_error"))
    try:
        error = registry.try_call("big_error", {"n": 50_000}).error  # an isError result
        assert isinstance(error, ToolExecutionError) and isinstance(error.cause, RemoteToolError)
        assert len(error.cause.text) == ERROR_TEXT_LIMIT and error.cause.text.startswith("EEEE")
        assert error.cause.text.endswith("[error text truncated: 50,000 characters in all, the first 9,928 shown]")
        assert len(error.message) < ERROR_TEXT_LIMIT + 200
        error = registry.try_call("server_error", {"message": "M" * 50_000}).error  # a JSON-RPC error
        assert isinstance(error, ToolExecutionError) and isinstance(error.cause, RemoteToolError)
        assert len(error.cause.text) == ERROR_TEXT_LIMIT and "50,000 characters in all" in error.cause.text
    finally:
        remote.close()


def test_a_tools_list_error_is_a_connection_error(script: str) -> None:
    registry = ToolRegistry(autoload=False)
    with pytest.raises(McpConnectionError, match="answered tools/list with an error: no tools today"):
        import_tools(registry, spec(script, "ok", list_error="no tools today"))
    assert len(registry) == 0
    with pytest.raises(McpConnectionError) as huge:  # cut once, the marker counting the whole message
        import_tools(registry, spec(script, "ok", list_error="E" * 50_000))
    whole = len("MCP server 'h' answered tools/list with an error: ") + 50_000
    assert len(huge.value.message) == ERROR_TEXT_LIMIT and f"{whole:,} characters in all" in huge.value.message
    with pytest.raises(McpConnectionError) as secret:  # the server's words are masked, as any remote text
        import_tools(registry, spec(script, "ok", list_error="backend postgres://app:hunter2@db:5432 refused"))
    assert "hunter2" not in secret.value.message and "db:5432" in secret.value.message


def test_url_credentials_are_masked_in_the_repr() -> None:
    server = RemoteServer(McpSpec(name="api", url="https://alice:TOKEN123@tools.example.com/mcp?q=a@b"))
    assert repr(server) == "<RemoteServer api https://***@tools.example.com/mcp?q=a@b tools=0>"
    assert "TOKEN123" not in repr(RemoteServer(McpSpec(name="api", url="http://TOKEN123@127.0.0.1:9/mcp")))
    spec = McpSpec(name="api", url="https://alice:TOKEN123@tools.example.com/mcp", headers={"Authorization": "Bearer T"})
    assert repr(spec) == "McpSpec(name='api', url='https://***@tools.example.com/mcp', prefix='')"
    assert "TOKEN123" not in str([spec]) and spec.url == "https://alice:TOKEN123@tools.example.com/mcp"
