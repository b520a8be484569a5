"""The ``circuit_breaker`` plugin: stop calling a tool that keeps failing, then probe it."""

from __future__ import annotations

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
from harness_one.state import Breaker, CircuitStore, FailMode, MemoryCircuits, StateUnavailable

__all__ = ["Breaker", "CircuitBreakerPlugin"]

_PROBE = "circuit.probe"
_COUNTED = "circuit.counted"


def _guarded(plugin: CircuitBreakerPlugin, tool: Tool) -> bool:
    return (tool.circuit_breaker or plugin.default) is not None


class CircuitBreakerPlugin:
    """Fails fast with :class:`CircuitOpen` while a tool's circuit is open.

    Counts tool failures (the tool raised, timed out, or raised :class:`RetryableError`)
    against completed calls over a sliding window; refusals and argument errors do not
    count. See :class:`~harness_one.CircuitBreakerPolicy` for the settings and defaults.

    Args:
        default: a policy for tools that declare no ``circuit_breaker`` (None: off for them).
        clock: time source (default: the registry's clock; a Redis store uses Redis's clock).
        store: where circuit states live (default: the registry's state, so with Redis one
            process's failures open the circuit for all).
        on_state_error: when a shared store (Redis) does not answer: ``"open"`` (default:
            the call goes ahead uncounted, with a warning and a count in ``stats()``) or
            ``"closed"`` (it fails with :class:`~harness_one.state.StateUnavailable`).
    """

    name = "circuit_breaker"
    order = 40

    def __init__(
        self,
        *,
        default: CircuitBreakerPolicy | dict[str, Any] | bool | None = None,
        clock: Clock | None = None,
        store: CircuitStore | None = None,
        on_state_error: str = "open",
    ) -> None:
        self.default = None if default is None or default is False else CircuitBreakerPolicy.parse(default, tool="*")
        self.clock = clock
        self.fail = FailMode("circuit_breaker", on_state_error)
        self.store: CircuitStore = store if store is not None else MemoryCircuits()
        self._own_store = store is not None
        self._policies: dict[str, CircuitBreakerPolicy] = {}
        self._lock = threading.Lock()
        self._registry_clock: Clock | None = None

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        self._registry_clock = registry.clock
        if not self._own_store:
            self.store = registry.state.circuits()

    def _policy(self, call: Call) -> CircuitBreakerPolicy:
        policy: CircuitBreakerPolicy = call.tool.circuit_breaker or self.default  # type: ignore[assignment]  # _guarded
        if self._policies.get(call.tool.name) is not policy:
            with self._lock:
                self._policies[call.tool.name] = policy
        return policy

    def _now(self, call: Call) -> float:
        return (self.clock or call.registry.clock).now()

    @hookimpl
    @applies_to(_guarded)
    def harness_pre_call(self, call: Call) -> None:
        name = call.tool.name
        try:
            wait, probe = self.store.admit(name, self._policy(call), now=self._now(call))
        except StateUnavailable as exc:
            self.fail.handle(exc, name, call.call_id, "circuit not checked")
            return
        if wait > 0:
            raise CircuitOpen(retry_after=wait, tool=name, call_id=call.call_id)
        call.state[_PROBE] = probe
        call.state[_COUNTED] = True

    def _record(self, call: Call, failed: bool) -> None:
        if not call.take(_COUNTED, False):
            return
        probe = call.take(_PROBE, False)
        try:
            self.store.record(call.tool.name, self._policy(call), now=self._now(call), failed=failed, probe=probe)
        except StateUnavailable as exc:
            self.fail.note(exc, call.tool.name, "call not counted")

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
            try:  # a probe refused after admission (e.g. rate limit) gives its place back
                self.store.unprobe(call.tool.name, self._policy(call))
            except StateUnavailable as exc:
                self.fail.note(exc, call.tool.name, "probe not given back")

    def state(self, tool: str) -> str:
        """``closed``, ``open`` or ``half_open`` (``closed`` for a tool never seen)."""
        policy = self._policies.get(tool)
        if policy is None:
            return "closed"
        clock = self.clock or self._registry_clock
        now = 0.0 if clock is None else clock.now()
        return str(self.store.snapshot(tool, policy, now=now)["state"])

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        now = (self.clock or registry.clock).now()
        tools: dict[str, Any] = {}
        for name, policy in list(self._policies.items()):
            try:
                tools[name] = {"circuit": self.store.snapshot(name, policy, now=now)}
            except StateUnavailable:
                continue
        return {"tools": tools, **self.fail.stats()}
