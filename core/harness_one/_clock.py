"""Time as an injectable dependency: a system clock, and a manual clock for exact tests."""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock", "WallClock"]


@runtime_checkable
class Clock(Protocol):
    """Monotonic seconds plus the two ways to wait. Everything time-dependent takes one."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    async def asleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: ``time.monotonic``, ``time.sleep``, ``asyncio.sleep``."""

    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        import asyncio  # imported on first use: most programs never wait asynchronously

        await asyncio.sleep(max(seconds, 0))

    def __repr__(self) -> str:
        return "SystemClock()"


class WallClock:
    """Wall-clock time (``time.time``): records outlive processes, so their expiry uses real time."""

    __slots__ = ()

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))

    async def asleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(max(seconds, 0.0))

    def __repr__(self) -> str:
        return "WallClock()"


class ManualClock:
    """A clock that moves only when told: ``advance(s)``, or by the sleeps it is asked for.

    Sleeping advances the clock at once instead of waiting, so code under test runs at full
    speed while seeing exactly the time it asked for. ``sleeps`` records every wait.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self._now += max(seconds, 0.0)

    async def asleep(self, seconds: float) -> None:
        import asyncio

        self.sleep(seconds)
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now})"


SYSTEM_CLOCK = SystemClock()
