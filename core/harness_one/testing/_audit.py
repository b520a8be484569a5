"""What code does, seen through the interpreter's audit events (``sys.addaudithook``): the blocking calls a watched
thread makes (before Python 3.13, whose ``time.sleep`` raises one, a sleep is seen through ``time.sleep`` replaced
while a thread is watched), and the network, refused to the code an :func:`offline` block runs (its context, the
copies of that context, and the threads that code starts), not to the rest of the process. The import probe of
``_tools`` loads this file by its path in its own interpreter, for :func:`offline`.

Only what raises an audit event is seen: a C extension that calls the C library itself (a database driver's or an
HTTP client's own C code opening its connections) is not.
"""

from __future__ import annotations

import _socket
import _thread
import contextvars
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, SupportsIndex

__all__ = ["NETWORK", "blocking_calls", "offline"]

#: Audit events of calls that block the thread that makes them (``time.sleep``: Python 3.13+).
_BLOCKING = frozenset(
    {
        "time.sleep",
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "subprocess.Popen",
        "os.system",
    }
)
#: Audit events of the network (Python 3.8+): a connection (``connect`` and ``connect_ex``, of any socket: the
#: ``socket`` module's, ``_socket``'s, ``ssl``'s, an event loop's), a datagram or message sent to an address, a name or
#: address looked up (``gethostbyname_ex`` and ``getfqdn`` too). Binding a socket is not among them: it reaches nothing.
NETWORK = frozenset(
    {
        "socket.connect",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
    }
)
#: The network events that name the address reached (``args[1]``): allowed to a socket the block's own code bound.
_ADDRESSED = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})
#: Audit events of a thread started: ``threading`` raises the first from Python 3.13 on, the second in 3.12 (and before
#: through :func:`_offline_start`).
_THREAD_STARTS = frozenset({"_thread.start_joinable_thread", "_thread.start_new_thread"})
#: Every event an :func:`offline` block looks at.
_OFFLINE_EVENTS = NETWORK | _THREAD_STARTS | {"socket.bind"}


class _Offline:
    """An :func:`offline` block: what its code tried, the sockets it bound, the threads it started."""

    __slots__ = ("attempts", "bound", "every_thread", "threads")

    def __init__(self, every_thread: bool) -> None:
        self.every_thread = every_thread
        self.attempts: list[str] = []
        self.bound: list[Any] = []  # held until the block ends: a raw ``_socket.socket`` takes no weak reference
        self.threads: list[threading.Thread] = []


#: The block whose code runs in this context, and in its copies (what ``asyncio.to_thread`` and harness-one's timeout
#: runner run a tool in).
_CURRENT: contextvars.ContextVar[_Offline | None] = contextvars.ContextVar("harness_one_offline", default=None)
#: The :func:`offline` blocks in force (empty: the network is not refused).
_BLOCKS: list[_Offline] = []
#: The threads watched, and what each was seen doing (empty: the hook returns at once).
_WATCHED: dict[int, list[str]] = {}
_LOCK = threading.Lock()
_INSTALLED: list[bool] = []
_SLEEP = time.sleep
#: ``time.sleep`` raises no audit event before Python 3.13: it is replaced while a thread is watched.
_PATCH_SLEEP = sys.version_info < (3, 13)
_START_NEW_THREAD: Callable[..., int] = getattr(threading, "_start_new_thread", _thread.start_new_thread)
#: ``threading`` starts a thread with no audit event before Python 3.12: what it starts threads with is replaced
#: while an :func:`offline` block is in force.
_PATCH_START = sys.version_info < (3, 12)


def _watched_sleep(seconds: float | SupportsIndex) -> None:
    _hook("time.sleep", (seconds,))
    _SLEEP(seconds)


def _offline_start(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> int:
    _hook("_thread.start_new_thread", (function, args, kwargs))
    return _START_NEW_THREAD(function, args) if kwargs is None else _START_NEW_THREAD(function, args, kwargs)


def _shown(event: str, args: tuple[Any, ...]) -> str:
    """The event and its arguments, as a report shows them."""
    if args and isinstance(args[0], _socket.socket):
        args = args[1:]  # not the socket object
    elif event == "socket.getaddrinfo":
        args = args[:2]  # the host and port, not the family, type and protocol
    return f"{event}({', '.join(map(repr, args))})"[:120]


def _block_here() -> _Offline | None:
    """The block in force whose code is running: this context's, else the one whose code started this thread (or that
    refuses every thread)."""
    block = _CURRENT.get()
    if block is not None:
        return block if block in _BLOCKS else None  # a tool still running after its block ended is let be
    me = threading.get_ident()
    for block in tuple(_BLOCKS):
        if block.every_thread or any(t.ident == me and t.is_alive() for t in tuple(block.threads)):
            return block
    return None


def _own(block: _Offline, address: Any) -> bool:
    """Whether ``address`` is none (data on a connection already made) or that of a socket ``block``'s code bound (a
    connection to itself, as CPython's ``socketpair`` made of sockets, on Windows, does)."""
    if address is None:
        return True
    for sock in tuple(block.bound):
        try:
            name = sock.getsockname()
        except OSError:  # closed
            continue
        if name == address or (isinstance(name, tuple) and isinstance(address, tuple) and name[:2] == address[:2]):
            return True
    return False


def _refuse(block: _Offline, event: str, args: tuple[Any, ...]) -> NoReturn:
    """Note the attempt in ``block``, and refuse it where it is made."""
    shown = _shown(event, args)
    block.attempts.append(shown)
    raise OSError(f"network access refused by the harness-one conformance kit: {shown}")


def _offline_event(event: str, args: tuple[Any, ...]) -> None:
    """Refuse the network to the code of a block in force; note the sockets it binds and the threads it starts."""
    block = _block_here()
    if block is None:
        return
    if event == "socket.bind":
        block.bound.append(args[0])
    elif event in _THREAD_STARTS:
        thread = getattr(args[0], "__self__", None)  # ``threading`` starts ``Thread._bootstrap``
        if isinstance(thread, threading.Thread):
            block.threads.append(thread)
    elif not (event in _ADDRESSED and _own(block, args[1])):
        _refuse(block, event, args)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _BLOCKS and event in _OFFLINE_EVENTS:
        _offline_event(event, args)
    if not _WATCHED or event not in _BLOCKING:
        return
    seen = _WATCHED.get(threading.get_ident())
    if seen is None:
        return
    if event == "socket.connect" and isinstance(args[0], _socket.socket) and args[0].gettimeout() == 0.0:
        return  # a non-blocking socket: what an event loop's own connections use
    seen.append(_shown(event, args))


def _install() -> None:
    """Add the audit hook, once per process (a hook cannot be removed: it stays, idle outside the blocks)."""
    if not _INSTALLED:
        sys.addaudithook(_hook)
        _INSTALLED.append(True)


@contextmanager
def blocking_calls() -> Iterator[list[str]]:
    """Within the block, list the blocking calls this thread makes (a sleep, a blocking connect or name lookup,
    a process started). Before Python 3.13 only a sleep through the ``time`` module (``time.sleep(...)``) is seen."""
    seen: list[str] = []
    me = threading.get_ident()
    with _LOCK:
        _install()
        _WATCHED[me] = seen
        if _PATCH_SLEEP:
            time.sleep = _watched_sleep
    try:
        yield seen
    finally:
        with _LOCK:
            _WATCHED.pop(me, None)
            if _PATCH_SLEEP and not _WATCHED and time.sleep is _watched_sleep:  # not a sleep a test patched meanwhile
                time.sleep = _SLEEP


@contextmanager
def offline(*, every_thread: bool = False) -> Iterator[list[str]]:
    """Within the block, refuse the network (the :data:`NETWORK` events) to the code it runs, with an ``OSError``
    raised where the call is made, and list what was tried. That code is this context and its copies (a thread of
    ``asyncio.to_thread`` or of harness-one's timeout runner), and the threads it starts with ``threading``, theirs
    too; with ``every_thread``, every thread of the process. A connection or datagram to a socket that code bound
    itself is let through (it reaches nothing beyond the code)."""
    block = _Offline(every_thread)
    with _LOCK:
        _install()
        _BLOCKS.append(block)
        if _PATCH_START:
            threading._start_new_thread = _offline_start  # type: ignore[attr-defined]
    token = _CURRENT.set(block)
    try:
        yield block.attempts
    finally:
        _CURRENT.reset(token)
        with _LOCK:
            _BLOCKS.remove(block)
            if _PATCH_START and not _BLOCKS:
                threading._start_new_thread = _START_NEW_THREAD  # type: ignore[attr-defined]
        block.bound.clear()
        block.threads.clear()
