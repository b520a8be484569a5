"""Review 25 of the MCP client and discovery: server names as owners, failed tool packages, the listing's
deadline, a remote's retry_after and kind, the Call parameter's name, unknown content blocks."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import harness_one
from harness_one import ToolExecutionError, ToolRegistry
from harness_one._cli import main
from harness_one._discovery import reset_tool_index
from harness_one.mcp import McpConnectionError, McpSpec, RemoteToolError, import_tools
from harness_one.mcp._client import MAX_RETRY_AFTER, _wait
from harness_one.mcp._spec import McpSpecError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="stdio servers as POSIX processes")

#: A raw JSON-RPC stdio MCP server: its tools read from the file $TOOLS_FILE at each tools/list; a call answers
#: with its name and arguments, or as $CALL_REPLY (JSON) says; $PAGES pages of one tool each, $PAGE_DELAY s each.
SERVER = r"""
import json, os, sys, time
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line); mid, method = msg.get("id"), msg.get("method")
    if method == "initialize":
        caps = {"tools": {"listChanged": True}}
        info = {"name": "raw", "version": "1"}
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": caps, "serverInfo": info}})
    elif method == "tools/list":
        if os.environ.get("PAGES"):
            n = int((msg.get("params") or {}).get("cursor") or 0)
            time.sleep(float(os.environ["PAGE_DELAY"]))
            page = {"tools": [{"name": f"t{n}", "inputSchema": {"type": "object"}}]}
            if n < int(os.environ["PAGES"]) - 1:
                page["nextCursor"] = str(n + 1)
            send({"jsonrpc": "2.0", "id": mid, "result": page})
            continue
        with open(os.environ["TOOLS_FILE"]) as f:
            tools = json.load(f)
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
    elif method == "tools/call":
        p = msg["params"]
        reply = os.environ.get("CALL_REPLY")
        if reply:
            sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": %s}\n' % (json.dumps(mid), reply)); sys.stdout.flush()
            continue
        text = os.environ.get("WHO", "srv") + " " + p["name"] + " " + json.dumps(p.get("arguments"), sort_keys=True)
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
"""


class Servers:
    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.script = tmp_path / "server.py"
        self.script.write_text(SERVER)
        self.started: list[Any] = []

    def tools(self, who: str, tools: list[dict[str, Any]]) -> Path:
        path = self.dir / f"{who}.json"
        path.write_text(json.dumps(tools))
        return path

    def spec(self, name: str, who: str, tools: list[dict[str, Any]] | None = None, **env: str) -> McpSpec:
        if tools is not None:
            env["TOOLS_FILE"] = str(self.tools(who, tools))
        return McpSpec(name=name, command=(sys.executable, str(self.script)), env={"WHO": who, **env})


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    made = Servers(tmp_path)
    yield made
    for server in made.started:
        server.close()


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object", "properties": properties}}


# --------------------------------------------------------------------------- 1. one name, one server


def test_a_second_import_of_a_server_name_into_a_registry_is_refused(servers: Servers) -> None:
    """Two unnamed imports were both 'remote': the second's refresh took the first's tools for its own."""
    registry = ToolRegistry(autoload=False)
    servers.started.append(import_tools(registry, servers.spec("remote", "a", [tool("echo")])))
    with pytest.raises(McpSpecError) as refused:
        import_tools(registry, servers.spec("remote", "b", [tool("add_tool")]), replace=True)
    assert str(refused.value) == (
        "MCP server 'remote' is already imported into this registry (an import without name= is called 'remote'): "
        "give each server its own name (name='...', the NAME of --mcp NAME=..., or its [mcp.servers.NAME] table)."
    )
    assert "add_tool" not in registry and registry.call("echo", {}) == "a echo {}"
    other = ToolRegistry(autoload=False)  # another registry: the name is free there
    servers.started.append(import_tools(other, servers.spec("remote", "b", [tool("add_tool")])))
    assert other.call("add_tool", {}) == "b add_tool {}"


def test_a_failed_import_leaves_the_name_free(servers: Servers) -> None:
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: "mine", name="echo", description="Mine.")
    with pytest.raises(harness_one.ToolDefinitionError):
        import_tools(registry, servers.spec("s", "a", [tool("echo")]))
    servers.started.append(import_tools(registry, servers.spec("s", "a", [tool("echo")]), prefix="p"))
    assert registry.call("p_echo", {}) == "a echo {}"


def test_a_refresh_never_takes_a_tool_of_another_server_of_the_same_name(servers: Servers) -> None:
    """A tool is a server's own while it is the very object it added, not while its source reads ``mcp:NAME``:
    server A (its tools all removed, so the name was free again) later announces B's tool name."""
    registry = ToolRegistry(autoload=False)
    a = import_tools(registry, servers.spec("s", "a", [tool("a_tool")]))
    servers.started.append(a)
    registry.remove("a_tool")
    b = import_tools(registry, servers.spec("s", "b", [tool("victim")]))
    servers.started.append(b)
    servers.tools("a", [tool("victim")])
    _wait(a._refresh())
    assert registry.call("victim", {}) == "b victim {}"
    assert a.failures == ["victim: the name 'victim' belongs to another tool; give the server a prefix."]
    servers.tools("a", [])
    _wait(a._refresh())  # gone from A's listing: B's tool stays
    assert registry.call("victim", {}) == "b victim {}"


def test_two_mcp_servers_of_one_name_on_the_command_line_are_a_usage_error(servers: Servers) -> None:
    line = f"{sys.executable} {servers.script}"
    result = CliRunner().invoke(
        main, ["--mcp", f"s={line}", "--mcp", f"s:p={line}", "list"], env={"HARNESS_ONE_STATE": "memory:"}
    )
    assert result.exit_code == 2
    assert "Error: two MCP servers are named 's' (--mcp or [mcp.servers.s]); give each server its own name." in result.output


# --------------------------------------------------------------------------- 2. a tool package that fails to import

BROKEN = """
from harness_one import defineTool

@defineTool
def wipe(path: str) -> str:
    '''Wipe.'''
    return "broken wipe " + path

raise ImportError("needs libfoo >= 2")
"""

WORKING = """
from harness_one import defineTool

@defineTool(registry=None)
def wipe(path: str) -> str:
    '''Wipe.'''
    return "working wipe " + path
"""


def test_a_package_that_fails_to_import_leaves_none_of_its_tools(dists: Any, index_dir: Path) -> None:
    """Its plain @defineTool had registered ``wipe`` in the default registry before the import failed: the broken
    package's tool ran, and shadowed another package's (the conflict kept the broken one)."""
    dists.make("hx-aaa-broken", {"hx_aaa_broken": BROKEN}, {"harness_one.tools": {"wipe": "hx_aaa_broken"}})
    dists.make("hx-zzz-tools", {"hx_zzz_tools": WORKING}, {"harness_one.tools": {"wipe": "hx_zzz_tools:wipe"}})
    for lazy in (True, False):  # a call first (the lookup of one tool), or a listing first
        sys.modules.pop("hx_aaa_broken", None)
        harness_one.refresh_entry_points()
        reset_tool_index()
        old = ToolRegistry.set_default(None)
        try:
            if not lazy:
                ToolRegistry.names()
            assert ToolRegistry.call("wipe", {"path": "/x"}) == "working wipe /x"
            default = ToolRegistry.default()
            assert default.get("wipe").source == "hx-zzz-tools"
            assert default.discovery.conflicts == []
            assert [str(f) for f in default.discovery.failures] == [
                "harness_one.tools:wipe from hx-aaa-broken: ImportError: needs libfoo >= 2"
            ]
        finally:
            ToolRegistry.set_default(old)


# --------------------------------------------------------------------------- 3. one deadline for the whole listing


def test_the_connect_timeout_bounds_the_whole_listing_not_each_page(servers: Servers) -> None:
    """Each page came within connect_timeout, so 100 pages could take 100 times as long."""
    spec = servers.spec("s", "a", PAGES="6", PAGE_DELAY="0.4")  # each page well within 1 s, all of them not
    with pytest.raises(McpConnectionError) as late:
        import_tools(ToolRegistry(autoload=False), spec, connect_timeout=1)
    assert str(late.value) == "MCP server 's' did not list its tools within 1 s."


# --------------------------------------------------------------------------- 4. a remote's retry_after and kind


@pytest.mark.parametrize("wait", [math.nan, math.inf, -math.inf, -1, MAX_RETRY_AFTER + 1, 10**400, "5", True, None])
def test_a_remote_retry_after_that_no_wait_can_be_is_none(wait: Any) -> None:
    error = RemoteToolError("slow down", server="s", tool="t", data={"kind": "rate_limited", "retry_after": wait})
    assert error.retry_after is None and error.kind == "rate_limited"


@pytest.mark.parametrize("wait", [0, 2, 2.5, MAX_RETRY_AFTER])
def test_a_remote_retry_after_within_bounds_is_kept(wait: Any) -> None:
    error = RemoteToolError("slow down", server="s", tool="t", data={"retry_after": wait})
    assert error.retry_after == float(wait) and type(error.retry_after) is float


@pytest.mark.parametrize("kind", ["\x1b[31mred", "x" * 65, "", 7, ["rate_limited"]])
def test_a_remote_kind_that_is_no_short_word_is_none(kind: Any) -> None:
    assert RemoteToolError("no", server="s", tool="t", data={"kind": kind}).kind is None


def test_an_infinite_retry_after_from_a_server_is_not_passed_on(servers: Servers) -> None:
    reply = (
        '{"isError": true, "content": [{"type": "text", "text": "slow down"}], '
        '"_meta": {"harness-one/error": {"kind": "rate_limited", "retry_after": Infinity}}}'
    )
    registry = ToolRegistry(autoload=False)
    servers.started.append(import_tools(registry, servers.spec("s", "a", [tool("get")], CALL_REPLY=reply)))
    with pytest.raises(ToolExecutionError) as failed:
        registry.call("get", {})
    assert str(failed.value) == "Tool 'get' failed on MCP server 's': slow down"
    assert failed.value.retry_after is None
    assert isinstance(failed.value.cause, RemoteToolError) and failed.value.cause.kind == "rate_limited"


# --------------------------------------------------------------------------- 5. the Call parameter's name


def test_a_remote_property_named_like_the_call_parameter_is_an_argument(servers: Servers) -> None:
    """The remote tool's function took the Call as ``_harness_call``: a remote schema with that property was refused."""
    registry = ToolRegistry(autoload=False)
    remote = import_tools(
        registry,
        servers.spec(
            "s", "a", [tool("t1", _harness_call={"type": "string"}, _harness_call_2={"type": "integer"}, x={"type": "string"})]
        ),
    )
    servers.started.append(remote)
    assert remote.failures == [] and remote.names == {"t1": "t1"}
    assert registry.call("t1", {"_harness_call": "c", "_harness_call_2": 2, "x": "y"}) == (
        'a t1 {"_harness_call": "c", "_harness_call_2": 2, "x": "y"}'
    )
    assert registry.get("t1").call_param == "_harness_call_3"


# --------------------------------------------------------------------------- 6. an unknown content block


def test_a_content_block_of_an_unknown_type_is_named(servers: Servers) -> None:
    registry = ToolRegistry(autoload=False)
    reply = '{"content": [{"type": "text", "text": "ok"}, {"type": "video", "data": "x"}]}'
    servers.started.append(import_tools(registry, servers.spec("s", "a", [tool("show")], CALL_REPLY=reply)))
    with pytest.raises(ToolExecutionError) as failed:
        registry.call("show", {})
    assert str(failed.value) == (
        "Tool 'show' failed on MCP server 's': the reply is not a valid tools/call result "
        "(content.1: unknown content type 'video')"
    )
