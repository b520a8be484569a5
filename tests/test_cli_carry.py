"""``harness-one serve`` over stdio keeps stdin for the requests: a tool that reads stdin reads nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from mcp_support import server_env
from test_cli_answers import NOSY_TOOLS

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
WAYS = ["input", "read", "fd", "child"]


def _requests() -> bytes:
    """The handshake, a call of ``nosy`` each way it reads stdin (4 KiB each: more than one read of
    a stdin buffer), then a ping."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {
                "jsonrpc": "2.0",
                "id": 10 + n,
                "method": "tools/call",
                "params": {"name": "nosy", "arguments": {"how": how, "pad": "p" * 4096}},
            }
            for n, how in enumerate(WAYS)
        ),
        {"jsonrpc": "2.0", "id": 99, "method": "ping"},
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_a_tool_that_reads_stdin_under_serve_on_a_pipe_reads_nothing(tmp_path: Path) -> None:
    tools = tmp_path / "nosy_tools.py"
    tools.write_text(NOSY_TOOLS)
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness_one", "--tools", str(tools), "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **server_env(tmp_path)},
    )
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(_requests())
        proc.stdin.flush()
        answers = {answer["id"]: answer for answer in (json.loads(proc.stdout.readline()) for _ in range(len(WAYS) + 2))}
        proc.stdin.close()
        assert proc.wait(10) == 0
    finally:
        watchdog.cancel()
        proc.kill()
    assert sorted(answers) == [1, 10, 11, 12, 13, 99], proc.stderr.read()
    assert [answers[10 + n]["result"]["content"][0]["text"] for n in range(len(WAYS))] == ["EOF"] * len(WAYS)
