"""The official MCP SDK client against ``harness-one serve`` (stdio and streamable HTTP), and the server API."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from mcp import MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_support import Session, http_server, serve_command, server_env
from mcp_types import ToolListChangedNotification

from harness_one import ToolRegistry
from harness_one.mcp import ERROR_META_KEY, create_server, http_app

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-server")


@pytest.fixture(scope="module")
def http_url(tmp_module: Path) -> Any:
    with http_server(tmp_module) as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["stdio", "http", "http-legacy"])
async def client(request: pytest.FixtureRequest, tmp_module: Path) -> AsyncIterator[Any]:
    """One connection per transport for the whole module: stdio (a child per connection), HTTP 2026-07-28 and 2025-11-25."""
    if request.param == "stdio":
        command = serve_command()
        target: Any = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_module))
        options: dict[str, Any] = {}
    else:
        target = request.getfixturevalue("http_url")
        options = {"mode": "legacy"} if request.param == "http-legacy" else {}
    owner = Session(target, **options)
    async with owner as session:
        session.transport = request.param
        session.received = owner.messages  # what the server sent unasked (notifications)
        yield session


async def events(client: Any) -> list[str]:
    result = await client.call_tool("events", {})
    return list(json.loads(result.content[0].text))


async def until(client: Any, text: str, seconds: float = 10.0) -> list[str]:
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        seen = await events(client)
        if text in seen or asyncio.get_running_loop().time() > deadline:
            return seen
        await asyncio.sleep(0.05)


async def test_protocol_revision(client: Any) -> None:
    expected = "2025-11-25" if client.transport == "http-legacy" else "2026-07-28"
    assert client.protocol_version == expected
    assert client.server_info is None or client.server_info.name == "harness-one"
    assert client.server_capabilities.tools is not None and client.server_capabilities.tools.list_changed


async def test_list_tools(client: Any) -> None:
    tools = (await client.list_tools()).tools
    names = [t.name for t in tools]
    assert names == sorted(names)
    assert {"add", "limited", "slow", "wait", "events", "whoami"} <= set(names)
    add = next(t for t in tools if t.name == "add")
    assert add.title == "Add" and add.description == "Add two integers."
    assert add.input_schema["required"] == ["a", "b"]
    assert add.output_schema["properties"] == {"result": {"type": "integer"}}
    hints = add.annotations
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
        False,
        True,
        True,
    )  # undeclared: MCP's default
    reader = next(t for t in tools if t.name == "events").annotations
    assert reader.read_only_hint is True and reader.destructive_hint is False


async def test_call(client: Any) -> None:
    result = await client.call_tool("add", {"a": 2, "b": 40})
    assert not result.is_error
    assert result.content[0].text == "42"
    assert result.structured_content == {"result": 42}


async def test_argument_error_is_a_tool_result(client: Any) -> None:
    result = await client.call_tool("add", {"a": "two", "b": 1})
    assert result.is_error
    text = result.content[0].text
    assert "$.a: expected integer" in text and "Fix the arguments" in text
    assert result.structured_content is None  # data that does not fit the output schema goes in _meta
    error = result.meta[ERROR_META_KEY]
    assert error["kind"] == "invalid_arguments"
    assert [p["path"] for p in error["problems"]] == ["$.a"]
    missing = await client.call_tool("add", {"a": 1})
    assert missing.is_error and "$.b" in missing.content[0].text


async def test_rate_limit_refusal_has_retry_after(client: Any) -> None:
    first = await client.call_tool("limited", {})
    second = await client.call_tool("limited", {})
    assert not first.is_error and first.content[0].text == "ok"
    assert second.is_error
    error = second.meta[ERROR_META_KEY]
    assert error["kind"] == "rate_limited"
    assert 900 < error["retry_after"] <= 1000  # 0.001 tokens per second
    assert "rate limited" in second.content[0].text


async def test_timeout_cancels_the_tool(client: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    started = asyncio.get_running_loop().time()
    result = await client.call_tool("slow", {"seconds": 30, "tag": tag})
    assert asyncio.get_running_loop().time() - started < 10
    assert result.is_error and result.meta[ERROR_META_KEY]["kind"] == "timeout"
    assert "timed out after 0.2 s" in result.content[0].text
    assert f"cancelled {tag}" in await until(client, f"cancelled {tag}")


@pytest.mark.parametrize("tool", ["wait", "wait_sync"])
async def test_cancelling_the_request_cancels_the_call(client: Any, tool: str) -> None:
    """stdio and 2025-11-25 HTTP send notifications/cancelled; 2026-07-28 HTTP closes the response stream.

    An async tool's task is cancelled; a sync tool sees ``Call.cancelled``.
    """
    tag = uuid.uuid4().hex[:8]
    call = asyncio.create_task(client.call_tool(tool, {"seconds": 60, "tag": tag}))
    assert f"started {tag}" in await until(client, f"started {tag}")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    seen = await until(client, f"cancelled {tag}")
    assert f"cancelled {tag}" in seen and f"finished {tag}" not in seen


async def test_progress_reaches_the_client(client: Any) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def record(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await client.call_tool("test_tool_with_progress", {}, progress_callback=record)
    assert result.content[0].text == "progress done"
    # Before the result, in order; reports made while one is paced (50 ms) are merged, the last always sent.
    assert seen[0] == (0, 100, "0%") and seen[-1] == (100, 100, "100%")
    assert set(seen) <= {(0, 100, "0%"), (50, 100, "50%"), (100, 100, "100%")}
    seen.clear()
    result = await client.call_tool("count_up", {"n": 5}, progress_callback=record)  # reported from a worker thread
    steps = [p for p, _, _ in seen]
    assert result.content[0].text == "5" and steps[-1] == 5 and steps == sorted(set(steps)) and set(steps) <= {1, 2, 3, 4, 5}
    seen.clear()
    result = await client.call_tool("odd_progress", {}, progress_callback=record)  # NaN went out as null and was dropped
    assert result.content[0].text == "done" and seen == [(2, None, None)]


async def test_tool_failure_and_unknown_tool(client: Any) -> None:
    failed = await client.call_tool("test_error_handling", {})
    assert failed.is_error
    assert failed.content[0].text.endswith("RuntimeError: This tool intentionally returns an error for testing")
    assert failed.meta[ERROR_META_KEY]["kind"] == "tool_failed"
    with pytest.raises(MCPError) as err:
        await client.call_tool("ad", {})
    assert err.value.code == -32602 and "Did you mean: 'add'" in err.value.message


async def test_lone_surrogates_in_results_and_errors_go_out_as_u_fffd(client: Any) -> None:
    """One result or error with a lone surrogate once took the stdio server down (HTTP: a 500)."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def record(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    done = await client.call_tool("surrogates", {}, progress_callback=record)
    assert done.content[0].text == "a\ufffdb" and done.structured_content == {"result": "a\ufffdb"}
    assert seen == [(1, 2, "step \ufffd")]
    failed = await client.call_tool("surrogates", {"fail": True})
    assert failed.is_error and failed.content[0].text.endswith("ValueError: bad \ufffd value")
    assert failed.meta[ERROR_META_KEY]["message"] == failed.content[0].text
    assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}  # still serving


async def test_client_identity_reaches_the_call_context(client: Any) -> None:
    who = json.loads((await client.call_tool("whoami", {})).content[0].text)
    assert who["mcp_transport"] == ("stdio" if client.transport == "stdio" else "http")
    assert who["mcp_client"]
    if client.transport == "http-legacy":
        assert who["mcp_session"] and who["mcp_client"] == f"session:{who['mcp_session']}"
    if client.transport == "http":
        assert who["mcp_session"] is None and who["mcp_client"] == "http:127.0.0.1"


# --------------------------------------------------------------------------- the in-process server API


def small_registry() -> ToolRegistry:
    registry = ToolRegistry(autoload=False)

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    registry.add(add)
    return registry


def extra(x: int) -> int:
    """Added while serving."""
    return x


async def test_list_changed_after_a_tool_is_added_while_serving(client: Any) -> None:
    """``harness-one serve`` itself: a tool added at run time is announced on every transport."""
    name = f"grown_{client.transport.replace('-', '_')}"
    await client.list_tools()
    if client.protocol_version == "2026-07-28":
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("grow", {"name": name})
            event = await asyncio.wait_for(subscription.__anext__(), 10)
        assert type(event).__name__ == "ToolsListChanged"
    else:
        await client.call_tool("grow", {"name": name})
        for _ in range(500):
            if any(isinstance(m, ToolListChangedNotification) for m in client.received):
                break
            await asyncio.sleep(0.01)
        assert any(isinstance(m, ToolListChangedNotification) for m in client.received)
    assert name in {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}


async def test_list_changed_on_a_handshake_connection() -> None:
    registry = small_registry()
    owner = Session(create_server(registry), mode="legacy")

    async def notified(count: int) -> int:
        for _ in range(500):
            seen = sum(isinstance(m, ToolListChangedNotification) for m in owner.messages)
            if seen >= count:
                return seen
            await asyncio.sleep(0.01)
        return seen

    async with owner as session:
        assert [t.name for t in (await session.list_tools()).tools] == ["add"]
        registry.add(extra)
        assert await notified(1) == 1
        assert [t.name for t in (await session.list_tools(cache_mode="refresh")).tools] == ["add", "extra"]
        registry.remove("extra")
        assert await notified(2) == 2
    assert not any(name.startswith("harness_one.mcp.server") for name in registry.plugins.names())


async def test_list_changed_on_a_2026_subscription() -> None:
    registry = small_registry()
    async with Session(create_server(registry)) as session:
        assert session.protocol_version == "2026-07-28"
        async with session.listen(tools_list_changed=True) as subscription:
            registry.add(extra)
            event = await asyncio.wait_for(subscription.__anext__(), 10)
        assert type(event).__name__ == "ToolsListChanged"
        assert [t.name for t in (await session.list_tools(cache_mode="refresh")).tools] == ["add", "extra"]


async def test_http_app_principal_dns_rebinding_and_body_limit() -> None:
    registry = ToolRegistry(autoload=False)

    def whoami(call: Any) -> dict[str, Any]:
        """Who."""
        return dict(call.context)

    from harness_one import Call

    whoami.__annotations__["call"] = Call
    registry.add(whoami)
    app = http_app(registry, stateless=True, principal=lambda request: request.headers.get("x-user"), max_body_size=2000)
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:9", headers={"x-user": "ada"}) as http:
            async with Session(streamable_http_client("http://127.0.0.1:9/mcp", http_client=http)) as session:
                context = (await session.call_tool("whoami", {})).content[0].text
            assert '"mcp_principal": "ada"' in context and '"mcp_client": "principal:ada"' in context
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            evil = await http.post("/mcp", json=body, headers={**headers, "host": "evil.example:80"})
            assert evil.status_code in (400, 403, 421)
            big = await http.post("/mcp", content=b"{" + b" " * 5000 + b"}", headers=headers)
            assert big.status_code == 413


async def test_a_made_up_session_id_picks_no_rate_limit_bucket() -> None:
    """A 2026-07-28 or stateless request's Mcp-Session-Id is the client's word: not the client's identity."""
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: "ok", name="once", rate_limit={"rate": 0.001, "burst": 1, "key": "mcp_client"})
    for stateless in (False, True):
        app = http_app(registry, stateless=stateless)
        async with app.router.lifespan_context(app):
            transport = httpx2.ASGITransport(app=app)
            answers = []
            for n in range(3):
                headers = {"mcp-session-id": f"forged-{n}-{stateless}"}
                async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:9", headers=headers) as http:
                    async with Session(streamable_http_client("http://127.0.0.1:9/mcp", http_client=http)) as session:
                        answers.append((await session.call_tool("once", {})).is_error)
            assert answers[1:] == [True, True]  # one bucket for the address, whatever the header said


async def test_a_host_or_origin_without_its_default_port_is_accepted() -> None:
    app = http_app(small_registry(), allowed_hosts=["tools.example.com:*"], allowed_origins=["https://tools.example.com:*"])
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:9") as http:
            for host, origin in [
                ("127.0.0.1", None),
                ("tools.example.com", "https://tools.example.com"),
                ("localhost", "http://localhost"),
            ]:
                extra = {"host": host, **({"origin": origin} if origin else {})}
                answer = await http.post("/mcp", json=body, headers={**headers, **extra})
                assert answer.status_code not in (403, 421), (host, answer.status_code)
            evil = await http.post("/mcp", json=body, headers={**headers, "host": "tools.example.com.evil"})
            assert evil.status_code == 421


@dataclasses.dataclass
class Point:
    x: float
    y: float


async def test_structured_content_fits_the_output_schema_or_the_call_is_an_error() -> None:
    registry = ToolRegistry(autoload=False)

    def point() -> Point:
        """A point."""
        return Point(1.5, 2.0)

    def ratio(a: float, b: float) -> float:
        """a / b, NaN for 0 / 0."""
        return a / b if b else float("nan")

    registry.add(point)
    registry.add(ratio)
    registry.add(lambda: [1, 2], name="liar", output_schema={"type": "object"})
    async with Session(create_server(registry)) as session:
        got = await session.call_tool("point", {})
        assert not got.is_error and got.structured_content == {"x": 1.5, "y": 2.0}
        assert (await session.call_tool("ratio", {"a": 1, "b": 4})).structured_content == {"result": 0.25}
        for name, arguments, where in [("ratio", {"a": 0, "b": 0}, "$.result"), ("liar", {}, "$")]:
            bad = await session.call_tool(name, arguments)  # the SDK client refused the result before
            assert bad.is_error and "does not match its output schema: at " + where in bad.content[0].text


async def test_the_output_check_asserts_no_format_as_the_client_asserts_none() -> None:
    """jsonschema-rs asserts ``format`` for drafts 4 to 7 by default: a result the SDK client takes was refused."""
    registry = ToolRegistry(autoload=False)
    for draft in ("7", "4"):
        schema = {
            "$schema": f"http://json-schema.org/draft-0{draft}/schema#",
            "type": "object",
            "properties": {"to": {"type": "string", "format": "email"}},
        }
        registry.add(lambda: {"to": "the team"}, name=f"mail{draft}", output_schema=schema)
    async with Session(create_server(registry)) as session:
        for name in ("mail7", "mail4"):
            sent = await session.call_tool(name, {})
            assert not sent.is_error and sent.structured_content == {"to": "the team"}, sent.content[0].text


async def test_the_output_check_never_fetches_a_remote_schema() -> None:
    """A tool whose output schema refers to a remote one (a Tool built without Tool.create's checks): the check
    of its results fetched it, where the validation plugin never fetches one and the SDK client refuses the call."""
    import http.server
    import threading

    fetched: list[str] = []

    class Schemas(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    schemas = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Schemas)
    threading.Thread(target=schemas.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{schemas.server_address[1]}/n.json"
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: {"n": 1}, name="count", output_schema={"type": "object"})
    remote = {"type": "object", "properties": {"n": {"$ref": url}}}
    registry.add(dataclasses.replace(registry.get("count"), output_schema=remote), replace=True)
    try:
        async with Session(create_server(registry)) as session:
            answer = await session.call_tool("count", {})
    finally:
        schemas.shutdown()
        schemas.server_close()
    assert fetched == []
    assert answer.is_error and f"its output schema cannot be used: Unresolvable: {url}" in answer.content[0].text


async def test_tools_loaded_on_the_first_listing_are_no_change_to_announce(dists: Any) -> None:
    dists.make(
        "hx-mcp-pkg",
        {"hx_mcp_pkg": "def pkg_tool() -> int:\n    return 1\n"},
        {"harness_one.tools": {"pkg_tool": "hx_mcp_pkg:pkg_tool"}},
    )
    registry = ToolRegistry(discover=True, autoload=False)
    owner = Session(create_server(registry), mode="legacy")
    async with owner as session:
        assert "pkg_tool" in [t.name for t in (await session.list_tools()).tools]
        await session.list_tools(cache_mode="refresh")
    assert not any(isinstance(m, ToolListChangedNotification) for m in owner.messages)


async def test_the_docs_mount_example_serves() -> None:
    """docs/mcp.md's Starlette example, run as written: the endpoint is /tools/mcp."""
    import re

    text = (Path(__file__).parents[1] / "docs" / "mcp.md").read_text()
    block = re.search(r"### In an existing Starlette or FastAPI app\n\n```python\n(.*?)```", text, re.S)
    assert block is not None
    namespace: dict[str, Any] = {}
    exec(block.group(1), namespace)
    app = namespace["app"]
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:9") as http:
            async with Session(streamable_http_client("http://127.0.0.1:9/tools/mcp", http_client=http)) as session:
                assert "calculate" in {t.name for t in (await session.list_tools()).tools}
                answer = await session.call_tool("calculate", {"expression": "6 * 7"})
                assert "42" in answer.content[0].text


async def test_the_principal_of_a_bearer_token_is_its_user_not_its_app() -> None:
    """The SDK's bearer user names the OAuth client: two people using one app were one principal (one bucket)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from starlette.authentication import SimpleUser
    from starlette.requests import Request

    from harness_one.mcp import default_principal

    def principal(user: Any) -> str | None:
        return default_principal(Request({"type": "http", "user": user}))

    def token(subject: str | None, issuer: str | None = "https://id.example") -> AuthenticatedUser:
        claims = {"iss": issuer} if issuer else None
        return AuthenticatedUser(AccessToken(token="t", client_id="vscode", scopes=[], subject=subject, claims=claims))

    assert principal(token("alice")) == "alice@https://id.example" != principal(token("bob"))
    assert principal(token("alice", None)) == "alice" and principal(token(None)) == "vscode"
    assert principal(SimpleUser("ada")) == "ada" and principal(None) is None
