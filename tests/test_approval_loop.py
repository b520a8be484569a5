"""Approval in the agent loop (`harness-one run`): an `approval_required` answer, then a decision line answered on the call's id."""

from __future__ import annotations

import asyncio
import io
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from approval_tools import transfer

from harness_one import Await, Call, ToolRegistry, hookimpl
from harness_one._cli.loop import Loop, serve_lines

ROOT = Path(__file__).resolve().parents[1]
TOOLS = str(ROOT / "tests" / "approval_tools.py")
BIN = Path(sys.executable).parent
ENV = {"PATH": f"{BIN}:/usr/bin:/bin", "HARNESS_ONE_STATE": "memory:", "HARNESS_ONE_LOG_LEVEL": "error"}


def request(rid: Any, to: str, amount: float) -> dict[str, Any]:
    return {"id": rid, "name": "transfer", "arguments": {"to": to, "amount": amount}}


def run_loop(lines: list[Any], *args: str) -> subprocess.CompletedProcess[bytes]:
    payload = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    return subprocess.run(
        [str(BIN / "harness-one"), "--tools", TOOLS, "run", *args],
        check=False,
        input=payload.encode(),
        capture_output=True,
        timeout=120,
        env=ENV,
    )


class Session:
    """A running `harness-one run`, spoken to one line at a time, as an application does."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(BIN / "harness-one"), "--tools", TOOLS, "run", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.buffer = b""

    def send(self, line: dict[str, Any]) -> dict[str, Any]:
        """Write one line and read its answer (a 60 s deadline, so a lost answer fails instead of hanging)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(line).encode() + b"\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + 60
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0 and self.selector.select(left), f"no answer to {line}"
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            assert chunk, (
                f"the loop ended without answering {line}: {self.proc.stderr.read().decode() if self.proc.stderr else ''}"
            )
            self.buffer += chunk
        answer, self.buffer = self.buffer.split(b"\n", 1)
        parsed: dict[str, Any] = json.loads(answer)
        return parsed

    def close(self) -> tuple[int, str]:
        _, err = self.proc.communicate(timeout=60)
        assert self.buffer == b""  # no answer beyond those read
        return self.proc.returncode, err.decode()


@pytest.mark.parametrize("concurrency", ["1", "8"])
def test_an_application_decides_after_reading_the_approval_required_answer(concurrency: str) -> None:
    session = Session("--concurrency", concurrency)
    try:
        assert session.send(request(1, "ann", 5)) == {"id": 1, "ok": True, "result": "sent 5 to ann"}
        held = session.send(request(2, "bo", 500))
        assert held["id"] == 2 and held["ok"] is False
        assert {k: held["error"][k] for k in ("type", "kind", "tool", "call_id", "arguments")} == {
            "type": "ApprovalRequired",
            "kind": "approval_required",
            "tool": "transfer",
            "call_id": "2",
            "arguments": {"to": "bo", "amount": 500},
        }
        assert "needs a person's approval" in held["error"]["message"]
        assert session.send({"approve": 2}) == {"id": 2, "ok": True, "result": "sent 500 to bo"}
        assert session.send(request("t3", "cy", 900))["error"]["kind"] == "approval_required"
        denied = session.send({"deny": "t3", "reason": "not this week"})
        assert denied["id"] == "t3" and denied["error"]["type"] == "ApprovalDenied"
        assert denied["error"]["message"].startswith("The call of 'transfer' was denied: not this week.")
        again = session.send({"approve": 2})  # a decision is used once: nothing waits under that id any more
        assert again["id"] == 2 and again["error"]["kind"] == "approval_not_found"
    finally:
        code, err = session.close()
    assert code == 0, err
    assert "6 requests, 2 ok, 2 errors (ApprovalDenied: 1, ApprovalNotFound: 1), 2 held for approval" in err


@pytest.mark.parametrize("concurrency", ["1", "8"])
def test_a_scripted_session_answers_every_line_once_and_decides_the_same_calls(concurrency: str) -> None:
    lines: list[Any] = [
        request(1, "ann", 5),
        request(2, "bo", 500),
        {"approve": 2},
        request("c3", "cy", 900),
        {"deny": "c3", "reason": "not this week"},
        {"approve": "nope"},
        {"deny": 7, "reason": "unknown"},
        {"approve": [1]},
        {"approve": "x", "deny": "y"},
        {"approve": "z", "name": "transfer"},
        {"deny": "z", "reason": 5},
        *[request(f"p{i}", f"p{i}", 100 + i) for i in range(1, 11)],
        *[{"approve": f"p{i}"} for i in range(1, 11)],
    ]
    proc = run_loop(lines, "--concurrency", concurrency)
    assert proc.returncode == 0, proc.stderr.decode()
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(answers) == len(lines)  # every line answered, exactly once
    final = {a["id"]: a for a in answers if a.get("error", {}).get("kind") != "approval_required"}
    assert final[1]["result"] == "sent 5 to ann" and final[2]["result"] == "sent 500 to bo"
    assert final["c3"]["error"]["type"] == "ApprovalDenied" and final["c3"]["error"]["reason"] == "not this week"
    assert final["nope"]["error"] == {
        "type": "ApprovalNotFound",
        "kind": "approval_not_found",
        "message": "No call waits for approval under call id 'nope'. It was decided already, withdrawn, or held "
        "longer than the approval ttl, or the id is wrong: check the id, or make the call again to hold it for a new "
        "decision.",
        "call_id": "nope",
    }
    assert final[7]["error"]["kind"] == "approval_not_found"
    assert all(final[f"p{i}"]["result"] == f"sent {100 + i} to p{i}" for i in range(1, 11))
    invalid = [a["error"]["message"] for a in answers if a.get("error", {}).get("type") == "InvalidRequest"]
    assert invalid == [
        "line 8: 'approve' must be the call id of a held call (a string or a number), not an array",
        "line 9: a decision line has either 'approve' or 'deny' (a call id), and no tool 'name'",
        "line 10: a decision line has either 'approve' or 'deny' (a call id), and no tool 'name'",
        "line 11: 'reason' must be a string, not a number",
    ]
    held = [a["id"] for a in answers if a.get("error", {}).get("kind") == "approval_required"]
    assert sorted(map(str, held)) == sorted(["2", "c3", *[f"p{i}" for i in range(1, 11)]])
    assert b"12 held for approval" in proc.stderr and b"NOT ANSWERED" not in proc.stderr


def test_a_call_held_and_approved_is_not_an_error_for_fail_on_error() -> None:
    approved = run_loop([request(1, "ann", 500), {"approve": 1}], "--fail-on-error")
    assert approved.returncode == 0, approved.stderr.decode()
    undecided = run_loop([request(1, "ann", 500)], "--fail-on-error")
    assert undecided.returncode == 0 and b"1 held for approval" in undecided.stderr
    denied = run_loop([request(1, "ann", 500), {"deny": 1}], "--fail-on-error")
    assert denied.returncode == 1 and json.loads(denied.stdout.splitlines()[1])["error"]["kind"] == "approval_denied"


def test_text_output_shows_the_held_arguments() -> None:
    proc = run_loop([request(5, "bo", 500), {"approve": 5}], "--output", "text")
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert "[5] transfer -> ApprovalRequired:" in out and 'arguments: {"to": "bo", "amount": 500}' in out
    assert '[5] transfer -> ok: "sent 500 to bo"' in out


class Gate:
    """Holds calls (every one, or those ``only`` picks) before the approval plugin sees them, until the event is set."""

    name = "gate"
    order = 10

    def __init__(self, event: asyncio.Event, only: Callable[[Call], bool] | None = None) -> None:
        self.event = event
        self.only = only

    @hookimpl(tryfirst=True)
    def harness_pre_call(self, call: Call) -> Await | None:
        async def aio() -> None:
            await self.event.wait()

        return Await(lambda: None, aio) if self.only is None or self.only(call) else None


class Script:
    """Input lines; reading past the last one opens the gate (from the reader's thread, as the loop reads)."""

    def __init__(self, lines: list[bytes], loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        self.lines, self.loop, self.event = list(lines), loop, event

    def readline(self, limit: int = -1) -> bytes:
        if self.lines:
            return self.lines.pop(0)
        self.loop.call_soon_threadsafe(self.event.set)
        return b""


@pytest.mark.parametrize("concurrency", [2, 8])
def test_a_decision_waits_for_the_line_that_made_its_call(concurrency: int) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "done", name="launch", options={"requires_approval": True})
    out = io.BytesIO()

    async def main() -> None:
        event = asyncio.Event()
        reg.plugins.register(Gate(event), name="gate")
        lines = [b'{"id": "L1", "name": "launch", "arguments": {}}\n', b'{"approve": "L1"}\n']
        await serve_lines(Loop(reg, out), Script(lines, asyncio.get_running_loop(), event), concurrency, 1 << 16)  # type: ignore[arg-type]

    asyncio.run(main())
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["id"] == "L1" and first["error"]["kind"] == "approval_required"
    assert second == {"id": "L1", "ok": True, "result": "done"}


def test_a_decision_without_the_approval_plugin_is_a_readable_invalid_request() -> None:
    reg = ToolRegistry(autoload=False, standard_plugins=False)
    out = io.BytesIO()
    asyncio.run(serve_lines(Loop(reg, out), io.BytesIO(b'{"deny": "c1"}\n'), 1, 1 << 16))
    [answer] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answer["id"] == "c1" and answer["error"]["type"] == "InvalidRequest"
    assert answer["error"]["message"] == "line 1: no call waits for a decision: the approval plugin is not loaded"


def test_the_loop_remembers_at_most_as_many_held_calls_as_the_plugin_keeps() -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"approval": {"max_pending": 3}})
    reg.add(lambda: "done", name="launch", options={"requires_approval": True})
    lines = (
        b"".join(b'{"id": %d, "name": "launch", "arguments": {}}\n' % i for i in range(6)) + b'{"approve": 5}\n{"approve": 0}\n'
    )
    out = io.BytesIO()
    loop = Loop(reg, out)
    asyncio.run(serve_lines(loop, io.BytesIO(lines), 1, 1 << 16))
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answers[6] == {"id": 5, "ok": True, "result": "done"}
    assert answers[7]["id"] == 0 and answers[7]["error"]["kind"] == "approval_not_found"  # dropped, as the plugin dropped it
    assert list(loop.held) == ["3", "4"]


def test_a_decision_never_decides_a_call_made_after_it() -> None:
    """Found by fuzzing (tests/test_fuzz.py): lines of one call id are answered in their order, so a decision
    decides the call of the line before it and never the one after it."""
    reg = ToolRegistry(autoload=False, state="memory:")
    reg.add(transfer)
    lines = [
        b'{"id": "a", "name": "transfer", "arguments": {"to": "x", "amount": 5}}\n',  # not held (gated until the end)
        b'{"approve": "a"}\n',  # nothing waits under "a" when this line is read
        b'{"id": "a", "name": "transfer", "arguments": {"to": "y", "amount": 500}}\n',  # held, after the decision
    ]
    out = io.BytesIO()

    async def main() -> None:
        event = asyncio.Event()
        reg.plugins.register(Gate(event, only=lambda call: call.arguments.get("amount") == 5), name="gate")
        await serve_lines(Loop(reg, out), Script(lines, asyncio.get_running_loop(), event), 8, 1 << 16)  # type: ignore[arg-type]

    asyncio.run(main())
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    kinds = sorted(a.get("result") or a["error"]["kind"] for a in answers)
    assert kinds == ["approval_not_found", "approval_required", "sent 5 to x"]  # as with --concurrency 1
