"""Stdin and stdout of ``harness-one serve`` for the SDK's ``stdio_server``: the requests' and the answers' own.

The requests come from :func:`harness_one._stdout.stdin_for_requests` and the answers go to
:func:`harness_one._stdout.stdout_for_answers`, as for ``run``: from and to private copies of
fd 0 and fd 1, while fd 0 and ``sys.stdin`` read the null device and fd 1 and ``sys.stdout`` go
to stderr, so a stray ``print`` or ``input()`` in a tool cannot touch the wire; embedded in a
process whose ``sys.stdin`` or ``sys.stdout`` is not fd 0 or fd 1, from and to those streams.
A copy that is a pipe, a socket or a terminal is polled by the event loop itself (the SDK reads
and writes through ``anyio.wrap_file``: a hop to a worker thread for each line read, written and
flushed, about a third of a ``tools/call`` round trip); any other stream (a regular file, a
host's stream) is read a line at a time, and written an answer at a time, on a worker thread.

A line the SDK cannot read (not JSON, not UTF-8, a lone surrogate, not a JSON-RPC message) it
passes on as an exception and answers nothing, so the client would wait for its request for
ever. :class:`Answering` answers it, as JSON-RPC asks: ``-32600`` for a line longer than the limit
(``Request too large``, on the request's ``id`` when its start or its end holds it, see
:func:`dropped`; none for a response, and a request of the server's it answers fails in its place),
``-32700`` for a line that is not JSON
(``id`` null) or not UTF-8 (a line is decoded strictly: with U+FFFD for a bad byte, a string
in the request would change unseen), ``-32600`` for one that is not a valid message, with the
request's ``id`` when the line has one the client can know (not a string holding a lone
surrogate, which could only go back as U+FFFD, the ``id`` of another request); but a ``tools/call`` the SDK
cannot read only for its nesting or an integer's length is read again (see :func:`reread_call`) and passed on,
or, for an integer past the int-to-text limit or nesting too deep to read, answered here, so that its arguments
get the registry's ``isError`` answer, as any others (a tool the registry does not have: the ``-32602`` any call of it
gets). A response the client sent (``result``/``error`` and no ``method``) is never answered. A batch (an array, which
the SDK does not read) gets one array: ``-32600`` on the ``id`` of each request in it, at most
:data:`_MAX_BATCH` (nothing for a batch of notifications and responses). An answer of its own that cannot be written marks the client gone, as one of the SDK's does.

At the end of stdin the SDK ends the session and cancels every request still running, so a
client that sent its requests and closed its stdin (``serve < requests.txt``) lost the last
answers. :class:`Answering` holds the end of stdin back until every request it passed on has
settled: answered (a response or an error written), or cancelled by the client
(``notifications/cancelled``, never answered). It ends early once the client has stopped reading
(an answer could not be written, or, where ``select.poll`` exists (not Windows), stdout reports
that its reader is gone: a pipe's read end closed, a socket closed, a terminal hung up), and at the latest ``drain_timeout`` seconds (by the registry's
clock) after the end of stdin: the SDK then cancels the requests still running (each answered
``Connection closed``), and how many there were goes to stderr. A ``subscriptions/listen`` stream,
answered only when the session ends, is not waited for once acknowledged. Once the drain has ended,
the answers still unwritten are dropped when stdout's reader takes no byte for what is left of the
drain timeout, at least :data:`SHUTDOWN_WRITE_TIMEOUT` (a client that keeps stdout open and reads
nothing); a client reading, however slowly, gets them whole. A request the server sent the
client and has no answer to at the end of stdin (or sends it after) gets ``Connection closed``
at once, as the SDK gives every one at the end of its input: the client's answer can only
come on stdin.

The SDK reads stdin as fast as it can, so a client that sends requests and reads no answers made
the server hold every answer in memory. While :data:`MAX_UNSETTLED` requests are unsettled (and
the server waits for no answer of the client's, which can only come on stdin), :class:`Answering`
passes no more requests on: it keeps reading lines and passes notifications (a
``notifications/cancelled`` frees room) and the client's responses on, and holds each further
request (a ``ping`` too), in order, until one settles; a cancel of a held request drops it (it is
never answered). Once :data:`MAX_UNSETTLED` requests are held as well, it reads no more lines (so
the SDK stops reading stdin, and the client's writes wait) until a request settles: no more than
twice :data:`MAX_UNSETTLED` requests are in memory. A stream counts and is held as any request;
past :data:`MAX_STREAMS` acknowledged ones a further one is refused (``-32603``), and while that many
are passed on and not all acknowledged, it is held until they are (or are answered: an era without
streams answers each ``-32601``). A cancel names a held
request as the SDK names a running one (``"7"`` is 7). At the end of stdin the held requests are
passed on as room comes; any still held when the drain ends are answered ``Connection closed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
import math
import os
import re
import select
import stat
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)

from harness_one._arguments import find_long, long_numbers
from harness_one._clock import SYSTEM_CLOCK, Clock
from harness_one._errors import ArgumentProblem, ToolArgumentError, model_message
from harness_one._render import json_data, safe_text
from harness_one._requests import CUT_KEEP, cut_line, head_members, read_object
from harness_one._stdout import LineReader, Writer, fileno, stdin_for_requests, stdout_for_answers

from ._spec import ERROR_META_KEY

__all__ = ["Answering", "stdio_streams"]

#: A line longer than this is dropped, read in pieces (the SDK would hold it whole) and answered by :class:`Answering`.
_MIN_LINE = 1 << 20
#: Bytes kept of the start and of the end of a line dropped for its length, to read its ``id`` from.
_KEEP = CUT_KEEP
#: A request answered only when the session ends (its answer is a stream of notifications).
_STREAM = "subscriptions/listen"
#: The SDK's first message on a stream it opened (its ``_meta`` names the stream's request).
_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
#: How much of a dropped line a worker thread reads at a time.
_CHUNK = 1 << 16
#: Requests passed on and not settled yet past which further requests are held, and requests held past
#: which no more lines are read (see :class:`Answering`).
MAX_UNSETTLED = 256
#: ``subscriptions/listen`` streams open at once past which a further one is refused (each holds one of the
#: :data:`MAX_UNSETTLED` places until the session ends).
MAX_STREAMS = 4
#: Seconds, at least, the last answers may take to be written once the drain has ended (what is left of the drain
#: timeout when that is more): past them, what is still unwritten is dropped and ``serve_stdio`` returns.
SHUTDOWN_WRITE_TIMEOUT = 1.0
#: Seconds between two checks, once the writes are bounded, of whether stdout's reader took bytes.
_POLL = 0.25
#: A notification of the client's cancelling a request.
_CANCELLED = "notifications/cancelled"
#: A UTF-16 surrogate: in a string ``id``, an ``id`` no answer can carry (UTF-8 has no lone surrogate).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _pollable(fd: int) -> bool:
    """Whether the event loop can poll ``fd``: a pipe, a socket or a terminal (not the null device: uvloop aborts on it)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


class _Wake:
    """The type of :data:`_WAKE`."""


#: An empty line :meth:`_Lines.wake` handed out, for :class:`Answering` to pass a held request on.
_WAKE = _Wake()


class _NotUtf8:
    """A line that is not valid UTF-8, handed to the SDK as an empty line: ``problem`` says where, and ``text``
    is the line with each invalid byte as a lone surrogate (``surrogateescape``), to read its ``id`` from."""

    __slots__ = ("problem", "text")

    def __init__(self, line: bytes, exc: UnicodeDecodeError) -> None:
        self.problem = f"the line is not valid UTF-8 (byte 0x{line[exc.start]:02x} at position {exc.start})"
        self.text = line.decode("utf-8", errors="surrogateescape")


class _TooLong:
    """A line longer than the limit, read and dropped: its ``size`` in bytes (its newline not counted, a carriage return
    before it counted, as in the limit), and only its first and last :data:`_KEEP` bytes (``head``, ``tail``), to read
    its ``id`` from."""

    __slots__ = ("head", "size", "tail")

    def __init__(self) -> None:
        self.head = self.tail = b""
        self.size = 0

    def add(self, piece: bytes) -> None:
        """The next ``piece`` of the line read."""
        if len(self.head) < _KEEP:
            self.head += piece[: _KEEP - len(self.head)]
        self.tail = (self.tail + piece[-_KEEP - 2 :])[-_KEEP - 2 :]  # (+ the line ending)
        self.size += len(piece)

    def end(self) -> _TooLong:
        """The line, read to its end (its newline taken off; a carriage return before it counts, as in the limit)."""
        if self.tail.endswith(b"\n"):
            self.tail, self.size = self.tail[:-1], self.size - 1
        self.head, self.tail = self.head[: self.size], self.tail[-_KEEP:]
        return self


class _Lines:
    """``async for line in stdin``: text lines from an asyncio ``StreamReader``.

    ``handed`` keeps the lines handed out (a :class:`_TooLong`: one dropped for its length; a :class:`_NotUtf8`: one
    that is not UTF-8) until :class:`Answering` receives what the SDK made of each: one message or one
    exception per line, in order.
    """

    def __init__(self, reader: asyncio.StreamReader | None, limit: int = 0) -> None:
        self.reader = reader
        self.limit = limit  # the line limit, for the answer to a line dropped for its length
        self.handed: deque[str | _NotUtf8 | _TooLong | _Wake] = deque()
        #: The answers' stdout (set by :func:`stdio_streams`), whose last writes :class:`Answering` bounds.
        self.out: _Out | _ThreadOut | None = None
        self._woken = False
        self._reading: anyio.CancelScope | None = None

    def wake(self) -> None:
        """Hand out an empty line marked :data:`_WAKE` (at once if a read of the event loop's waits for stdin; for
        :class:`_ThreadLines`, after the line being read), so that :class:`Answering` gets a turn."""
        self._woken = True
        if self._reading is not None:
            self._reading.cancel()

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._read() if not self._woken else _WAKE
        if isinstance(line, _Wake):
            self._woken = False
            self.handed.append(_WAKE)
            return ""  # not JSON-RPC: the SDK passes an exception on, which Answering drops
        if isinstance(line, _TooLong):
            self.handed.append(line)
            return ""  # not JSON-RPC: the SDK passes an exception on and reads on
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:  # decoded with U+FFFD, a string in the request would change unseen
            self.handed.append(_NotUtf8(line, exc))
            return ""  # not JSON-RPC: the SDK passes an exception on and reads on
        self.handed.append(text)
        return text

    async def _read(self) -> bytes | _Wake | _TooLong:
        """The next line (a :class:`_TooLong`: one longer than the limit, read and dropped; :data:`_WAKE`: woken while waiting);
        StopAsyncIteration at the end."""
        assert self.reader is not None
        try:
            # A wake-up cancels only the wait for a line (the reader keeps what it has), never a skip.
            with anyio.CancelScope() as self._reading:
                return await self.reader.readuntil(b"\n")
            return _WAKE
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise StopAsyncIteration from None
            return exc.partial
        except asyncio.LimitOverrunError:
            return await self._skip_line()
        finally:
            self._reading = None

    async def _skip_line(self) -> _TooLong:
        """The rest of a line over the limit, read in pieces and dropped but for its start and its end."""
        assert self.reader is not None
        line = _TooLong()
        while True:
            try:
                line.add(await self.reader.readuntil(b"\n"))
                return line.end()
            except asyncio.LimitOverrunError as exc:
                line.add(await self.reader.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:
                line.add(exc.partial)
                return line.end()


class _ThreadLines(_Lines):
    """:class:`_Lines` from a blocking :class:`~harness_one._stdout.LineReader`, a line at a time on a worker thread."""

    def __init__(self, source: LineReader, limit: int) -> None:
        super().__init__(None, limit)
        self.source = source

    async def _read(self) -> bytes | _TooLong:
        try:
            line = await anyio.to_thread.run_sync(_read_line, self.source, self.limit)
        except (OSError, ValueError):  # the stream failed or was closed under us: no more requests
            line = b""
        if line == b"":
            raise StopAsyncIteration
        return line


def _read_line(source: LineReader, limit: int) -> bytes | _TooLong:
    """The next line of ``source`` (b"" at its end; a :class:`_TooLong` for one longer than ``limit`` bytes, read
    and dropped)."""
    line = source.readline(limit + 1)
    if len(line) <= limit or line.endswith(b"\n"):
        return line
    dropped = _TooLong()
    while line:
        dropped.add(line)
        if line.endswith(b"\n"):
            break
        line = source.readline(_CHUNK)
    return dropped.end()


class _Out:
    """``await stdout.write(text)`` and ``await stdout.flush()`` on an asyncio pipe transport.

    The transport's high-water mark is 0, so a flush returns once every byte is written: what
    is still buffered when the server ends would be lost.
    """

    def __init__(self, writer: asyncio.StreamWriter, fd: int = -1) -> None:
        self.writer = writer
        self.fd = fd  # the descriptor written to (-1: unknown)
        writer.transport.set_write_buffer_limits(0)
        self.given = 0  # bytes handed to the transport
        self._stall = math.inf  # see :meth:`cut`

    def cut(self, seconds: float) -> None:
        """Bound the writes from now: a flush that sees ``seconds`` pass with bytes unwritten and none taken by the
        reader (it stopped reading) drops them and aborts the transport, and the SDK's writer stops quietly. A
        reader that takes bytes, however slowly, gets every one."""
        self._stall = max(seconds, 0.0)

    async def write(self, text: str) -> None:
        if self.writer.transport.is_closing():
            raise anyio.ClosedResourceError  # the client closed its end: the SDK's writer stops quietly
        data = text.encode("utf-8")
        self.given += len(data)
        self.writer.write(data)

    def _taken(self, transport: asyncio.WriteTransport) -> int:
        """Bytes the reader has taken."""
        return self.given - transport.get_write_buffer_size()

    async def flush(self) -> None:
        transport = self.writer.transport
        try:
            if not transport.get_write_buffer_size():  # all written at once (a reader keeping up)
                await self.writer.drain()
                return
            taken = functools.partial(self._taken, transport)
            if await _until_done_or_stalled(self.writer.drain, taken, lambda: self._stall):
                return
        except ConnectionError:
            raise anyio.ClosedResourceError from None
        transport.abort()  # the reader stopped reading past the cut: what is unwritten is dropped
        raise anyio.ClosedResourceError


async def _until_done_or_stalled(
    wait: Callable[[], Awaitable[Any]], taken: Callable[[], int], stall: Callable[[], float]
) -> bool:
    """Whether ``await wait()`` ended (it is awaited again every :data:`_POLL` seconds) before ``stall()`` seconds
    passed with no byte taken (``taken()``: how many so far), counted from the latest byte taken or change of
    ``stall()`` (a cut made while waiting)."""
    seen, since, bound = taken(), anyio.current_time(), stall()
    while True:
        with anyio.move_on_after(_POLL) as scope:
            await wait()
        if not scope.cancelled_caught:
            return True
        now = anyio.current_time()
        if taken() > seen:
            seen, since = taken(), now
        if stall() != bound:
            since, bound = now, stall()
        if now - since >= bound:
            return False


class _ThreadOut:
    """``await stdout.write(text)`` and ``await stdout.flush()`` on a blocking :class:`~harness_one._stdout.Writer`
    (None: stdout is closed), flushed on a thread.

    Where ``out`` has a descriptor (not a regular file's), each flush runs on a daemon thread of its own, which keeps
    no process from exiting when a write is left blocked (see :meth:`cut`). A ``shared`` stream (a host's, which its
    other writers use too: a log handler) is written through itself while the writes are unbounded, so that its lock
    keeps each answer whole; a write that starts once they are bounded, and every write to a stream of the server's
    own, goes to the descriptor with ``os.write`` a chunk at a time (``out`` flushed first), holding no lock of
    ``out``. Otherwise each flush runs on a worker thread, and :meth:`cut` cannot bound it (a regular file's write
    waits for no reader).
    """

    def __init__(self, out: Writer | None, *, shared: bool = False) -> None:
        self.out = out
        self.fd = -1 if out is None else fileno(out)  # the descriptor written to (-1: none, or not a file)
        #: Whether a write can wait on a reader (not a regular file, whose writes the worker threads do faster).
        self.can_stall = self.fd >= 0 and not _regular_file(self.fd)
        self.shared = shared
        self.pending: list[bytes] = []
        self._stall = math.inf  # see :meth:`cut`

    def cut(self, seconds: float) -> None:
        """Bound the writes from now, as :meth:`_Out.cut` does: a write to the descriptor that takes no chunk for
        ``seconds`` (one through a shared stream, which shows no progress, that does not end within ``seconds``) is
        left to its thread (a blocking write cannot be interrupted) and no more is written."""
        self._stall = max(seconds, 0.0)

    async def write(self, text: str) -> None:
        if self.out is None:
            raise anyio.ClosedResourceError  # nowhere to answer: the SDK's writer stops quietly
        self.pending.append(text.encode("utf-8"))

    async def flush(self) -> None:
        data, self.pending = b"".join(self.pending), []
        if self.out is None:
            raise anyio.ClosedResourceError
        if not self.can_stall:
            try:
                await anyio.to_thread.run_sync(_put, self.out, data)
            except (OSError, ValueError):  # a broken pipe, a stream closed under us
                raise anyio.ClosedResourceError from None
            return
        job = _Put(self.fd, data, self.out, through=self.shared and self._stall == math.inf)
        self.out, out = None, self.out  # until the write ends: a cancel leaves it to its thread, and writes no more
        if not await job.wait(lambda: self._stall):  # stalled past the cut: left to its thread
            raise anyio.ClosedResourceError
        if job.error is not None:  # a broken pipe, a descriptor closed under us
            raise anyio.ClosedResourceError
        self.out = out


class _Put:
    """``data`` written on a daemon thread: ``through`` the stream ``out`` itself, else to its descriptor ``fd``
    (``out`` flushed first)."""

    def __init__(self, fd: int, data: bytes, out: Writer, *, through: bool = False) -> None:
        self.fd, self.data, self.out, self.through = fd, data, out, through
        self.written = 0
        self.error: BaseException | None = None
        self.done = anyio.Event()
        self.token = anyio.lowlevel.current_token()

    async def wait(self, stall: Callable[[], float]) -> bool:
        """Start the write and wait for its end: False when no chunk was taken for ``stall()`` seconds (see
        :func:`_until_done_or_stalled`; the write goes on, on its thread, as it does when the wait is cancelled)."""
        threading.Thread(target=self._run, name="harness-one-stdout-write", daemon=True).start()
        return await _until_done_or_stalled(self.done.wait, lambda: self.written, stall)

    def _run(self) -> None:
        try:
            if self.through:  # the stream's lock keeps the answer whole against its other writers
                self.out.write(self.data)
                self.out.flush()
                self.written = len(self.data)
                return
            self.out.flush()
            view = memoryview(self.data)
            while self.written < len(view):
                try:
                    self.written += os.write(self.fd, view[self.written : self.written + _CHUNK])
                except BlockingIOError:  # a descriptor in non-blocking mode: wait until it takes bytes
                    select.select([], [self.fd], [])
        except BaseException as exc:  # OSError: a broken pipe; ValueError: ``out`` closed
            self.error = exc
        finally:
            with contextlib.suppress(Exception):  # the loop has ended: nobody is waiting any more
                anyio.from_thread.run_sync(self.done.set, token=self.token)


def _regular_file(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


def _put(out: Writer, data: bytes) -> None:
    out.write(data)
    out.flush()


def reply_to(line: str | _NotUtf8 | _TooLong, limit: int, exc: Exception) -> list[JSONRPCError | _Batch]:
    """The answers to ``line``, which the SDK could not read (``exc``): one error, none for a response, one array
    of errors for a batch (none for a batch of notifications and responses; see :func:`_batch_replies`)."""
    if isinstance(line, _TooLong):
        response, request_id = dropped(line)
        if response:  # never answered
            return []
        text = f"Request too large: the line is {line.size:,} bytes, more than the limit of {limit:,}"
        return [_error(request_id, INVALID_REQUEST, text)]
    if isinstance(line, _NotUtf8):
        reply = _not_utf8(line)
        return [] if reply is None else [reply]
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as err:  # RecursionError: nested deeper than the decoder reads
        # An integer past the int-to-text limit, or nesting too deep: the request's id may still be read.
        message = read_object(line)
        if message is None:
            return [_error(None, PARSE_ERROR, f"Parse error: {err}")]
    if type(message) is dict and "method" not in message and ("result" in message or "error" in message):
        return []
    if type(message) is list:
        replies = _batch_replies(message)
        if replies:
            return [_Batch(replies)]
        if all(type(element) is dict for element in message) and message:
            return []  # notifications and responses: never answered
        return [invalid_message(message, exc)]  # empty, or no message in it to answer: one answer, ``id`` null
    return [invalid_message(message, exc)]


#: What the SDK's JSON reader refuses that Python's (the registry's, for arguments given as text) reads: nesting past
#: its 200 levels, an integer past 4,300 digits.
_BEYOND_SDK = ("recursion limit exceeded", "number out of range")
#: A JSON escape of a UTF-16 surrogate (a lone one, which the SDK refuses, only where one is unpaired).
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


#: The message of the ``-32602`` for a call of a tool the served registry does not have (None: it has it).
Unknown = Callable[[str], "str | None"]


def _known(name: str) -> str | None:
    return None


def reread_call(line: str, exc: Exception, unknown: Unknown = _known) -> SessionMessage | JSONRPCResponse | JSONRPCError | None:
    """A ``tools/call`` request on ``line``, which the SDK could not read (``exc``) only for its nesting or the length
    of an integer, read by Python's JSON reader, as the registry reads arguments given as text: the request, to pass
    on, so that the registry judges its arguments as any others (an ``isError`` ``ToolArgumentError`` naming the path).
    Arguments holding an integer past the int-to-text limit, or nested too deeply for that reader too, get that result
    here (:func:`_refused`; an integer's value is never read, nor made up: it would reach a tool that no validation
    plugin guards), or, for a tool ``unknown`` names, its ``-32602``. None for any other line (not a ``tools/call``, no
    ``id`` the client can know, such an integer outside the arguments, a lone surrogate, which the SDK refuses too): it
    is answered ``-32600``, as the SDK's other refusals."""
    if not any(problem in _detail(exc) for problem in _BEYOND_SDK):
        return None
    long: list[int] = []
    try:
        message = json.loads(line, parse_int=long_numbers(long))
    except RecursionError:
        return _too_deep(line, unknown)
    except ValueError:
        return None
    if type(message) is not dict or message.get("method") != "tools/call" or _request_id(message.get("id")) is None:
        return None
    if _ESCAPED_SURROGATE.search(line) and _lone_surrogate(message):
        return None
    if long:
        params = message.get("params")
        name = params.get("name") if type(params) is dict else None
        arguments = params.pop("arguments", None) if type(params) is dict else None
        found = find_long(arguments)
        if found is None or type(name) is not str or find_long(message) is not None:  # (the id, a progress token)
            return None
        return _refused(_request_id(message["id"]), name, found.problem(), unknown)
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_python(message, by_name=False))
    except Exception:  # no valid message (``params`` not an object): the SDK's own refusal stands
        return None


def _too_deep(line: str, unknown: Unknown = _known) -> JSONRPCResponse | JSONRPCError | None:
    """The answer to a ``tools/call`` request on ``line`` whose arguments are nested too deeply for Python's JSON
    reader too (:func:`_refused`: ``$: arguments are nested too deeply to read``), on its ``id`` (read at its start, or
    else its last member). None when its ``method``, its ``id`` (one the client can know) or its tool's ``name`` cannot
    be read before the arguments, or it is not they that are too deep."""
    members, cut, start = head_members(line)
    request_id = _request_id(members["id"] if "id" in members else cut_line(b"", line[-_KEEP:].encode())[2])
    if members.get("method") != "tools/call" or cut != "params" or request_id is None:
        return None
    params, cut, _ = head_members(line[start:])
    name = params.get("name")
    if cut != "arguments" or type(name) is not str:
        return None
    problem = ArgumentProblem("$", "arguments are nested too deeply to read", "limits", "fewer levels of nesting", "deeper")
    return _refused(request_id, name, problem, unknown)


def _refused(request_id: Any, name: str, problem: ArgumentProblem, unknown: Unknown = _known) -> JSONRPCResponse | JSONRPCError:
    """The ``isError`` result the server gives arguments the registry cannot read, on ``request_id`` (no call was made:
    no ``call_id``); for a tool ``unknown`` names, the ``-32602`` any call of it gets, whatever its arguments."""
    missing = unknown(name)
    if missing is not None:
        return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=INVALID_PARAMS, message=missing))
    error = ToolArgumentError([problem], tool=name)
    result = {
        "content": [{"type": "text", "text": model_message(error)}],
        "isError": True,
        "_meta": {ERROR_META_KEY: json_data(error.to_dict())},
        "resultType": "complete",
    }
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)


def _lone_surrogate(value: Any) -> bool:
    """Whether a string in ``value`` (a name too) holds a lone surrogate; walked without recursion (it may be deep)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if _SURROGATE.search(item):
                return True
        elif type(item) is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


#: Messages of a batch answered, at most (one answer more says how many were not): a line of small requests would
#: otherwise be answered with many times its own length.
_MAX_BATCH = 100


class _Batch:
    """A batch's answer, written by the SDK as any message it is handed: a JSON array of errors."""

    __slots__ = ("errors",)

    def __init__(self, errors: list[JSONRPCError]) -> None:
        self.errors = errors

    def model_dump_json(self, **options: Any) -> str:
        return "[" + ",".join(error.model_dump_json(**options) for error in self.errors) + "]"


def _batch_replies(batch: list[Any]) -> list[JSONRPCError]:
    """A batch (a JSON-RPC 2.0 array, which the SDK does not read): ``-32600`` on the ``id`` of each request in it
    the client can know as its own (``id`` null for one it cannot), so that none is waited for for ever; nothing for
    a notification, a response or an element that is no message. At most :data:`_MAX_BATCH` (the errors past them are
    counted, not made), then one saying how many more were left unanswered."""
    replies: list[JSONRPCError] = []
    text = "Invalid request: batches are not supported; send each message on a line of its own"
    left = 0
    for message in batch:
        if type(message) is dict and "method" in message and "id" in message:  # not a notification
            if len(replies) < _MAX_BATCH:
                replies.append(_error(_request_id(message.get("id")), INVALID_REQUEST, text))
            else:
                left += 1
    if left:
        replies.append(_error(None, INVALID_REQUEST, f"{text} ({left} more messages in it not answered)"))
    return replies


def invalid_message(message: Any, exc: Exception) -> JSONRPCError:
    """The ``-32600`` answering JSON ``message`` that is no JSON-RPC message (``exc``: what the SDK found wrong),
    on the request's ``id`` when it has one the client can know as its own, without the input."""
    if type(message) is not dict:
        return _error(None, INVALID_REQUEST, f"Invalid request: expected a JSON object, got {type(message).__name__}")
    return _error(_request_id(message.get("id")), INVALID_REQUEST, f"Invalid request: {_detail(exc)}")


def _not_utf8(line: _NotUtf8) -> JSONRPCError | None:
    """The ``-32700`` answering a line that is not UTF-8, with the request's ``id`` when it reads as one (a string
    with an invalid byte in it does not); None for a response."""
    try:
        message = json.loads(line.text)
    except (ValueError, RecursionError):
        message = read_object(line.text)
    known = None
    if type(message) is dict:
        if "method" not in message and ("result" in message or "error" in message):
            return None
        known = _request_id(message.get("id"))
    return _error(known, PARSE_ERROR, f"Parse error: {line.problem}")


def _request_id(given: Any) -> str | int | None:
    """``given`` when it is an ``id`` the client can know as its own: a string of valid text (a lone surrogate in
    it would be sent back as U+FFFD, the ``id`` of another request) or a 64-bit integer; else None."""
    if type(given) is str:
        return None if _SURROGATE.search(given) else given
    if type(given) is int and -(1 << 63) <= given < 1 << 63:
        return given
    return None


def dropped(line: _TooLong) -> tuple[bool, str | int | None]:
    """What a line dropped for its length was, read from its start and its end (:func:`~harness_one._requests.cut_line`):
    whether it is a response (no ``method`` before the member cut short at its start, and that member, or one before
    it, ``result`` or ``error``), and its ``id`` (None when the client cannot know it as its own, or when neither place
    holds one)."""
    members, cut, request_id = cut_line(line.head, line.tail)
    response = "method" not in members and ("result" in members or "error" in members or cut in ("result", "error"))
    return response, _request_id(request_id)


def _has_id(line: str | _NotUtf8 | _TooLong) -> bool:
    """Whether the JSON object on ``line`` has an ``id`` member (a notification has none)."""
    if not isinstance(line, str) or '"id"' not in line:
        return False
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return type(message) is dict and "id" in message


def _is_stream(request: SessionMessage) -> bool:
    """Whether the request ``request`` is a ``subscriptions/listen`` stream."""
    return getattr(request.message, "method", None) == _STREAM


def _take(counts: dict[Any, int], key: Any) -> None:
    """One fewer ``key`` in ``counts``."""
    if counts[key] > 1:
        counts[key] -= 1
    else:
        del counts[key]


def _closed(request_id: Any) -> JSONRPCError:
    """``Connection closed`` on ``request_id``, as the SDK answers a request at the end of its input."""
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=CONNECTION_CLOSED, message="Connection closed"))


def _id_of(request: SessionMessage) -> Any:
    """The ``id`` of the request ``request``."""
    return getattr(request.message, "id", None)


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


_W = TypeVar("_W", bound="_Wrapping")


class _Wrapping:
    """A stream of the SDK's (``inner``) wrapped: closed with it, and an async context manager as it is."""

    inner: Any

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self: _W) -> _W:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


class Answering(_Wrapping):
    """The read stream of the SDK's ``stdio_server``, answering the lines it could not read.

    Each item received belongs to the oldest line in ``lines.handed`` (see :class:`_Lines`);
    an exception's answer goes out on ``write``, and the server never sees the exception.
    The server writes on :attr:`answers`, which counts its answers: at the end of ``inner``,
    :meth:`receive` waits until every request passed on has settled, or ``drain_timeout``
    seconds of ``clock`` (None: no bound; see the module's text). While ``max_unsettled`` requests
    are unsettled (and the server waits for no answer of the client's), it holds each further request in
    ``held`` and passes everything else on; while ``max_unsettled`` are held too, it receives nothing more.
    """

    def __init__(
        self,
        inner: Any,
        write: Any,
        lines: _Lines,
        *,
        clock: Clock = SYSTEM_CLOCK,
        drain_timeout: float | None = None,
        out_fd: int = -1,
        max_unsettled: int = MAX_UNSETTLED,
        max_streams: int = MAX_STREAMS,
        unknown: Unknown = _known,
    ) -> None:
        self.inner, self.write, self.lines = inner, write, lines
        #: The ``-32602`` message for a tool the registry does not have, for a call answered here (see :func:`reread_call`).
        self.unknown = unknown
        self.clock, self.drain_timeout = clock, drain_timeout
        #: The answers' descriptor (-1: none), watched during the drain for its reader going away.
        self.out_fd = out_fd
        self._hangup: _Hangup | None = None
        #: How many requests are waited for (the sum of ``waiting``), and how many stop the reading of more lines.
        self.unsettled, self.max_unsettled = 0, max_unsettled
        self._room: anyio.Event | None = None
        #: The requests received and not passed on yet, oldest first (at most ``max_unsettled``).
        self.held: deque[SessionMessage] = deque()
        self.answers = _Answers(write, self)
        #: The ids of the requests passed on and not settled yet, each with how many are (a client
        #: may reuse an id).
        self.waiting: dict[Any, int] = {}
        #: Those of them that are streams (``subscriptions/listen``), counted as unsettled, so held past
        #: ``max_unsettled`` as any request; and those of these the SDK acknowledged (open: answered only when the
        #: session ends, not waited for at the end of stdin). Past ``max_streams`` open ones a further one is refused;
        #: while ``max_streams`` are passed on and not all acknowledged, a further one is held until they are (or
        #: settle: a protocol era without streams answers each "Method not found").
        self.streams: dict[Any, int] = {}
        self.acked: dict[Any, int] = {}
        self.passed_streams, self.open_streams, self.max_streams = 0, 0, max_streams
        #: The ids of the requests the server sent the client and has no answer to.
        self.asked: set[Any] = set()
        self.gone = False  # an answer could not be written: the client stopped reading
        self.deadline: float | None = None  # the end of the drain, once stdin has ended (inf: no bound)
        self._idle: anyio.Event | None = None

    async def aclose(self) -> None:
        if self._hangup is not None:
            self._hangup.stop()
        await self.inner.aclose()

    @property
    def last_context(self) -> Any:
        return getattr(self.inner, "last_context", None)

    def _full(self) -> bool:
        """Whether a request received now is held: ``max_unsettled`` are unsettled (the client is that far
        behind) and the server waits for no answer of the client's (it can only come on stdin)."""
        return self.unsettled >= self.max_unsettled and not self.asked

    def _must_hold(self, item: SessionMessage) -> bool:
        """Whether the request ``item`` is held: the server is :meth:`_full`, or it is a stream and
        ``max_streams`` are passed on, not all of them acknowledged yet (whether it is refused depends on them)."""
        if self._full():
            return True
        return self.open_streams < self.max_streams <= self.passed_streams and _is_stream(item)

    async def receive(self) -> Any:
        while True:
            if self.held and not self._must_hold(self.held[0]):
                passed = await self._pass_on(self.held.popleft())
                if passed is not None:
                    return passed
                continue
            if self.deadline is not None:
                return await self._draining()
            if len(self.held) >= self.max_unsettled:  # that many held too: read no more
                self._room = anyio.Event()
                await self._room.wait()
                continue  # room: the oldest held request goes first
            try:
                item = await self.inner.receive()
            except anyio.EndOfStream:
                self.deadline = self.clock.now() + (math.inf if self.drain_timeout is None else self.drain_timeout)
                continue
            handed = self.lines.handed
            line = handed.popleft() if handed else ""
            if isinstance(line, _Wake):  # an empty line of :meth:`_Lines.wake`, handed out to get here
                continue
            if isinstance(item, Exception) and isinstance(line, str):
                reread = reread_call(line, item, self.unknown)
                if isinstance(reread, (JSONRPCResponse, JSONRPCError)):
                    await self._answer(reread)
                    continue
                if reread is not None:  # read here: passed on as any request
                    item = reread
            if not isinstance(item, Exception):
                kind = type(item.message)
                if kind is JSONRPCRequest:  # a stream too: it is counted (and held) as any request
                    if self.held or self._must_hold(item):
                        self.held.append(item)
                        continue
                    passed = await self._pass_on(item)
                    if passed is not None:
                        return passed
                    continue
                elif kind is JSONRPCNotification and item.message.method == _CANCELLED and self._drop_held(item.message):
                    continue
                elif kind is JSONRPCNotification and _has_id(line):
                    # {"id": 1.5, "method": ...}: the SDK reads a request with an id that is neither a
                    # string nor an integer as a notification, and its caller would wait for ever
                    await self._answer(_error(None, INVALID_REQUEST, "Invalid request: id must be a string or an integer"))
                    continue
                elif kind is JSONRPCResponse or kind is JSONRPCError:
                    self.asked.discard(item.message.id)
                return item
            if isinstance(line, _TooLong):
                answer = self._too_long_answer(line)
                if answer is not None:
                    return answer
            for reply in reply_to(line, self.lines.limit, item):
                await self._answer(reply)

    def _too_long_answer(self, line: _TooLong) -> SessionMessage | None:
        """The client's answer to a request the server asked it, when ``line`` (dropped for its length) is that
        answer: an error in its place, so that the server's request does not wait for ever (None: it is not one)."""
        response, request_id = dropped(line)
        if not response or request_id not in self.asked:
            return None
        self.asked.discard(request_id)
        message = f"Response too large: the client's line is {line.size:,} bytes, more than the limit of {self.lines.limit:,}"
        return SessionMessage(_error(request_id, INVALID_REQUEST, message))

    async def _answer(self, reply: JSONRPCError | JSONRPCResponse | _Batch) -> None:
        """Write the server's own answer ``reply``; one that cannot be written (stdout closed, its reader gone)
        marks the client gone, as an answer of the SDK's that cannot be written does."""
        try:
            await self.write.send(SessionMessage(cast(Any, reply)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.gone = True
            if self._idle is not None:
                self._idle.set()

    async def _pass_on(self, item: SessionMessage, seconds: float = math.inf) -> SessionMessage | None:
        """The request ``item`` passed on (see :meth:`_pass`), or None: a stream past :data:`MAX_STREAMS` open
        ones, answered here (``-32603``, as the SDK refuses one past its own bound) and never passed on. An answer
        not written within ``seconds`` of the clock (the drain's end) is not written: ``item`` is held again."""
        if self.open_streams >= self.max_streams and _is_stream(item):
            message = f"Subscription limit reached: at most {self.max_streams} {_STREAM} streams open at once"
            refusal = _error(_id_of(item), INTERNAL_ERROR, message)
            if not await self._within(seconds, functools.partial(self._answer, refusal)):
                self.held.appendleft(item)  # answered ``Connection closed`` when the drain ends, within its bound
            return None
        return self._pass(item)

    def _pass(self, item: SessionMessage) -> SessionMessage:
        """The request ``item``, counted as unsettled (and, unless it is a stream, waited for), to pass on."""
        request_id = _id_of(item)
        self.waiting[request_id] = self.waiting.get(request_id, 0) + 1
        self.unsettled += 1
        if _is_stream(item):
            self.streams[request_id] = self.streams.get(request_id, 0) + 1
            self.passed_streams += 1
        # The SDK runs ``on_request_unanswered`` for a request that settles with no answer (cancelled).
        item.metadata = ServerMessageMetadata(on_request_unanswered=functools.partial(self._unanswered, request_id))
        return item

    def _drop_held(self, cancel: JSONRPCNotification) -> bool:
        """Whether the cancel ``cancel`` named a held request (the oldest of that id), now dropped: never passed on."""
        params = cancel.params if isinstance(cancel.params, dict) else {}
        request_id = params.get("requestId")
        if type(request_id) is not str and type(request_id) is not int:  # not a bool, as for the SDK
            return False
        # As the SDK matches a cancel to a running request: "7" and 7 are one id.
        wanted = coerce_request_id(request_id)
        for index, held in enumerate(self.held):
            if coerce_request_id(_id_of(held)) == wanted:
                del self.held[index]
                return True
        return False

    def _make_room(self) -> None:
        """A request may be passed on: wake :meth:`receive` where it waits (for room, or for a line)."""
        if self._room is not None:
            self._room.set()
        if self.held:
            self.lines.wake()
            if self._idle is not None:
                self._idle.set()

    def settle(self, request_id: Any, *, gone: bool = False) -> None:
        """The request ``request_id`` settled, if it is waited for (``gone``: its answer could not be written)."""
        left = self.waiting.get(request_id)
        if left is not None:
            left -= 1
            if left:
                self.waiting[request_id] = left
            else:
                del self.waiting[request_id]
            self.unsettled -= 1
            # A stream settled when no other request of that id is left unsettled (a client reusing a stream's
            # id for another request has the first answer of that id count for the other request).
            streams = self.streams.get(request_id, 0)
            if streams > left:
                _take(self.streams, request_id)
                self.passed_streams -= 1
                if self.acked.get(request_id, 0) >= streams:  # an open one (not one refused before its ack)
                    _take(self.acked, request_id)
                    self.open_streams -= 1
                self._make_room()  # a held stream may pass, or be refused
            elif self.unsettled < self.max_unsettled:
                self._make_room()
        self.gone = self.gone or gone
        if self._idle is not None and (self._settled() or self.gone):
            self._idle.set()

    def acknowledged(self, request_id: Any) -> None:
        """The SDK acknowledged the stream ``request_id``: it is open until the session ends."""
        if request_id not in self.streams:  # the SDK names it as it matches ids: "7" is 7
            wanted = coerce_request_id(request_id)
            request_id = next((known for known in self.streams if coerce_request_id(known) == wanted), request_id)
        if self.acked.get(request_id, 0) < self.streams.get(request_id, 0):
            self.acked[request_id] = self.acked.get(request_id, 0) + 1
            self.open_streams += 1
            self._make_room()  # a held stream may pass, or be refused
            if self._idle is not None:
                self._idle.set()  # it is waited for no longer

    def _settled(self) -> bool:
        """Whether every request passed on has settled but the acknowledged streams (they end with the session)."""
        return self.unsettled == self.open_streams

    def ask(self, request_id: Any) -> None:
        """The server sent the client the request ``request_id``: after the end of stdin it gets ``Connection closed``."""
        self.asked.add(request_id)
        if self._idle is not None:
            self._idle.set()
        self._make_room()  # its answer can only come on stdin: read on

    async def _unanswered(self, request_id: Any) -> None:
        self.settle(request_id)

    def _reader_gone(self) -> None:
        """Stdout's reader is gone (the drain's watch saw it): no answer can be written any more."""
        self.gone = True
        if self._idle is not None:
            self._idle.set()

    async def _draining(self) -> SessionMessage:
        """After the end of stdin: ``Connection closed`` for each request asked of the client, each held request
        as room comes, then the end once every request has settled, the client has stopped reading, or the drain
        timeout has passed (each request still held then answered ``Connection closed``)."""
        assert self.deadline is not None
        try:
            while not self.asked:
                if (self._settled() and not self.held) or self.gone:
                    await self._end_writes()
                    raise anyio.EndOfStream
                left = self.deadline - self.clock.now()
                if left <= 0:
                    self._give_up()
                    await self._end_writes()
                    raise anyio.EndOfStream
                if self.held and not self._must_hold(self.held[0]):
                    passed = await self._pass_on(self.held.popleft(), left)  # a refusal too within the drain
                    if passed is not None:
                        return passed
                    continue
                self._idle = anyio.Event()
                if self._hangup is None and self.out_fd >= 0:
                    self._hangup = _Hangup.start(self.out_fd, self._reader_gone)
                await self._within(left, self._idle.wait)
        except BaseException:  # the drain is over (or cancelled): so is the watch
            if self._hangup is not None:
                self._hangup.stop()
            raise
        return SessionMessage(_closed(self.asked.pop()))

    async def _within(self, seconds: float, work: Callable[[], Any]) -> bool:
        """Whether ``await work()`` ended within ``seconds`` of the clock (else it is cancelled)."""
        if seconds == math.inf:
            await work()
            return True
        done = False
        async with anyio.create_task_group() as group:

            async def expire() -> None:
                await self.clock.asleep(seconds)
                group.cancel_scope.cancel()

            group.start_soon(expire)
            await work()
            done = True
            group.cancel_scope.cancel()
        return done

    def _give_up(self) -> None:
        """Say on stderr how many requests the drain timeout leaves unanswered (the SDK cancels them)."""
        count = self.unsettled - self.open_streams + len(self.held)
        print(
            f"harness-one: {count} request{'s' if count != 1 else ''} still unanswered {self.drain_timeout:g} s after "
            "the end of stdin (the drain timeout): cancelled",
            file=sys.stderr,
            flush=True,
        )

    async def _end_writes(self) -> None:
        """The drain is over: bound the last writes (see :meth:`_write_bound`), then ``Connection closed`` for each
        request still held (the SDK never saw them, and answers them nothing), within that bound."""
        bound = self._write_bound()
        out = self.lines.out
        if out is not None and bound != math.inf:
            out.cut(bound)
        # Past the cut, a flush ends when its reader stalls: one still reading gets them all. With no stdout of
        # this server's (one handed in), the bound is on the answers' sending.
        with anyio.move_on_after(bound if out is None else math.inf):
            await self._close_held()
        self.held.clear()  # those the bound left unanswered: nobody reads them

    def _write_bound(self) -> float:
        """Seconds the last answers may take to be written: none once the client is gone; else what is left of the
        drain timeout, at least :data:`SHUTDOWN_WRITE_TIMEOUT` (inf: no drain timeout, no bound)."""
        if self.gone:
            return 0.0
        assert self.deadline is not None
        if self.deadline == math.inf:
            return math.inf
        return max(self.deadline - self.clock.now(), SHUTDOWN_WRITE_TIMEOUT)

    async def _close_held(self) -> None:
        while self.held and not self.gone:
            await self._answer(_closed(_id_of(self.held[0])))
            self.held.popleft()

    def __aiter__(self) -> Answering:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Hangup:
    """A thread waiting for descriptor ``fd`` to report its reader gone (``POLLERR``/``POLLHUP``: a pipe whose read
    end is closed, a closed socket, a hung-up terminal; ``POLLNVAL``: the descriptor itself closed; as a process
    worker watches its parent: :func:`harness_one._worker.wait_for_hangup`), which then runs ``gone`` on the event loop. The loop cannot poll for that alone: a writable descriptor is ready at
    once. :meth:`stop` ends the thread (a byte on a pipe of its own). Nothing where ``select.poll`` is missing."""

    def __init__(self, fd: int, gone: Callable[[], None], token: Any) -> None:
        self.fd, self.gone, self.token = fd, gone, token
        self.wake_read, self.wake_write = os.pipe()
        self.lock = threading.Lock()
        self.over = False

    @classmethod
    def start(cls, fd: int, gone: Callable[[], None]) -> _Hangup | None:
        if not hasattr(select, "poll"):  # pragma: no cover - Windows
            return None
        watch = cls(fd, gone, anyio.lowlevel.current_token())
        threading.Thread(target=watch._run, name="harness-one-stdout-watch", daemon=True).start()
        return watch

    def stop(self) -> None:
        with self.lock:
            if not self.over:
                os.write(self.wake_write, b"\0")

    def _run(self) -> None:
        from harness_one._worker import wait_for_hangup

        try:
            if not wait_for_hangup(self.fd, self.wake_read):
                return
        finally:
            with self.lock:
                self.over = True
                os.close(self.wake_read)
                os.close(self.wake_write)
        with contextlib.suppress(Exception):  # the loop has ended: nobody is waiting any more
            anyio.from_thread.run_sync(self.gone, token=self.token)


class _Answers(_Wrapping):
    """The write stream the server answers on: a response or an error written settles a request of :class:`Answering`."""

    def __init__(self, inner: Any, owner: Answering) -> None:
        self.inner, self.owner = inner, owner

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if not isinstance(message, (JSONRPCResponse, JSONRPCError)):
            if type(message) is JSONRPCRequest:
                self.owner.ask(message.id)
            elif type(message) is JSONRPCNotification and message.method == _ACKNOWLEDGED:
                meta = message.params.get("_meta") if isinstance(message.params, dict) else None
                if isinstance(meta, dict) and SUBSCRIPTION_ID_META_KEY in meta:
                    self.owner.acknowledged(meta[SUBSCRIPTION_ID_META_KEY])
            await self.inner.send(item)
            return
        gone = True
        try:
            await self.inner.send(item)
            gone = False
        finally:
            self.owner.settle(message.id, gone=gone)


@asynccontextmanager
async def stdio_streams(max_line: int) -> AsyncIterator[tuple[Any, Any]]:
    """``(stdin, stdout)`` for ``stdio_server(stdin, stdout)``: the requests' own stdin and the answers' own stdout."""
    loop = _polling_loop()
    # Only copies of fd 0 and fd 1 are the server's own to poll (not a host's sys.stdin or sys.stdout).
    own_in, own_out = fileno(sys.stdin) == 0, fileno(sys.stdout) == 1
    limit = max(max_line, _MIN_LINE)
    with stdin_for_requests() as source, stdout_for_answers() as out, contextlib.ExitStack() as undo:
        lines: _Lines
        if loop is not None and own_in and _pollable(fileno(source)):
            reader = asyncio.StreamReader(limit=limit, loop=loop)
            await _connect(loop, undo, fileno(source), lambda: asyncio.StreamReaderProtocol(reader, loop=loop), reading=True)
            lines = _Lines(reader, limit)
        else:
            lines = _ThreadLines(source if source is not None else io.BytesIO(), limit)
        stdout: _Out | _ThreadOut
        if loop is not None and own_out and _pollable(fileno(out)):
            transport, protocol = await _connect(
                loop, undo, fileno(out), lambda: asyncio.streams.FlowControlMixin(loop=loop), reading=False
            )
            stdout = _Out(asyncio.StreamWriter(transport, protocol, None, loop), fileno(out))
        else:
            stdout = _ThreadOut(out, shared=not own_out)
        lines.out = stdout  # for Answering to bound the last writes once the drain has ended
        yield lines, stdout


def _polling_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, to poll pipes on (None: another async library, or Windows)."""
    try:
        import sniffio

        if sniffio.current_async_library() == "asyncio" and sys.platform != "win32":
            return asyncio.get_running_loop()
    except Exception:  # pragma: no cover - sniffio comes with anyio
        pass
    return None


async def _connect(
    loop: asyncio.AbstractEventLoop, undo: contextlib.ExitStack, fd: int, protocol: Callable[[], Any], *, reading: bool
) -> Any:
    """The loop's transport and protocol on a copy of ``fd``, for ``reading`` or for writing.

    ``undo`` closes the transport, then gives ``fd`` its blocking mode back: the loop made the open
    file non-blocking, and it is shared (with the shell, for a terminal).
    """
    undo.callback(_set_blocking, fd, os.get_blocking(fd))
    pipe = os.fdopen(os.dup(fd), "rb" if reading else "wb", buffering=0)
    try:
        pair = await (loop.connect_read_pipe if reading else loop.connect_write_pipe)(protocol, pipe)
    except BaseException:
        pipe.close()
        raise
    undo.callback(pair[0].close)
    return pair


def _set_blocking(fd: int, blocking: bool) -> None:
    """``os.set_blocking``, where ``fd`` is still open."""
    with contextlib.suppress(OSError):
        os.set_blocking(fd, blocking)
