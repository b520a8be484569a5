"""The ``concurrency`` plugin (bulkhead): a cap on calls running at once, per tool and overall."""

from __future__ import annotations

import threading
from typing import Any

from harness_one import Call, Clock, Retry, Tool, ToolBusy, ToolRegistry, applies_to, hookimpl

__all__ = ["ConcurrencyPlugin"]

_HELD = "concurrency.held"
_WAITED = "concurrency.waited"


def _capped(plugin: ConcurrencyPlugin, tool: Tool) -> bool:
    return (tool.max_concurrency or plugin.default or plugin.total) is not None


class ConcurrencyPlugin:
    """At most ``max_concurrency`` calls of a tool run at once (and at most ``total`` overall).

    A call beyond the cap waits up to ``max_wait`` seconds for a slot, polling every
    ``poll`` seconds (sleeping in async callers, blocking in sync ones), then fails with
    :class:`ToolBusy`. A slot is held from admission until the attempt ends. Waiters are not
    served in arrival order.

    Args:
        default: a per-tool cap for tools that declare no ``max_concurrency`` (None: no cap).
        total: a cap across all tools of the registry (None: no cap).
        max_wait: seconds to wait for a slot (0: fail at once).
        poll: seconds between checks while waiting.
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
    ) -> None:
        self.default = default
        self.total = total
        self.max_wait = max_wait
        self.poll = poll
        self.clock = clock
        self._running: dict[str, int] = {}
        self._all = 0
        self._lock = threading.Lock()
        self.refused = 0

    @hookimpl
    @applies_to(_capped)
    def harness_pre_call(self, call: Call) -> None:
        name = call.tool.name
        cap = call.tool.max_concurrency or self.default
        with self._lock:
            running = self._running.get(name, 0)
            if (cap is not None and running >= cap) or (self.total is not None and self._all >= self.total):
                full = (
                    f"{running} of {cap} for this tool"
                    if cap is not None and running >= cap
                    else f"{self._all} of {self.total} overall"
                )
                self.refused += 1
                raise ToolBusy(
                    f"Tool '{name}' is busy ({full} calls running). Try again shortly.",
                    retry_after=self.poll,
                    tool=name,
                    call_id=call.call_id,
                )
            self._running[name] = running + 1
            self._all += 1
        call.state[_HELD] = True

    def _release(self, call: Call) -> None:
        if not call.take(_HELD, False):
            return
        with self._lock:
            self._running[call.tool.name] -= 1
            self._all -= 1

    @hookimpl
    @applies_to(_capped)
    def harness_post_call(self, call: Call) -> None:
        self._release(call)

    @hookimpl
    @applies_to(_capped)
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        self._release(call)
        if not isinstance(error, ToolBusy) or error.retry_after is None or call.ran:
            return None
        waited = call.peek(_WAITED, 0.0)
        if waited + self.poll > self.max_wait:
            return None
        call.state[_WAITED] = waited + self.poll
        return Retry(self.poll)

    def running(self, tool: str | None = None) -> int:
        """Calls running now, of one tool or of all."""
        with self._lock:
            return self._all if tool is None else self._running.get(tool, 0)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        with self._lock:
            return {"running": dict(self._running), "refused": self.refused}
