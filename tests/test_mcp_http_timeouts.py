"""The body timeout of ``harness-one serve --transport http``: a request whose headers came at once and whose
body came a byte now and then (or never, after a ``Content-Length``) held its connection and its handler for
ever, past every other timeout; a few hundred such clients held the server's resources."""

from __future__ import annotations

import asyncio
import json
import math
import re
import select
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from click.testing import CliRunner
from mcp_support import http_server
from test_mcp_server_review import HEADERS, HELLO, answer, call, connections, open_session

from harness_one._cli import main
from harness_one.mcp import _server
from harness_one.mcp._command import serve

T = TypeVar("T")
#: The body timeout the servers below run with, and how long a test waits for what it bounds (a hang ends there).
BODY_TIMEOUT = 0.5
HANG = 10.0


def head(url: str, *lines: str) -> bytes:
    """A POST's request line and headers for ``url`` (an MCP endpoint), then ``lines`` and the blank line."""
    found = re.match(r"http://([^/]+)(/.*)", url)
    assert found is not None
    text = f"POST {found.group(2)} HTTP/1.1\r\nHost: {found.group(1)}\r\nContent-Type: application/json\r\n"
    text += "Accept: application/json, text/event-stream\r\n" + "".join(f"{line}\r\n" for line in lines)
    return (text + "\r\n").encode()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}
PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
SLOW_BODIES = {
    # Content-Length met only in part, then silence.
    "short": ([f"Content-Length: {len(PING)}"], PING[:5], b""),
    # A byte every 0.1 s of a body that would take hours: each byte came in time, the body did not.
    "drip": (["Content-Length: 100000"], b" ", b" "),
    # One chunk of a chunked body, then silence.
    "chunked": (["Transfer-Encoding: chunked"], b"5\r\n" + PING[:5] + b"\r\n", b""),
}


def until_closed(conn: socket.socket, drip: bytes = b"") -> bytes:
    """What the server sends until it closes ``conn`` (``drip`` sent every 0.1 s meanwhile); fails after ``HANG`` s."""
    received = b""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        if select.select([conn], [], [], 0.1)[0]:
            chunk = conn.recv(65536)
            if not chunk:
                return received
            received += chunk
        elif drip:
            conn.sendall(drip)
    raise AssertionError(f"the connection was still open {HANG} s after a {BODY_TIMEOUT} s body timeout; got {received!r}")


def assert_timed_out(response: bytes) -> None:
    assert response.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), response
    error = json.loads(response.partition(b"\r\n\r\n")[2])
    assert error["id"] is None and error["error"]["code"] == -32600
    assert "did not all arrive within 0.5 s" in error["error"]["message"]


# ---------------------------------------------------------------- harness-one serve


async def admitted(send: Callable[[], Awaitable[T]], status: Callable[[T], int]) -> T:
    """What ``send`` got, sent again while it was 503: a client may see its last connection closed an instant
    before the server has counted it closed (and then the server is still at its ``--limit-concurrency``)."""
    deadline = time.monotonic() + HANG
    while status(got := await send()) == 503:
        assert time.monotonic() < deadline, f"503 for {HANG} s: the handlers of the requests that got 408 still run"
        await asyncio.sleep(0.05)
    return got


@pytest.mark.parametrize("kind", SLOW_BODIES)
async def test_serve_answers_a_slow_body_408_and_ends_its_handler(tmp_path: Path, kind: str) -> None:
    lines, first, drip = SLOW_BODIES[kind]

    async def slow_request() -> bytes:
        with connections(url, 1) as (slow,):
            slow.sendall(head(url, "mcp-protocol-version: 2025-11-25", *lines) + first)
            return until_closed(slow, drip)

    # --limit-concurrency 2: uvicorn answers 503 once two request handlers run, so two handlers still waiting
    # for their bodies after their connections were closed would refuse every request after them.
    with http_server(tmp_path, "--body-timeout", "0.5", "--header-timeout", "0", "--limit-concurrency", "2") as url:
        for _ in range(2):
            assert_timed_out(await admitted(slow_request, lambda response: int(response[9:12])))
        async with httpx2.AsyncClient() as client:
            opened = await admitted(lambda: client.post(url, json=INITIALIZE, headers=HEADERS), lambda r: r.status_code)
        assert opened.status_code == 200, opened.text


async def test_a_large_body_a_long_call_and_an_event_stream_are_not_cut(tmp_path: Path) -> None:
    """The body timeout bounds receiving a request's body only (the header timeout is on, at its default)."""
    with http_server(tmp_path, "--body-timeout", "0.5") as url:
        async with httpx2.AsyncClient(timeout=30) as client:
            session = await open_session(client, url)
            ids = [f"{k}: {v}" for k, v in session.items() if k.startswith("mcp-")]
            with connections(url, 2) as (stream, big):
                get = head(url, *ids).replace(b"POST", b"GET", 1).replace(b"application/json, ", b"")
                stream.sendall(get)
                assert stream.recv(65536).startswith(b"HTTP/1.1 200 ")
                # A 250 KB body, near the size limit (the registry's 256 KiB argument limit + 64 KiB), in two
                # writes, for a call of 1 s: both longer than the body timeout.
                request = json.dumps(call("wait", seconds=1.0, tag="x" * 250_000)).encode()
                big.sendall(head(url, *ids, f"Content-Length: {len(request)}"))
                big.sendall(request)
                received = b""
                while b'"done"' not in received and (chunk := big.recv(65536)):
                    received += chunk
                assert received.startswith(b"HTTP/1.1 200 ") and b'"done"' in received, received[:300]
                # The session's GET stream, open for more than two body timeouts by now, still carries notifications.
                await client.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=session)
                grow = call("grow", 4)
                grow["params"]["arguments"] = {"name": "grown"}
                assert answer(await client.post(url, json=grow, headers=session))["result"]
                seen = b""
                while b"notifications/tools/list_changed" not in seen and (chunk := stream.recv(65536)):
                    seen += chunk
                assert b"notifications/tools/list_changed" in seen, seen


def test_serve_body_timeout_option(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = {p.name: p.default for p in serve.params}
    assert defaults["body_timeout"] == _server.BODY_TIMEOUT == 30.0
    for bad in ("nan", "inf", "-1"):
        refused = CliRunner().invoke(main, ["serve", "--transport", "http", "--body-timeout", bad])
        assert refused.exit_code == 2 and "--body-timeout" in refused.output, (bad, refused.output)
    for bad_seconds in (math.nan, math.inf, 0.0, -1.0):
        with pytest.raises(ValueError, match="body_timeout must be a positive number of seconds or None"):
            _server._http_protocol(None, 5, bad_seconds)
    assert _server._http_protocol(None, 5, None) == "auto"
    # 0 on the command line is serve_http's None (no deadline), as for --header-timeout.
    given: list[dict[str, Any]] = []
    monkeypatch.setattr(_server, "serve", lambda registry, transport, **options: given.append(options))
    for argument, expected in (("0", None), ("2.5", 2.5)):
        ran = CliRunner().invoke(main, ["serve", "--transport", "http", "--body-timeout", argument])
        assert ran.exit_code == 0, ran.output
        assert given.pop()["body_timeout"] == expected


# ---------------------------------------------------------------- either uvicorn parser


@asynccontextmanager
async def uvicorn_server(parser: str, monkeypatch: pytest.MonkeyPatch, ended: list[str]) -> AsyncIterator[int]:
    """uvicorn with the body deadline over ``parser`` (h11, or httptools as installed with the ``mcp`` extra),
    serving an app that reads the body (``/early``: answers 404 without it; ``/lazy``: starts reading it after
    the body timeout); yields the port."""
    import uvicorn
    from uvicorn.protocols.http import auto, h11_impl, httptools_impl

    base = h11_impl.H11Protocol if parser == "h11" else httptools_impl.HttpToolsProtocol
    monkeypatch.setattr(auto, "AutoHTTPProtocol", base)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        try:
            if scope["path"] == "/lazy":  # the app, not the client, is behind: uvicorn stops reading past 64 KiB
                await asyncio.sleep(BODY_TIMEOUT + 0.1)
            if scope["path"] != "/early":
                while (await receive()).get("more_body"):
                    pass
            status = 404 if scope["path"] == "/early" else 200
            await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})
        finally:
            ended.append(scope["path"])

    protocol = _server._http_protocol(None, 5, BODY_TIMEOUT)
    assert issubclass(protocol, base)
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", http=protocol))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, HANG)


async def read_until_closed(reader: asyncio.StreamReader) -> bytes:
    try:
        return await asyncio.wait_for(reader.read(), HANG)
    except TimeoutError:
        raise AssertionError(f"the connection was still open {HANG} s after a {BODY_TIMEOUT} s body timeout") from None


@pytest.mark.parametrize("parser", ["h11", "httptools"])
async def test_the_body_deadline_with_either_parser(parser: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ended: list[str] = []
    async with uvicorn_server(parser, monkeypatch, ended) as port:
        # A body that never comes: 408, the connection closed, and the handler waiting for it ended.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabcde")
        response = await read_until_closed(reader)
        assert response.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), response
        for _ in range(int(HANG / 0.01)):
            if "/slow" in ended:
                break
            await asyncio.sleep(0.01)
        assert ended == ["/slow"]
        writer.close()
        # Answered without its body, which then comes a byte at a time (each resets uvicorn's keep-alive
        # timer): the connection is closed at the deadline.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /early HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\nabcde")
        dripping = asyncio.create_task(drip(writer))
        try:
            response = await read_until_closed(reader)
        finally:
            dripping.cancel()
        assert response.startswith(b"HTTP/1.1 404 ") and response.endswith(b"ok"), response
        writer.close()
        # 1 MiB at loopback speed, and a second request on the same connection to an app slow to read it: not cut.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = b"x" * (1 << 20)
        for path in (b"/ok", b"/lazy"):
            writer.write(b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % (path, len(body)))
            writer.write(body)
            status = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG)
            assert status.startswith(b"HTTP/1.1 200 ") and await reader.readexactly(2) == b"ok"
        await asyncio.sleep(BODY_TIMEOUT * 2)  # past the deadline of either request: the connection stays open
        writer.write(b"GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
        status = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG)
        assert status.startswith(b"HTTP/1.1 200 ")
        writer.close()


async def drip(writer: asyncio.StreamWriter) -> None:
    while True:
        await asyncio.sleep(0.1)
        writer.write(b" ")
