"""The MCP client against servers that die, list tools the SDK refuses, or share the loop with slow callers."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness_one import PluginError, ToolExecutionError, ToolRegistry, ToolTimeout
from harness_one.mcp import McpConnectionError, McpSpec, aimport_tools, import_tools

SERVER = str(Path(__file__).with_name("mcp_client_hostile_servers.py"))
LOOP_THREAD = "harness-one-mcp"  # the thread of the loop every MCP connection shares

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def raw(name: str = "raw", prefix: str = "", **config: Any) -> McpSpec:
    return McpSpec(name=name, prefix=prefix, command=(sys.executable, SERVER), env={"RAW_SERVER": json.dumps(config)})


def until(check: Any, seconds: float = 5.0) -> Any:
    """Poll ``check`` until it is true or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_pid(path: Path) -> int:
    assert until(lambda: path.exists() and path.read_text())
    return int(path.read_text())


# --------------------------------------------------------------------------- a dead server is noticed


def test_a_server_that_dies_while_its_child_holds_its_pipes_fails_the_call_at_once_and_the_next_reconnects(
    tmp_path: Path,
) -> None:
    """The end of a server's output was all the client went by: with a child of the server holding the pipe, each
    call waited its whole deadline as a ToolTimeout and the connection was never found lost."""
    pid_file = tmp_path / "child.pid"
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, raw(on_call="crash_once", pid_file=str(pid_file), status=3), call_timeout=30)
    try:
        with pytest.raises(McpConnectionError) as lost:
            registry.call("echo", {"x": "a"})
        assert str(lost.value) == "Lost the connection to MCP server 'raw' during 'echo': the server exited with status 3."
        assert lost.value.tool == "echo"
        assert registry.call("echo", {"x": "b"}) == 'echo {"x": "b"}'  # a new connection, a new server
        child = read_pid(pid_file)
        assert until(lambda: not alive(child))  # what was left of the dead server's group is stopped
    finally:
        remote.close()


def test_a_server_that_exits_at_start_up_is_reported_at_once_with_its_status(tmp_path: Path) -> None:
    """A server that exited before it answered (its child holding the pipe) was 'did not answer within 30 s'."""
    pid_file = tmp_path / "child.pid"
    with pytest.raises(McpConnectionError) as failed:
        import_tools(ToolRegistry(autoload=False), raw(on_start="exit", pid_file=str(pid_file), status=4), connect_timeout=10)
    assert str(failed.value) == "Cannot connect to MCP server 'raw': the server exited with status 4."
    child = read_pid(pid_file)
    assert until(lambda: not alive(child))


# --------------------------------------------------------------------------- tools the SDK refuses


BAD_TOOLS = [
    {"name": "str_schema", "inputSchema": {"type": "string"}},
    {"name": "ok_tool", "inputSchema": {"type": "object"}},
    {"inputSchema": {"type": "object"}},
    {"name": "echo", "inputSchema": {"type": "object"}},
]


def test_a_tool_the_sdk_refuses_goes_to_failures_and_the_others_are_imported() -> None:
    """One tool whose inputSchema was not of type object failed the whole import with a raw pydantic error."""
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, raw(tools=BAD_TOOLS))
    try:
        assert remote.names == {"echo": "echo", "ok_tool": "ok_tool"}
        assert remote.failures == [
            "str_schema: not a valid MCP tool (inputSchema.type: Input should be 'object')",
            "tools[2]: not a valid MCP tool (name: Field required)",
        ]
        assert registry.call("ok_tool", {}) == "ok_tool {}"
    finally:
        remote.close()


def test_a_refresh_imports_the_valid_tools_and_a_failed_refresh_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A listing the SDK refused was dropped silently at each refresh (``except Exception: return``): a new valid tool
    next to the refused one was never added, and nothing said why."""
    caplog.set_level(logging.WARNING)
    then = [*BAD_TOOLS[:2], {"name": "add", "inputSchema": {"type": "object"}}]
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, raw(then_tools=then))
    try:
        assert registry.call("add", {}) == "add {}"  # the server lists `then` now, and says so
        assert until(lambda: "ok_tool" in registry and "echo" not in registry)
        assert remote.failures == ["str_schema: not a valid MCP tool (inputSchema.type: Input should be 'object')"]
    finally:
        remote.close()
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, raw(then_tools=then, list_error_after=1))
    try:
        assert registry.call("add", {}) == "add {}"
        assert until(lambda: "mcp refresh failed" in caplog.text)
        assert "MCP server 'raw' answered tools/list with an error: listing unavailable" in caplog.text
        assert "ok_tool" not in registry and "echo" in registry
    finally:
        remote.close()


# --------------------------------------------------------------------------- nothing slow on the shared loop


class WatchedRegistry(ToolRegistry):
    """A registry that records the threads it is asked in (one that discovers its tool packages loads them then)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.threads: set[str] = set()
        self.block: threading.Event | None = None  # set: the first question waits for it (a slow discovery)
        self.waited: list[bool] = []

    def __contains__(self, name: object) -> bool:
        self.threads.add(threading.current_thread().name)
        if self.block is not None and not self.waited:
            self.waited.append(self.block.wait(5))
        return super().__contains__(name)

    def get(self, name: str) -> Any:
        self.threads.add(threading.current_thread().name)
        return super().get(name)


def test_importing_and_refreshing_ask_the_registry_off_the_shared_loop() -> None:
    registry = WatchedRegistry(autoload=False)
    then = [{"name": "add", "inputSchema": {"type": "object"}}, {"name": "new", "inputSchema": {"type": "object"}}]
    remote = import_tools(registry, raw(then_tools=then))
    try:
        assert registry.threads == {threading.current_thread().name}  # the importer's own thread
        assert registry.call("add", {}) == "add {}"
        assert until(lambda: "new" in remote.names and "echo" not in registry)
        assert LOOP_THREAD not in registry.threads
    finally:
        remote.close()


async def test_an_async_import_asks_the_registry_off_both_loops() -> None:
    registry = WatchedRegistry(autoload=False)
    remote = await aimport_tools(registry, raw())
    try:
        assert registry.threads and LOOP_THREAD not in registry.threads
        assert threading.current_thread().name not in registry.threads  # nor on the caller's loop
        assert sorted(remote.names) == ["add", "echo"]
    finally:
        await remote.aclose()


def test_a_slow_registry_during_an_import_holds_up_no_other_servers_deadline() -> None:
    """A registry loading its tool packages (8 s of imports) on the shared loop held every other server's calls past
    their deadlines."""
    hanging = ToolRegistry(autoload=False)
    a = import_tools(hanging, raw(name="a", on_call="hang"), call_timeout=0.3)
    slow = WatchedRegistry(autoload=False)
    slow.block = block = threading.Event()
    failed: list[BaseException] = []

    def call_a() -> None:
        try:
            hanging.call("echo", {})
        except BaseException as exc:
            failed.append(exc)
        block.set()

    caller = threading.Thread(target=call_a)
    caller.start()
    b = import_tools(slow, raw(name="b"))  # its registry waits (up to 5 s) for server a's call to time out
    try:
        caller.join(5)
        assert slow.waited == [True]  # a's deadline came while b's registry was busy
        assert isinstance(failed[0], ToolTimeout)
        assert str(failed[0]).startswith("Tool 'echo': MCP server 'a' did not answer within 0.3 s")
    finally:
        a.close()
        b.close()


def test_progress_reaches_the_caller_off_the_shared_loop_and_a_slow_one_holds_up_no_other_server() -> None:
    """The caller's on_progress ran on the shared loop: one sleeping 1 s per report held another server's call
    (deadline 2 s) for 5 s."""
    registry = ToolRegistry(autoload=False)
    a = import_tools(registry, raw(name="a", prefix="a", on_call="hang"), call_timeout=0.3)
    b = import_tools(registry, raw(name="b", prefix="b", on_call="progress", progress=2))
    a_done = threading.Event()
    failed: list[BaseException] = []
    threads: list[str] = []
    waited: list[bool] = []

    def call_a() -> None:
        try:
            registry.call("a_echo", {})
        except BaseException as exc:
            failed.append(exc)
        a_done.set()

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        threads.append(threading.current_thread().name)
        if not waited:
            waited.append(a_done.wait(5))  # a slow callback: until server a's call has timed out

    caller = threading.Thread(target=call_a)
    try:
        caller.start()
        assert registry.call("b_echo", {}, on_progress=on_progress) == "echo {}"
        caller.join(5)
        assert waited == [True]
        assert isinstance(failed[0], ToolTimeout)
        assert threads and LOOP_THREAD not in threads
    finally:
        a.close()
        b.close()


# --------------------------------------------------------------------------- a connect timeout is on time


def test_a_connect_timeout_fails_the_import_at_its_deadline_and_the_server_is_stopped_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import waited for its server's stop (the SDK's grace, then SIGTERM, then SIGKILL) before it raised: 3 s
    became 7 s."""
    import mcp.client.stdio as sdk_stdio

    from harness_one.mcp import _client

    monkeypatch.setattr(sdk_stdio, "PROCESS_TERMINATION_TIMEOUT", 0.3)  # the SDK's grace after stdin closes
    pid_file = tmp_path / "server.pid"
    with pytest.raises(McpConnectionError) as late:
        import_tools(ToolRegistry(autoload=False), raw(on_start="hang", pid_file=str(pid_file)), connect_timeout=0.5)
    pending = list(_client._closing)
    server = read_pid(pid_file)
    assert str(late.value) == "MCP server 'raw' did not answer within 0.5 s."
    assert pending and alive(server)  # raised before the server's stop, which goes on
    assert until(lambda: not alive(server) and not _client._closing)


# --------------------------------------------------------------------------- a failed import leaves no tools


class GatedRegistry(ToolRegistry):
    """A registry whose ``add`` waits for ``gate`` (a slow plugin hook, a lazy package load) once ``entered`` is set."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.entered = threading.Event()
        self.gate = threading.Event()

    def add(self, /, tool: Any, *, replace: bool = False, **definition: Any) -> Any:
        self.entered.set()
        assert self.gate.wait(5)
        return super().add(tool, replace=replace, **definition)


@pytest.mark.parametrize("tools", [None, [{"name": "echo", "inputSchema": {"type": "object"}}]], ids=["stopped", "all_added"])
async def test_a_cancelled_async_import_waits_for_its_tools_to_be_taken_out(tools: Any) -> None:
    """Cancelled while its worker thread added the tools, the import raised at once: the thread went on adding, the
    server was closed, and the tools stayed with no handle to close them (calling one started the server again).
    Cancelled during its first of two tools it stops there; cancelled during its only tool it removes it after."""
    from harness_one.mcp import _client

    registry = GatedRegistry(autoload=False)
    registry.gate.set()  # (open for this one)
    registry.add(lambda: "mine", name="mine", description="A local tool.")
    registry.entered.clear()
    registry.gate.clear()
    config = {} if tools is None else {"tools": tools}
    task = asyncio.ensure_future(aimport_tools(registry, raw(**config)))
    assert await asyncio.to_thread(registry.entered.wait, 5)
    task.cancel()
    for _ in range(20):  # the cancellation reaches the import
        await asyncio.sleep(0)
    raised_before_the_thread_ended = task.done()
    registry.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not raised_before_the_thread_ended
    assert sorted(registry.names()) == ["mine"]
    assert await asyncio.to_thread(until, lambda: not _client._closing)  # its server is stopped


def test_an_import_a_plugin_fails_part_way_takes_out_the_tools_it_added_and_puts_back_those_it_replaced() -> None:
    from harness_one import hookimpl

    class Refuse:
        @hookimpl
        def harness_tool_added(self, tool: Any, registry: ToolRegistry) -> None:
            if tool.name == "echo":
                raise RuntimeError("echo refused")

    registry = ToolRegistry(autoload=False)
    mine = registry.add(lambda: "mine", name="add", description="A local tool.")
    registry.plugins.register(Refuse(), name="refuse")
    refused = "Plugin 'refuse' failed in harness_tool_added: RuntimeError: echo refused"
    with pytest.raises(PluginError) as failed:
        import_tools(registry, raw(), replace=True)  # adds `add` (replacing the local one), then `echo`
    assert str(failed.value) == refused
    assert registry.names() == ["add"]
    assert registry.get("add") is mine
    assert registry.call("add") == "mine"
    registry.remove("add")
    with pytest.raises(PluginError) as failed:
        import_tools(registry, raw())
    assert str(failed.value) == refused
    assert registry.names() == []


# --------------------------------------------------------------------------- an idle connection costs nothing


def test_an_idle_stdio_connection_is_not_polled_and_its_end_is_still_noticed_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each idle stdio connection woke the loop every connection shares ten times a second (its return code polled):
    40 idle servers cost 2 % of a CPU. On Linux the process's end is waited for (a pidfd), not polled."""
    from harness_one.mcp import _client

    assert until(lambda: not _client._closing)  # (the servers of earlier tests' failed imports are stopped)
    pauses: list[float] = []
    real = _client._sleep

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        await real(seconds)

    monkeypatch.setattr(_client, "_sleep", pause)
    registry = ToolRegistry(autoload=False)
    idle = import_tools(registry, raw(name="idle", prefix="idle"))
    try:
        assert registry.call("idle_echo", {"x": "a"}) == 'echo {"x": "a"}'
        assert pauses == []  # its watcher has not woken since the server started
        pid_file = tmp_path / "child.pid"
        dying = import_tools(registry, raw(name="dying", on_call="crash_once", pid_file=str(pid_file), status=3))
        try:
            with pytest.raises(McpConnectionError) as lost:
                registry.call("echo", {})
            assert str(lost.value) == "Lost the connection to MCP server 'dying' during 'echo': the server exited with status 3."
            assert until(lambda: not alive(read_pid(pid_file)))
        finally:
            dying.close()
    finally:
        idle.close()


def test_a_tool_listed_as_no_json_object_is_named_by_its_index_once() -> None:
    """``tools[1]: not a valid MCP tool (tools.0: Input should be ...)``: the index of the one-tool check came too."""
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, raw(tools=[{"name": "echo", "inputSchema": {"type": "object"}}, 7, "x"]))
    try:
        assert remote.names == {"echo": "echo"}
        assert remote.failures == [
            "tools[1]: not a valid MCP tool (Input should be a valid dictionary or instance of Tool)",
            "tools[2]: not a valid MCP tool (Input should be a valid dictionary or instance of Tool)",
        ]
    finally:
        remote.close()


# --------------------------------------------------------------------------- a hostile output schema


def test_a_remote_output_schema_with_a_slow_pattern_is_checked_in_bounded_time() -> None:
    """The SDK's client checked results with Python's re, unbounded: ``^(a+)+$`` against 30 a's and a '!' held the
    connection's loop (every call on it) for about 35 s, past the call's timeout. The harness checks them instead,
    with jsonschema-rs (linear-time regular expressions): refused at once, in jsonschema-rs's words (double quotes)."""
    hostile = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    tools = [
        {"name": "slow", "inputSchema": {"type": "object"}, "outputSchema": hostile},
        {"name": "fits", "inputSchema": {"type": "object"}, "outputSchema": hostile},
        {"name": "echo", "inputSchema": {"type": "object"}},
    ]
    text = [{"type": "text", "text": "x"}]
    results = {
        "slow": {"content": text, "structuredContent": {"s": "a" * 30 + "!"}},
        "fits": {"content": text, "structuredContent": {"s": "aaa"}},
    }
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, raw(tools=tools, results=results), timeout=2)
    try:
        refused = registry.try_call("slow", {})
        assert type(refused.error) is ToolExecutionError
        assert str(refused.error) == (
            "Tool 'slow' failed on MCP server 'raw': Invalid structured content returned by tool slow: "
            f'at $.s: "{"a" * 30}!" does not match "^(a+)+$"'
        )
        assert registry.call("fits", {}) == {"s": "aaa"}
        assert registry.call("echo", {}) == "echo {}"
    finally:
        remote.close()


def test_the_servers_output_check_bounds_a_pattern_and_words_other_problems_as_the_sdk_client() -> None:
    from harness_one.mcp._server import _output_check

    check = _output_check({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|a)+(?=b)$"}}})
    # 22: past the backtracking bound (2**22 steps), and a few seconds of Python re, should the check regress
    assert check({"s": "a" * 22 + "!"}) == "at $.s: Error executing regex: Max limit for backtracking count exceeded"
    assert check({"s": 5}) == 'at $.s: 5 is not of type "string"'
    plain = _output_check({"type": "object", "properties": {"n": {"type": "integer"}}})
    assert plain({"n": "x"}) == "at $.n: 'x' is not of type 'integer'"  # no pattern: Python jsonschema, as the SDK


def test_the_bounded_output_check_asserts_no_format_and_fetches_nothing() -> None:
    """As the client's check: ``format`` not asserted (jsonschema-rs asserts it for drafts 4 to 7 by default); a $ref
    to another document is not fetched (the schema cannot be used, as the client says)."""
    from harness_one.mcp._server import _output_check

    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"e": {"type": "string", "format": "email"}, "s": {"type": "string", "pattern": "^a"}},
    }
    assert _output_check(draft7)({"e": "not-an-email", "s": "abc"}) is None
    assert _output_check(draft7)({"e": "x", "s": "b"}) == 'at $.s: "b" does not match "^a"'
    remote = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}, "r": {"$ref": "http://127.0.0.1:9/x"}}}
    problem = _output_check(remote)({"s": "a", "r": 5})
    assert problem is not None and problem.startswith("its output schema cannot be used: ")
    assert _output_check(draft7)({1: "x"}) is not None  # no JSON data: refused, never raised
