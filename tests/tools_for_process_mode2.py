"""Tools for tests/test_process_mode2.py, importable by name from a process-mode worker."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from harness_one import defineTool


@defineTool(registry=None, timeout=30, timeout_mode="process")
def where() -> int:
    """Which process runs me."""
    return os.getpid()


def pid() -> int:
    return os.getpid()


def exit_now() -> None:
    os._exit(3)


def allocate(megabytes: int) -> int:
    return len(bytearray(megabytes * 2**20))


class UpstreamBusy(ConnectionError):
    """A library-style exception whose ``__init__`` takes a required keyword-only argument:
    it pickles, but ``pickle.loads`` cannot call it back."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class Unsendable(Exception):
    """Neither pickles back nor rebuilds: its ``__init__`` takes two arguments, its state holds a lock."""

    def __init__(self, a: str, b: str) -> None:
        super().__init__(a + b)
        self.lock = threading.Lock()


def fail_once(marker: str) -> str:
    """Raise :class:`UpstreamBusy` the first time (``marker`` not there yet), then succeed."""
    path = Path(marker)
    if not path.exists():
        path.touch()
        raise UpstreamBusy("upstream said 503", status=503)
    return "second time"


def fail_once_httpx(marker: str) -> str:
    """As :func:`fail_once`, with ``httpx.HTTPStatusError`` (required keyword-only ``request`` and ``response``)."""
    import httpx

    path = Path(marker)
    if not path.exists():
        path.touch()
        request = httpx.Request("GET", "https://example.com")
        raise httpx.HTTPStatusError("503", request=request, response=httpx.Response(503, request=request))
    return "second time"


def raise_unsendable_secret() -> None:
    raise Unsendable("cannot connect to postgres://app:", "s3cret@db/x")


def wait_for(path: str) -> str:
    while not os.path.exists(path):
        time.sleep(0.005)
    return "released"
