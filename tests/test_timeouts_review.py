"""What a review of timeouts, retries and the bulkhead found: a retry after a process-mode timeout
that never ran the tool again, a total timeout overshot by the hooks after the timeout plugin's,
a retry policy that overrode a bulkhead's ``max_wait``, and an async tool that beat its timeout
by swallowing the cancellation."""

from __future__ import annotations

import asyncio
import os
import shlex
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import tools_for_processes as tfp
from tools_for_processes import a_call

from harness_one import (
    Call,
    ManualClock,
    ProcessRunner,
    RetryableError,
    ToolBusy,
    ToolRegistry,
    ToolTimeout,
    _registry,
    hookimpl,
)
from harness_one._runners import _ProcessPool
from harness_one_plugins import ConcurrencyPlugin, RetryPlugin, TimeoutPlugin

# --- 1. a retry after a process-mode timeout waits for the replacement worker's start ----------


def test_a_start_that_misses_the_deadline_says_when_to_try_again(processes: Callable[..., ProcessRunner]) -> None:
    """The refusal said nothing, so a retry policy that retries timeouts let it stand (the tool had not run)."""
    runner = processes()
    call = a_call()
    call.ran = True  # as the core sets it before it calls the runner
    with pytest.raises(ToolTimeout) as err:
        runner.run(call, tfp.sleepy, {"seconds": 5}, 0.001)  # no worker starts in 1 ms
    assert not call.ran and err.value.retry_after is not None and err.value.retry_after >= 0.05
    assert not call.cancelled  # nothing of the call ran: nothing to cancel
    assert runner.run(a_call(), tfp.pid, {}, 30) == runner.last_pid  # the same worker, now ready


class _NotStarted:
    """Refuses the first ``times`` attempts as a process-mode worker still starting at the deadline does."""

    name = "not_started"

    def __init__(self, times: int, retry_after: float | None) -> None:
        self.times, self.retry_after = times, retry_after

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if self.times:
            self.times -= 1
            err = ToolTimeout(0.1, tool=call.tool.name, call_id=call.call_id)
            err.retry_after = self.retry_after
            raise err


@pytest.mark.parametrize("retry_after", [0.2, None])
def test_a_timeout_before_the_tool_started_is_retried_when_it_says_when(clock: ManualClock, retry_after: float | None) -> None:
    """Waited out as a refusal (no attempt counted, the tool runs once); one without retry_after (the total spent) stands."""
    refusing = _NotStarted(2, retry_after)
    reg = ToolRegistry(plugins={"not_started": refusing}, clock=clock, autoload=False)
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or "ran", name="t", retry={"attempts": 2, "timeouts": True, "initial": 0})
    result = reg.try_call("t")
    if retry_after is None:
        assert isinstance(result.error, ToolTimeout) and runs == [] and clock.sleeps == []
    else:
        assert result.value == "ran" and runs == [1] and result.attempts == 1 and clock.sleeps == [0.2, 0.2]
    reg.add(lambda: "ran", name="u", retry={"attempts": 2, "initial": 0})  # timeouts not retried: it stands
    refusing.times = 1
    assert isinstance(reg.try_call("u").error, ToolTimeout)


def test_an_idle_worker_that_started_is_taken_before_one_still_starting() -> None:
    """A worker parked while starting went to the end of the idle list: the next call took it and waited for its start."""
    alive = SimpleNamespace(poll=lambda: None)
    ready, starting = SimpleNamespace(ready=True, process=alive), SimpleNamespace(ready=False, process=alive)
    pool = _ProcessPool(2, None, lambda: 0.0)
    pool.idle = [ready, starting]  # type: ignore[list-item]
    assert pool.take() is ready and pool.take() is starting
    pool.idle = [starting, ready]  # type: ignore[list-item]
    assert pool.take() is ready and pool.take() is starting


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    with tfp.no_leftovers():
        yield


@pytest.mark.usefixtures("no_leftovers")
def test_a_retry_after_a_process_timeout_runs_the_tool_again(tmp_path: Path) -> None:
    """A retry after a process-mode timeout runs the tool again, in the killed worker's replacement.

    (Its start once took the retried attempt's whole timeout and the attempt was refused for good;
    the two tests above check that path exactly, on a manual clock. This one runs real processes
    with a timeout long enough for a loaded machine to touch the marker before it.)"""
    plugin = TimeoutPlugin(mode="process", max_processes=1)
    reg = ToolRegistry(plugins={"timeout": plugin, "retry": RetryPlugin()}, autoload=False)
    reg.add(os.system, name="warm", timeout=30)
    reg.add(os.system, name="hang_once", timeout=2.0, idempotent=True, retry={"attempts": 3, "timeouts": True, "initial": 0.001})
    assert reg.call("warm", {"command": "true"}) == 0  # a warm worker for the first attempt
    marker = shlex.quote(str(tmp_path / "ran"))
    result = reg.try_call("hang_once", {"command": f"test -e {marker} || {{ touch {marker}; exec sleep 30; }}"})
    assert result.ok, result.error
    assert result.value == 0 and result.attempts == 2  # the tool ran twice: killed once, then answered
    assert plugin.processes.stats()["killed"] == 1


# --- 2. the total timeout bounds the tool's wait, whatever the hooks after the timeout plugin took ---


class _Slow:
    """A pre_call hook after the timeout plugin's that takes ``seconds`` (on the manual clock)."""

    name = "slow_gate"
    order = 45

    def __init__(self, clock: ManualClock, seconds: float, runner: Any = None) -> None:
        self.clock, self.seconds, self.runner = clock, seconds, runner

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.clock.advance(self.seconds)
        if self.runner is not None:
            call.runner = self.runner


class _Recording:
    """A runner that records the timeout it is given and runs the tool in the caller's thread."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def run(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        self.timeouts.append(timeout)
        return fn(**kwargs)

    async def arun(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        self.timeouts.append(timeout)
        return fn(**kwargs)


def _overshooting(clock: ManualClock, seconds: float, runner: Any = None) -> ToolRegistry:
    reg = ToolRegistry(plugins={"slow_gate": _Slow(clock, seconds, runner)}, clock=clock, autoload=False)
    reg.add(lambda: "done", name="work", total_timeout=1.0)

    async def awork() -> str:
        return "done"

    reg.add(awork, total_timeout=1.0)
    return reg


@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_runner_is_given_what_is_left_of_the_total_timeout(clock: ManualClock, how: str) -> None:
    """A hook after the timeout plugin's took 0.4 s of the total 1 s; the runner was given 1 s from the tool's start."""
    runner = _Recording()
    reg = _overshooting(clock, 0.4, runner)
    result = asyncio.run(reg.atry_call("work")) if how == "acall" else reg.try_call("work")
    assert result.value == "done" and runner.timeouts == [pytest.approx(0.6)]


@pytest.mark.parametrize("how", ["call", "acall"])
@pytest.mark.parametrize("tool", ["work", "awork"])
def test_a_total_timeout_spent_before_the_tool_starts_refuses_it_at_once(clock: ManualClock, how: str, tool: str) -> None:
    """Nothing left of the total: ToolTimeout at once, the tool not started (it was started with its full timeout)."""
    runner = _Recording()
    reg = _overshooting(clock, 1.5, runner)
    result = asyncio.run(reg.atry_call(tool)) if how == "acall" else reg.try_call(tool)
    assert isinstance(result.error, ToolTimeout) and runner.timeouts == []


@pytest.mark.parametrize("how", ["call", "acall"])
def test_an_async_tool_is_cancelled_at_what_is_left_of_the_total(
    clock: ManualClock, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scopes: list[float] = []

    def recording(delay: float) -> Any:
        scopes.append(delay)
        return asyncio.timeout(delay)

    monkeypatch.setattr(_registry, "_timeout_cm", recording)
    reg = _overshooting(clock, 0.25)
    result = asyncio.run(reg.atry_call("awork")) if how == "acall" else reg.try_call("awork")
    assert result.value == "done" and scopes == [pytest.approx(0.75)]


# --- 3. a bulkhead's max_wait governs, also under a retry policy -----------------------------------


def _held(clock: ManualClock, max_wait: float, retry: Any) -> tuple[ToolRegistry, RetryPlugin, ConcurrencyPlugin]:
    """A registry whose tool's one slot is taken."""
    retries, cap = RetryPlugin(), ConcurrencyPlugin(max_wait=max_wait, poll=0.01)
    reg = ToolRegistry(plugins={"retry": retries, "concurrency": cap}, clock=clock, autoload=False)
    reg.add(lambda: "ran", name="work", max_concurrency=1, retry=retry)
    assert cap.slots.acquire("work", "someone", cap=1, total=None, now=clock.now(), lease=30)[0]
    return reg, retries, cap


@pytest.mark.parametrize("retry", [3, {"attempts": 3, "initial": 0.5}])
def test_max_wait_zero_fails_at_once_under_a_retry_policy(clock: ManualClock, retry: Any) -> None:
    """The retry plugin waited out every refusal for its whole total (30 s), polling, counting each poll as a retry."""
    reg, _, cap = _held(clock, 0.0, retry)
    result = reg.try_call("work")
    assert isinstance(result.error, ToolBusy) and result.error.retry_after is None  # the cap waited what it would
    assert clock.sleeps == [] and cap.refused == 1 and reg.stats()["retry"] == {"retries": 0, "gave_up": 0}


def test_a_bulkhead_waits_its_own_max_wait_under_a_retry_policy(clock: ManualClock) -> None:
    """The retry plugin, first, answered the bulkhead's refusals with its own backoff (up to 1 s each)."""
    reg, retries, cap = _held(clock, 0.055, {"attempts": 3, "initial": 1.0})
    result = reg.try_call("work")
    assert isinstance(result.error, ToolBusy)
    assert clock.sleeps == [0.01] * 5 and retries.retries == 0  # polls of the bulkhead, not the retry's backoff
    cap.slots.release("work", "someone")
    assert reg.call("work") == "ran"


def test_a_thread_mode_retry_meets_its_abandoned_attempts_slot() -> None:
    """The retry polled for the abandoned attempt's slot until the tool returned (for the retry's whole total)."""
    reg = ToolRegistry(autoload=False)
    release = threading.Event()
    runs: list[int] = []

    def work() -> str:
        runs.append(1)
        release.wait(10)
        return "done"

    reg.add(
        work, max_concurrency=1, timeout=0.05, idempotent=True, retry={"attempts": 2, "timeouts": True, "initial": 0, "total": 1}
    )
    try:
        result = reg.try_call("work")
        assert isinstance(result.error, ToolBusy) and runs == [1]  # max_wait 0: the slot is not waited for
        assert reg.stats()["retry"]["retries"] == 1  # the retry after the timeout, no poll of the slot
    finally:
        release.set()


# --- 4. an async tool that swallows its cancellation does not beat its timeout -------------------


async def _stubborn(fail: bool = False) -> str:
    try:
        await asyncio.Event().wait()  # never set
    except asyncio.CancelledError:
        if fail:
            raise RetryableError("late and failing") from None
        return "late"
    return "never"


async def test_an_async_tool_that_swallows_its_cancellation_times_out_all_the_same() -> None:
    """Its late value was returned as a success (and its late error as its failure)."""
    reg = ToolRegistry(autoload=False)
    reg.add(_stubborn, name="stubborn", timeout=0.05)
    for fail in (False, True):
        result = await reg.atry_call("stubborn", {"fail": fail})
        assert isinstance(result.error, ToolTimeout) and result.value is None


def test_an_async_tool_that_swallows_its_cancellation_times_out_from_a_sync_caller() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(_stubborn, name="stubborn", timeout=0.05)
    result = reg.try_call("stubborn")
    assert isinstance(result.error, ToolTimeout) and result.value is None
