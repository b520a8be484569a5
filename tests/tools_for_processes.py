"""Module-level tool functions, importable by name from a child process (process timeout mode)."""

from __future__ import annotations

import os
import time


def sleepy(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def pid() -> int:
    return os.getpid()


def explode() -> None:
    raise ValueError("bad input in child")


def unpicklable_result() -> object:
    return lambda: None


# --- for tests/test_runners.py: process groups, worker death, warm workers --------------

calls = 0


def count() -> int:
    """How many calls this process has run (warm workers keep module state between calls)."""
    global calls
    calls += 1
    return calls


def hang_with_grandchild(pidfile: str, new_session: bool = False) -> None:
    """Start ``sleep 300`` (in its own session if ``new_session``), write its pid, then hang."""
    import subprocess

    child = subprocess.Popen(["sleep", "300"], start_new_session=new_session)
    with open(pidfile + ".tmp", "w") as out:
        out.write(str(child.pid))
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(300)


def wait_for_file(path: str) -> str:
    """Return once ``path`` exists (the test creates it to let the call finish)."""
    while not os.path.exists(path):
        time.sleep(0.005)
    return "released"


def exit_now(code: int) -> None:
    os._exit(code)


def segfault() -> None:
    import ctypes

    ctypes.string_at(0)


def system_exit() -> None:
    raise SystemExit(2)


class Stubborn(Exception):
    """An exception that pickles but does not unpickle (its __init__ takes two arguments)."""

    def __init__(self, a: str, b: str) -> None:
        super().__init__(a + b)


def raise_stubborn() -> None:
    raise Stubborn("x", "y")


def leave_behind() -> int:
    """Start ``sleep 300`` and return its pid without waiting for it."""
    import subprocess

    return subprocess.Popen(["sleep", "300"]).pid
