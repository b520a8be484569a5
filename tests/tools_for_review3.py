"""Module-level tools for tests/test_runners_review3.py, importable by name from a worker process."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from harness_one import ToolError


class ReduceExit:
    """A result whose pickling raises ``SystemExit``."""

    def __reduce__(self) -> Any:
        raise SystemExit(3)


def return_reduce_exit() -> object:
    return ReduceExit()


class BadArgs(Exception):
    """An exception whose ``args`` raises."""

    @property  # type: ignore[override]
    def args(self) -> Any:
        raise RuntimeError("args boom")

    @args.setter
    def args(self, value: Any) -> None:
        pass


def raise_bad_args() -> None:
    raise BadArgs("x")


class StrInterrupts(Exception):
    """An exception whose ``__str__`` raises ``KeyboardInterrupt`` (no signal was sent)."""

    def __str__(self) -> str:
        raise KeyboardInterrupt


def raise_str_interrupts() -> None:
    raise StrInterrupts


class StrExits(Exception):
    """An exception whose ``__str__`` raises ``SystemExit``."""

    def __str__(self) -> str:
        raise SystemExit(9)


def raise_str_exits() -> None:
    raise StrExits


class Undescribable(ToolError):
    """A harness-one error that neither pickles nor describes itself in a form that pickles."""

    def __init__(self) -> None:
        super().__init__("undescribable")
        self.hook = lambda: None

    def to_dict(self) -> dict[str, Any]:
        return {"type": "ToolError", "kind": "tool_failed", "message": "m", "hook": lambda: None}


def raise_undescribable() -> None:
    raise Undescribable


def raise_stop_iteration() -> None:
    raise StopIteration("done")


def pid() -> int:
    return os.getpid()


def spawn_and_hang(pidfile: str) -> None:
    """Start three ``sleep 300`` (one in a process group of its own), write their pids, then hang."""
    kids = [subprocess.Popen(["sleep", "300"]) for _ in range(2)]
    kids.append(subprocess.Popen(["sleep", "300"], preexec_fn=os.setpgrp))  # noqa: PLW1509 - a group of its own
    with open(pidfile + ".tmp", "w") as out:
        out.write(" ".join(str(kid.pid) for kid in kids))
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(300)
