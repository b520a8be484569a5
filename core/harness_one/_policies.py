"""Per-tool policies, parsed and checked at definition time: rate limit, retry, circuit breaker."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from ._errors import ToolDefinitionError, ToolError

__all__ = ["CircuitBreakerPolicy", "RateLimit", "RetryPolicy"]


def _as_seconds(value: Any, *, zero: bool = False, infinite: bool = False) -> float | None:
    """``value`` as a float when it is an int or float (not a bool, not text) above 0 (at least 0 with
    ``zero``) and finite as a float, else None: NaN, and an int past a float's range (``10**400 < math.inf``
    holds, yet it would fail every call where it meets a float), are not; with ``infinite``, ``math.inf``
    is (no limit). The one check of a number of seconds: policies and a tool's seconds
    (:func:`_positive`), runner options, the state stores' and URLs' timeouts."""
    if not _real(value) or not (value >= 0 if zero else value > 0):  # NaN too
        return None
    try:
        found = float(value)
    except OverflowError:
        return None
    return found if found < math.inf or infinite else None


def _positive(
    value: Any, what: str, tool: str, *, zero: bool = False, finite: bool = False, infinite: bool = False, unit: str = ""
) -> None:
    """Refuse ``value`` unless it is an int or float (not a bool) > 0 (>= 0 with ``zero``) and, with
    ``finite``, finite as a float (:func:`_as_seconds`; with ``infinite`` too, ``math.inf`` passes: no
    limit). A :class:`ToolDefinitionError` naming ``what`` (a number of ``unit`` when given)."""
    if finite:
        ok = _as_seconds(value, zero=zero, infinite=infinite) is not None
    else:
        ok = _real(value) and (value >= 0 if zero else value > 0)
    if not ok:
        kind = f"{'finite ' if finite and not infinite else ''}{'non-negative' if zero else 'positive'}"
        shown = _shown(value) if finite else repr(value)
        also = " or math.inf (no limit)" if infinite else ""
        raise ToolDefinitionError(f"Tool '{tool}': {what} must be a {kind} number{unit}{also}, got {shown}.", tool=tool)


def _shown(value: Any) -> str:
    """``value`` as a refusal of :func:`_as_seconds` names it: an int above 0 was refused for being past a
    float's range, said so (not its hundreds of digits); anything else its ``repr``."""
    return "an integer past a float's range" if _real(value) and isinstance(value, int) and value > 0 else repr(value)


def _real(value: Any) -> bool:
    """Whether ``value`` is an int or float, not a bool (``True`` is no ratio; ``"0.5"`` is no number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _from_mapping(cls: Any, value: Mapping[str, Any], what: str, tool: str) -> Any:
    names = {f.name for f in fields(cls)}
    unknown = set(value) - names
    if unknown:
        raise ToolDefinitionError(f"Tool '{tool}': unknown {what} keys {sorted(unknown)}; known: {sorted(names)}.", tool=tool)
    return cls(**value)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A token bucket: ``rate`` tokens per second, ``burst`` capacity, starting full.

    ``key`` names a context field (or is a function of the call) that gives each caller its
    own bucket; ``cost`` is the tokens one call takes; ``max_wait`` > 0 waits that long for a
    token before refusing (``None``: the registry's default behaviour, refuse at once).
    """

    rate: float
    burst: float
    key: str | Callable[[Any], Any] | None = None
    cost: float = 1.0
    max_wait: float | None = None

    @classmethod
    def parse(cls, value: RateLimit | Mapping[str, Any], *, tool: str) -> RateLimit:
        """Accept the seed's ``{"rate": 10, "burst": 20}`` form, refusing nonsense at definition time."""
        if isinstance(value, RateLimit):
            limit = value
        elif isinstance(value, Mapping):
            unknown = set(value) - {"rate", "burst", "key", "cost", "max_wait"}
            if unknown:
                raise ToolDefinitionError(f"Tool '{tool}': unknown rate_limit keys {sorted(unknown)}.", tool=tool)
            if "rate" not in value:
                raise ToolDefinitionError(f"Tool '{tool}': rate_limit needs 'rate' (tokens per second).", tool=tool)
            rate = value["rate"]
            _positive(rate, "rate_limit rate", tool, finite=True)  # before it is compared below
            limit = cls(
                rate=rate,
                burst=value.get("burst", max(1.0, rate)),
                key=value.get("key"),
                cost=value.get("cost", 1.0),
                max_wait=value.get("max_wait"),
            )
        else:
            raise ToolDefinitionError(f"Tool '{tool}': rate_limit must be a mapping like {{'rate': 5, 'burst': 10}}.", tool=tool)
        for attr in ("rate", "burst", "cost"):
            _positive(getattr(limit, attr), f"rate_limit {attr}", tool, finite=True)
        if limit.cost > limit.burst:
            raise ToolDefinitionError(
                f"Tool '{tool}': rate_limit cost {limit.cost} exceeds burst {limit.burst}; no call could pass.", tool=tool
            )
        if limit.max_wait is not None:
            _positive(limit.max_wait, "rate_limit max_wait (seconds)", tool, zero=True, finite=True)
        if limit.key is not None and not ((isinstance(limit.key, str) and limit.key.strip()) or callable(limit.key)):
            raise ToolDefinitionError(
                f"Tool '{tool}': rate_limit key must be a context field name or a function of the call, got {limit.key!r}.",
                tool=tool,
            )
        if type(limit.rate) is not float or type(limit.burst) is not float or type(limit.cost) is not float:
            # floats throughout: the bucket arithmetic of every call stays on the interpreter's float path
            limit = replace(limit, rate=float(limit.rate), burst=float(limit.burst), cost=float(limit.cost))
        return limit


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how a failed attempt is run again (see ``docs/plugins.md``, ``retry``).

    ``attempts`` counts runs including the first. Waits back off exponentially from
    ``initial`` by ``multiplier`` with full jitter, each capped at ``max_delay``; no attempt
    starts after ``total`` seconds. Only transient errors are retried: :class:`RetryableError`,
    exceptions of the types in ``on`` raised by the tool, :class:`ToolTimeout` when
    ``timeouts`` is true, and refusals before the tool ran whose ``retry_after`` fits in the
    budget (a rate limit's; an open circuit's only with the plugin's ``wait_circuit``; a
    concurrency cap waits out its own), at most ``MAX_REFUSALS`` (100) a call. A tool that is neither idempotent nor read-only is never run again once
    it started, unless ``rerun_non_idempotent`` is true (an idempotency key is not enough: it dedupes
    repeated calls, it does not make a rerun of a started one safe).
    """

    attempts: int = 3
    initial: float = 0.1
    multiplier: float = 2.0
    max_delay: float = 5.0
    total: float = 30.0
    on: tuple[type[BaseException], ...] = ()
    timeouts: bool = False
    rerun_non_idempotent: bool = False

    @classmethod
    def parse(cls, value: RetryPolicy | Mapping[str, Any] | int | bool, *, tool: str) -> RetryPolicy:
        """``retry=3``, ``retry=True`` (defaults) or ``retry={"attempts": 5, "on": [OSError]}``."""
        if isinstance(value, RetryPolicy):
            policy = value
        elif value is True:
            policy = cls()
        elif isinstance(value, int) and not isinstance(value, bool):
            policy = cls(attempts=value)
        elif isinstance(value, Mapping):
            data = dict(value)
            if "on" in data:
                on = data["on"]
                data["on"] = tuple(on) if isinstance(on, (list, tuple, set, frozenset)) else (on,)
            policy = _from_mapping(cls, data, "retry", tool)
        else:
            raise ToolDefinitionError(
                f"Tool '{tool}': retry must be True, a number of attempts or a mapping, got {value!r}.", tool=tool
            )
        if isinstance(policy.attempts, bool) or not isinstance(policy.attempts, int) or policy.attempts < 1:
            raise ToolDefinitionError(
                f"Tool '{tool}': retry attempts must be an integer >= 1, got {policy.attempts!r}.", tool=tool
            )
        for name in ("initial", "max_delay", "total"):  # finite: a wait must end (a server's retry_after is bounded by total)
            _positive(getattr(policy, name), f"retry {name}", tool, zero=True, finite=True)
        if not (_real(policy.multiplier) and 1 <= policy.multiplier < math.inf):
            raise ToolDefinitionError(
                f"Tool '{tool}': retry multiplier must be a finite number >= 1, got {policy.multiplier!r}.", tool=tool
            )
        for name in ("timeouts", "rerun_non_idempotent"):  # "false" would read as true
            if not isinstance(getattr(policy, name), bool):
                raise ToolDefinitionError(
                    f"Tool '{tool}': retry {name} must be True or False, got {getattr(policy, name)!r}.", tool=tool
                )
        for exc in policy.on:
            if not (isinstance(exc, type) and issubclass(exc, BaseException)):
                raise ToolDefinitionError(f"Tool '{tool}': retry 'on' must list exception types, got {exc!r}.", tool=tool)
            if issubclass(exc, ToolError):  # never wrapped, so never matched: say what works
                raise ToolDefinitionError(
                    f"Tool '{tool}': retry 'on' lists {exc.__name__}, a ToolError, which the tool's own exceptions "
                    "are matched against only when they are not ToolErrors: raise RetryableError (with retry_after) "
                    "for a transient failure.",
                    tool=tool,
                )
        return policy


@dataclass(frozen=True, slots=True)
class CircuitBreakerPolicy:
    """Open after ``failure_ratio`` of at least ``min_calls`` calls in the last ``window``
    seconds failed; stay open ``open_for`` seconds; then let ``probes`` calls through, and
    close when they all succeed (one failure opens it again).

    Defaults sit between Polly (10% over >= 100 calls in 30 s, open 5 s) and resilience4j
    (50% over 100 calls, open 60 s, 10 probes), tuned for tool calls, which are far fewer
    than HTTP requests: 50% over >= 10 calls in 60 s, open 30 s, 3 probes.

    ``key`` names the circuit: tools with the same ``key`` share one circuit (their calls
    count together, and when it opens they all fail fast); ``None``, the default, gives each
    tool its own circuit under its name. A key may be a tool's name, to share that tool's circuit.
    """

    failure_ratio: float = 0.5
    min_calls: int = 10
    window: float = 60.0
    open_for: float = 30.0
    probes: int = 3
    key: str | None = None

    @classmethod
    def parse(cls, value: CircuitBreakerPolicy | Mapping[str, Any] | bool, *, tool: str) -> CircuitBreakerPolicy:
        if isinstance(value, CircuitBreakerPolicy):
            policy = value
        elif value is True:
            policy = cls()
        elif isinstance(value, Mapping):
            policy = _from_mapping(cls, value, "circuit_breaker", tool)
        else:
            raise ToolDefinitionError(f"Tool '{tool}': circuit_breaker must be True or a mapping, got {value!r}.", tool=tool)
        if not (_real(policy.failure_ratio) and 0 < policy.failure_ratio <= 1):
            raise ToolDefinitionError(
                f"Tool '{tool}': circuit_breaker failure_ratio must be a number in (0, 1], got {policy.failure_ratio!r}.",
                tool=tool,
            )
        for name in ("min_calls", "probes"):
            given = getattr(policy, name)
            if isinstance(given, bool) or not isinstance(given, int) or given < 1:
                raise ToolDefinitionError(
                    f"Tool '{tool}': circuit_breaker {name} must be an integer >= 1, got {given!r}.", tool=tool
                )
        # finite: an infinite window broke the breaker's trim (each failure became a PluginError), an
        # infinite open_for told the model "Retry after inf s"
        _positive(policy.window, "circuit_breaker window", tool, finite=True)
        _positive(policy.open_for, "circuit_breaker open_for", tool, finite=True)
        if policy.key is not None and not (isinstance(policy.key, str) and policy.key):
            raise ToolDefinitionError(f"Tool '{tool}': circuit_breaker key must be a non-empty string.", tool=tool)
        return policy
