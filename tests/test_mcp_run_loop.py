"""``harness-one --mcp NAME:PREFIX=... run``: the agent loop sees a remote MCP server's tools and calls them.

The remote is ``harness-one serve`` with ``tests/mcp_tools.py``, over streamable HTTP and as a
stdio command; the loop runs in its own process, four requests at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp_support import http_server, serve_command, server_env

REQUESTS = [
    {"id": 1, "name": "r_add", "arguments": {"a": 2, "b": 3}},
    {"type": "tool_use", "id": "t2", "name": "r_add", "input": {"a": "x", "b": 1}},  # an Anthropic tool_use block
    {"id": 3, "name": "r_limited", "arguments": {}},
    {"id": 4, "name": "r_limited", "arguments": {}},
    {"id": 5, "name": "r_whoami", "arguments": {}},
    {"id": 6, "name": "add", "arguments": {"a": 1, "b": 1}},
]


@contextmanager
def remote(transport: str, tmp: Path) -> Iterator[str]:
    """The ``--mcp`` target of a ``harness-one serve``: its URL, or the command that starts it."""
    if transport == "http":
        with http_server(tmp) as url:
            yield url
    else:
        yield " ".join(serve_command())


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_run_calls_remote_tools(transport: str, tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(r) + "\n" for r in REQUESTS))
    with remote(transport, tmp_path) as target:
        loop = ["run", "--concurrency", "4", "--input", str(requests)]
        done = subprocess.run(
            [sys.executable, "-m", "harness_one", "--mcp", f"up:r={target}", *loop],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **server_env(tmp_path)},
            check=False,
        )
    assert done.returncode == 0, done.stderr
    answers: dict[Any, dict[str, Any]] = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert set(answers) == {1, "t2", 3, 4, 5, 6}  # one answer per request
    assert answers[1] == {"id": 1, "ok": True, "result": 5}  # computed by the remote server
    bad = answers["t2"]["error"]  # checked locally against the remote inputSchema, never sent
    assert bad["type"] == "ToolArgumentError" and bad["problems"][0]["path"] == "$.a"
    limited = sorted((answers[3], answers[4]), key=lambda a: a["ok"])  # the remote allows one call per client
    assert limited[1]["result"] == "ok"
    refused = limited[0]["error"]
    assert refused["type"] == "ToolExecutionError" and refused["cause"] == "harness_one.mcp.RemoteToolError"
    assert "on MCP server 'up'" in refused["message"] and "rate limited" in refused["message"]
    assert 900 < refused["retry_after"] <= 1000  # the remote's retry time (rate 0.001/s), carried through
    identity = answers[5]["result"]
    assert identity["mcp_transport"] == transport and identity["mcp_client_name"] == "harness-one"
    unknown = answers[6]["error"]  # the remote tools go by their prefixed names only
    assert unknown["type"] == "ToolNotFound" and unknown["suggestions"] == ["r_add"]
    assert "6 requests, 3 ok, 3 errors" in done.stderr
