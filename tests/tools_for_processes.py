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
