"""Blocking calls seen on a thread, through the interpreter's audit events (``sys.addaudithook``), and, before
Python 3.13 (whose ``time.sleep`` raises one), through ``time.sleep`` replaced while a thread is watched."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, SupportsIndex

__all__ = ["blocking_calls"]

#: Audit events of calls that block the thread that makes them (``time.sleep``: Python 3.11+).
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
#: The threads watched, and what each was seen doing (empty: the hook returns at once).
_WATCHED: dict[int, list[str]] = {}
_LOCK = threading.Lock()
_INSTALLED: list[bool] = []
_SLEEP = time.sleep
#: ``time.sleep`` raises no audit event before Python 3.13: it is replaced while a thread is watched.
_PATCH_SLEEP = sys.version_info < (3, 13)


def _watched_sleep(seconds: float | SupportsIndex) -> None:
    _hook("time.sleep", (seconds,))
    _SLEEP(seconds)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _WATCHED or event not in _BLOCKING:
        return
    seen = _WATCHED.get(threading.get_ident())
    if seen is None:
        return
    if event == "socket.connect" and isinstance(args[0], socket.socket) and args[0].gettimeout() == 0.0:
        return  # a non-blocking socket: what an event loop's own connections use
    shown = args[1:] if event == "socket.connect" else args  # not the socket object
    seen.append(f"{event}({', '.join(map(repr, shown))})"[:120])


@contextmanager
def blocking_calls() -> Iterator[list[str]]:
    """Within the block, list the blocking calls this thread makes (a sleep, a blocking connect or name lookup,
    a process started). The audit hook stays installed (a hook cannot be removed), idle outside such blocks.
    Before Python 3.13 only a sleep through the ``time`` module (``time.sleep(...)``) is seen."""
    seen: list[str] = []
    me = threading.get_ident()
    with _LOCK:
        if not _INSTALLED:
            sys.addaudithook(_hook)
            _INSTALLED.append(True)
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
