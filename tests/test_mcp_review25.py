"""Review 25 of the MCP client and discovery: server names as owners, failed tool packages, the listing's
deadline, a remote's retry_after and kind, the Call parameter's name, unknown content blocks."""

from __future__ import annotations

import dataclasses
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
        import_tools(registry, servers.spec("remote", "b", [tool("add_tool")]), prefix="b")
    assert str(refused.value) == (
        "MCP server 'remote' is already imported into this registry (an import without name= is called 'remote'): "
        "give this server its own name (name='...', the NAME of --mcp NAME=..., or its [mcp.servers.NAME] table), "
        "close the other first, or import with replace=True to take the name over."
    )
    assert "b_add_tool" not in registry and registry.call("echo", {}) == "a echo {}"
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


def test_a_refresh_never_takes_a_tool_of_another_server_of_the_same_source(servers: Servers) -> None:
    """A tool is a server's own while it is the very object it added, not while its source reads ``mcp:s``:
    server A (its tools all removed) later announces the name of a tool B, another server, holds."""
    registry = ToolRegistry(autoload=False)
    a = import_tools(registry, servers.spec("s", "a", [tool("a_tool")]))
    servers.started.append(a)
    registry.remove("a_tool")
    victim = harness_one.Tool.create(lambda: "mine", name="victim", description="Mine.")
    victim.source = "mcp:s"
    registry.add(victim)
    servers.tools("a", [tool("victim")])
    _wait(a._refresh())
    assert registry.call("victim", {}) == "mine"
    assert a.failures == ["victim: the name 'victim' belongs to another tool; give the server a prefix."]
    servers.tools("a", [])
    _wait(a._refresh())  # gone from A's listing: the other tool stays
    assert registry.call("victim", {}) == "mine"


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


# --------------------------------------------------------------------------- 3. the listing's two bounds


def test_list_timeout_bounds_the_whole_listing(servers: Servers) -> None:
    """Each page came within connect_timeout, so 100 pages could take 100 times as long."""
    spec = dataclasses.replace(servers.spec("s", "a", PAGES="6", PAGE_DELAY="0.4"), list_timeout=1)
    with pytest.raises(McpConnectionError) as late:
        import_tools(ToolRegistry(autoload=False), spec, connect_timeout=30)
    assert str(late.value) == "MCP server 's' did not list its tools within 1 s (list_timeout)."


# --------------------------------------------------------------------------- 4. a remote's retry_after and kind


@pytest.mark.parametrize("wait", [math.nan, "NaN", -math.inf, "-Infinity", -1, -(10**400), "5", True, None])
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


def test_an_infinite_retry_after_from_a_server_is_cut_to_a_day(servers: Servers) -> None:
    reply = (
        '{"isError": true, "content": [{"type": "text", "text": "slow down"}], '
        '"_meta": {"harness-one/error": {"kind": "rate_limited", "retry_after": Infinity}}}'
    )
    registry = ToolRegistry(autoload=False)
    servers.started.append(import_tools(registry, servers.spec("s", "a", [tool("get")], CALL_REPLY=reply)))
    with pytest.raises(ToolExecutionError) as failed:
        registry.call("get", {})
    assert str(failed.value) == "Tool 'get' failed on MCP server 's': slow down"
    assert failed.value.retry_after == MAX_RETRY_AFTER
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


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (
            '{"content": [{"type": "text", "text": "ok"}, {"type": "video", "data": "x"}]}',
            "content.1: unknown content type 'video'",
        ),
        ('{"content": [{"type": "image", "mimeType": "image/png"}]}', "content.0.ImageContent.data: Field required"),
    ],
)
def test_a_content_block_is_named_by_its_own_type_or_as_unknown(servers: Servers, reply: str, why: str) -> None:
    registry = ToolRegistry(autoload=False)
    servers.started.append(import_tools(registry, servers.spec("s", "a", [tool("show")], CALL_REPLY=reply)))
    with pytest.raises(ToolExecutionError) as failed:
        registry.call("show", {})
    assert str(failed.value) == f"Tool 'show' failed on MCP server 's': the reply is not a valid tools/call result ({why})"


# =========================================================================== review 25, second round


def _package(root: Path, dist: str, files: dict[str, str], entry: str, record: list[str] | None = None) -> Path:
    """A distribution on disk with packages (``files``: path -> source) and the tool entry point ``wipe = entry``."""
    site = root / f"site-{dist}"
    for path, source in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(source)
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[harness_one.tools]\nwipe = {entry}\n")
    if record is not None:
        (info / "RECORD").write_text("".join(f"{line},,\n" for line in record))
    return site


FLAKY_INIT = """
import os
import hx_flaky_impl  # (a module of its own distribution, beside the package: its RECORD lists it)
import hx_other_lib  # (another distribution's)
from . import tools  # registers wipe (plain @defineTool)
if not os.environ.get("HX_FLAKY_READY"):
    raise ImportError("HX_FLAKY_READY is not set yet")
"""

FLAKY_TOOLS = """
import hx_other_lib
hx_other_lib.runs = getattr(hx_other_lib, "runs", 0) + 1
from harness_one import defineTool

@defineTool
def wipe(path: str) -> str:
    '''Wipe.'''
    return "flaky wipe " + path
"""


def test_a_tool_of_a_submodule_that_imported_stays_through_its_package_s_failure_and_retry(
    tmp_path: Path, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python forgets only the module that failed: its submodule that imported stays, and a retry does not run it
    again. Its tool stays registered as that module stays imported (it was taken out, and the retry reported
    success without it); the retry runs only the forgotten module, and the submodule's code ran once."""
    flaky = _package(
        tmp_path,
        "hx-flaky",
        {"hx_flaky/__init__.py": FLAKY_INIT, "hx_flaky/tools.py": FLAKY_TOOLS, "hx_flaky_impl.py": ""},
        "hx_flaky",
        record=["hx_flaky/__init__.py", "hx_flaky/tools.py", "hx_flaky_impl.py", "hx_flaky-1.0.dist-info/METADATA"],
    )
    other = tmp_path / "site-other"
    other.mkdir()
    (other / "hx_other_lib.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(flaky), str(other), *sys.path])
    for name in ("hx_flaky", "hx_flaky.tools", "hx_flaky_impl", "hx_other_lib"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    harness_one.refresh_entry_points()
    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        default.load_entry_points()
        assert [str(f) for f in default.discovery.failures] == [
            "harness_one.tools:wipe from hx-flaky: ImportError: HX_FLAKY_READY is not set yet"
        ]
        assert "hx_flaky" not in sys.modules  # (Python forgot it)
        assert {"hx_flaky.tools", "hx_flaky_impl", "hx_other_lib"} <= set(sys.modules)  # Python keeps them
        assert default.call("wipe", {"path": "/x"}) == "flaky wipe /x"  # so its tool stays
        monkeypatch.setenv("HX_FLAKY_READY", "1")
        default.load_entry_points(refresh=True)
        assert default.discovery.failures == [] and default.discovery.conflicts == []
        assert default.call("wipe", {"path": "/x"}) == "flaky wipe /x"
        assert default.get("wipe").source == "hx-flaky"
        assert sys.modules["hx_other_lib"].runs == 1  # hx_flaky.tools ran once
    finally:
        ToolRegistry.set_default(old)
        for name in ("hx_flaky", "hx_flaky.tools", "hx_flaky_impl", "hx_other_lib"):
            sys.modules.pop(name, None)
        monkeypatch.undo()
        harness_one.refresh_entry_points()


def test_a_broken_package_a_registry_of_its_own_imports_first_leaves_no_tool_in_the_default(dists: Any, index_dir: Path) -> None:
    """Its plain @defineTool registers into the default registry, which recorded it; the undo looked in the registry
    loading the package, and the broken tool stayed in the default (and ran there)."""
    dists.make("hx-aaa-broken", {"hx_aaa_broken": BROKEN}, {"harness_one.tools": {"wipe": "hx_aaa_broken"}})
    dists.make("hx-zzz-tools", {"hx_zzz_tools": WORKING}, {"harness_one.tools": {"wipe": "hx_zzz_tools:wipe"}})
    from harness_one import _discovery

    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        own = ToolRegistry(discover=True)
        assert own.call("wipe", {"path": "/x"}) == "working wipe /x"
        assert "wipe" not in default._tools  # (read without loading: nothing of the broken package's is there)
        assert default.call("wipe", {"path": "/x"}) == "working wipe /x"
        assert default.get("wipe").source == "hx-zzz-tools" and default.discovery.conflicts == []
        # Each record of an import under way goes when it ends (failed or not).
        assert [ep for ep in _discovery._imports if ep.distribution in ("hx-aaa-broken", "hx-zzz-tools")] == []
    finally:
        ToolRegistry.set_default(old)


@pytest.mark.parametrize("wait", [math.inf, "Infinity", MAX_RETRY_AFTER + 1, 172_800, 10**400])
def test_a_remote_retry_after_past_a_day_is_cut_to_a_day(wait: Any) -> None:
    error = RemoteToolError("slow down", server="s", tool="t", data={"retry_after": wait})
    assert error.retry_after == MAX_RETRY_AFTER and type(error.retry_after) is float


def test_a_remote_wait_of_two_days_is_not_retried_at_once(servers: Servers) -> None:
    """A retry_after over a day was dropped: the retry policy then retried the rate-limited call at once."""
    reply = json.dumps(
        {
            "isError": True,
            "content": [{"type": "text", "text": "rate limited"}],
            "_meta": {"harness-one/error": {"type": "RateLimitExceeded", "kind": "rate_limited", "retry_after": 172_800.0}},
        }
    )
    registry = ToolRegistry(autoload=False)
    quota = {**tool("quota"), "annotations": {"readOnlyHint": True}}  # (idempotent: the retry policy retries it)
    spec = servers.spec("s", "a", [quota], CALL_REPLY=reply)
    servers.started.append(import_tools(registry, spec, retry={"attempts": 3, "on": [RemoteToolError]}))
    result = registry.try_call("quota", {})
    assert result.attempts == 1
    assert isinstance(result.error, ToolExecutionError) and result.error.retry_after == MAX_RETRY_AFTER


def taken(name: str) -> str:
    return (
        f"MCP server '{name}' is already imported into this registry: give this server its own name (name='...', "
        "the NAME of --mcp NAME=..., or its [mcp.servers.NAME] table), close the other first, or import with "
        "replace=True to take the name over."
    )


def test_replace_takes_a_server_name_over(servers: Servers) -> None:
    """A re-run notebook cell, or an import again after close(): refused even with replace=True."""
    registry = ToolRegistry(autoload=False)
    first = import_tools(registry, servers.spec("files", "a", [tool("echo")]))
    servers.started.append(first)
    second = import_tools(registry, servers.spec("files", "b", [tool("echo")]), replace=True)
    servers.started.append(second)
    assert registry.call("echo", {}) == "b echo {}"
    assert first.registry is None and second.registry is registry
    servers.tools("a", [tool("a_new")])  # the earlier server's refresh no longer reaches the registry
    _wait(first._refresh())
    assert "a_new" not in registry and registry.call("echo", {}) == "b echo {}"
    with pytest.raises(McpSpecError) as refused:
        import_tools(registry, servers.spec("files", "c", [tool("c_tool")]))  # the new server holds the name now
    assert str(refused.value) == taken("files")


def test_a_closed_server_frees_its_name(servers: Servers) -> None:
    registry = ToolRegistry(autoload=False)
    first = import_tools(registry, servers.spec("files", "a", [tool("echo")]))
    first.close()
    servers.started.append(import_tools(registry, servers.spec("files", "b", [tool("echo")]), prefix="b"))
    assert registry.call("b_echo", {}) == "b echo {}"
    assert first.registry is None  # its tools stay, not refreshed: the name is the new server's


def test_a_server_with_no_tools_yet_holds_its_name(servers: Servers) -> None:
    registry = ToolRegistry(autoload=False)
    servers.started.append(import_tools(registry, servers.spec("s", "a", [])))
    with pytest.raises(McpSpecError) as refused:
        import_tools(registry, servers.spec("s", "b", [tool("b_tool")]))
    assert str(refused.value) == taken("s")
    assert "b_tool" not in registry


def test_a_name_taken_is_refused_before_the_server_starts(servers: Servers, tmp_path: Path) -> None:
    registry = ToolRegistry(autoload=False)
    servers.started.append(import_tools(registry, servers.spec("s", "a", [tool("echo")])))
    started = tmp_path / "started"
    spec = McpSpec(name="s", command=(sys.executable, "-c", f"open({str(started)!r}, 'w')"))
    with pytest.raises(McpSpecError) as refused:
        import_tools(registry, spec, prefix="p")
    assert str(refused.value) == taken("s")
    assert not started.exists()


def test_attach_servers_refuses_two_of_one_name_before_any_connects(tmp_path: Path) -> None:
    from harness_one.mcp import attach_servers

    started = tmp_path / "started"
    command = (sys.executable, "-c", f"open({str(started)!r}, 'w')")
    specs = [McpSpec(name="s", command=command), McpSpec(name="s", command=command, prefix="p")]
    with pytest.raises(McpSpecError) as twice:
        attach_servers(ToolRegistry(autoload=False), specs, failures=[])
    assert str(twice.value) == "two MCP servers are named 's' (--mcp or [mcp.servers.s]); give each server its own name."
    assert not started.exists()


def test_each_page_of_a_listing_is_bounded_by_connect_timeout_not_the_whole(servers: Servers) -> None:
    """One connect_timeout bounded the whole listing: a listing longer than it in all always failed."""
    registry = ToolRegistry(autoload=False)
    spec = servers.spec("s", "a", PAGES="4", PAGE_DELAY="0.4")  # each page well within 1 s, all of them not
    servers.started.append(import_tools(registry, spec, connect_timeout=1))
    assert sorted(registry.names()) == ["t0", "t1", "t2", "t3"]
    with pytest.raises(McpConnectionError) as late:
        import_tools(ToolRegistry(autoload=False), servers.spec("s", "b", PAGES="1", PAGE_DELAY="3"), connect_timeout=0.5)
    assert str(late.value) == "MCP server 's' did not answer a tools/list request within 0.5 s (connect_timeout)."


def test_list_timeout_is_set_in_a_config_table() -> None:
    table = {"command": ["srv"], "list_timeout": 600}
    assert McpSpec.from_table("s", table).list_timeout == 600
    assert McpSpec.from_table("s", {"command": ["srv"]}).list_timeout == 300.0
    with pytest.raises(McpSpecError) as wrong:
        McpSpec.from_table("s", {**table, "list_timeout": 0})
    assert str(wrong.value) == "mcp.servers.s: MCP server 's': 'list_timeout' must be a positive number of seconds, got 0."


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--mcp", "s={cmd}", "--mcp", "s:p={cmd}"],
        ["--mcp", "s={cmd}", "serve", "--mcp", "s:p={cmd}"],
    ],
)
def test_two_servers_of_one_name_through_serve_are_a_usage_error(args: list[str], tmp_path: Path) -> None:
    started = tmp_path / "started"
    cmd = f"{sys.executable} -c \"open('{started}', 'w')\""
    result = CliRunner().invoke(main, [arg.format(cmd=cmd) for arg in args], env={"HARNESS_ONE_STATE": "memory:"})
    assert result.exit_code == 2, result.output
    assert "Error: two MCP servers are named 's' (--mcp or [mcp.servers.s]); give each server its own name." in result.output
    assert not started.exists()


def test_aimport_tools_refuses_a_name_taken_before_the_server_starts(servers: Servers, tmp_path: Path) -> None:
    import asyncio

    from harness_one.mcp import aimport_tools

    registry = ToolRegistry(autoload=False)
    servers.started.append(import_tools(registry, servers.spec("s", "a", [tool("echo")])))
    started = tmp_path / "started"
    spec = McpSpec(name="s", command=(sys.executable, "-c", f"open({str(started)!r}, 'w')"))
    with pytest.raises(McpSpecError) as refused:
        asyncio.run(aimport_tools(registry, spec, prefix="p"))
    assert str(refused.value) == taken("s")
    assert not started.exists()
    other = asyncio.run(aimport_tools(registry, servers.spec("s", "b", [tool("echo")]), replace=True))
    servers.started.append(other)
    assert registry.call("echo", {}) == "b echo {}" and other.registry is registry


# =========================================================================== review 25, third round


def _fresh(monkeypatch: pytest.MonkeyPatch, folders: list[Path], modules: list[str]) -> None:
    """``folders`` first on sys.path, ``modules`` not imported (:func:`_forget` them after the test)."""
    monkeypatch.setattr(sys, "path", [*map(str, folders), *sys.path])
    _forget(modules)


def _forget(modules: list[str]) -> None:
    for name in modules:
        sys.modules.pop(name, None)


SLOW_INIT = """
import hx_gate
hx_gate.runs += 1
from . import early  # registers slow_early
hx_gate.release.wait()  # given up here: the import runs on
from . import late  # registers slow_late
"""


def _registers(name: str) -> str:
    return f"from harness_one import defineTool\n\n@defineTool\ndef {name}() -> str:\n    '''{name}.'''\n    return {name!r}\n"


def test_a_retry_after_an_import_given_up_at_its_time_bound_gets_its_tools_and_runs_it_once(
    tmp_path: Path, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package's modules were forgotten while its import ran on: the retry ran its code a second time, beside
    the first, and failed too. An import given up takes nothing out: the tools it registers (before and after it
    was given up) stay, and the retry waits for it, runs none of its code again and lists them."""
    import threading

    from harness_one._entrypoints import set_import_timeout

    site = _package(
        tmp_path,
        "hx-slow",
        {
            "hx_slow/__init__.py": SLOW_INIT,
            "hx_slow/early.py": _registers("slow_early"),
            "hx_slow/late.py": _registers("slow_late"),
            "hx_gate.py": "import threading\nruns = 0\nrelease = threading.Event()\n",
        },
        "hx_slow",
    )
    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        default.load_entry_points()  # the installed packages: loaded before the bound, and not again
        _fresh(monkeypatch, [site], ["hx_slow", "hx_slow.early", "hx_slow.late", "hx_gate"])
        import hx_gate  # type: ignore[import-not-found]

        set_import_timeout(0.2)  # (the import waits at the gate until the test opens it: it is given up)
        default.load_entry_points(refresh=True)
        assert [str(f) for f in default.discovery.failures] == [
            "harness_one.tools:wipe from hx-slow: ImportTimeout: the import did not finish within 0.2 s "
            "(HARNESS_ONE_IMPORT_TIMEOUT)"
        ]
        assert default.call("slow_early") == "slow_early"  # (registered before it was given up: not taken out)
        running = [t for t in threading.enumerate() if t.name == "harness-one import wipe"]
        hx_gate.release.set()
        for thread in running:
            thread.join()
        assert "hx_slow" in sys.modules and default.call("slow_late") == "slow_late"  # (it ran on)
        set_import_timeout(None)
        default.load_entry_points(refresh=True)
        assert default.discovery.failures == [] and default.discovery.conflicts == []
        assert hx_gate.runs == 1
        assert (default.call("slow_early"), default.call("slow_late")) == ("slow_early", "slow_late")
        assert {default.get("slow_early").source, default.get("slow_late").source} == {"hx-slow"}
        assert default.discovery.loaded["hx-slow"] == ["slow_early", "slow_late"]
    finally:
        if "hx_gate" in sys.modules:
            sys.modules["hx_gate"].release.set()
        set_import_timeout(None)
        ToolRegistry.set_default(old)
        _forget(["hx_slow", "hx_slow.early", "hx_slow.late", "hx_gate"])
        monkeypatch.undo()
        harness_one.refresh_entry_points()


NS_TOOL = """
import os
import hxns.lib  # another distribution's module in the same namespace package
from harness_one import defineTool

@defineTool
def wipe(path: str) -> str:
    '''Wipe.'''
    return "ns wipe " + path

if not os.environ.get("HX_NS_READY"):
    raise ImportError("HX_NS_READY is not set yet")
"""


def test_a_failed_import_leaves_another_distribution_s_module_of_its_namespace_imported(
    tmp_path: Path, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The modules of the package's own top-level name were forgotten: in a namespace package (hxns.tool,
    hxns.lib), another distribution's module too, which then ran a second time (its objects of another class)."""
    tool_site = _package(
        tmp_path, "hx-ns-tool", {"hxns/tool/__init__.py": NS_TOOL}, "hxns.tool", record=["hxns/tool/__init__.py"]
    )
    lib_site = tmp_path / "site-hx-ns-lib"
    (lib_site / "hxns").mkdir(parents=True)
    (lib_site / "hxns/lib.py").write_text(
        "import sys\nRUNS = getattr(sys, '_hx_ns_lib_runs', 0) + 1\nsys._hx_ns_lib_runs = RUNS\n"
    )
    _fresh(monkeypatch, [tool_site, lib_site], ["hxns", "hxns.tool", "hxns.lib"])
    monkeypatch.setattr(sys, "_hx_ns_lib_runs", 0, raising=False)
    harness_one.refresh_entry_points()
    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        default.load_entry_points()  # the installed packages
        before = dict(sys.modules)
        with pytest.raises(harness_one.ToolNotFound) as missing:
            default.call("wipe", {"path": "/x"})
        assert "Its tool package hx-ns-tool failed to load: ImportError: HX_NS_READY is not set yet" in str(missing.value)
        assert [name for name, module in before.items() if sys.modules.get(name) is not module] == []
        assert {"hxns", "hxns.lib"} <= set(sys.modules) and "hxns.tool" not in sys.modules  # as Python left them
        lib = sys.modules["hxns.lib"]
        monkeypatch.setenv("HX_NS_READY", "1")
        default.load_entry_points(refresh=True)
        assert default.call("wipe", {"path": "/x"}) == "ns wipe /x"
        assert sys.modules["hxns.lib"] is lib and lib.RUNS == 1
    finally:
        ToolRegistry.set_default(old)
        _forget(["hxns", "hxns.tool", "hxns.lib"])
        monkeypatch.undo()
        harness_one.refresh_entry_points()


ED_INIT = """
import os
import hx_ed_tools  # the same distribution's second top-level module: registers wipe and scrub
from harness_one import defineTool

@defineTool
def probe() -> str:
    '''Probe.'''
    return "run " + os.environ.get("HX_ED_READY", "first")

if os.environ.get("HX_ED_READY") != "second":
    raise ImportError("HX_ED_READY is not set yet")
"""

ED_TOOLS = """
from harness_one import defineTool

@defineTool
def wipe(path: str) -> str:
    '''Wipe.'''
    return "ed wipe " + path

@defineTool
def scrub() -> str:
    '''Scrub.'''
    return "ed scrub"
"""


def test_an_editable_package_keeps_the_tools_of_its_module_that_imported_and_its_retry_runs_the_failed_one(
    tmp_path: Path, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editable install's RECORD lists only a .pth: its second top-level module stayed imported, and the retry
    reported success without the tools it registered. They stay registered (that module stays imported); the tool
    of the module that failed is taken out, a name code takes meanwhile stays the code's (a conflict), and the
    retry runs that module's current code."""
    src = tmp_path / "src"
    (src / "hx_ed").mkdir(parents=True)
    (src / "hx_ed/__init__.py").write_text(ED_INIT)
    (src / "hx_ed_tools.py").write_text(ED_TOOLS)
    site = _package(tmp_path, "hx-ed", {"_editable_impl_hx_ed.pth": f"{src}\n"}, "hx_ed", record=["_editable_impl_hx_ed.pth"])
    _fresh(monkeypatch, [site, src], ["hx_ed", "hx_ed_tools"])
    harness_one.refresh_entry_points()
    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        default.load_entry_points()
        assert [str(f) for f in default.discovery.failures] == [
            "harness_one.tools:wipe from hx-ed: ImportError: HX_ED_READY is not set yet"
        ]
        assert "probe" not in default._tools  # its module (hx_ed) was forgotten
        assert (default.call("wipe", {"path": "/x"}), default.call("scrub")) == ("ed wipe /x", "ed scrub")
        mine = default.add(lambda: "my probe", name="probe", description="Code's own.")
        monkeypatch.setenv("HX_ED_READY", "second")
        default.load_entry_points(refresh=True)
        assert default.discovery.failures == []
        assert default.call("wipe", {"path": "/x"}) == "ed wipe /x" and default.get("wipe").source == "hx-ed"
        assert default.get("probe") is mine
        assert default.discovery.conflicts == [harness_one.Conflict("probe", kept="code in this process", skipped="hx-ed")]
        assert sys.modules["hx_ed"].probe() == "run second"  # the module that failed ran again, its current code
    finally:
        ToolRegistry.set_default(old)
        _forget(["hx_ed", "hx_ed_tools"])
        monkeypatch.undo()
        harness_one.refresh_entry_points()


def test_a_replace_import_that_fails_leaves_the_earlier_server_of_the_name_as_it_was(servers: Servers) -> None:
    """It took the name over before connecting: the earlier server stopped refreshing, and an import of the name
    without replace was then accepted (two servers of one name)."""
    registry = ToolRegistry(autoload=False)
    first = import_tools(registry, servers.spec("files", "a", [tool("echo")]))
    servers.started.append(first)
    down = McpSpec(name="files", command=(sys.executable, "-c", "import sys; sys.exit(3)"))
    with pytest.raises(McpConnectionError) as failed:
        import_tools(registry, down, replace=True)
    assert str(failed.value) == "Cannot connect to MCP server 'files': the server exited with status 3."
    assert first.registry is registry and first._claimed is registry
    servers.tools("a", [tool("echo"), tool("a_new")])
    _wait(first._refresh())
    assert sorted(registry.names()) == ["a_new", "echo"] and registry.call("a_new", {}) == "a a_new {}"
    with pytest.raises(McpSpecError) as refused:
        import_tools(registry, servers.spec("files", "c", [tool("c_tool")]))
    assert str(refused.value) == taken("files")


def test_a_replace_import_a_plugin_fails_part_way_gives_the_name_back(servers: Servers) -> None:
    from harness_one import PluginError, hookimpl

    class Refuse:
        @hookimpl
        def harness_tool_added(self, tool: Any, registry: ToolRegistry) -> None:
            if tool.name == "zz":
                raise RuntimeError("zz refused")

    registry = ToolRegistry(autoload=False)
    first = import_tools(registry, servers.spec("files", "a", [tool("echo")]))
    servers.started.append(first)
    registry.plugins.register(Refuse(), name="refuse")
    with pytest.raises(PluginError) as failed:
        import_tools(registry, servers.spec("files", "b", [tool("echo"), tool("zz")]), replace=True)
    assert str(failed.value) == "Plugin 'refuse' failed in harness_tool_added: RuntimeError: zz refused"
    assert registry.names() == ["echo"] and registry.call("echo", {}) == "a echo {}"
    assert first.registry is registry and first._claimed is registry
    with pytest.raises(McpSpecError) as refused:
        import_tools(registry, servers.spec("files", "c", [tool("c_tool")]))
    assert str(refused.value) == taken("files")


# =========================================================================== review 25, fourth round: the rule


SHARED_COMMON = _registers("lookup")


def test_a_shared_submodule_s_tool_stays_when_another_entry_point_of_its_package_fails(
    tmp_path: Path, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two entry points of one distribution import one submodule; the first (an extra whose dependency is missing)
    fails. The tool was kept aside for the failed entry point only: the other loaded fine and never got it."""
    site = _package(
        tmp_path,
        "hx-two",
        {
            "hx_two/__init__.py": "",
            "hx_two/common.py": SHARED_COMMON,
            "hx_two/extra.py": "import hx_two.common\nimport hx_missing_dependency\n",
            "hx_two/main.py": "import hx_two.common\n",
        },
        "hx_two.main",
    )
    info = site / "hx_two-1.0.dist-info"
    (info / "entry_points.txt").write_text("[harness_one.tools]\na_extra = hx_two.extra\nlookup = hx_two.main\n")
    _fresh(monkeypatch, [site], ["hx_two", "hx_two.common", "hx_two.extra", "hx_two.main"])
    harness_one.refresh_entry_points()
    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        for _ in range(2):  # the listing, then a retry
            default.load_entry_points(refresh=True)
            assert [str(f) for f in default.discovery.failures] == [
                "harness_one.tools:a_extra from hx-two: ModuleNotFoundError: No module named 'hx_missing_dependency'"
            ]
            assert default.call("lookup") == "lookup" and default.get("lookup").source == "hx-two"
            assert default.discovery.conflicts == []
    finally:
        ToolRegistry.set_default(old)
        _forget(["hx_two", "hx_two.common", "hx_two.extra", "hx_two.main"])
        monkeypatch.undo()
        harness_one.refresh_entry_points()


GHOST_V1 = _registers("drop_table") + "\nimport hx_not_installed_yet\n"


def test_a_tool_deleted_from_a_package_that_failed_does_not_come_back_on_the_retry(
    tmp_path: Path, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failed module's own tool was kept aside and put back after the retry, though the retry ran the module's
    current code, from which the tool was deleted: the old tool came back and ran."""
    site = _package(tmp_path, "hx-ghost", {"hx_ghost/__init__.py": GHOST_V1}, "hx_ghost", record=["hx_ghost/__init__.py"])
    _fresh(monkeypatch, [site], ["hx_ghost"])
    harness_one.refresh_entry_points()
    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        default.load_entry_points()
        assert [str(f) for f in default.discovery.failures] == [
            "harness_one.tools:wipe from hx-ghost: ModuleNotFoundError: No module named 'hx_not_installed_yet'"
        ]
        assert "drop_table" not in default._tools
        (site / "hx_ghost/__init__.py").write_text(_registers("list_tables"))
        import importlib

        importlib.invalidate_caches()
        default.load_entry_points(refresh=True)
        assert default.discovery.failures == []
        assert sorted(n for n, e in default._tools.items() if e.tool.source == "hx-ghost") == ["list_tables"]
        with pytest.raises(harness_one.ToolNotFound, match="Unknown tool 'drop_table'"):
            default.call("drop_table")
    finally:
        ToolRegistry.set_default(old)
        _forget(["hx_ghost"])
        monkeypatch.undo()
        harness_one.refresh_entry_points()


def test_a_failed_import_forgets_the_conflicts_its_forgotten_module_met(dists: Any, index_dir: Path) -> None:
    """A name code had taken: the broken package's tool was skipped (a conflict) and its module then forgotten."""
    dists.make("hx-aaa-broken", {"hx_aaa_broken": BROKEN}, {"harness_one.tools": {"wipe": "hx_aaa_broken"}})
    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        mine = default.add(lambda path: "my wipe " + path, name="wipe", description="Code's own.")
        default.load_entry_points()
        assert default.get("wipe") is mine and default.discovery.conflicts == []
        assert [f.distribution for f in default.discovery.failures] == ["hx-aaa-broken"]
    finally:
        ToolRegistry.set_default(old)


def _plain(x: int) -> int:
    return x


class _Callable:
    def __call__(self, x: int) -> int:
        return x


def test_which_tools_come_from_a_module_python_forgot() -> None:
    import functools
    import types

    from harness_one import Tool
    from harness_one._discovery import _forgotten

    gone = types.ModuleType("hx_gone_module")
    exec("def fn(x: int) -> int:\n    '''Fn.'''\n    return x\n", gone.__dict__)  # its module never in sys.modules
    stand_in = types.ModuleType(__name__)  # a module of this name, but not the one that defined _plain
    wrapped = functools.wraps(gone.fn)(lambda x: x)
    cases = [
        (_plain, False),
        (functools.partial(_plain), False),
        (_Callable(), False),
        (gone.fn, True),
        (functools.partial(gone.fn), True),
        (wrapped, True),  # (its __wrapped__ is the forgotten module's)
    ]
    for fn, forgotten in cases:
        assert _forgotten(Tool.create(fn, name="t", description="T.")) is forgotten, fn
    real = sys.modules[__name__]
    sys.modules[__name__] = stand_in
    try:
        assert _forgotten(Tool.create(_plain, name="t", description="T.")) is True
    finally:
        sys.modules[__name__] = real


FAILS_LATE_INIT = """
import hx_late_gate
from harness_one import defineTool

@defineTool
def late_one() -> str:
    '''Late.'''
    return "late " + str(hx_late_gate.runs)

hx_late_gate.runs += 1
hx_late_gate.release.wait()  # given up here: the import runs on
if hx_late_gate.runs == 1:
    raise ImportError("fails after it was given up")
"""


def test_an_import_that_fails_after_it_was_given_up_is_undone_before_its_retry(
    tmp_path: Path, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given up at its time bound, nothing of it is taken out; it ran on and failed: the retry takes out its
    tools of the module Python forgot, then runs that module's current code."""
    import threading

    from harness_one._entrypoints import set_import_timeout

    site = _package(
        tmp_path,
        "hx-late",
        {
            "hx_late/__init__.py": FAILS_LATE_INIT,
            "hx_late_gate.py": "import threading\nruns = 0\nrelease = threading.Event()\n",
        },
        "hx_late",
    )
    old = ToolRegistry.set_default(None)
    try:
        default = ToolRegistry.default()
        default.load_entry_points()
        _fresh(monkeypatch, [site], ["hx_late", "hx_late_gate"])
        import hx_late_gate  # type: ignore[import-not-found]

        set_import_timeout(0.2)
        default.load_entry_points(refresh=True)
        assert [f.error for f in default.discovery.failures] == [
            "ImportTimeout: the import did not finish within 0.2 s (HARNESS_ONE_IMPORT_TIMEOUT)"
        ]
        first = default.get("late_one")  # (given up: not taken out)
        running = [t for t in threading.enumerate() if t.name == "harness-one import wipe"]
        hx_late_gate.release.set()
        for thread in running:
            thread.join()
        assert "hx_late" not in sys.modules
        set_import_timeout(None)
        default.load_entry_points(refresh=True)
        assert default.discovery.failures == [] and default.discovery.conflicts == []
        assert default.get("late_one") is not first and default.call("late_one") == "late 2"
        assert default.discovery.loaded["hx-late"] == ["late_one"]
    finally:
        if "hx_late_gate" in sys.modules:
            sys.modules["hx_late_gate"].release.set()
        set_import_timeout(None)
        ToolRegistry.set_default(old)
        _forget(["hx_late", "hx_late_gate"])
        monkeypatch.undo()
        harness_one.refresh_entry_points()
