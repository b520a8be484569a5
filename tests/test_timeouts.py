"""The timeout plugin: thread mode abandons, process mode kills, async tools are cancelled."""

from __future__ import annotations

import asyncio
import functools
import math
import os
import threading
import time
from collections.abc import Iterator

import pytest
import tools_for_processes as tfp
from gate_support import Gated

from harness_one import (
    Call,
    ManualClock,
    RateLimitExceeded,
    RetryableError,
    ToolBusy,
    ToolDefinitionError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
)
from harness_one_plugins import TimeoutPlugin


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    """No test leaves a process behind (registries collected at the end kill their workers)."""
    with tfp.no_leftovers():
        yield


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let abandoned workers finish


def test_thread_mode_times_out_promptly_and_abandons(release: threading.Event) -> None:
    reg = ToolRegistry(autoload=False)
    finished = threading.Event()

    def slow() -> str:
        release.wait(10)  # "sleeps 10 s" unless the test releases it
        finished.set()
        return "late"

    reg.add(slow, timeout=0.2)
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        reg.call("slow")
    elapsed = time.monotonic() - start
    assert err.value.timeout == 0.2 and "timed out after 0.2 s" in str(err.value)
    assert elapsed < 2.0  # about 0.2 s; generous for a loaded CI machine
    stats = reg.stats()["timeout"]["threads"]
    assert stats["stuck"] == 1 and stats["busy"] == 1  # the thread runs on: abandoned, not killed
    assert not finished.is_set()
    release.set()
    assert finished.wait(5)
    for _ in range(100):
        if reg.stats()["timeout"]["threads"]["stuck"] == 0:
            break
        time.sleep(0.01)
    assert reg.stats()["timeout"]["threads"] == {"workers": 32, "busy": 0, "stuck": 0}


def test_thread_pool_exhaustion_fails_fast(release: threading.Event) -> None:
    reg = ToolRegistry(plugins={"timeout": TimeoutPlugin(max_workers=2)}, autoload=False)
    reg.add(lambda: release.wait(10), name="hang", timeout=0.05)
    for _ in range(2):
        with pytest.raises(ToolTimeout):
            reg.call("hang")
    with pytest.raises(ToolBusy, match="all 2 timeout workers are busy \\(2 still running past their deadline\\)"):
        reg.call("hang")


def test_fast_tool_in_thread_mode_returns_value() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda x: x * 2, name="dbl", timeout=5)
    assert reg.call("dbl", {"x": 21}) == 42
    reg.add(lambda: 1 / 0, name="boom", timeout=5)
    with pytest.raises(ToolExecutionError) as err:
        reg.call("boom")
    assert isinstance(err.value.cause, ZeroDivisionError)


def test_process_mode_kills_the_worker() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(tfp.sleepy, timeout=0.5, timeout_mode="process")
    reg.add(tfp.pid, timeout=30, timeout_mode="process")
    reg.call("pid")  # a warm worker (its start counts against a call's timeout)
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        reg.call("sleepy", {"seconds": 300})
    assert "timed out after 0.5 s" in str(err.value)
    assert time.monotonic() - start < 30  # the sleep would be 300
    runner = reg.plugins.get("timeout").processes
    assert runner.killed == 1
    pid = runner.last_pid
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone, and reaped: no orphan
    assert reg.stats()["timeout"]["processes"] == {"workers": 4, "alive": 1, "busy": 0, "killed": 1, "died": 0, "replaced": 1}


def test_process_mode_results_and_errors() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(tfp.pid, timeout=30, timeout_mode="process")
    reg.add(tfp.explode, timeout=30, timeout_mode="process")
    reg.add(tfp.unpicklable_result, timeout=30, timeout_mode="process")
    reg.add(functools.partial(lambda: 1), name="local", timeout=30, timeout_mode="process")  # (a lambda is refused when added)
    assert reg.call("pid") != os.getpid()
    with pytest.raises(ToolExecutionError) as err:
        reg.call("explode")
    assert isinstance(err.value.cause, ValueError) and "bad input in child" in str(err.value)
    with pytest.raises(ToolExecutionError, match="cannot be pickled"):
        reg.call("unpicklable_result")
    with pytest.raises(ToolExecutionError, match="picklable"):
        reg.call("local")
    assert reg.stats()["timeout"]["processes"]["alive"] == 1  # one warm worker ran them all


async def test_async_tool_is_cancelled() -> None:
    reg = ToolRegistry(autoload=False)
    cancelled = asyncio.Event()

    async def slow() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    reg.add(slow, timeout=0.1)
    with pytest.raises(ToolTimeout):
        await reg.acall("slow")
    assert cancelled.is_set()


def test_async_tool_with_timeout_from_sync_caller() -> None:
    reg = ToolRegistry(autoload=False)

    async def slow() -> str:
        await asyncio.sleep(10)
        return "late"

    reg.add(slow, timeout=0.1)
    with pytest.raises(ToolTimeout):
        reg.call("slow")


async def test_sync_tool_from_async_caller_times_out(release: threading.Event) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: release.wait(10), name="hang", timeout=0.1)
    with pytest.raises(ToolTimeout):
        await reg.acall("hang")


def test_cooperative_cancellation(release: threading.Event) -> None:
    reg = ToolRegistry(autoload=False)
    stopped = threading.Event()

    def careful(call: Call) -> str:
        while not call.cancelled:
            time.sleep(0.01)
        stopped.set()
        return "stopped early"

    reg.add(careful, timeout=0.1)
    with pytest.raises(ToolTimeout):
        reg.call("careful")
    assert stopped.wait(5)  # the tool saw the flag and returned


def test_none_mode_is_advisory_and_total_budget(clock: ManualClock) -> None:
    reg = ToolRegistry(autoload=False, clock=clock)
    seen: list[float | None] = []

    def step(call: Call) -> str:
        seen.append(call.remaining())
        clock.advance(0.4)
        raise RetryableError("still warming up")

    reg.add(step, timeout=1.0, total_timeout=1.0, timeout_mode="none", idempotent=True, retry={"attempts": 10, "initial": 0})
    with pytest.raises(RetryableError):  # the total spent: no retry, the tool's own error stands
        reg.call("step")
    assert seen == [pytest.approx(1.0), pytest.approx(0.6), pytest.approx(0.2)]  # each attempt gets what is left


def test_registry_default_timeout() -> None:
    reg = ToolRegistry(plugins={"timeout": TimeoutPlugin(default=0.1)}, autoload=False)
    gate = threading.Event()
    reg.add(lambda: gate.wait(5), name="hang")
    try:
        with pytest.raises(ToolTimeout):
            reg.call("hang")
    finally:
        gate.set()


def test_bad_timeout_settings() -> None:
    from harness_one import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match="timeout_mode"):
        ToolRegistry(autoload=False).add(lambda: 1, name="f", timeout=1, timeout_mode="kill")
    with pytest.raises(ValueError, match="mode"):
        TimeoutPlugin(mode="fork")


def test_process_mode_kills_the_tools_process_group(tmp_path: os.PathLike[str]) -> None:
    """A hung tool's own child (``sleep 300``) dies with it: no survivor reparented to init."""
    reg = ToolRegistry(autoload=False)
    reg.add(tfp.hang_with_grandchild, timeout=0.5, timeout_mode="process")
    reg.add(tfp.pid, timeout=30, timeout_mode="process")
    reg.call("pid")  # a warm worker (its start counts against a call's timeout)
    pidfile = os.path.join(tmp_path, "grandchild.pid")
    with pytest.raises(ToolTimeout):
        reg.call("hang_with_grandchild", {"pidfile": pidfile})
    grandchild = tfp.read_pid(pidfile)
    try:
        assert tfp.gone(grandchild)  # killed with the group (a zombie until init reaps it, where init is slow to)
    finally:
        if tfp.running(grandchild):
            os.kill(grandchild, 9)


def test_process_mode_reuses_a_warm_worker_and_replaces_a_dead_one() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(tfp.pid, timeout=30, timeout_mode="process")
    reg.add(tfp.exit_now, timeout=30, timeout_mode="process")
    worker = reg.call("pid")
    assert reg.call("pid") == worker  # no new process per call
    with pytest.raises(ToolExecutionError, match="exited with code 3 before answering") as err:
        reg.call("exit_now", {"code": 3})
    assert isinstance(err.value.cause, RuntimeError)
    assert reg.call("pid") not in (worker, os.getpid())
    reg.plugins.get("timeout").processes.shutdown()


def test_process_pool_size_is_a_plugin_option(tmp_path: os.PathLike[str]) -> None:
    reg = ToolRegistry(plugins={"timeout": TimeoutPlugin(max_processes=1)}, autoload=False)
    reg.add(tfp.wait_for_file, timeout=60, timeout_mode="process")
    reg.add(tfp.pid, timeout=60, timeout_mode="process")
    gate = os.path.join(tmp_path, "go")
    holder = threading.Thread(target=reg.call, args=("wait_for_file", {"path": gate}))
    holder.start()
    try:
        deadline = time.monotonic() + 30
        while reg.stats()["timeout"]["processes"]["busy"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        with pytest.raises(ToolBusy, match="all 1 process workers are busy"):
            reg.call("pid")
    finally:
        open(gate, "w").close()
        holder.join(30)
    assert reg.call("pid") != os.getpid()


def test_ctrl_c_during_a_thread_timeout_keeps_what_the_running_tool_holds() -> None:
    """Ctrl-C while the caller waits for a thread-mode tool: the tool runs on, so its slot and key stay
    held until it returns (both were freed: a cap of 1 ran 2, and the same key ran again)."""
    import signal

    from harness_one import IdempotencyConflict

    reg = ToolRegistry(autoload=False)
    work = Gated()
    reg.add(work, name="work", timeout=30, timeout_mode="thread", max_concurrency=1)

    def interrupt() -> None:
        if work.entered.wait(10):
            os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            reg.call("work", idempotency_key="k")
        sender.join()
        assert isinstance(reg.try_call("work", idempotency_key="k").error, IdempotencyConflict)
        assert isinstance(reg.try_call("work").error, ToolBusy) and work.runs == [1]
    finally:
        work.gate.set()


@pytest.mark.parametrize("seconds", [math.nan, -math.inf])
def test_a_timeout_that_is_not_a_positive_number_is_a_definition_error(seconds: float) -> None:
    with pytest.raises(ToolDefinitionError, match=r"timeout must be a positive number of seconds or math\.inf \(no limit\), got"):
        ToolRegistry(autoload=False).add(lambda: 1, name="t", timeout=seconds)


def test_a_tool_taking_a_call_cannot_run_in_process_mode() -> None:
    def watch(call: Call) -> float | None:
        return call.remaining()

    reg = ToolRegistry(autoload=False)
    with pytest.raises(ToolDefinitionError, match="its 'call' parameter \\(a Call\\) cannot cross to a process-mode worker"):
        reg.add(watch, timeout=5, timeout_mode="process")
    reg.add(watch, timeout=5, timeout_mode="thread")  # there it runs, and sees its deadline
    remaining = reg.call("watch")
    assert remaining is not None and 0 < remaining <= 5


def test_a_retried_attempt_starts_uncancelled_while_the_abandoned_one_reads_cancelled() -> None:
    """``call.cancelled`` is per attempt: the retry after a thread-mode timeout gave up at once
    (a cooperative tool returned its partial answer as a success), sticky from the first attempt."""
    reg = ToolRegistry(autoload=False)
    stalled, release, recorded = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def crawl(call: Call) -> str:
        if not stalled.is_set():
            stalled.set()
            release.wait(10)  # past its timeout: abandoned, runs on
            seen["abandoned"] = call.cancelled
            recorded.set()
            return "late"
        seen["retry"] = call.cancelled
        return "complete"

    reg.add(crawl, idempotent=True, timeout=0.05, timeout_mode="thread", retry={"attempts": 2, "timeouts": True, "initial": 0})
    try:
        assert reg.call("crawl") == "complete"
    finally:
        release.set()
    assert recorded.wait(10)
    assert seen == {"retry": False, "abandoned": True}


def test_an_async_retry_after_a_timeout_starts_uncancelled() -> None:
    reg = ToolRegistry(autoload=False)
    seen: list[bool] = []

    async def crawl(call: Call) -> str:
        seen.append(call.cancelled)
        if len(seen) == 1:
            await asyncio.sleep(3600)  # cancelled at its timeout
        return "complete"

    reg.add(crawl, idempotent=True, timeout=0.05, retry={"attempts": 2, "timeouts": True, "initial": 0})
    assert asyncio.run(reg.acall("crawl")) == "complete" and seen == [False, False]


def test_no_plugins_wait_ends_after_the_total_timeout() -> None:
    """The rate limit's max_wait slept 10 s of a 1 s total, then ran out of budget with a ToolTimeout
    saying 1 s: any Retry whose wait would end past the call's total deadline leaves the error standing."""
    from harness_one_plugins import RateLimitPlugin

    clock = ManualClock()
    reg = ToolRegistry(plugins={"rate_limit": RateLimitPlugin(max_wait=20.0)}, clock=clock, autoload=False)
    reg.add(lambda: "ok", name="t", rate_limit={"rate": 0.1, "burst": 1}, total_timeout=1.0, timeout_mode="none")
    assert reg.call("t") == "ok"
    refused = reg.try_call("t")
    assert isinstance(refused.error, RateLimitExceeded) and refused.error.retry_after == 10.0
    assert clock.sleeps == []  # at once, not after 10 s
    reg.add(lambda: "ok", name="u", rate_limit={"rate": 2.0, "burst": 1}, total_timeout=1.0, timeout_mode="none")
    assert reg.call("u") == "ok" and reg.call("u") == "ok" and clock.sleeps == [0.5]  # a wait that fits is waited


def test_a_wait_refused_for_the_total_timeout_is_settled_by_every_plugin() -> None:
    """The core dropped a Retry past the total deadline after the recorders had read it as "another
    attempt follows": the idempotency key stayed in flight, the budget kept its unit, metrics and
    logging recorded a retry and no finished call. The Retry is now no decision at all."""
    clock = ManualClock()
    reg = ToolRegistry(
        clock=clock,
        autoload=False,
        plugin_options={"rate_limit": {"max_wait": 10}, "timeout": {"total": 1}, "budget": {"total": 2}},
    )
    runs: list[int] = []
    reg.add(lambda x: runs.append(x) or x, name="charge", rate_limit={"rate": 0.2, "burst": 1})
    assert reg.call("charge", {"x": 1}, context={"run_id": "r1"}) == 1
    refused = reg.try_call("charge", {"x": 2}, idempotency_key="k2", context={"run_id": "r1"})
    assert isinstance(refused.error, RateLimitExceeded) and runs == [1] and clock.sleeps == []
    assert reg.plugins.get("budget").used("r1") == 1  # the refused call's unit given back
    stats = reg.stats()["tools"]["charge"]
    assert stats["finished"] == 2 and stats["retries"] == 0
    clock.advance(60)  # a token again: the key was released, not left in flight
    assert reg.call("charge", {"x": 2}, idempotency_key="k2", context={"run_id": "r1"}) == 2 and runs == [1, 2]


def test_deadlines_are_on_the_registrys_clock_when_the_plugins_have_their_own() -> None:
    """With the timeout and retry plugins on a clock of their own, the deadline was on theirs and the
    core compared it with the registry's: every retry with a wait was dropped."""
    import random

    from harness_one_plugins import RetryPlugin

    registry_clock, plugin_clock = ManualClock(start=1_000_000.0), ManualClock()
    reg = ToolRegistry(
        plugins={
            "timeout": TimeoutPlugin(total=30, clock=plugin_clock, mode="none"),
            "retry": RetryPlugin(clock=plugin_clock, rng=random.Random(1)),
        },
        clock=registry_clock,
        autoload=False,
    )
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) < 3:
            raise RetryableError("503", retry_after=0.5)
        return "ok"

    reg.add(flaky, idempotent=True, retry={"attempts": 3})
    assert reg.call("flaky") == "ok" and len(runs) == 3 and registry_clock.sleeps == [0.5, 0.5]


def test_the_total_deadline_is_fixed_when_the_call_starts() -> None:
    """The timeout plugin's pre_call wrote ``total_deadline`` again on every attempt, from its own
    clock's offset to the registry's at that moment: with the two clocks apart by then, the whole
    call's deadline moved between attempts."""
    from harness_one_plugins import RetryPlugin

    registry_clock, plugin_clock = ManualClock(start=1_000.0), ManualClock()
    reg = ToolRegistry(
        plugins={"timeout": TimeoutPlugin(total=30, clock=plugin_clock, mode="none"), "retry": RetryPlugin(clock=plugin_clock)},
        clock=registry_clock,
        autoload=False,
    )
    deadlines: list[float | None] = []

    def flaky(call: Call) -> str:
        deadlines.append(call.total_deadline)
        if len(deadlines) == 1:
            plugin_clock.advance(5.0)  # the plugin's clock runs on, the registry's does not
            raise RetryableError("503", retry_after=0.0)
        return "ok"

    reg.add(flaky, idempotent=True, retry={"attempts": 2, "initial": 0})
    assert reg.call("flaky") == "ok"
    assert deadlines == [1_030.0, 1_030.0]
