"""The ``timeout`` plugin: a per-attempt timeout and a total budget per call."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

from harness_one import (
    Call,
    Clock,
    ProcessRunner,
    Runner,
    ThreadRunner,
    Tool,
    ToolDefinitionError,
    ToolRegistry,
    ToolTimeout,
    applies_to,
    hookimpl,
)

from ._options import count, provides, seconds

__all__ = ["TimeoutPlugin"]


def _bounded(plugin: TimeoutPlugin, tool: Tool) -> bool:
    return plugin._attempt(tool) is not None or plugin._total(tool) is not None


def _in_process(plugin: TimeoutPlugin, tool: Tool) -> bool:
    """A sync tool that runs in a worker process: in ``process`` mode with a timeout, or without one when
    the tool asks for a worker itself (its own ``timeout_mode="process"``, or a ``memory_limit`` under the
    plugin's ``mode="process"``); the plugin's ``mode="process"`` alone leaves an untimed tool (a lambda, a
    closure) in the caller's process."""
    if tool.is_async or (tool.timeout_mode or plugin.mode) != "process":
        return False
    return _bounded(plugin, tool) or tool.timeout_mode == "process" or "memory_limit" in tool.options


def _not_by_name(fn: Callable[..., Any]) -> str | None:
    """What ``fn`` is when a worker could never load it by its module and qualified name (as a
    function pickles), else None. Only what its name shows: a module-level name still unbound
    (``@registry.add`` adds the function before its module holds it) is found when called."""
    if not isinstance(fn, types.FunctionType):
        return None  # a bound method, a partial, a callable object: pickled otherwise
    if fn.__name__ == "<lambda>":
        return "a lambda"
    if "<locals>" in fn.__qualname__:
        return f"a function defined inside another ({fn.__qualname__})"
    return None


def _runs(plugin: TimeoutPlugin, tool: Tool) -> bool:
    return _bounded(plugin, tool) or _in_process(plugin, tool)


class TimeoutPlugin:
    """Bounds how long a call may run, by setting each attempt's ``call.deadline``,
    ``call.timeout`` and ``call.runner``, which the core enforces.

    A tool's ``timeout`` bounds each attempt; ``total_timeout`` bounds the whole call, retries
    and waits included (either ``math.inf``: no limit, whatever the plugin's default) (no attempt starts once it is spent, and each attempt gets at most
    what is left; the core gives the tool at most what is left of the total when it starts it,
    after the later ``pre_call`` hooks took their time). Async tools are cancelled at the
    deadline, whatever their ``timeout_mode`` (one that swallows the cancellation is waited for,
    and its late outcome dropped for :class:`ToolTimeout`). Sync tools run according to their
    ``timeout_mode`` (default: the plugin's ``mode``):

    - ``"thread"``: in a bounded worker pool; the caller gets :class:`ToolTimeout` at the
      deadline and the thread is *abandoned* (it cannot be killed and runs on); it shows as
      ``stuck`` in stats. A full pool fails new calls at once with :class:`ToolBusy`.
    - ``"process"``: in a warm worker process (a pool of ``max_processes``, each the leader
      of its own process group); at the deadline, or when the call is cancelled, the whole
      group is *killed* (the tool and every process it started but those that left the group)
      and the worker replaced. A tool with no timeout runs in a worker too (isolated, its
      ``memory_limit`` kept), with no deadline (``call.timeout`` is ``math.inf``), when it asks
      for one itself: its own ``timeout_mode="process"``, or a ``memory_limit`` under this plugin's
      ``mode="process"``. An async tool never runs in a worker: one that asks for it (its own
      ``timeout_mode="process"``, or a ``memory_limit`` under this plugin's ``mode="process"``) is a
      :class:`ToolDefinitionError` when added, as is a lambda or a function defined inside another
      that would run in a worker (it cannot be imported there by its name).
    - ``"none"``: in the caller's thread, never interrupted; the deadline is only advisory
      (``call.deadline``, ``call.remaining()``) for tools that check it.

    Args:
        default: per-attempt seconds for tools that declare none (None: no timeout).
        total: total seconds per call for tools that declare no ``total_timeout``.
        mode: the default mode for sync tools.
        max_workers: size of the thread pool used by ``thread`` mode.
        max_processes: how many worker processes ``process`` mode may keep.
        clock: time source (default: the registry's clock).
    """

    name = "timeout"
    order = 20

    def __init__(
        self,
        *,
        default: float | None = None,
        total: float | None = None,
        mode: str = "thread",
        max_workers: int = 32,
        max_processes: int = 4,
        clock: Clock | None = None,
    ) -> None:
        if mode not in ("thread", "process", "none"):
            raise ValueError(f"mode must be 'thread', 'process' or 'none', not {mode!r}")
        self.default = seconds(default, "timeout default", optional=True)
        self.total = seconds(total, "timeout total", optional=True)
        self.mode = mode
        self.clock = provides(clock, "timeout clock", "a clock", ("now",), optional=True)
        self.threads = ThreadRunner(count(max_workers, "timeout max_workers"))
        self.processes = ProcessRunner(max_workers=count(max_processes, "timeout max_processes"))
        self.timeouts = 0

    def runner_for(self, mode: str) -> Runner | None:
        if mode == "thread":
            return self.threads
        return self.processes if mode == "process" else None

    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        ProcessRunner.memory_limit(tool)  # a bad option is a ToolDefinitionError when the tool is added
        asks = tool.timeout_mode == "process" or "memory_limit" in tool.options
        if tool.is_async and asks and (tool.timeout_mode or self.mode) == "process":  # (ignored elsewhere, as a sync tool's)
            asked = "timeout_mode 'process'" if tool.timeout_mode == "process" else "a memory_limit"
            raise ToolDefinitionError(
                f"Tool '{tool.name}': {asked} needs a worker process, and an async tool runs in the caller's event loop "
                "(cancelled at its timeout, never killed nor bounded in memory); make it a sync function, or drop the option.",
                tool=tool.name,
            )
        if tool.call_param and _in_process(self, tool):
            raise ToolDefinitionError(
                f"Tool '{tool.name}': its '{tool.call_param}' parameter (a Call) cannot cross to a process-mode worker; "
                "use timeout_mode 'thread' or 'none', or drop the parameter.",
                tool=tool.name,
            )
        unloadable = _not_by_name(tool.fn) if _in_process(self, tool) else None
        if unloadable is not None:
            raise ToolDefinitionError(
                f"Tool '{tool.name}': process mode needs a function a worker can import by its module and name, "
                f"and this is {unloadable}; define it at module level, or use timeout_mode 'thread' or 'none'.",
                tool=tool.name,
            )

    def _now(self, call: Call) -> tuple[float, float]:
        """Now on this plugin's clock, and what to add to it for the registry's, on which the call's
        deadlines are (the core compares them with the registry's clock)."""
        registry = call.registry.clock
        clock = self.clock or registry
        now = clock.now()
        return now, (0.0 if clock is registry else registry.now() - now)

    def _attempt(self, tool: Tool) -> float | None:
        """A tool's seconds per attempt, else this plugin's default; None for no limit (a tool's
        ``math.inf`` too: it is no limit, whatever the default)."""
        seconds = tool.timeout if tool.timeout is not None else self.default
        return None if seconds == math.inf else seconds

    def _total(self, tool: Tool) -> float | None:
        """As :meth:`_attempt`, for the whole call."""
        seconds = tool.total_timeout if tool.total_timeout is not None else self.total
        return None if seconds == math.inf else seconds

    @hookimpl
    @applies_to(lambda plugin, tool: plugin._total(tool) is not None)
    def harness_pre_validate(self, call: Call) -> None:
        """The total runs from the call's start: its deadline is known before any policy may ask to wait."""
        total = self._total(call.tool)
        assert total is not None  # applies_to
        now, shift = self._now(call)
        call.state["timeout.start"] = now
        call.total_deadline = now + total + shift

    @hookimpl
    @applies_to(_runs)
    def harness_pre_call(self, call: Call) -> None:
        tool = call.tool
        attempt = self._attempt(tool)
        total = self._total(tool)
        now, shift = self._now(call)
        limit = attempt  # the configured seconds a ToolTimeout of this attempt names
        if total is not None:
            started = call.state.get("timeout.start")
            if started is None:  # this plugin was added after the call's pre-validate: its total runs from now
                started = call.state["timeout.start"] = now
                call.total_deadline = now + total + shift
            left = started + total - now
            if left <= 0:
                raise ToolTimeout(total, tool=tool.name, call_id=call.call_id)
            if attempt is None or left < attempt:  # the total ends this attempt first: its timeout is the total's
                attempt, limit = left, total
        if attempt is None:  # neither: process mode (_runs), in a worker all the same, with no deadline
            call.timeout = math.inf
            call.runner = self.processes
            return
        call.deadline = now + attempt + shift
        # The configured seconds (the attempt's, or the total's when that ends first), which a ToolTimeout
        # names: the core waits at most what is left of ``call.total_deadline``, so the total still bounds it.
        call.timeout = limit  # async tools are cancelled at it; sync tools need a runner for that
        call.runner = self.runner_for(tool.timeout_mode or self.mode)

    @hookimpl
    @applies_to(_bounded)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        if isinstance(error, ToolTimeout):
            self.timeouts += 1

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {
            "timeouts": self.timeouts,
            "threads": self.threads.stats(),
            "processes": self.processes.stats(),
            "processes_killed": self.processes.killed,
        }
