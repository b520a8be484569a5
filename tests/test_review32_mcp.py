"""Review 32 (MCP): an HTTP reply the SDK cannot parse is told as over stdio, without the reply's text; ``serve``
decides "loopback" from the address it bound; imported tools ask for progress only when someone listens, and pass
on only finite, increasing progress."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_support import http_server

from harness_one import ToolExecutionError, ToolRegistry
from harness_one.mcp import McpConnectionError, import_tools
from harness_one.mcp._server import _loopback

#: A reply to a request of a method: its JSON text (``ID`` stands for the request's id), or the events of an event
#: stream (a list of such texts).
Reply = str | list[str]

SECRET = "correct-horse-battery-staple-9876"
#: Valid JSON, no JSON-RPC message (no "jsonrpc"): pydantic's dump of it quotes the value cut in the middle,
#: ``'aaaa...aple-9876'``, so the ``password=`` that a mask needs is gone.
JUNK = json.dumps({"id": 0, "result": {"note": "a" * 200 + f" password={SECRET}"}}).replace('"id": 0', '"id": ID')
UNREADABLE = "the reply could not be read (Field required)"


def _result(message: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "ran"}]}}


class _Remote(http.server.BaseHTTPRequestHandler):
    """A remote MCP server's HTTP endpoint: ``server.replies[method]`` answers a request of that method (else a
    valid reply); the ``tools/call`` requests it got are kept in ``server.calls``."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            return self._send(202, b"")
        if method == "tools/call":
            self.server.calls.append(message)
        answer = self.server.replies.get(method)
        reply: Reply
        if answer is not None:
            reply = answer(message)
        elif method == "initialize":
            info = {"name": "remote", "version": "1"}
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": info}
            reply = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            reply = json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}
            )
        elif method == "tools/call":
            reply = json.dumps(_result(message))
        else:
            reply = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}})
        if isinstance(reply, str):
            return self._send(200, reply.replace("ID", json.dumps(request_id)).encode())
        events = "".join(f"event: message\ndata: {event.replace('ID', json.dumps(request_id))}\n\n" for event in reply)
        return self._send(200, events.encode(), "text/event-stream")

    def do_GET(self) -> None:
        self._send(405, b"")

    def do_DELETE(self) -> None:
        self._send(200, b"")

    def log_message(self, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    replies: dict[str, Callable[[dict[str, Any]], Reply]]
    calls: list[dict[str, Any]]


@contextmanager
def _remote(**replies: Callable[[dict[str, Any]], Reply]) -> Iterator[tuple[str, _Server]]:
    """:class:`_Remote` on 127.0.0.1 (a free port) in a thread while the block runs: its URL, and the server."""
    server = _Server(("127.0.0.1", 0), _Remote)
    server.replies = {name.replace("_", "/"): reply for name, reply in replies.items()}
    server.calls = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _junk(events: bool) -> Callable[[dict[str, Any]], Reply]:
    return lambda message: [JUNK] if events else JUNK


# --------------------------------------------------------------------------- 1. an HTTP reply the SDK cannot parse


@pytest.mark.parametrize("events", [False, True], ids=["json", "event-stream"])
def test_an_unreadable_http_reply_to_a_call_is_told_without_its_text(events: bool) -> None:
    """The model was shown the SDK's pydantic dump (``Failed to parse JSON response: 4 validation errors ...
    input_value={... ...aple-9876'}``), a secret's tail in it that masking missed: now stdio's words."""
    with _remote(tools_call=_junk(events)) as (url, _server):
        registry = ToolRegistry(autoload=False)
        remote = import_tools(registry, url, name="remote", connect_timeout=10, call_timeout=10)
        try:
            error = registry.try_call("t").error
            assert isinstance(error, ToolExecutionError)
            assert error.message == f"Tool 't' failed on MCP server 'remote': {UNREADABLE}"
            assert str(error.cause) == UNREADABLE
            assert "9876" not in repr(error) and "aaaa" not in repr(error)
        finally:
            remote.close()


@pytest.mark.parametrize("events", [False, True], ids=["json", "event-stream"])
def test_an_unreadable_http_reply_to_the_handshake_or_the_listing_is_told_without_its_text(events: bool) -> None:
    for method in ("initialize", "tools_list"):
        with _remote(**{method: _junk(events)}) as (url, _server):
            with pytest.raises(McpConnectionError) as raised:
                import_tools(ToolRegistry(autoload=False), url, name="remote", connect_timeout=10)
        said = str(raised.value)
        assert UNREADABLE in said and "9876" not in said and "aaaa" not in said and "validation error" not in said, said
        if method == "initialize":
            assert said == f"Cannot connect to MCP server 'remote': {UNREADABLE}"


def test_a_reply_that_is_no_json_is_told_by_its_first_problem() -> None:
    with _remote(tools_call=lambda message: f"not json {SECRET}") as (url, _server):
        registry = ToolRegistry(autoload=False)
        remote = import_tools(registry, url, name="remote", connect_timeout=10, call_timeout=10)
        try:
            error = registry.try_call("t").error
            assert isinstance(error, ToolExecutionError)
            assert error.message.startswith("Tool 't' failed on MCP server 'remote': the reply could not be read (Invalid JSON: ")
            assert SECRET not in error.message and "input_value" not in error.message
        finally:
            remote.close()


# --------------------------------------------------------------------------- 2. serve's loopback warning


@pytest.mark.parametrize(("host", "warned"), [("127.1", False), ("0.0.0.0", True)])
def test_serve_warns_from_the_address_it_bound(tmp_path: Path, host: str, warned: bool) -> None:
    """``--host 127.1`` listens on 127.0.0.1, yet was told it was no loopback address."""
    with http_server(tmp_path, "--host", host) as url, httpx.Client(timeout=10) as client:
        port = url.rsplit(":", 1)[1].split("/")[0]
        client.get(f"http://127.0.0.1:{port}/mcp")  # answered: what serve says before it serves is written
    [log] = tmp_path.glob("serve-*.log")
    assert ("not a loopback address" in log.read_text()) is warned, log.read_text()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("::ffff:127.0.0.1", True),  # IPv4-mapped, as an IPv6 socket may bind 127.0.0.1
        ("[::ffff:127.0.0.2]", True),
        ("::ffff:10.0.0.1", False),
        ("127.0.0.1", True),
        ("0.0.0.0", False),
        ("::1", True),
    ],
)
def test_an_ipv4_mapped_loopback_address_is_loopback(host: str, loopback: bool) -> None:
    assert _loopback(host) is loopback


# --------------------------------------------------------------------------- 3. progress of imported tools


def _progressing(message: dict[str, Any]) -> Reply:
    token = message["params"].get("_meta", {}).get("progressToken")
    steps: list[tuple[Any, Any]] = [(1, 10), (1, 10), (0.5, 10), ("NaN", None), (3, "Infinity"), (2, 10), (4, None)]
    notes = []
    for done, total in steps:
        params = {"progressToken": token, "progress": done, "message": f"at {done}"}
        if total is not None:
            params["total"] = total
        notes.append(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))
    notes = [note.replace('"NaN"', "NaN").replace('"Infinity"', "Infinity") for note in notes]
    return [*notes, json.dumps(_result(message))] if token is not None else [json.dumps(_result(message))]


def test_progress_is_asked_for_only_when_someone_listens() -> None:
    """Every call sent ``_meta.progressToken``, an on_progress given or not."""
    with _remote(tools_call=_progressing) as (url, server):
        registry = ToolRegistry(autoload=False)
        remote = import_tools(registry, url, name="remote", connect_timeout=10, call_timeout=10)
        try:
            assert registry.call("t") == "ran"
            assert "progressToken" not in (server.calls[-1]["params"].get("_meta") or {})
            assert registry.call("t", on_progress=lambda *report: None) == "ran"
            assert "progressToken" in server.calls[-1]["params"]["_meta"]
        finally:
            remote.close()


def test_only_finite_increasing_remote_progress_reaches_on_progress() -> None:
    """Repeats, steps back and NaN reached ``on_progress`` as sent; the served side drops them (one rule now)."""
    with _remote(tools_call=_progressing) as (url, _server):
        registry = ToolRegistry(autoload=False)
        remote = import_tools(registry, url, name="remote", connect_timeout=10, call_timeout=10)
        try:
            seen: list[tuple[float, float | None, str | None]] = []
            assert registry.call("t", on_progress=lambda *report: seen.append(report)) == "ran"
            assert seen == [(1.0, 10.0, "at 1"), (3.0, None, "at 3"), (4.0, None, "at 4")]
        finally:
            remote.close()
