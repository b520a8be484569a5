"""The MCP server against what a reviewer found: secrets in tool errors, HTTP requests with an odd ``id``,
unbounded connections under ``harness-one serve``, and sessions used by another principal."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp_support import Session, http_server
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.routing import Mount

from harness_one import Call, ManualClock, ToolRegistry
from harness_one.mcp import ERROR_META_KEY, create_server, http_app

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
SECRET_URL = "postgres://app:s3cret@db.internal/x"


def registry(clock: ManualClock | None = None) -> ToolRegistry:
    tools = ToolRegistry(autoload=False) if clock is None else ToolRegistry(autoload=False, clock=clock)

    def leak(long: bool = False) -> str:
        """Fail with the secrets a driver puts in its exceptions."""
        padding = "x" * 5000 if long else ""
        raise RuntimeError(f"connect to {SECRET_URL} failed; Authorization: Bearer abc123def {padding} password=hunter2")

    def whoami(call: Call) -> dict[str, Any]:
        """Who is calling."""
        return {k: v for k, v in call.context.items() if k.startswith("mcp_")}

    def same(id: Any) -> Any:
        """Return ``id``."""
        return id

    tools.add(leak)
    tools.add(whoami)
    tools.add(same)
    tools.add(lambda: "pong", name="ping_tool", description="Answer pong.")
    return tools


# ---------------------------------------------------------------- 1. secrets in tool errors


async def test_a_tools_exception_text_reaches_the_client_redacted() -> None:
    async with Session(create_server(registry())) as client:
        failed = await client.call_tool("leak", {})
        long = await client.call_tool("leak", {"long": True})
    text = failed.content[0].text
    assert failed.is_error and text.startswith("Tool 'leak' failed: RuntimeError: connect to postgres://[REDACTED]@db.internal/x")
    assert "Bearer [REDACTED]" in text and "password=[REDACTED]" in text
    error = failed.meta[ERROR_META_KEY]
    assert error["message"] == text and error["kind"] == "tool_failed" and error["cause"] == "RuntimeError"
    for answer in (failed, long):
        sent = json.dumps([answer.content[0].text, answer.meta])
        assert "s3cret" not in sent and "abc123def" not in sent and "hunter2" not in sent
    # Masked, not cut to the 2,000 characters the log redactor keeps: the model reads the whole error.
    assert len(long.content[0].text) > 5000 and long.content[0].text.endswith("password=[REDACTED]")


# ---------------------------------------------------------------- 2. a request id neither a string nor an integer


@asynccontextmanager
async def http(app: Starlette, base: str = "http://127.0.0.1:9", **headers: str) -> AsyncIterator[httpx2.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=base, headers=headers) as client:
            yield client


async def open_session(client: httpx2.AsyncClient, url: str = "/mcp", **headers: str) -> dict[str, str]:
    """A handshake-era session opened with raw requests: the headers for its later requests."""
    opened = await client.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}, headers={**HEADERS, **headers}
    )
    assert opened.status_code == 200, opened.text
    session = {**HEADERS, **headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    done = await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    assert done.status_code == 202
    return session


def call(name: str, request_id: Any = 2, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or SSE answer."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return dict(json.loads(data[-1]))
    return dict(response.json())


ODD_IDS = ["1.5", "true", "false", "null", "[1]", '{"a": 1}', "1.0", "1e3"]


@pytest.mark.parametrize("stateless", [False, True])
async def test_an_http_request_with_an_odd_id_is_answered_as_over_stdio(stateless: bool) -> None:
    """The SDK took it for a notification: 202 and no answer, so the client waited for ever."""
    app = http_app(registry(), stateless=stateless)
    async with http(app) as client:
        headers = HEADERS if stateless else await open_session(client)
        bodies = [f'{{"jsonrpc": "2.0", "id": {odd}, "method": "ping"}}' for odd in ODD_IDS]
        bodies.append('{"jsonrpc": "2.0", "\\u0069d": 1.5, "method": "ping"}')  # "id" spelt with an escape
        for body in bodies:
            refused = await client.post("/mcp", content=body, headers=headers)
            assert refused.status_code == 400, body
            assert refused.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Invalid request: id must be a string or an integer"},
            }
        # Ordinary requests go on: string and integer ids, and an odd "id" inside the arguments.
        for request_id in (7, "seven", -3):
            done = answer(await client.post("/mcp", json=call("same", request_id, id=1.5), headers=headers))
            assert done["id"] == request_id and done["result"]["content"][0]["text"] == "1.5", done
        # The SDK's Host check comes first, as for any other request.
        evil = await client.post("/mcp", content=bodies[0], headers={**headers, "host": "evil.example"})
        assert evil.status_code == 421


async def test_an_odd_id_in_a_body_sent_in_pieces_is_answered_too() -> None:
    app = http_app(registry(), stateless=True)
    body = b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}'
    pieces = [{"type": "http.request", "body": body[:20], "more_body": True}, {"type": "http.request", "body": body[20:]}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return pieces.pop(0) if pieces else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in {**HEADERS, "host": "127.0.0.1:9"}.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 9),
    }
    async with app.router.lifespan_context(app):
        await app(scope, receive, send)
    assert sent[0]["status"] == 400
    assert json.loads(sent[1]["body"])["error"]["code"] == -32600


# ---------------------------------------------------------------- 3. connection bounds of harness-one serve


def test_serve_options_default_to_the_servers_bounds() -> None:
    from harness_one.mcp import _server
    from harness_one.mcp._command import serve

    defaults = {p.name: p.default for p in serve.params}
    assert (defaults["limit_concurrency"] or None) is _server.LIMIT_CONCURRENCY is None  # opt-in: idle sockets count
    assert defaults["timeout_keep_alive"] == _server.TIMEOUT_KEEP_ALIVE == 5
    assert defaults["header_timeout"] == _server.HEADER_TIMEOUT == 10.0
    assert defaults["drain_timeout"] == _server.DRAIN_TIMEOUT == 300.0  # stdio's bound on the wait at the end of stdin


@contextmanager
def connections(url: str, count: int) -> Iterator[list[socket.socket]]:
    found = re.match(r"http://([^:/]+):(\d+)", url)
    assert found is not None
    opened = [socket.create_connection((found.group(1), int(found.group(2))), timeout=30) for _ in range(count)]
    try:
        yield opened
    finally:
        for sock in opened:
            sock.close()


async def test_serve_closes_a_connection_slow_with_its_headers(tmp_path: Path) -> None:
    """uvicorn read a request's headers for as long as a client took (slowloris): a connection held for ever."""
    with http_server(tmp_path, "--header-timeout", "0.5", "--timeout-keep-alive", "1") as url:
        with connections(url, 1) as (slow,):
            slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the rest
            assert slow.recv(1024) == b""  # closed by the server (a hang here ends at the 30 s socket timeout)
        # A call in flight for longer than the header timeout, and a session's open GET stream, are not cut.
        async with Session(url, mode="legacy") as session:
            waited = await session.call_tool("wait", {"seconds": 1.0, "tag": "long"})
            assert waited.content[0].text == "done"
            assert (await session.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"


async def test_serve_bounds_concurrent_connections(tmp_path: Path) -> None:
    """uvicorn took any number of connections at once."""
    with http_server(tmp_path, "--limit-concurrency", "3", "--header-timeout", "0") as url:
        with connections(url, 3):  # held, and accepted before the request below
            async with httpx2.AsyncClient() as client:
                refused = await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=HEADERS)
            assert refused.status_code == 503
        async with Session(url) as session:
            assert (await session.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"


# ---------------------------------------------------------------- 4. a session belongs to its principal


class HeaderUser(AuthenticationBackend):
    """The user named by ``x-user`` (a stand-in for any Starlette authentication)."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        name = conn.headers.get("x-user")
        return (AuthCredentials(["authenticated"]), SimpleUser(name)) if name else None


def behind_authentication() -> tuple[Starlette, str]:
    mcp = http_app(registry())
    app = Starlette(
        routes=[Mount("/tools", mcp)],
        middleware=[Middleware(AuthenticationMiddleware, backend=HeaderUser())],
        lifespan=lambda _: mcp.router.lifespan_context(mcp),
    )
    return app, "/tools/mcp"


def with_principal_function() -> tuple[Starlette, str]:
    return http_app(registry(), principal=lambda request: request.headers.get("x-user")), "/mcp"


@pytest.mark.parametrize("build", [behind_authentication, with_principal_function])
async def test_a_session_is_refused_to_another_principal(build: Any) -> None:
    """A session id alice opened served bob's calls (as alice's session, in alice's rate-limit bucket)."""
    app, url = build()
    async with http(app) as client:
        alice = await open_session(client, url, **{"x-user": "alice"})
        for someone in ({"x-user": "bob"}, {}):  # another user, or nobody
            headers = {k: v for k, v in alice.items() if k != "x-user"} | someone
            stolen = await client.post(url, json=call("whoami"), headers=headers)
            assert stolen.status_code == 404 and stolen.json()["error"]["message"] == "Session not found"
            assert (await client.get(url, headers=headers)).status_code == 404
            assert (await client.delete(url, headers=headers)).status_code == 404
        mine = answer(await client.post(url, json=call("whoami"), headers=alice))
        who = json.loads(mine["result"]["content"][0]["text"])
        assert who["mcp_principal"] == "alice" and who["mcp_session"] == alice["mcp-session-id"]
        # Her own DELETE ends it; the id is then unknown to everyone.
        assert (await client.delete(url, headers=alice)).status_code == 200
        assert (await client.post(url, json=call("whoami"), headers=alice)).status_code == 404


async def test_an_sdk_client_works_behind_the_session_check() -> None:
    app, url = behind_authentication()
    async with http(app, **{"x-user": "carol"}) as client:
        async with Session(streamable_http_client(f"http://127.0.0.1:9{url}", http_client=client), mode="legacy") as session:
            who = json.loads((await session.call_tool("whoami", {})).content[0].text)
    assert who["mcp_principal"] == "carol" and who["mcp_session"]


async def test_sessions_idle_past_the_timeout_are_forgotten() -> None:
    """What the session check remembers stays bounded: a session idle past the SDK's timeout is forgotten
    when the next one opens (and then answers 404, as the SDK's closed session does)."""
    clock = ManualClock()
    app = http_app(registry(clock), session_idle_timeout=60, principal=lambda request: request.headers.get("x-user"))
    async with http(app, **{"x-user": "dan"}) as client:
        first = await open_session(client)
        clock.advance(30)
        assert answer(await client.post("/mcp", json=call("ping_tool"), headers=first))["result"]
        clock.advance(59)  # 59 s after its last request: not yet idle for 60
        second = await open_session(client)
        assert answer(await client.post("/mcp", json=call("ping_tool"), headers=first))["result"]
        clock.advance(61)
        third = await open_session(client)
        assert (await client.post("/mcp", json=call("ping_tool"), headers=first)).status_code == 404
        assert (await client.post("/mcp", json=call("ping_tool"), headers=second)).status_code == 404
        assert answer(await client.post("/mcp", json=call("ping_tool"), headers=third))["result"]


async def test_sessions_the_sdk_ended_are_forgotten() -> None:
    """What the session check remembers stays bounded by the sessions the SDK keeps: a session the SDK ended
    itself (its server task crashed, it was idle past the SDK's timer) was remembered until it was idle for
    ``session_idle_timeout`` on the registry's clock, and for ever without a timeout."""
    from harness_one.mcp._server import _Guard

    app = http_app(registry(), session_idle_timeout=None)
    manager = app.routes[0].endpoint.session_manager  # type: ignore[attr-defined]
    async with http(app) as client:
        kept = await open_session(client)
        guard = app.middleware_stack
        while not isinstance(guard, _Guard):
            guard = guard.app  # type: ignore[union-attr]
        assert guard.sessions is not None
        for _ in range(300):
            session = (await open_session(client))["mcp-session-id"]
            await manager._discard_session(session, manager._server_instances[session])  # as the SDK ends one
            assert len(guard.sessions) <= 64
        assert kept["mcp-session-id"] in guard.sessions and len(manager._server_instances) == 1
        assert answer(await client.post("/mcp", json=call("ping_tool"), headers=kept))["result"]
        assert (await client.delete("/mcp", headers=kept)).status_code == 200
        assert kept["mcp-session-id"] not in guard.sessions


# ---------------------------------------------------------------- the review of the above


async def test_a_principal_given_to_the_server_only_binds_its_sessions() -> None:
    """``http_app(reg, server=create_server(reg, principal=P))``: the guard used default_principal (None for all)."""
    reg = registry()
    principal = lambda request: request.headers.get("x-user")  # noqa: E731
    app = http_app(reg, server=create_server(reg, principal=principal))
    async with http(app) as client:
        alice = await open_session(client, **{"x-user": "alice"})
        stolen = await client.post("/mcp", json=call("whoami"), headers=alice | {"x-user": "bob"})
        assert stolen.status_code == 404
        mine = answer(await client.post("/mcp", json=call("whoami"), headers=alice))
        assert json.loads(mine["result"]["content"][0]["text"])["mcp_principal"] == "alice"


async def test_a_body_the_sdks_parser_refuses_is_left_to_it() -> None:
    """A UTF-8 BOM (or a "\\ud800" escape) before an odd id got -32600: the SDK's parser refuses the body (-32700)."""
    async with http(http_app(registry(), stateless=True)) as client:
        for body in (b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1.5,"method":"ping"}', b'{"jsonrpc":"2.0","id":1.5,"method":"\\ud800"}'):
            answered = await client.post("/mcp", content=body, headers=HEADERS | {"content-type": "application/json"})
            assert answered.status_code == 400 and answered.json()["error"]["code"] == -32700, answered.text


def test_serve_refuses_a_header_timeout_that_is_not_a_number(tmp_path: Path) -> None:
    """``--header-timeout nan`` was accepted and failed every connection (uvloop cannot wait NaN seconds)."""
    from click.testing import CliRunner

    from harness_one._cli import main

    result = CliRunner().invoke(main, ["serve", "--transport", "http", "--header-timeout", "nan"])
    assert result.exit_code == 2 and "not nan" in result.output


async def test_the_header_timeout_does_not_cut_a_longer_keep_alive(tmp_path: Path) -> None:
    """With --timeout-keep-alive 30 and --header-timeout 1, an idle connection closed after 1 s."""
    with http_server(tmp_path, "--header-timeout", "0.3", "--timeout-keep-alive", "3") as url:
        with connections(url, 1) as (conn,):
            found = re.match(r"http://([^/]+)(/.*)", url)
            assert found is not None
            ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
            head = f"POST {found.group(2)} HTTP/1.1\r\nHost: {found.group(1)}\r\nContent-Type: application/json\r\n"
            head += "Accept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-11-25\r\n"
            conn.sendall(head.encode() + f"Content-Length: {len(ping)}\r\n\r\n".encode() + ping)
            assert conn.recv(65536).startswith(b"HTTP/1.1 ")
            conn.settimeout(1.5)  # five header timeouts of silence: the connection is still open (no EOF)
            while True:
                try:
                    chunk = conn.recv(65536)
                except TimeoutError:
                    break
                assert chunk, "the server closed the idle connection before its keep-alive timeout"
