"""Hooks that answer with ``Await``: fetched blocking under ``call``, awaited under ``acall``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from harness_one import (
    Await,
    Call,
    CallResult,
    Outcome,
    PluginError,
    RateLimitExceeded,
    Retry,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    hookimpl,
)


class Recorder:
    """Answers every per-call hook with an ``Await`` and records which side was used."""

    name = "recorder"

    def __init__(self, *, refuse: bool = False, replay: Any = None, fail_in: str = "") -> None:
        self.log: list[str] = []
        self.refuse, self.replay, self.fail_in = refuse, replay, fail_in

    def _answer(self, where: str, value: Any) -> Await:
        def sync() -> Any:
            self.log.append(f"{where}:sync")
            if self.fail_in == where:
                raise OSError("connection reset")
            if where == "pre_call" and self.refuse:
                raise RateLimitExceeded(retry_after=1.5)
            return value

        async def aio() -> Any:
            await asyncio.sleep(0)
            self.log.append(f"{where}:aio")
            if self.fail_in == where:
                raise OSError("connection reset")
            if where == "pre_call" and self.refuse:
                raise RateLimitExceeded(retry_after=1.5)
            return value

        return Await(sync, aio)

    @hookimpl
    def harness_pre_call(self, call: Call) -> Await:
        return self._answer("pre_call", None if self.replay is None else Outcome.success(self.replay))

    @hookimpl
    def harness_post_call(self, call: Call) -> Await:
        return self._answer("post_call", None)

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Await:
        return self._answer("on_error", None)


class Observer:
    """A later on_error hook: sees the decision the awaited hook made."""

    name = "observer"
    order = 99

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @hookimpl(trylast=True)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self.seen.append((type(error).__name__, call.decision))


def registry(*plugins: Any, fn: Any = None) -> ToolRegistry:
    reg = ToolRegistry(autoload=False, standard_plugins=False)
    for plugin in plugins:
        reg.plugins.register(plugin, name=plugin.name)

    def add(a: int, b: int) -> int:
        return a + b

    reg.add(fn or add, name="add")
    return reg


def test_sync_calls_fetch_with_sync() -> None:
    rec = Recorder()
    assert registry(rec).call("add", {"a": 2, "b": 3}) == 5
    assert rec.log == ["pre_call:sync", "post_call:sync"]


def test_acall_awaits_and_never_calls_sync() -> None:
    rec = Recorder()
    reg = registry(rec)
    loop_thread: list[int] = []

    async def main() -> Any:
        loop_thread.append(threading.get_ident())
        return await reg.acall("add", {"a": 2, "b": 3})

    assert asyncio.run(main()) == 5
    assert rec.log == ["pre_call:aio", "post_call:aio"]


def test_awaited_outcome_answers_without_running_the_tool() -> None:
    ran: list[int] = []

    def add(a: int, b: int) -> int:
        ran.append(1)
        return a + b

    rec = Recorder(replay=42)
    reg = registry(rec, fn=add)
    assert reg.call("add", {"a": 2, "b": 3}) == 42
    assert asyncio.run(reg.acall("add", {"a": 2, "b": 3})) == 42
    assert ran == []


def test_a_tool_error_from_the_fetch_is_the_hooks_refusal() -> None:
    rec, obs = Recorder(refuse=True), Observer()
    reg = registry(rec, obs)
    with pytest.raises(RateLimitExceeded) as info:
        reg.call("add", {"a": 1, "b": 1})
    assert info.value.retry_after == 1.5
    result = asyncio.run(reg.atry_call("add", {"a": 1, "b": 1}))
    assert result.error is not None and result.error.kind == "rate_limited"
    assert rec.log == ["pre_call:sync", "on_error:sync", "pre_call:aio", "on_error:aio"]
    assert obs.seen == [("RateLimitExceeded", None), ("RateLimitExceeded", None)]


@pytest.mark.parametrize("where", ["pre_call", "post_call"])
def test_a_failed_fetch_is_a_plugin_error_naming_the_plugin(where: str) -> None:
    reg = registry(Recorder(fail_in=where))
    for result in (reg.try_call("add", {"a": 1, "b": 1}), asyncio.run(reg.atry_call("add", {"a": 1, "b": 1}))):
        assert isinstance(result.error, PluginError)
        assert result.error.plugin == "recorder"
        assert "OSError: connection reset" in str(result.error)


def test_awaited_on_error_decisions_are_seen_by_later_hooks() -> None:
    class RetryOnce:
        name = "retry_once"

        @hookimpl(tryfirst=True)
        def harness_on_error(self, call: Call, error: BaseException) -> Await | None:
            if call.attempt > 1:
                return None
            return Await(lambda: Retry(0.0), _async_value(Retry(0.0)))

    calls: list[int] = []

    def flaky(a: int, b: int) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first attempt fails")
        return a + b

    obs = Observer()
    reg = registry(RetryOnce(), obs, fn=flaky)
    assert reg.call("add", {"a": 1, "b": 2}) == 3
    assert obs.seen == [("ToolExecutionError", Retry(0.0))]
    calls.clear()
    obs.seen.clear()
    assert asyncio.run(reg.acall("add", {"a": 1, "b": 2})) == 3
    assert obs.seen == [("ToolExecutionError", Retry(0.0))]


def test_a_failed_on_error_fetch_is_a_plugin_error_after_the_others_ran() -> None:
    rec, obs = Recorder(fail_in="on_error"), Observer()

    def boom(a: int, b: int) -> int:
        raise ValueError("tool failed")

    reg = registry(rec, obs, fn=boom)
    result = reg.try_call("add", {"a": 1, "b": 1})
    assert isinstance(result.error, PluginError) and result.error.plugin == "recorder"
    assert obs.seen == [("ToolExecutionError", Outcome(error=result.error))]  # the failure the caller gets
    assert "OSError: connection reset" in str(result.error)


def test_cancelling_acall_awaits_on_error_answers() -> None:
    rec = Recorder()
    started = asyncio.Event()

    async def slow(a: int, b: int) -> int:
        started.set()
        await asyncio.sleep(3600)
        return a + b

    reg = registry(rec, fn=slow)

    async def main() -> None:
        task = asyncio.create_task(reg.acall("add", {"a": 1, "b": 1}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert rec.log == ["pre_call:aio", "on_error:aio"]  # the event loop is never blocked, not even on the way out


def test_cancelled_again_while_releasing_the_answer_in_flight_is_not_repeated() -> None:
    started, releasing = asyncio.Event(), asyncio.Event()

    class Hanging(Recorder):
        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> Await:
            answer = self._answer("on_error", None)

            async def hang() -> Any:
                releasing.set()
                await asyncio.sleep(3600)

            return Await(answer.sync, hang)

    async def slow(a: int, b: int) -> int:
        started.set()
        await asyncio.sleep(3600)
        return a + b

    rec = Hanging()
    reg = registry(rec, fn=slow)

    async def main() -> None:
        task = asyncio.create_task(reg.acall("add", {"a": 1, "b": 1}))
        await started.wait()
        task.cancel()
        await releasing.wait()
        task.cancel()  # cancelled again while releasing, as a loop shutting down does
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert rec.log == ["pre_call:aio"]  # the hook got ToolCancelled for its lost answer: nothing released twice


def test_a_value_from_the_tool_is_still_wrapped() -> None:
    def boom(a: int, b: int) -> int:
        raise KeyError("x")

    reg = registry(Recorder(), fn=boom)
    with pytest.raises(ToolExecutionError):
        reg.call("add", {"a": 1, "b": 1})
    with pytest.raises(ToolError):
        asyncio.run(reg.acall("add", {"a": 1, "b": 1}))


def _async_value(value: Any) -> Any:
    async def aio() -> Any:
        return value

    return aio


def test_a_non_blocking_sync_tool_runs_on_the_loop_under_acall() -> None:
    threads: list[int] = []

    def quick(a: int, b: int) -> int:
        threads.append(threading.get_ident())
        return a + b

    reg = ToolRegistry(autoload=False, standard_plugins=False)
    reg.add(quick, name="quick", blocking=False)
    reg.add(quick, name="slow")  # blocking (the default): a worker thread

    async def main() -> tuple[int, int, int]:
        return threading.get_ident(), await reg.acall("quick", {"a": 1, "b": 2}), await reg.acall("slow", {"a": 1, "b": 2})

    loop_thread, quick_value, slow_value = asyncio.run(main())
    assert (quick_value, slow_value) == (3, 3)
    assert threads[0] == loop_thread and threads[1] != loop_thread


@pytest.mark.parametrize(
    "options", [{}, {"blocking": False}, {"timeout": 10}], ids=["thread hop", "on the loop", "thread runner"]
)
def test_a_sync_tool_raising_stop_iteration_under_acall_fails_and_does_not_hang(options: dict[str, Any]) -> None:
    """An asyncio future cannot carry ``StopIteration``: the call fails with the tool's error instead."""

    def stops() -> int:
        raise StopIteration("early")

    reg = ToolRegistry(autoload=False, standard_plugins="timeout" in options)
    reg.add(stops, **options)

    async def main() -> CallResult:
        return await asyncio.wait_for(reg.atry_call("stops"), 30)

    result = asyncio.run(main())
    assert not result.ok and isinstance(result.error, ToolExecutionError)
    assert "StopIteration" in result.error.message
    cause = result.error.__cause__
    raised = cause if isinstance(cause, StopIteration) else cause.__cause__  # or a RuntimeError carrying it
    assert isinstance(raised, StopIteration) and raised.args == ("early",)


def test_blocking_must_be_a_bool() -> None:
    from harness_one import ToolDefinitionError

    reg = ToolRegistry(autoload=False, standard_plugins=False)
    with pytest.raises(ToolDefinitionError, match="blocking must be True or False"):
        reg.add(lambda: 1, name="x", blocking="no")


async def _awaits_a_cancelled_future(x: int) -> int:
    inner = asyncio.get_running_loop().create_future()
    inner.cancel()  # e.g. a task some other code cancelled
    await inner
    return x


def _raises_cancelled(x: int) -> int:
    raise asyncio.CancelledError  # a sync tool's own (an SDK's internals), not the caller's


@pytest.mark.parametrize(
    ("fn", "blocking"), [(_awaits_a_cancelled_future, True), (_raises_cancelled, False), (_raises_cancelled, True)]
)
def test_a_cancelled_error_the_tool_raises_itself_is_its_failure_under_acall(fn: Any, blocking: bool) -> None:
    """Nobody cancelled the caller's task: atry_call answers (it never raises) and the circuit counts it, as under call."""
    reg = ToolRegistry(autoload=False)
    reg.add(fn, name="fetch", blocking=blocking, circuit_breaker={"min_calls": 2, "probes": 1})

    async def main() -> list[CallResult]:
        return [await reg.atry_call("fetch", {"x": 1}) for _ in range(3)]

    first, second, third = asyncio.run(main())
    assert isinstance(first.error, ToolExecutionError) and isinstance(first.error.__cause__, asyncio.CancelledError)
    assert first.error.message == "Tool 'fetch' failed: CancelledError"
    assert second.error is not None and second.error.kind == "tool_failed"
    assert third.error is not None and third.error.kind == "circuit_open"  # the two failures were counted
