"""The retry plugin: transient errors only, backoff with jitter, budgets, idempotency safety."""

from __future__ import annotations

import asyncio
import math
import os
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fork_support import in_child
from structlog.testing import capture_logs

from harness_one import (
    Call,
    ManualClock,
    RateLimitExceeded,
    RetryableError,
    RetryPolicy,
    ToolArgumentError,
    ToolBusy,
    ToolCancelled,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)
from harness_one_plugins import RetryPlugin
from harness_one_plugins.retry import set_testing


class Flaky:
    """Fails ``failures`` times with ``error``, then returns ``"ok"``."""

    def __init__(self, failures: int, error: BaseException) -> None:
        self.failures = failures
        self.error = error
        self.runs = 0

    def __call__(self) -> str:
        self.runs += 1
        if self.runs <= self.failures:
            raise self.error
        return "ok"


@pytest.fixture
def reg(clock: ManualClock) -> ToolRegistry:
    return ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(7))}, clock=clock, autoload=False)


def test_two_transient_failures_then_success(reg: ToolRegistry, clock: ManualClock) -> None:
    tool = Flaky(2, OSError("connection reset"))
    reg.add(tool, name="fetch", idempotent=True, retry={"attempts": 3, "on": [OSError]})
    with capture_logs() as logs:
        result = reg.try_call("fetch")
    assert result.ok and result.value == "ok" and result.attempts == 3
    assert tool.runs == 3
    assert [e["outcome"] for e in logs] == ["retry", "retry", "ok"]
    assert reg.stats()["tools"]["fetch"]["retries"] == 2
    assert len(clock.sleeps) == 2


def test_non_transient_error_is_not_retried(reg: ToolRegistry) -> None:
    tool = Flaky(5, KeyError("nope"))
    reg.add(tool, name="f", idempotent=True, retry={"attempts": 5, "on": [OSError]})
    result = reg.try_call("f")
    assert isinstance(result.error, ToolExecutionError) and result.attempts == 1 and tool.runs == 1


def test_non_idempotent_tool_is_not_rerun_once_started(reg: ToolRegistry) -> None:
    tool = Flaky(1, RetryableError("503"))
    reg.add(tool, name="charge", retry=3)  # not idempotent
    result = reg.try_call("charge")
    assert not result.ok and tool.runs == 1
    again = Flaky(1, RetryableError("503"))
    reg.add(again, name="charge_keyed", retry=3)
    keyed = reg.try_call("charge_keyed", idempotency_key="order-7")  # a key stores one outcome: the backend never sees it
    assert isinstance(keyed.error, RetryableError) and keyed.attempts == 1 and again.runs == 1
    opted = Flaky(1, RetryableError("503"))
    reg.add(opted, name="opted", retry={"attempts": 3, "rerun_non_idempotent": True})
    assert reg.call("opted") == "ok" and opted.runs == 2


def test_a_keyed_call_of_a_non_idempotent_tool_is_not_rerun(clock: ManualClock) -> None:
    """An idempotency key does not make re-running safe: a thread-mode timeout abandons the tool, which
    runs on, and a retry under the same key ran it again beside it (three charges for one key); a
    tool that failed and returned was charged again by the retry (its backend never sees the key)."""
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(7))}, clock=clock, autoload=False)
    release = threading.Event()
    runs: list[int] = []

    def charge(amount: int) -> str:
        runs.append(amount)
        release.wait(10)
        return "charged"

    def idem(amount: int) -> str:
        runs.append(-amount)
        release.wait(10)
        return "read"

    reg.add(charge, timeout=0.05, retry={"attempts": 3, "timeouts": True, "initial": 0})
    reg.add(idem, timeout=0.05, idempotent=True, retry={"attempts": 3, "timeouts": True, "initial": 0})
    try:
        keyed = reg.try_call("charge", {"amount": 100}, idempotency_key="order-7")
        assert isinstance(keyed.error, ToolTimeout) and keyed.attempts == 1 and runs == [100]
        # an idempotent tool may run beside its abandoned attempt: its timeouts are retried as before
        assert reg.try_call("idem", {"amount": 1}).attempts == 3 and runs == [100, -1, -1, -1]
    finally:
        release.set()
    # a keyed call whose tool failed and returned (nothing runs on) is not re-run either
    flaky = Flaky(1, RetryableError("503"))
    reg.add(flaky, name="flaky", retry=3)
    with pytest.raises(RetryableError):
        reg.call("flaky", idempotency_key="k")
    assert flaky.runs == 1


def test_backoff_past_a_float_s_range_is_the_cap(clock: ManualClock) -> None:
    """``initial * multiplier ** (attempt - 1)`` overflowed at attempt 1,025: the hook failed (a PluginError)."""
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(3))}, clock=clock, autoload=False)
    tool = Flaky(1100, RetryableError("busy"))
    reg.add(tool, name="f", idempotent=True, retry={"attempts": 1101, "initial": 0.001, "max_delay": 0.5, "total": 10**9})
    assert reg.call("f") == "ok" and tool.runs == 1101
    assert len(clock.sleeps) == 1100 and all(0 <= s <= 0.5 for s in clock.sleeps)
    zero = Flaky(1100, RetryableError("busy"))
    reg.add(zero, name="z", idempotent=True, retry={"attempts": 1101, "initial": 0, "max_delay": 0.5, "total": 10**9})
    assert reg.call("z") == "ok" and clock.sleeps[1100:] == [0.0] * 1100


def test_argument_errors_are_never_retried(reg: ToolRegistry) -> None:
    def strict(n: int) -> int:
        raise ToolArgumentError("n must be even")

    reg.add(strict, idempotent=True, retry={"attempts": 5, "on": [Exception]})
    assert reg.try_call("strict", {"n": 1}).attempts == 1
    assert reg.try_call("strict", {"n": "x"}).attempts == 1


def test_backoff_is_capped_full_jitter(clock: ManualClock) -> None:
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(1))}, clock=clock, autoload=False)
    tool = Flaky(6, RetryableError("busy"))
    reg.add(
        tool, name="f", idempotent=True, retry={"attempts": 7, "initial": 1.0, "multiplier": 2.0, "max_delay": 5.0, "total": 1000}
    )
    assert reg.call("f") == "ok"
    caps = [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert len(clock.sleeps) == 6
    assert all(0 <= s <= cap for s, cap in zip(clock.sleeps, caps))
    assert len(set(clock.sleeps)) == 6  # jittered, not fixed


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_does_not_repeat_its_parents_jitter(clock: ManualClock) -> None:
    """The default jitter source: worker processes forked from one parent (a pre-fork server)
    that retry together must not wait the same times, or they come back together."""
    reg = ToolRegistry(plugins={"retry": RetryPlugin()}, clock=clock, autoload=False)
    reg.add(Flaky(4, RetryableError("busy")), name="f", idempotent=True, retry={"attempts": 5, "total": 1000})

    def child() -> bytes:
        assert reg.call("f") == "ok"
        return repr(clock.sleeps).encode()

    theirs = in_child(child).decode()
    assert reg.call("f") == "ok" and len(clock.sleeps) == 4
    assert theirs.startswith("[") and repr(clock.sleeps) != theirs, theirs


def test_retry_after_hint_and_total_budget(clock: ManualClock) -> None:
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(0))}, clock=clock, autoload=False)
    tool = Flaky(10, RetryableError("slow down", retry_after=3.0))
    reg.add(tool, name="f", idempotent=True, retry={"attempts": 10, "initial": 0.01, "total": 7.0})
    result = reg.try_call("f")
    assert not result.ok and isinstance(result.error, RetryableError)
    assert clock.sleeps == [3.0, 3.0]  # a third wait would pass the 7 s budget
    assert tool.runs == 3


def test_rate_limit_rechecked_and_waited_out(clock: ManualClock) -> None:
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(0))}, clock=clock, autoload=False)
    tool = Flaky(1, RetryableError("blip"))
    reg.add(tool, name="f", idempotent=True, rate_limit={"rate": 2, "burst": 1}, retry={"attempts": 3, "initial": 0.0})
    assert reg.call("f") == "ok"
    # attempt 1 took the only token; attempt 2 was refused by the rate limit and waited 0.5 s for a token
    assert clock.sleeps[-1] == pytest.approx(0.5)
    assert reg.stats()["rate_limit"]["refused"] == 1
    plain = ToolRegistry(clock=clock, autoload=False)
    plain.add(lambda: 1, name="g", rate_limit={"rate": 1, "burst": 1})
    plain.call("g")
    with pytest.raises(RateLimitExceeded):  # without a retry policy: refused at once, as in the seed
        plain.call("g")


class Ticking(ManualClock):
    """A manual clock on which a zero wait still takes a moment (so a loop of them ends)."""

    def sleep(self, seconds: float) -> None:
        super().sleep(max(seconds, 0.01))


class Saturated:
    """A shared bucket other workers keep empty: refuses ``n`` times, each time for 1 s."""

    def __init__(self, n: int) -> None:
        self.n = n

    def acquire(self, key: Any, rate: float, burst: float, cost: float, now: float) -> float:
        self.n -= 1
        return 1.0 if self.n >= 0 else 0.0


@pytest.mark.parametrize(("policy", "bound"), [({"retry": {"total": 5}}, 5.0), ({"total_timeout": 3.0}, 3.0)])
def test_budgets_count_from_the_first_refusal(clock: ManualClock, policy: dict[str, Any], bound: float) -> None:
    """The rate limit refuses before retry and timeout see the call: their budgets still run (the caller waited 200 s)."""
    from harness_one_plugins import RateLimitPlugin, TimeoutPlugin

    plugins = {"rate_limit": RateLimitPlugin(backend=Saturated(200)), "retry": RetryPlugin(rng=random.Random(1))}
    reg = ToolRegistry(clock=clock, autoload=False, plugins={**plugins, "timeout": TimeoutPlugin(mode="none")})
    reg.add(lambda: "ok", name="f", idempotent=True, rate_limit={"rate": 1, "burst": 1}, **{"retry": {"attempts": 3}, **policy})
    start = clock.now()
    result = reg.try_call("f")
    assert isinstance(result.error, RateLimitExceeded) and clock.now() - start <= bound and len(clock.sleeps) <= bound


def test_no_wait_ends_after_the_total_timeout(clock: ManualClock) -> None:
    """A RetryableError(retry_after=10) under total_timeout=1 is the answer at once (the caller waited 10 s)."""
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(1))}, clock=clock, autoload=False)
    tool = Flaky(1, RetryableError("slow down", retry_after=10.0))
    reg.add(tool, name="f", idempotent=True, total_timeout=1.0, timeout_mode="none", retry={"attempts": 5})
    result = reg.try_call("f")
    assert isinstance(result.error, RetryableError) and tool.runs == 1 and clock.sleeps == []


def test_the_total_budget_spent_before_the_tool_ran_is_not_retried(clock: ManualClock) -> None:
    """The timeout plugin's own refusal (its total spent) is not a timeout of the tool: with timeouts=True it
    was retried until the retry budget ran out."""
    from harness_one import ToolTimeout

    ticking = Ticking()
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(1))}, clock=ticking, autoload=False)
    runs: list[int] = []

    def warming() -> str:
        runs.append(1)
        ticking.advance(0.325)  # after the third run 0.005 s is left: its zero wait (0.01 s here) spends it
        raise RetryableError("still warming up")

    reg.add(
        warming, idempotent=True, total_timeout=1.0, timeout_mode="none", retry={"attempts": 10, "initial": 0, "timeouts": True}
    )
    result = reg.try_call("warming")
    assert isinstance(result.error, ToolTimeout) and len(runs) == 3 and len(ticking.sleeps) == 3


def test_timeouts_retried_only_when_asked(reg: ToolRegistry) -> None:
    from harness_one import ToolTimeout

    tool = Flaky(1, ToolTimeout(1.0))
    reg.add(tool, name="t", idempotent=True, retry={"attempts": 3, "timeouts": True})
    assert reg.call("t") == "ok"
    other = Flaky(1, ToolTimeout(1.0))
    reg.add(other, name="u", idempotent=True, retry=3)
    assert not reg.try_call("u").ok


def test_testing_switch_zeroes_waits(clock: ManualClock) -> None:
    set_testing(True)
    try:
        reg = ToolRegistry(clock=clock, autoload=False)
        tool = Flaky(2, RetryableError("x"))
        reg.add(tool, name="f", idempotent=True, retry={"attempts": 3, "initial": 10})
        assert reg.call("f") == "ok"
        assert clock.sleeps == [0.0, 0.0]
        ticking = Ticking()
        limited = ToolRegistry(clock=ticking, autoload=False)
        limited.add(lambda: "ok", name="f", idempotent=True, rate_limit={"rate": 1, "burst": 1}, retry=3)
        limited.call("f")
        assert limited.call("f") == "ok"  # the refusal's 1 s is waited: zero waits asked again for ever
        assert ticking.sleeps == [1.0]
    finally:
        set_testing(False)


def test_registry_default_policy(clock: ManualClock) -> None:
    reg = ToolRegistry(plugins={"retry": RetryPlugin(default={"attempts": 2, "initial": 0})}, clock=clock, autoload=False)
    tool = Flaky(1, RetryableError("x"))
    reg.add(tool, name="f", idempotent=True)
    assert reg.call("f") == "ok" and tool.runs == 2


@pytest.mark.parametrize(
    "bad",
    [{"attempts": 0}, {"attempts": 2.5}, {"initial": -1}, {"multiplier": 0.5}, {"on": ["OSError"]}, {"tries": 3}, "often"],
)
def test_bad_policies(bad: Any) -> None:
    with pytest.raises(ToolDefinitionError):
        RetryPolicy.parse(bad, tool="t")


def test_policy_forms() -> None:
    assert RetryPolicy.parse(True, tool="t") == RetryPolicy()
    assert RetryPolicy.parse(5, tool="t").attempts == 5
    assert RetryPolicy.parse({"on": OSError}, tool="t").on == (OSError,)


@pytest.fixture(autouse=True)
def _testing_off() -> Iterator[None]:
    set_testing(False)
    yield
    set_testing(False)


class _Busy:
    """Refuses every attempt before it runs with a ToolBusy, with or without a retry_after."""

    name = "busy"

    def __init__(self, retry_after: float | None) -> None:
        self.retry_after = retry_after
        self.refusals = 0

    @hookimpl
    def harness_pre_call(self, call: Any) -> None:
        self.refusals += 1
        raise ToolBusy("the pool is full", tool=call.tool.name, retry_after=self.retry_after)


@pytest.mark.parametrize(("retry_after", "refusals"), [(None, 1), (0.5, 3)])
def test_a_refusal_is_waited_out_only_when_it_says_when_it_ends(
    clock: ManualClock, retry_after: float | None, refusals: int
) -> None:
    """A refusal without retry_after (a full pool) stands at once; polled at `initial=0`, it was a hot loop for `total`."""
    busy = _Busy(retry_after)
    reg = ToolRegistry(plugins={"busy": busy}, clock=clock, autoload=False)
    reg.add(lambda: "ran", name="quick", idempotent=True, retry={"attempts": 3, "initial": 0, "total": 1.2})
    result = reg.try_call("quick")
    assert isinstance(result.error, ToolBusy) and busy.refusals == refusals
    assert clock.sleeps == ([] if retry_after is None else [0.5, 0.5])


@pytest.mark.parametrize("total", [math.inf, math.nan])
def test_a_retry_total_must_be_finite(total: float) -> None:
    """An infinite total let a server's retry_after of a year (or 1e300 s: OverflowError in sleep) be waited."""
    with pytest.raises(ToolDefinitionError, match="retry total must be a finite non-negative number"):
        ToolRegistry(autoload=False).add(lambda: 1, name="t", retry={"total": total})


def test_a_tool_error_in_retry_on_is_refused_at_definition() -> None:
    """A tool's own ToolError is never wrapped, so ``on`` never matched it: a setting that silently did nothing."""

    class UpstreamDown(ToolError):
        pass

    with pytest.raises(ToolDefinitionError, match="raise RetryableError"):
        ToolRegistry(autoload=False).add(lambda: 1, name="t", retry={"on": [OSError, UpstreamDown]})


def test_attempts_count_the_runs_of_the_tool(clock: ManualClock) -> None:
    """A retry refused before the tool ran again (the rate limit) reported attempts=2 for one run."""
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(1))}, clock=clock, autoload=False)
    runs: list[int] = []

    def f() -> None:
        runs.append(1)
        raise RetryableError("503")

    reg.add(f, idempotent=True, retry={"attempts": 3}, rate_limit={"rate": 0.01, "burst": 1})
    result = reg.try_call("f")
    assert isinstance(result.error, RateLimitExceeded) and runs == [1] and result.attempts == 1
    refused = reg.try_call("f")  # refused before its first run: one attempt, as ever
    assert isinstance(refused.error, RateLimitExceeded) and refused.attempts == 1 and runs == [1]


def test_try_call_and_atry_call_count_attempts_alike() -> None:
    """try_call's success path reported the attempt's number (2) where atry_call reported the runs (1)."""
    import asyncio

    from harness_one import Outcome

    class Fallback:
        @hookimpl
        def harness_pre_call(self, call: Any) -> Outcome | None:
            return Outcome.success("from the plugin") if call.attempt > 1 else None

    reg = ToolRegistry(plugins={"fallback": Fallback()}, autoload=False)

    def flaky() -> None:
        raise RetryableError("transient")

    reg.add(flaky, idempotent=True, retry={"attempts": 3, "initial": 0})
    sync, aio = reg.try_call("flaky"), asyncio.run(reg.atry_call("flaky"))
    assert sync.value == aio.value == "from the plugin" and sync.attempts == aio.attempts == 1


def test_a_wait_another_plugin_decided_is_not_counted_as_a_retry(clock: ManualClock) -> None:
    """The rate limit waited out its own refusal and the call went well, yet the retry plugin counted
    a retry (its answer was not the decision) and, on the next refusal, gave up on a call that had not ended."""
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(1))}, clock=clock, autoload=False)
    reg.add(lambda: "ok", name="f", idempotent=True, retry={"attempts": 3}, rate_limit={"rate": 1, "burst": 1, "max_wait": 5})
    assert reg.call("f") == "ok" and reg.call("f") == "ok"  # the second waited 1 s for its token
    assert clock.sleeps == [1.0] and reg.stats()["retry"] == {"retries": 0, "gave_up": 0}


class CancellingClock(ManualClock):
    """A manual clock whose first wait cancels ``call`` meanwhile (the caller gave up during a retry's wait)."""

    call: Call | None = None

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.call is not None:
            self.call.cancel()
            self.call = None


@pytest.mark.parametrize("timed_out", [False, True], ids=["failed", "timed-out"])
@pytest.mark.parametrize("aio", [False, True], ids=["call", "acall"])
def test_a_call_cancelled_during_a_retry_wait_starts_no_further_attempt(aio: bool, timed_out: bool) -> None:
    """``call.cancel()`` while the retry plugin waits: ToolCancelled when the wait ends, the tool not run again
    (before: the cancel marked only the failed attempt, and the next two attempts ran; and when that attempt had
    been cancelled already, at its timeout, a cancel during the wait changed nothing)."""
    clock = CancellingClock()
    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(0))}, clock=clock, autoload=False)
    runs: list[int] = []

    def flaky(call: Call) -> str:
        runs.append(call.attempt)
        clock.call = call
        if timed_out:
            call.cancel()  # as the core does at an attempt's timeout, before the retry's wait
        raise RetryableError("busy", retry_after=5.0)

    reg.add(flaky, name="flaky", idempotent=True, retry={"attempts": 3, "total": 100})
    result = asyncio.run(reg.atry_call("flaky")) if aio else reg.try_call("flaky")
    assert isinstance(result.error, ToolCancelled), result.error
    assert runs == [1] and clock.sleeps == [5.0]
