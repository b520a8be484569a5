"""The ``metrics`` plugin: per-tool counts, errors by type and latency percentiles."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from harness_one import Call, RateLimitExceeded, Retry, Tool, ToolRegistry, hookimpl, per_tool

__all__ = ["MetricsPlugin", "ToolMetrics"]

_perf = time.perf_counter


class ToolMetrics:
    """Counters for one tool; latencies kept in a ring of the last ``window`` calls.

    Successes are counted without a lock: ``next()`` on an ``itertools.count`` and
    ``deque.append`` are each atomic, and a reading takes one value from the counter too
    (``_read`` subtracts those). Errors, rarer, are counted under the plugin's lock.
    """

    __slots__ = ("_ok", "_read", "errors", "failed", "latencies", "rate_limited", "retries")

    def __init__(self, window: int) -> None:
        self._ok = itertools.count()
        self._read = 0
        self.failed = 0
        self.errors: dict[str, int] = {}
        self.rate_limited = 0
        self.retries = 0
        self.latencies: deque[float] = deque(maxlen=window)

    @property
    def successes(self) -> int:
        count = next(self._ok) - self._read
        self._read += 1
        return count

    @property
    def calls(self) -> int:
        return self.successes + self.failed

    def snapshot(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        successes = self.successes
        return {
            "finished": successes + self.failed,
            "successes": successes,
            "errors": dict(self.errors),
            "rate_limited": self.rate_limited,
            "retries": self.retries,
            "latency_ms": {f"p{q}": round(_quantile(ordered, q / 100) * 1000, 3) for q in (50, 95, 99)},
        }


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted list (0.0 when empty)."""
    if not ordered:
        return 0.0
    rank = max(1, -(-int(q * len(ordered) * 1000) // 1000))
    return ordered[min(rank, len(ordered)) - 1]


class MetricsPlugin:
    """Counts every finished call per tool. ``registry.stats()`` shows the numbers.

    Args:
        window: how many recent latencies each tool keeps for its percentiles (bounded memory).
    """

    name = "metrics"
    order = 90

    def __init__(self, *, window: int = 2048) -> None:
        self.window = window
        self._tools: dict[str, ToolMetrics] = {}
        self._lock = threading.Lock()

    def _for(self, name: str) -> ToolMetrics:
        found = self._tools.get(name)
        if found is None:
            found = self._tools.setdefault(name, ToolMetrics(self.window))
        return found

    @hookimpl(trylast=True)
    @per_tool(lambda plugin, tool: plugin._post_call_for(tool))
    def harness_post_call(self, call: Call) -> None:
        self._post_call_for(call.tool)(call)

    def _post_call_for(self, tool: Tool) -> Callable[[Call], None]:
        """The success count of ``tool``'s calls, bound once per tool to its counters."""
        m = self._for(tool.name)
        succeeded, latencies = m._ok, m.latencies

        def post_call(call: Call) -> None:
            next(succeeded)
            latencies.append(_perf() - call.started)

        return post_call

    @hookimpl(trylast=True)
    @per_tool(lambda plugin, tool: plugin._on_error_for(tool))
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self._on_error_for(call.tool)(call, error)

    def _on_error_for(self, tool: Tool) -> Callable[[Call, BaseException], None]:
        """The failure count of ``tool``'s calls, bound once per tool to its counters."""
        m = self._for(tool.name)
        lock, errors, latencies = self._lock, m.errors, m.latencies

        def on_error(call: Call, error: BaseException) -> None:
            kind = type(error).__name__
            lock.acquire()
            try:
                if type(call.decision) is Retry:
                    m.retries += 1
                    return
                m.failed += 1
                errors[kind] = errors.get(kind, 0) + 1
                if isinstance(error, RateLimitExceeded):
                    m.rate_limited += 1
            finally:
                lock.release()
            latencies.append(_perf() - call.started)

        return on_error

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {name: m.snapshot() for name, m in list(self._tools.items())}

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"tools": self.snapshot()}
