"""Runners, third review: process-mode tools the ``harness-one`` command loads from a file or its
current directory; thread mode in a forked child; failures before the tool started (no worker,
a job the worker cannot load) are refusals; killed tools' children reaped where the harness is
their reaper; hostile exceptions and results; ``StopIteration`` under ``acall``; the retry
plugin and an open circuit."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import importlib.util
import json
import os
import random
import resource
import subprocess
import sys
import textwrap
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tools_for_processes as tfp
import tools_for_review3 as t3
from fork_support import in_child

from harness_one import CircuitOpen, ManualClock, RetryableError, ToolExecutionError, ToolRegistry
from harness_one._errors import exception_text
from harness_one_plugins import RetryPlugin


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    with tfp.no_leftovers():
        yield


@pytest.fixture
def reg() -> Iterator[ToolRegistry]:
    registry = ToolRegistry(autoload=False)
    yield registry
    registry.plugins.get("timeout").processes.shutdown()


def _env(tmp_path: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HARNESS_ONE_")}
    env["HARNESS_ONE_STATE"] = str(tmp_path / "state.sqlite3")
    return env


# --- 1. the harness-one command's tools in process mode ------------------------------------


def test_the_command_runs_process_mode_tools_from_a_file_and_from_its_directory(tmp_path: Path) -> None:
    """``--tools FILE.py`` is imported as ``harness_one_local_<hash>``, ``--tools pkg.module`` from the
    current directory, which the command takes off ``sys.path`` again: both import in the worker."""
    script = Path(sys.executable).with_name("harness-one")
    if not script.exists():
        pytest.skip("the harness-one script is not installed next to the interpreter")
    tools = tmp_path / "tools"
    (tools / "pkg").mkdir(parents=True)
    (tools / "helper.py").write_text("NAME = 'from the helper'\n")
    (tools / "pkg" / "__init__.py").write_text("")
    (tools / "pkg" / "ptools.py").write_text(
        textwrap.dedent(
            """
            import os
            import helper
            from harness_one import defineTool

            @defineTool(timeout=30, timeout_mode="process", registry=None)
            def worker_pid() -> list:
                \"\"\"The pid of the process that runs this tool, and what its module imported.\"\"\"
                return [os.getpid(), helper.NAME]
            """
        )
    )
    (tools / "solo.py").write_text(
        textwrap.dedent(
            """
            import os
            from harness_one import defineTool

            @defineTool(timeout=30, timeout_mode="process", registry=None)
            def solo_pid() -> int:
                \"\"\"The pid of the process that runs this tool.\"\"\"
                return os.getpid()
            """
        )
    )
    by_file = [str(script), "--config", os.devnull, "--tools", str(tools / "solo.py"), "call", "solo_pid"]
    done = subprocess.run(by_file, cwd="/", env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["ok"] is True and isinstance(answer["result"], int)
    by_module = [str(script), "--config", os.devnull, "--tools", "pkg.ptools", "call", "worker_pid"]
    done = subprocess.run(by_module, cwd=tools, env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["ok"] is True and answer["result"][1] == "from the helper"


def test_a_module_loaded_from_a_file_under_another_name_runs_in_a_worker(reg: ToolRegistry, tmp_path: Path) -> None:
    source = tmp_path / "filed.py"
    source.write_text("import os\n\ndef filed_pid() -> int:\n    return os.getpid()\n")
    spec = importlib.util.spec_from_file_location("review3_loaded_by_path", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        reg.add(module.filed_pid, timeout=30, timeout_mode="process")
        assert reg.call("filed_pid") == reg.plugins.get("timeout").processes.last_pid != os.getpid()
    finally:
        del sys.modules[spec.name]


# --- 3. failures before the tool started ----------------------------------------------------


def test_a_tool_whose_module_the_worker_cannot_import_is_refused(reg: ToolRegistry) -> None:
    """The worker cannot load the job: the tool did not run (no retry, no circuit failure, no stored
    outcome), and the worker stays for the next call."""
    module = types.ModuleType("review3_nowhere")
    exec("def lost() -> int:\n    return 1\n", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        reg.add(
            module.lost,
            timeout=30,
            timeout_mode="process",
            idempotent=True,
            retry={"attempts": 3, "on": [RuntimeError, TypeError]},
            circuit_breaker={"min_calls": 1},
        )
        reg.add(t3.pid, timeout=30, timeout_mode="process")
        first = reg.call("pid")
        result = reg.try_call("lost", idempotency_key="order-7")
        assert isinstance(result.error, ToolExecutionError) and not result.ran
        assert result.error.message == (
            "Tool 'lost' failed: RuntimeError: process mode: the worker cannot load the tool function or its "
            "arguments: ModuleNotFoundError: No module named 'review3_nowhere' (the tool did not run)"
        )
        again = reg.try_call("lost", idempotency_key="order-7")
        assert isinstance(again.error, ToolExecutionError) and not again.error.replayed
        stats = reg.stats()
        assert stats["retry"] == {"retries": 0, "gave_up": 0}
        assert stats["tools"]["lost"]["circuit"]["failures"] == 0
        processes = stats["timeout"]["processes"]
        assert (processes["alive"], processes["died"], processes["killed"]) == (1, 0, 0)
        assert reg.call("pid") == first  # the same worker
    finally:
        del sys.modules[module.__name__]


@pytest.fixture
def no_file_descriptors() -> Iterator[Any]:
    """Call ``starve()`` to leave this process no free file descriptor until the test ends (or ``back()``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []

    def back() -> None:
        while held:
            os.close(held.pop())
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    def starve() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
        try:
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass

    yield types.SimpleNamespace(starve=starve, back=back)
    back()


def test_a_worker_process_that_cannot_be_started_is_a_refusal(reg: ToolRegistry, no_file_descriptors: Any) -> None:
    reg.add(t3.pid, timeout=30, timeout_mode="process", idempotent=True, retry={"attempts": 3, "on": [OSError]})
    no_file_descriptors.starve()
    result = reg.try_call("pid", idempotency_key="order-7")
    no_file_descriptors.back()
    assert isinstance(result.error, ToolExecutionError) and not result.ran
    assert result.error.message.startswith(
        "Tool 'pid' failed: RuntimeError: the process-mode worker could not be started: OSError: [Errno 24]"
    )
    cause = result.error.__cause__
    assert isinstance(cause, RuntimeError) and isinstance(cause.__cause__, OSError) and cause.__cause__.errno == errno.EMFILE
    assert reg.stats()["retry"] == {"retries": 0, "gave_up": 0}
    later = reg.try_call("pid", idempotency_key="order-7")  # the key was not kept for the refusal
    assert later.ok and later.ran and later.value != os.getpid()


def test_a_worker_thread_that_cannot_be_started_is_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    reg = ToolRegistry(autoload=False)
    reg.add(
        lambda: calls.append(1),
        name="quick",
        timeout=30,
        idempotent=True,
        retry={"attempts": 3, "on": [RuntimeError]},
        circuit_breaker={"min_calls": 1},
    )
    start = threading.Thread.start

    def refused(thread: threading.Thread) -> None:  # as when the system has no thread left to give
        if thread.name.startswith("harness-one-tool-"):
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refused)
    result = reg.try_call("quick")
    monkeypatch.undo()
    assert isinstance(result.error, ToolExecutionError) and not result.ran
    assert result.error.message == (
        "Tool 'quick' failed: RuntimeError: a timeout worker thread could not be started: RuntimeError: can't start new thread"
    )
    stats = reg.stats()
    assert stats["retry"] == {"retries": 0, "gave_up": 0} and stats["tools"]["quick"]["circuit"]["failures"] == 0
    assert stats["timeout"]["threads"] == {"workers": 32, "busy": 0, "stuck": 0}
    assert reg.try_call("quick").ran and calls == [1]


# --- 2. thread mode in a forked child -------------------------------------------------------


def test_thread_mode_works_in_a_forked_child() -> None:
    """The parent's idle worker threads did not survive the fork: the child starts its own."""
    reg = ToolRegistry(autoload=False)
    runs: list[int] = []
    reg.add(lambda x: runs.append(x) or x * 2, name="quick", timeout=20, max_concurrency=1)
    assert reg.call("quick", {"x": 1}) == 2  # a worker thread now idle in the parent

    def child() -> bytes:
        results = [reg.try_call("quick", {"x": 21}, idempotency_key=f"k{i}") for i in range(2)]
        answers = [[r.ok, r.value, r.ran, type(r.error).__name__] for r in results]
        return json.dumps([answers, runs, reg.stats()["timeout"]["threads"]]).encode()

    answers, child_runs, threads = json.loads(in_child(child, timeout=60))
    assert answers == [[True, 42, True, "NoneType"]] * 2
    assert child_runs == [1, 21, 21]
    assert threads == {"workers": 32, "busy": 0, "stuck": 0}


# --- 4. killed tools' children where the harness reaps orphans -------------------------------


def _appears(path: Path, process: subprocess.Popen[str], within: float = 30.0) -> None:
    """Wait for ``path`` (a step of ``process``), failing with its output if it ends first or the wait runs out."""
    deadline = time.monotonic() + within
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            out, err = process.communicate()
            pytest.fail(f"no {path.name}: {out} {err}")
        time.sleep(0.005)


@pytest.mark.parametrize("later", ["thread", "take", "shutdown"])
def test_a_subreaper_harness_reaps_what_a_killed_tool_left(tmp_path: Path, later: str) -> None:
    """The harness is a child subreaper; a process-mode tool starts three children, and its call is
    cancelled: its worker's session is killed and the children, reparented to the harness, reaped.
    This test traces one of them (ptrace), which holds it as a zombie the harness cannot reap at
    the kill, as when a child takes a while to end; once the tracer collects it, the harness reaps
    it later: its reaper thread (within 10 s here; in fact some 10 ms), or, once that thread gave
    up (its time cut to nothing here), the next take of a worker, or shutdown."""
    if not sys.platform.startswith("linux"):
        pytest.skip("child subreapers are Linux's")
    script = tmp_path / "subreaper.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, ctypes, json, os, time
            import tools_for_review3 as t3
            from harness_one import ToolRegistry, _runners

            STEPS, LATER = {str(tmp_path)!r}, {later!r}

            def zombies():
                found = []
                for name in os.listdir("/proc"):
                    if name.isdigit():
                        try:
                            with open(f"/proc/{{name}}/stat") as stat:
                                fields = stat.read().rsplit(")", 1)[1].split()
                        except OSError:
                            continue
                        if int(fields[1]) == os.getpid() and fields[0] == "Z":
                            found.append(int(name))
                return found

            async def step(name):
                deadline = time.monotonic() + 30
                while not os.path.exists(os.path.join(STEPS, name)) and time.monotonic() < deadline:
                    await asyncio.sleep(0.005)

            async def main():
                reg = ToolRegistry(autoload=False)
                reg.add(t3.spawn_and_hang, timeout=60, timeout_mode="process")
                reg.add(t3.pid, timeout=60, timeout_mode="process")
                if LATER != "thread":
                    _runners._Leftovers.FOLLOW = 0.0  # the reaper thread scans once, then leaves the rest
                task = asyncio.create_task(reg.acall("spawn_and_hang", {{"pidfile": os.path.join(STEPS, "pids")}}))
                await step("go")  # the children exist, one of them traced
                task.cancel()
                try:
                    await task
                    error = None
                except asyncio.CancelledError:
                    error = "CancelledError"
                runner = reg.plugins.get("timeout").processes
                held = int(open(os.path.join(STEPS, "pids")).read().split()[2])
                traced = open(os.path.join(STEPS, "go")).read() == "traced"
                deadline = time.monotonic() + 10
                while traced and held not in zombies() and time.monotonic() < deadline:
                    await asyncio.sleep(0.005)  # killed, it may take a moment to end
                at_kill = zombies()
                deadline = time.monotonic() + 10
                while LATER != "thread" and _runners._LEFTOVERS.thread is not None and time.monotonic() < deadline:
                    await asyncio.sleep(0.005)  # the reaper thread gave up: what is left is for the take or shutdown
                open(os.path.join(STEPS, "killed"), "w").close()
                await step("released")  # the tracer collected its tracee
                if LATER == "thread":
                    deadline = time.monotonic() + 10
                    while zombies() and time.monotonic() < deadline:
                        await asyncio.sleep(0.005)
                elif LATER == "take":
                    await reg.acall("pid")
                killed = runner.stats()["killed"]
                if LATER == "shutdown":
                    runner.shutdown()
                print(json.dumps([error, killed, at_kill, zombies()]))
                runner.shutdown()

            if __name__ == "__main__":
                assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
                asyncio.run(main())
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    harness = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    libc = ctypes.CDLL(None, use_errno=True)
    traced = False
    try:
        _appears(tmp_path / "pids", harness)
        pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
        held = pids[2]  # the one in a process group of its own
        traced = libc.ptrace(0x4206, held, None, None) == 0  # PTRACE_SEIZE: it runs on, traced by this process
        (tmp_path / "go.tmp").write_text("traced" if traced else "")
        (tmp_path / "go.tmp").replace(tmp_path / "go")
        _appears(tmp_path / "killed", harness)
        if traced:
            assert os.waitpid(held, 0x40000000) == (held, 9)  # __WALL: the tracer collects its killed tracee
        (tmp_path / "released").touch()
        out, err = harness.communicate(timeout=60)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.communicate()
    assert harness.returncode == 0, err
    error, killed, at_kill, after = json.loads(out)
    assert (error, killed) == ("CancelledError", 1)
    assert at_kill == ([held] if traced else [])  # traced: a zombie the harness cannot reap yet
    assert after == []
    for pid in pids:
        assert tfp.gone(pid)
    if not traced:
        pytest.skip("ptrace is not permitted here: a child reaped after the kill's own scan is not covered")


# --- 5. hostile exceptions and results ------------------------------------------------------


def test_what_raises_while_a_worker_answers_does_not_end_the_worker(reg: ToolRegistry) -> None:
    for fn in (t3.pid, t3.return_reduce_exit, t3.raise_bad_args, t3.raise_str_interrupts, t3.raise_undescribable):
        reg.add(fn, timeout=30, timeout_mode="process")
    worker = reg.call("pid")
    messages = {
        name: reg.try_call(name).error.message for name in ("return_reduce_exit", "raise_bad_args", "raise_str_interrupts")
    }
    assert messages == {
        "return_reduce_exit": "Tool 'return_reduce_exit' failed: TypeError: process mode: the tool's result cannot be pickled: SystemExit: 3",
        "raise_bad_args": "Tool 'raise_bad_args' failed: BadArgs: x",
        "raise_str_interrupts": "Tool 'raise_str_interrupts' failed: StrInterrupts",
    }
    last = reg.try_call("raise_undescribable").error
    assert isinstance(last, ToolExecutionError)
    assert last.message.startswith(
        "Tool 'raise_undescribable' failed: RuntimeError: process mode: the worker could not report the tool's outcome: "
    )
    processes = reg.stats()["timeout"]["processes"]
    assert (processes["died"], processes["killed"]) == (0, 0)
    assert reg.call("pid") == worker


@pytest.mark.parametrize("mode", ["thread", "none"])
def test_an_exception_whose_str_exits_is_the_tools_failure(mode: str) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(t3.raise_str_exits, timeout=30, timeout_mode=mode)
    reg.add(t3.raise_str_interrupts, timeout=30, timeout_mode=mode)
    assert reg.try_call("raise_str_exits").error.message == "Tool 'raise_str_exits' failed: StrExits"
    assert reg.try_call("raise_str_interrupts").error.message == "Tool 'raise_str_interrupts' failed: StrInterrupts"
    result = asyncio.run(reg.atry_call("raise_str_exits"))
    assert result.error.message == "Tool 'raise_str_exits' failed: StrExits"
    assert exception_text(t3.StrExits()) == "StrExits"


# --- 6. StopIteration under acall with a timeout -------------------------------------------


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_stop_iteration_under_acall_with_a_timeout(reg: ToolRegistry, mode: str) -> None:
    reg.add(t3.raise_stop_iteration, timeout=30, timeout_mode=mode)
    error = asyncio.run(reg.atry_call("raise_stop_iteration")).error
    assert isinstance(error, ToolExecutionError)
    assert error.message == (
        "Tool 'raise_stop_iteration' failed: RuntimeError: the tool raised StopIteration, which an awaited call cannot carry"
    )
    assert isinstance(error.cause, RuntimeError) and isinstance(error.cause.__cause__, StopIteration)
    assert reg.try_call("raise_stop_iteration").error.message == "Tool 'raise_stop_iteration' failed: StopIteration: done"


# --- 7. the retry plugin and an open circuit -----------------------------------------------


def _failing(clock: ManualClock, **options: Any) -> tuple[ToolRegistry, list[int]]:
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        raise RetryableError("backend down")

    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(0), **options)}, clock=clock, autoload=False)
    policy = {"attempts": 3, "total": 60}  # room for the circuit's 30 s
    reg.add(flaky, retry=policy, idempotent=True, circuit_breaker={"min_calls": 3, "failure_ratio": 0.5})
    first = reg.try_call("flaky")
    assert isinstance(first.error, RetryableError) and len(runs) == 3  # the circuit is open now
    return reg, runs


def test_an_open_circuit_fails_fast_under_retry(clock: ManualClock) -> None:
    reg, runs = _failing(clock)
    waited = list(clock.sleeps)
    result = reg.try_call("flaky")
    assert isinstance(result.error, CircuitOpen) and result.error.retry_after == pytest.approx(30)
    assert clock.sleeps == waited and len(runs) == 3  # no wait, no probe
    assert reg.stats()["retry"]["retries"] == 2


def test_wait_circuit_waits_out_an_open_circuit(clock: ManualClock) -> None:
    reg, runs = _failing(clock, wait_circuit=True)
    waited = len(clock.sleeps)
    result = reg.try_call("flaky")
    assert clock.sleeps[waited] == pytest.approx(30)  # waited out, then probed; then again, to the budget's end
    assert sum(clock.sleeps[waited:]) == pytest.approx(60)
    assert isinstance(result.error, RetryableError) and len(runs) == 5
    with pytest.raises(ValueError, match="retry wait_circuit must be true or false, not 'yes'"):
        RetryPlugin(wait_circuit="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("start", [1000.0, 1000.1, 12345.678])
def test_a_wait_as_long_as_the_retry_budget_is_within_it(start: float) -> None:
    """A circuit's 30 s at a 30 s budget came as 30.000000000000114 s (float rounding) and the call gave up at once."""
    clock = ManualClock(start=start)
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        raise RetryableError("backend down")

    reg = ToolRegistry(plugins={"retry": RetryPlugin(rng=random.Random(0), wait_circuit=True)}, clock=clock, autoload=False)
    reg.add(flaky, retry={"attempts": 3, "total": 30}, idempotent=True, circuit_breaker={"min_calls": 3, "failure_ratio": 0.5})
    reg.try_call("flaky")  # three failures: the circuit opens for its default 30 s
    waited = len(clock.sleeps)
    result = reg.try_call("flaky")
    assert clock.sleeps[waited:] == [pytest.approx(30)] and len(runs) == 4  # waited out, then probed
    assert isinstance(result.error, RetryableError)
