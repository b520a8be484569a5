"""The ``concurrency`` plugin (bulkhead): a cap on calls running at once, per tool and overall."""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from harness_one import Await, Call, Clock, Retry, Tool, ToolBusy, ToolRegistry, applies_to, hookimpl, log_event
from harness_one.state import (
    AsyncTwins,
    ConcurrencySlots,
    FailMode,
    LeaseKeeper,
    MemorySlots,
    StateUnavailable,
    round_trip,
)

from ._options import count, provides, seconds, takes_state

__all__ = ["ConcurrencyPlugin"]

_HELD = "concurrency.held"
_WAITED = "concurrency.waited"
_SINCE = "concurrency.since"
#: Set while this plugin's own refusal goes through ``on_error`` (which decides, first, how long it waits).
_REFUSED = "concurrency.refused"


_PLUGINS: weakref.WeakSet[ConcurrencyPlugin] = weakref.WeakSet()


def _forked() -> None:
    """A forked child draws new holder ids (one shared with its parent would count as one slot in Redis)
    and a new lock (another thread of the parent may have held the old one, for ever now)."""
    for plugin in list(_PLUGINS):
        plugin._holder = os.urandom(6).hex()
        plugin._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forked)


def _capped(plugin: ConcurrencyPlugin, tool: Tool) -> bool:
    return (tool.max_concurrency or plugin.default or plugin.total) is not None


class ConcurrencyPlugin:
    """At most ``max_concurrency`` calls of a tool run at once (and at most ``total`` overall).

    A call beyond the cap waits up to ``max_wait`` seconds for a slot, polling every
    ``poll`` seconds (sleeping in async callers, blocking in sync ones), then fails with
    :class:`ToolBusy`. The wait is timed on the plugin's clock from the call's first refusal:
    sleeps that overrun (a busy event loop, busy threads) mean fewer polls, not a longer wait.
    ``max_wait`` bounds the wait also under a retry policy: this plugin's ``on_error`` runs
    first (``tryfirst``) and decides its own refusal: a wait for a slot, or, once ``max_wait``
    is spent, the ``ToolBusy`` stands without a ``retry_after``, which a retry policy does not
    wait out. A slot is held from admission
    until the attempt ends. Waiters are not served in arrival order. With shared state (Redis) the caps hold across every process,
    and a slot is a lease of ``lease`` seconds, renewed while the call runs, so the slots of
    a killed process free themselves.

    Args:
        default: a per-tool cap for tools that declare no ``max_concurrency`` (None: no cap).
        total: a cap across all tools (None: no cap): of the registries sharing the state in memory or
            SQLite; with Redis, of every process and registry on its database and prefix.
        max_wait: seconds to wait for a slot (0: fail at once).
        poll: seconds between checks while waiting.
        slots: where slots live (default: the registry's state).
        lease: seconds a slot outlives a process that stopped renewing it (renewed every ``lease / 3``).
        on_state_error: when shared slots (Redis) do not answer: ``"closed"`` (default: the
            call fails with :class:`~harness_one.state.StateUnavailable`) or ``"open"`` (it runs
            uncapped, with a warning and a count in ``stats()``).
    """

    name = "concurrency"
    order = 50

    def __init__(
        self,
        *,
        default: int | None = None,
        total: int | None = None,
        max_wait: float = 0.0,
        poll: float = 0.01,
        clock: Clock | None = None,
        slots: ConcurrencySlots | None = None,
        lease: float = 30.0,
        on_state_error: str = "closed",
    ) -> None:
        self.default = count(default, "concurrency default", optional=True)
        self.total = count(total, "concurrency total", optional=True)
        self.max_wait = seconds(max_wait, "concurrency max_wait", zero=True)
        self.poll = seconds(poll, "concurrency poll", minimum=0.001)
        self.clock = provides(clock, "concurrency clock", "a clock", ("now",), optional=True)
        self.lease = seconds(lease, "concurrency lease", minimum=0.001)
        self.fail = FailMode("concurrency", on_state_error)
        slots = provides(slots, "concurrency slots", "a slot store", ("acquire", "renew", "release", "running"), optional=True)
        self.slots: ConcurrencySlots = slots if slots is not None else MemorySlots()
        self._own_slots = slots is not None
        self._holder = os.urandom(6).hex()  # holder ids unique across plugins, processes and hosts
        _PLUGINS.add(self)  # (a forked child draws its own, and a new lock)
        self._ids = itertools.count(1)
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self._leases = LeaseKeeper("concurrency", lambda: self.lease / 3, self._renew, retake=self._retake)
        self._registry_clock: Clock | None = None
        self._twins = AsyncTwins("aacquire")  # whether the store has awaitable twins
        self.refused = 0

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        if not self._own_slots and takes_state(self, registry, "slots", "slots"):
            self.slots = registry.state.concurrency()
        self._registry_clock = registry.clock

    def _now(self) -> float:
        clock = self.clock or self._registry_clock
        return 0.0 if clock is None else clock.now()

    def _renew(self, held: list[tuple[str, str, int | None]]) -> Sequence[bool]:
        """Renew the slots of one pass of the lease keeper: in one round trip where the store can (Redis)."""
        slots, now, lease = self.slots, self._now(), self.lease
        many = getattr(slots, "renew_many", None)
        if many is not None:
            return many([(tool, holder) for tool, holder, _ in held], now=now, lease=lease)  # type: ignore[no-any-return]
        return [slots.renew(tool, holder, now=now, lease=lease) for tool, holder, _ in held]

    def _retake(self, held: tuple[str, str, int | None]) -> bool:
        """Take again a slot whose lease lapsed while its call runs, if the caps allow (else it runs uncounted)."""
        tool, holder, cap = held
        return self.slots.acquire(tool, holder, cap=cap, total=self.total, now=self._now(), lease=self.lease)[0]

    @hookimpl
    @applies_to(_capped)
    def harness_pre_call(self, call: Call) -> Await | None:
        name = call.tool.name
        cap = call.tool.max_concurrency or self.default
        holder = f"{self._holder}-{next(self._ids)}"
        if name not in self._seen:
            with self._lock:
                self._seen.add(name)
        slots, now, total, lease = self.slots, self._now(), self.total, self.lease
        if slots is not self._twins.plain:  # not the store known to answer without I/O
            shared = self._twins(slots)
            if shared is not None:
                return round_trip(
                    lambda: slots.acquire(name, holder, cap=cap, total=total, now=now, lease=lease),
                    lambda: shared.aacquire(name, holder, cap=cap, total=total, now=now, lease=lease),
                    lambda taken: self._taken(call, holder, cap, taken),
                    lambda exc: self.fail.handle(exc, name, call.call_id, "concurrency cap not checked"),
                    lambda: self._freeing(shared, name, holder),  # cancelled meanwhile: a slot taken is given back
                )
        try:
            taken = slots.acquire(name, holder, cap=cap, total=total, now=now, lease=lease)
        except StateUnavailable as exc:
            self.fail.handle(exc, name, call.call_id, "concurrency cap not checked")
            return None
        self._taken(call, holder, cap, taken)
        return None

    def _taken(self, call: Call, holder: str, cap: int | None, taken: tuple[bool, int, int]) -> None:
        """Hold the slot ``acquire`` gave, or refuse the call with :class:`ToolBusy`."""
        admitted, running, overall = taken
        name = call.tool.name
        if not admitted:
            full = (
                f"{running} running, its limit at once"
                if cap is not None and running >= cap
                else f"{overall} running of all tools, their limit at once"
            )
            with self._lock:
                self.refused += 1
            call.state[_REFUSED] = True  # this plugin's on_error decides how long it waits (max_wait)
            raise ToolBusy(
                f"Tool '{name}' is busy ({full}). Try again shortly.",
                retry_after=self.poll,
                tool=name,
                call_id=call.call_id,
            )
        call.state[_HELD] = holder
        if _SINCE in call.state:  # a wait ended: a later one (a retry's) is timed from its own first refusal
            del call.state[_SINCE]
        self._leases.hold(holder, (name, holder, cap))

    def _release(self, call: Call, answer: Retry | None = None) -> Retry | Await | None:
        """Give the call's slot back; then ``answer`` is the hook's (through an Await for Redis).

        A tool that runs on after its caller stopped waiting (``call.lingering``) keeps its
        slot until it returns: the cap counts tools running, not callers waiting.
        """
        holder = call.take(_HELD)
        if holder is None:
            return answer
        slots, name = self.slots, call.tool.name
        lingering = call.lingering
        if lingering is not None and lingering.later(lambda: self._release_later(name, holder)):
            return answer  # released by the tool's thread; else here (its tool returned already)
        self._leases.drop(holder)
        if slots is not self._twins.plain:  # not the store known to answer without I/O
            shared = self._twins(slots)
            if shared is not None:
                return round_trip(
                    lambda: slots.release(name, holder),
                    lambda: shared.arelease(name, holder),
                    lambda _: answer,
                    lambda exc: self._not_released(name, exc, answer),
                    lambda: self._freeing(shared, name, holder),  # cancelled meanwhile: sent again
                )
        try:
            slots.release(name, holder)
        except StateUnavailable as exc:
            self._not_released(name, exc, answer)
        return answer

    def _freeing(self, shared: Any, name: str, holder: str) -> Await:
        """The release of ``holder``'s slot, after its caller was cancelled during the round trip that
        took it or gave it back: whether that was sent is not known (one cancelled before its write is
        not), and a release is safe to repeat."""
        return Await(lambda: self._release_later(name, holder), lambda: self._afree(shared, name, holder))

    async def _afree(self, shared: Any, name: str, holder: str) -> None:
        try:
            await shared.arelease(name, holder)
        except StateUnavailable as exc:
            self._not_released(name, exc, None)

    def _release_later(self, name: str, holder: str) -> None:
        """A slot given back through the blocking client: from the thread of a tool that ran on past its
        caller, as it returns, or after a cancelled round trip when the task is cancelled again."""
        self._leases.drop(holder)
        try:
            self.slots.release(name, holder)
        except StateUnavailable as exc:
            self._not_released(name, exc, None)

    def _not_released(self, tool: str, exc: StateUnavailable, answer: Retry | None) -> Retry | None:
        self.fail.note(exc, tool, "slot not released; it frees when its lease ends")
        return answer

    @hookimpl
    @applies_to(_capped)
    def harness_post_call(self, call: Call) -> Await | None:
        return self._release(call)  # type: ignore[return-value]  # no answer given: never a Retry

    @hookimpl(tryfirst=True)
    @applies_to(_capped)
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | Await | None:
        return self._release(call, self._wait(call, error))

    def _wait(self, call: Call, error: BaseException) -> Retry | None:
        """This plugin's own refusal: a wait for a slot (``Retry``) while ``max_wait`` lasts; then the
        ``ToolBusy`` stands, without a ``retry_after`` (the cap waited what it would: a retry policy,
        which runs after this hook, lets it stand; an application's plugin may still answer it)."""
        if not call.take(_REFUSED, False) or not isinstance(error, ToolBusy):
            return None
        now = self._now()
        since = call.state.setdefault(_SINCE, now)  # the call's first refusal: its wait runs from there
        # The time that passed (a poll's sleep may last longer: a busy event loop, other threads), or the
        # polls slept, should this plugin's clock not move with the registry's sleeps.
        waited = max(now - since, call.peek(_WAITED, 0.0))
        if waited + self.poll > self.max_wait:
            error.retry_after = None
            return None
        call.state[_WAITED] = call.peek(_WAITED, 0.0) + self.poll
        return Retry(self.poll)

    def running(self, tool: str | None = None) -> int:
        """Calls running now, of one tool or of all (across processes with shared state)."""
        return self.slots.running(tool, now=self._now())

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        """A removed tool leaves ``stats()`` (tools made and removed per session leave no entry; with Redis, no round trip)."""
        with self._lock:
            self._seen.discard(tool.name)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        with self._lock:
            seen = sorted(self._seen)
        running: dict[str, int] = {}
        now = self._now()
        for name in seen:
            try:
                running[name] = self.slots.running(name, now=now)
            except StateUnavailable:  # Redis down: no tool's count, as before
                running = {}
                break
            except Exception as exc:  # not readable (a key of another type: WRONGTYPE): left out, as the circuit breaker's
                log_event(30, "concurrency: slots not read for stats", tool=name, error=f"{type(exc).__name__}: {exc}")
        return {"running": running, "refused": self.refused, **self._leases.stats(), **self.fail.stats()}
