"""Forked children for the tests of what a process forked from a running one (a pre-fork
server's worker) must not share with its parent. A child that fails or hangs fails the test,
and never outlives it."""

from __future__ import annotations

import os
import select
import signal
import time
import traceback
from collections.abc import Callable

import pytest

__all__ = ["Child", "in_child"]


class Child:
    """``work(say)`` running in a forked child; ``say(bytes)`` sends bytes to the parent."""

    def __init__(self, work: Callable[[Callable[[bytes], None]], None], timeout: float = 20.0) -> None:
        self.deadline = time.monotonic() + timeout
        self._said, say = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into the test
            code = 1
            try:
                os.close(self._said)
                work(lambda data: _write_all(say, data))
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(say)
        self.killed = False

    def read(self, size: int) -> bytes:
        """The next ``size`` bytes the child says (fewer once it ends), before the deadline."""
        out = b""
        while len(out) < size:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self._said], [], [], left)[0]:
                self._kill()
                pytest.fail("the forked child hung")
            chunk = os.read(self._said, size - len(out))
            if not chunk:
                break
            out += chunk
        return out

    def join(self) -> None:
        """Wait for the child to end, and fail the test unless it ended well."""
        if self.killed:  # (the test has failed already)
            return
        try:
            while (done := os.waitpid(self.pid, os.WNOHANG))[0] == 0:
                if time.monotonic() > self.deadline:
                    self._kill()
                    pytest.fail("the forked child hung")
                time.sleep(0.01)
        finally:
            os.close(self._said)
        assert os.waitstatus_to_exitcode(done[1]) == 0, "the forked child failed (its traceback is on stderr)"

    def _kill(self) -> None:
        self.killed = True
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self._said)


def in_child(work: Callable[[], bytes], timeout: float = 20.0) -> bytes:
    """What ``work()`` returns in a forked child (up to 64 KiB)."""
    child = Child(lambda say: say(work()), timeout)
    out = child.read(1 << 16)
    child.join()
    return out


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]
