"""The timeout runners against hostile or unlucky tools: refusals, forged and partial answers, escapes, limits."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tools_for_processes as tfp
from tools_for_processes import a_call

from harness_one import (
    ArgumentLimits,
    Call,
    ProcessRunner,
    ToolBusy,
    ToolCancelled,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    _runners,
    _worker,
    hookimpl,
)
from harness_one._worker import send
from harness_one_plugins.timeout import TimeoutPlugin

SHORT = 0.2  # seconds; only where a real deadline is what the test is about
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only (/proc, RLIMIT_AS)")


# --- tools, importable by name from a worker (this module is on the worker's sys.path) ---------


def _result_socket() -> int:
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            pass
    raise RuntimeError("no socket")


def loaded() -> int:
    """A first call that makes the worker import this module (so a short deadline is spent on the tool)."""
    return os.getpid()


def partial_frame() -> str:
    """Write only a frame header (of 1000 bytes) to the worker's socket, then hang."""
    os.write(_result_socket(), (1000).to_bytes(8, "little"))
    time.sleep(300)
    return "never"


def forged_answer(text: str) -> str:
    """Answer this call with a frame of its own; the real answer would be the next call's."""
    send(_result_socket(), pickle.dumps((True, text)))
    return "the real answer"


def other_group(pidfile: str) -> None:
    """Start ``sleep 300`` in a new process group of the worker's session (as ``set -m`` does), then hang."""
    child = subprocess.Popen(["sleep", "300"], process_group=0)
    Path(pidfile + ".tmp").write_text(str(child.pid))
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(300)


def fork_then_exit() -> None:
    """Fork a child that keeps the worker's socket open, then end the worker."""
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
    os._exit(1)


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    with tfp.no_leftovers():
        yield


def finishes(fn: Callable[[], Any], within: float = 20.0) -> Any:
    """``fn()``'s result or exception, failing the test if it has not returned ``within`` seconds (a hang)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    assert box, f"still blocked after {within} s"
    return box[0]


def wait_until(condition: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


# --- 1. a refusal before the tool started leaves call.ran False ------------------------------


def test_thread_mode_busy_refusal_is_not_stored_under_the_idempotency_key() -> None:
    runs: list[str] = []
    gate = threading.Event()

    def hold() -> None:
        gate.wait(30)

    def place_order(item: str) -> str:
        runs.append(item)
        return f"ordered {item}"

    plugin = TimeoutPlugin(max_workers=1)
    reg = ToolRegistry(autoload=False, plugins={"timeout": plugin})
    reg.add(hold, timeout=SHORT)
    reg.add(place_order, timeout=30)
    try:
        with pytest.raises(ToolTimeout):
            reg.call("hold")  # its thread is abandoned: the pool is full
        with pytest.raises(ToolBusy) as busy:
            reg.call("place_order", {"item": "book"}, idempotency_key="order-42")
        assert not busy.value.replayed
    finally:
        gate.set()
    wait_until(lambda: plugin.threads.stats()["busy"] == 0)
    assert reg.call("place_order", {"item": "book"}, idempotency_key="order-42") == "ordered book"  # ran, not replayed
    assert runs == ["book"]


def test_process_mode_busy_refusal_is_not_stored_under_the_idempotency_key(tmp_path: Path) -> None:
    plugin = TimeoutPlugin(mode="process", max_processes=1)
    reg = ToolRegistry(autoload=False, plugins={"timeout": plugin})
    reg.add(tfp.wait_for_file, timeout=30)
    reg.add(tfp.pid, timeout=30)
    gate = tmp_path / "go"
    holder = threading.Thread(target=reg.call, args=("wait_for_file", {"path": str(gate)}))
    try:
        holder.start()
        wait_until(lambda: plugin.processes.stats()["busy"] == 1)
        with pytest.raises(ToolBusy):
            reg.call("pid", idempotency_key="k")
        gate.touch()
        holder.join(30)
        worker = reg.call("pid", idempotency_key="k")  # the tool runs now: the refusal was not its outcome
        assert worker == plugin.processes.last_pid and worker != os.getpid()
        assert reg.stats()["idempotency"]["replays"] == 0
    finally:
        gate.touch()
        plugin.processes.shutdown()


# --- 2. a partial answer frame is bounded by the deadline ------------------------------------


def test_process_partial_answer_frame_times_out_at_the_deadline(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    worker = runner.run(call, loaded, {}, 30)
    outcome = finishes(lambda: runner.run(call, partial_frame, {}, SHORT))
    assert isinstance(outcome, ToolTimeout) and outcome.timeout == SHORT
    assert tfp.state(worker) is None and runner.stats()["killed"] == 1
    assert runner.run(a_call(), tfp.count, {}, 30) == 1  # a fresh worker (a new call: this one's attempt was cancelled)


def test_process_partial_answer_frame_times_out_at_the_deadline_async(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    asyncio.run(runner.arun(call, loaded, {}, 30))
    outcome = finishes(lambda: asyncio.run(runner.arun(call, partial_frame, {}, SHORT)))  # its own loop, in a thread
    assert isinstance(outcome, ToolTimeout)
    assert runner.stats()["killed"] == 1


# --- 3. answers carry their job's id ---------------------------------------------------------


def test_process_forged_answer_kills_the_worker_and_the_next_call_gets_its_own(
    processes: Callable[..., ProcessRunner],
) -> None:
    runner = processes(max_workers=1)
    call = a_call()
    worker = runner.run(call, tfp.pid, {}, 30)
    with pytest.raises(ToolExecutionError, match="the worker's answer was not in step with its call"):
        runner.run(call, forged_answer, {"text": "balance: 1000000"}, 30)
    assert tfp.state(worker) is None
    assert runner.run(call, tfp.count, {}, 30) == 1  # its own answer, from a fresh worker (not "the real answer")
    assert runner.run(call, tfp.count, {}, 30) == 2


# --- 4. the kill reaches other process groups of the worker's session ------------------------


@linux
def test_process_kill_reaches_a_grandchild_in_another_group_of_the_session(
    processes: Callable[..., ProcessRunner], tmp_path: Path
) -> None:
    runner = processes()
    call = a_call()
    runner.run(call, tfp.pid, {}, 30)
    pidfile = tmp_path / "grandchild.pid"
    with pytest.raises(ToolTimeout):
        runner.run(call, other_group, {"pidfile": str(pidfile)}, 2.0)
    grandchild = tfp.read_pid(str(pidfile))
    try:
        assert tfp.gone(grandchild)
    finally:
        if tfp.running(grandchild):
            os.kill(grandchild, 9)


@linux
def test_process_session_scan_leaves_out_zombies() -> None:
    """A zombie is dead already: a scan that counted it would kill it again and scan again, 16 times."""
    exited = subprocess.Popen(["true"], start_new_session=True)  # leads a session of its own
    try:
        wait_until(lambda: tfp.state(exited.pid) == "Z")  # exited, not yet reaped
        assert _worker._session_members(exited.pid) == []
    finally:
        exited.wait()


def test_process_retiring_a_worker_scans_its_session_once(
    processes: Callable[..., ProcessRunner], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker, killed with its group, is not looked for again (one /proc scan, not 16, per retirement)."""
    scans: list[int] = []
    members = _worker._session_members

    def counted(sid: int) -> list[int]:
        scans.append(sid)
        return members(sid)

    monkeypatch.setattr(_worker, "_session_members", counted)
    runner = processes(max_calls=1)
    worker = runner.run(a_call(), tfp.pid, {}, 30)  # then retired: killed, its session scanned
    assert scans == [worker] and tfp.state(worker) is None


# --- 5. a worker's start counts against the call's time --------------------------------------


def test_process_worker_start_is_charged_to_the_calls_timeout(processes: Callable[..., ProcessRunner]) -> None:
    """A cold worker cannot start in 1 ms: the call times out at its deadline, the worker goes on starting."""
    runner = processes()
    call = a_call()
    call.ran = True  # as the core sets it before it calls the runner
    with pytest.raises(ToolTimeout):
        runner.run(call, tfp.sleepy, {"seconds": 5}, 0.001)
    assert not call.ran  # the tool never started
    assert runner.stats()["killed"] == 0 and runner.stats()["alive"] == 1
    starting = runner.last_pid
    assert runner.run(a_call(), tfp.pid, {}, 30) == starting  # the same worker, now ready


# --- 6. a worker's exit is seen while a process it forked holds its socket -------------------


def test_process_worker_exit_is_seen_while_a_forked_child_holds_the_socket(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    runner.run(call, tfp.pid, {}, 30)
    outcome = finishes(lambda: runner.run(call, fork_then_exit, {}, 300), within=20)
    assert isinstance(outcome, ToolExecutionError)
    assert "the tool's worker process exited with code 1 before answering" in str(outcome)
    assert runner.stats()["died"] == 1


# --- 7. a job bigger than the socket's buffer, for a worker that reads nothing -----------------

BIG = "x" * (8 << 20)  # far more than a socket's buffer holds


def stop(pid: int) -> None:
    """Stop ``pid`` (SIGSTOP): it reads nothing until SIGCONT."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: tfp.state(pid) == "T")


async def test_process_acall_lets_the_loop_run_while_a_big_job_waits_for_room() -> None:
    plugin = TimeoutPlugin(mode="process", max_processes=1)
    reg = ToolRegistry(autoload=False, plugins={"timeout": plugin}, limits=ArgumentLimits(max_bytes=2 * len(BIG)))
    reg.add(tfp.size, timeout=20)  # reached only without the fix: the loop blocked until the deadline
    runner = plugin.processes
    try:
        assert await reg.acall("size", {"text": "x"}) == 1
        worker = runner.last_pid
        assert worker is not None
        await asyncio.to_thread(stop, worker)
        call = asyncio.ensure_future(reg.acall("size", {"text": BIG}))
        while runner.stats()["busy"] == 0:  # the call has not taken the worker yet (submitting is in the same step)
            assert not call.done(), call.exception()
            await asyncio.sleep(0)
        for _ in range(100):  # this coroutine runs on, 100 turns, while the call waits for room in the worker's socket
            await asyncio.sleep(0)
            assert not call.done()
        os.kill(worker, signal.SIGCONT)
        assert await call == len(BIG)
        assert runner.last_pid == worker and runner.stats()["killed"] == 0
    finally:
        runner.shutdown()


def test_process_cancel_is_seen_while_a_big_job_waits_for_room(processes: Callable[..., ProcessRunner]) -> None:
    runner = processes()
    call = a_call()
    worker = runner.run(call, loaded, {}, 30)
    stop(worker)

    def cancel_once_taken() -> None:
        wait_until(lambda: runner.stats()["busy"] == 1)  # the job is sent as far as the socket takes it
        call.cancel()

    canceller = threading.Thread(target=cancel_once_taken)
    canceller.start()
    outcome = finishes(lambda: runner.run(call, tfp.size, {"text": BIG}, 300))
    canceller.join(10)
    assert isinstance(outcome, ToolCancelled)  # seen while the job waits for room, not at the deadline
    assert tfp.state(worker) is None and runner.stats()["killed"] == 1


# --- 8. a call cancelled before its tool starts -------------------------------------------------


def run_in(runner: ProcessRunner, aio: bool, call: Call, fn: Callable[..., Any]) -> Any:
    """``runner.run``, or ``runner.arun`` on an event loop of its own."""
    if aio:
        return asyncio.run(runner.arun(call, fn, {}, 300))
    return runner.run(call, fn, {}, 300)


def slow_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """New workers do not start until the returned path exists (the main module they import waits for it)."""
    release, main = tmp_path / "release", tmp_path / "slow_main.py"
    main.write_text(f"import os, time\n\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.005)\n")
    prepared = _runners._preparation

    def preparation() -> dict[str, Any]:
        data = prepared()
        data.pop("init_main_from_name", None)
        data["init_main_from_path"] = str(main)
        return data

    monkeypatch.setattr(_runners, "_preparation", preparation)
    return release


@pytest.mark.parametrize("mode", ["process", "thread", "none"])
@pytest.mark.parametrize("aio", [False, True], ids=["call", "acall"])
def test_call_cancelled_before_its_tool_starts_never_starts_it(aio: bool, mode: str) -> None:
    """``call.cancel()`` in a pre-call hook: ToolCancelled, the tool never started (in process mode no
    worker taken or started), ``call.ran`` False for the plugins, in every timeout mode."""
    seen: list[tuple[str, bool]] = []
    before = tfp.calls  # calls run in this process (thread and none modes)

    class Canceller:
        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            call.cancel()

        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> None:
            seen.append((type(error).__name__, call.ran))

    plugin = TimeoutPlugin(mode=mode)
    reg = ToolRegistry(autoload=False, plugins={"timeout": plugin, "canceller": Canceller()})
    reg.add(tfp.count, timeout=30)
    try:
        with pytest.raises(ToolCancelled, match="The call of 'count' was cancelled"):
            asyncio.run(reg.acall("count")) if aio else reg.call("count")
        assert seen == [("ToolCancelled", False)]
        assert tfp.calls == before  # (before the fix, in thread and none modes: the tool ran)
        assert plugin.processes.stats()["alive"] == 0  # (before its fix: a worker started and ran the tool)
    finally:
        plugin.processes.shutdown()


@pytest.mark.parametrize("aio", [False, True], ids=["run", "arun"])
def test_process_call_cancelled_while_its_worker_starts_never_starts_its_tool(
    processes: Callable[..., ProcessRunner], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, aio: bool
) -> None:
    """``call.cancel()`` from another thread while the call waits for its worker's start: ToolCancelled within
    50 ms (not at the start's end), the tool not started, the worker goes on starting for the next call."""
    release = slow_start(monkeypatch, tmp_path)
    runner = processes(start_timeout=10)
    call = a_call()
    call.ran = True  # as the core sets it before it calls the runner

    def cancel_once_starting() -> None:
        wait_until(lambda: runner.stats()["busy"] == 1)  # taken and starting (its main module waits for `release`)
        call.cancel()

    canceller = threading.Thread(target=cancel_once_starting)
    canceller.start()
    outcome = finishes(lambda: run_in(runner, aio, call, tfp.count))
    canceller.join(10)
    assert isinstance(outcome, ToolCancelled), outcome  # (before the fix: "did not start within 10 s")
    assert not call.ran
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 0, "died": 0, "replaced": 0}
    starting = runner.last_pid
    release.touch()
    assert runner.run(a_call(), tfp.count, {}, 30) == 1  # its first call: the cancelled one never ran in it
    assert runner.last_pid == starting


@pytest.mark.parametrize("aio", [False, True], ids=["run", "arun"])
def test_process_call_cancelled_as_its_worker_becomes_ready_never_starts_its_tool(
    processes: Callable[..., ProcessRunner], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, aio: bool
) -> None:
    """The cancel comes in the wait that the worker's ready message ends (no quiet wait sees it): the job is not sent."""
    monkeypatch.setattr(_runners, "_CANCEL_POLL", 600.0)  # every wait ends with the ready message, none quiet
    release = slow_start(monkeypatch, tmp_path)
    runner = processes()
    call = a_call()
    call.ran = True

    def cancel_then_release() -> None:
        wait_until(lambda: runner.stats()["busy"] == 1)
        call.cancel()
        release.touch()

    canceller = threading.Thread(target=cancel_then_release)
    canceller.start()
    outcome = finishes(lambda: run_in(runner, aio, call, tfp.count))
    canceller.join(10)
    assert isinstance(outcome, ToolCancelled), outcome  # (before the fix: 1, the tool ran)
    assert not call.ran
    assert runner.stats() == {"workers": 4, "alive": 1, "busy": 0, "killed": 0, "died": 0, "replaced": 0}
    starting = runner.last_pid
    assert runner.run(a_call(), tfp.count, {}, 30) == 1 and runner.last_pid == starting
