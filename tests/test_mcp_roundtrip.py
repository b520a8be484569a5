"""harness -> MCP -> harness: tools served by one registry (``harness-one serve``), imported by another.

Policies hold on both sides: the serving side's rate limit and timeout, the importing side's
own rate limit and timeout (which cancels the call on the serving side).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp_support import Session, http_server, server_env

from harness_one import CircuitOpen, ManualClock, RateLimitExceeded, ToolExecutionError, ToolRegistry, ToolTimeout
from harness_one.mcp import McpConnectionError, RemoteServer, create_server, import_tools


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-roundtrip")


@pytest.fixture(scope="module")
def url(tmp_module: Path) -> Iterator[str]:
    with http_server(tmp_module) as found:
        yield found


@pytest.fixture(scope="module")
def imported(url: str) -> Iterator[tuple[ToolRegistry, RemoteServer]]:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, url, name="up", prefix="up_", timeout=30.0)  # (a cold first call took 0.5 s under load)
    yield registry, remote
    remote.close()


def events(registry: ToolRegistry, name: str = "up_events") -> list[str]:
    value = registry.call(name)  # a list: the served {"result": [...]} is unwrapped
    assert isinstance(value, list), value
    return [str(v) for v in value]


def test_values_and_schemas_survive_the_trip(imported: tuple[ToolRegistry, RemoteServer]) -> None:
    registry, _ = imported
    add = registry.get("up_add")
    assert add.output_schema == {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
    assert add.idempotent and not add.read_only and add.options["title"] == "Add"
    assert registry.call("up_add", {"a": 20, "b": 22}) == 42  # the {"result": ...} wrapping is undone
    refused = registry.try_call("up_add", {"a": "x", "b": 1})
    assert refused.error is not None and refused.error.kind == "invalid_arguments"  # the remote schema, checked here


def test_the_serving_side_rate_limit(imported: tuple[ToolRegistry, RemoteServer]) -> None:
    registry, _ = imported
    assert registry.call("up_limited") == "ok"
    refused = registry.try_call("up_limited")
    assert isinstance(refused.error, ToolExecutionError)
    assert "rate limited" in refused.error.message
    assert refused.error.cause.kind == "rate_limited"  # type: ignore[union-attr]
    assert refused.error.retry_after is not None and refused.error.retry_after > 900


def test_the_importing_side_policies(url: str) -> None:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, url, name="up", rate_limit={"rate": 0.001, "burst": 1}, timeout=0.3)
    try:
        assert registry.call("add", {"a": 1, "b": 1}) == 2
        assert isinstance(registry.try_call("add", {"a": 1, "b": 1}).error, RateLimitExceeded)  # refused here
        tag = uuid.uuid4().hex[:8]
        timed_out = registry.try_call("wait", {"seconds": 30, "tag": tag})
        assert isinstance(timed_out.error, ToolTimeout) and timed_out.duration < 5
    finally:
        remote.close()
    checker = ToolRegistry(autoload=False)
    probe = import_tools(checker, url, name="up")
    try:
        deadline = time.monotonic() + 10
        while f"cancelled {tag}" not in (seen := events(checker, "events")):
            assert time.monotonic() < deadline, f"the serving side was not cancelled: {seen}"
            time.sleep(0.05)
    finally:
        probe.close()


async def test_served_again(imported: tuple[ToolRegistry, RemoteServer]) -> None:
    registry, _ = imported
    async with Session(create_server(registry)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"up_add", "up_limited", "up_whoami"} <= names
        result = await client.call_tool("up_add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5} and result.content[0].text == "5"


async def test_serve_as_a_gateway_with_config(url: str, tmp_module: Path) -> None:
    """``harness-one serve`` with ``[mcp.servers.up]``: the upstream's tools, prefixed, over stdio."""
    config = tmp_module / "gateway.toml"
    config.write_text(f'[mcp.servers.up]\nurl = "{url}"\nprefix = "up_"\n')
    target = StdioServerParameters(
        command=sys.executable, args=["-m", "harness_one", "--config", str(config), "serve"], env=server_env(tmp_module)
    )
    async with Session(target) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"up_add", "up_wait", "calculate"} <= names  # upstream tools beside the local ones
        result = await client.call_tool("up_add", {"a": 4, "b": 5})
        assert result.structured_content == {"result": 9}


def test_serve_mcp_option_names_the_clash(url: str, tmp_module: Path) -> None:
    """``serve --mcp up=URL``: the upstream is another harness-one with the same tool packages, so names clash."""
    done = subprocess.run(
        [sys.executable, "-m", "harness_one", "serve", "--mcp", f"up={url}"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **server_env(tmp_module)},
        check=False,
    )
    assert done.returncode == 1
    assert "MCP server 'up': tools [" in done.stderr and "give the server a prefix" in done.stderr


def test_one_circuit_per_server(tmp_path: Path) -> None:
    """A dead server opens one circuit: after two lost calls (two tools), a third tool fails fast."""
    clock = ManualClock()
    registry = ToolRegistry(autoload=False, clock=clock)
    with http_server(tmp_path) as url:
        remote = import_tools(
            registry, url, name="up", circuit_breaker={"min_calls": 3, "failure_ratio": 0.5, "open_for": 30, "probes": 1}
        )
        assert registry.get("add").circuit_breaker.key == "mcp:up"  # one circuit for the server, not one per tool
        assert registry.call("add", {"a": 1, "b": 2}) == 3
    try:  # the server process is gone
        for name, arguments in (("add", {"a": 1, "b": 2}), ("events", {})):
            assert isinstance(registry.try_call(name, arguments).error, McpConnectionError)
        assert remote.circuit_state() == "open"
        refused = registry.try_call("whoami")
        assert isinstance(refused.error, CircuitOpen) and refused.error.retry_after == pytest.approx(30)
        assert "the tools sharing its circuit 'mcp:up' are failing repeatedly" in refused.error.message
        assert registry.stats()["tools"]["whoami"]["circuit"]["key"] == "mcp:up"  # the circuit, shared
        assert registry.stats()["tools"]["add"]["circuit"]["state"] == "open"
        clock.advance(31)  # a probe goes through, and fails again
        assert isinstance(registry.try_call("whoami").error, McpConnectionError)
        assert isinstance(registry.try_call("add", {"a": 1, "b": 2}).error, CircuitOpen)
    finally:
        remote.close()


async def test_serve_mcp_prefixes_several_servers(url: str, tmp_module: Path) -> None:
    """``serve --mcp a:=URL --mcp b:up2=URL``: two imports of one upstream, side by side under their prefixes."""
    target = StdioServerParameters(
        command=sys.executable,
        args=["-m", "harness_one", "serve", "--mcp", f"a:={url}", "--mcp", f"b:up2={url}"],
        env=server_env(tmp_module),
    )
    async with Session(target) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"a_add", "up2_add", "calculate"} <= names and "add" not in names
        result = await client.call_tool("up2_add", {"a": 4, "b": 5})
        assert result.structured_content == {"result": 9}


def test_a_forwarded_for_header_is_not_the_client(tmp_path: Path) -> None:
    """uvicorn trusted X-Forwarded-For from 127.0.0.1: a local caller named its own address, so its own
    bucket of a per-client rate limit (20 of 20 calls admitted past a limit of one)."""
    import httpx

    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    headers["mcp-protocol-version"] = "2025-06-18"

    def whoami(client: httpx.Client, url: str, forwarded: str) -> str:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
        answer = client.post(url, headers={**headers, "x-forwarded-for": forwarded}, json=body)
        data = answer.text.split("data:", 1)[1] if answer.text.startswith("event") else answer.text
        return str(json.loads(data)["result"]["structuredContent"]["mcp_client"])

    with http_server(tmp_path, "--stateless") as url, httpx.Client(timeout=10) as client:
        assert {whoami(client, url, f"10.0.{i}.1") for i in range(3)} == {"http:127.0.0.1"}


def test_only_loopback_binds_are_taken_for_private() -> None:
    """``serve`` warns that every tool is open to the network unless the address is a loopback one."""
    from harness_one.mcp._server import _loopback

    assert all(map(_loopback, ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost")))
    assert not any(map(_loopback, ("0.0.0.0", "::", "192.168.1.50", "example.com")))
