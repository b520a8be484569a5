"""What code does, seen through the interpreter's audit events (``sys.addaudithook``): the blocking calls a watched
thread makes (before Python 3.13, whose ``time.sleep`` raises one, a sleep is seen through ``time.sleep`` replaced
while a thread is watched), and the network, refused to every thread of the process while an :func:`offline` block
runs. The import probe of ``_tools`` loads this file by its path in its own interpreter, for :func:`offline`.

Only what raises an audit event is seen: a C extension that calls the C library itself (a database driver's or an
HTTP client's own C code opening its connections) is not.
"""

from __future__ import annotations

import _socket
import sys
import threading
import time
from collections.abc import Iterator
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
#: ``socket`` module's, ``_socket``'s, ``ssl``'s, an event loop's), a datagram or message sent to an address, a socket
#: bound to one, a name or address looked up (``gethostbyname_ex`` and ``getfqdn`` too).
NETWORK = frozenset(
    {
        "socket.connect",
        "socket.sendto",
        "socket.sendmsg",
        "socket.bind",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
    }
)
#: The threads watched, and what each was seen doing (empty: the hook returns at once).
_WATCHED: dict[int, list[str]] = {}
#: What each :func:`offline` block in force saw tried, by the list's id (empty: the network is not refused).
_OFFLINE: dict[int, list[str]] = {}
_LOCK = threading.Lock()
_INSTALLED: list[bool] = []
_SLEEP = time.sleep
#: ``time.sleep`` raises no audit event before Python 3.13: it is replaced while a thread is watched.
_PATCH_SLEEP = sys.version_info < (3, 13)


def _watched_sleep(seconds: float | SupportsIndex) -> None:
    _hook("time.sleep", (seconds,))
    _SLEEP(seconds)


def _shown(event: str, args: tuple[Any, ...]) -> str:
    """The event and its arguments, as a report shows them."""
    if args and isinstance(args[0], _socket.socket):
        args = args[1:]  # not the socket object
    elif event == "socket.getaddrinfo":
        args = args[:2]  # the host and port, not the family, type and protocol
    return f"{event}({', '.join(map(repr, args))})"[:120]


def _refuse(event: str, args: tuple[Any, ...]) -> NoReturn:
    """Note the attempt in every offline block in force, and refuse it where it is made."""
    shown = _shown(event, args)
    for attempts in list(_OFFLINE.values()):
        attempts.append(shown)
    raise OSError(f"network access refused by the harness-one conformance kit: {shown}")


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _OFFLINE and event in NETWORK:
        _refuse(event, args)
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
            if _PATCH_SLEEP and not _WATCHED:
                time.sleep = _SLEEP


@contextmanager
def offline() -> Iterator[list[str]]:
    """Within the block, refuse the network (the :data:`NETWORK` events) to every thread of this process, with an
    ``OSError`` raised where the call is made, and list what was tried."""
    attempts: list[str] = []
    with _LOCK:
        _install()
        _OFFLINE[id(attempts)] = attempts
    try:
        yield attempts
    finally:
        with _LOCK:
            del _OFFLINE[id(attempts)]
