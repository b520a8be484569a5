"""The MCP server against a second review: structured results the SDK client cannot read (too deep, an int
too long), a ``ToolNotFound`` a tool raised, a flood of progress reports, the output-schema check against the
client's, and ``listChanged`` under ``--stateless``. Over stdio and HTTP with the official SDK client."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_support import server_env
from pydantic import BaseModel, Field

from harness_one import Call, ToolRegistry
from harness_one.mcp import create_server, http_app
from harness_one.mcp._server import MAX_DEPTH, PROGRESS_MESSAGE_CHARS, _fast_check, _output_check

TOOLS = str(Path(__file__).parent / "mcp_tools_results.py")


def results_registry() -> ToolRegistry:
    from mcp_tools_results import fail_deep, nest, power

    registry = ToolRegistry(autoload=False)
    for tool in (nest, power, fail_deep):
        registry.add(tool)
    return registry


@asynccontextmanager
async def connected(transport: str, tmp_path: Path) -> AsyncIterator[Any]:
    """The SDK client on ``harness-one serve`` over stdio (a child process), or on ``http_app`` over HTTP."""
    if transport == "stdio":
        command = [sys.executable, "-m", "harness_one", "--tools", TOOLS, "serve"]
        params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_path), cwd=str(tmp_path))
        async with Client(params) as client:
            yield client
        return
    app = http_app(results_registry())
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:9")
        async with http, Client(streamable_http_client("http://127.0.0.1:9/mcp", http_client=http), mode=transport) as client:
            yield client


# ---------------------------------------------------------------- 1. results the client cannot read


@pytest.mark.parametrize("transport", ["stdio", "auto", "legacy"])
async def test_a_structured_result_the_client_cannot_read_is_the_tools_error(transport: str, tmp_path: Path) -> None:
    """Nested 200 levels, a stdio client waited for ever (its parser refused the line); 300 levels, HTTP
    answered an internal error; an int of 5,000 digits, both. Now each is an error result, and the session goes on."""
    async with connected(transport, tmp_path) as client:
        within = await client.call_tool("nest", {"depth": MAX_DEPTH - 1})  # MAX_DEPTH objects in all
        assert not within.is_error and within.structured_content is not None
        for depth in (MAX_DEPTH, 200, 300, 1000):
            deep = await asyncio.wait_for(client.call_tool("nest", {"depth": depth}), 60)
            text = deep.content[0].text
            assert deep.is_error and f"is nested more than {MAX_DEPTH} levels deep" in text, text
            assert text.startswith("The tool 'nest' returned a result that") and "fault of the tool" in text
        assert (await client.call_tool("power", {"base": 10, "exp": 4299})).structured_content == {"result": 10**4299}
        big = await asyncio.wait_for(client.call_tool("power", {"base": -10, "exp": 4300}), 60)
        assert big.is_error and "an integer of more than 4,300 digits" in big.content[0].text
        assert (await client.call_tool("power", {"base": 2, "exp": 3})).structured_content == {"result": 8}
        failed = await asyncio.wait_for(client.call_tool("fail_deep", {}), 60)  # its own field dropped from _meta
        assert failed.is_error and failed.content[0].text == "deep failure"
        error = failed.meta["harness-one/error"]
        assert error.pop("call_id") and error == {
            "type": "DeepError",
            "kind": "deep",
            "message": "deep failure",
            "tool": "fail_deep",
        }


# ---------------------------------------------------------------- 2. a ToolNotFound the tool raised


async def test_a_tool_not_found_inside_a_tool_is_its_failure_not_an_unknown_name() -> None:
    private = ToolRegistry(autoload=False)
    private.add(lambda: "x", name="admin_delete_all_users", description="private")
    served = ToolRegistry(autoload=False)

    def router(target: str) -> str:
        """Route to a backend operation."""
        return str(private.call(target, {}))

    served.add(router)
    async with Client(create_server(served)) as client:
        routed = await client.call_tool("router", {"target": "admin_"})
        assert routed.is_error and routed.content[0].text.startswith("Tool 'router' failed: ToolNotFound: Unknown tool 'admin_'.")
        assert routed.meta["harness-one/error"]["kind"] == "tool_failed"
        with pytest.raises(MCPError) as unknown:  # a name the served registry does not have: the protocol error
            await client.call_tool("routr", {"target": "x"})
        assert unknown.value.error.code == -32602 and "Did you mean: 'router'" in unknown.value.error.message


# ---------------------------------------------------------------- 3. progress


class _Paused:
    """A clock whose pause between two progress notifications never ends (the call's end cuts it short)."""

    def now(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        pass

    async def asleep(self, seconds: float) -> None:
        await asyncio.Event().wait()


async def test_progress_reports_are_merged_and_the_last_goes_out_before_the_result() -> None:
    """Every report was a notification: 100,000 reports, 18 s of them before the result."""
    registry = ToolRegistry(autoload=False, clock=_Paused())  # type: ignore[arg-type]
    first = asyncio.Event()

    async def flood(call: Call) -> str:
        """Report in a loop that never yields, then wait for the first notification and report again."""
        for i in range(1, 1001):
            call.report_progress(i, 2000, "m" * 5000)
        await first.wait()  # the pump sent 1000 and is pausing
        for i in range(1001, 2001):
            call.report_progress(i, 2000)
        return "done"

    registry.add(flood)
    seen: list[tuple[float, float | None, str | None]] = []

    async def record(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        first.set()

    async with Client(create_server(registry), mode="legacy") as client:  # in memory, 2026-07-28 notifications come last
        result = await client.call_tool("flood", {}, progress_callback=record)
    assert result.content[0].text == "done"
    assert seen == [(1000, 2000, "m" * PROGRESS_MESSAGE_CHARS), (2000, 2000, None)]


# ---------------------------------------------------------------- 5. the output-schema check is the client's


class Quote(BaseModel):
    price: float = Field(multiple_of=0.01)


async def test_the_output_schema_is_checked_as_the_sdk_client_checks_it() -> None:
    """jsonschema-rs let 19.99 through ``multipleOf: 0.01`` and compiled ``(?<name>...)``; the client's
    Python ``jsonschema`` refused the result, so the caller got an exception instead of an answer."""
    registry = ToolRegistry(autoload=False)

    def quote(cents: int) -> Quote:
        """A price."""
        return Quote(price=cents / 100)

    registry.add(quote)
    named = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(?<first>a)b$"}}}
    registry.add(lambda: {"s": "ab"}, name="code", description="A code.", output_schema=named)
    listed = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    registry.add(lambda: {"items": (1, 2)}, name="pair", description="A tuple.", output_schema=listed)
    async with Client(create_server(registry)) as client:
        assert (await client.call_tool("quote", {"cents": 50})).structured_content == {"price": 0.5}
        odd = await client.call_tool("quote", {"cents": 1999})
        assert odd.is_error and "at $.price: 19.99 is not a multiple of 0.01" in odd.content[0].text
        code = await client.call_tool("code", {})
        assert code.is_error and "its output schema cannot be used: '^(?<first>a)b$' is not a 'regex'" in code.content[0].text
        pair = await client.call_tool("pair", {})  # a tuple is a JSON array, as the client reads it
        assert not pair.is_error and pair.structured_content == {"items": [1, 2]}


# ---------------------------------------------------------------- 6. listChanged under --stateless


@pytest.mark.parametrize("stateless", [False, True])
async def test_list_changed_is_advertised_only_where_it_can_be_sent(stateless: bool) -> None:
    app = http_app(results_registry(), stateless=stateless)
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:9")
        async with http, Client(streamable_http_client("http://127.0.0.1:9/mcp", http_client=http), mode="legacy") as client:
            tools = client.server_capabilities.tools
    assert tools is not None and bool(tools.list_changed) is not stateless


def test_a_result_jsonschema_rs_accepts_skips_the_python_check_only_where_the_two_agree() -> None:
    """jsonschema-rs answers a valid result (about 1.7 us against 34 us) for a schema without the keywords the two
    read differently; a result it refuses, and every result of a schema with such a keyword, the Python check
    (the client's) decides and words."""
    plain = {"type": "object", "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
             "$defs": {"t": {"type": "string"}}}  # fmt: skip
    fast = _fast_check(plain, "Draft202012Validator")
    assert fast is not None and fast({"n": 1, "tags": ["a"]}) and not fast({"n": "1"})
    for keyword in ({"pattern": "^a"}, {"multipleOf": 0.01}, {"format": "email"}, {"$id": "https://x/y"}):
        assert _fast_check({"type": "object", "properties": {"v": keyword}}, "Draft202012Validator") is None
    assert _fast_check({"$ref": "https://example.com/s.json"}, "Draft202012Validator") is None
    check = _output_check(plain)
    assert check({"n": 1, "tags": ["a"]}) is None
    assert check({"n": "1"}) == "at $.n: '1' is not of type 'integer'"
