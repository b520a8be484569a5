"""The ``rate_limit`` plugin: a token bucket per tool (and optionally per caller)."""

from __future__ import annotations

import contextlib
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

from harness_one import (
    Await,
    Call,
    Clock,
    RateLimit,
    RateLimitExceeded,
    Retry,
    SystemClock,
    Tool,
    ToolError,
    ToolRegistry,
    hookimpl,
    per_tool,
)
from harness_one.state import FailMode, MemoryBuckets, RateLimitBackend, StateUnavailable, key_text, round_trip

from ._options import provides, seconds, takes_state

__all__ = ["InMemoryBuckets", "RateLimitBackend", "RateLimitKeyInvalid", "RateLimitPlugin"]

#: The in-memory backend (kept under its earlier name).
InMemoryBuckets = MemoryBuckets

#: The standard plugins, by module, whose ``pre_call`` may come after the rate limit and never refuses
#: nor cancels an attempt (retry notes when the call started; otel opens a span).
_QUIET = frozenset({"harness_one_plugins.retry", "harness_one_plugins.otel"})
#: ``RateLimitExceeded.of``, bound once: CPython 3.11 does not specialize reading an attribute of a class
#: (an imported name's attribute is read so even where it is called), about 400 instructions a refusal.
_rate_limited = RateLimitExceeded.of


class RateLimitKeyInvalid(ToolError):
    """A call of a tool limited per caller (``rate_limit`` ``key``) whose key value is not a string,
    an integer (an enum of them) or a UUID: refused, not run, no token taken.

    Buckets are named by the value's text, and an object's text may be its address: a new object
    per request would be a new, full bucket each time, and a later caller's object at the same
    address would get an earlier one's bucket. ``field`` names the context field (None: the
    ``key`` is a function).
    """

    kind = "rate_limit_key_invalid"

    def __init__(self, field: str | None, got: str, *, tool: str | None = None, call_id: str | None = None) -> None:
        self.field = field
        where = (
            f"the context field '{field}', which holds" if field is not None else "its rate_limit key function, which returned"
        )
        super().__init__(
            f"Tool '{tool}' is rate-limited per caller by {where} a {got}, not a string, an integer or a UUID, "
            "so it was not run. Give it a string, an integer or a UUID that names the caller.",
            tool=tool,
            call_id=call_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "field": self.field}


def _bucket(call: Call, name: str, key: Any) -> Hashable:
    """The bucket of ``call``: its tool's, or the tool's for its ``key``'s value, by text (1 and "1"
    are one bucket, here as in Redis), bounded (a 200 KB key is kept as a digest); one bucket for
    calls without a value (None). :class:`RateLimitKeyInvalid` for a value of another type."""
    if key is None:
        return name
    value = key(call) if callable(key) else call.context.get(key)
    if value is None:
        return (name, None)
    try:
        return (name, key_text(value, strict=True))
    except TypeError:
        field = None if callable(key) else key
        raise RateLimitKeyInvalid(field, type(value).__name__, tool=name, call_id=call.call_id) from None


class RateLimitPlugin:
    """Refuses (or delays) calls beyond each tool's ``rate_limit``.

    Args:
        default: a limit for tools that declare none (``{"rate": .., "burst": ..}`` or RateLimit).
        max_wait: default seconds to wait for a token before refusing (0: refuse at once).
            A tool's own ``rate_limit["max_wait"]`` wins.
        backend: where buckets live (default: the registry's state, in memory unless the
            registry was given shared state).
        clock: time source (default: the registry's clock; a Redis backend uses Redis's clock).
        on_state_error: when a shared backend (Redis) does not answer: ``"open"`` (default:
            admit the call, warn, count it in ``stats()["rate_limit"]["state_failed_open"]``)
            or ``"closed"`` (refuse it with :class:`~harness_one.state.StateUnavailable`).
    """

    name = "rate_limit"
    order = 10
    # What every call reads (and a refusal writes) is a slot. Registering a plugin makes its
    # ``__dict__`` (pluggy reads ``dir(plugin)``), and CPython does not specialize reads from a
    # dict made that way: each would be a full attribute lookup (about 150 instructions).
    __slots__ = ("__dict__", "__weakref__", "_now", "backend", "refused")

    def __init__(
        self,
        *,
        default: RateLimit | dict[str, Any] | None = None,
        max_wait: float = 0.0,
        backend: RateLimitBackend | None = None,
        clock: Clock | None = None,
        on_state_error: str = "open",
    ) -> None:
        self.fail = FailMode("rate_limit", on_state_error)
        self.default = None if default is None else RateLimit.parse(default, tool="*")
        self.max_wait = seconds(max_wait, "rate_limit max_wait", zero=True)
        backend = provides(backend, "rate_limit backend", "a rate limit backend", ("acquire",), optional=True)
        self.backend: RateLimitBackend = backend if backend is not None else MemoryBuckets()
        self._own_backend = backend is not None
        self.clock: Clock | None = provides(clock, "rate_limit clock", "a clock", ("now",), optional=True)
        self.refused = 0
        #: Where, in ``call.state``, an attempt this plugin admitted notes the bucket its token came from (for
        #: the give-back hook, which takes it in the attempt's ``on_error``): one key per plugin instance, so
        #: two rate limits on one registry (a global one, one per user) each give back their own token.
        self._took = f"rate_limit.took.{id(self)}"
        self._now: Callable[[], float] | None = None
        self._registry: weakref.ReferenceType[ToolRegistry] | None = None
        self._configured = False

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        if not self._own_backend and takes_state(self, registry, "buckets", "backend"):
            self.backend = registry.state.rate_limits()
        # The system clock read without a method call. A plugin joining a second registry with
        # another clock asks the call's registry each time instead.
        now = time.monotonic if isinstance(self.clock or registry.clock, SystemClock) else None
        self._now = now if not self._configured or self._now is now else None
        # The registry (weakly: no cycle), to know which later policies apply to a tool (two registries: unknown).
        known = self._registry() if self._registry is not None else None
        self._registry = weakref.ref(registry) if not self._configured or known is registry else None
        self._configured = True

    @hookimpl
    def harness_tool_added(self, tool: Tool, registry: ToolRegistry) -> None:
        self._retune(tool)

    def _prepare(self, tool: Tool) -> Callable[[Call], Await | RateLimitExceeded | None] | None:
        """What the plan calls for ``tool``, prepared once per tool and plan; the buckets told its limit (a
        plugin joining after the tool was added saw no ``harness_tool_added``)."""
        self._retune(tool)
        return self._pre_call_for(tool)

    def _retune(self, tool: Tool) -> None:
        """Tell the in-process buckets ``tool``'s limit, which may differ from the one its buckets were made
        under (a tool replaced): none is then swept as full before this limit refills it."""
        limit = tool.rate_limit or self.default
        backend = self.backend
        if limit is not None and type(backend) is MemoryBuckets:
            backend.retune(tool.name, rate=limit.rate, burst=limit.burst, keyed=limit.key is not None)

    @hookimpl
    @per_tool(lambda plugin, tool: plugin._prepare(tool))
    def harness_pre_call(self, call: Call) -> Await | None:
        """Refuse (raise :class:`RateLimitExceeded`) when the tool's bucket is short: what a subclass
        or a plugin delegating to this one sees. The core calls the function ``per_tool`` prepared,
        which returns the refusal instead (the same refusal, without a traceback)."""
        prepared = self._pre_call_for(call.tool)
        answer = None if prepared is None else prepared(call)
        if isinstance(answer, RateLimitExceeded):
            answer.call_id = call.call_id  # (the core numbers the refusal the prepared function returns)
            raise answer
        return answer

    def _pre_call_for(self, tool: Tool) -> Callable[[Call], Await | RateLimitExceeded | None] | None:
        """The admission check of ``tool``'s calls, prepared once per tool (None: no limit)."""
        limit = tool.rate_limit or self.default
        if limit is None:
            return None
        name, key, rate, burst, cost = tool.name, limit.key, limit.rate, limit.burst, limit.cost
        # One bucket per tool in this process (the common case): its settings bound now, and
        # `acquire_on` called positionally, Python to Python (not through a C `functools.partial`).
        # In this process the clock is read under the bucket's lock: a thread that read it, then
        # waited for the lock, would come with a time before another's (MemoryBuckets).
        backend = self.backend
        acquire = backend.acquire_on if key is None and type(backend) is MemoryBuckets else None
        # Where a later policy may refuse the attempt before its tool runs, the bucket its token came
        # from is noted for the give-back hook (one dict entry; none on a tool no later policy applies to).
        mark = self._refused_later(tool)
        took = self._took

        def pre_call(call: Call) -> Await | RateLimitExceeded | None:
            clock = self._now
            if clock is None:
                clock = (self.clock or call.registry.clock).now
            if acquire is not None and self.backend is backend:
                wait = acquire(name, rate, burst, cost, clock)  # in this process: cannot fail
                if wait > 0.0:
                    return self._refusal(call, wait)  # returned, not raised: the core takes it as raised, for less
                if mark:
                    call.state[took] = name
                return None
            bucket = _bucket(call, name, key)
            current = self.backend
            if type(current) is not MemoryBuckets:
                return self._acquire(call, current, bucket, limit, clock(), mark)
            wait = current.acquire_on(bucket, rate, burst, cost, clock)  # in this process: cannot fail
            if wait > 0.0:
                return self._refusal(call, wait)
            if mark:
                call.state[took] = bucket
            return None

        return pre_call

    def _acquire(
        self, call: Call, backend: RateLimitBackend, bucket: Hashable, limit: RateLimit, now: float, mark: bool
    ) -> Await | RateLimitExceeded | None:
        """A backend other than the in-process one (which the per-call path calls positionally); the
        bucket of an admitted attempt noted when ``mark`` (a call admitted open took no token)."""
        aacquire = getattr(backend, "aacquire", None)
        if aacquire is not None:
            return self._shared(call, backend, aacquire, bucket, limit, now, mark)
        try:
            wait = backend.acquire(bucket, rate=limit.rate, burst=limit.burst, cost=limit.cost, now=now)
        except StateUnavailable as exc:
            self.fail.handle(exc, call.tool.name, call.call_id, "rate limit not checked")
            return None
        if wait > 0.0:
            return self._refusal(call, wait)
        if mark:
            call.state[self._took] = bucket
        return None

    def _refusal(self, call: Call, wait: float) -> RateLimitExceeded:
        self.refused += 1
        # Up to the next millisecond: a caller who waits retry_after finds the token there (not 1e-12 s short).
        # (At most ~31,700 years: a rate of 1e-306 tokens a second made ceil() of infinity.)
        return _rate_limited(math.ceil((wait if wait < 1e12 else 1e12) * 1000.0) / 1000.0, call.tool.name, None)

    def _shared(
        self,
        call: Call,
        backend: RateLimitBackend,
        aacquire: Callable[..., Awaitable[float]],
        bucket: Hashable,
        limit: RateLimit,
        now: float,
        mark: bool,
    ) -> Await:
        """The decision of a backend across the network (Redis): awaited under ``acall``."""
        rate, burst, cost = limit.rate, limit.burst, limit.cost

        def decide(wait: float) -> None:
            if wait > 0.0:
                refusal = self._refusal(call, wait)
                refusal.call_id = call.call_id  # (as harness_pre_call raises it)
                raise refusal
            if mark:
                call.state[self._took] = bucket

        return round_trip(
            lambda: backend.acquire(bucket, rate=rate, burst=burst, cost=cost, now=now),
            lambda: aacquire(bucket, rate=rate, burst=burst, cost=cost, now=now),
            decide,
            lambda exc: self.fail.handle(exc, call.tool.name, call.call_id, "rate limit not checked"),
        )

    def _refused_later(self, tool: Tool) -> bool:
        """Whether a ``pre_call`` hook after this plugin's may refuse or cancel an attempt of ``tool`` that took
        its token, before the tool runs: one that applies to the tool (its ``applies_to``: a timeout, its pool,
        its total, its worker process; a circuit breaker; a concurrency cap; a custom guard), but for the
        standard ``retry`` and ``otel``, which refuse nothing (known by their class: a plugin put in their
        place is judged as any other). This plugin is found in the plan by identity, whatever name it was
        registered under. Plugins not known yet: yes."""
        registry = self._registry() if self._registry is not None else None
        plugins = getattr(registry, "plugins", None)  # (set once the registry's plugins are built)
        steps = getattr(getattr(plugins, "plan", None), "steps", None)
        pre_call = steps.get("pre_call") if isinstance(steps, Mapping) else None
        if plugins is None or not isinstance(pre_call, tuple):
            return True
        own = next((i for i, step in enumerate(pre_call) if plugins.get(step.plugin) is self), None)
        if own is None:
            return True
        for step in pre_call[own + 1 :]:
            if type(plugins.get(step.plugin)).__module__ in _QUIET:
                continue
            try:
                if step.applies is None or step.applies(tool):
                    return True
            except Exception:  # (its predicate fails: the plan reports that when it prepares the tool)
                return True
        return False

    def _give_back(self, bucket: Hashable, limit: RateLimit) -> Await | None:
        """Return the token an attempt took from ``bucket``, when the backend can (``give_back``);
        a backend that cannot, or does not answer, keeps it spent."""
        backend = self.backend
        give = getattr(backend, "give_back", None)
        if give is None:
            return None
        burst, cost = limit.burst, limit.cost
        agive = getattr(backend, "agive_back", None)
        if agive is None:
            with contextlib.suppress(StateUnavailable):
                give(bucket, burst=burst, cost=cost)
            return None
        return round_trip(
            lambda: give(bucket, burst=burst, cost=cost),
            lambda: agive(bucket, burst=burst, cost=cost),
            lambda _: None,
            lambda _: None,
        )

    def _wait_budget(self, tool: Tool) -> float:
        """Seconds a call of ``tool`` may wait for tokens (0: a refusal stands)."""
        limit = tool.rate_limit or self.default
        if limit is None:
            return 0.0
        return limit.max_wait if limit.max_wait is not None else self.max_wait

    @hookimpl(tryfirst=True)
    @per_tool(lambda plugin, tool: plugin._on_error_for(tool))
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | Await | None:
        prepared = self._on_error_for(call.tool)
        return None if prepared is None else prepared(call, error)

    def _on_error_for(self, tool: Tool) -> Callable[[Call, BaseException], Retry | Await | None] | None:
        """For a rate-limited ``tool``: give back the token of an attempt that took one and did not run
        its tool (refused or cancelled after the rate limit admitted it); wait out this plugin's refusal
        when the tool or plugin allows waiting and the budget lasts."""
        limit = tool.rate_limit or self.default
        if limit is None:
            return None
        budget = self._wait_budget(tool)
        if budget <= 0.0 and not self._refused_later(tool):
            return None  # (an on_error hook is a round of the pipeline on every refusal: none where nothing is to do)

        def on_error(call: Call, error: BaseException) -> Retry | Await | None:
            took = call.take(self._took)  # the bucket this attempt took its token from (None: it took none)
            if call.ran:  # a tool's own RateLimitExceeded (an upstream 429) is not waited out
                return None
            if took is not None:  # admitted, then refused or cancelled before its tool ran: the token goes back
                return self._give_back(took, limit)
            if type(error) is not RateLimitExceeded or budget <= 0.0:
                return None
            wait = error.retry_after or 0.0
            waited = call.peek("rate_limit.waited", 0.0)
            if waited + wait > budget:
                return None
            call.state["rate_limit.waited"] = waited + wait
            return Retry(delay=wait)

        return on_error

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"refused": self.refused, **self.fail.stats()}
