"""Timeout runners: a tool's KeyboardInterrupt in a worker thread, memory_limit over the answer's pickling,
an exception's text built in the worker, a thread-mode call cancelled from another thread."""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from harness_one import (
    Call,
    CallResult,
    ThreadRunner,
    ToolCancelled,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)

SHORT = 0.2  # seconds; only where a real deadline is what the test is about
BOUND = 10.0  # seconds a test waits at most for what must happen (a regression fails, it does not hang)


def _kbd() -> None:
    raise KeyboardInterrupt("the tool's own")


def _genexit() -> None:
    raise GeneratorExit("the tool's own")


class _Errors:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def harness_on_error(self, call: Call, error: Exception) -> None:
        self.seen.append(type(error).__name__)


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``fn`` in a thread of its own (its outcome under ``"value"`` or ``"error"``)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# --- 1. a BaseException raised in a worker thread is the tool's failure ------------------------------------------


@pytest.mark.parametrize("tool", [_kbd, _genexit])
@pytest.mark.parametrize("how", ["call", "acall"])
def test_thread_mode_keyboard_interrupt_and_generator_exit_are_the_tools_failure(tool: Callable[[], None], how: str) -> None:
    errors = _Errors()
    reg = ToolRegistry(plugins={"errors": errors}, autoload=False)
    reg.add(tool, name="t", timeout=5, timeout_mode="thread")
    result = _no_interrupt(lambda: reg.try_call("t", {}) if how == "call" else asyncio.run(reg.atry_call("t", {})))
    assert isinstance(result.error, ToolExecutionError)
    assert type(result.error.cause) is type(_catch(tool))
    assert str(result.error) == f"Tool 't' failed: {type(result.error.cause).__name__}: the tool's own"
    assert errors.seen == ["ToolExecutionError"]  # not a cancelled call
    assert reg.stats()["timeout"]["threads"]["busy"] == 0  # the worker is free again


def _no_interrupt(fn: Callable[[], Any]) -> Any:
    """``fn()``; a ``KeyboardInterrupt`` or ``GeneratorExit`` escaping it fails the test (not the test run)."""
    try:
        return fn()
    except (KeyboardInterrupt, GeneratorExit) as exc:
        raise AssertionError(f"the caller was interrupted: {exc!r}") from None


def _catch(tool: Callable[[], None]) -> BaseException:
    try:
        tool()
    except BaseException as exc:
        return exc
    raise AssertionError("the tool raised nothing")


@pytest.mark.parametrize("tool", [_kbd, _genexit])
def test_acall_thread_hop_keyboard_interrupt_is_the_tools_failure(tool: Callable[[], None]) -> None:
    """A sync tool with no timeout under ``acall`` runs in a worker thread too (``_in_thread``)."""
    reg = ToolRegistry(autoload=False)
    reg.add(tool, name="t")
    result = _no_interrupt(lambda: asyncio.run(reg.atry_call("t", {})))
    assert isinstance(result.error, ToolExecutionError)
    assert type(result.error.cause) is type(_catch(tool))


def test_keyboard_interrupt_in_the_callers_own_thread_still_interrupts() -> None:
    """Mode none (no timeout) under ``call``: the tool runs in the caller's thread, where a real Ctrl-C arrives."""
    reg = ToolRegistry(autoload=False)
    reg.add(_kbd, name="t")
    with pytest.raises(KeyboardInterrupt):
        reg.try_call("t", {})


def test_thread_runner_makes_a_keyboard_interrupt_a_tool_execution_error() -> None:
    from tools_for_processes import a_call

    runner = ThreadRunner(2)
    call = a_call()
    with pytest.raises(ToolExecutionError, match="KeyboardInterrupt: the tool's own") as err:
        _no_interrupt(lambda: runner.run(call, _kbd, {}, 5))
    assert type(err.value.cause) is KeyboardInterrupt
    with pytest.raises(ZeroDivisionError):  # an Exception is raised as it is, as before
        runner.run(call, lambda: 1 / 0, {}, 5)
    runner.shutdown()


# --- 2. memory_limit bounds the pickling of the answer ----------------------------------------------------------


class _BigWhenPickled:
    """A result whose ``__reduce__`` needs ``n`` bytes to build (it answers a small int)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __reduce__(self) -> tuple[Any, ...]:
        big = bytearray(self.n)
        return (int, (len(big),))


def big_when_pickled(megabytes: int) -> object:
    return _BigWhenPickled(megabytes * 2**20)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_process_memory_limit_covers_pickling_the_result() -> None:
    limit = 64 * 2**20
    reg = ToolRegistry(autoload=False)
    reg.add(big_when_pickled, timeout=30, timeout_mode="process", options={"memory_limit": limit})
    try:
        assert reg.call("big_when_pickled", {"megabytes": 1}) == 2**20
        with pytest.raises(ToolExecutionError) as err:
            reg.call("big_when_pickled", {"megabytes": 200})
        assert isinstance(err.value.cause, MemoryError)
        assert str(err.value) == (
            f"Tool 'big_when_pickled' failed: MemoryError: the result needed more than its memory_limit of {limit} bytes"
        )
        assert reg.call("big_when_pickled", {"megabytes": 1}) == 2**20  # the worker lives on, its limit restored
        stats = reg.stats()["timeout"]["processes"]
        assert (stats["killed"], stats["died"]) == (0, 0)
    finally:
        reg.plugins.get("timeout").processes.shutdown()


def loud_failure(megabytes: int) -> int:
    """Fails with its own ValueError whose text is ``megabytes`` MiB (a dump of its input)."""
    raise ValueError("x" * (megabytes * 2**20))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_process_memory_limit_keeps_the_tools_own_exception_whose_report_does_not_fit() -> None:
    """A ValueError whose report does not fit the limit is still the ValueError (retry rules read its type)."""
    reg = ToolRegistry(autoload=False)
    reg.add(loud_failure, timeout=30, timeout_mode="process", options={"memory_limit": 64 * 2**20})
    try:
        with pytest.raises(ToolExecutionError) as err:
            reg.call("loud_failure", {"megabytes": 40})
        assert type(err.value.cause).__name__ == "ValueError" and err.value.cause_type == "ValueError"
    finally:
        reg.plugins.get("timeout").processes.shutdown()


# --- 3. thread mode: the exception's text is built in the worker ------------------------------------------------


@pytest.mark.parametrize("how", ["call", "acall"])
def test_thread_mode_slow_exception_text_does_not_hold_the_caller_past_its_deadline(how: str) -> None:
    entered, release = threading.Event(), threading.Event()

    class Slow(Exception):
        def __str__(self) -> str:
            entered.set()
            release.wait(BOUND)
            return "slow"

    def boom() -> None:
        raise Slow

    reg = ToolRegistry(autoload=False)
    reg.add(boom, timeout=SHORT, timeout_mode="thread")
    run: Callable[[], CallResult] = (
        (lambda: reg.try_call("boom", {})) if how == "call" else (lambda: asyncio.run(reg.atry_call("boom", {})))
    )
    thread, out = _in_thread(run)
    try:
        thread.join(BOUND / 2)
        assert not thread.is_alive(), "the caller waited for the exception's __str__"
        assert entered.is_set() and not release.is_set()  # still blocked in the worker
        assert isinstance(out["value"].error, ToolTimeout)
    finally:
        release.set()
        thread.join(BOUND)


@pytest.mark.parametrize("how", ["call", "acall"])
def test_thread_mode_exception_text_is_read_once_in_the_worker(how: str) -> None:
    said: list[str] = []

    class Told(Exception):
        def __str__(self) -> str:
            said.append(threading.current_thread().name)
            return "told once"

    def boom() -> None:
        raise Told

    reg = ToolRegistry(autoload=False)
    reg.add(boom, timeout=5, timeout_mode="thread")
    result = reg.try_call("boom", {}) if how == "call" else asyncio.run(reg.atry_call("boom", {}))
    assert isinstance(result.error, ToolExecutionError)
    assert str(result.error) == "Tool 'boom' failed: Told: told once"
    assert len(said) == 1 and said[0].startswith("harness-one-tool-")


# --- 4. call.cancel() from another thread stops a thread-mode wait ----------------------------------------------


@pytest.mark.parametrize("how", ["call", "acall"])
def test_thread_mode_call_cancelled_from_another_thread_gives_up(how: str) -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[Call] = []

    class Grab:
        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            calls.append(call)

    def gated() -> str:
        started.set()
        release.wait(BOUND)
        return "late"

    reg = ToolRegistry(plugins={"grab": Grab()}, autoload=False)
    reg.add(gated, timeout=30, timeout_mode="thread")
    run: Callable[[], CallResult] = (
        (lambda: reg.try_call("gated", {})) if how == "call" else (lambda: asyncio.run(reg.atry_call("gated", {})))
    )
    thread, out = _in_thread(run)
    try:
        assert started.wait(BOUND)
        calls[0].cancel()
        thread.join(BOUND / 2)
        assert not thread.is_alive(), "the cancel was not seen"
        assert not release.is_set()  # the tool still runs (abandoned, as at a timeout)
        result = out["value"]
        assert isinstance(result.error, ToolCancelled) and calls[0].ran
        assert reg.stats()["timeout"]["threads"]["stuck"] == 1
    finally:
        release.set()
        thread.join(BOUND)


LANG: contextvars.ContextVar[str] = contextvars.ContextVar("lang", default="en")


class _Localized(Exception):
    """A message in the request's language, as a lazily translated text is."""

    def __str__(self) -> str:
        return {"en": "invalid input", "de": "ungültige Eingabe"}[LANG.get()]


def _localized() -> None:
    raise _Localized()


@pytest.mark.parametrize("how", ["call", "acall"])
def test_thread_mode_exception_text_is_read_in_the_callers_context(how: str) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(_localized, name="boom", timeout=5, timeout_mode="thread")

    async def awaited() -> Any:
        LANG.set("de")
        return (await reg.atry_call("boom", {})).error

    def called() -> Any:
        LANG.set("de")
        return reg.try_call("boom", {}).error

    error = contextvars.copy_context().run(called) if how == "call" else asyncio.run(awaited())
    assert str(error) == "Tool 'boom' failed: _Localized: ungültige Eingabe"


def test_a_thread_mode_acall_leaves_no_timer_behind() -> None:
    """Each tick of arun's timer schedules the next in its place: the one pending when the call ends is cancelled."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: time.sleep(0.12) or 1, name="slow", timeout=5, timeout_mode="thread")

    async def main() -> list[Any]:
        assert await reg.acall("slow", {}) == 1
        loop = asyncio.get_running_loop()
        return [h for h in getattr(loop, "_scheduled", []) if not h.cancelled()]

    assert asyncio.run(main()) == []
