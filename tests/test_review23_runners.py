"""Review 23 (timeouts, retries, process mode): a cancel after the tool returned keeps its outcome,
answers that do not unpickle safely, shutdown as a refusal, finite seconds, NaN from plugins,
retiring a worker off the event loop, awaitables from sync tools, runner options."""

from __future__ import annotations

import asyncio
import math
import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tools_for_processes import a_call

from harness_one import (
    Call,
    ManualClock,
    PluginError,
    ProcessRunner,
    Retry,
    ThreadRunner,
    Tool,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    _runners,
    hookimpl,
)
from harness_one_plugins import IdempotencyPlugin, TimeoutPlugin

# --- tools, importable by name from a worker process (this module is on its sys.path) ----------


def charge(path: str) -> str:
    """Append one mark to ``path`` per run: how often the tool ran, across processes."""
    with open(path, "a") as out:
        out.write("x")
    return "charged"


def charge_on(path: str, go: str) -> str:
    """:func:`charge` once ``go`` exists (looked for every 10 ms, up to a minute)."""
    for _ in range(6000):
        if os.path.exists(go):
            break
        time.sleep(0.01)
    return charge(path)


def _interrupt() -> None:
    raise KeyboardInterrupt("from unpickling")


class _Custom(BaseException):
    pass


def _custom() -> None:
    raise _Custom("a BaseException of its own")


class Interrupting:
    """Pickles fine in the worker; unpickling it in the caller raises KeyboardInterrupt."""

    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        return _interrupt, ()


class Custom:
    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        return _custom, ()


def returns_interrupting() -> Interrupting:
    return Interrupting()


def returns_custom() -> Custom:
    return Custom()


class BadReduceError(Exception):
    """Raised by a tool; its own pickle raises KeyboardInterrupt when loaded (rebuilt from its parts then)."""

    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        return _interrupt, ()


def raises_bad_reduce() -> None:
    raise BadReduceError("the tool's own message")


async def _inner() -> str:
    return "awaited"


def returns_coroutine() -> Any:
    return _inner()


def quick() -> str:
    return "q"


@pytest.fixture
def runners() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for runner in made:
        runner.shutdown()


def _count(path: Path) -> int:
    return len(path.read_text()) if path.exists() else 0


# --- 1. a cancel after the tool returned keeps its outcome ---------------------------------------


def test_thread_mode_a_cancel_after_the_tool_returned_keeps_its_outcome(tmp_path: Path) -> None:
    """The worker finished and told the loop, but the task was cancelled before the loop collected the
    result: the idempotency plugin keeps the outcome for the key, and the same key does not run again."""
    reg = ToolRegistry(
        autoload=False, plugins={"timeout": TimeoutPlugin(mode="thread", default=30), "idempotency": IdempotencyPlugin()}
    )
    reg.add(charge)
    path = tmp_path / "charges"

    async def main() -> str:
        loop = asyncio.get_running_loop()
        told = threading.Event()
        real = loop.call_soon_threadsafe

        def call_soon_threadsafe(*args: Any, **kwargs: Any) -> Any:
            handle = real(*args, **kwargs)
            told.set()  # the worker finished the call (and queued its wake-up on the loop)
            return handle

        loop.call_soon_threadsafe = call_soon_threadsafe  # type: ignore[method-assign]
        task = asyncio.create_task(reg.acall("charge", {"path": str(path)}, idempotency_key="k"))
        await asyncio.sleep(0)  # the call starts its worker
        assert told.wait(30)  # the loop blocked: the tool returned, its result not collected
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        loop.call_soon_threadsafe = real  # type: ignore[method-assign]
        return await reg.acall("charge", {"path": str(path)}, idempotency_key="k")

    assert asyncio.run(main()) == "charged"
    assert _count(path) == 1  # the tool ran once for the key
    threads = reg.plugins.get("timeout").threads.stats()
    assert threads["busy"] == 0 and threads["stuck"] == 0  # the slot was given back


def test_thread_mode_an_interrupt_after_the_tool_returned_keeps_its_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    """ThreadRunner.run: the wait ends by an exception (Ctrl-C) after the tool finished: the call's
    ``lingering`` is a finished :class:`Lingering` with the tool's outcome, and the slot is given back."""
    runner = ThreadRunner(1)
    slots: list[Any] = []
    take = runner._take

    def capture(*args: Any) -> Any:
        slots.append(take(*args))
        return slots[-1]

    def interrupted(timeout: float) -> float:  # the wait is interrupted once the tool returned
        assert slots[0].done.acquire(True, 30)
        slots[0].done.release()
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_take", capture)
    monkeypatch.setattr(_runners, "_seconds", interrupted)
    call = a_call()
    with pytest.raises(KeyboardInterrupt):
        runner.run(call, quick, {}, 30)
    assert call.lingering is not None and call.lingering.outcome == (True, "q")
    assert not call.cancelled and runner.stats() == {"workers": 1, "busy": 0, "stuck": 0}
    runner.shutdown()


def test_process_mode_a_cancel_after_the_answer_came_keeps_its_outcome(tmp_path: Path, runners: list[Any]) -> None:
    """The worker's answer is waiting on the socket when the task is cancelled: it is read, not thrown
    away with a killed worker; the worker is kept and the same key does not run the tool again.

    The tool answers only once ``go`` exists, made after the job is on the socket, whole: the
    event loop has read nothing of the answer when it is cancelled (it waits in ``select``)."""
    plugin = TimeoutPlugin(mode="process", default=60)
    runners.append(plugin.processes)
    reg = ToolRegistry(autoload=False, plugins={"timeout": plugin, "idempotency": IdempotencyPlugin()})
    reg.add(charge_on)
    path, go = tmp_path / "charges", tmp_path / "go"

    async def main() -> str:
        warm = tmp_path / "warm"
        warm.touch()
        await reg.acall("charge_on", {"path": str(warm), "go": str(warm)})  # a warm worker
        (worker,) = plugin.processes._pool.workers
        job = worker.job
        task = asyncio.create_task(reg.acall("charge_on", {"path": str(path), "go": str(go)}, idempotency_key="k"))
        for turn in range(2000):  # until the job is on the socket, whole (the loop may take several turns)
            if worker.job != job and worker.unsent is None:
                break
            await asyncio.sleep(0 if turn < 1000 else 0.001)
        assert (worker.job, worker.unsent, task.done()) == (job + 1, None, False)  # sent whole, not answered
        go.touch()
        assert select.select([worker.fd], [], [], 60)[0]  # the loop blocked: the answer came
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await reg.acall("charge_on", {"path": str(path), "go": str(go)}, idempotency_key="k")

    assert asyncio.run(main()) == "charged"
    assert _count(path) == 1
    stats = plugin.processes.stats()
    assert stats["killed"] == 0 and stats["alive"] == 1 and stats["busy"] == 0  # the worker was kept


# --- 2. what the worker sent cannot interrupt the caller -----------------------------------------


@pytest.mark.parametrize(
    ("fn", "said"),
    [
        (returns_interrupting, "unpickling raised KeyboardInterrupt: from unpickling"),
        (returns_custom, "unpickling raised _Custom: a BaseException of its own"),
    ],
)
def test_a_result_whose_unpickling_raises_a_base_exception_is_a_typed_error(
    fn: Callable[[], Any], said: str, runners: list[Any]
) -> None:
    runner = ProcessRunner()
    runners.append(runner)
    reg = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(mode="process", default=60)})
    reg.plugins.get("timeout").processes = runner
    reg.add(fn)
    with pytest.raises(ToolExecutionError) as err:
        reg.call(fn.__name__)
    assert f"the tool's result cannot be unpickled: RuntimeError: {said}" in err.value.message


def test_an_exception_whose_unpickling_raises_keyboard_interrupt_is_rebuilt(runners: list[Any]) -> None:
    runner = ProcessRunner()
    runners.append(runner)
    reg = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(mode="process", default=60)})
    reg.plugins.get("timeout").processes = runner
    reg.add(raises_bad_reduce)
    with pytest.raises(ToolExecutionError) as err:
        reg.call("raises_bad_reduce")
    assert err.value.message == "Tool 'raises_bad_reduce' failed: BadReduceError: the tool's own message"


def test_rebuilding_an_exception_whose_new_raises_a_base_exception_gives_up() -> None:
    import pickle

    class Hostile(Exception):
        def __new__(cls, *args: Any) -> Hostile:
            raise KeyboardInterrupt("from __new__")

    globals()["Hostile"] = Hostile  # importable by name for the pickle
    Hostile.__qualname__ = "Hostile"
    try:
        assert _runners._rebuilt(pickle.dumps((Hostile, ("x",), {}))) is None
    finally:
        del globals()["Hostile"]


# --- 3. shutdown is a refusal ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_call_after_shutdown_is_refused_not_the_tools_failure(mode: str) -> None:
    plugin = TimeoutPlugin(mode=mode, default=5)
    reg = ToolRegistry(autoload=False, plugins={"timeout": plugin, "idempotency": IdempotencyPlugin()})
    reg.add(quick)
    (plugin.processes if mode == "process" else plugin.threads).shutdown()
    runner = "ProcessRunner" if mode == "process" else "ThreadRunner"
    first = reg.try_call("quick", idempotency_key="k")
    assert isinstance(first.error, ToolExecutionError) and first.ran is False
    assert f"could not be started: RuntimeError: the {runner} is shut down" in first.error.message
    again = reg.try_call("quick", idempotency_key="k")
    assert isinstance(again.error, ToolExecutionError) and not again.error.replayed  # not stored for the key


# --- 4. finite seconds, as a float holds them --------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "value", "said"),
    [
        (
            "timeout",
            10**400,
            "timeout must be a positive number of seconds or math.inf (no limit), got an integer past a float's range.",
        ),
        ("timeout", math.nan, "timeout must be a positive number of seconds or math.inf (no limit), got nan."),
        ("timeout", -math.inf, "timeout must be a positive number of seconds or math.inf (no limit), got -inf."),
        ("timeout", "30", "timeout must be a positive number of seconds or math.inf (no limit), got '30'."),
        (
            "total_timeout",
            10**400,
            "total_timeout must be a positive number of seconds or math.inf (no limit), got an integer past a float's range.",
        ),
        (
            "cache_ttl",
            10**400,
            "cache_ttl must be a positive number of seconds or math.inf (no limit), got an integer past a float's range.",
        ),
        ("retry", {"total": math.inf}, "retry total must be a finite non-negative number, got inf."),
        ("retry", {"total": 10**400}, "retry total must be a finite non-negative number, got an integer past a float's range."),
        (
            "retry",
            {"initial": 10**400},
            "retry initial must be a finite non-negative number, got an integer past a float's range.",
        ),
        (
            "rate_limit",
            {"rate": 10**400},
            "rate_limit rate must be a finite positive number, got an integer past a float's range.",
        ),
        (
            "rate_limit",
            {"rate": 1, "burst": 10**400},
            "rate_limit burst must be a finite positive number, got an integer past a float's range.",
        ),
        (
            "circuit_breaker",
            {"window": 10**400},
            "circuit_breaker window must be a finite positive number, got an integer past a float's range.",
        ),
        (
            "circuit_breaker",
            {"open_for": 10**400},
            "circuit_breaker open_for must be a finite positive number, got an integer past a float's range.",
        ),
    ],
)
def test_seconds_past_a_float_s_range_are_a_definition_error(keyword: str, value: Any, said: str) -> None:
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(quick, idempotent=True, **{keyword: value})
    assert err.value.message == f"Tool 'quick': {said}"


@pytest.mark.parametrize("keyword", ["timeout", "total_timeout", "cache_ttl"])
def test_infinite_seconds_of_a_tool_are_no_limit_as_before(keyword: str) -> None:
    """``float(os.environ.get("T", "inf"))``: ``math.inf`` is accepted (no limit), as it was."""
    tool = Tool.create(quick, idempotent=True, **{keyword: math.inf})
    assert getattr(tool, keyword) == math.inf


def test_the_circuit_plugin_default_past_a_float_s_range_is_refused() -> None:
    with pytest.raises(
        PluginError, match="circuit_breaker window must be a finite positive number, got an integer past a float's range"
    ):
        ToolRegistry(autoload=False, plugin_options={"circuit_breaker": {"default": {"window": 10**400}}})


# --- 5. NaN from a plugin ------------------------------------------------------------------------


class RetryOnce:
    name = "retry_once"

    def __init__(self, delay: Any) -> None:
        self.delay = delay
        self.answers = 0

    @hookimpl
    def harness_on_error(self, call: Call, error: ToolError) -> Retry | None:
        self.answers += 1
        return Retry(self.delay) if self.answers == 1 else None


def failing_once() -> str:
    failing_once.runs += 1  # type: ignore[attr-defined]
    if failing_once.runs == 1:  # type: ignore[attr-defined]
        raise ValueError("transient")
    return "ok"


@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_retry_of_nan_seconds_retries_at_once(how: str) -> None:
    clock = ManualClock()
    reg = ToolRegistry(autoload=False, clock=clock, plugins={"retry_once": RetryOnce(math.nan)})
    failing_once.runs = 0  # type: ignore[attr-defined]
    reg.add(failing_once)
    result = reg.call("failing_once") if how == "call" else asyncio.run(reg.acall("failing_once"))
    assert result == "ok" and clock.sleeps == [0.0]  # no wait of NaN seconds (asyncio.sleep(nan) never ends)


@pytest.mark.parametrize("delay", ["1", None, True, 10**400])
def test_a_retry_of_no_number_of_seconds_is_a_bad_answer(delay: Any) -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"retry_once": RetryOnce(delay)})
    failing_once.runs = 0  # type: ignore[attr-defined]
    reg.add(failing_once)
    with pytest.raises(PluginError) as err:
        reg.call("failing_once")
    assert err.value.plugin == "retry_once"
    assert err.value.message.startswith("The on_error hook of plugin 'retry_once' returned Retry(delay=")
    assert err.value.message.endswith(
        "while calling 'failing_once'; expected a Retry (of a delay in seconds), an Outcome (of a value, or of a ToolError) or None"
    )


def hang(seconds: float = 60.0) -> str:
    threading.Event().wait(seconds)
    return "done"


class Bound:
    name = "bound"

    def __init__(self, timeout: float, runner: Any) -> None:
        self.timeout, self.runner = timeout, runner

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        call.timeout = self.timeout
        call.runner = self.runner


@pytest.mark.parametrize("timeout", [math.nan, 0.0, -1.0])
@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_plugin_s_timeout_that_is_not_positive_times_out_at_once_in_thread_mode(timeout: float, how: str) -> None:
    runner = ThreadRunner(2)
    reg = ToolRegistry(autoload=False, plugins={"bound": Bound(timeout, runner)})
    reg.add(hang)
    try:
        with pytest.raises(ToolTimeout) as err:
            reg.call("hang") if how == "call" else asyncio.run(reg.acall("hang"))
        assert err.value.message.startswith(f"Tool 'hang' timed out after {timeout:g} s.")
    finally:
        runner.shutdown()


def test_seconds_of_a_wait_are_zero_for_nan() -> None:
    assert _runners._seconds(math.nan) == 0.0 and _runners._seconds(-1.0) == 0.0
    assert _runners._seconds(math.inf) == threading.TIMEOUT_MAX and _runners._seconds(2.5) == 2.5


# --- 6. a worker retired under acall is reaped off the event loop ---------------------------------


def test_a_retired_worker_is_reaped_off_the_event_loop(runners: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    runner = ProcessRunner(max_calls=1)
    runners.append(runner)
    reg = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(mode="process", default=60)})
    reg.plugins.get("timeout").processes = runner
    reg.add(quick)
    where: list[int] = []
    real = _runners._Worker.kill

    def kill(worker: Any) -> int:
        where.append(threading.get_ident())
        return real(worker)

    monkeypatch.setattr(_runners._Worker, "kill", kill)

    async def main() -> tuple[str, int]:
        return await reg.acall("quick"), threading.get_ident()

    value, loop_thread = asyncio.run(main())
    assert value == "q" and where and loop_thread not in where  # reaped in a thread, the loop ran on
    assert runner.stats()["alive"] == 0  # retired after its one call


# --- 7. an awaitable from a sync tool; runner options ---------------------------------------------


@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_sync_tool_s_coroutine_is_its_result_in_process_mode_too(how: str, runners: list[Any]) -> None:
    """Not awaited in the worker (no mode awaits it): the tool's failure, worded as in every mode (it was the
    "cannot be pickled" of a result that does not pickle)."""
    runner = ProcessRunner()
    runners.append(runner)
    reg = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(mode="process", default=60)})
    reg.plugins.get("timeout").processes = runner
    reg.add(returns_coroutine)
    with pytest.raises(ToolExecutionError) as err:
        reg.call("returns_coroutine") if how == "call" else asyncio.run(reg.acall("returns_coroutine"))
    assert "TypeError: the tool returned a coroutine (_inner) instead of a result" in err.value.message


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"start_timeout": 0}, "start_timeout must be a finite positive number of seconds, not 0"),
        ({"start_timeout": math.nan}, "start_timeout must be a finite positive number of seconds, not nan"),
        (
            {"start_timeout": 10**400},
            "start_timeout must be a finite positive number of seconds, not an integer past a float's range",
        ),
        ({"start_timeout": "30"}, "start_timeout must be a finite positive number of seconds, not '30'"),
        ({"idle_timeout": -5}, "idle_timeout must be a finite positive number of seconds or None, not -5"),
        ({"idle_timeout": math.inf}, "idle_timeout must be a finite positive number of seconds or None, not inf"),
        ({"max_workers": 2.5}, "max_workers must be an integer >= 1, not 2.5"),
        ({"max_workers": True}, "max_workers must be an integer >= 1, not True"),
        ({"max_calls": 1.5}, "max_calls must be an integer >= 1 or None, not 1.5"),
        ({"max_calls": 0}, "max_calls must be an integer >= 1 or None, not 0"),
    ],
)
def test_process_runner_options_are_checked(options: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError) as err:
        ProcessRunner(**options)
    assert str(err.value).startswith(said)


@pytest.mark.parametrize("workers", [2.5, 0, True, "4"])
def test_thread_runner_workers_are_checked(workers: Any) -> None:
    with pytest.raises(ValueError) as err:
        ThreadRunner(workers)
    assert str(err.value) == f"max_workers must be an integer >= 1, not {workers!r}"


def test_worker_module_is_not_left_awaiting() -> None:
    from harness_one import _worker

    assert not hasattr(_worker, "_await") and os.path.exists(_worker.__file__)


# --- review 23a: one check of a number of seconds ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (10**400, "an integer past a float's range"),
        ("1e400", "'1e400'"),
        (math.inf, "inf"),
        (True, "True"),
        ("0", "'0'"),
    ],
)
def test_a_state_timeout_is_checked_as_every_number_of_seconds(value: Any, said: str) -> None:
    """``positive_seconds`` (state URLs, stores) refuses what the tool's and runners' checks refuse, a
    ``ValueError`` each (an int past a float's range was an untyped ``OverflowError``); a URL's text
    ``float()`` reads stays accepted there."""
    from harness_one.state import SQLiteStore
    from harness_one.state._protocols import positive_seconds

    with pytest.raises(ValueError) as err:
        positive_seconds(value, "the SQLite store's timeout")
    assert str(err.value) == f"the SQLite store's timeout must be a number of seconds above 0, not {said}"
    with pytest.raises(ValueError) as err:
        SQLiteStore(":memory:", timeout=value)
    assert str(err.value) == f"the SQLite store's timeout must be a number of seconds above 0, not {said}"
    assert positive_seconds("30", "t") == 30.0 and positive_seconds(2**53, "t") == float(2**53)
