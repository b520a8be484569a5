"""The ``budget`` plugin: at most N calls of a tool, or of all tools, per run.

A run is the value of one field of ``Call.context`` (``run_id`` unless configured), so an
agent loop that passes ``context={"run_id": ...}`` gets per-run limits with no code. A call
takes one unit of its run's budget when it is admitted and gives it back if the tool never
ran (refused by a later policy, waiting for approval, answered by a cache hit); retries of
one call take nothing more. The counters live in the registry's state: in this process, or in
Redis shared by every worker (``docs/budgets.md``). Each give-back has a ticket, so one that
reaches the store twice, as a Redis command sent again after its reply was lost does, returns
its unit once. So does each take of a shared store (Redis): sent twice it counts once, and one a
cancelled ``acall`` cut short (the store may have counted it) is given back once, if it was counted.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable, Sized
from typing import Any, cast

from harness_one import (
    Await,
    Call,
    Retry,
    Tool,
    ToolDefinitionError,
    ToolError,
    ToolRegistry,
    applies_to,
    hookimpl,
    log_event,
)
from harness_one.state import (
    Accepts,
    AsyncBudgetStore,
    AsyncTwins,
    BudgetStore,
    FailMode,
    MemoryBudgets,
    StateUnavailable,
    key_text,
    new_token,
    round_trip,
)

from ._options import joins, provides, registry_of, seconds, takes_state

__all__ = ["ALL_TOOLS", "BudgetExhausted", "BudgetPlugin", "BudgetRunInvalid"]

_PLUGINS: weakref.WeakSet[BudgetPlugin] = weakref.WeakSet()


def _forked() -> None:
    """A forked child's plugins get a new lock (another thread of the parent may have held one, for ever now)."""
    for plugin in list(_PLUGINS):
        plugin._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forked)


#: The counter of a run's calls of every tool.
ALL_TOOLS = "*"
_TAKEN = "budget.taken"  # the run the call took a unit of


class BudgetExhausted(ToolError):
    """A run has used its budget of calls of a tool (``scope`` is the tool) or of all tools (``"*"``)."""

    kind = "budget_exhausted"

    def __init__(self, scope: str, limit: int, *, tool: str | None = None, call_id: str | None = None) -> None:
        self.scope, self.limit = scope, limit
        if scope == ALL_TOOLS:
            text = (
                f"This run has already made {limit} tool calls, the most it may make. "
                "Do not call any tool again in this run; answer with what you have."
            )
        else:
            text = (
                f"Tool '{scope}' has already been called {limit} times in this run, the most it may be called. "
                "Do not call it again in this run; continue with the results you have."
            )
        super().__init__(text, tool=tool, call_id=call_id)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "scope": self.scope, "limit": self.limit}


class BudgetRunInvalid(ToolError):
    """A budgeted call whose run id (the context field ``field``) is not a string, an integer (an enum
    of them) or a UUID: refused, not run, nothing counted.

    Runs are named by their id's text, and an object's text may be its address: a new object per
    call would be a new, unspent run each time (the budget never ends), and a later run's object at
    the same address would get an earlier one's counts.
    """

    kind = "budget_run_invalid"

    def __init__(self, field: str, got: str, *, tool: str | None = None, call_id: str | None = None) -> None:
        self.field = field
        super().__init__(
            f"Tool '{tool}' is budgeted per run by the context field '{field}', which holds a {got}, not a string, "
            "an integer or a UUID, so it was not run. Give it a string, an integer or a UUID that names the run.",
            tool=tool,
            call_id=call_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "field": self.field}


def _count(value: Any, what: str, tool: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ToolDefinitionError(f"Tool '{tool}': {what} must be a non-negative integer, got {value!r}.", tool=tool)
    return value


def _budgeted(plugin: BudgetPlugin, tool: Tool) -> bool:
    return plugin.total is not None or plugin.limit_for(tool) is not None


def _run_id(run: Any) -> str:
    """A run's id as text, bounded, as rate-limit buckets are named: a string, an integer (an enum of
    them) or a UUID, a digest of one over 200 characters (a 200 KB id was kept whole for each run in
    memory); ``TypeError`` for a value of another type (an object's text may be its address)."""
    return key_text(run, strict=True)


class BudgetPlugin:
    """Refuses a call once its run has used its budget, with :class:`BudgetExhausted`.

    Per tool, ``options={"max_calls": 3}`` allows three calls of the tool per run. Calls whose
    context has no value under ``key`` are not counted: give every run an id. Such calls are
    counted in ``stats()["budget"]["unscoped"]``, and the first of each tool logs a warning. Run ids are
    compared as text (an integer's digits, an enum's value, a UUID's ``str()``; a digest of one over
    200 characters or not printable, :func:`harness_one.state.key_text`).

    Args:
        key: the ``Call.context`` field naming the run (default ``"run_id"``).
        max_calls: the per-run limit of tools that declare none (``None``: no limit).
        total: the per-run limit of calls of all tools together (``None``: no limit).
        ttl: seconds a run's counts are kept after its last call (then it starts again at
            zero), so finished runs are forgotten (default one day).
        store: where the counters live (default: the registry's state, in memory unless the
            registry was given shared state; :class:`~harness_one.state.MemoryBudgets` takes
            ``max_runs``).
        on_state_error: when a shared store (Redis) does not answer: ``"open"`` (default: the
            call runs uncounted, with a warning and a count in ``stats()["budget"]``) or
            ``"closed"`` (it fails with :class:`~harness_one.state.StateUnavailable`).
    """

    name = "budget"
    order = 62  # pre_call, tryfirst: after an idempotency replay, before approval, cache and rate limit

    def __init__(
        self,
        *,
        key: str = "run_id",
        max_calls: int | None = None,
        total: int | None = None,
        ttl: float = 86_400.0,
        store: BudgetStore | None = None,
        on_state_error: str = "open",
    ) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError(f"budget key must be a context field name, got {key!r}")
        self.key = key
        self.max_calls = _count(max_calls, "budget max_calls", "*")
        self.total = _count(total, "budget total", "*")
        self.ttl = seconds(ttl, "budget ttl")
        self.fail = FailMode("budget", on_state_error)
        store = provides(store, "budget store", "a budget store", ("take", "give_back", "used", "forget"), optional=True)
        self.store: BudgetStore = store if store is not None else MemoryBudgets()
        self._own_store = store is not None
        self._limits: dict[Tool, int | None] = {}
        self._lock = threading.Lock()
        _PLUGINS.add(self)  # (a forked child gets a new lock)
        self._twins = AsyncTwins("atake")  # whether the store has awaitable twins
        self._tickets = Accepts("ticket", "give_back", "agive_back")  # whether give-backs have tickets
        self._untakes = AsyncTwins("auntake")  # whether takes have tickets, and a cut-short one can be given back
        self.refused = 0
        self.unscoped = 0  # budgeted calls without a run id, not counted
        self._warned: set[str] = set()  # tools warned about a call without a run id

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        if self._own_store:
            joins(self, registry)
        elif takes_state(self, registry, "counters", "store"):
            self.store = registry.state.budgets()

    def limit_for(self, tool: Tool) -> int | None:
        """The per-run limit of ``tool``: its ``max_calls`` option, else the plugin's."""
        if "max_calls" in tool.options:
            return _count(tool.options["max_calls"], "max_calls", tool.name)
        return self.max_calls

    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        limit = self.limit_for(tool)
        if limit is not None or self.total is not None:
            self._limits[tool] = limit

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        self._limits.pop(tool, None)

    @hookimpl(tryfirst=True)
    @applies_to(_budgeted)
    def harness_pre_call(self, call: Call) -> Await | None:
        if call.peek(_TAKEN) is not None:
            return None  # a later attempt of a counted call
        found = call.context.get(self.key)
        if found is None:
            self._unscoped(call.tool.name)
            return None
        try:
            run = _run_id(found)
        except TypeError:
            raise BudgetRunInvalid(self.key, type(found).__name__, tool=call.tool.name, call_id=call.call_id) from None
        name = call.tool.name
        limit = self._limits[call.tool] if call.tool in self._limits else self.limit_for(call.tool)
        store, total, ttl, now = self.store, self.total, self.ttl, call.registry.clock.now()
        shared = self._twins(store)
        if shared is not None:
            mine = {} if self._untakes(shared) is None else {"ticket": new_token()}  # one, however often it is sent
            return round_trip(
                lambda: store.take(run, name, limit=limit, total=total, now=now, ttl=ttl, **mine),
                lambda: shared.atake(run, name, limit=limit, total=total, now=now, ttl=ttl, **mine),
                lambda spent: self._decide(call, run, limit, spent),
                lambda exc: self.fail.handle(exc, name, call.call_id, "budget not counted"),
                # cancelled meanwhile (Redis may have counted it): given back if it was, once
                (lambda: self._returning(shared.untake, shared.auntake, run, name, mine)) if mine else None,
            )
        try:
            spent = store.take(run, name, limit=limit, total=total, now=now, ttl=ttl)
        except StateUnavailable as exc:
            self.fail.handle(exc, name, call.call_id, "budget not counted")
            return None
        self._decide(call, run, limit, spent)
        return None

    def _unscoped(self, name: str) -> None:
        """Count a budgeted call of ``name`` that has no run id (not counted against any budget); warn once per tool."""
        with self._lock:
            self.unscoped += 1
            first = name not in self._warned
            self._warned.add(name)
        if first:
            log_event(
                30,
                "budget: call not counted, its context has no run id",
                tool=name,
                key=self.key,
                fix=f"pass context={{{self.key!r}: ...}} naming the run (a framework adapter: its context=)",
            )

    def _decide(self, call: Call, run: str, limit: int | None, spent: int) -> None:
        """Hold the unit ``take`` counted, or refuse the call with :class:`BudgetExhausted`."""
        if not spent:
            call.state[_TAKEN] = run
            return
        with self._lock:
            self.refused += 1
        scope, most = (call.tool.name, limit) if spent == 1 else (ALL_TOOLS, self.total)
        raise BudgetExhausted(scope, cast(int, most), tool=call.tool.name, call_id=call.call_id)

    def _give_back(self, call: Call) -> Await | None:
        run = call.take(_TAKEN)
        if run is None:
            return None
        store, name = self.store, call.tool.name
        mine = self._tickets.keywords(store, new_token())  # one ticket, however often the give-back is sent
        shared: AsyncBudgetStore | None = self._twins(store)
        if shared is None:
            self._return(store.give_back, run, name, mine)
            return None
        giving = self._returning(shared.give_back, shared.agive_back, run, name, mine)
        # cancelled meanwhile: sent again, one with a ticket (one without could return its unit twice)
        return round_trip(giving.sync, giving.aio, lambda _: None, lambda _: None, (lambda: giving) if mine else None)

    def _returning(
        self, sync: Callable[..., None], aio: Callable[..., Awaitable[None]], run: str, name: str, mine: dict[str, Any]
    ) -> Await:
        """Giving ``run``'s unit of ``name`` back through the store's ``sync`` method or its awaitable twin ``aio``."""
        return Await(lambda: self._return(sync, run, name, mine), lambda: self._areturn(aio, run, name, mine))

    def _return(self, give: Callable[..., None], run: str, name: str, mine: dict[str, Any]) -> None:
        """Give ``run``'s unit of ``name`` back with the store's ``give`` (``give_back``; ``untake`` for a take
        cut short), ``mine`` its ticket if the store takes one."""
        try:
            give(run, name, **mine)
        except StateUnavailable as exc:
            self._kept(name, exc)

    async def _areturn(self, give: Callable[..., Awaitable[None]], run: str, name: str, mine: dict[str, Any]) -> None:
        """:meth:`_return` through the store's awaitable twin."""
        try:
            await give(run, name, **mine)
        except StateUnavailable as exc:
            self._kept(name, exc)

    def _kept(self, name: str, exc: StateUnavailable) -> None:
        self.fail.note(exc, name, "unit not given back; the run keeps it as used")

    @hookimpl
    @applies_to(_budgeted)
    def harness_post_call(self, call: Call) -> Await | None:
        if not call.ran and call.attempt == 1:  # answered without running (a cache hit)
            return self._give_back(call)
        return None

    @hookimpl(trylast=True)  # after every decider: it must know whether another attempt follows
    @applies_to(_budgeted)
    def harness_on_error(self, call: Call, error: BaseException) -> Await | None:
        if type(call.decision) is Retry or call.ran or call.attempt > 1:
            return None  # another attempt follows, or the tool ran: the unit is used
        return self._give_back(call)  # refused before the tool ever ran

    def _now(self) -> float:
        registry = registry_of(self)
        return 0.0 if registry is None else registry.clock.now()

    def used(self, run: Hashable, tool: str = ALL_TOOLS) -> int:
        """Calls of ``tool`` (default: of all tools) counted for ``run`` (across processes with shared state)."""
        return self.store.used(_run_id(run), tool, now=self._now())

    def reset(self, run: Hashable | None = None) -> None:
        """Forget the counts of ``run`` (``None``: of every run)."""
        self.store.forget(None if run is None else _run_id(run))

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        runs = {"runs": len(self.store)} if isinstance(self.store, Sized) else {}  # not counted in Redis
        unscoped = {"unscoped": self.unscoped} if self.unscoped else {}
        return {**runs, "refused": self.refused, **unscoped, **self.fail.stats()}
