"""Approval-required tools reached where no one can approve: ``harness-one call`` and the MCP server.

Neither can take a decision nor bring a later result back, so a call the harness holds is
refused as not run (``not_asked``), withdrawn from the approval queue, and the reader is told
so truly; ``call`` also tells the person at the shell how to approve it with ``run``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner
from mcp import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_support import Session

from harness_one import ToolRegistry
from harness_one._cli import main
from harness_one.mcp import ERROR_META_KEY, create_server, http_app
from harness_one_plugins.approval import ApprovalNotFound, ApprovalPlugin

ROOT = Path(__file__).resolve().parents[1]
TOOLS = str(ROOT / "tests" / "approval_tools.py")  # transfer: more than 100 needs approval
BIG = {"to": "bo", "amount": 500}
ASK_AGAIN = "Do not call it again; continue without it, or tell the user it needs their approval."
#: A tools file whose ``wire`` always needs approval.
WIRE = """
from harness_one import defineTool


@defineTool(registry=None, options={"requires_approval": True})
def wire(to: str, amount: float) -> str:
    \"\"\"Wire money.\"\"\"
    return f"wired {amount:g} to {to}"
"""
#: A tools file whose ``login`` always needs approval, and takes a password.
LOGIN = """
from harness_one import defineTool


@defineTool(registry=None, options={"requires_approval": True})
def login(user: str, password: str) -> str:
    \"\"\"Log in.\"\"\"
    return f"{user} logged in"
"""
ONE_SHOT = (
    "The call of 'transfer' was not run: it needs a person's approval, and no one was asked "
    f"(this command makes one call and ends: it has no approval step). {ASK_AGAIN}"
)
MCP_SERVER = (
    "The call of 'transfer' was not run: it needs a person's approval, and no one was asked "
    f"(this MCP server has no approval step). {ASK_AGAIN}"
)


@pytest.fixture
def withdrawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What ``ApprovalPlugin.withdraw`` returned, call by call (the pending call, or None)."""
    seen: list[Any] = []
    original = ApprovalPlugin.withdraw

    def spy(self: ApprovalPlugin, call_id: str) -> Any:
        seen.append(original(self, call_id))
        return seen[-1]

    monkeypatch.setattr(ApprovalPlugin, "withdraw", spy)
    return seen


# --------------------------------------------------------------------------- harness-one call


def test_call_refuses_a_held_call_withdraws_it_and_says_how_to_approve(runner: CliRunner, withdrawn: list[Any]) -> None:
    done = runner.invoke(main, ["--tools", TOOLS, "call", "transfer", "--args", json.dumps(BIG), "--context", '{"user": "ann"}'])
    assert done.exit_code == 8, done.output
    answer = json.loads(done.stdout)
    assert answer["ok"] is False and answer["error"]["message"] == ONE_SHOT
    assert answer["error"]["kind"] == "approval_unavailable" and answer["error"]["type"] == "ApprovalUnavailable"
    assert "arguments" not in answer["error"]
    assert [p.tool for p in withdrawn] == ["transfer"]  # nothing left waiting for a decision that cannot come
    lines = done.stderr.splitlines()
    assert lines[0] == f"Error: {ONE_SHOT}"
    assert "cannot be approved here" in lines[1] and f"`harness-one --tools {TOOLS} run`" in lines[1]
    request, decision = json.loads(lines[2]), json.loads(lines[3])
    assert request == {"id": 1, "name": "transfer", "arguments": BIG, "context": {"user": "ann"}}
    assert decision == {"approve": 1}
    assert "approve(call_id)" in lines[4] and "resume(call_id)" in lines[4]


def test_the_lines_call_prints_approve_the_call_in_run(runner: CliRunner, tmp_path: Path) -> None:
    """The hint is true: the command it names, given the two lines, holds the call and then runs it approved.

    The command repeats the global options that choose the tools, plugins, configuration and
    state (it said ``harness-one run``: copied, it ran another catalogue, without the tools).
    """
    (tmp_path / "wire.py").write_text(WIRE)
    config = tmp_path / "my config.toml"  # a space: the command quotes it
    config.write_text('tools = ["wire.py"]\n')  # ``wire`` is in the configuration's tools only
    state = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    options = ["--config", str(config), "--tools", TOOLS, "-O", "logging.log_arguments=false", "--state", state]
    args = [*options, "--log-level", "error", "call", "wire", "--args", json.dumps(BIG), "--idempotency-key", "k1"]
    said = runner.invoke(main, args).stderr.splitlines()
    command = shlex.split(said[1].split("`")[1])
    assert command == ["harness-one", *options, "run"]  # the options as given, but for the log level
    hint = said[2:4]
    assert json.loads(hint[0])["idempotency_key"] == "k1"
    env = {**os.environ, "HARNESS_ONE_LOG_LEVEL": "error"}
    done = subprocess.run(
        [sys.executable, "-m", "harness_one", *command[1:]],
        input="\n".join(line.strip() for line in hint).encode() + b"\n",
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["ok"] for a in answers] == [False, True], done.stderr
    assert answers[0]["error"]["kind"] == "approval_required" and answers[1]["result"] == "wired 500 to bo"


def test_the_run_command_call_prints_masks_secrets_in_the_options(runner: CliRunner) -> None:
    """Stderr may be kept (CI logs): a secret in an option is masked, and the reader told to put it back."""
    args = ["-O", "budget.key=api_key=sk-live-123", "--tools", TOOLS, "call", "transfer", "--args", json.dumps(BIG)]
    said = runner.invoke(main, args).stderr.splitlines()[1]
    assert "sk-live-123" not in said and "(put back the secrets masked in its options)" in said
    command = ["harness-one", "--tools", TOOLS, "-O", "budget.key=api_key=[REDACTED]", "run"]
    assert shlex.split(said.split("`")[1]) == command


def test_the_call_line_call_prints_masks_secrets_in_the_arguments_and_context(runner: CliRunner, tmp_path: Path) -> None:
    """The request line is masked as the errors the model reads are (``mask_secrets``), and the reader told to put it back."""
    (tmp_path / "login.py").write_text(LOGIN)
    arguments = {"user": "ann", "password": "hunter2-pw"}
    context = {"tenant": "acme", "api_token": "tok-live-9"}
    options = ["-O", "budget.key=api_key=sk-live-123", "--tools", "login.py"]
    args = [*options, "call", "login", "--args", json.dumps(arguments), "--context", json.dumps(context)]
    done = runner.invoke(main, args)
    assert done.exit_code == 8, done.output
    said = done.stderr.splitlines()
    assert not any(secret in done.stderr for secret in ("hunter2-pw", "tok-live-9", "sk-live-123"))
    assert "(put back the secrets masked in its options and in the call)" in said[1]
    request = json.loads(said[2])
    assert request["arguments"] == {"user": "ann", "password": "[REDACTED]"}
    assert request["context"] == {"tenant": "acme", "api_token": "[REDACTED]"}
    said = runner.invoke(main, args[2:]).stderr.splitlines()  # a secret in the call only
    assert "(put back the secrets masked in the call)" in said[1] and "hunter2-pw" not in said[2]


def test_call_of_a_call_needing_no_approval_is_as_before(runner: CliRunner, withdrawn: list[Any]) -> None:
    done = runner.invoke(main, ["--tools", TOOLS, "call", "transfer", "--args", '{"to": "bo", "amount": 20}'])
    assert done.exit_code == 0 and json.loads(done.stdout)["result"] == "sent 20 to bo"
    assert done.stderr == "" and withdrawn == []


# --------------------------------------------------------------------------- the MCP server


async def test_serve_over_stdio_refuses_a_held_call_as_not_run(tmp_path: Path) -> None:
    """``harness-one serve`` itself, with the SDK client: the model reads a refusal it can act on."""
    command = [sys.executable, "-m", "harness_one", "--tools", TOOLS, "serve"]
    env = {"HARNESS_ONE_STATE": f"sqlite:///{tmp_path / 'state.sqlite3'}", "PYTHONUNBUFFERED": "1"}
    async with Session(StdioServerParameters(command=command[0], args=command[1:], env=env)) as session:
        answer = await session.call_tool("transfer", BIG)
        small = await session.call_tool("transfer", {"to": "bo", "amount": 20})
    assert answer.is_error and answer.content[0].text == MCP_SERVER
    error = (answer.meta or {})[ERROR_META_KEY]
    assert error["kind"] == "approval_unavailable" and error["type"] == "ApprovalUnavailable"
    assert error["message"] == MCP_SERVER and "arguments" not in error
    assert not small.is_error and small.content[0].text == "sent 20 to bo"


def bank() -> tuple[ToolRegistry, list[str]]:
    """A registry whose ``transfer`` always needs approval, and the list of transfers that ran."""
    registry = ToolRegistry(autoload=False)
    sent: list[str] = []

    def transfer(to: str, amount: int) -> str:
        """Send money."""
        sent.append(to)
        return f"sent {amount} to {to}"

    registry.add(transfer, options={"requires_approval": True})
    return registry, sent


@asynccontextmanager
async def connected(registry: ToolRegistry, transport: str) -> AsyncIterator[Any]:
    if transport == "memory":
        async with Session(create_server(registry)) as session:
            yield session
        return
    app = http_app(registry)
    async with app.router.lifespan_context(app):
        asgi = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=asgi, base_url="http://127.0.0.1:9") as http:
            async with Session(streamable_http_client("http://127.0.0.1:9/mcp", http_client=http)) as session:
                yield session


@pytest.mark.parametrize("transport", ["memory", "http"])
async def test_the_server_withdraws_a_held_call_so_nobody_runs_it_later(transport: str) -> None:
    registry, sent = bank()
    approval = registry.plugins.get("approval")
    assert isinstance(approval, ApprovalPlugin)
    async with connected(registry, transport) as session:
        answer = await session.call_tool("transfer", BIG)
    assert answer.is_error and answer.content[0].text == MCP_SERVER
    call_id = (answer.meta or {})[ERROR_META_KEY]["call_id"]
    assert approval.pending() == []
    with pytest.raises(ApprovalNotFound):
        approval.approve(call_id)
    assert sent == []
