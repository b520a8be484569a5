"""The runners behind timeouts: a bounded thread pool that abandons, warm worker processes that are killed."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tools_for_processes as tfp
from tools_for_processes import a_call

from harness_one import (
    ManualClock,
    ProcessRunner,
    RetryableError,
    ThreadRunner,
    ToolBusy,
    ToolCancelled,
    ToolDefinitionError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)

SHORT = 0.2  # seconds; only where a real deadline is what the test is about


state, running, gone, children, group_members = tfp.state, tfp.running, tfp.gone, tfp.children, tfp.group_members


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    """After each test: no child process it started is left (no zombie), nothing alive in a worker's group."""
    with tfp.no_leftovers():
        yield


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let abandoned workers finish


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in 5 s"
        time.sleep(0.005)


# --- thread mode ---------------------------------------------------------------------------


def test_thread_runner_returns_and_raises_and_reuses_one_thread() -> None:
    runner = ThreadRunner(4)
    call = a_call()
    names: list[str] = []

    def who(x: int) -> int:
        names.append(threading.current_thread().name)
        return x * 2

    assert [runner.run(call, who, {"x": i}, 5) for i in range(20)] == [i * 2 for i in range(20)]
    assert names == ["harness-one-tool-1"] * 20  # sequential calls reuse the idle worker
    boom = ZeroDivisionError("from the tool")

    def fail() -> None:
        raise boom

    with pytest.raises(ZeroDivisionError) as err:
        runner.run(call, fail, {}, 5)
    assert err.value is boom
    assert runner.stats() == {"workers": 4, "busy": 0, "stuck": 0}
    assert not call.cancelled


def test_thread_runner_abandons_at_the_deadline(release: threading.Event) -> None:
    runner = ThreadRunner(2)
    call = a_call()
    finished = threading.Event()

    def slow() -> str:
        release.wait(10)
        finished.set()
        return "late"

    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        runner.run(call, slow, {}, SHORT)
    assert time.monotonic() - start < 2.0
    assert err.value.timeout == SHORT and err.value.tool == "tool" and err.value.call_id == call.call_id
    assert call.cancelled
    assert runner.stats() == {"workers": 2, "busy": 1, "stuck": 1}
    assert not finished.is_set()  # abandoned, not killed: it runs on
    assert runner.run(a_call(), lambda: "other", {}, 5) == "other"  # the other worker
    release.set()
    assert finished.wait(5)
    wait_until(lambda: runner.stats() == {"workers": 2, "busy": 0, "stuck": 0})
    assert runner.run(a_call(), lambda: "again", {}, 5) == "again"


def test_thread_runner_full_pool_fails_at_once(release: threading.Event) -> None:
    runner = ThreadRunner(1)
    started = threading.Event()

    def hold() -> str:
        started.set()
        release.wait(5)
        return "held"

    holder = threading.Thread(target=lambda: runner.run(a_call(), hold, {}, 10))
    holder.start()
    assert started.wait(5)
    with pytest.raises(ToolBusy, match=r"all 1 timeout workers are busy \(0 still running past their deadline\)"):
        runner.run(a_call(), lambda: "queued", {}, 10)  # would return "queued" after 5 s if it queued
    release.set()
    holder.join(5)
    assert runner.stats() == {"workers": 1, "busy": 0, "stuck": 0}


def test_thread_runner_races_at_the_deadline_leak_nothing() -> None:
    runner = ThreadRunner(4)
    outcomes = {"ok": 0, "timeout": 0, "busy": 0}
    used: set[threading.Thread] = set()

    def nap() -> str:
        used.add(threading.current_thread())
        time.sleep(0.0005)
        return "woke"

    for i in range(300):  # deadlines before, around and after the tool's end
        try:
            assert runner.run(a_call(), nap, {}, 0.0005 * (i % 3)) == "woke"
            outcomes["ok"] += 1
        except ToolTimeout:
            outcomes["timeout"] += 1
        except ToolBusy:
            outcomes["busy"] += 1
    assert sum(outcomes.values()) == 300 and outcomes["ok"] > 0 and outcomes["timeout"] > 0
    wait_until(lambda: runner.stats() == {"workers": 4, "busy": 0, "stuck": 0})  # every abandoned worker came back
    assert 1 <= len(used) <= 4  # bounded


async def test_thread_runner_arun() -> None:
    runner = ThreadRunner(2)
    call = a_call()
    assert await runner.arun(call, lambda x: x + 1, {"x": 41}, 5) == 42

    def missing() -> int:
        return dict[str, int]()["missing"]

    with pytest.raises(KeyError, match="missing"):
        await runner.arun(call, missing, {}, 5)
    gate = threading.Event()
    try:
        with pytest.raises(ToolTimeout):
            await runner.arun(call, gate.wait, {"timeout": 10}, SHORT)
        assert call.cancelled and runner.stats() == {"workers": 2, "busy": 1, "stuck": 1}
    finally:
        gate.set()
    await asyncio.to_thread(wait_until, lambda: runner.stats()["stuck"] == 0)
    assert runner.stats() == {"workers": 2, "busy": 0, "stuck": 0}


async def test_thread_runner_arun_cancelled_by_the_caller() -> None:
    runner = ThreadRunner(1)
    call = a_call()
    gate = threading.Event()
    task = asyncio.ensure_future(runner.arun(call, gate.wait, {"timeout": 10}, 10))
    await asyncio.to_thread(wait_until, lambda: runner.stats()["busy"] == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert call.cancelled and runner.stats()["stuck"] == 1
    with pytest.raises(ToolBusy):
        await runner.arun(a_call(), lambda: 1, {}, 10)
    gate.set()
    await asyncio.to_thread(wait_until, lambda: runner.stats() == {"workers": 1, "busy": 0, "stuck": 0})
    assert await runner.arun(a_call(), lambda: 1, {}, 10) == 1


def test_thread_runner_threads_end_with_the_runner() -> None:
    runner = ThreadRunner(2)
    thread = runner.run(a_call(), threading.current_thread, {}, 5)
    assert thread.daemon and thread is not threading.current_thread()
    del runner
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()
    stopped = ThreadRunner(1)
    stopped.shutdown()
    call = a_call()
    call.ran = True  # as the core sets it before it calls the runner
    with pytest.raises(ToolExecutionError, match="could not be started: RuntimeError: the ThreadRunner is shut down"):
        stopped.run(call, lambda: None, {}, 5)
    assert call.ran is False  # refused: the tool did not run
    with pytest.raises(ValueError, match="max_workers"):
        ThreadRunner(0)


# --- process mode --------------------------------------------------------------------------


def test_process_runner_keeps_a_warm_worker(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    first = runner.run(call, tfp.pid, {}, 30)
    assert first != os.getpid() and runner.last_pid == first
    assert [runner.run(call, tfp.count, {}, 30) for _ in range(3)] == [1, 2, 3]  # same process, its state kept
    assert runner.run(call, tfp.pid, {}, 30) == first
    assert children()[first][0] == first  # the worker leads its own process group (pgid == pid)
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 0, "died": 0, "replaced": 0}


def test_process_runner_kills_the_whole_group_at_the_deadline(processes: Callable[..., ProcessRunner], tmp_path: Path) -> None:
    runner = processes()
    call = a_call()
    pidfile = tmp_path / "grandchild.pid"
    worker = runner.run(call, tfp.pid, {}, 30)
    with pytest.raises(ToolTimeout) as err:
        runner.run(call, tfp.hang_with_grandchild, {"pidfile": str(pidfile)}, SHORT)
    assert err.value.timeout == SHORT and call.cancelled
    grandchild = int(pidfile.read_text())
    assert state(worker) is None  # killed and reaped
    assert gone(grandchild)  # killed with its group (a zombie until init reaps it, where init is slow to)
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 1, "died": 0, "replaced": 1}
    replacement = runner.run(a_call(), tfp.pid, {}, 30)  # a new call: this one's attempt was cancelled
    assert replacement not in (worker, os.getpid())
    assert runner.killed == 1


def test_process_runner_a_process_left_behind_lives_until_its_worker_stops(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    worker = runner.run(call, tfp.pid, {}, 30)
    left = runner.run(call, tfp.leave_behind, {}, 30)
    assert running(left) and runner.run(call, tfp.pid, {}, 30) == worker  # the call returned; its child runs on
    runner.shutdown()
    assert gone(left) and state(worker) is None


def test_process_runner_a_grandchild_in_its_own_session_escapes(processes: Callable[..., ProcessRunner], tmp_path: Path) -> None:
    runner = processes()
    runner.run(a_call(), tfp.pid, {}, 30)  # a warm worker (its start counts against a call's timeout)
    pidfile = tmp_path / "escaped.pid"
    with pytest.raises(ToolTimeout):
        runner.run(a_call(), tfp.hang_with_grandchild, {"pidfile": str(pidfile), "new_session": True}, SHORT)
    escaped = int(pidfile.read_text())
    try:
        assert running(escaped)  # the documented limit: setsid() leaves the group, so the kill misses it
    finally:
        os.kill(escaped, 9)


@pytest.mark.parametrize("aio", [False, True], ids=["run", "arun"])
def test_process_runner_cancel_kills_the_group(processes: Callable[..., ProcessRunner], tmp_path: Path, aio: bool) -> None:
    """``call.cancel()`` from another thread while the worker runs: ToolCancelled, the group killed, as at a timeout."""
    runner = processes()
    call = a_call()
    worker = runner.run(call, tfp.pid, {}, 30)
    pidfile = str(tmp_path / "grandchild.pid")

    def cancel_once_running() -> None:
        tfp.read_pid(pidfile)
        call.cancel()

    canceller = threading.Thread(target=cancel_once_running)
    canceller.start()
    call.ran = True  # as the core sets it before it calls the runner
    with pytest.raises(ToolCancelled, match="The call of 'tool' was cancelled"):
        if aio:
            asyncio.run(runner.arun(call, tfp.hang_with_grandchild, {"pidfile": pidfile}, 300))
        else:
            runner.run(call, tfp.hang_with_grandchild, {"pidfile": pidfile}, 300)
    canceller.join(5)
    assert call.ran  # the tool had started
    assert state(worker) is None and gone(tfp.read_pid(pidfile))
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 1, "died": 0, "replaced": 1}


def test_process_ctrl_c_during_a_call_kills_the_group(tmp_path: Path) -> None:
    """Ctrl-C while the registry waits on a worker: the caller gets KeyboardInterrupt, plugins see ToolCancelled."""
    import signal

    seen: list[str] = []

    class Watch:
        name = "watch"

        @hookimpl
        def harness_on_error(self, error: BaseException) -> None:
            seen.append(type(error).__name__)

    reg = ToolRegistry(plugins={"watch": Watch()}, autoload=False)
    reg.add(tfp.hang_with_grandchild, timeout=300, timeout_mode="process")
    pidfile = str(tmp_path / "grandchild.pid")
    main = threading.get_ident()

    def ctrl_c_once_running() -> None:
        tfp.read_pid(pidfile)
        signal.pthread_kill(main, signal.SIGINT)

    interrupter = threading.Thread(target=ctrl_c_once_running)
    interrupter.start()
    runner = reg.plugins.get("timeout").processes
    try:
        with pytest.raises(KeyboardInterrupt):
            reg.call("hang_with_grandchild", {"pidfile": pidfile})
        interrupter.join(5)
        assert seen == ["ToolCancelled"]
        assert runner.last_pid is not None and state(runner.last_pid) is None
        assert gone(tfp.read_pid(pidfile)) and runner.killed == 1
    finally:
        runner.shutdown()


def test_process_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    """The parent is SIGKILLed (no atexit) while a worker hangs: the worker's watchdog kills its group."""
    pidfile = tmp_path / "grandchild.pid"
    script = tmp_path / "doomed.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, signal, sys, threading
            import tools_for_processes as tfp
            from harness_one import ToolRegistry

            if __name__ == "__main__":
                reg = ToolRegistry(autoload=False)
                reg.add(tfp.pid, timeout=30, timeout_mode="process")
                reg.add(tfp.hang_with_grandchild, timeout=300, timeout_mode="process")
                args = ("hang_with_grandchild", {{"pidfile": {str(pidfile)!r}}})
                threading.Thread(target=reg.call, args=args, daemon=True).start()
                tfp.read_pid({str(pidfile)!r})
                hung = reg.plugins.get("timeout").processes.last_pid
                idle = reg.call("pid")  # a second worker, idle when the parent dies
                print(idle, hung, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == -9, done.stderr
    idle, hung = (int(pid) for pid in done.stdout.split())
    assert idle != hung
    assert gone(idle) and gone(hung) and gone(int(pidfile.read_text()))


@pytest.mark.parametrize(
    ("tool", "kwargs", "reason"),
    [(tfp.exit_now, {"code": 3}, "exited with code 3"), (tfp.segfault, {}, "was killed by SIGSEGV")],
)
def test_process_runner_worker_death_is_a_tool_error(
    processes: Callable[..., ProcessRunner], tool: Callable[..., Any], kwargs: dict[str, Any], reason: str
) -> None:
    runner = processes()
    call = a_call()
    worker = runner.run(call, tfp.pid, {}, 30)
    with pytest.raises(ToolExecutionError, match=f"the tool's worker process {reason} before answering") as err:
        runner.run(call, tool, kwargs, 30)
    assert isinstance(err.value.cause, RuntimeError) and err.value.tool == "tool"
    assert state(worker) is None
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 0, "died": 1, "replaced": 1}
    assert runner.run(call, tfp.pid, {}, 30) not in (worker, os.getpid())


def test_process_runner_exceptions_cross_with_their_traceback(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    worker = runner.run(call, tfp.pid, {}, 30)
    with pytest.raises(ValueError, match="bad input in child") as err:
        runner.run(call, tfp.explode, {}, 30)
    assert "in explode" in str(err.value.__cause__) and "Traceback" in str(err.value.__cause__)
    with pytest.raises(ToolExecutionError, match="SystemExit") as exit_err:
        runner.run(call, tfp.system_exit, {}, 30)  # never exits the caller
    assert isinstance(exit_err.value.cause, SystemExit)
    with pytest.raises(tfp.Stubborn) as stubborn:  # does not unpickle: rebuilt without its __init__
        runner.run(call, tfp.raise_stubborn, {}, 30)
    assert stubborn.value.args == ("xy",) and "in raise_stubborn" in str(stubborn.value.__cause__)
    # (one not rebuilt either comes back described: tests/test_process_mode2.py)
    with pytest.raises(TypeError, match="result cannot be pickled"):
        runner.run(call, tfp.unpicklable_result, {}, 30)
    assert runner.run(call, tfp.pid, {}, 30) == worker  # none of these cost the worker


def test_process_runner_a_child_the_tool_forks_never_answers(processes: Callable[..., ProcessRunner]) -> None:
    """Both processes return from the tool; only the worker answers, so later calls get their own answers."""
    runner = processes()
    call = a_call()
    worker = runner.run(call, tfp.pid, {}, 30)
    assert runner.run(call, tfp.fork_and_return, {}, 30) == "from the worker"
    assert [runner.run(call, tfp.count, {}, 30) for _ in range(3)] == [1, 2, 3]  # not the previous call's answer
    assert runner.run(call, tfp.pid, {}, 30) == worker


def test_process_runner_a_result_that_exits_when_unpickled_is_a_tool_error(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes(max_workers=1)
    call = a_call()
    worker = runner.run(call, tfp.pid, {}, 30)
    with pytest.raises(ToolExecutionError, match="cannot be unpickled: RuntimeError: unpickling raised SystemExit: 3"):
        runner.run(call, tfp.exit_on_load, {}, 30)  # was SystemExit in the caller, and the only worker lost as busy
    assert runner.stats()["busy"] == 0 and runner.run(call, tfp.pid, {}, 30) == worker


def test_process_runner_an_answer_read_halfway_retires_its_worker(
    processes: Callable[..., ProcessRunner], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame left half read (MemoryError, Ctrl-C) would make the next call read the rest as its answer."""
    import harness_one._runners as runners

    runner = processes()
    call = a_call()
    worker = runner.run(call, tfp.pid, {}, 30)
    take = runners._take

    def half(worker: Any) -> bytes:
        worker.wait(30)
        os.read(worker.fd, 10)  # the header and a little of the frame
        raise MemoryError

    monkeypatch.setattr(runners, "_take", half)
    with pytest.raises(ToolExecutionError, match="the tool's answer could not be read: MemoryError"):
        runner.run(call, tfp.pid, {}, 30)
    monkeypatch.setattr(runners, "_take", take)
    assert state(worker) is None and runner.stats()["killed"] == 1
    assert runner.run(call, tfp.count, {}, 30) == 1  # a new worker, in step


def test_process_runner_a_forked_child_of_the_caller_leaves_its_workers_alone(tmp_path: Path) -> None:
    """A child the application forks exits normally (atexit runs): the parent's workers live on, and
    the child, calling, starts its own."""
    script = tmp_path / "forks.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, sys
            import tools_for_processes as tfp
            from harness_one import ToolRegistry

            if __name__ == "__main__":
                reg = ToolRegistry(autoload=False)
                reg.add(tfp.pid, timeout=30, timeout_mode="process")
                worker = reg.call("pid")
                child = os.fork()
                if child == 0:
                    mine = reg.call("pid")
                    print("child", mine != worker, flush=True)
                    sys.exit(0)
                os.waitpid(child, 0)
                print("parent", reg.call("pid") == worker, flush=True)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split("\n")) == ["", "child True", "parent True"]


def test_process_runner_tool_errors_cross_typed(processes: Callable[..., ProcessRunner]) -> None:
    """A harness-one error raised in the worker arrives as that type, by pickle or else by ``to_dict``."""
    runner = processes()
    call = a_call()
    with pytest.raises(RetryableError) as retry:
        runner.run(call, tfp.raise_retryable, {}, 30)
    assert type(retry.value) is RetryableError and retry.value.retry_after == 1.5 and str(retry.value) == "try again soon"
    with pytest.raises(RetryableError) as described:  # its state holds a lock: rebuilt with ToolError.from_dict
        runner.run(call, tfp.raise_unsendable, {}, 30)
    assert type(described.value) is RetryableError  # the nearest harness-one class (a subclass is not looked up)
    assert described.value.retry_after == 2.5 and str(described.value) == "the backend is warming up"
    assert "in raise_unsendable" in str(described.value.__cause__)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_process_memory_limit_bounds_what_a_call_adds_and_the_worker_lives_on() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(tfp.allocate, timeout=30, timeout_mode="process", options={"memory_limit": 64 * 2**20})
    reg.add(tfp.allocate, name="unbounded", timeout=30, timeout_mode="process")
    try:
        assert reg.call("allocate", {"megabytes": 16}) == 16 * 2**20
        with pytest.raises(ToolExecutionError) as err:
            reg.call("allocate", {"megabytes": 256})
        assert isinstance(err.value.cause, MemoryError)
        assert (
            str(err.value)
            == f"Tool 'allocate' failed: MemoryError: the call needed more than its memory_limit of {64 * 2**20} bytes"
        )
        assert reg.call("unbounded", {"megabytes": 256}) == 256 * 2**20  # the same worker, its limit lifted
        stats = reg.stats()["timeout"]["processes"]
        assert (stats["alive"], stats["killed"], stats["died"]) == (1, 0, 0)
    finally:
        reg.plugins.get("timeout").processes.shutdown()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_process_memory_limit_past_any_address_space_is_no_limit() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(tfp.allocate, timeout=30, timeout_mode="process", options={"memory_limit": 2**64})  # setrlimit overflowed
    try:
        assert reg.call("allocate", {"megabytes": 16}) == 16 * 2**20
        assert reg.stats()["timeout"]["processes"]["died"] == 0
    finally:
        reg.plugins.get("timeout").processes.shutdown()


@pytest.mark.parametrize("value", [0, -1, 1.5, "1GB", True])
def test_process_memory_limit_must_be_a_positive_number_of_bytes(value: object) -> None:
    reg = ToolRegistry(autoload=False)
    with pytest.raises(ToolDefinitionError, match="memory_limit must be a positive number of bytes"):
        reg.add(tfp.allocate, timeout=30, timeout_mode="process", options={"memory_limit": value})
    assert "allocate" not in reg


def test_process_registry_retries_a_retryable_error_from_a_worker(tmp_path: Path) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(tfp.fail_once, timeout=30, timeout_mode="process", idempotent=True, retry={"attempts": 2, "initial": 0})
    try:
        assert reg.call("fail_once", {"marker": str(tmp_path / "failed")}) == "second time"
    finally:
        reg.plugins.get("timeout").processes.shutdown()


def test_process_runner_refuses_what_does_not_pickle(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    with pytest.raises(ToolExecutionError, match="picklable, importable tool function") as err:
        runner.run(a_call(), lambda: 1, {}, 30)
    assert isinstance(err.value.cause, TypeError)
    with pytest.raises(ToolExecutionError, match="picklable"):
        runner.run(a_call(), tfp.sleepy, {"seconds": threading.Lock()}, 30)
    assert runner.stats()["alive"] == 0  # refused before any worker started


def test_process_runner_full_pool_fails_at_once(processes: Callable[..., ProcessRunner], tmp_path: Path) -> None:
    runner = processes(max_workers=1)
    gate = tmp_path / "go"
    result: list[str] = []
    holder = threading.Thread(target=lambda: result.append(runner.run(a_call(), tfp.wait_for_file, {"path": str(gate)}, 30)))
    holder.start()
    wait_until(lambda: runner.stats()["busy"] == 1)
    with pytest.raises(ToolBusy, match="all 1 process workers are busy"):
        runner.run(a_call(), tfp.pid, {}, 30)
    gate.touch()
    holder.join(10)
    assert result == ["released"]
    assert runner.stats()["busy"] == 0


async def test_process_runner_arun(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    worker = await runner.arun(call, tfp.pid, {}, 30)
    assert await runner.arun(call, tfp.pid, {}, 30) == worker
    with pytest.raises(ValueError, match="bad input in child"):
        await runner.arun(call, tfp.explode, {}, 30)
    with pytest.raises(ToolTimeout):
        await runner.arun(call, tfp.sleepy, {"seconds": 300}, SHORT)
    assert state(worker) is None and runner.killed == 1


async def test_process_runner_arun_cancelled_kills_the_worker(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    worker = await runner.arun(call, tfp.pid, {}, 30)
    task = asyncio.ensure_future(runner.arun(call, tfp.sleepy, {"seconds": 300}, 300))
    await asyncio.to_thread(wait_until, lambda: runner.stats()["busy"] == 1)  # the task now awaits the answer
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert call.cancelled and state(worker) is None
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 1, "died": 0, "replaced": 1}


def test_process_runner_idle_workers_are_stopped(processes: Callable[..., ProcessRunner]) -> None:
    clock = ManualClock(start=100.0)
    runner = processes(idle_timeout=60, clock=clock.now)
    worker = runner.run(a_call(), tfp.pid, {}, 30)
    clock.advance(59)
    assert runner.reap_idle() == 0 and runner.stats()["alive"] == 1
    clock.advance(1)
    assert runner.reap_idle() == 1
    assert runner.stats()["alive"] == 0 and state(worker) is None
    assert runner.run(a_call(), tfp.pid, {}, 30) != worker  # a new worker on demand


def test_process_runner_max_calls_retires_workers(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes(max_calls=1)
    pids = [runner.run(a_call(), tfp.pid, {}, 30) for _ in range(3)]
    assert len(set(pids)) == 3  # a fresh process per call, as before warm workers
    assert all(state(pid) is None for pid in pids)
    assert runner.stats()["alive"] == 0


def test_process_runner_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="start_method must be 'spawn'"):
        ProcessRunner("fork")
    with pytest.raises(ValueError, match="max_workers"):
        ProcessRunner(max_workers=0)
    with pytest.raises(ValueError, match="max_calls"):
        ProcessRunner(max_calls=0)
    stopped = ProcessRunner()
    stopped.shutdown()
    call = a_call()
    call.ran = True  # as the core sets it before it calls the runner
    with pytest.raises(ToolExecutionError, match="could not be started: RuntimeError: the ProcessRunner is shut down"):
        stopped.run(call, tfp.pid, {}, 30)
    assert call.ran is False  # refused: the tool did not run


def test_process_workers_are_reaped_at_interpreter_exit(tmp_path: Path) -> None:
    """A script with a tool in ``__main__``, an idle worker and a hung one; after it exits nothing is left."""
    pidfile = tmp_path / "grandchild.pid"
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys, threading, time
            import tools_for_processes as tfp
            from harness_one import Call, ProcessRunner, ToolRegistry

            def from_main() -> int:
                return os.getpid()

            def grab(call: Call) -> Call:
                return call

            if __name__ == "__main__":
                reg = ToolRegistry(standard_plugins=False, autoload=False)
                reg.add(grab)
                call = reg.call("grab")
                runner = ProcessRunner(max_workers=2)
                args = (call, tfp.hang_with_grandchild, {{"pidfile": {str(pidfile)!r}}}, 300)
                threading.Thread(target=runner.run, args=args, daemon=True).start()
                while not os.path.exists({str(pidfile)!r}):
                    time.sleep(0.005)
                hung = runner.last_pid
                idle = runner.run(call, from_main, {{}}, 30)  # a second worker, idle at exit
                assert runner.stats()["alive"] == 2, runner.stats()
                print(idle, hung, flush=True)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    idle, hung = (int(pid) for pid in done.stdout.split())
    assert idle != hung
    assert state(idle) is None and state(hung) is None  # killed and reaped by the script before it exited
    assert gone(int(pidfile.read_text()))
    assert group_members({idle, hung}) == []


def test_process_mode_refuses_an_unguarded_main_module(tmp_path: Path) -> None:
    """A worker imports the main module (as ``spawn`` does); one that starts workers at import fails clearly."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            """
            import tools_for_processes as tfp
            from harness_one import ToolRegistry

            reg = ToolRegistry(autoload=False)
            reg.add(tfp.pid, timeout=30, timeout_mode="process")
            reg.call("pid")
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert "the process-mode worker failed to start:" in done.stderr
    assert "a worker is importing the main module, which starts another worker" in done.stderr
    assert "if __name__ == '__main__':" in done.stderr


def test_thread_mode_runs_the_tool_in_the_callers_context() -> None:
    import contextvars

    request: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")
    from harness_one_plugins import TimeoutPlugin

    reg = ToolRegistry(autoload=False, standard_plugins=False, plugins={"timeout": TimeoutPlugin()})

    def who() -> str:
        return request.get()

    reg.add(who, timeout=5, timeout_mode="thread")
    token = request.set("req-1")
    try:
        assert reg.call("who") == "req-1"

        async def main() -> Any:
            request.set("req-2")
            return await reg.acall("who")

        assert asyncio.run(main()) == "req-2"
    finally:
        request.reset(token)
    assert reg.call("who") == "none"


def test_a_process_mode_timeout_under_acall_does_not_wait_for_the_loops_executor(release: threading.Event) -> None:
    """The kill's reaping ran in the loop's default executor: with its threads held by sync tools under acall (which
    run there), the timed-out call waited for one of them (seconds late, or never). Bounded by wait_for: a call that
    waits for the held executor again fails with TimeoutError instead of hanging."""
    from concurrent.futures import ThreadPoolExecutor

    reg = ToolRegistry(autoload=False)
    reg.add(tfp.sleepy, timeout=0.5, timeout_mode="process")
    started = threading.Semaphore(0)

    def hold() -> str:
        started.release()
        release.wait(60)
        return "held"

    reg.add(hold)  # sync, no timeout: acall runs it in the loop's default executor

    async def main() -> tuple[BaseException | None, list[str]]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
        await reg.acall("sleepy", {"seconds": 0})  # a warm worker
        hogs = [asyncio.ensure_future(reg.acall("hold")) for _ in range(2)]
        holding = 0
        while holding < 2:  # both executor threads held (polled: to_thread would need one of them)
            if started.acquire(blocking=False):
                holding += 1
            else:
                await asyncio.sleep(0.01)
        try:
            await asyncio.wait_for(reg.acall("sleepy", {"seconds": 60}), 30)
            error: BaseException | None = None
        except BaseException as exc:
            error = exc
        release.set()
        return error, await asyncio.gather(*hogs)

    error, held = asyncio.run(main())
    assert type(error) is ToolTimeout  # at its deadline, with every executor thread still held
    assert held == ["held", "held"]
