"""What review 26 found in the core's timeouts and runners: a hook's bad ``call.runner`` or ``call.timeout``
taken for the tool's failure, an async tool that blocked past its deadline and still succeeded, a
``ToolTimeout`` naming a sliver of the total budget, a thread-mode retry turned into ``ToolBusy``, a forged
frame length believed by the parent, the wrong plugin blamed for ``call.arguments`` that are no dict, and
an async tool's ``memory_limit`` accepted and ignored."""

from __future__ import annotations

import asyncio
import math
import os
import stat
import threading
import time
from fractions import Fraction
from typing import Any

import pytest

from harness_one import (
    Call,
    PluginError,
    ToolBusy,
    ToolDefinitionError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)

# --- tools, importable by name from a process-mode worker (this module is on its sys.path) ------


def forged_length() -> str:
    """Write an 8-byte frame length of 1 TiB (and a log line) to every socket the worker has, then answer. (Every
    descriptor it has open: the worker's socket keeps the parent's number, past 64 in a long test run.)"""
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, (1 << 40).to_bytes(8, "little") + b"log line\n")
        except OSError:
            pass
    return "answer"


def plain() -> str:
    return "plain"


# --- helpers -----------------------------------------------------------------------------------


class _Setter:
    """A pre_call hook (after the timeout plugin's) that sets ``call.timeout`` and/or ``call.runner``;
    records what on_error hooks saw."""

    order = 25

    def __init__(self, timeout: Any = None, runner: Any = None) -> None:
        self.timeout, self.runner = timeout, runner
        self.seen: list[tuple[str, bool]] = []

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if self.timeout is not None:
            call.timeout = self.timeout
        if self.runner is not None:
            call.runner = self.runner

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self.seen.append((type(error).__name__, call.ran))


def _registry_with(setter: _Setter) -> tuple[ToolRegistry, list[int]]:
    runs: list[int] = []

    def s(x: int = 0) -> str:
        runs.append(1)
        return "ok"

    async def a(x: int = 0) -> str:
        runs.append(1)
        return "ok"

    reg = ToolRegistry(autoload=False, plugins={"setter": setter})
    retry = {"attempts": 3, "initial": 0, "on": (AttributeError, TypeError, OverflowError)}
    reg.add(s, timeout=30, idempotent=True, retry=retry)
    reg.add(a, timeout=30, idempotent=True, retry=retry)
    return reg, runs


# --- 1. a hook's bad call.runner / call.timeout is its PluginError, the tool not started ---------


@pytest.mark.parametrize("awaited", [False, True])
def test_a_runner_without_run_is_the_hooks_plugin_error(awaited: bool) -> None:
    setter = _Setter(runner=object())
    reg, runs = _registry_with(setter)
    result = asyncio.run(reg.atry_call("s")) if awaited else reg.try_call("s")
    assert isinstance(result.error, PluginError)
    assert str(result.error).startswith("The pre_call hook of a plugin set call.runner to <object object at ")
    assert "expected a Runner (with run and arun methods) or None" in str(result.error)
    assert setter.seen == [("PluginError", False)] and runs == []  # not the tool's failure: no retry
    assert reg.stats()["retry"] == {"retries": 0, "gave_up": 0}


@pytest.mark.parametrize("awaited", [False, True])
def test_a_runner_class_for_an_instance_is_the_hooks_plugin_error(awaited: bool) -> None:
    """A runner whose run/arun cannot be called so (the class, not an instance) fails in the call expression itself:
    the hook's PluginError, the tool not started (it was the tool's failure, retried, with call.ran True)."""
    from harness_one_plugins.timeout import ThreadRunner

    setter = _Setter(runner=ThreadRunner)
    reg, runs = _registry_with(setter)
    result = asyncio.run(reg.atry_call("s")) if awaited else reg.try_call("s")
    assert isinstance(result.error, PluginError) and "set call.runner to <class " in str(result.error)
    assert setter.seen == [("PluginError", False)] and runs == []


def test_a_negative_int_past_a_floats_range_times_out_as_every_negative_one() -> None:
    setter = _Setter(timeout=-(10**400))
    reg, runs = _registry_with(setter)
    result = reg.try_call("s")
    assert isinstance(result.error, ToolTimeout) and result.error.timeout == -math.inf and runs == []


def test_a_tools_type_error_through_a_runners_future_stays_the_tools_failure() -> None:
    """An error that arrives through a future (from a process pool: unpickled, no frame of ``arun`` on its
    traceback) was taken for the call expression's own and blamed on the hook, ``call.ran`` False."""

    class PoolRunner:
        def run(self, call: Call, fn: Any, kwargs: Any, timeout: float) -> Any:
            return fn(**kwargs)

        def arun(self, call: Call, fn: Any, kwargs: Any, timeout: float) -> Any:
            future = asyncio.get_running_loop().create_future()
            try:
                future.set_result(fn(**kwargs))
            except Exception as exc:
                future.set_exception(exc.with_traceback(None))  # as one unpickled from another process
            return future

    def bad() -> str:
        raise TypeError("the tool's own TypeError")

    setter = _Setter(runner=PoolRunner())
    reg = ToolRegistry(autoload=False)
    reg.plugins.register(setter, "setter")
    reg.add(bad, timeout=30)
    error = asyncio.run(reg.atry_call("bad")).error
    assert isinstance(error, ToolExecutionError) and "the tool's own TypeError" in str(error)
    assert setter.seen == [("ToolExecutionError", True)]


def test_an_arun_whose_result_cannot_be_awaited_is_the_hooks_plugin_error() -> None:
    class Plain:
        def run(self, call: Call, fn: Any, kwargs: Any, timeout: float) -> Any:
            return fn(**kwargs)

        def arun(self, call: Call, fn: Any, kwargs: Any, timeout: float) -> Any:
            return fn(**kwargs)  # not awaitable

    setter = _Setter(runner=Plain())
    reg, _ = _registry_with(setter)
    result = asyncio.run(reg.atry_call("s"))
    assert isinstance(result.error, PluginError) and "set call.runner to <" in str(result.error)


def test_a_retry_the_full_pool_refuses_is_that_tool_busy() -> None:
    """As docs/plugins.md says: the abandoned thread of the timed-out attempt fills a pool of one, so its retry is
    refused, and that ToolBusy stands (no retry_after); the retry counts in ``retries``."""
    release = threading.Event()
    runs: list[int] = []

    def slow() -> str:
        runs.append(1)
        release.wait(30)
        return "late"

    reg = ToolRegistry(autoload=False, plugin_options={"timeout": {"max_workers": 1}})
    reg.add(slow, timeout=0.05, idempotent=True, retry={"attempts": 3, "timeouts": True, "initial": 0})
    try:
        result = reg.try_call("slow")
    finally:
        release.set()
    assert isinstance(result.error, ToolBusy) and "all 1 timeout workers are busy" in str(result.error)
    assert runs == [1] and reg.stats()["retry"] == {"retries": 1, "gave_up": 0}


def test_a_runners_own_attribute_error_is_not_taken_for_a_missing_run() -> None:
    class Broken:
        def run(self, call: Call, fn: Any, kwargs: Any, timeout: float) -> Any:
            raise AttributeError("inside the runner")

    setter = _Setter(runner=Broken())
    reg, _ = _registry_with(setter)
    result = reg.try_call("s")
    assert isinstance(result.error, ToolExecutionError) and "inside the runner" in str(result.error)


def test_a_fraction_timeout_is_taken_as_its_float() -> None:
    """A Fraction passed the check but reached the runner unconverted: the wait failed with TypeError after
    the worker thread had run the tool (twice, with the retry), and the call reported the tool's failure."""
    setter = _Setter(timeout=Fraction(30, 1))
    reg, runs = _registry_with(setter)
    assert reg.call("s") == "ok" and runs == [1] and setter.seen == []


def test_a_fraction_timeout_names_its_float_when_it_times_out() -> None:
    release = threading.Event()

    def hang() -> str:
        release.wait(30)
        return "late"

    reg = ToolRegistry(autoload=False, plugins={"setter": _Setter(timeout=Fraction(1, 20))})
    reg.add(hang, timeout=30)
    try:
        result = reg.try_call("hang")
    finally:
        release.set()
    assert isinstance(result.error, ToolTimeout) and type(result.error.timeout) is float
    assert result.error.timeout == 0.05 and "timed out after 0.05 s" in str(result.error)


@pytest.mark.parametrize("name", ["s", "a"])
def test_an_int_past_a_floats_range_is_the_hooks_plugin_error(name: str) -> None:
    setter = _Setter(timeout=10**400)
    reg, runs = _registry_with(setter)
    result = reg.try_call(name)
    assert isinstance(result.error, PluginError)
    assert str(result.error) == (
        f"The pre_call hook of a plugin set call.timeout to ~1e400 (an int no float holds) while calling '{name}'; "
        "expected a number of seconds (one a float holds) or None"
    )
    assert setter.seen == [("PluginError", False)] and runs == []


# --- 2. an async tool that blocks the loop past its deadline times out --------------------------


async def _blocks_past(seconds: float, fail: bool) -> str:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:  # no await: the loop cannot run the timeout's timer
        time.sleep(0.01)
    if fail:
        raise ValueError("late failure")
    return "late value"


@pytest.mark.parametrize("fail", [False, True])
@pytest.mark.parametrize("awaited", [False, True])
def test_an_async_tool_that_blocks_past_its_deadline_times_out(awaited: bool, fail: bool) -> None:
    async def fetch(fail: bool = False) -> str:
        return await _blocks_past(0.2, fail)

    reg = ToolRegistry(autoload=False)
    reg.add(fetch, timeout=0.05)
    result = asyncio.run(reg.atry_call("fetch", {"fail": fail})) if awaited else reg.try_call("fetch", {"fail": fail})
    assert isinstance(result.error, ToolTimeout) and result.error.timeout == 0.05
    assert reg.stats()["timeout"]["timeouts"] == 1


def test_an_async_tool_within_its_deadline_still_succeeds() -> None:
    async def quick() -> str:
        await asyncio.sleep(0)
        return "quick"

    reg = ToolRegistry(autoload=False)
    reg.add(quick, timeout=30)
    assert reg.call("quick") == "quick" and asyncio.run(reg.acall("quick")) == "quick"


# --- 3. a ToolTimeout names the configured seconds, the total's when it ended the attempt -------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_attempt_cut_short_by_the_total_names_the_total(kind: str) -> None:
    release = threading.Event()

    def hang() -> str:
        release.wait(30)
        return "late"

    async def ahang() -> str:
        await asyncio.sleep(30)
        return "late"

    reg = ToolRegistry(autoload=False)
    reg.add(hang if kind == "sync" else ahang, name="t", timeout=30, total_timeout=0.05)
    reg.add(hang if kind == "sync" else ahang, name="only_total", total_timeout=0.05)
    reg.add(hang if kind == "sync" else ahang, name="attempt", timeout=0.05, total_timeout=30)
    try:
        for name, seconds in (("t", 0.05), ("only_total", 0.05), ("attempt", 0.05)):
            error = reg.try_call(name).error
            assert isinstance(error, ToolTimeout) and error.timeout == seconds, (name, error)
            assert error.to_dict()["timeout"] == seconds
            assert str(error).startswith(f"Tool '{name}' timed out after 0.05 s.")
    finally:
        release.set()


# --- 5. process mode: a frame the tool wrote is refused at its first bytes, whatever its length --


@pytest.mark.parametrize("timeout", [None, 20.0])
def test_a_forged_frame_length_is_not_waited_for(timeout: float | None) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(forged_length, timeout=timeout, timeout_mode="process")
    reg.add(plain, timeout=timeout, timeout_mode="process")
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(reg.try_call("forged_length")), daemon=True)
    thread.start()
    thread.join(60)  # a hang (the 1 TiB waited for) fails here, not in the suite's timeout
    try:
        assert box, "the call still waits for the forged frame's 1 TiB"
        error = box[0].error
        assert isinstance(error, ToolExecutionError) and not isinstance(error, ToolTimeout)
        assert "the worker's answer was not in step with its call" in str(error)
        assert reg.call("plain") == "plain"  # a fresh worker answers the next call
    finally:
        reg.plugins.get("timeout").processes.shutdown()


# --- 6. call.arguments that are no dict name the pre_validate hook that set them ----------------


def _setting(value: Any, order: int = 0) -> type:
    class P:
        @hookimpl(tryfirst=True)
        def harness_pre_validate(self, call: Call) -> None:
            call.arguments = value

    P.order = order  # type: ignore[attr-defined]
    return P


@pytest.mark.parametrize(("value", "shown"), [(None, "a NoneType"), ([1], "a list"), ("{}", "a str")])
def test_arguments_no_dict_blame_the_hook_that_set_them(value: Any, shown: str) -> None:
    def t(a: int = 1) -> int:
        return a

    reg = ToolRegistry(autoload=False, plugins={"p": _setting(value)})
    reg.add(t)
    with pytest.raises(PluginError) as caught:
        reg.call("t", {})
    err = caught.value
    assert err.plugin == "p" and err.tool == "t"
    assert str(err).startswith(
        f"The pre_validate hook of plugin 'p' set call.arguments to {shown} while calling 't'; expected a dict "
        "(plugin 'validation', after it, failed on them: "
    )
    assert err.__cause__ is not None


def test_arguments_no_dict_name_every_hook_that_may_have_set_them() -> None:
    class Keep:
        @hookimpl(tryfirst=True)
        def harness_pre_validate(self, call: Call) -> None:
            pass

    def t(a: int = 1) -> int:
        return a

    reg = ToolRegistry(autoload=False, plugins={"keep": Keep, "p": _setting(None)})
    reg.add(t)
    err = reg.try_call("t", {}).error
    assert isinstance(err, PluginError) and err.plugin is None
    assert str(err).startswith(
        "A pre_validate hook (of plugin 'p' or 'keep') set call.arguments to a NoneType while calling 't'; expected a dict "
        "(plugin 'validation', after it, failed on them: "
    )


# --- 7. an async tool cannot ask for a worker process ------------------------------------------


async def big_async(mb: int = 1) -> int:
    return os.getpid()


@pytest.mark.parametrize(
    ("options", "mode", "asked"),
    [({"memory_limit": 50 << 20}, None, "a memory_limit"), ({}, "process", "timeout_mode 'process'")],
)
def test_an_async_tool_that_asks_for_a_worker_is_refused(options: dict[str, Any], mode: str | None, asked: str) -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"timeout": {"mode": "process"}})
    with pytest.raises(ToolDefinitionError) as caught:
        reg.add(big_async, options=options, timeout_mode=mode)
    assert str(caught.value).startswith(
        f"Tool 'big_async': {asked} needs a worker process, and an async tool runs in the caller's event loop"
    )
    reg.add(big_async, timeout_mode="thread")  # the mode it ignores: taken, as documented
    default = ToolRegistry(autoload=False)  # thread mode: a memory_limit is ignored, as a sync tool's
    default.add(big_async, options={"memory_limit": 50 << 20})
