"""max_reply_bytes: set from a spec, a config table or the command line; applied over HTTP (a JSON body, an event
stream) as over stdio; and stdio replies framed by their newline (what a server writes without one)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from harness_one import ToolExecutionError, ToolRegistry, ToolTimeout
from harness_one.mcp import McpSpec, McpSpecError, RemoteServer, RemoteToolError, _spec, import_tools, parse_mcp_spec

# A streamable-HTTP server of the official SDK: JSON replies, or (JSON=0, and a progress report first) an event stream;
# with GZIP=1, replies over 5,000 bytes gzipped whatever the client accepts.
HTTP_SERVER = textwrap.dedent(
    """
    import os, socket
    import uvicorn
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("big")

    @server.tool()
    async def huge(n: int, ctx: Context) -> str:
        await ctx.report_progress(0.5, 1.0)  # sent (committing an event stream) when the caller asked for progress
        return "x" * n

    app = server.streamable_http_app(json_response=os.environ["JSON"] == "1")
    if os.environ.get("GZIP") == "1":
        from starlette.middleware.gzip import GZipMiddleware

        zipped = GZipMiddleware(app, minimum_size=5000)

        async def app(scope, receive, send):
            headers = [(k, v) for k, v in scope.get("headers", []) if k != b"accept-encoding"]
            await zipped({**scope, "headers": [*headers, (b"accept-encoding", b"gzip")]}, receive, send)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    """
)

# A stdio server written by hand, one request at a time: its replies framed as each tool says.
LINES_SERVER = textwrap.dedent(
    r"""
    import json, sys
    from pathlib import Path

    def reply(request_id, result):
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()

    def text(value):
        return {"content": [{"type": "text", "text": value}]}

    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method, params, request_id = message["method"], message.get("params") or {}, message["id"]
        result = {}
        if method == "initialize":
            info = {"name": "lines", "version": "1"}
            result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": info}
        elif method == "tools/list":
            result = {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in ("ok", "huge", "unended", "junk")]}
        elif method == "tools/call":
            name, args = params["name"], params.get("arguments") or {}
            if name == "unended":  # the reply without its newline: the start of the next line
                sys.stdout.buffer.write(reply(request_id, text("unended")))
                sys.stdout.flush()
                Path(sys.argv[1]).write_text("written")
                continue
            if name == "junk":  # output without a newline, then the reply on the same line
                sys.stdout.buffer.write(b"loading... ")
            result = text("x" * args["n"] if name == "huge" else f"ran {name}")
        sys.stdout.buffer.write(reply(request_id, result) + b"\n")
        sys.stdout.flush()
    """
)


def _registry() -> ToolRegistry:
    return ToolRegistry(autoload=False, plugin_options={"output_limit": {"max_output": None}})


@contextmanager
def http_server(tmp: Path, **env: str) -> Iterator[str]:
    """:data:`HTTP_SERVER` in a child process with ``env``; yields its URL."""
    path = tmp / "big_server.py"
    path.write_text(HTTP_SERVER)
    command = [sys.executable, str(path)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, **env}, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module", params=["json", "events"])
def http_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, bool]]:
    """The URL of a real SDK server over streamable HTTP answering with JSON bodies or event streams, and whether
    its replies are events."""
    events = request.param == "events"
    with http_server(tmp_path_factory.mktemp("mcp-http-bound"), JSON="0" if events else "1") as url:
        yield url, events


@pytest.fixture
def lines_server(tmp_path: Path) -> tuple[list[str], Path]:
    """The command of :data:`LINES_SERVER` and the file it writes once it wrote a reply without its newline."""
    path = tmp_path / "lines_server.py"
    path.write_text(LINES_SERVER)
    marker = tmp_path / "unended"
    return [sys.executable, str(path), str(marker)], marker


def until(check: Any, seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


# ---------------------------------------------------------------- where max_reply_bytes is set


def test_max_reply_bytes_is_a_key_of_specs_and_config_tables_checked_as_call_timeout_is() -> None:
    """It was a keyword of import_tools only: a config table or an --mcp server always had 16 MiB."""
    assert McpSpec(name="a", command=("a",)).max_reply_bytes == 16 << 20
    assert McpSpec.from_table("a", {"command": ["a"], "max_reply_bytes": 1000}).max_reply_bytes == 1000
    assert parse_mcp_spec("a=x", max_reply_bytes=2000).max_reply_bytes == 2000
    assert parse_mcp_spec("a=http://h/mcp", max_reply_bytes=2000).max_reply_bytes == 2000
    for bad in (0, -1, True, "1000", 1.5, None):
        with pytest.raises(McpSpecError, match=re.escape("mcp.servers.x: MCP server 'x': 'max_reply_bytes' must be a positive")):
            McpSpec.from_table("x", {"command": ["a"], "max_reply_bytes": bad})
    parse_max_reply_bytes = _spec.parse_max_reply_bytes
    assert parse_max_reply_bytes(" 4096 ") == 4096
    for text in ("0", "-5", "1.5", "16MiB", ""):
        with pytest.raises(McpSpecError, match="expected a positive whole number of bytes"):
            parse_max_reply_bytes(text)
    # The server takes its spec's bound unless import_tools (or RemoteServer) is given another.
    spec = McpSpec(name="a", command=("a",), max_reply_bytes=3000)
    assert RemoteServer(spec).max_reply_bytes == 3000 and RemoteServer(spec, max_reply_bytes=10).max_reply_bytes == 10


def test_the_cli_and_a_config_table_set_max_reply_bytes(lines_server: tuple[list[str], Path], tmp_path: Path) -> None:
    command, _ = lines_server
    env = {**os.environ, "HARNESS_ONE_STATE": f"sqlite:///{tmp_path / 'state.sqlite3'}"}
    config = tmp_path / "harness-one.toml"
    config.write_text(f"[mcp.servers.t]\ncommand = {json.dumps(command)}\nmax_reply_bytes = 1000\n")

    def cli(*options: str) -> subprocess.CompletedProcess[str]:
        call = ["call", "huge", "--args", '{"n": 5000}']
        return subprocess.run(
            [sys.executable, "-m", "harness_one", *options, *call],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )

    for done in (cli("--mcp", f"t={' '.join(command)}", "--mcp-max-reply-bytes", "1000"), cli("--config", str(config))):
        assert done.returncode == 7, done.stderr  # ToolExecutionError's exit code
        assert "more than the limit of 1,000 (max_reply_bytes)" in done.stdout
    assert cli("--mcp", f"t={' '.join(command)}").returncode == 0  # 16 MiB by default
    refused = cli("--mcp-max-reply-bytes", "lots")
    assert refused.returncode == 2 and "--mcp-max-reply-bytes 'lots': expected a positive whole number" in refused.stderr


async def test_serve_takes_the_groups_mcp_bounds_for_its_own_mcp_servers(
    lines_server: tuple[list[str], Path], tmp_path: Path
) -> None:
    """``harness-one --mcp-max-reply-bytes 1000 serve --mcp ...``: serve's servers were parsed with the defaults."""
    from mcp import StdioServerParameters
    from mcp_support import Session, server_env

    command, _ = lines_server
    target = StdioServerParameters(
        command=sys.executable,
        args=["-m", "harness_one", "--mcp-max-reply-bytes", "1000", "serve", "--mcp", f"t={' '.join(command)}"],
        env={**os.environ, **server_env(tmp_path)},
    )
    async with Session(target) as client:
        assert (await client.call_tool("ok", {})).content[0].text == "ran ok"
        refused = await client.call_tool("huge", {"n": 5000})
        assert refused.is_error and "more than the limit of 1,000 (max_reply_bytes)" in refused.content[0].text


# ---------------------------------------------------------------- over HTTP


def test_an_http_reply_over_max_reply_bytes_fails_its_call_and_the_connection_stays(http_url: tuple[str, bool]) -> None:
    """A JSON body was read whole however long (200 MB took 2 GB); an event over the SDK's own 1 MiB bound was a
    lost connection (McpConnectionError, and a new connection), whatever max_reply_bytes said."""
    url, events = http_url
    registry = _registry()
    remote = import_tools(registry, url, name="big", max_reply_bytes=100_000, call_timeout=30)
    progress = (lambda *_: None) if events else None  # asking for progress makes the server answer with events
    try:
        assert registry.call("huge", {"n": 10}, on_progress=progress) == {"result": "x" * 10}
        client = remote._client
        error = registry.try_call("huge", {"n": 300_000}, on_progress=progress).error
        assert isinstance(error, ToolExecutionError) and not isinstance(error, ToolTimeout), error
        assert isinstance(error.cause, RemoteToolError) and error.cause.kind == "reply_too_large"
        assert error.message == (
            "Tool 'huge' failed on MCP server 'big': the reply was more than the limit of 100,000 bytes (max_reply_bytes)"
        )
        assert registry.call("huge", {"n": 40_000}, on_progress=progress) == {"result": "x" * 40_000}  # within the bound
        assert remote._client is client  # the same connection
    finally:
        remote.close()


def test_an_event_within_max_reply_bytes_is_read_whatever_the_sdks_own_bound(http_url: tuple[str, bool]) -> None:
    """The SDK refused an event over 1 MiB (as a lost connection) though max_reply_bytes is 16 MiB."""
    url, events = http_url
    registry = _registry()
    remote = import_tools(registry, url, name="big", call_timeout=30)
    try:
        value = registry.call("huge", {"n": 3_000_000}, on_progress=(lambda *_: None) if events else None)
        assert value == {"result": "x" * 3_000_000}
    finally:
        remote.close()


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


async def test_an_event_stream_is_bounded_one_event_at_a_time_however_it_is_cut() -> None:
    """Each event is counted from the empty line that ends the one before (``\\r\\n``, ``\\n`` or ``\\r``, even cut
    between two chunks), and handed on whole; the first over the bound is answered in its place, naming the request."""
    from harness_one.mcp._client import _BoundedBody

    request = httpx2.Request("POST", "http://127.0.0.1/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "tools/call"})
    event = b"event: message\r\ndata: " + b"x" * 50 + b"\r\n\r\n"
    stream = b": ping\r\n\r\n" + event + event.replace(b"\r\n", b"\n") + event.replace(b"\r\n", b"\r")
    for cut in (1, 2, 3, 5, 7, 64, len(stream)):
        chunks = [stream[at : at + cut] for at in range(0, len(stream), cut)]

        async def read(limit: int, chunks: list[bytes] = chunks) -> tuple[list[bytes], list[str]]:
            parts = [part async for part in _BoundedBody(_Chunks(chunks), request, "s", limit, events=True)]
            response = httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Chunks(parts), request=request)
            return parts, [event.data async for event in httpx2.EventSource(response)]  # as the SDK reads them

        parts, events = await read(len(event) - 2)  # counted without the empty line that ends it
        assert b"".join(parts) == stream and events == ["x" * 50] * 3, cut
        assert all(part.endswith((b"\n", b"\r")) for part in parts)  # whole events only
        _, events = await read(len(event) - 3)
        assert len(events) == 1, cut
        answer = json.loads(events[0])
        assert answer["id"] == 7 and answer["error"]["data"] == {"kind": "reply_too_large", "max_reply_bytes": len(event) - 3}
    # An event within the bound, then one over it, in one chunk: the first is handed on (it was dropped with the second).
    reply = b'event: message\ndata: {"jsonrpc":"2.0","id":7,"result":{}}\n\n'
    parts = [
        part async for part in _BoundedBody(_Chunks([reply + b"data: " + b"y" * 200 + b"\n\n"]), request, "s", 100, events=True)
    ]
    assert parts[0] == reply and b"reply_too_large" in parts[1]


def test_a_compressed_http_reply_is_not_decoded_past_the_bound(tmp_path: Path) -> None:
    """The bound counted the bytes as sent: a gzipped reply of 2,000,000 bytes (a few KB compressed) was decoded
    whole, past max_reply_bytes (100 MB took 1 GB). The client asks for none, and decodes none."""
    registry = _registry()
    with http_server(tmp_path, JSON="1", GZIP="1") as url:
        remote = import_tools(registry, url, name="gz", max_reply_bytes=1_000_000, call_timeout=30)
        try:
            error = registry.try_call("huge", {"n": 2_000_000}).error
            assert isinstance(error, ToolExecutionError) and not isinstance(error, ToolTimeout), error
            assert "failed on MCP server 'gz': the reply could not be read (Invalid JSON: " in error.message
            assert registry.call("huge", {"n": 100}) == {"result": "x" * 100}  # small replies are not compressed
        finally:
            remote.close()


# ---------------------------------------------------------------- stdio: a reply ends at its newline


def test_a_reply_written_without_its_newline_fails_each_call_its_line_answers(lines_server: tuple[list[str], Path]) -> None:
    """A reply without its newline is the start of the next line: that line answered the first call with an
    error, and the call whose reply it also held waited out its deadline."""
    command, marker = lines_server
    registry = _registry()
    remote = import_tools(registry, command, name="t", call_timeout=15)
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(registry.try_call, "unended")
            assert until(marker.exists)
            second = registry.try_call("ok")
            errors = [first.result(30).error, second.error]
        for error in errors:
            assert isinstance(error, ToolExecutionError) and not isinstance(error, ToolTimeout), error
            assert "the reply could not be read" in error.message
        assert registry.call("ok") == "ran ok"  # the same connection
    finally:
        remote.close()


def test_output_without_a_newline_before_a_reply_fails_that_call_at_once(lines_server: tuple[list[str], Path]) -> None:
    """``loading... {"jsonrpc": ...}`` named no id at its start: its call waited out its deadline."""
    command, _ = lines_server
    registry = _registry()
    remote = import_tools(registry, command, name="t", call_timeout=15)
    try:
        error = registry.try_call("junk").error
        assert isinstance(error, ToolExecutionError) and not isinstance(error, ToolTimeout), error
        assert "the reply could not be read" in error.message
        assert registry.call("ok") == "ran ok"
    finally:
        remote.close()


def test_a_line_over_the_bound_fails_each_call_it_answers(lines_server: tuple[list[str], Path]) -> None:
    """A reply without its newline joined to a reply over the bound: only the first call was answered."""
    command, marker = lines_server
    registry = _registry()
    remote = import_tools(registry, command, name="t", call_timeout=15, max_reply_bytes=10_000)
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(registry.try_call, "unended")
            assert until(marker.exists)
            second = registry.try_call("huge", {"n": 50_000})
            errors = [first.result(30).error, second.error]
        for error in errors:
            assert isinstance(error, ToolExecutionError) and isinstance(error.cause, RemoteToolError), error
            assert error.cause.kind == "reply_too_large"
        assert registry.call("huge", {"n": 100}) == "x" * 100
    finally:
        remote.close()


def test_import_tools_takes_a_specs_call_timeout_unless_told_otherwise(lines_server: tuple[list[str], Path]) -> None:
    """``import_tools(registry, McpSpec(..., call_timeout=7))`` bounded calls by 300 s: the argument's default won."""
    command, _ = lines_server
    spec = McpSpec(name="t", command=tuple(command), call_timeout=7.0)
    assert RemoteServer(spec).call_timeout == 7.0 and RemoteServer(spec, call_timeout=None).call_timeout is None
    assert RemoteServer(McpSpec(name="u", command=tuple(command))).call_timeout == 300.0
    registry = _registry()
    remote = import_tools(registry, spec)
    try:
        assert remote.call_timeout == 7.0 and registry.call("ok") == "ran ok"
    finally:
        remote.close()
