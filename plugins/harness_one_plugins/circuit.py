"""The ``circuit_breaker`` plugin: stop calling a tool that keeps failing, then probe it."""

from __future__ import annotations

import math
import threading
from typing import Any

from harness_one import (
    Call,
    CircuitBreakerPolicy,
    CircuitOpen,
    Clock,
    RetryableError,
    Tool,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    applies_to,
    hookimpl,
)

__all__ = ["Breaker", "CircuitBreakerPlugin"]

_PROBE = "circuit.probe"
_COUNTED = "circuit.counted"


def _guarded(plugin: CircuitBreakerPlugin, tool: Tool) -> bool:
    return (tool.circuit_breaker or plugin.default) is not None


class Breaker:
    """One tool's circuit: closed, open or half-open, with a sliding window of per-second counts."""

    def __init__(self, policy: CircuitBreakerPolicy) -> None:
        self.policy = policy
        self.state = "closed"
        self.opened_at = 0.0
        self.buckets: dict[int, list[int]] = {}  # second -> [calls, failures]
        self.probing = 0
        self.probe_successes = 0
        self.lock = threading.Lock()
        self.opened = 0

    def _trim(self, now: float) -> None:
        oldest = math.floor(now - self.policy.window)
        for second in [s for s in self.buckets if s <= oldest]:
            del self.buckets[second]

    def totals(self, now: float) -> tuple[int, int]:
        self._trim(now)
        calls = sum(b[0] for b in self.buckets.values())
        failures = sum(b[1] for b in self.buckets.values())
        return calls, failures

    def _open(self, now: float) -> None:
        self.state = "open"
        self.opened_at = now
        self.probing = self.probe_successes = 0
        self.buckets.clear()
        self.opened += 1

    def admit(self, now: float) -> tuple[float, bool]:
        """(0, is_probe) to let the call through, or (seconds to wait, False) to refuse."""
        with self.lock:
            if self.state == "open":
                wait = self.opened_at + self.policy.open_for - now
                if wait > 0:
                    return wait, False
                self.state = "half_open"
            if self.state == "half_open":
                if self.probing + self.probe_successes >= self.policy.probes:
                    return min(1.0, self.policy.open_for), False
                self.probing += 1
                return 0.0, True
            return 0.0, False

    def record(self, now: float, failed: bool, probe: bool) -> None:
        with self.lock:
            if probe:
                self.probing -= 1
                if self.state != "half_open":
                    return
                if failed:
                    self._open(now)
                    return
                self.probe_successes += 1
                if self.probe_successes >= self.policy.probes:
                    self.state = "closed"
                    self.buckets.clear()
                return
            if self.state != "closed":
                return
            bucket = self.buckets.setdefault(math.floor(now), [0, 0])
            bucket[0] += 1
            bucket[1] += failed
            calls, failures = self.totals(now)
            if calls >= self.policy.min_calls and failures / calls >= self.policy.failure_ratio:
                self._open(now)

    def snapshot(self, now: float) -> dict[str, Any]:
        with self.lock:
            calls, failures = self.totals(now)
            return {"state": self.state, "calls": calls, "failures": failures, "opened": self.opened}


class CircuitBreakerPlugin:
    """Fails fast with :class:`CircuitOpen` while a tool's circuit is open.

    Counts tool failures (the tool raised, timed out, or raised :class:`RetryableError`)
    against completed calls over a sliding window; refusals and argument errors do not
    count. See :class:`~harness_one.CircuitBreakerPolicy` for the settings and defaults.

    Args:
        default: a policy for tools that declare no ``circuit_breaker`` (None: off for them).
        clock: time source (default: the registry's clock).
    """

    name = "circuit_breaker"
    order = 40

    def __init__(
        self, *, default: CircuitBreakerPolicy | dict[str, Any] | bool | None = None, clock: Clock | None = None
    ) -> None:
        self.default = None if default is None or default is False else CircuitBreakerPolicy.parse(default, tool="*")
        self.clock = clock
        self._breakers: dict[str, Breaker] = {}
        self._lock = threading.Lock()

    def breaker(self, call: Call) -> Breaker:
        policy: CircuitBreakerPolicy = call.tool.circuit_breaker or self.default  # type: ignore[assignment]  # _guarded
        found = self._breakers.get(call.tool.name)
        if found is None or found.policy is not policy:
            with self._lock:
                found = self._breakers[call.tool.name] = Breaker(policy)
        return found

    def _now(self, call: Call) -> float:
        return (self.clock or call.registry.clock).now()

    @hookimpl
    @applies_to(_guarded)
    def harness_pre_call(self, call: Call) -> None:
        wait, probe = self.breaker(call).admit(self._now(call))
        if wait > 0:
            raise CircuitOpen(retry_after=wait, tool=call.tool.name, call_id=call.call_id)
        call.state[_PROBE] = probe
        call.state[_COUNTED] = True

    def _record(self, call: Call, failed: bool) -> None:
        if not call.take(_COUNTED, False):
            return
        self.breaker(call).record(self._now(call), failed, call.take(_PROBE, False))

    @hookimpl
    @applies_to(_guarded)
    def harness_post_call(self, call: Call) -> None:
        self._record(call, failed=False)

    @hookimpl
    @applies_to(_guarded)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        failed = call.ran and isinstance(error, (ToolExecutionError, ToolTimeout, RetryableError))
        if call.ran:
            self._record(call, failed=failed)
        elif call.take(_COUNTED, False) and call.take(_PROBE, False):
            breaker = self.breaker(call)  # a probe refused after admission (e.g. rate limit) gives its place back
            with breaker.lock:
                breaker.probing -= 1

    def state(self, tool: str) -> str:
        """``closed``, ``open`` or ``half_open`` (``closed`` for a tool never seen)."""
        found = self._breakers.get(tool)
        return "closed" if found is None else found.state

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        now = (self.clock or registry.clock).now()
        return {"tools": {name: {"circuit": b.snapshot(now)} for name, b in list(self._breakers.items())}}
