"""The ``metrics`` plugin: per-tool counts, errors by type and latency percentiles."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from harness_one import (
    Call,
    Outcome,
    RateLimitExceeded,
    Retry,
    Tool,
    ToolError,
    ToolRegistry,
    applies_to,
    hookimpl,
    per_tool,
)

from ._options import count as positive_int

__all__ = ["MetricsPlugin", "ToolMetrics"]

_perf = time.perf_counter


class ToolMetrics:
    """Counters for one tool; latencies kept in a ring of the last ``window`` calls.

    Every count is taken without a lock: ``next()`` on an ``itertools.count`` and
    ``deque.append`` are each atomic. Reading a count changes nothing (the counter's next value,
    as its ``repr`` shows it): any number of threads may read while calls are counted. Errors are
    counted by type.
    """

    __slots__ = ("_counts", "latencies")

    def __init__(self, window: int) -> None:
        #: ``"ok"``, ``"retry"``, ``"wait"`` and each error type: its counter.
        self._counts: dict[Any, Iterator[int]] = {"ok": itertools.count(), "retry": itertools.count(), "wait": itertools.count()}
        self.latencies: deque[float] = deque(maxlen=window)

    def counter(self, what: Any) -> Iterator[int]:
        """The counter of ``what`` (an error type, ``"ok"``, ``"retry"`` or ``"wait"``), made on first use."""
        found = self._counts.get(what)
        return found if found is not None else self._counts.setdefault(what, itertools.count())

    def _value(self, what: Any) -> int:
        return _count_of(self._counts[what])

    @property
    def successes(self) -> int:
        return self._value("ok")

    @property
    def retries(self) -> int:
        """Attempts that ran the tool and were retried (it runs again)."""
        return self._value("retry")

    @property
    def waits(self) -> int:
        """Refusals waited out before the tool ran (a rate limit's, a wait for a slot): the tool had not run."""
        return self._value("wait")

    def _errors(self) -> dict[type, int]:
        return {kind: self._value(kind) for kind in list(self._counts) if isinstance(kind, type)}

    @property
    def errors(self) -> dict[str, int]:
        """Failed calls by error type name."""
        return _named(self._errors())

    @property
    def failed(self) -> int:
        return sum(self._errors().values())

    @property
    def rate_limited(self) -> int:
        return sum(n for kind, n in self._errors().items() if issubclass(kind, RateLimitExceeded))

    @property
    def calls(self) -> int:
        return self.successes + self.failed

    def snapshot(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        successes, by_type = self.successes, self._errors()
        return {
            "finished": successes + sum(by_type.values()),
            "successes": successes,
            "errors": _named(by_type),
            "rate_limited": sum(n for kind, n in by_type.items() if issubclass(kind, RateLimitExceeded)),
            "retries": self.retries,
            "waits": self.waits,
            "latency_ms": {f"p{q}": round(_quantile(ordered, q / 100) * 1000, 3) for q in (50, 95, 99)},
        }


def _count_of(counter: Iterator[int]) -> int:
    """How many values an ``itertools.count()`` gave, read from its ``repr`` (``count(12)``) without
    taking one: a read leaves the counter as it was."""
    return int(repr(counter)[6:-1])


def _named(by_type: dict[type, int]) -> dict[str, int]:
    """Counts by error type name (two types of one name add up); types never seen left out."""
    named: dict[str, int] = {}
    for kind, count in by_type.items():
        if count:
            named[kind.__name__] = named.get(kind.__name__, 0) + count
    return named


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted list (0.0 when empty)."""
    if not ordered:
        return 0.0
    rank = max(1, -(-int(q * len(ordered) * 1000) // 1000))
    return ordered[min(rank, len(ordered)) - 1]


class MetricsPlugin:
    """Counts every finished call per tool. ``registry.stats()`` shows the numbers.

    Args:
        window: how many recent latencies each tool keeps for its percentiles (bounded memory): a
            positive integer, else a ``ValueError`` naming the option when the plugin is built.
    """

    name = "metrics"
    order = 90

    def __init__(self, *, window: int = 2048) -> None:
        self.window = positive_int(window, "metrics window")
        self._tools: dict[str, ToolMetrics] = {}
        self._lock = threading.Lock()
        self._refused: dict[str, int] = {}  # by error type: unknown names are the model's, unbounded

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
        succeeded, latencies = m.counter("ok"), m.latencies

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
        counts, latencies = m._counts, m.latencies

        def on_error(call: Call, error: BaseException) -> None:
            if call.decision is not None:
                return  # a retry, a recovery or a translation: counted by _decided, once the decision is final
            found = counts.get(type(error))
            next(found if found is not None else m.counter(type(error)))
            latencies.append(_perf() - call.started)

        return on_error

    @hookimpl(trylast=True, specname="harness_on_error")
    @applies_to(after_decision=True)
    @per_tool(lambda plugin, tool: plugin._decided_for(tool))
    def _decided(self, call: Call, error: BaseException) -> None:
        """A call an on_error hook decided: a retry (a wait when the attempt did not run the tool: a rate
        limit's refusal waited out); with an ``Outcome``, a success when it recovered, else a failure of the
        translated error's type. Runs last, and only on a decision, so the last word is final
        (the output limit's; a failing on_error hook's, which turns a retry into that failure)."""
        self._decided_for(call.tool)(call, error)

    def _decided_for(self, tool: Tool) -> Callable[[Call, BaseException], None]:
        """:meth:`_decided` bound once per tool to its counters (a call still running when its tool is
        removed counts in the removed tool's figures, which are gone, and brings none back)."""
        m = self._for(tool.name)

        def decided(call: Call, error: BaseException) -> None:
            decision = call.decision
            if type(decision) is Retry:
                next(m.counter("retry" if call.ran else "wait"))  # (as the otel plugin's span events: retry, or wait)
                return
            if type(decision) is not Outcome:
                return
            failure = decision.error
            next(m.counter("ok") if failure is None else m.counter(type(failure)))
            m.latencies.append(_perf() - call.started)

        return decided

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        self._tools.pop(tool.name, None)  # a removed tool's figures go with it: memory stays bounded

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return {name: m.snapshot() for name, m in list(self._tools.items())}  # (reads change no counter: no lock)

    @hookimpl(trylast=True)
    def harness_call_refused(self, error: ToolError) -> None:
        """A request refused before it became a call, counted by its error's type (not by name)."""
        kind = type(error).__name__
        with self._lock:
            self._refused[kind] = self._refused.get(kind, 0) + 1

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        with self._lock:
            refused = dict(self._refused)
        return {"tools": self.snapshot(), **({"refused": refused} if refused else {})}
