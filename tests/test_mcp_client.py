"""Remote MCP tools as harness tools: a small server written with the official SDK, over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness_one import CircuitOpen, ToolDefinitionError, ToolExecutionError, ToolRegistry, ToolTimeout
from harness_one.mcp import McpConnectionError, McpSpec, RemoteServer, RemoteToolError, aimport_tools, import_tools
from harness_one_plugins import CachePlugin

SERVER = textwrap.dedent(
    '''
    import asyncio, os
    from pathlib import Path
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = MCPServer("sdk-test")
    COUNT = {"n": 0}
    LOG = []

    @server.tool(name="files.read", title="Read a file", annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    @server.tool(name="x" * 70)
    def long_name() -> str:
        return "long"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def hit() -> dict[str, int]:
        """Count a call."""
        COUNT["n"] += 1
        return {"count": COUNT["n"]}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def peek() -> int:
        """Calls counted so far."""
        return COUNT["n"]

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def fail() -> str:
        """Always fails."""
        raise ToolError("remote says no to postgres://app:s3cret@db/x")

    @server.tool()
    async def sleep(seconds: float) -> str:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            LOG.append("cancelled")
            raise
        return "slept"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def log() -> list[str]:
        return LOG

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def die() -> str:
        os._exit(3)

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    def die_once(marker: str) -> str:
        if not Path(marker).exists():
            Path(marker).write_text("x")
            os._exit(3)
        return "ok"

    server.run("stdio")
    '''
)


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("mcp-client") / "sdk_server.py"
    path.write_text(SERVER)
    return str(path)


def spec(script: str, name: str = "sdk", **options: Any) -> McpSpec:
    return McpSpec(name=name, command=(sys.executable, script), **options)


@pytest.fixture(scope="module")
def plain(script: str) -> Iterator[tuple[ToolRegistry, RemoteServer]]:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, spec(script, prefix="s_"))
    yield registry, remote
    remote.close()


def until(check: Any, seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_names_schemas_and_annotations(plain: tuple[ToolRegistry, RemoteServer]) -> None:
    registry, remote = plain
    assert remote.failures == []
    names = set(remote.names)
    assert {"s_files_read", "s_hit", "s_peek", "s_fail", "s_sleep", "s_die", "s_die_once"} <= names
    long = next(n for n, r in remote.names.items() if r == "x" * 70)
    assert len(long) <= 64 and long.startswith("s_xxx") and long in registry
    assert remote.names["s_files_read"] == "files.read"  # reversible
    export = registry.export("openai")  # every name passes the strictest provider rule
    assert all(len(t["function"]["name"]) <= 64 for t in export.tools)
    read = registry.get("s_files_read")
    assert read.parameters["required"] == ["path"] and read.parameters["properties"]["path"]["type"] == "string"
    assert (read.read_only, read.idempotent, read.open_world, read.destructive) == (True, True, False, None)
    assert read.options["title"] == "Read a file" and read.options["mcp_tool"] == "files.read"
    assert read.source == "mcp:sdk" and {"mcp", "mcp:sdk"} <= read.tags
    fail = registry.get("s_fail")
    assert (fail.read_only, fail.idempotent, fail.destructive) == (False, False, True)
    assert registry.get("s_die_once").idempotent
    assert registry.export("mcp").tools  # and they can be served again


def test_values(plain: tuple[ToolRegistry, RemoteServer]) -> None:
    registry, _ = plain
    # The SDK's server wraps a str return as {"result": ...} without marking it: kept as the remote declared it.
    assert registry.call("s_files_read", {"path": "/etc/motd"}) == {"result": "contents of /etc/motd"}
    assert registry.get("s_files_read").output_schema["required"] == ["result"]
    assert registry.call("s_hit")["count"] >= 1


def test_remote_error_is_a_tool_execution_error(plain: tuple[ToolRegistry, RemoteServer]) -> None:
    registry, _ = plain
    result = registry.try_call("s_fail")
    assert isinstance(result.error, ToolExecutionError)
    assert "failed on MCP server 'sdk'" in result.error.message and "remote says no" in result.error.message
    assert "postgres://[REDACTED]@db/x" in result.error.message and "s3cret" not in result.for_model()  # a remote's text too
    assert isinstance(result.error.cause, RemoteToolError) and result.error.cause.tool == "fail"
    refused = registry.try_call("s_files_read", {"path": 3})  # checked here, before the remote sees it
    assert refused.error is not None and refused.error.kind == "invalid_arguments"


def test_a_remote_error_text_is_masked_and_cut_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The remote text was cut, then masked twice (ToolExecutionError's own masking, then again): a password
    across the cut was shown, and a text that masking made longer was cut a second time."""
    import mcp_types as types

    from harness_one import _redact
    from harness_one._errors import outside_text

    across = "E" * 9_900 + " postgres://bob:" + "S" * 100 + "@db/x " + "E" * 1_000  # the password spans the 10,000 cut
    longer = "token: a\n" * 2_000  # 18,000 characters, 36,000 masked
    shown = {text: outside_text(text) for text in (across, longer)}  # masked whole, then cut
    assert "SSS" not in shown[across] and "36,000 characters in all" in shown[longer]
    masked: list[int] = []
    mask = _redact.mask_secrets

    def counted(text: str) -> str:
        masked.append(len(text))
        return mask(text)

    monkeypatch.setattr(_redact, "mask_secrets", counted)
    server = RemoteServer(McpSpec(name="db", url="http://127.0.0.1:9/mcp"))
    for text, expected in shown.items():
        result = types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        masked.clear()
        with pytest.raises(ToolExecutionError) as failed:
            server._value(result, "query", "db_query", False)
        error = failed.value
        assert len(masked) == 1 and error.message == f"Tool 'db_query' failed on MCP server 'db': {expected}"
        assert isinstance(error.cause, RemoteToolError) and error.cause.text == expected and error.__cause__ is error.cause
        assert (error.kind, error.tool, error.to_dict()["cause"]) == (
            "tool_failed",
            "db_query",
            "harness_one.mcp.RemoteToolError",
        )


def test_lost_connection_is_typed_and_the_next_call_reconnects(plain: tuple[ToolRegistry, RemoteServer]) -> None:
    registry, _ = plain
    registry.call("s_hit")
    died = registry.try_call("s_die")
    assert isinstance(died.error, McpConnectionError) and died.attempts == 1
    assert "Lost the connection to MCP server 'sdk'" in died.error.message
    assert registry.call("s_peek") == {"result": 0}  # a new server process: its counter started again


async def test_async_api_and_reconnect_with_retry(script: str, tmp_path: Path) -> None:
    registry = ToolRegistry(autoload=False)
    remote = await aimport_tools(registry, spec(script), retry={"attempts": 3, "initial": 0, "max_delay": 0})
    try:
        assert await registry.acall("files_read", {"path": "a"}) == {"result": "contents of a"}
        marker = tmp_path / "died"
        result = await registry.atry_call("die_once", {"marker": str(marker)})  # idempotent: retried, reconnected
        assert result.ok and result.value == {"result": "ok"} and result.attempts == 2
        again = await registry.atry_call("die", {})
        assert isinstance(again.error, McpConnectionError) and again.attempts == 1  # not idempotent: never re-run
    finally:
        await remote.aclose()


def test_policies_on_remote_tools(script: str) -> None:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(
        registry,
        spec(script, policies={"cache_ttl": 60}),
        timeout=0.5,
        circuit_breaker={"min_calls": 2, "failure_ratio": 0.5, "open_for": 60},
    )
    try:
        assert registry.get("hit").cache_ttl == 60 and registry.get("fail").cache_ttl is None  # only where safe
        first, second = registry.call("hit"), registry.call("hit")
        assert first == second == {"count": 1}
        assert registry.call("peek") == {"result": 1}  # the second call never reached the server
        slow = registry.try_call("sleep", {"seconds": 30})
        assert isinstance(slow.error, ToolTimeout)
        assert until(lambda: "cancelled" in json.dumps(registry.call("log"))), "the remote call was not cancelled"
        for _ in range(10):  # the server's circuit counts every tool's calls: the successes above too
            error = registry.try_call("fail").error
            if isinstance(error, CircuitOpen):
                break
            assert isinstance(error, ToolExecutionError)
        assert isinstance(error, CircuitOpen)
        assert isinstance(registry.try_call("sleep", {"seconds": 0}).error, CircuitOpen)  # one circuit for all its tools
        assert remote.circuit_state() == "open"
    finally:
        remote.close()


def test_options_given_to_import_tools_reach_every_tool(script: str) -> None:
    """``options`` for every imported tool (``{"cache": False}`` for a server whose answers vary)
    used to clash with the client's own (``TypeError``: options given twice)."""
    registry = ToolRegistry(plugins={"cache": CachePlugin(ttl=60)}, autoload=False)
    remote = import_tools(registry, spec(script), options={"cache": False, "team": "search"})
    try:
        tool = registry.get("hit")
        assert tool.options == {"cache": False, "team": "search", "mcp_server": "sdk", "mcp_tool": "hit"}
        assert [registry.call("hit"), registry.call("hit")] == [{"count": 1}, {"count": 2}]  # not from the cache
    finally:
        remote.close()
    with pytest.raises(ToolDefinitionError, match="options must be a mapping, got list"):
        import_tools(ToolRegistry(autoload=False), spec(script), options=["cache"])


def test_name_clash_needs_a_prefix(script: str) -> None:
    registry = ToolRegistry(autoload=False)

    def peek() -> int:
        """Local."""
        return 7

    registry.add(peek)
    with pytest.raises(Exception, match="already registered; give the server a prefix"):
        import_tools(registry, spec(script))
    assert registry.call("peek") == 7 and len(registry) == 1


def test_cli_mcp_option_for_call_and_export(script: str, tmp_path: Path) -> None:
    """``harness-one --mcp NAME=COMMAND``: the remote tools beside the installed ones, for every command."""
    mcp = ["--mcp", f"sdk={sys.executable} {script}"]
    env = {**os.environ, "HARNESS_ONE_STATE": f"sqlite:///{tmp_path / 'state.sqlite3'}"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "harness_one", *mcp, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)

    called = cli("call", "files_read", "--args", '{"path": "/x"}')
    assert called.returncode == 0 and json.loads(called.stdout)["result"] == {"result": "contents of /x"}
    assert "Traceback" not in called.stderr  # the remote server was closed at exit, not left writing to a closed pipe
    exported = cli("export", "--format", "anthropic")
    assert exported.returncode == 0, exported.stderr
    assert {"files_read", "hit", "calculate"} <= {t["name"] for t in json.loads(exported.stdout)}
    mcp[1] = f"sdk:remote={sys.executable} {script}"  # NAME:PREFIX=
    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    assert "remote_files_read" in listed.stdout and "remote_hit" in listed.stdout


def test_a_remote_tool_error_crosses_a_pickle_whole() -> None:
    """Its constructor takes keyword arguments only: loading a pickled ToolExecutionError carrying one failed."""
    import pickle

    cause = RemoteToolError(
        "x" * 20_000 + " password=hunter2", server="s", tool="t", data={"kind": "rate_limited", "retry_after": 3}
    )
    err = ToolExecutionError(cause, tool="t")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back.cause, RemoteToolError) and back.message == err.message
    assert (back.cause.text, back.cause.server, back.cause.tool, back.cause.kind, back.cause.retry_after) == (
        cause.text,
        "s",
        "t",
        "rate_limited",
        3.0,
    )
    assert "hunter2" not in back.cause.text


def test_a_remote_default_its_own_schema_refuses_is_dropped_not_the_tool(tmp_path: Path) -> None:
    """A server's ``factor: int = None`` says ``{"type": "integer", "default": null}``: the tool is
    imported, the default is not filled in (the remote applies its own when the argument is absent)."""
    path = tmp_path / "defaults_server.py"
    path.write_text(
        textwrap.dedent(
            """
            from mcp.server.mcpserver import MCPServer

            server = MCPServer("defaults")

            @server.tool()
            def scaled(x: int, factor: int = None) -> int:
                return x * (factor or 1)

            server.run("stdio")
            """
        )
    )
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, spec(str(path), name="defaults"))
    try:
        assert remote.failures == []
        factor = registry.get("scaled").parameters["properties"]["factor"]
        assert factor.get("type") == "integer" and "default" not in factor
        assert registry.call("scaled", {"x": 4}) == {"result": 4}
        assert registry.call("scaled", {"x": 4, "factor": 3}) == {"result": 12}
    finally:
        remote.close()


def _listed(bad: int, size: int = 30) -> Any:
    """A remote tool of ``size`` optional properties (pydantic's ``str | None = None``), the first ``bad`` of
    them FastMCP's ``x: int = None`` (``{"type": "integer", "default": null}``, a default its schema refuses)."""
    import mcp_types

    optional = {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    properties = {f"p{i}": {"type": "integer", "default": None} if i < bad else optional for i in range(size)}
    return mcp_types.Tool(
        name="wide", description="Many optional arguments.", input_schema={"type": "object", "properties": properties}
    )


@pytest.mark.parametrize(("bad", "checks"), [(0, 1), (3, 3)])
def test_a_remote_schemas_defaults_are_checked_once(monkeypatch: pytest.MonkeyPatch, bad: int, checks: int) -> None:
    """Building a remote tool checked the defaults of its schema twice: once to drop those it refuses, then
    again in Tool.create. Now once for a schema whose defaults are good (the common case); a schema with
    defaults to drop is checked, dropped from and checked again (three)."""
    from harness_one import _schema

    seen = []
    check = _schema._bad_defaults
    monkeypatch.setattr(_schema, "_bad_defaults", lambda *a: seen.append(1) or check(*a))
    server = RemoteServer(McpSpec(name="s", command=("true",)))
    (tool,) = server._tools([_listed(bad)], {})
    assert server.failures == [] and len(seen) == checks
    properties = tool.parameters["properties"]
    assert ["default" in properties[f"p{i}"] for i in range(4)] == [i >= bad for i in range(4)]


def test_a_remote_schema_with_more_bad_defaults_than_are_dropped_is_still_refused() -> None:
    """Past 32 bad defaults the schema comes back unchanged from the drop, and the definition check refuses it."""
    server = RemoteServer(McpSpec(name="s", command=("true",)))
    assert server._tools([_listed(33, size=40)], {}) == []
    (failure,) = server.failures
    assert failure.startswith("wide: Tool 'wide': parameters: at #/properties/p0/default, the default does not match")


_CLOSING_LOGS = """
import logging
import sys

from harness_one import define_tool
from harness_one.mcp import _client

_real = _client.RemoteServer._close


async def _closing(self):
    logging.getLogger("mcp.client.stdio").warning("closing %s with token=%s", self.spec.name, "sk-live-abcdef123456")
    await _real(self)
    print("closed", self.spec.name, "open:", len(_client._open), file=sys.stderr, flush=True)


_client.RemoteServer._close = _closing


@define_tool
def local(x: int) -> int:
    '''A local tool beside the remote ones.'''
    return x
"""


def test_the_cli_closes_its_mcp_servers_as_the_command_ends_their_records_masked(script: str, tmp_path: Path) -> None:
    """A command's ``--mcp`` servers close before the command gives its logging back: a record the close
    logs is written in the command's form, masked, and no connection is left for the exit to close."""
    tools = tmp_path / "closing_logs.py"
    tools.write_text(_CLOSING_LOGS)
    env = {**os.environ, "HARNESS_ONE_STATE": "memory://"}
    command = [sys.executable, "-m", "harness_one", "--tools", str(tools), "--mcp", f"sdk={sys.executable} {script}"]
    done = subprocess.run(
        [*command, "--log-format", "json", "list"], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "files_read" in done.stdout
    assert "closed sdk open: 0" in done.stderr  # closed by the command, not at exit (a tool's print goes to stderr)
    records = [json.loads(line) for line in done.stderr.splitlines() if "closing sdk" in line]
    assert len(records) == 1 and records[0]["logger"] == "mcp.client.stdio", done.stderr
    assert "token=[REDACTED]" in records[0]["event"] and "sk-live-abcdef123456" not in done.stderr
