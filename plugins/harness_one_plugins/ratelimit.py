"""The ``rate_limit`` plugin: a token bucket per tool (and optionally per caller)."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any, Protocol, runtime_checkable

from harness_one import Call, Clock, Outcome, RateLimit, RateLimitExceeded, Retry, Tool, ToolRegistry, applies_to, hookimpl

__all__ = ["InMemoryBuckets", "RateLimitBackend", "RateLimitPlugin"]


@runtime_checkable
class RateLimitBackend(Protocol):
    """Where bucket state lives. One method, so a shared (e.g. Redis) backend is a drop-in.

    ``acquire`` takes ``cost`` tokens from the bucket ``key`` (rate tokens/s, ``burst``
    capacity, full when new) at time ``now`` and answers 0.0 when allowed, or the seconds
    until the tokens will be there. A refused call takes nothing.
    """

    def acquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float: ...


class InMemoryBuckets:
    """Token buckets in a dict, thread-safe. Idle buckets (full again) are evicted.

    A bucket untouched for ``burst / rate`` seconds is full, which is what a missing bucket
    means, so dropping it changes nothing; a sweep every ``sweep_every`` acquisitions does
    that, and ``max_keys`` caps memory even under a flood of distinct keys.
    """

    def __init__(self, *, max_keys: int = 100_000, sweep_every: int = 4096) -> None:
        self._buckets: dict[Hashable, list[float]] = {}
        self._lock = threading.Lock()
        self._max_keys = max_keys
        self._sweep_every = sweep_every
        self._ops = 0

    def acquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float:
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                self._ops += 1
                if self._ops >= self._sweep_every or len(self._buckets) >= self._max_keys:
                    self._sweep(now)
                bucket = self._buckets[key] = [burst, now, burst / rate]
            else:
                elapsed = now - bucket[1]
                if elapsed > 0:
                    tokens = bucket[0] + elapsed * rate
                    bucket[0] = burst if tokens > burst else tokens
                    bucket[1] = now
            if bucket[0] >= cost:
                bucket[0] -= cost
                return 0.0
            return (cost - bucket[0]) / rate

    def _sweep(self, now: float) -> None:
        self._ops = 0
        idle = [k for k, (_, last, full_after) in self._buckets.items() if now - last >= full_after]
        for key in idle:
            del self._buckets[key]
        while len(self._buckets) >= self._max_keys:  # still full of busy keys: drop the oldest
            del self._buckets[next(iter(self._buckets))]

    def __len__(self) -> int:
        return len(self._buckets)


class RateLimitPlugin:
    """Refuses (or delays) calls beyond each tool's ``rate_limit``.

    Args:
        default: a limit for tools that declare none (``{"rate": .., "burst": ..}`` or RateLimit).
        max_wait: default seconds to wait for a token before refusing (0: refuse at once,
            the seed's behaviour). A tool's own ``rate_limit["max_wait"]`` wins.
        backend: where buckets live (default: in memory, per registry).
        clock: time source (default: the registry's clock).
    """

    name = "rate_limit"
    order = 10

    def __init__(
        self,
        *,
        default: RateLimit | dict[str, Any] | None = None,
        max_wait: float = 0.0,
        backend: RateLimitBackend | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.default = None if default is None else RateLimit.parse(default, tool="*")
        self.max_wait = max_wait
        self.backend: RateLimitBackend = backend if backend is not None else InMemoryBuckets()
        self.clock = clock
        self.refused = 0

    def limit_for(self, tool: Tool) -> RateLimit | None:
        return tool.rate_limit or self.default

    @hookimpl
    @applies_to(lambda self, tool: (tool.rate_limit or self.default) is not None)
    def harness_pre_call(self, call: Call) -> Outcome | None:
        tool = call.tool
        limit = tool.rate_limit or self.default
        if limit is None:
            return None
        key: Any = limit.key
        if key is None:
            bucket: Hashable = tool.name
        elif callable(key):
            bucket = (tool.name, key(call))
        else:
            bucket = (tool.name, call.context.get(key))
        now = (self.clock or call.registry.clock).now()
        wait = self.backend.acquire(bucket, rate=limit.rate, burst=limit.burst, cost=limit.cost, now=now)
        if wait > 0.0:
            self.refused += 1
            raise RateLimitExceeded(retry_after=wait, tool=tool.name, call_id=call.call_id)
        return None

    @hookimpl(tryfirst=True)
    @applies_to(lambda self, tool: (tool.rate_limit or self.default) is not None)
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        """Wait out a refusal when the tool or plugin allows waiting and the budget lasts."""
        if type(error) is not RateLimitExceeded:
            return None
        limit = call.tool.rate_limit or self.default
        budget = limit.max_wait if limit is not None and limit.max_wait is not None else self.max_wait
        if budget <= 0:
            return None
        wait = error.retry_after or 0.0
        waited = call.state.get("rate_limit.waited", 0.0)
        if waited + wait > budget:
            return None
        call.state["rate_limit.waited"] = waited + wait
        return Retry(delay=wait)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"refused": self.refused}
