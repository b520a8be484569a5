"""Review 30 (CLI): SIGTERM ends ``call`` and ``run`` as Ctrl-C does (the call cancelled, its idempotency key
released; exit 143); a ``run`` id that is not a finite number is refused; ``doctor`` names each plugin once per hook."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness_one import ToolRegistry
from harness_one._requests import BadRequest, parse_line

WAITING_TOOL = """
import asyncio, sys, time
from harness_one import define_tool

@define_tool
def wait(seconds: float) -> str:
    '''Wait.'''
    if seconds:
        print("ready", file=sys.stderr, flush=True)
    time.sleep(seconds)
    return "done"

@define_tool
async def await_(seconds: float) -> str:
    '''Wait, async.'''
    if seconds:
        print("ready", file=sys.stderr, flush=True)
    await asyncio.sleep(seconds)
    return "done"
"""


def _cli(tmp_path: Path, *args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen[str]:
    """``harness-one --state (a file of tmp_path) --tools waiting.py ARGS``: its state outlives the process."""
    (tmp_path / "waiting.py").write_text(WAITING_TOOL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_ONE_")}
    env.update(HARNESS_ONE_CACHE_DIR="", PYTHONDONTWRITEBYTECODE="1")
    state = str(tmp_path / "state.sqlite3")
    return subprocess.Popen(
        [sys.executable, "-m", "harness_one", "--state", state, "--tools", "waiting.py", *args],
        cwd=tmp_path,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _terminated_when_ready(process: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGTERM once the tool said ``ready`` on stderr; the process's stdout and stderr."""
    assert process.stderr is not None
    seen = []
    try:
        for line in process.stderr:  # up to the marker: the tool is then running
            seen.append(line)
            if line.strip() == "ready":
                break
        else:
            raise AssertionError(f"never ready: {''.join(seen)}")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)  # the tool waits 120 s: only the signal ends it sooner
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return out, "".join(seen) + err


@pytest.mark.parametrize("tool", ["wait", "await_"])
def test_sigterm_ends_call_as_ctrl_c_does_and_releases_its_key(tmp_path: Path, tool: str) -> None:
    process = _cli(tmp_path, "call", tool, "--args", '{"seconds": 120}', "--idempotency-key", "k1")
    out, err = _terminated_when_ready(process)
    assert process.returncode == 143, err
    assert out == ""
    assert err.splitlines()[-1] == "harness-one call: terminated"
    assert "Traceback" not in err
    again = _cli(tmp_path, "call", tool, "--args", '{"seconds": 0}', "--idempotency-key", "k1")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err  # the key was released: not IdempotencyConflict (8)
    assert json.loads(out)["result"] == "done"


def _run_lines(*requests: dict[str, object]) -> str:
    return "".join(json.dumps(request) + "\n" for request in requests)


def test_sigterm_ends_run_with_its_summary_and_releases_an_async_calls_key(tmp_path: Path) -> None:
    process = _cli(tmp_path, "run", stdin=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(_run_lines({"id": 1, "name": "await_", "arguments": {"seconds": 120}, "idempotency_key": "r1"}))
    process.stdin.flush()  # stdin stays open: only a signal ends the loop
    out, err = _terminated_when_ready(process)
    assert process.returncode == 143, err
    assert out == ""
    assert "harness-one run: 1 request, 0 ok, 0 errors; 1 NOT ANSWERED (terminated)" in err
    again = _cli(tmp_path, "run", stdin=subprocess.PIPE)
    out, err = again.communicate(
        _run_lines({"id": 2, "name": "await_", "arguments": {"seconds": 0}, "idempotency_key": "r1"}), 60
    )
    assert again.returncode == 0, err
    assert json.loads(out) == {"id": 2, "ok": True, "result": "done"}  # not IdempotencyConflict: released


def test_sigterm_ends_run_of_a_sync_tool_at_once_with_its_summary(tmp_path: Path) -> None:
    process = _cli(tmp_path, "run", stdin=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(_run_lines({"id": 1, "name": "wait", "arguments": {"seconds": 120}}))
    process.stdin.flush()
    out, err = _terminated_when_ready(process)
    assert process.returncode == 143, err
    assert out == ""
    assert "harness-one run: 1 request, 0 ok, 0 errors; 1 NOT ANSWERED (terminated)" in err


@pytest.mark.parametrize(
    ("text", "shown"), [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e400", "Infinity")]
)
def test_a_run_id_that_is_no_finite_number_is_refused(text: str, shown: str) -> None:
    line = '{"id": ' + text + ', "name": "transfer", "arguments": {"to": "bo", "amount": 5}}'
    with pytest.raises(BadRequest, match=f"the request's id must be a string or a finite number, not {shown}$") as caught:
        parse_line(line.encode())
    assert caught.value.request_id is None  # answered with a null id, as an array or a boolean id is
    assert parse_line(line.replace(text, "1.5")).id == 1.5  # a finite float is an id


def test_doctor_names_each_plugin_once_per_hook_where_it_first_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_ONE_")}
    env.update(HARNESS_ONE_STATE="memory:", HARNESS_ONE_CACHE_DIR="", PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [sys.executable, "-m", "harness_one", "doctor", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        check=False,  # (exit 1 when this installation has a load failure: the report is what is checked)
        text=True,
        timeout=120,
    )
    shown = json.loads(done.stdout)["hook_order"]
    order = ToolRegistry(discover=True, state="memory:").plugins.plan.order
    assert shown == {hook: list(dict.fromkeys(names)) for hook, names in order.items()}
    assert all(len(names) == len(set(names)) for names in shown.values()), shown


def test_a_module_beside_a_tools_file_that_an_earlier_file_took_from_elsewhere_is_warned_of(tmp_path: Path) -> None:
    """One ``sys.modules`` serves every --tools entry: b/main_b.py's ``import helper`` got a/helper.py, unsaid."""
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "helper.py").write_text(f"X = 'from {side}'\n")
        tool = f"import helper\nfrom harness_one import define_tool\n\n@define_tool\ndef h{side}() -> str:\n    '''H.'''\n    return helper.X\n"
        (tmp_path / side / f"main_{side}.py").write_text(tool)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_ONE_")}
    env.update(HARNESS_ONE_CACHE_DIR="", HARNESS_ONE_STATE="memory:", PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "harness_one", "--tools", "a/main_a.py", "--tools", "b/main_b.py", "call", "hb"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and json.loads(done.stdout)["result"] == "from a"  # (the process has one helper)
    [warning] = [json.loads(line) for line in done.stderr.splitlines() if "tools module shadowed" in line]
    assert warning["tools"] == "b/main_b.py" and warning["module"] == "helper"
    assert warning["beside"] == str(tmp_path / "b" / "helper.py") and warning["used"] == str(tmp_path / "a" / "helper.py")
    alone = subprocess.run(
        [*command[:3], "--tools", "b/main_b.py", "call", "hb"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert json.loads(alone.stdout)["result"] == "from b" and "shadowed" not in alone.stderr


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_decision_on_an_id_that_is_no_finite_number_is_refused(text: str) -> None:
    for verb in ("approve", "deny"):
        with pytest.raises(
            BadRequest, match=rf"^'{verb}' must be the call id of a held call \(a string or a finite number\), not "
        ):
            parse_line(f'{{"{verb}": {text}}}')
        error = None
        try:
            parse_line(f'{{"{verb}": {text}}}')
        except BadRequest as exc:
            error = exc
        assert error is not None and error.request_id is None  # answered under no id (the text was never sent)
