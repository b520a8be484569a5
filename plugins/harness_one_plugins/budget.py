"""The ``budget`` plugin: at most N calls of a tool, or of all tools, per run.

A run is the value of one field of ``Call.context`` (``run_id`` unless configured), so an
agent loop that passes ``context={"run_id": ...}`` gets per-run limits with no code. A call
takes one unit of its run's budget when it is admitted and gives it back if the tool never
ran (refused by a later policy, waiting for approval, answered by a cache hit); retries of
one call take nothing more.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from harness_one import Call, Retry, Tool, ToolDefinitionError, ToolError, ToolRegistry, applies_to, hookimpl

__all__ = ["ALL_TOOLS", "BudgetExhausted", "BudgetPlugin"]

#: The counter of a run's calls of every tool.
ALL_TOOLS = "*"
_TAKEN = "budget.taken"


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


def _count(value: Any, what: str, tool: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ToolDefinitionError(f"Tool '{tool}': {what} must be a non-negative integer, got {value!r}.", tool=tool)
    return value


def _budgeted(plugin: BudgetPlugin, tool: Tool) -> bool:
    return plugin.total is not None or plugin.limit_for(tool) is not None


class BudgetPlugin:
    """Refuses a call once its run has used its budget, with :class:`BudgetExhausted`.

    Per tool, ``options={"max_calls": 3}`` allows three calls of the tool per run. Calls whose
    context has no value under ``key`` are not counted: give every run an id.

    Args:
        key: the ``Call.context`` field naming the run (default ``"run_id"``).
        max_calls: the per-run limit of tools that declare none (``None``: no limit).
        total: the per-run limit of calls of all tools together (``None``: no limit).
        max_runs: how many runs are remembered; the least recently active are forgotten
            first (their counts start again at zero), so memory stays bounded.
    """

    name = "budget"
    order = 62  # pre_call, tryfirst: after an idempotency replay, before approval, cache and rate limit

    def __init__(
        self, *, key: str = "run_id", max_calls: int | None = None, total: int | None = None, max_runs: int = 100_000
    ) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError(f"budget key must be a context field name, got {key!r}")
        self.key = key
        self.max_calls = _count(max_calls, "budget max_calls", "*")
        self.total = _count(total, "budget total", "*")
        if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
            raise ValueError(f"budget max_runs must be a positive integer, got {max_runs!r}")
        self.max_runs = max_runs
        self._limits: dict[Tool, int | None] = {}
        self._runs: OrderedDict[Hashable, dict[str, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.refused = 0

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
    def harness_pre_call(self, call: Call) -> None:
        if call.peek(_TAKEN) is not None:
            return  # a later attempt of a counted call
        run = call.context.get(self.key)
        if run is None:
            return
        if not isinstance(run, Hashable):
            run = repr(run)
        name = call.tool.name
        limit = self._limits[call.tool] if call.tool in self._limits else self.limit_for(call.tool)
        with self._lock:
            counts = self._runs.get(run)
            if counts is None:
                counts = self._runs[run] = {}
                while len(self._runs) > self.max_runs:
                    self._runs.popitem(last=False)
            else:
                self._runs.move_to_end(run)
            spent = None
            if limit is not None and counts.get(name, 0) >= limit:
                spent = (name, limit)
            elif self.total is not None and counts.get(ALL_TOOLS, 0) >= self.total:
                spent = (ALL_TOOLS, self.total)
            if spent is None:
                counts[name] = counts.get(name, 0) + 1
                counts[ALL_TOOLS] = counts.get(ALL_TOOLS, 0) + 1
            else:
                self.refused += 1
        if spent is not None:
            raise BudgetExhausted(*spent, tool=name, call_id=call.call_id)
        call.state[_TAKEN] = run

    def _give_back(self, call: Call) -> None:
        run = call.take(_TAKEN)
        if run is None:
            return
        with self._lock:
            counts = self._runs.get(run)
            if counts is not None:
                for scope in (call.tool.name, ALL_TOOLS):
                    if counts.get(scope, 0) > 0:
                        counts[scope] -= 1

    @hookimpl
    @applies_to(_budgeted)
    def harness_post_call(self, call: Call) -> None:
        if not call.ran and call.attempt == 1:  # answered without running (a cache hit)
            self._give_back(call)

    @hookimpl(trylast=True)  # after every decider: it must know whether another attempt follows
    @applies_to(_budgeted)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        if type(call.decision) is Retry or call.ran or call.attempt > 1:
            return  # another attempt follows, or the tool ran: the unit is used
        self._give_back(call)  # refused before the tool ever ran

    def used(self, run: Hashable, tool: str = ALL_TOOLS) -> int:
        """Calls of ``tool`` (default: of all tools) counted for ``run``."""
        with self._lock:
            return self._runs.get(run, {}).get(tool, 0)

    def reset(self, run: Hashable | None = None) -> None:
        """Forget the counts of ``run`` (``None``: of every run)."""
        with self._lock:
            if run is None:
                self._runs.clear()
            else:
                self._runs.pop(run, None)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"runs": len(self._runs), "refused": self.refused}
