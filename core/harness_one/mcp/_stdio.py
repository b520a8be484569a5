"""Stdin and stdout for the SDK's ``stdio_server`` on asyncio pipes, without a thread per line.

The SDK reads and writes the standard streams through ``anyio.wrap_file``: each line read,
written and flushed is a hop to a worker thread, about a third of a ``tools/call`` round
trip. Here the event loop polls the pipes itself. As in the SDK, fd 0 and fd 1 are diverted
(to the null device and to stderr) while serving, so a stray ``print`` in a tool cannot
corrupt the wire, and are restored afterwards. A stream that cannot be polled (a regular
file) leaves the SDK's own streams in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["pipe_streams"]

#: A line longer than this is dropped whole (as the SDK drops a line that is not JSON-RPC).
_MIN_LINE = 1 << 20


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class _Lines:
    """``async for line in stdin``: text lines from an asyncio ``StreamReader``."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

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
                return ""  # not JSON-RPC: the SDK reports it and reads on
            return line.decode("utf-8", errors="replace")

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


def _claim(fd: int, divert: Callable[[], int]) -> tuple[int, Callable[[], None]]:
    """A private copy of ``fd`` for the wire; ``fd`` itself points at ``divert()`` until restored."""
    wire = os.dup(fd)
    keep = os.dup(fd)
    try:
        diversion = divert()
        try:
            os.dup2(diversion, fd)
        finally:
            os.close(diversion)
    except OSError:
        os.close(keep)
        keep = -1

    def restore() -> None:
        if keep >= 0:
            with contextlib.suppress(OSError):
                os.dup2(keep, fd)
            os.close(keep)

    return wire, restore


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
        wire_in, restore = _claim(0, lambda: os.open(os.devnull, os.O_RDONLY))
        restores.append(restore)
        wire_out, restore = _claim(1, lambda: os.dup(2))
        restores.append(restore)
        reader = asyncio.StreamReader(limit=max(max_line, _MIN_LINE), loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(wire_in, "rb", buffering=0)
        )
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(wire_out, "wb", buffering=0)
        )
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield _Lines(reader), _Out(writer)
    finally:
        for restore in reversed(restores):
            restore()
        for transport in transports:
            transport.close()
