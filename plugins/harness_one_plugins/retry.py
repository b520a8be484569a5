"""The ``retry`` plugin: run transient failures again, with capped exponential backoff and full jitter."""

from __future__ import annotations

import random
from typing import Any

from harness_one import (
    Call,
    CircuitOpen,
    Clock,
    IdempotencyConflict,
    PluginError,
    RateLimitExceeded,
    Retry,
    RetryableError,
    RetryPolicy,
    Tool,
    ToolBusy,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    applies_to,
    hookimpl,
)

from ._options import flag, own_or_default, provides

__all__ = ["MAX_REFUSALS", "RetryPlugin", "set_testing"]

_TESTING = False
_REFUSED = "retry.refused"  # call.state: refusals before the tool ran that this plugin waited out
MAX_REFUSALS = 100
"""Refusals before the tool ran (which use no attempt) that one call waits out; the next one stands."""


def _policy(plugin: RetryPlugin, tool: Tool) -> RetryPolicy | None:
    """The tool's policy, else the plugin's ``default`` unless the tool declined it (``retry=False``)."""
    return own_or_default(tool.retry, "retry" in tool.declined, plugin.default)


def _retries(plugin: RetryPlugin, tool: Tool) -> bool:
    return _policy(plugin, tool) is not None


def set_testing(on: bool = True) -> None:
    """Make every backoff wait zero seconds (for tests; attempts are still counted).

    A refusal's ``retry_after`` is still waited (on the registry's clock): it is when the
    refusal ends, and a zero wait would ask again at once (on a manual clock, up to
    :data:`MAX_REFUSALS` times at the same instant).
    """
    global _TESTING
    _TESTING = on


class RetryPlugin:
    """Retries a failed attempt when the tool's ``retry`` policy (or ``default``) says it is transient.

    What is transient, in order of checks:

    - never a :class:`ToolArgumentError` (or any error not listed below);
    - a refusal before the tool ran (:class:`RateLimitExceeded`, :class:`ToolBusy`,
      :class:`IdempotencyConflict`) that says when it ends: waited out when its
      ``retry_after`` fits in the remaining budget (one without, such as a full pool of
      timeout workers, stands at once); a concurrency cap's is decided by the cap itself,
      before this plugin (its ``max_wait``); a :class:`CircuitOpen` stands at once (an open
      circuit fails fast), unless ``wait_circuit`` is set: then it is waited out like the others;
    - once the tool started, only if re-running is safe: the tool is ``idempotent`` or ``read_only``, or the
      policy has ``rerun_non_idempotent`` (an idempotency key is not enough: it stores one
      outcome, but the tool's backend never sees it, and a re-run repeats what the started
      attempt may have done); then a :class:`RetryableError`, an exception of a type in ``on``
      (the tool's own exception), or :class:`ToolTimeout` when ``timeouts`` is set;
    - with ``timeouts`` set, also a :class:`ToolTimeout` before the tool started that says when
      to try again (``retry_after``: a ``process``-mode worker still starting at the attempt's
      deadline), waited out as a refusal (the tool ran no more than once);
    - any other failure before the tool started (``call.ran`` False: a ``pre_call`` hook's
      :class:`RetryableError`, a ``process``-mode worker that failed to start, arguments that
      do not pickle) is retried only when it says when to try again (``retry_after``), waited
      out as a refusal; one without stands at once (it is not matched against ``on``).

    Each wait is ``uniform(0, min(max_delay, initial * multiplier ** (attempt - 1 + refused)))``, or
    the error's ``retry_after`` when larger (``refused``: for a refusal before the tool ran, those the
    call waited out so far, at most :data:`MAX_REFUSALS`, as they use no attempt; else 0); no attempt
    starts after ``total`` seconds, nor at or after the call's ``total_deadline`` (its total timeout: a
    wait that ends there, a zero one once none of it is left, is not given): the last error stands instead.

    Args:
        default: a policy for tools that declare none (None: only those tools retry); a tool with
            ``retry=False`` declines it, and is never retried.
        clock: time source for the budget (default: the registry's clock).
        rng: source of jitter (``random.Random``; default the system's, which forked worker
            processes do not share: a seeded generator would give them the same waits).
        wait_circuit: wait out an open circuit's ``retry_after`` (when it fits in the budget)
            and try again, instead of failing at once with :class:`CircuitOpen`.
    """

    name = "retry"
    order = 30

    def __init__(
        self,
        *,
        default: RetryPolicy | dict[str, Any] | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        wait_circuit: bool = False,
    ) -> None:
        self.default = None if default is None else RetryPolicy.parse(default, tool="*")
        self.wait_circuit = flag(wait_circuit, "retry wait_circuit")
        self.clock = provides(clock, "retry clock", "a clock", ("now",), optional=True)
        rng = provides(rng, "retry rng", "a random number generator", ("uniform",), optional=True)
        self.rng = rng if rng is not None else random.SystemRandom()
        self.retries = 0
        self.gave_up = 0

    @hookimpl
    @applies_to(_retries)
    def harness_pre_call(self, call: Call) -> None:
        if call.attempt == 1 and not call.ran:
            call.state.setdefault("retry.start", (self.clock or call.registry.clock).now())

    def transient(self, call: Call, error: BaseException, policy: RetryPolicy) -> bool:
        """Whether ``error`` may be retried under ``policy`` (see the class docstring)."""
        if isinstance(error, CircuitOpen) and not self.wait_circuit:  # an open circuit fails fast
            return False
        if isinstance(error, (RateLimitExceeded, ToolBusy, CircuitOpen, IdempotencyConflict)):
            return not call.ran and error.retry_after is not None  # one that says when it ends
        if not call.ran and getattr(error, "retry_after", None) is None:  # before the tool started, no end said: stands
            return False
        if call.ran and not (call.tool.idempotent or call.tool.read_only or policy.rerun_non_idempotent):
            return False
        if isinstance(error, RetryableError):
            return True
        if isinstance(error, ToolTimeout):  # not the total budget spent before the tool ran, which says no retry_after
            # (one before the tool started that says when to try again: a process-mode worker still starting)
            return policy.timeouts and (call.ran or error.retry_after is not None)
        if isinstance(error, ToolExecutionError):
            return bool(policy.on) and isinstance(error.cause, policy.on)
        return False

    @hookimpl
    @applies_to(_retries)
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        if call.decision is not None:  # another plugin decided (the rate limit waits out its own refusal): nothing to count
            return None
        policy: RetryPolicy = _policy(self, call.tool)  # type: ignore[assignment]  # _retries: not None
        if not isinstance(error, ToolError) or error.replayed or not self.transient(call, error, policy):
            return None
        if call.ran and call.attempt >= policy.attempts:
            self.gave_up += 1
            return None
        # A refusal before the tool ran uses no attempt, so it is capped on its own, and each backed off one step
        # further: a retry_after of 0 with no jitter (initial 0, testing) asked again at once, without bound
        # (250,000 refusals in 2 s; for ever on a manual clock, whose time only sleeps move).
        refused = 0 if call.ran else call.peek(_REFUSED, 0)
        if refused >= MAX_REFUSALS:
            self.gave_up += 1
            return None
        try:
            backoff = min(policy.max_delay, policy.initial * policy.multiplier ** (call.attempt - 1 + refused))
        except OverflowError:  # past a float's range (attempt 1,025 at 2x): the cap
            backoff = policy.max_delay if policy.initial > 0 else 0.0
        delay = 0.0 if _TESTING else self.rng.uniform(0.0, backoff)
        hint = error.retry_after
        if hint is not None and hint > delay:
            delay = float(hint)
        now = (self.clock or call.registry.clock).now()
        # The budget starts at the first attempt, or at the first refusal when an earlier policy
        # (the rate limit) refused the call before this plugin's pre_call ran.
        started = call.state.setdefault("retry.start", now)
        # Over by less than a microsecond is float rounding: an open circuit's 30 s at a 30 s budget came as
        # 30.000000000000114 s and was given up.
        if now + delay - started > policy.total + 1e-6:
            self.gave_up += 1
            return None
        try:  # the core drops a Retry whose wait ends after the call's total timeout (its rule: Call.remaining)
            left = call.remaining(total=True)
        except PluginError:  # a total_deadline no number: the core reports it (of the hook that set it)
            left = None
        # No time left after the wait: the core's attempt would be refused (a ToolTimeout at ``left <= 0``, its
        # _time_left), the tool's own error replaced by it, so a wait that ends at the deadline (a zero one at
        # ``left <= 0`` too), which the core would take, is given up.
        if left is not None and delay >= left:
            self.gave_up += 1
            return None
        if not call.ran:
            call.state[_REFUSED] = refused + 1
        self.retries += 1
        return Retry(delay)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"retries": self.retries, "gave_up": self.gave_up}
