"""Tools of a remote MCP server as harness tools, with every harness policy around them.

Each :class:`RemoteServer` keeps one connection (the SDK's ``Client``, over stdio or
streamable HTTP) on a background event loop shared by all remote servers of the process,
so its tools can be called from any thread or loop, sync or async. A remote tool is an
async harness tool: a harness timeout cancels the remote call (the SDK sends
``notifications/cancelled``), a lost connection is :class:`McpConnectionError` and the next
call reconnects, and a remote ``isError`` result is a :class:`~harness_one.ToolExecutionError`
with the remote text (secrets masked, cut to :data:`ERROR_TEXT_LIMIT` characters). A call no
timeout policy bounds gets the default deadline ``call_timeout`` (300 s), then
:class:`~harness_one.ToolTimeout`.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import inspect
import itertools
import json
import logging
import math
import os
import re
import signal
import sys
import threading
import typing
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack
from types import CodeType
from typing import Any, Literal, TypeVar

import anyio
import httpx2
import mcp.client.stdio as sdk_stdio
import mcp.client.streamable_http as sdk_http
import mcp_types as types
import pydantic
from anyio.abc import ByteReceiveStream
from anyio.streams.text import TextReceiveStream
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, PARSE_ERROR
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from harness_one import (
    Call,
    CircuitBreakerPolicy,
    RetryableError,
    Tool,
    ToolDefinitionError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    __version__,
)
from harness_one._errors import (
    ERROR_TEXT_LIMIT,
    _seconds_from,
    _wait_hint,
    exception_text,
    from_state,
    outside_text,
    secrets_held,
)
from harness_one._log import log_event
from harness_one._render import safe_text
from harness_one._requests import leading_members
from harness_one._schema import without_bad_defaults
from harness_one._worker import _session_members, exit_reason

from ._spec import ERROR_META_KEY, MAX_REPLY_BYTES, McpSpec, McpSpecError, is_byte_count
from ._stdio import _detail

__all__ = [
    "ERROR_TEXT_LIMIT",
    "MAX_REPLY_BYTES",
    "MAX_RETRY_AFTER",
    "McpConnectionError",
    "RemoteServer",
    "RemoteToolError",
    "aimport_tools",
    "import_tools",
    "local_name",
]

T = TypeVar("T")
_VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_JSON = json.JSONDecoder()
_WRAP = "x-fastmcp-wrap-result"
#: Errors of the transport itself (the server process died, the socket closed, HTTP failed).
_LOST = (OSError, EOFError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, httpx2.TransportError)
#: The synthesized errors of the SDK's HTTP transport for a request whose response stream broke.
_HTTP_ABANDONED = ("SSE stream failed", "SSE stream ended")
#: How the SDK's HTTP transport begins its error for a reply it could not parse (pydantic's dump follows, the reply's
#: own values quoted in it), and the first problem of that dump (a line ``  MSG [type=...``).
_HTTP_UNREADABLE = ("Failed to parse JSON response: ", "Failed to parse SSE message: ")
_FIRST_PROBLEM = re.compile(r"^  (.+?) \[type=", re.MULTILINE)
#: How much of a line over the bound is kept, to read its id from.
_HEAD = 1 << 12
#: The pages of one tools/list read at most, and the tools kept of them all.
_MAX_PAGES = 100
_MAX_TOOLS = 10_000
#: The longest ``retry_after`` (seconds) taken from a remote error: a longer one (an infinity too) is cut to it.
MAX_RETRY_AFTER = 86_400.0
#: A remote error's ``kind`` as taken: a short word (else none).
_KIND = re.compile(r"^[A-Za-z0-9_.:-]{1,64}\Z")


class McpConnectionError(RetryableError):
    """The MCP server could not be reached, or the connection broke; the next call reconnects.

    A :class:`~harness_one.RetryableError`: the retry plugin runs it again for idempotent tools.
    """

    kind = "mcp_connection"


class RemoteToolError(Exception):
    """What a remote tool answered with ``isError`` (the cause of the :class:`ToolExecutionError`).

    ``text`` is the remote's message as an error shows it: secrets masked (the ``held`` texts too: the call's secret
    values), then cut to :data:`ERROR_TEXT_LIMIT` characters (:func:`~harness_one._errors.outside_text`); ``data`` the error
    data a harness-one server sends (``_meta["harness-one/error"]``: ``type``, ``kind``, ``retry_after``,
    ...), else ``None``.
    """

    __module__ = "harness_one.mcp"  # where it is imported from: the name errors and span attributes give its type

    def __init__(self, text: str, *, server: str, tool: str, data: Any = None, held: Sequence[str] = ()) -> None:
        text = outside_text(text, held)
        super().__init__(text)
        self.text = text
        self.server = server
        self.tool = tool
        self.data = data
        error = data if isinstance(data, dict) else {}
        kind = error.get("kind")
        self.kind: str | None = kind if isinstance(kind, str) and _KIND.match(kind) else None
        self.retry_after: float | None = _remote_wait(error.get("retry_after"))

    def __reduce__(self) -> tuple[Any, ...]:
        # By its fields (the constructor's are keyword-only): a ToolExecutionError carrying it crosses processes.
        # (Its text is masked and cut already: doing it again changes nothing.)
        return (_remote_error, (self.text, self.server, self.tool, self.data))


def _remote_wait(value: Any) -> float | None:
    """A remote ``retry_after`` as seconds, read as a local tool's (:func:`_wait_hint`) or as ``to_dict`` writes an
    infinity (``"Infinity"``, :func:`_seconds_from`): a longer wait than :data:`MAX_RETRY_AFTER` (an infinity too) is
    cut to it, and NaN, a negative or what is no number is none (no wait can be what it says)."""
    wait = _seconds_from(value) if isinstance(value, str) else _wait_hint(value)
    if wait is None or not wait >= 0.0:  # (NaN compares false)
        return None
    return min(wait, MAX_RETRY_AFTER)


def _remote_error(text: str, server: str, tool: str, data: Any) -> RemoteToolError:
    return RemoteToolError(text, server=server, tool=tool, data=data)


# --------------------------------------------------------------------------- the background loop

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
#: Servers with a connection open, closed at exit so that stdio servers end cleanly (EOF, not a broken pipe).
_open: weakref.WeakSet[RemoteServer] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    loop = _loop
    if loop is None or loop.is_closed() or not loop.is_running():
        return
    servers = list(_open)
    if servers:
        with contextlib.suppress(Exception):
            _wait(_close_each(servers), 10)
    if _closing:  # the servers of failed imports still stopping
        concurrent.futures.wait(list(_closing), timeout=10)


async def _close_each(servers: list[RemoteServer]) -> None:
    await asyncio.gather(*(server._close() for server in servers), return_exceptions=True)


def _background() -> asyncio.AbstractEventLoop:
    """The event loop (on a daemon thread) that owns every remote connection of this process."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="harness-one-mcp", daemon=True).start()
            _loop = loop
        return _loop


def _submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    return asyncio.run_coroutine_threadsafe(coro, _background())


def _wait(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    loop = _background()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("a blocking MCP call from the MCP background loop itself; use the async API")
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


async def _await(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and await it here; cancelling the wait cancels it there."""
    return await asyncio.wrap_future(_submit(coro))


# --------------------------------------------------------------------------- the stdio reader

#: ``(server name, bound)`` in the task that owns a connection (see :func:`_text_stream`) and in each task that sends
#: its server a request (the SDK's HTTP transport handles a request's reply in its sender's context): what
#: :class:`_UnreadableReplies` names.
_reply_bound: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("harness_one_mcp_reply", default=None)
#: The server whose connection the task that owns it holds (and its stdio reader): whose calls under way a skipped
#: line is masked with (:meth:`RemoteServer._shown_skipped`).
_connection: contextvars.ContextVar[RemoteServer | None] = contextvars.ContextVar("harness_one_mcp_connection", default=None)
#: The stdout line the SDK's stdio reader is parsing (see :func:`_parse_kept`), for :func:`_unread`.
_parsing: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_one_mcp_parsing", default=None)


def _text_stream(stream: ByteReceiveStream, encoding: str = "utf-8", errors: str = "strict") -> Any:
    """What the SDK's ``stdio_client`` reads a server's stdout through: :class:`_ReplyLines` in a connection of
    :class:`RemoteServer` (its reader task runs in the context of the task that owns the connection), else the
    SDK's own ``TextReceiveStream``."""
    bound = _reply_bound.get()
    if bound is None:
        return TextReceiveStream(stream, encoding=encoding, errors=errors)
    return _ReplyLines(stream, encoding, errors, *bound)


def _reads_text_stream(module: Any, name: str = "TextReceiveStream") -> bool:
    """Whether the SDK's ``stdio_client`` still reads stdout through its module's ``TextReceiveStream`` (the name
    the patch below replaces; or ``name``): the module has it, and the code of ``stdio_client`` or a function in it
    names it."""
    function = getattr(module, "stdio_client", None)
    code = getattr(inspect.unwrap(function), "__code__", None) if callable(function) else None
    if not hasattr(module, name) or not isinstance(code, CodeType):
        return False
    codes = [code]
    while codes:
        code = codes.pop()
        if name in code.co_names:
            return True
        codes.extend(c for c in code.co_consts if isinstance(c, CodeType))
    return False


# The SDK's reader splits all it holds again at each 64 KiB chunk (a 20 MB reply took 7 s, 100 MB over a
# minute), with no bound: it reads our whole lines instead. An SDK that reads stdout otherwise is left as it
# is, and max_reply_bytes does not apply (a warning says so at the first stdio connection).
_BOUNDED = _reads_text_stream(sdk_stdio)
if _BOUNDED:
    setattr(sdk_stdio, "TextReceiveStream", _text_stream)  # noqa: B010
_unbounded_warned = False

_sdk_parse_line = getattr(sdk_stdio, "_parse_line", None)


def _parse_kept(*args: Any, **kwargs: Any) -> Any:
    """The SDK's parse of a stdout line, with the line in :data:`_parsing` meanwhile (the SDK logs its record of a line
    it could not parse within it); of such a line, :func:`_unread` is worked out here and kept on its error, for the
    session's handler (the record's filter may not run: a logger set above ERROR). Whatever the SDK's parse takes is
    passed on: the line is its first argument when that is a ``str``; otherwise (a changed signature) none is kept and
    :func:`_unread` reads pydantic's error, as where the patch is not applied."""
    assert _sdk_parse_line is not None
    token = _parsing.set(args[0] if args and isinstance(args[0], str) else None)
    try:
        parsed = _sdk_parse_line(*args, **kwargs)
        if isinstance(parsed, ValueError):
            _unread(parsed)
        return parsed
    finally:
        _parsing.reset(token)


# Pydantic's dump of a line it could not parse quotes the first problem's value (``'1.0'`` of ``"jsonrpc": "1.0"``),
# not the line: the line itself tells what it is and is what a skipped line's record shows.
if _reads_text_stream(sdk_stdio, "_parse_line") and callable(_sdk_parse_line):
    setattr(sdk_stdio, "_parse_line", _parse_kept)  # noqa: B010


class _UnreadableReplies(logging.Filter):
    """On the SDK's stdio and HTTP loggers, in a connection of :class:`RemoteServer` (where :data:`_reply_bound` is
    set): a reply the SDK could not parse, which it logs with its traceback
    and pydantic's dump quoting the reply (a piece of its head and tail per problem, secrets unmasked; the whole
    value of a short one), is logged as the first problem alone, naming the server (the call it answered fails with
    :func:`_unreadable`'s words). A stdio line that answers no request (:func:`_unread`: a banner, a ``print``), which
    is skipped, is a WARNING that shows its start (:meth:`RemoteServer._shown_skipped`: masked with the secret values
    of every call under way on the connection), dropped where the logger does not log a WARNING (it passed the
    logger's check as an ERROR). Other records pass as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        bound = _reply_bound.get()
        error = record.exc_info[1] if record.exc_info else None
        if bound is not None and isinstance(error, pydantic.ValidationError):
            line = _unread(error)[1] if record.name == sdk_stdio.__name__ else None
            if line is None:
                record.msg, record.args = "%s (MCP server '%s'): %s", (record.getMessage(), bound[0], safe_text(_detail(error)))
            elif not logging.getLogger(record.name).isEnabledFor(logging.WARNING):
                return False
            else:
                server = _connection.get()
                record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
                record.msg = "MCP server '%s' wrote a line that is no JSON-RPC message, skipped (%s): %s"
                record.args = (
                    bound[0],
                    safe_text(_detail(error)),
                    server._shown_skipped(error, line) if server else _shown(line),
                )
            record.exc_info = record.exc_text = None
        return True


for _logger in (sdk_stdio.__name__, sdk_http.__name__):
    logging.getLogger(_logger).addFilter(_UnreadableReplies())

#: The process groups of the stdio servers the task that owns a connection started (see :func:`_spawn_recorded`).
_groups: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("harness_one_mcp_groups", default=None)
#: What the task that owns a connection does with the process of a stdio server it started (watch it end).
_spawned: contextvars.ContextVar[Callable[[Any], None] | None] = contextvars.ContextVar("harness_one_mcp_spawned", default=None)
#: How long a stdio server's process group has after SIGTERM before SIGKILL, once its connection closed.
_KILL_GRACE = 2.0
_spawn = getattr(sdk_stdio, "_create_platform_compatible_process", None)


async def _spawn_recorded(*args: Any, **kwargs: Any) -> Any:
    """The SDK's spawn of a stdio server (in a session, a process group of its own), its group recorded for the
    connection's task: the SDK stops the whole group only when the server outlives its grace period, and a server
    that exits at once leaves its children running (holding the caller's stderr)."""
    assert _spawn is not None
    process = await _spawn(*args, **kwargs)
    groups = _groups.get()
    with contextlib.suppress(Exception):
        if groups is not None and os.getpgid(process.pid) == process.pid:  # a group of its own: never the caller's
            groups.append(process.pid)
    watch = _spawned.get()
    if watch is not None:
        watch(process)
    return process


if sys.platform != "win32" and inspect.iscoroutinefunction(_spawn):
    setattr(sdk_stdio, "_create_platform_compatible_process", _spawn_recorded)  # noqa: B010


def _group_alive(group: int) -> bool:
    """Whether a process of ``group`` (a server started in a session of its own) still runs: one that ended but is not
    yet reaped (a zombie, whose parent may never reap it, as PID 1 without an init does not) is not running, though
    ``killpg(group, 0)`` still finds it."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if not os.path.exists("/proc/self/stat"):  # no Linux /proc: the signal is all there is to go by
        return True
    return bool(_session_members(group))


async def _end_group(group: int) -> None:
    """Stop what is left of a stdio server's process group: SIGTERM, then SIGKILL after :data:`_KILL_GRACE` s."""
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return  # the group is gone
    except PermissionError:
        pass
    deadline = asyncio.get_running_loop().time() + _KILL_GRACE
    pause = 0.01  # growing to 0.1 s: a look through /proc runs on the loop every MCP connection shares
    while _group_alive(group):
        if asyncio.get_running_loop().time() >= deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
            return
        await asyncio.sleep(pause)
        pause = min(2 * pause, 0.1)


def _warn_unbounded() -> None:
    """Say once that this SDK's stdio replies are read without the ``max_reply_bytes`` bound."""
    global _unbounded_warned
    if not _BOUNDED and not _unbounded_warned:
        _unbounded_warned = True
        log_event(
            logging.WARNING,
            "mcp max_reply_bytes not applied",
            reason="the MCP SDK's stdio_client no longer reads through mcp.client.stdio.TextReceiveStream",
        )


#: A JSON-RPC id written last, as the TypeScript SDK writes it (``{"result": ..., "jsonrpc": "2.0", "id": 7}``):
#: a string or an integer, the last member of the object the line holds.
_LAST_ID = re.compile(r'[{,][ \t\r\n]*"id"[ \t\r\n]*:[ \t\r\n]*("(?:[^"\\]|\\.)*"|-?[0-9]{1,50})[ \t\r\n]*\}[ \t\r\n]*\Z')


def _reply_ids(text: str) -> list[str | int]:
    """The ids of the replies a line may answer: the leading ``id`` of each JSON object it holds one after another,
    from its first ``{`` (a server that leaves out a newline joins what it wrote to its next line). A request or a
    notification (a ``method``) answers none; the objects are read up to the first that cannot be read whole (8 at most).
    """
    ids: list[str | int] = []
    at = text.find("{")
    for _ in range(8):
        if at < 0:
            break
        start = leading_members(text[at:])
        if type(start.get("id")) in (str, int) and "method" not in start:
            ids.append(start["id"])
        try:
            end: int | None = _JSON.raw_decode(text, at)[1]
        except RecursionError:  # nested deeper than Python's stack allows (in a deep task, 300 levels may do)
            end = _value_end(text, at)
        except ValueError:
            break
        if end is None:
            break
        at = text.find("{", end)
    return ids


#: What :func:`_value_end` looks for: a bracket or the start of a string; the rest of a string (to its closing quote).
_BRACKET = re.compile(r'[\[\]{}"]')
_STRING_REST = re.compile(r'(?:[^"\\]|\\.)*"', re.S)
#: The brackets and strings :func:`_value_end` reads at most (it gives up past them).
_SCAN_LIMIT = 1 << 20


def _value_end(text: str, at: int) -> int | None:
    """Where the JSON object or array that starts at ``at`` ends, found without recursion (strings skipped,
    brackets counted, nothing else checked); None when it does not end in ``text`` or within
    :data:`_SCAN_LIMIT` brackets and strings."""
    depth = 0
    for _ in range(_SCAN_LIMIT):
        found = _BRACKET.search(text, at)
        if found is None:
            return None
        at = found.end()
        char = found.group()
        if char == '"':
            rest = _STRING_REST.match(text, at)
            if rest is None:
                return None
            at = rest.end()
        elif char in "{[":
            depth += 1
        else:
            depth -= 1
            if depth <= 0:
                return at
    return None


def _too_large_error(request_id: str | int, limit: int, size: int | None = None) -> str:
    """The JSON-RPC error (JSON text) that answers ``request_id`` in place of a reply over ``limit`` bytes
    (``size``: the reply's size, None when not read to its end)."""
    was = f"{size:,} bytes, more than the limit of {limit:,}" if size is not None else f"more than the limit of {limit:,} bytes"
    data = {"kind": "reply_too_large", "max_reply_bytes": limit}
    error = {"code": INTERNAL_ERROR, "message": f"the reply was {was} (max_reply_bytes)", "data": data}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})


class _ReplyLines:
    """A stdio server's stdout as the SDK's reader gets it: one whole line at a time, read in linear time.

    A line longer than ``limit`` bytes (not counting its line ending) is read to its end and dropped; the
    request it answers gets an error saying so, with ``kind`` ``reply_too_large``. Its ``id`` is read from
    the start of the line (Python's SDK writes it before the ``result``; see :func:`_reply_ids`) or else from
    its end (the TypeScript SDK writes it last). A line over the bound whose id cannot be read, or that is a
    request or a notification, is dropped and logged. A reply is whole only at its newline: what a server
    writes without one is the start of its next line.
    """

    def __init__(self, stream: ByteReceiveStream, encoding: str, errors: str, server: str, limit: int) -> None:
        self.stream, self.encoding, self.errors = stream, encoding, errors
        self.server, self.limit = server, limit
        self.chunk, self.at = b"", 0  # the chunk read last, and where its unread part starts

    def __aiter__(self) -> _ReplyLines:
        return self

    async def __anext__(self) -> str:
        chunk, at = self.chunk, self.at
        end = chunk.find(b"\n", at)
        if 0 <= end - at <= self.limit:  # the common case: a whole line, within the bound, in the chunk at hand
            self.at = end + 1
            return chunk[at : end + 1].decode(self.encoding, self.errors)
        while True:
            line, tail, size = await self._line()
            if size <= self.limit:
                return line.decode(self.encoding, self.errors)
            answer = self._too_large(line[:_HEAD], tail, size)
            if answer is not None:
                return answer

    async def _line(self) -> tuple[bytes, bytes, int]:
        """The next line with its newline, its last bytes and its size without its line ending; of a line over the
        bound, only its first :data:`_HEAD` and last :data:`_HEAD` bytes."""
        parts: list[bytes] = []
        head = tail = b""
        size = 0
        while True:
            chunk, at = self.chunk, self.at
            end = chunk.find(b"\n", at)
            self.at = stop = len(chunk) if end < 0 else end + 1
            piece = chunk if at == 0 and stop == len(chunk) else chunk[at:stop]  # one copy of each byte: linear
            size += len(piece)
            if not head and size <= self.limit + 2:  # (+ the line ending)
                parts.append(piece)
            else:
                if not head:  # once: the line is over the bound
                    piece, parts = b"".join([*parts, piece]), []
                if len(head) < _HEAD:
                    head = (head + piece[:_HEAD])[:_HEAD]
                tail = (tail + piece[-_HEAD:])[-_HEAD:]
            if end >= 0:
                line = head or (parts[0] if len(parts) == 1 else b"".join(parts))
                last = tail or line[-_HEAD:]
                return line, last, size - (2 if last.endswith(b"\r\n") else 1)
            try:
                self.chunk, self.at = await self.stream.receive(), 0
            except anyio.EndOfStream:
                raise StopAsyncIteration from None  # a last line without a newline is dropped, as the SDK does

    def _too_large(self, head: bytes, tail: bytes, size: int) -> str | None:
        """The error lines that answer the requests a line over the bound answers (None: none can be named)."""
        text = head.decode(self.encoding, "replace")
        ids = _reply_ids(text)
        if not ids and "method" not in leading_members(text):
            last = _LAST_ID.search(tail.decode(self.encoding, "replace"))
            with contextlib.suppress(ValueError):  # a string with an escape JSON has not
                found = json.loads(last[1]) if last else None
                ids = [found] if isinstance(found, (str, int)) else []
        log_event(logging.WARNING, "mcp reply too large", server=self.server, size=size, limit=self.limit)
        return "".join(_too_large_error(request_id, self.limit, size) + "\n" for request_id in ids) or None


# --------------------------------------------------------------------------- the HTTP reply bound

#: A line ending in an event stream.
_EOL = re.compile(rb"\r\n|\r|\n")


class _BoundedBody(httpx2.AsyncByteStream):
    """The body of an HTTP reply as the SDK reads it, within ``limit`` bytes: whole (a JSON reply), or one event
    at a time (an event stream, ``events``; without the empty line that ends it), each handed on once complete.
    At a body or an event over the bound
    nothing more is read: the request the response answers gets the error ``reply_too_large`` in its place (as
    the body, or as an event) and the response is closed (the HTTP connection, not the MCP session)."""

    def __init__(self, body: httpx2.AsyncByteStream, request: httpx2.Request, server: str, limit: int, events: bool) -> None:
        self.body, self.request, self.server, self.limit, self.events = body, request, server, limit, events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts: list[bytes] = []  # the body, or the event, read so far
        size = 0  # their length
        fresh, cr = True, False  # (events) a line starts at the next byte; the last chunk ended with \r
        async for chunk in self.body:
            done = 0  # (events) where the complete events in ``chunk`` end
            if self.events:
                at = 1 if cr and chunk.startswith(b"\n") else 0  # the \n of a \r\n cut in two
                done = 0 if parts else at  # (it ends the event handed on last)
                cr, begin = chunk.endswith(b"\r"), at if fresh else -1
                for end in _EOL.finditer(chunk, at):
                    if end.start() == begin:  # an empty line: the event ends (counted without it)
                        if size + end.start() - done > self.limit:
                            break
                        size, done = 0, end.end()
                    begin = end.end()
                fresh = begin == len(chunk)
            size += len(chunk) - done
            if size > self.limit:
                if done:  # the events this chunk completed before the one over the bound are handed on
                    yield b"".join([*parts, chunk[:done]])
                answer = self._too_large()
                if answer:
                    yield answer
                return
            if done:
                yield b"".join([*parts, chunk[:done]])
                parts = []
            if done < len(chunk):
                parts.append(chunk[done:] if done else chunk)
        if parts:
            yield b"".join(parts)

    def _too_large(self) -> bytes:
        """What answers the request in place of the reply over the bound (nothing when it is not a request)."""
        log_event(logging.WARNING, "mcp reply too large", server=self.server, limit=self.limit)
        with contextlib.suppress(Exception):  # not a JSON-RPC request: nothing to answer
            request = leading_members(self.request.content.decode())
            if "method" in request and type(request.get("id")) in (str, int):
                error = _too_large_error(request["id"], self.limit).encode()
                return b"event: message\r\ndata: " + error + b"\r\n\r\n" if self.events else error
        return b""

    async def aclose(self) -> None:
        await self.body.aclose()


async def _bound_reply(server: str, limit: int, response: httpx2.Response) -> None:
    """An httpx response hook: the reply's body read through :class:`_BoundedBody`, never decoded (an encoded
    body could hold far more than the bound; the client asks for none, ``Accept-Encoding: identity``)."""
    body = response.stream
    if isinstance(body, httpx2.AsyncByteStream):
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        response.headers.pop("content-encoding", None)
        response.stream = _BoundedBody(body, response.request, server, limit, events=kind == "text/event-stream")


# --------------------------------------------------------------------------- names


def local_name(remote: str, prefix: str = "", taken: frozenset[str] | set[str] = frozenset()) -> str:
    """A name every provider accepts (``^[A-Za-z0-9_-]{1,64}$``) for remote tool ``remote``.

    ``prefix_remote`` (no ``_`` added after a prefix ending in ``_`` or ``-``) when valid and
    not in ``taken``; otherwise other characters become ``_`` and, if that is too long or
    taken, a hash of the remote name makes it unique (salted again while the result is taken).
    """
    name = _prefixed(remote, prefix)
    if _VALID.match(name) and name not in taken:
        return name
    clean = _INVALID_CHARS.sub("_", name) or "_"
    if len(clean) <= 64 and clean not in taken and clean != "_":
        return clean
    key = remote.encode("utf-8", "surrogatepass")
    salt = 0
    while True:
        digest = hashlib.sha256(key + (b"\0%d" % salt if salt else b"")).hexdigest()[:8]
        hashed = f"{clean[:55]}_{digest}"
        if hashed not in taken:
            return hashed
        salt += 1


def _prefixed(remote: str, prefix: str) -> str:
    """``prefix_remote`` (no ``_`` added after a prefix ending in ``_`` or ``-``), valid or not."""
    return f"{prefix}_{remote}" if prefix and not prefix.endswith(("_", "-")) else prefix + remote


# --------------------------------------------------------------------------- the remote server


async def _sdk_check_skipped(name: str, result: types.CallToolResult) -> None:
    """In place of the SDK session's ``validate_tool_result``: the harness checks results itself (bounded)."""


class RemoteServer:
    """One remote MCP server: its connection and its tools as harness :class:`~harness_one.Tool` objects.

    ``names`` maps each local tool name to the remote one; ``failures`` lists remote tools
    that could not become harness tools (an unusable schema, a name another tool holds) and why.
    ``call_timeout`` bounds a remote call no ``timeout``/``total_timeout`` policy bounds (``None``: never;
    ``"spec"``, the default: the spec's, 300 s unless it says otherwise);
    ``max_reply_bytes`` (None: the spec's) one reply: a line a stdio server writes (see :class:`_ReplyLines`),
    an HTTP body or event (see :class:`_BoundedBody`). Use :func:`import_tools` / :func:`aimport_tools` to
    connect and add the tools to a registry.
    """

    def __init__(
        self,
        spec: McpSpec,
        *,
        connect_timeout: float = 30.0,
        call_timeout: float | Literal["spec"] | None = "spec",
        max_reply_bytes: int | None = None,
    ) -> None:
        limit = spec.max_reply_bytes if max_reply_bytes is None else max_reply_bytes
        if not is_byte_count(limit):
            raise ValueError(f"max_reply_bytes must be a positive number of bytes, got {limit!r}")
        self.spec = spec
        self.connect_timeout = connect_timeout
        self.call_timeout: float | None = spec.call_timeout if call_timeout == "spec" else call_timeout
        self.max_reply_bytes: int = limit
        self.names: dict[str, str] = {}
        self.failures: list[str] = []
        self.registry: ToolRegistry | None = None
        self._definition: dict[str, Any] = {}
        self._client: Client | None = None
        self._stop: asyncio.Event | None = None
        self._owner: asyncio.Task[None] | None = None
        self._connecting: asyncio.Future[Client] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Each remote tool as last listed, by its local name: a refresh re-adds only the tools that changed.
        self._listed: dict[str, types.Tool] = {}
        #: What the last listing left out and why (in ``failures``): the tools the SDK refused, and its cut pages.
        self._refused: list[str] = []
        self._cut: list[str] = []
        #: Every local name given out, to its remote tool (the last :data:`_MAX_TOOLS`, least recently listed first):
        #: a local name never goes to another remote tool, and a remote tool that comes back gets its own again.
        self._given: dict[str, str] = {}
        self._refreshing: asyncio.Task[None] | None = None
        #: The client of the connection under way and the process of its stdio server (once started).
        self._process: tuple[Client, list[Any]] | None = None
        self._again = False  # the tools changed again while a refresh ran: one more follows it
        self._missed = False  # the tools changed before the import added them: a refresh follows it
        #: The tools this server put in :attr:`registry`, by name: a tool of the registry is this server's only
        #: while it is the very object (another server of the same name, code, a package may hold the name).
        self._added: dict[str, Tool] = {}
        #: The registry whose name this server holds (see :func:`_claim`): from before it connects for its import
        #: until it is closed, its import fails, or another import of its name takes the name over.
        self._claimed: ToolRegistry | None = None
        #: The servers of its name its import takes the name over from once it has listed the tools (see
        #: :func:`_claim`); then those it took it from, each with whether it held the name and was attached
        #: (a failure adding the tools gives it back: :meth:`_give_back`).
        self._replacing: list[RemoteServer] = []
        self._took: list[tuple[RemoteServer, bool, bool]] = []
        #: The lines of its stdio server's that answered no request and were skipped (see :func:`_unread`): how many
        #: so far, and the last :data:`_SKIPPED_KEPT` of them with their numbers, as shown (:func:`_shown`, masked
        #: when read), for a deadline's error to name.
        self._skips = 0
        self._skipped: collections.deque[tuple[int, str]] = collections.deque(maxlen=_SKIPPED_KEPT)
        #: The arguments and context of each call under way: a skipped line is masked with the secret values of them
        #: all (a server may quote any call's arguments in it, and any call's deadline error may name it); and those
        #: values of each, walked at the first skipped line while it is under way (:meth:`_held_now`), dropped as it
        #: ends: a call with no skipped line pays only its entry, one with many one walk.
        self._under_way: dict[object, tuple[Any, Any]] = {}
        self._held: dict[object, list[str]] = {}

    def __repr__(self) -> str:
        target = self.spec.shown_url() or (self.spec.command[0] if self.spec.command else "?")
        return f"<RemoteServer {self.spec.name} {target} tools={len(self.names)}>"

    # ------------------------------------------------------------------ connection (background loop)

    async def _connected(self) -> Client:
        if self._client is not None:
            return self._client
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.get_running_loop().create_future()
            # Its failure may come after every waiter has gone (past the connect timeout, the server stopped
            # meanwhile): read here, it is not logged as "Future exception was never retrieved".
            self._connecting.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._owner = asyncio.ensure_future(self._own(self._connecting))
        seen = self._skips
        try:
            return await asyncio.wait_for(asyncio.shield(self._connecting), self.connect_timeout)
        except McpConnectionError:
            raise
        except TimeoutError:
            if self._owner is not None:
                self._owner.cancel()
            raise McpConnectionError(
                f"MCP server '{self.spec.name}' did not answer within {self.connect_timeout:g} s.{self._skips_since(seen)}",
                tool=None,
            ) from None

    def _transport(self, stack: AsyncExitStack) -> Any:
        spec = self.spec
        if spec.url is not None:
            headers = httpx2.Headers(spec.headers)
            headers["accept-encoding"] = "identity"  # a body as sent: the bound counts what is read (_bound_reply)
            http = httpx2.AsyncClient(
                headers=headers,
                # No read timeout: the SDK's own client's (300 s) cut every call at 300 s of silence, whatever
                # call_timeout or a timeout policy said, as a lost connection. The deadlines are the harness's own.
                timeout=httpx2.Timeout(30.0, read=None),
                event_hooks={"response": [functools.partial(_bound_reply, spec.name, self.max_reply_bytes)]},
            )
            stack.push_async_callback(http.aclose)
            # The SDK's own bound on an event (1 MiB by default) is never reached: events over ours are not handed on,
            # and it counts an event's text encoded again as UTF-8 (an invalid byte read as U+FFFD counts 3).
            return streamable_http_client(spec.url, http_client=http, max_sse_event_size=3 * self.max_reply_bytes)
        params = StdioServerParameters(
            command=spec.command[0], args=list(spec.command[1:]), env=dict(spec.env) if spec.env else None, cwd=spec.cwd
        )
        _warn_unbounded()
        return stdio_client(params, errlog=sys.stderr)

    async def _own(self, ready: asyncio.Future[Client]) -> None:
        """The task that owns one connection: open it, hand it out, keep it until stopped or broken.

        A stdio server's process is watched (:meth:`_watch`): its end is noticed even while a process it started
        holds its pipes open (no end of its output comes then)."""
        stop = self._stop = asyncio.Event()
        client: Client | None = None
        self._name_replies()  # this task's own context: its stdio reader's
        _connection.set(self)
        groups: list[int] = []
        _groups.set(groups)
        processes: list[Any] = []
        try:
            async with anyio.create_task_group() as watching:

                def watch(process: Any) -> None:
                    processes.append(process)
                    watching.start_soon(self._watch, process, ready, watching.cancel_scope, stop)

                _spawned.set(watch)
                async with AsyncExitStack() as stack:
                    client = Client(
                        self._transport(stack),
                        client_info=types.Implementation(name="harness-one", version=__version__),
                        message_handler=self._on_message,
                    )
                    self._process = (client, processes)
                    await stack.enter_async_context(client)
                    # The SDK checks each result against the remote's output schema with Python's re, unbounded (a
                    # pattern such as ^(a+)+$ held this loop, and every call on it, for minutes): the harness's own
                    # check, bounded, runs instead (_value).
                    client.session.validate_tool_result = _sdk_check_skipped  # type: ignore[method-assign]
                    self._client = client
                    _open.add(self)
                    ready.set_result(client)
                    async with anyio.create_task_group() as group:
                        capabilities = client.server_capabilities.tools
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS and capabilities and capabilities.list_changed:
                            group.start_soon(self._listen, client)
                        await stop.wait()
                        group.cancel_scope.cancel()
                watching.cancel_scope.cancel()
        except Exception as exc:
            if not ready.done():
                first = _first(exc)
                closed = isinstance(first, _LOST) or (isinstance(first, MCPError) and first.code == CONNECTION_CLOSED)
                # The end of its output came first: how the server ended, when it has (or does within 0.2 s).
                ended = await _ended(processes[0], 0.2) if processes and closed else None
                reason = f"the server {ended}." if ended else _describe(exc)
                ready.set_exception(McpConnectionError(f"Cannot connect to MCP server '{self.spec.name}': {reason}", tool=None))
        finally:
            _open.discard(self)
            if self._client is client:
                self._client = None
            if not ready.done():
                ready.cancel()
            for pgid in groups:  # (the SDK's stdio_client has stopped the server, or given up on it)
                with anyio.CancelScope(shield=True):
                    await _end_group(pgid)

    async def _watch(self, process: Any, ready: asyncio.Future[Client], scope: anyio.CancelScope, stop: asyncio.Event) -> None:
        """Wait for a stdio server's process to end (:func:`_ended`: ``wait()`` waits for the end of its pipes too).
        Before the handshake the connection fails with its exit status; after it the connection is lost:
        the calls under way fail with :class:`McpConnectionError` and the next call reconnects."""
        ended = await _ended(process)
        if not ready.done():
            ready.set_exception(
                McpConnectionError(f"Cannot connect to MCP server '{self.spec.name}': the server {ended}.", tool=None)
            )
            scope.cancel()  # the handshake stops; the transport closes
            return
        held = self._process
        if not stop.is_set() and held is not None and held[0] is self._client:  # (not an end the client asked for)
            log_event(logging.WARNING, "mcp server exited", server=self.spec.name, status=ended)
            self._lost(held[0])  # the connection closes: the SDK fails the requests under way

    async def _why_lost(self, client: Client, reason: str) -> str:
        """``the server exited with status N.`` when ``client``'s stdio server has ended (or does within 0.2 s: the
        end of its output may come first), else ``reason``."""
        held = self._process
        if held is None or held[0] is not client or not held[1]:
            return reason
        ended = await _ended(held[1][0], 0.2)
        return f"the server {ended}." if ended else reason

    def _name_replies(self) -> None:
        """This server's name for the SDK's records of replies it could not parse in this task (see :data:`_reply_bound`):
        each task that sends a request is the task of a call or a listing (never the caller's own)."""
        _reply_bound.set((self.spec.name, self.max_reply_bytes))

    def _lost(self, client: Client) -> None:
        if self._client is client:
            self._client = None
            if self._stop is not None:
                self._stop.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed()
        elif isinstance(message, ValueError):
            ids, line = _unread(message)
            if line is not None:
                self._skips += 1
                self._skipped.append((self._skips, self._shown_skipped(message, line)))
            elif self._client is not None:
                _fail_unreadable(self._client, message, ids)

    def _held_now(self) -> list[str]:
        """The secret values of every call under way (:func:`secrets_held` of their arguments and context), each
        call's walked once (kept in :attr:`_held` while it is under way)."""
        held: list[str] = []
        for token, values in self._under_way.items():
            kept = self._held.get(token)
            if kept is None:
                kept = self._held[token] = secrets_held(*values)
            held.extend(kept)
        return held

    def _shown_skipped(self, error: BaseException, line: str) -> str:
        """:func:`_shown` of ``line``, skipped (``error`` the SDK's of it), masked with :meth:`_held_now` once: at the
        first ask (the record's filter, as the line is read; else the session's handler), kept on ``error``
        (:data:`_SHOWN_KEPT`) for the other, so the WARNING and a deadline's error show it alike."""
        shown = getattr(error, _SHOWN_KEPT, None)
        if not isinstance(shown, str):
            shown = _shown(line, self._held_now())
            with contextlib.suppress(Exception):
                setattr(error, _SHOWN_KEPT, shown)
        return shown

    def _skips_since(self, seen: int) -> str:
        """What a deadline's error adds when lines were skipped since there were ``seen``: how many, and the first
        (or the oldest kept), as shown when it was read."""
        count = self._skips - seen
        if count <= 0:
            return ""
        first = next((line for number, line in self._skipped if number > seen), self._skipped[0][1])
        lines = "a line" if count == 1 else f"{count:,} lines"
        return f" Meanwhile it wrote {lines} that answered no request (no JSON-RPC message), skipped; the first: {first}."

    async def _listen(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._changed()
        except Exception:  # a lost subscription only stops the updates; calls report the connection
            return

    def _changed(self) -> None:
        """The server said its tools changed: one refresh at a time, and one more after it for what it said meanwhile."""
        if self._refreshing is not None and not self._refreshing.done():
            self._again = True
            return
        self._refreshing = task = asyncio.ensure_future(self._refreshes())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refreshes(self) -> None:
        self._again = True
        while self._again:
            self._again = False
            try:
                await self._refresh()
            except Exception as exc:  # (a plugin's hook refused a tool): logged; the refresh asked for meanwhile runs
                log_event(logging.WARNING, "mcp refresh failed", server=self.spec.name, error=_describe(exc))

    async def _list(self) -> list[types.Tool]:
        client = await self._connected()
        tools: list[types.Tool] = []
        cursor: str | None = None
        cursors: set[str] = set()
        size = 0
        cut: list[str] = []
        refused: list[str] = []  # the tools no valid tool listing holds, and why
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.spec.list_timeout  # the whole listing, all its pages; each page: connect_timeout
        overall = False  # (which of the two ran out)
        try:
            for _ in range(_MAX_PAGES):
                left = max(0.0, deadline - loop.time())
                overall = left < self.connect_timeout
                page = await asyncio.wait_for(self._page(client, cursor, refused), min(left, self.connect_timeout))
                size += sum(len(tool.name) + len(tool.description or "") for tool in page.tools)
                with contextlib.suppress(Exception):
                    size += sum(len(json.dumps(tool.input_schema)) for tool in page.tools)
                tools.extend(page.tools)
                if len(tools) > _MAX_TOOLS or size > self.max_reply_bytes:
                    del tools[_MAX_TOOLS:]
                    cut.append(
                        f"the listing was cut after {len(tools):,} tools: more than {_MAX_TOOLS:,} tools, or more than "
                        f"max_reply_bytes ({self.max_reply_bytes:,}) of names, descriptions and schemas in all its pages."
                    )
                    break
                cursor = page.next_cursor
                if cursor is None:
                    break
                if cursor in cursors:
                    cut.append(f"the server sent the cursor {safe_text(cursor[:100])!r} twice; the listing ends there.")
                    break
                cursors.add(cursor)
        except TimeoutError:
            if overall:
                raise McpConnectionError(
                    f"MCP server '{self.spec.name}' did not list its tools within {self.spec.list_timeout:g} s (list_timeout)."
                ) from None
            raise McpConnectionError(
                f"MCP server '{self.spec.name}' did not answer a tools/list request within {self.connect_timeout:g} s "
                "(connect_timeout)."
            ) from None
        except _LOST as exc:
            self._lost(client)
            reason = await self._why_lost(client, _describe(exc))
            raise McpConnectionError(f"Lost the connection to MCP server '{self.spec.name}': {reason}") from exc
        except MCPError as exc:
            if _closed(client, exc, http=self.spec.url is not None):
                self._lost(client)
                reason = await self._why_lost(client, exc.message)
                raise McpConnectionError(outside_text(f"Lost the connection to MCP server '{self.spec.name}': {reason}")) from exc
            raise McpConnectionError(  # the server's words: masked and cut once, as any remote text
                outside_text(f"MCP server '{self.spec.name}' answered tools/list with an error: {_unparsed(exc) or exc.message}")
            ) from exc
        except pydantic.ValidationError as exc:  # not a listing at all (its tools are read one by one: _page)
            raise McpConnectionError(
                f"MCP server '{self.spec.name}' answered tools/list with no valid listing ({_detail(exc)})."
            ) from None
        for note in cut:
            log_event(logging.WARNING, "mcp tools/list cut", server=self.spec.name, reason=note)
        self._refused = refused  # (logged by _tools, with the tools whose schema harness-one refuses)
        self._cut = [f"tools/list: {note}" for note in cut]
        return tools

    async def _page(self, client: Client, cursor: str | None, refused: list[str]) -> types.ListToolsResult:
        """One page of ``tools/list``. The SDK checks a page whole: one tool it refuses (an ``inputSchema`` whose
        ``type`` is not ``object``) fails the page. The page is then asked for again as it is and its tools checked
        one by one (the same checks, for the protocol version of the connection): each refused goes to ``refused``
        as ``name: why``, the others are kept (an SDK without the internals this reads: the page fails whole)."""
        self._name_replies()
        try:
            return await client.list_tools(cursor=cursor, cache_mode="refresh")
        except pydantic.ValidationError as exc:
            session = client.session
            if not all(hasattr(session, name) for name in ("_stamp", "_dispatcher", "_absorb_tool_listing")):
                raise exc from None
        version = client.protocol_version or "2025-11-25"
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        data = types.ListToolsRequest(params=params).model_dump(by_alias=True, mode="json", exclude_none=True)
        options: Any = {}
        session._stamp(data, options)  # the protocol version's request metadata and headers, as the SDK's request has
        raw = await session._dispatcher.send_raw_request(data["method"], data.get("params"), options)
        listed = raw.get("tools")
        head = {key: value for key, value in raw.items() if key != "tools"}
        ttl = head.get("ttlMs")
        if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl < 0:
            head["ttlMs"] = 0  # (floored, as the SDK does)

        def check(tools: Any) -> None:
            try:
                _methods.validate_server_result("tools/list", version, {**head, "tools": tools})
            except pydantic.ValidationError:
                raise
            except (KeyError, ValueError):  # a version the SDK has no table for: its own parse decides
                pass

        check(listed if not isinstance(listed, list) else [])  # the page apart from its tools (raises without a list)
        kept = {key: head[key] for key in ("nextCursor", "_meta") if key in head}
        page = types.ListToolsResult.model_validate({**kept, "tools": []}, by_name=False)
        for index, item in enumerate(listed if isinstance(listed, list) else []):
            try:
                check([item])
                page.tools.append(types.Tool.model_validate(item, by_name=False))
            except pydantic.ValidationError as exc:
                name = item.get("name") if isinstance(item, dict) else None
                shown = safe_text(name[:100]) if isinstance(name, str) else f"tools[{index}]"
                why = re.sub(r"^tools\.0(?:\.|: )", "", _detail(exc))  # where in the tool (none: the item itself)
                refused.append(f"{shown}: not a valid MCP tool ({why})")
        # The SDK's own bookkeeping of a listing (output schemas to check results against, 2026-07-28 headers).
        return session._absorb_tool_listing(page, complete=cursor is None and page.next_cursor is None)

    async def _call(
        self,
        remote: str,
        local: str,
        arguments: dict[str, Any],
        report: Callable[[float, float | None, str | None], None] | None,
        trace_context: otel_context.Context | None = None,
        deadline: float | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        meta: dict[str, Any] | None = None
        if trace_context is not None:
            # The caller's span continues on this loop: the SDK's client span (if any) is its child,
            # and ``_meta`` carries ``traceparent`` (the SDK injects it again from the same context).
            otel_context.attach(trace_context)  # this task's own context: nothing to detach
            meta = {}
            propagate.inject(meta, context=trace_context)
        client = await self._connected()
        self._name_replies()
        callback = None
        if report is not None:
            from ._server import _progress_kept

            floor = -math.inf

            async def callback(progress: float, total: float | None, message: str | None) -> None:
                nonlocal floor
                kept = _progress_kept(floor, progress, total)  # the served side's rule: finite, and increasing
                if kept is not None:  # it goes on to whoever called the harness tool
                    floor = kept[0]
                    report(*kept, message)

        seen = self._skips
        token = object()
        self._under_way[token] = (arguments, context)
        try:
            call = client.call_tool(remote, arguments, progress_callback=callback, meta=meta or None)  # type: ignore[arg-type]
            return await asyncio.wait_for(call, deadline)
        except TimeoutError:
            late = ToolTimeout(deadline or 0.0, tool=local)
            late.message = (
                f"Tool '{local}': MCP server '{self.spec.name}' did not answer within {deadline:g} s "
                "(the default deadline of remote calls without a timeout policy)." + self._skips_since(seen)
            )
            late.args = (late.message,)
            raise late from None
        except MCPError as exc:
            if _closed(client, exc, http=self.spec.url is not None):
                self._lost(client)
                reason = await self._why_lost(client, exc.message)
                raise McpConnectionError(
                    f"Lost the connection to MCP server '{self.spec.name}' during '{local}': {reason}", tool=local
                ) from exc
            raise self._failed(_unparsed(exc) or exc.message, remote, local, (arguments, context), exc.data) from exc
        except _LOST as exc:
            self._lost(client)
            reason = await self._why_lost(client, _describe(exc))
            raise McpConnectionError(
                f"Lost the connection to MCP server '{self.spec.name}' during '{local}': {reason}", tool=local
            ) from exc
        except pydantic.ValidationError as exc:  # a result that is not a CallToolResult: where, not what
            text = f"the reply is not a valid tools/call result ({_unknown_block(exc) or _detail(exc)})"
            raise self._failed(text, remote, local, (arguments, context)) from None
        except RuntimeError as exc:  # the SDK's own (its check of results is the harness's, _check_output)
            raise self._failed(str(exc), remote, local, (arguments, context)) from exc
        finally:
            del self._under_way[token]
            self._held.pop(token, None)

    def _failed(self, text: str, remote: str, local: str, values: tuple[Any, ...], data: Any = None) -> ToolExecutionError:
        """The error of a remote failure, ``text`` the remote's (or the SDK's) message: masked as a local tool's exception
        is, the secret values of the call's arguments and context, ``values``, too (:func:`secrets_held`), then cut
        (:class:`RemoteToolError`). Built from its fields: ``ToolExecutionError(cause)`` would mask it again, and its
        message is not this one."""
        cause = RemoteToolError(text, server=self.spec.name, tool=remote, data=data, held=secrets_held(*values))
        message = f"Tool '{local}' failed on MCP server '{self.spec.name}': {cause.text}"
        state = {"message": message, "tool": local, "cause": cause, "__cause__": cause, "retry_after": cause.retry_after}
        err = from_state(ToolExecutionError, state)
        assert isinstance(err, ToolExecutionError)
        return err

    async def _close(self) -> None:
        _release(self)  # (its tools stay: they reconnect when called; another import may take its name)
        if self._stop is not None:
            self._stop.set()
        owner = self._owner
        if owner is not None and not owner.done():
            await asyncio.wait([owner], timeout=5)
        for task in list(self._tasks):
            task.cancel()

    # ------------------------------------------------------------------ tools

    def _tools(self, listing: Sequence[types.Tool], definition: Mapping[str, Any]) -> list[Tool]:
        """Harness tools for the remote listing: schema, annotations, names, the policies in ``definition``.
        The tools refused, by the SDK (:meth:`_page`) or here (a schema harness-one refuses), log one warning."""
        tools: list[Tool] = []
        self.failures = [*self._refused, *self._cut]
        refused = list(self._refused)
        unique: dict[str, types.Tool] = {}
        for remote in listing:
            if remote.name in unique:
                self.failures.append(f"{remote.name}: listed more than once; the first listing is used.")
            else:
                unique[remote.name] = remote
        locals_ = self._local_names(sorted(unique))
        names: dict[str, str] = {}
        for name, local in sorted(locals_.items()):
            try:
                tools.append(self._tool(unique[name], local, definition))
            except ToolDefinitionError as exc:  # its text may quote the remote schema (a $ref's URL): masked
                refused.append(f"{name}: {outside_text(str(exc))}")
                self.failures.append(refused[-1])
                continue
            names[local] = name
        if refused:
            log_event(logging.WARNING, "mcp tools refused", server=self.spec.name, tools=len(refused), first=refused[0])
        self.names = names
        return tools

    def _local_names(self, remotes: Sequence[str]) -> dict[str, str]:
        """The local name of each remote tool (by remote name), so that a local name never moves to another
        remote tool: a tool given a name before (imported now or once, :attr:`_given`) keeps it, then a tool whose
        ``prefix_name`` is valid and was never given out gets it, then the others get a cleaned or hashed name
        (:func:`local_name`) never given out either."""
        given = self._given
        known = {remote: local for local, remote in given.items()}
        chosen = {remote: known[remote] for remote in remotes if remote in known}
        taken = set(given)
        for plain in (True, False):
            for remote in remotes:
                if remote in chosen:
                    continue
                local = _prefixed(remote, self.spec.prefix) if plain else local_name(remote, self.spec.prefix, taken)
                if not plain or (_VALID.match(local) and local not in taken):
                    chosen[remote] = local
                    taken.add(local)
        for remote, local in chosen.items():  # listed now: the most recent (the oldest are forgotten first)
            given.pop(local, None)
            given[local] = remote
        for local in list(itertools.islice(given, max(0, len(given) - _MAX_TOOLS))):
            del given[local]
        return chosen

    def _tool(self, remote: types.Tool, local: str, definition: Mapping[str, Any]) -> Tool:
        hints = remote.annotations
        read_only = bool(hints and hints.read_only_hint)
        idempotent = bool(hints and hints.idempotent_hint) or read_only
        destructive = None if hints is None or hints.destructive_hint is None or read_only else hints.destructive_hint
        output = remote.output_schema
        unwrap = bool(
            output and output.get(_WRAP) and isinstance(output.get("properties"), dict) and "result" in output["properties"]
        )
        if output is not None and unwrap:
            inner = output["properties"]["result"]
            output = {**inner, "$defs": output["$defs"]} if "$defs" in output and isinstance(inner, dict) else inner
        keywords: dict[str, Any] = {
            "read_only": read_only,
            "idempotent": idempotent,
            "destructive": destructive,
            "open_world": None if hints is None else hints.open_world_hint,
            **definition,
        }
        if keywords.get("cache_ttl") is not None and not (keywords["read_only"] or keywords["idempotent"]):
            del keywords["cache_ttl"]  # the cache holds only tools that say repeating them is safe
        keywords["tags"] = {"mcp", f"mcp:{self.spec.name}", *keywords.get("tags", ())}
        # The caller's options for every tool (a mapping: _policies), with the remote's names on top.
        options = {**(keywords.pop("options", None) or {}), "mcp_server": self.spec.name, "mcp_tool": remote.name}
        if remote.title:
            options["title"] = remote.title
        bounded = keywords.get("timeout") is not None or keywords.get("total_timeout") is not None
        build = functools.partial(
            Tool.create,
            self._function(
                remote.name, local, unwrap, None if bounded else self.call_timeout, remote.input_schema, remote.output_schema
            ),
            name=local,
            description=remote.description or remote.title or f"Tool '{remote.name}' of MCP server '{self.spec.name}'.",
            output_schema=output if isinstance(output, dict) else None,
            options=options,
            source=f"mcp:{self.spec.name}",
            **keywords,
        )
        try:
            return build(parameters=remote.input_schema)  # the schema walked, and its defaults checked, once
        except ToolDefinitionError:
            parameters, dropped = without_bad_defaults(remote.input_schema)
            if not dropped:  # refused for what dropping defaults does not fix
                raise
        # (FastMCP's `x: int = None` says {"type": "integer", "default": null})
        log_event(logging.INFO, "mcp defaults dropped", server=self.spec.name, tool=local, at=dropped)
        return build(parameters=parameters)

    def _function(
        self,
        remote: str,
        local: str,
        unwrap: bool,
        deadline: float | None,
        schema: Mapping[str, Any],
        output_schema: Mapping[str, Any] | None,
    ) -> Any:
        """The function of a remote tool: it takes the remote's arguments, and the :class:`~harness_one.Call` under a
        parameter name the remote schema does not use (``_harness_call``, else ``_harness_call_2``, ...); its result
        checked against the remote's ``output_schema``, as the SDK's client checks it but bounded in time."""
        server = self
        checks: list[Callable[[Any], str | None]] = []  # built on the first result (the metaschema check costs ~ms)
        properties = schema.get("properties")
        used = set(properties) if isinstance(properties, dict) else set()
        name = next(name for n in itertools.count(1) if (name := f"_harness_call_{n}" if n > 1 else "_harness_call") not in used)

        async def call_mcp_tool(**arguments: Any) -> Any:
            call: Call = arguments.pop(name)
            # Ask the remote for progress (a progressToken) only when the caller listens: an on_progress was given.
            report = _on_loop(asyncio.get_running_loop(), call.report_progress) if call.wants_progress else None
            result = await _await(server._call(remote, local, arguments, report, _current_trace(), deadline, call.context))
            if output_schema is not None and not result.is_error:
                if not checks:
                    from ._server import _output_check

                    checks.append(_output_check(output_schema))
                server._check_output(result, remote, local, checks[0], (arguments, call.context))
            return server._value(result, remote, local, unwrap, (arguments, call.context))

        call_mcp_tool.__qualname__ = call_mcp_tool.__name__ = f"mcp_{local}"
        keyword = inspect.Parameter.KEYWORD_ONLY
        call_mcp_tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(name, keyword, annotation=Call), inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD)]
        )
        call_mcp_tool.__annotations__ = {name: Call, "arguments": Any, "return": Any}
        return call_mcp_tool

    def _check_output(
        self,
        result: types.CallToolResult,
        remote: str,
        local: str,
        check: Callable[[Any], str | None],
        values: tuple[Any, ...] = (),
    ) -> None:
        """Refuse a result that does not fit the remote's output schema, in the SDK's words (which checked it; ``values``,
        the call's arguments and context, as :meth:`_failed` takes them)."""
        problem: str | None
        if result.structured_content is None and "structured_content" not in result.model_fields_set:
            problem = f"Tool {remote} has an output schema but did not return structured content"
        else:
            found = check(result.structured_content)
            problem = None if found is None else f"Invalid structured content returned by tool {remote}: {found}"
        if problem is not None:
            raise self._failed(problem, remote, local, values)

    def _value(self, result: types.CallToolResult, remote: str, local: str, unwrap: bool, values: tuple[Any, ...] = ()) -> Any:
        """The harness value of a remote result: structured content, else the text, else the content blocks (``values``,
        the call's arguments and context, as :meth:`_failed` takes them)."""
        if result.is_error:
            text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent)) or "the tool reported an error"
            data = (result.meta or {}).get(ERROR_META_KEY)
            raise self._failed(text, remote, local, values, data)
        value = result.structured_content
        if value is not None:
            return value["result"] if unwrap and isinstance(value, dict) and set(value) == {"result"} else value
        blocks = result.content
        if all(isinstance(b, types.TextContent) for b in blocks):
            return "\n".join(b.text for b in blocks if isinstance(b, types.TextContent))
        return [_block(b) for b in blocks]

    # ------------------------------------------------------------------ public

    def _policies(self, definition: Mapping[str, Any]) -> dict[str, Any]:
        """The ``defineTool`` keywords of every tool: the spec's and ``definition``'s, with one circuit for the
        server (the circuit breaker's ``key`` ``mcp:NAME``, unless the caller named another key)."""
        policies = {**self.spec.policies, **definition}
        given = policies.get("options")
        if given is not None and not isinstance(given, Mapping):
            raise ToolDefinitionError(f"MCP server '{self.spec.name}': options must be a mapping, got {type(given).__name__}.")
        breaker = policies.get("circuit_breaker")
        if breaker is not None and breaker is not False:
            circuit = CircuitBreakerPolicy.parse(breaker, tool=f"mcp:{self.spec.name}")
            policies["circuit_breaker"] = (
                circuit if circuit.key is not None else dataclasses.replace(circuit, key=f"mcp:{self.spec.name}")
            )
        return policies

    def _attach(
        self,
        registry: ToolRegistry,
        listing: Sequence[types.Tool],
        definition: Mapping[str, Any],
        replace: bool,
        stop: threading.Event | None = None,
    ) -> list[tuple[Tool, Tool | None]]:
        """Add the tools of ``listing`` to ``registry``: in the importer's thread (or a worker thread), never on the
        loop every MCP connection shares (a registry may load its tool packages when first asked).

        Returns each tool added with the one it replaced (for :meth:`_detach`). A failure part-way (a plugin refusing
        a tool, ``stop`` set: the import was cancelled) takes out the tools added before it raises."""
        tools = self._tools(listing, self._policies(definition))
        added: list[tuple[Tool, Tool | None]] = []
        try:
            self._holds(registry)
            clash = [t.name for t in tools if t.name in registry] if not replace else []
            if clash:
                raise ToolDefinitionError(
                    f"MCP server '{self.spec.name}': tools {clash} are already registered; "
                    "give the server a prefix (prefix='...' or 'prefix' in its config table)."
                )
            with _claims_lock:  # the name taken over now, its tools listed: a failed import leaves the other as it was
                self._holds(registry)
                for other in self._replacing:
                    claimed, attached = other._claimed is registry, other.registry is registry
                    if claimed:
                        other._claimed = None
                    if attached:
                        other.registry = None  # no refresh of the earlier server adds or removes tools here any more
                    if claimed or attached:
                        self._took.append((other, claimed, attached))
                self._replacing = []
            for tool in tools:
                if stop is not None and stop.is_set():
                    raise asyncio.CancelledError
                added.append((tool, registry.get(tool.name) if replace and tool.name in registry else None))
                registry.add(tool, replace=True)
                self._added[tool.name] = tool
        except BaseException:
            self._detach(registry, added)
            raise
        self._definition = dict(definition)
        self._listed = self._by_local(listing)
        self.registry = registry  # (last: a refresh starts from all the above)
        return added

    def _holds(self, registry: ToolRegistry) -> None:
        """Raise :class:`McpSpecError` unless this server's import still holds its name in ``registry``."""
        if self._claimed is not registry:  # taken over meanwhile (see _claim), or closed
            raise McpSpecError(
                f"MCP server '{self.spec.name}': another import of this name into the registry took the name over "
                "(replace=True), or the server was closed, while it connected; its tools were not added."
            )

    def _detach(self, registry: ToolRegistry, added: Sequence[tuple[Tool, Tool | None]]) -> None:
        """Undo :meth:`_attach` (its import failed): each tool it added that the registry still holds is removed,
        or the tool it replaced put back, and the servers it took the name over from get it back. Best effort: what
        the registry refuses stays as it is."""
        if self.registry is registry:
            self.registry = None  # no refresh adds them again
        with _claims_lock:
            if self._claimed is registry:
                self._claimed = None
        self._added.clear()
        for tool, before in reversed(added):
            with contextlib.suppress(Exception):
                if tool.name in registry and registry.get(tool.name) is tool:
                    if before is None:
                        registry.remove(tool.name)
                    else:
                        registry.add(before, replace=True)
        self._give_back(registry)

    def _give_back(self, registry: ToolRegistry) -> None:
        """The servers this import took the name over from (:meth:`_attach`) hold it again, and refresh into
        ``registry`` as before, unless another server holds the name there now."""
        back: list[RemoteServer] = []
        with _claims_lock:
            took, self._took = self._took, []
            for other, claimed, attached in took:
                if any(o is not other and o.spec.name == other.spec.name and o._claimed is registry for o in _claimants):
                    continue
                if claimed and other._claimed is None:
                    other._claimed = registry
                if attached and other.registry is None:
                    other.registry = registry
                    back.append(other)
        for other in back:
            if other._missed:  # an announcement came meanwhile: the refresh it asked for
                _submit(other._imported())

    async def _refresh(self) -> None:
        """Re-list after the server said its tools changed, and bring the registry in line (in a worker thread:
        a registry may load its tool packages when first asked, and hooks run as tools are added).

        A new remote tool whose name another tool holds (not this server's) is skipped, never
        replaces it, and is listed in ``failures``. :attr:`_listed` follows the registry tool by tool:
        after a refresh that failed part-way, the next one adds again what it did not add. A failure (the
        listing, a hook) is logged by :meth:`_refreshes`."""
        registry = self.registry
        if registry is None:  # announced before the import added the tools: it refreshes once they are in
            self._missed = True
            return
        listing = await self._list()
        await asyncio.to_thread(self._update, registry, listing)

    async def _imported(self) -> None:
        """(On the loop, once :attr:`registry` is set) the refresh an announcement during the import asked for."""
        if self._missed:
            self._missed = False
            self._changed()

    def _owns(self, registry: ToolRegistry, name: str) -> bool:
        """Whether ``registry``'s tool ``name`` is the very one this server added (not one of the same source).
        (Read from the registry's own table: a name it lacks loads no tool package.)"""
        entry = registry._tools.get(name)
        return entry is not None and entry.tool is self._added.get(name)

    def _update(self, registry: ToolRegistry, listing: Sequence[types.Tool]) -> None:
        before, tools = self._listed, self._tools(listing, self._policies(self._definition))
        now = self._by_local(listing)
        for tool in tools:
            if tool.name in registry and not self._owns(registry, tool.name):
                remote = self.names.pop(tool.name)
                self.failures.append(f"{remote}: the name '{tool.name}' belongs to another tool; give the server a prefix.")
                log_event(logging.WARNING, "mcp tool name taken", server=self.spec.name, tool=tool.name, remote=remote)
                continue
            if tool.name not in registry or before.get(tool.name) != now[tool.name]:
                registry.add(tool, replace=True)  # new or changed (an unchanged tool keeps its object, and no event)
                self._added[tool.name] = tool
                before[tool.name] = now[tool.name]
        for name in set(before) - set(self.names):  # gone from the listing (or its name taken)
            if self._owns(registry, name):
                registry.remove(name)
            self._added.pop(name, None)
            del before[name]

    def _by_local(self, listing: Sequence[types.Tool]) -> dict[str, types.Tool]:
        """The remote tools of ``listing`` by their local names (:attr:`names`)."""
        remote = {tool.name: tool for tool in listing}
        return {local: remote[name] for local, name in self.names.items() if name in remote}

    def circuit_state(self) -> str:
        """The server's circuit: ``closed``, ``open`` or ``half_open`` (``closed`` without a ``circuit_breaker``,
        or without the registry's ``circuit_breaker`` plugin)."""
        registry = self.registry
        plugin = None if registry is None else registry.plugins.get("circuit_breaker")
        tool = next((name for name in self.names if registry is not None and name in registry), None)
        if plugin is None or tool is None:
            return "closed"
        return str(plugin.state(tool))

    def close(self) -> None:
        """Close the connection (a stdio server process is stopped); the tools stay but reconnect when called."""
        _wait(self._close(), 10)

    async def aclose(self) -> None:
        await _await(self._close())


def _on_loop(
    loop: asyncio.AbstractEventLoop, report: Callable[[float, float | None, str | None], None]
) -> Callable[[float, float | None, str | None], None]:
    """``report`` called on ``loop`` (the caller's), in order: the caller's ``on_progress`` never runs on the loop
    every MCP connection shares, where a slow one would hold up every other server's calls and deadlines."""

    def hand_on(progress: float, total: float | None, message: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop has closed: its call is over
            loop.call_soon_threadsafe(report, progress, total, message)

    return hand_on


def _block(block: types.ContentBlock) -> dict[str, Any]:
    """A content block as a dict, with the base64 ``data`` of an image or audio and the ``blob`` of an embedded
    resource replaced by what they were (``<image/png, 7.5 MB base64 omitted>``): a model reads text, and a
    megabyte of base64 is only tokens to it."""
    value: dict[str, Any] = block.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        value["data"] = _omitted(block.mime_type, block.data)
    elif isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.BlobResourceContents):
        value["resource"]["blob"] = _omitted(block.resource.mime_type, block.resource.blob)
    return value


#: The class of each content block this MCP SDK reads, by its ``type``.
_BLOCK_TYPES: dict[str, str] = {
    str(typing.get_args(block.model_fields["type"].annotation)[0]): block.__name__
    for block in typing.get_args(types.ContentBlock)
}


def _unknown_block(exc: pydantic.ValidationError) -> str | None:
    """What is wrong with a result's content block, when the SDK's own error would name a field of the first type it
    tried (a union): ``content.N: unknown content type 'video'`` for a type this SDK does not know, and for a known
    type the first problem of its own class (``content.0.ImageContent.data: Field required``); else None."""
    for error in exc.errors(include_url=False):
        where, given = error["loc"], error.get("input")
        if len(where) >= 2 and where[0] == "content" and isinstance(where[1], int) and isinstance(given, dict):
            kind = given.get("type")
            if isinstance(kind, str) and kind not in _BLOCK_TYPES:
                return f"content.{where[1]}: unknown content type {safe_text(kind[:50])!r}"
            if kind is None:
                return f"content.{where[1]}: a content block without a type"
        if len(where) >= 3 and where[0] == "content" and isinstance(where[1], int):
            block = _BLOCK_TYPES.get(str(_block_type(exc, where[1])))
            if block is not None and where[2] != block:
                continue  # another class of the union, which the block's type does not name
            return f"{'.'.join(str(part) for part in where)}: {error['msg']}"
    return None


def _block_type(exc: pydantic.ValidationError, at: int) -> object:
    """The ``type`` of content block ``at`` as given, read from the errors: the input of one that is the block, or
    the wrong ``type`` another class of the union found."""
    for error in exc.errors(include_url=False):
        where, given = error["loc"], error.get("input")
        if where[:2] == ("content", at) and isinstance(given, dict):
            return given.get("type")
        if where[:2] == ("content", at) and where[3:] == ("type",) and isinstance(given, str):
            return given
    return None


def _omitted(kind: str | None, data: str) -> str:
    """What stands for ``data`` (base64 text) in a result: its type and size."""
    size = len(data)
    amount = next(
        (f"{size / scale:.1f} {unit}" for scale, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")) if size >= scale),
        f"{size} bytes",
    )
    return f"<{safe_text(kind or 'binary data')}, {amount} base64 omitted>"


def _current_trace() -> otel_context.Context | None:
    """The caller's OpenTelemetry context when a span is current in it (to send as ``_meta.traceparent``)."""
    found = otel_context.get_current()
    return found if trace.get_current_span(found).get_span_context().is_valid else None


#: The pause of :func:`_ended` between two looks at a return code (a test counts them).
_sleep = asyncio.sleep
_pidfd_open: Callable[[int], int] | None = getattr(os, "pidfd_open", None)


async def _ended(process: Any, within: float | None = None) -> str | None:
    """How ``process`` ended (:func:`~harness_one._worker.exit_reason`) once it has; ``None`` when it still runs after ``within`` s.

    Its return code is polled (0.01 s, growing to 0.1 s): ``wait()`` waits for the end of its pipes too, which a
    process it started may hold open. Without ``within``, on Linux, its end is waited for first (:func:`_exit_seen`):
    an idle connection's watcher wakes the loop every connection shares only when its server ends."""
    if within is None and process.returncode is None:
        await _exit_seen(process)
    deadline = None if within is None else asyncio.get_running_loop().time() + within
    pause = 0.01
    while process.returncode is None:
        if deadline is not None and asyncio.get_running_loop().time() >= deadline:
            return None
        await _sleep(pause)
        pause = min(2 * pause, 0.1)
    return exit_reason(process.returncode, "status")


async def _exit_seen(process: Any) -> None:
    """Return once ``process`` has ended, told by a pidfd (Linux 5.3+) the loop watches; at once where there is
    none (another system, a loop that watches no descriptors, a process already reaped): the caller polls then.
    Its return code may come a moment later (the loop's child watcher reaps the process)."""
    if _pidfd_open is None:
        return
    try:
        fd = _pidfd_open(process.pid)
    except (OSError, TypeError, AttributeError):
        return
    try:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not done.done():
                done.set_result(None)

        try:
            loop.add_reader(fd, readable)
        except (NotImplementedError, OSError, ValueError):
            return
        try:
            await done
        finally:
            loop.remove_reader(fd)
    finally:
        os.close(fd)


def _first(exc: BaseException) -> BaseException:
    """The first real error of ``exc`` (anyio wraps errors in exception groups)."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def _describe(exc: BaseException) -> str:
    """``Type: message`` of the first real error (anyio wraps errors in exception groups); an HTTP reply the SDK
    could not parse in :func:`_unreadable`'s words."""
    first = _first(exc)
    unread = _unparsed(first) if isinstance(first, MCPError) else None
    return unread or exception_text(first)  # its text may hold the server's URL, password and all


def _closed(client: Client, exc: MCPError, *, http: bool) -> bool:
    """Whether the SDK raised ``exc`` because the connection closed (not the server answering code -32000).

    The SDK then has its dispatcher closed, or failed to write the request (a broken stream as
    the context), or (HTTP) synthesized the error for a response stream that broke; a server's
    error response with the same code leaves the dispatcher running.
    """
    if exc.code != CONNECTION_CLOSED:
        return False
    if isinstance(exc.__context__, _LOST):
        return True
    if http and exc.data is None and exc.message.startswith(_HTTP_ABANDONED):
        return True
    closed = getattr(getattr(client.session, "_dispatcher", None), "_closed", None)
    if isinstance(closed, bool):
        return closed
    return exc.message == "Connection closed" and exc.data is None  # an SDK without that flag


def _fail_unreadable(client: Client, error: ValueError, ids: Sequence[Any]) -> None:
    """Answer the pending requests whose response the SDK could not parse (it only logs the line): ``ids``, the
    requests the line answers (:func:`_unread`). Their waiters get a ``-32700`` error naming pydantic's first
    problem of ``error``. Best effort on the SDK's dispatcher: without it the calls end at their deadline.
    """
    with contextlib.suppress(Exception):  # anything unexpected: leave the calls to their deadline
        pending = client.session._dispatcher._pending  # type: ignore[attr-defined]
        message = _unreadable(str(error.errors()[0].get("msg", "unreadable")))  # type: ignore[attr-defined]
        for request_id in ids:
            waiter = pending.get(request_id) if type(request_id) in (str, int) else None
            if waiter is not None:
                waiter.send.send_nowait(types.ErrorData(code=PARSE_ERROR, message=message))


#: Characters of a skipped line shown (masked first), and the characters of it a server keeps to show: far more, so
#: that masking, which may shorten what it masks, never brings a cut secret's start into view.
_SHOWN = 80
_SKIPPED_HEAD = 4096
#: The skipped lines a server keeps, to name the first one a deadline saw.
_SKIPPED_KEPT = 8
#: The attributes of the SDK's error of an unreadable line that keep its :func:`_unread` and, of a skipped line, its
#: masked text (:meth:`RemoteServer._shown_skipped`): each worked out once per line.
_UNREAD = "harness_one_unread"
_SHOWN_KEPT = "harness_one_shown"


def _unread(error: BaseException) -> tuple[list[Any], str | None]:
    """What a line the SDK could not read (``error``) is: the ids of the requests it answers (:func:`_reply_ids`:
    the leading ``id`` of each JSON object on it, from its first ``{``), and its text, at most
    :data:`_SKIPPED_HEAD` characters, when it is skipped: it holds no JSON object that names an ``id`` (a banner, a
    ``print``, JSON that is no JSON-RPC message, half a reply without its ``id``). A line whose first object names
    an ``id`` is no skipped line, whatever its id and whatever is wrong in it (a reply on ``"jsonrpc": "1.0"``).

    The line is the one :func:`_parse_kept` is parsing; without it (an SDK that parses otherwise, HTTP) pydantic's
    input of the first problem: a ``str`` is read as the line (no JSON); an object with no ``method`` whose ``id``
    is a ``str`` or an ``int`` answers that request; other JSON (no such ``id``, an array, a value) is skipped, as
    its dump. Kept on ``error`` (:data:`_UNREAD`): the record's filter and the session's handler each ask."""
    kept = getattr(error, _UNREAD, None)
    if kept is not None:
        return kept  # type: ignore[no-any-return]
    found: tuple[list[Any], str | None] = ([], None)
    with contextlib.suppress(Exception):  # not pydantic's error of a line: nothing to tell
        line = _parsing.get()
        if line is None:
            given = error.errors()[0]["input"]  # type: ignore[attr-defined]
            if isinstance(given, dict) and "method" not in given and type(given.get("id")) in (str, int):
                found = ([given["id"]], None)
            elif isinstance(given, (dict, list, int, float, bool)) or given is None:  # JSON, no JSON-RPC message
                found = ([], json.dumps(given, ensure_ascii=False, default=repr)[:_SKIPPED_HEAD])
            line = given if isinstance(given, str) else None
        if line is not None:
            ids: list[Any] = list(_reply_ids(line))
            at = line.find("{")
            named = at >= 0 and "id" in leading_members(line[at:])
            found = (ids, None if ids or named else line[:_SKIPPED_HEAD])
    with contextlib.suppress(Exception):
        setattr(error, _UNREAD, found)
    return found


def _shown(line: str, held: Sequence[str] = ()) -> str:
    """A skipped line as a log record or an error quotes it: secrets masked (the ``held`` texts too), cut to
    :data:`_SHOWN` characters, as a Python string literal (a control character escaped)."""
    text = outside_text(line, held)
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _unreadable(reason: str) -> str:
    """What a call is told of a reply that could not be read: ``reason`` is the first problem pydantic found
    (``Field required``), never the reply's own text."""
    return f"the reply could not be read ({safe_text(reason)})"


def _unparsed(exc: MCPError) -> str | None:
    """:func:`_unreadable`'s words for the SDK's HTTP error of a reply it could not parse (a JSON body or an event),
    whose text quotes the reply (cut by pydantic, a secret's key may be cut off and its value left unmasked);
    ``None`` for any other error."""
    if exc.code != PARSE_ERROR or not exc.message.startswith(_HTTP_UNREADABLE):
        return None
    found = _FIRST_PROBLEM.search(exc.message)
    return _unreadable(found[1] if found else "unreadable")


def _spec(target: McpSpec | str | Sequence[str], name: str | None, prefix: str | None) -> McpSpec:
    if isinstance(target, McpSpec):
        spec = target
    elif isinstance(target, str) and re.match(r"^https?://", target):
        spec = McpSpec(name=name or "remote", url=target)
    elif isinstance(target, str):
        raise McpSpecError(f"{target!r}: expected a URL, a command as a list of strings, or an McpSpec.")
    else:
        spec = McpSpec(name=name or "remote", command=tuple(target))
    if prefix is not None and prefix != spec.prefix:
        spec = dataclasses.replace(spec, prefix=prefix)
    return spec


#: The servers whose import claimed a registry (:func:`_claim`), and the lock of the claims.
_claimants: weakref.WeakSet[RemoteServer] = weakref.WeakSet()
_claims_lock = threading.Lock()


def _claim(server: RemoteServer, registry: ToolRegistry, replace: bool) -> None:
    """Claim ``server``'s name in ``registry``, before it connects: a server's name is its tools' source
    (``mcp:NAME``), its circuit and its tag, so two servers of one name in a registry would each take the other's
    tools for its own. A server holds its name while it is attached to the registry, tools or not: from its import
    (under way too) until it is closed or its import fails. Another import of the name raises :class:`McpSpecError`;
    with ``replace`` it takes the name over once it has listed its tools (:meth:`RemoteServer._attach`; an import
    that fails before leaves the earlier server as it was). The earlier server of the name (a closed one too) then
    no longer refreshes its tools into the registry: they stay as they are, until replaced."""
    name = server.spec.name
    with _claims_lock:
        others = [
            other
            for other in list(_claimants)
            if other is not server and other.spec.name == name and registry in (other._claimed, other.registry)
        ]
        if not replace and any(other._claimed is registry for other in others):
            unnamed = " (an import without name= is called 'remote')" if name == "remote" else ""
            raise McpSpecError(
                f"MCP server '{name}' is already imported into this registry{unnamed}: give this server its "
                "own name (name='...', the NAME of --mcp NAME=..., or its [mcp.servers.NAME] table), close the "
                "other first, or import with replace=True to take the name over."
            )
        server._replacing = others  # (the takeover: in _attach)
        server._claimed = registry
        _claimants.add(server)


def _release(server: RemoteServer, registry: ToolRegistry | None = None) -> None:
    """``server`` no longer holds its name (in ``registry``; None: in any), nor takes it over from another."""
    with _claims_lock:
        if registry is None or server._claimed is registry:
            server._claimed = None
            server._replacing = []


#: The closing of servers whose import failed, under way in the background (awaited at exit: :func:`_close_all`).
_closing: set[concurrent.futures.Future[None]] = set()


def _close_soon(server: RemoteServer) -> None:
    """Close ``server`` in the background: an import fails at once, not after its server's stop (up to the SDK's
    grace periods and :data:`_KILL_GRACE`)."""
    future = _submit(server._close())
    _closing.add(future)
    future.add_done_callback(_closing.discard)


def import_tools(
    registry: ToolRegistry,
    target: McpSpec | str | Sequence[str],
    *,
    name: str | None = None,
    prefix: str | None = None,
    replace: bool = False,
    connect_timeout: float = 30.0,
    call_timeout: float | Literal["spec"] | None = "spec",
    max_reply_bytes: int | None = None,
    **definition: Any,
) -> RemoteServer:
    """Connect to an MCP server and add its tools to ``registry``; returns the :class:`RemoteServer`.

    ``target`` is an :class:`McpSpec`, a URL (streamable HTTP) or a command as a list
    (stdio), e.g. ``["npx", "-y", "@modelcontextprotocol/server-everything"]``. Tool names
    are ``prefix_name``, made valid for every provider (see :func:`local_name`).
    ``definition`` holds ``defineTool`` keywords for every tool (``timeout=10``,
    ``retry=3``, ``rate_limit={...}``, ``circuit_breaker=True``, ``cache_ttl=60`` for the
    read-only and idempotent ones); annotations give ``read_only``, ``idempotent``,
    ``destructive`` and ``open_world``. Existing names raise :class:`ToolDefinitionError`
    unless ``replace``. A registry holds one server per name (its tools' ``source`` ``mcp:NAME``, tag and circuit;
    an import without ``name`` is called ``remote``): a name a server attached to ``registry`` holds (not closed)
    raises :class:`McpSpecError` before connecting, unless ``replace``: then this server takes the name over once
    it has listed its tools (an import that fails leaves the earlier one as it was), and the earlier one no longer
    refreshes its tools into ``registry``. ``connect_timeout`` bounds the connection and
    each page of the tool listing; the whole listing (all its pages), the spec's ``list_timeout``. ``call_timeout``
    (default ``"spec"``: an
    :class:`McpSpec`'s own, else 300 s;
    ``None``: none) bounds each remote call that no ``timeout``/``total_timeout`` bounds; past it the
    call is a :class:`~harness_one.ToolTimeout`.
    ``max_reply_bytes`` (None: the spec's, 16 MiB by default) bounds one reply (a stdio line, an HTTP body or
    event): a longer one fails its call (its ``cause`` a :class:`RemoteToolError` of ``kind`` ``reply_too_large``)
    and the connection stays.
    """
    spec = _spec(target, name, prefix)
    server = RemoteServer(spec, connect_timeout=connect_timeout, call_timeout=call_timeout, max_reply_bytes=max_reply_bytes)
    _claim(server, registry, replace)  # before it connects: a name taken starts no server
    try:
        listing = _wait(server._list())
        server._attach(registry, listing, definition, replace)  # in this thread: see _attach
    except BaseException:
        _release(server, registry)
        _close_soon(server)
        raise
    server._took = []  # (kept for a failed import only: see _give_back)
    _submit(server._imported())
    return server


async def aimport_tools(
    registry: ToolRegistry,
    target: McpSpec | str | Sequence[str],
    *,
    name: str | None = None,
    prefix: str | None = None,
    replace: bool = False,
    connect_timeout: float = 30.0,
    call_timeout: float | Literal["spec"] | None = "spec",
    max_reply_bytes: int | None = None,
    **definition: Any,
) -> RemoteServer:
    """The awaitable :func:`import_tools`."""
    spec = _spec(target, name, prefix)
    server = RemoteServer(spec, connect_timeout=connect_timeout, call_timeout=call_timeout, max_reply_bytes=max_reply_bytes)
    _claim(server, registry, replace)  # before it connects: a name taken starts no server
    try:
        listing = await _await(server._list())
        stop = threading.Event()
        attach = asyncio.ensure_future(asyncio.to_thread(server._attach, registry, listing, definition, replace, stop))
        try:
            await asyncio.shield(attach)  # in a worker thread: not on the caller's loop
        except asyncio.CancelledError:  # the thread cannot be cancelled: it stops, and its tools are taken out
            stop.set()
            await _outlast(attach)
            if not attach.cancelled() and attach.exception() is None:  # it had added them all
                await _outlast(asyncio.ensure_future(asyncio.to_thread(server._detach, registry, attach.result())))
            raise
    except BaseException:
        _release(server, registry)
        _close_soon(server)
        raise
    server._took = []  # (kept for a failed import only: see _give_back)
    _submit(server._imported())
    return server


async def _outlast(future: asyncio.Future[Any]) -> None:
    """Wait for ``future`` to finish, though the waiting task is cancelled again meanwhile (what it does, a worker
    thread's, cannot be cancelled): the cancellation is the caller's to raise after."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([future])
