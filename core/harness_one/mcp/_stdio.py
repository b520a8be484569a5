"""Stdin and stdout for the SDK's ``stdio_server`` on asyncio pipes, without a thread per line.

The SDK reads and writes the standard streams through ``anyio.wrap_file``: each line read,
written and flushed is a hop to a worker thread, about a third of a ``tools/call`` round
trip. Here the event loop polls the pipes itself. As in the SDK, fd 0 and fd 1 are diverted
(to the null device and to stderr; ``sys.stdin`` too, :func:`harness_one._stdout.claim_stdin`)
while serving, so a stray ``print`` or ``input()`` in a tool cannot touch the wire, and are
restored afterwards. A stream that cannot be polled (a regular
file) leaves the SDK's own streams in place.

A line the SDK cannot read (not JSON, invalid UTF-8 outside a string, a lone surrogate, not a
JSON-RPC message) it passes on as an exception and answers nothing, so the client would wait
for its request for ever. :class:`Answering` answers it, as JSON-RPC asks: ``-32700`` for a
line that is not JSON (``id`` null), ``-32600`` for one that is not a valid message, with the
request's ``id`` when the line has one. A response the client sent (``result``/``error``
and no ``method``) is never answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCNotification

from harness_one._render import safe_text
from harness_one._stdout import claim_stdin, claim_stdout, flush_stdout

__all__ = ["Answering", "pipe_streams"]

#: A line longer than this is dropped whole (as the SDK drops a line that is not JSON-RPC).
_MIN_LINE = 1 << 20


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class _Lines:
    """``async for line in stdin``: text lines from an asyncio ``StreamReader``.

    ``handed`` keeps the lines handed out (``None``: one dropped for its length) until
    :class:`Answering` receives what the SDK made of each: one message or one exception per
    line, in order.
    """

    def __init__(self, reader: asyncio.StreamReader, limit: int = 0) -> None:
        self.reader = reader
        self.limit = limit  # the reader's line limit, for the answer to a line dropped for its length
        self.handed: deque[str | None] = deque()

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if not exc.partial:
                    raise StopAsyncIteration from None
                line = exc.partial
            except asyncio.LimitOverrunError:
                await self._skip_line()
                self.handed.append(None)
                return ""  # not JSON-RPC: the SDK passes an exception on and reads on
            text = line.decode("utf-8", errors="replace")
            self.handed.append(text)
            return text

    async def _skip_line(self) -> None:
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return


class _Out:
    """``await stdout.write(text)`` and ``await stdout.flush()`` on an asyncio pipe transport."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        if self.writer.transport.is_closing():
            raise anyio.ClosedResourceError  # the client closed its end: the SDK's writer stops quietly
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        try:
            await self.writer.drain()
        except ConnectionError:
            raise anyio.ClosedResourceError from None


def reply_to(line: str | None, limit: int, exc: Exception) -> JSONRPCError | None:
    """The error that answers ``line``, which the SDK could not read (``exc``); None for a response."""
    if line is None:
        return _error(None, PARSE_ERROR, f"Parse error: a line longer than {limit} bytes")
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as err:  # RecursionError: nested deeper than the decoder reads
        return _error(None, PARSE_ERROR, f"Parse error: {err}")
    if type(message) is not dict:
        return _error(None, INVALID_REQUEST, f"Invalid request: expected a JSON object, got {type(message).__name__}")
    if "method" not in message and ("result" in message or "error" in message):
        return None
    given = message.get("id")
    known = given if type(given) is str or (type(given) is int and -(1 << 63) <= given < 1 << 63) else None
    return _error(known, INVALID_REQUEST, f"Invalid request: {_detail(exc)}")


def _has_id(line: str | None) -> bool:
    """Whether the JSON object on ``line`` has an ``id`` member (a notification has none)."""
    if not line or '"id"' not in line:
        return False
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return type(message) is dict and "id" in message


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    rid = safe_text(request_id) if type(request_id) is str else request_id
    return JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=code, message=safe_text(message[:500])))


def _detail(exc: Exception) -> str:
    """What the SDK found wrong, without the input it was given: the first problem of its ValidationError."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors(include_url=False, include_input=False)[0] if callable(errors) else None
    except Exception:
        first = None
    if not isinstance(first, dict):
        return type(exc).__name__
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))


class Answering:
    """The read stream of the SDK's ``stdio_server``, answering the lines it could not read.

    Each item received belongs to the oldest line in ``lines.handed`` (see :class:`_Lines`);
    an exception's answer goes out on ``write``, and the server never sees the exception.
    """

    def __init__(self, inner: Any, write: Any, lines: _Lines) -> None:
        self.inner, self.write, self.lines = inner, write, lines

    @property
    def last_context(self) -> Any:
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self.inner.receive()
            handed = self.lines.handed
            line = handed.popleft() if handed else ""
            if not isinstance(item, Exception):
                if type(getattr(item, "message", None)) is JSONRPCNotification and _has_id(line):
                    # {"id": 1.5, "method": ...}: the SDK reads a request with an id that is neither a
                    # string nor an integer as a notification, and its caller would wait for ever
                    await self.write.send(
                        SessionMessage(_error(None, INVALID_REQUEST, "Invalid request: id must be a string or an integer"))
                    )
                    continue
                return item
            reply = reply_to(line, self.lines.limit, item)
            if reply is not None:
                await self.write.send(SessionMessage(reply))

    def __aiter__(self) -> Answering:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Answering:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


@asynccontextmanager
async def pipe_streams(max_line: int) -> AsyncIterator[tuple[Any, Any] | None]:
    """``(stdin, stdout)`` for ``stdio_server(stdin, stdout)``, or None where the SDK's own streams must do."""
    try:
        import sniffio

        on_asyncio = sniffio.current_async_library() == "asyncio"
    except Exception:  # pragma: no cover - sniffio comes with anyio
        on_asyncio = False
    if not on_asyncio or sys.platform == "win32" or not (_pollable(0) and _pollable(1)):
        yield None
        return
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    restores: list[Callable[[], None]] = []
    transports: list[asyncio.BaseTransport] = []
    try:
        wire_in, restore = claim_stdin()
        restores.append(restore)
        wire_out, restore = claim_stdout()
        restores.append(restore)
        limit = max(max_line, _MIN_LINE)
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(wire_in, "rb", buffering=0)
        )
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(wire_out, "wb", buffering=0)
        )
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield _Lines(reader, limit), _Out(writer)
    finally:
        flush_stdout()  # what tools printed goes to stderr, not onto the wire at exit
        for restore in reversed(restores):
            restore()
        for transport in transports:
            transport.close()
