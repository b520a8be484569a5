"""A tool that stops at a gate, and a cancelled ``acall`` of it: for tests of what a call holds
while its tool runs on in a thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from harness_one import ToolRegistry


class Gated:
    """A sync tool that counts its runs, sets ``entered``, then waits (10 s at most) for ``gate``."""

    def __init__(self, result: str = "done") -> None:
        self.entered, self.gate = threading.Event(), threading.Event()
        self.runs: list[int] = []
        self.result = result

    def __call__(self) -> str:
        self.runs.append(1)
        self.entered.set()
        self.gate.wait(10)
        return self.result


async def cancel_once_entered(reg: ToolRegistry, name: str, entered: threading.Event, **options: Any) -> None:
    """Start ``acall(name, **options)`` as a task and cancel it once the tool has started."""
    task = asyncio.ensure_future(reg.acall(name, **options))
    while not entered.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
