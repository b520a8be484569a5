"""Module-level tool functions, importable by name from a child process (process timeout mode)."""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from harness_one import Call, RetryableError


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


def raise_stubborn_secret() -> None:
    raise Stubborn("cannot connect to postgres://app:", "s3cret@db/x")


def leave_behind() -> int:
    """Start ``sleep 300`` and return its pid without waiting for it."""
    return subprocess.Popen(["sleep", "300"]).pid


class Unsendable(RetryableError):
    """A harness-one error whose state does not pickle (it holds a lock): it crosses as ``to_dict()``."""


def raise_unsendable() -> None:
    err = Unsendable("the backend is warming up", retry_after=2.5)
    err.lock = threading.Lock()  # type: ignore[attr-defined]
    raise err


def fail_once(marker: str) -> str:
    """Fail with a RetryableError the first time (leaving ``marker``), succeed the next."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RetryableError("not yet")
    return "second time"


def fork_and_return() -> str:
    """Fork; both processes return (the child first, then the worker, once the child is gone)."""
    child = os.fork()
    if child == 0:
        return "from the child"
    os.waitpid(child, 0)
    return "from the worker"


class ExitOnLoad:
    """Pickles in the worker; unpickling it calls ``sys.exit(3)``."""

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        return (sys.exit, (3,))


def exit_on_load() -> ExitOnLoad:
    return ExitOnLoad()


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


def raise_bad_str() -> None:
    raise BadStr("x")


def allocate(megabytes: int) -> int:
    """Hold ``megabytes`` of memory for a moment; its size."""
    return len(bytearray(megabytes * 2**20))


def raise_retryable() -> None:
    raise RetryableError("try again soon", retry_after=1.5)


def size(text: str) -> int:
    """The length of ``text`` (given more than a socket's buffer holds, the job waits for room)."""
    return len(text)


# --- helpers for the tests (not tools) ------------------------------------------------------


def state(pid: int) -> str | None:
    """The process state letter of ``pid`` (``Z``: a zombie), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None
    except OSError:  # no /proc (macOS): ask ps
        out = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], check=False, capture_output=True, text=True).stdout
        return out.strip()[:1] or None


def running(pid: int) -> bool:
    """Alive, and not a zombie (a killed grandchild stays one until its new parent reaps it)."""
    return state(pid) not in (None, "Z")


def gone(pid: int, within: float = 5.0) -> bool:
    """Wait up to ``within`` seconds for ``pid`` to stop running; True once it has."""
    deadline = time.monotonic() + within
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def read_pid(path: str, within: float = 30.0) -> int:
    """The pid a tool wrote to ``path`` (waiting up to ``within`` seconds for the file)."""
    deadline = time.monotonic() + within
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} not written in {within} s"
        time.sleep(0.005)
    with open(path) as written:
        return int(written.read())


def processes_now() -> list[tuple[int, int, int, str, str]]:
    """Every process: (pid, parent pid, process group, state, command line), from one ``ps`` run."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,pgid=,stat=,args="], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        pid, ppid, pgid, stat, *args = line.split(None, 4)
        rows.append((int(pid), int(ppid), int(pgid), stat, args[0] if args else ""))
    return rows


def children() -> dict[int, tuple[int, str]]:
    """This process's children but ``ps`` itself: pid -> (process group, state)."""
    return {
        pid: (pgid, stat) for pid, ppid, pgid, stat, args in processes_now() if ppid == os.getpid() and not args.startswith("ps ")
    }


def group_members(pgids: set[int]) -> list[str]:
    """Live processes (not zombies) in any of these process groups."""
    return [f"{pid} {stat} {args}" for pid, _, pgid, stat, args in processes_now() if pgid in pgids and not stat.startswith("Z")]


@contextlib.contextmanager
def no_leftovers(within: float = 5.0) -> Iterator[None]:
    """Around a test: no child process it started is left (no zombie), nothing alive in a worker's group."""
    before = set(children())
    yield
    gc.collect()  # collected runners kill their workers

    def new() -> dict[int, tuple[int, str]]:
        return {pid: seen for pid, seen in children().items() if pid not in before}

    left = new()
    workers = {pid for pid, (pgid, _) in left.items() if pgid == pid}
    deadline = time.monotonic() + within
    while left and time.monotonic() < deadline:  # a worker killed by another thread may still be being reaped
        time.sleep(0.01)
        gc.collect()
        left = new()
    assert left == {}
    assert group_members(workers) == []


def a_call() -> Call:
    """A real ``Call``, as the registry hands it to a runner."""
    from harness_one import ToolRegistry

    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(_grab, name="tool")
    found: Call = reg.call("tool")
    return found


def _grab(call: Call) -> Call:
    return call
