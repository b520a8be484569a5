"""A sync tool that returns a coroutine (an async function called without ``await``) fails, on every path.

It was a success: ``call`` returned the coroutine, ``try_call(...).for_model()`` showed the model
``<coroutine object ...>``, and Python warned later that it was never awaited.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import threading
import warnings
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from harness_one import Call, Lingering, ToolExecutionError, ToolRegistry, ToolTimeout, hookimpl

#: Each tool's definition keywords, and the paths it takes (``std``: with the standard plugins).
OPTIONS: dict[str, dict[str, Any]] = {
    "plain": {},  # no plugins: _direct (call), _in_thread (acall); standard: _attempts (call)
    "quick": {"blocking": False},  # acall: _attempts on the loop
    "thread": {"timeout": 30, "timeout_mode": "thread"},  # the thread runner's worker
    "thread_quick": {"timeout": 30, "timeout_mode": "thread", "blocking": False},
    "none": {"timeout": 30, "timeout_mode": "none"},  # call: _drive/_invoke; acall: _in_thread
    "none_quick": {"timeout": 30, "timeout_mode": "none", "blocking": False},  # acall: _adrive/_ainvoke
}


async def double(a: int) -> int:
    return 2 * a


@pytest.fixture
def made() -> Iterator[list[Coroutine[Any, Any, Any]]]:
    """The coroutines the tools returned: each closed (a closed coroutine never warns it was never awaited)."""
    coroutines: list[Coroutine[Any, Any, Any]] = []
    yield coroutines
    assert coroutines
    assert all(inspect.getcoroutinestate(c) == inspect.CORO_CLOSED for c in coroutines)


def registry(standard: bool, made: list[Coroutine[Any, Any, Any]]) -> ToolRegistry:
    reg = ToolRegistry(standard_plugins=standard, autoload=False)

    def forgot(a: int) -> int:
        """Doubles a, but forgets to await."""
        made.append(double(a))
        return made[-1]  # type: ignore[return-value]

    for name, options in OPTIONS.items():
        reg.add(forgot, name=name, **options)
    return reg


def check(err: BaseException | None, name: str) -> None:
    assert isinstance(err, ToolExecutionError), err
    assert err.tool == name
    assert isinstance(err.cause, TypeError)
    assert err.message.startswith(f"Tool '{name}' failed: TypeError: the tool returned a coroutine (double)")
    assert "declare the tool `async def` and await the coroutine inside it" in err.message


@pytest.mark.parametrize("standard", [False, True], ids=["no_plugins", "standard"])
@pytest.mark.parametrize("name", list(OPTIONS))
@pytest.mark.parametrize("how", ["call", "try_call", "acall", "atry_call"])
def test_a_sync_tool_returning_a_coroutine_fails(made: list[Any], standard: bool, name: str, how: str) -> None:
    reg = registry(standard, made)
    if how == "call":
        with pytest.raises(ToolExecutionError) as raised:
            reg.call(name, {"a": 1})
        check(raised.value, name)
    elif how == "acall":
        with pytest.raises(ToolExecutionError) as raised:
            asyncio.run(asyncio.wait_for(reg.acall(name, {"a": 1}), 10))
        check(raised.value, name)
    else:
        if how == "try_call":
            result = reg.try_call(name, {"a": 1})
        else:
            result = asyncio.run(asyncio.wait_for(reg.atry_call(name, {"a": 1}), 10))
        assert not result.ok and result.value is None
        check(result.error, name)
        assert "<coroutine" not in result.for_model()
        assert "the tool returned a coroutine (double)" in result.for_model()


def test_no_never_awaited_warning() -> None:
    made: list[Coroutine[Any, Any, Any]] = []
    reg = registry(True, made)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in OPTIONS:
            assert not reg.try_call(name, {"a": 1}).ok
            assert not asyncio.run(reg.atry_call(name, {"a": 1})).ok
        assert len(made) == 2 * len(OPTIONS)
        del made[:]
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]


class Lingered:
    """Keeps the ``call.lingering`` an on_error hook sees (a call its caller gave up on)."""

    def __init__(self) -> None:
        self.lingering: list[Lingering] = []

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        if call.lingering is not None:
            self.lingering.append(call.lingering)


def lingered_outcome(spy: Lingered) -> tuple[bool, Any]:
    assert len(spy.lingering) == 1
    returned = threading.Event()
    spy.lingering[0].then(returned.set)
    assert returned.wait(10)
    outcome = spy.lingering[0].outcome
    assert outcome is not None
    return outcome


@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_timed_out_thread_mode_tool_that_returns_a_coroutine_lingers_as_a_failure(made: list[Any], how: str) -> None:
    """What a plugin keeps of a call given up on (the idempotency plugin's record for the key) is the failure."""
    spy, go = Lingered(), threading.Event()
    reg = ToolRegistry(autoload=False, plugins=[spy])

    def late(a: int) -> int:
        assert go.wait(10)
        made.append(double(a))
        return made[-1]  # type: ignore[no-any-return]

    reg.add(late, timeout=0.05, timeout_mode="thread")
    if how == "call":
        result = reg.try_call("late", {"a": 1})
    else:
        result = asyncio.run(asyncio.wait_for(reg.atry_call("late", {"a": 1}), 10))
    assert isinstance(result.error, ToolTimeout)
    go.set()
    ok, value = lingered_outcome(spy)
    assert not ok and isinstance(value, TypeError) and "returned a coroutine (double)" in str(value)


def test_a_cancelled_acall_whose_sync_tool_returns_a_coroutine_lingers_as_a_failure(made: list[Any]) -> None:
    """The worker thread of acall (no timeout): the tool returns after its caller's task was cancelled."""
    spy, started, go = Lingered(), threading.Event(), threading.Event()
    reg = ToolRegistry(autoload=False, plugins=[spy])

    def late(a: int) -> int:
        started.set()
        assert go.wait(10)
        made.append(double(a))
        return made[-1]  # type: ignore[no-any-return]

    reg.add(late)

    async def main() -> None:
        task = asyncio.create_task(reg.acall("late", {"a": 1}))
        assert await asyncio.to_thread(started.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        go.set()  # (before asyncio.run ends: it waits for the loop's worker threads)

    asyncio.run(main())
    ok, value = lingered_outcome(spy)
    assert not ok and isinstance(value, TypeError) and "returned a coroutine (double)" in str(value)


def test_a_coroutine_running_elsewhere_is_not_closed() -> None:
    """Only a coroutine never started is closed: one another task is running is its owner's."""
    reg = ToolRegistry(autoload=False)

    async def main() -> None:
        hold = asyncio.Event()

        async def waits() -> None:
            await hold.wait()

        coroutine = waits()
        task = asyncio.ensure_future(coroutine)
        await asyncio.sleep(0)  # started, suspended in hold.wait()
        reg.add(lambda: coroutine, name="theirs", blocking=False)
        result = await reg.atry_call("theirs")
        assert isinstance(result.error, ToolExecutionError) and "returned a coroutine (" in result.error.message
        assert inspect.getcoroutinestate(coroutine) == inspect.CORO_SUSPENDED
        hold.set()
        await asyncio.wait_for(task, 10)

    asyncio.run(main())


def test_other_results_are_untouched() -> None:
    """Only a coroutine fails: an async tool's value, and other objects a sync tool returns, are its result."""
    reg = ToolRegistry(autoload=False)
    reg.add(double)
    listing: list[Any] = []
    reg.add(lambda: listing, name="listing")
    assert reg.call("double", {"a": 2}) == 4
    assert asyncio.run(reg.acall("double", {"a": 2})) == 4
    assert reg.call("listing") is listing
