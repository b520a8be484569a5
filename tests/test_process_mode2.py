"""Process mode: defineTool tools, calls with no timeout, exceptions that do not unpickle, starts and
cancels; thread mode: a slot whose caller's event loop closed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tools_for_process_mode2 as tpm
import tools_for_processes as tfp
from tools_for_processes import a_call

from harness_one import (
    Call,
    ProcessRunner,
    ThreadRunner,
    ToolCancelled,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)
from harness_one_plugins import TimeoutPlugin


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    with tfp.no_leftovers():
        yield


@pytest.fixture
def reg() -> Iterator[ToolRegistry]:
    registry = ToolRegistry(autoload=False)
    yield registry
    registry.plugins.get("timeout").processes.shutdown()


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in 5 s"
        time.sleep(0.005)


# --- defineTool tools ----------------------------------------------------------------------


def test_a_define_tool_tool_runs_in_a_worker(reg: ToolRegistry) -> None:
    """The module holds defineTool's wrapper under the function's name: the job names the wrapper."""
    assert tpm.where is not tpm.where.tool.fn  # type: ignore[attr-defined]
    reg.add(tpm.where)
    worker = reg.call("where")
    assert worker != os.getpid() and worker == reg.plugins.get("timeout").processes.last_pid


def test_the_contrib_calculate_tool_runs_in_a_worker() -> None:
    """``[plugins.timeout] mode = "process"``: a shipped defineTool tool runs there."""
    from harness_one_calculate import calculate

    reg = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(mode="process", default=30)})
    try:
        reg.add(calculate)
        assert reg.call("calculate", {"expression": "1+2"})["result"] == 3
        assert reg.stats()["timeout"]["processes"]["alive"] == 1
    finally:
        reg.plugins.get("timeout").processes.shutdown()


# --- process mode with no timeout ----------------------------------------------------------


def test_process_mode_without_a_timeout_runs_in_a_worker(reg: ToolRegistry) -> None:
    reg.add(tpm.pid, timeout_mode="process")
    reg.add(tpm.exit_now, timeout_mode="process")
    reg.add(tpm.allocate, timeout_mode="process", options={"memory_limit": 64 * 2**20})
    worker = reg.call("pid")
    assert worker != os.getpid()
    failed = reg.try_call("exit_now")  # os._exit ends the worker, not the caller
    assert (
        str(failed.error) == "Tool 'exit_now' failed: RuntimeError: the tool's worker process exited with code 3 before answering"
    )
    if sys.platform.startswith("linux"):
        with pytest.raises(ToolExecutionError, match="needed more than its memory_limit"):
            reg.call("allocate", {"megabytes": 256})


async def test_process_mode_without_a_timeout_under_acall(reg: ToolRegistry) -> None:
    reg.add(tpm.pid, timeout_mode="process", blocking=False)  # not blocking: the core would call it on the loop
    assert await reg.acall("pid") != os.getpid()


def test_process_mode_without_a_timeout_has_no_deadline(reg: ToolRegistry) -> None:
    seen: list[tuple[float | None, float | None]] = []

    class Spy:
        name, order = "spy", 99

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            seen.append((call.timeout, call.deadline))

    reg.plugins.register(Spy())
    reg.add(tpm.pid, timeout_mode="process")
    assert reg.call("pid") != os.getpid()
    assert seen == [(float("inf"), None)]


# --- exceptions that pickle but do not unpickle --------------------------------------------


@pytest.mark.parametrize(("tool", "error"), [(tpm.fail_once, tpm.UpstreamBusy), (tpm.fail_once_httpx, httpx.HTTPStatusError)])
def test_an_exception_with_keyword_only_arguments_crosses_typed_and_is_retried(
    reg: ToolRegistry, tmp_path: Path, tool: Callable[..., str], error: type[Exception]
) -> None:
    reg.add(tool, timeout=30, timeout_mode="process", idempotent=True, retry={"attempts": 3, "initial": 0, "on": [error]})
    reg.add(tool, name="once", timeout=30, timeout_mode="process")
    result = reg.try_call(tool.__name__, {"marker": str(tmp_path / "retried")})
    assert (result.value, result.attempts) == ("second time", 2)
    failed = reg.try_call("once", {"marker": str(tmp_path / "once")})
    assert isinstance(failed.error, ToolExecutionError)
    cause = failed.error.cause
    assert type(cause) is error and "in fail_once" in str(cause.__cause__)
    if isinstance(cause, tpm.UpstreamBusy):
        assert (cause.args, cause.status) == (("upstream said 503",), 503)
    else:
        assert isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code == 503


def test_an_exception_that_is_not_rebuilt_comes_back_described(reg: ToolRegistry) -> None:
    reg.add(tpm.raise_unsendable_secret, timeout=30, timeout_mode="process")
    failed = reg.try_call("raise_unsendable_secret")
    assert isinstance(failed.error, ToolExecutionError) and failed.error.cause == "tools_for_process_mode2.Unsendable"
    assert str(failed.error) == "Tool 'raise_unsendable_secret' failed: Unsendable: cannot connect to postgres://[REDACTED]@db/x"


# --- a worker that fails to start, a start cut short ---------------------------------------


def test_a_worker_that_fails_to_start_is_not_retried(tmp_path: Path) -> None:
    """The runner's own failure before the tool ran is not matched against the policy's ``on``."""
    script = tmp_path / "fails_in_worker.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os
            if os.environ.get("HARNESS_ONE_WORKER_STARTING"):
                raise RuntimeError("needs its config")
            import tools_for_process_mode2 as tpm
            from harness_one import ToolRegistry

            if __name__ == "__main__":
                reg = ToolRegistry(autoload=False)
                reg.add(tpm.pid, timeout=30, timeout_mode="process", idempotent=True,
                        retry={"attempts": 3, "on": [RuntimeError], "total": 2})
                result = reg.try_call("pid")
                stats = reg.stats()
                print(json.dumps([result.ran, str(result.error), stats["retry"], stats["timeout"]["processes"]["alive"]]))
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, str(script)], check=True, capture_output=True, text=True, env=env, timeout=60)
    ran, error, retry, alive = json.loads(done.stdout)
    assert not ran and error.startswith("Tool 'pid' failed: RuntimeError: the process-mode worker failed to start:")
    assert (retry, alive) == ({"retries": 0, "gave_up": 0}, 0)


def test_a_timeout_while_the_worker_starts_says_the_tool_did_not_run(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    with pytest.raises(ToolTimeout) as err:
        runner.run(call, tpm.pid, {}, 0.001)  # no worker starts in a millisecond
    after = err.value.retry_after
    assert not call.ran and after is not None
    assert str(err.value) == (
        "Tool 'tool' did not start within 0.001 s: its worker process is still starting, "
        f"and the tool did not run. Try the same call again in about {after:g} s."
    )
    assert err.value.to_dict()["message"] == str(err.value)
    assert runner.run(call, tpm.pid, {}, 30) == runner.last_pid  # the worker went on starting, for this call


async def test_an_acall_cancelled_while_its_worker_starts_did_not_run(reg: ToolRegistry) -> None:
    seen: list[tuple[str, bool]] = []

    class Spy:
        name, order = "spy", 99

        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> None:
            seen.append((type(error).__name__, call.ran))

    reg.plugins.register(Spy())
    reg.add(tpm.pid, timeout=30, timeout_mode="process")
    task = asyncio.ensure_future(reg.acall("pid"))
    await asyncio.sleep(0)  # the task took a new worker and waits for its ready message
    runner: ProcessRunner = reg.plugins.get("timeout").processes
    starting = runner.last_pid
    assert starting is not None and runner.stats()["busy"] == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [("ToolCancelled", False)]
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 0, "died": 0, "replaced": 0}
    assert await reg.acall("pid") == starting  # it went on starting, for the next call


# --- thread mode: a caller whose event loop closed -----------------------------------------


def test_a_thread_slot_comes_back_when_its_callers_loop_closed(tmp_path: Path) -> None:
    """The caller's task is left pending and its loop closed: the worker gives its slot back once the tool returns."""
    runner = ThreadRunner(max_workers=1)
    gate = tmp_path / "go"
    call = a_call()
    loop = asyncio.new_event_loop()
    task = loop.create_task(runner.arun(call, tpm.wait_for, {"path": str(gate)}, 30))
    loop.run_until_complete(asyncio.sleep(0.01))  # the task now awaits the worker
    loop.close()
    gate.touch()
    wait_until(lambda: runner.stats()["busy"] == 0)
    pool: Any = runner._pool
    assert len(pool.idle) == 1
    task.get_coro().close()  # the pending caller ends later after all: it gives nothing back twice
    assert len(pool.idle) == 1 and call.cancelled
    assert runner.run(a_call(), tpm.pid, {}, 30) == os.getpid()
    runner.shutdown()


# --- acall: a worker killed at a timeout or cancel is reaped off the event loop ------------


@pytest.mark.parametrize("how", ["timeout", "task cancelled", "call cancelled"])
async def test_an_acall_worker_is_reaped_off_the_event_loop(
    processes: Callable[..., ProcessRunner], tmp_path: Path, how: str
) -> None:
    """Reaping waits for the kernel to free the worker's memory (up to 0.1 s a GiB): not on the loop's thread."""
    runner = processes()
    call = a_call()
    worker = await runner.arun(call, tpm.pid, {}, 30)
    pool: Any = runner._pool
    discard = pool.discard
    reaped_in: list[int] = []

    def spy(target: Any, why: str | None = None) -> int:
        if target.code is None:
            reaped_in.append(threading.get_ident())
        return discard(target, why)  # type: ignore[no-any-return]

    pool.discard = spy
    job = runner.arun(call, tpm.wait_for, {"path": str(tmp_path / "never")}, 0.2 if how == "timeout" else 30)
    if how == "timeout":
        with pytest.raises(ToolTimeout):
            await job
    else:
        task = asyncio.ensure_future(job)
        await asyncio.to_thread(wait_until, lambda: runner.stats()["busy"] == 1)
        task.cancel() if how == "task cancelled" else call.cancel()
        with pytest.raises(asyncio.CancelledError if how == "task cancelled" else ToolCancelled):
            await task
    assert reaped_in and threading.get_ident() not in reaped_in
    assert tfp.state(worker) is None  # reaped before the call ended
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 1, "died": 0, "replaced": 1}


def test_the_plugins_process_mode_alone_leaves_an_untimed_tool_in_the_callers_process() -> None:
    """``TimeoutPlugin(mode="process")`` with no default: an untimed lambda, a closure and a tool with a ``Call``
    parameter run in the caller's process as before (they cannot be sent to a worker: every call failed)."""

    def make() -> Any:
        def greet(name: str) -> str:
            return f"hello {name}"

        return greet

    def progress(n: int, call: Call) -> int:
        return n + call.attempt

    plugin = TimeoutPlugin(mode="process")
    reg = ToolRegistry(autoload=False, plugins={"timeout": plugin})
    try:
        reg.add(make(), name="greet")
        reg.add(lambda x: x * 2, name="double")
        reg.add(progress)  # (was a ToolDefinitionError)
        assert reg.call("greet", {"name": "bob"}) == "hello bob"
        assert reg.call("double", {"x": 4}) == 8
        assert reg.call("progress", {"n": 2}) == 3
        assert plugin.processes.stats()["alive"] == 0  # no worker started
    finally:
        plugin.processes.shutdown()
