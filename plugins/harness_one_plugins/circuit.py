"""The ``circuit_breaker`` plugin: stop calling a tool that keeps failing, then probe it."""

from __future__ import annotations

import threading
from typing import Any

from harness_one import (
    Await,
    Call,
    CircuitBreakerPolicy,
    CircuitOpen,
    Clock,
    Lingering,
    RetryableError,
    Tool,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    applies_to,
    hookimpl,
    log_event,
)
from harness_one.state import (
    AsyncTwins,
    Breaker,
    CircuitStore,
    FailMode,
    MemoryCircuits,
    StateUnavailable,
    round_trip,
)

from ._options import joins, own_or_default, provides, registry_of, takes_state

__all__ = ["Breaker", "CircuitBreakerPlugin"]


_PROBE = "circuit.probe"
_COUNTED = "circuit.counted"


#: What a tool's failure is to the circuit (any other ToolError counts neither way).
_FAILURES = (ToolExecutionError, ToolTimeout, RetryableError)


def _nothing(_: Any) -> None:
    return None


def _failed(outcome: tuple[bool, Any] | None) -> bool | None:
    """Whether a tool that ran on past its caller failed (a :class:`~harness_one.Lingering` outcome):
    None when it counts neither way (a ToolError of its own, or not known: stopped by KeyboardInterrupt
    and the like)."""
    if outcome is None:
        return None
    ok, value = outcome
    if ok:
        return False
    if isinstance(value, ToolError):
        return True if isinstance(value, _FAILURES) else None
    return True if isinstance(value, Exception) else None


def _policy_of(plugin: CircuitBreakerPlugin, tool: Tool) -> CircuitBreakerPolicy | None:
    """The tool's policy, else the plugin's ``default`` unless the tool declined it (``circuit_breaker=False``)."""
    return own_or_default(tool.circuit_breaker, "circuit_breaker" in tool.declined, plugin.default)


def _guarded(plugin: CircuitBreakerPlugin, tool: Tool) -> bool:
    return _policy_of(plugin, tool) is not None


class CircuitBreakerPlugin:
    """Fails fast with :class:`CircuitOpen` while a tool's circuit is open.

    Counts tool failures (the tool raised, timed out, or raised :class:`RetryableError`)
    against completed calls over a sliding window; refusals, argument errors and any other
    ``ToolError`` the tool raises itself count neither way. See
    :class:`~harness_one.CircuitBreakerPolicy` for the settings and defaults.
    A circuit is the tool's own, or the one of its policy's ``key``, shared by every tool
    with that key (each call is judged with its own tool's settings).

    Args:
        default: a policy for tools that declare no ``circuit_breaker`` (None: off for them); a
            tool with ``circuit_breaker=False`` declines it, and is never guarded.
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
        self.clock = provides(clock, "circuit_breaker clock", "a clock", ("now",), optional=True)
        self.fail = FailMode("circuit_breaker", on_state_error)
        store = provides(
            store, "circuit_breaker store", "a circuit store", ("admit", "record", "unprobe", "snapshot"), optional=True
        )
        self.store: CircuitStore = store if store is not None else MemoryCircuits()
        self._own_store = store is not None
        self._policies: dict[str, CircuitBreakerPolicy] = {}
        self._lock = threading.Lock()
        self._twins = AsyncTwins("aadmit")  # whether the store has awaitable twins

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        if self._own_store:
            joins(self, registry)
        elif takes_state(self, registry, "circuits", "store"):
            self.store = registry.state.circuits()

    def _policy(self, call: Call) -> tuple[str, CircuitBreakerPolicy]:
        """The call's circuit: its key (the policy's ``key``, else the tool's name) and policy."""
        policy: CircuitBreakerPolicy = _policy_of(self, call.tool)  # type: ignore[assignment]  # _guarded: not None
        return policy.key or call.tool.name, policy

    def _seen(self, call: Call) -> tuple[str, CircuitBreakerPolicy]:
        """:meth:`_policy`, the tool noted as seen (for :meth:`state` and ``stats()``) as it is admitted;
        the end of a call of a tool removed meanwhile does not note it again."""
        found = self._policy(call)
        if self._policies.get(call.tool.name) is not found[1]:
            with self._lock:
                self._policies[call.tool.name] = found[1]
        return found

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        """A removed (or replaced) tool is no longer seen: its circuit's state stays in the store
        (a replacement, or another registry's tool of that name, goes on with it; an idle one in
        memory is swept, as an idle Redis circuit expires)."""
        with self._lock:
            self._policies.pop(tool.name, None)

    def _now(self, call: Call) -> float:
        return (self.clock or call.registry.clock).now()

    @hookimpl
    @applies_to(_guarded)
    def harness_pre_call(self, call: Call) -> Await | None:
        (name, policy), store, now = self._seen(call), self.store, self._now(call)
        if store is not self._twins.plain:  # not the store known to answer without I/O
            shared = self._twins(store)
            if shared is not None:
                return round_trip(
                    lambda: store.admit(name, policy, now=now),
                    lambda: shared.aadmit(name, policy, now=now),
                    lambda admitted: self._admitted(call, admitted, name),
                    lambda exc: self.fail.handle(exc, name, call.call_id, "circuit not checked"),
                )
        try:
            admitted = store.admit(name, policy, now=now)
        except StateUnavailable as exc:
            self.fail.handle(exc, name, call.call_id, "circuit not checked")
            return None
        self._admitted(call, admitted, name)
        return None

    @staticmethod
    def _admitted(call: Call, admitted: tuple[float, int], name: str) -> None:
        wait, probe = admitted
        if wait > 0:
            raise CircuitOpen(retry_after=wait, tool=call.tool.name, call_id=call.call_id, circuit=name)
        call.state[_PROBE] = int(probe)  # the half-open period it probes (0: none)
        call.state[_COUNTED] = True

    def _record(self, call: Call, failed: bool) -> Await | None:
        if not call.take(_COUNTED, False):
            return None
        return self._count(call, failed, call.take(_PROBE, 0))

    def _count(self, call: Call, failed: bool, probe: int) -> Await | None:
        """Count the call's outcome in its circuit (``probe``: the half-open period it probes, 0: none)."""
        (name, policy), store, now = self._policy(call), self.store, self._now(call)
        if store is not self._twins.plain:  # not the store known to answer without I/O
            shared = self._twins(store)
            if shared is not None:
                return round_trip(
                    lambda: store.record(name, policy, now=now, failed=failed, probe=probe),
                    lambda: shared.arecord(name, policy, now=now, failed=failed, probe=probe),
                    _nothing,
                    lambda exc: self.fail.note(exc, name, "call not counted"),
                )
        try:
            store.record(name, policy, now=now, failed=failed, probe=probe)
        except StateUnavailable as exc:
            self.fail.note(exc, name, "call not counted")
        return None

    @hookimpl
    @applies_to(_guarded)
    def harness_post_call(self, call: Call) -> Await | None:
        return self._record(call, failed=False)

    @hookimpl
    @applies_to(_guarded)
    def harness_on_error(self, call: Call, error: BaseException) -> Await | None:
        if call.ran and isinstance(error, _FAILURES):
            return self._record(call, failed=True)
        probe: int = call.take(_PROBE, 0)
        if not (call.take(_COUNTED, False) and probe):
            return None
        (name, policy), store = self._policy(call), self.store
        lingering = call.lingering
        if lingering is not None:
            # Its tool runs on in a thread (a cancelled acall): the probe keeps its place until
            # the tool returns, so a half-open circuit never lets more tools run than ``probes``.
            if lingering.later(lambda: self._probed_late(call, name, policy, probe, lingering)):
                return None
            # its tool returned already: settled here (through the store's awaitable twin under acall)
            failed = _failed(lingering.outcome)
            if failed is not None:
                return self._count(call, failed, probe)
        # a probe refused after admission (e.g. by the rate limit), cancelled before its tool
        # started, whose arguments the tool refused, or whose tool answered with another
        # ToolError of its own (a domain answer such as "no such user": neither the backend
        # failing nor proof that it works), also after its caller stopped waiting, counts
        # neither way: it gives its place back
        if store is not self._twins.plain:  # not the store known to answer without I/O
            shared = self._twins(store)
            if shared is not None:
                return round_trip(
                    lambda: store.unprobe(name, policy, probe=probe),
                    lambda: shared.aunprobe(name, policy, probe=probe),
                    _nothing,
                    lambda exc: self.fail.note(exc, name, "probe not given back"),
                )
        try:
            store.unprobe(name, policy, probe=probe)
        except StateUnavailable as exc:
            self.fail.note(exc, name, "probe not given back")
        return None

    def _probed_late(self, call: Call, name: str, policy: CircuitBreakerPolicy, probe: int, lingering: Lingering) -> None:
        """A probe whose tool ran on after its caller stopped waiting, settled from the tool's thread as
        it returns: what the tool did closes or reopens the circuit; an outcome that counts neither way
        (a ToolError of its own, not known) gives the probe's place back."""
        failed = _failed(lingering.outcome)
        try:
            if failed is None:
                self.store.unprobe(name, policy, probe=probe)
            else:
                self.store.record(name, policy, now=self._now(call), failed=failed, probe=probe)
        except StateUnavailable as exc:
            self.fail.note(exc, name, "probe not counted")

    def state(self, tool: str) -> str:
        """The circuit of ``tool`` (its own, or its ``key``'s): ``closed``, ``open`` or ``half_open``
        (``closed`` for a tool without a circuit)."""
        registry = registry_of(self)
        policy = self._policies.get(tool)
        if policy is None and registry is not None and tool in registry:
            policy = _policy_of(self, registry.get(tool))
        if policy is None:
            return "closed"
        clock = self.clock or (registry.clock if registry is not None else None)
        now = 0.0 if clock is None else clock.now()
        return str(self.store.snapshot(policy.key or tool, policy, now=now)["state"])

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        """Per tool seen, ``{"circuit": {state, calls, failures, opened}}``; a shared circuit adds its ``key``.
        A circuit that cannot be read (Redis down, its key of another type) is left out, the others shown."""
        now = (self.clock or registry.clock).now()
        tools: dict[str, Any] = {}
        shared: dict[str, dict[str, Any] | None] = {}  # one read per shared circuit (None: it could not be read)
        for name, policy in list(self._policies.items()):
            try:
                if policy.key is None:
                    tools[name] = {"circuit": self.store.snapshot(name, policy, now=now)}
                    continue
                if policy.key not in shared:
                    shared[policy.key] = None
                    shared[policy.key] = {**self.store.snapshot(policy.key, policy, now=now), "key": policy.key}
                found = shared[policy.key]
                if found is not None:
                    tools[name] = {"circuit": dict(found)}
            except StateUnavailable:
                continue
            except Exception as exc:  # not readable (a key of another type: WRONGTYPE): left out, as when Redis is down
                log_event(30, "circuit_breaker: circuit not read for stats", tool=name, error=f"{type(exc).__name__}: {exc}")
        return {"tools": tools, **self.fail.stats()}
