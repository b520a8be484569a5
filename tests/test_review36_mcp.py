"""Review 36 (MCP): remote tools whose schema harness-one refuses are logged and listed by ``doctor``; ``serve --path``
refuses what no URL path holds; a ``tools/call`` whose parameters the SDK refuses is answered naming the field."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from mcp_support import http_server, serve_command, serve_file, server_env
from test_mcp_client_review4 import SERVER, raw
from test_mcp_server_review import HELLO, answer, open_session

from harness_one import ToolRegistry
from harness_one._cli import EXIT_CODES
from harness_one.mcp import import_tools

SECRET = "hunter2-s3cret"
#: A listing of a tool the SDK refuses, two whose schemas harness-one refuses (one quoting a URL with a password), one
#: it imports.
TOOLS = [
    {"name": "str_schema", "inputSchema": {"type": "string"}},
    {"name": "nonsense", "inputSchema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}},
    {
        "name": "remote_ref",
        "inputSchema": {"type": "object", "properties": {"a": {"$ref": f"http://u:{SECRET}@127.0.0.1:9/schema.json"}}},
    },
    {"name": "echo", "inputSchema": {"type": "object"}},
]


# --------------------------------------------------------------------------- 1. schemas harness-one refuses


def test_a_tool_whose_schema_harness_one_refuses_is_logged_with_those_the_sdk_refuses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only the tools the SDK refused were logged: one whose schema harness-one refused went to ``failures`` silently
    (and quoted a remote ``$ref``'s password)."""
    caplog.set_level(logging.WARNING)
    remote = import_tools(ToolRegistry(autoload=False), raw(tools=TOOLS))
    try:
        assert remote.names == {"echo": "echo"}
        assert [line.split(":")[0] for line in remote.failures] == ["str_schema", "nonsense", "remote_ref"]
        assert '"type": "nonsense" is not a JSON Schema type' in remote.failures[1]
        assert "never fetched: http://[REDACTED]@127.0.0.1:9/schema.json" in remote.failures[2]
    finally:
        remote.close()
    refused = [r for r in caplog.records if r.getMessage().startswith("mcp tools refused")]
    assert len(refused) == 1, caplog.text
    fields = refused[0].harness_one  # type: ignore[attr-defined]
    assert fields["server"] == "raw" and fields["tools"] == 3 and fields["first"].startswith("str_schema: ")
    assert SECRET not in caplog.text


def test_doctor_lists_the_tools_an_mcp_server_left_out_and_exits_1(tmp_path: Path) -> None:
    """``doctor`` said ``Load failures: none`` and exited 0 though the server's refused tools were never imported."""
    config = tmp_path / "harness-one.toml"
    listing = json.dumps(json.dumps({"tools": TOOLS}))  # (a JSON string is a TOML basic string)
    config.write_text(f"[mcp.servers.f]\ncommand = {json.dumps([sys.executable, SERVER])}\nenv = {{ RAW_SERVER = {listing} }}\n")
    env = {**os.environ, "HARNESS_ONE_STATE": "memory:", "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "harness_one", "--config", str(config), "doctor"]
    text = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False)
    assert text.returncode == 1, text.stdout + text.stderr
    lines = text.stdout.splitlines()
    at = lines.index("Load failures: 3")
    assert [line.split(":")[:2] for line in lines[at + 1 : at + 4]] == [
        ["  mcp", "f"],
        ["  mcp", "f"],
        ["  mcp", "f"],
    ]
    assert lines[at + 1].startswith("  mcp:f: str_schema: not a valid MCP tool")
    assert lines[at + 2].startswith("  mcp:f: nonsense: ") and lines[at + 3].startswith("  mcp:f: remote_ref: ")
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["mcp_servers"] == {"f": ["echo"]}
    assert [line.split(": ")[:2] for line in report["failures"]] == [
        ["mcp:f", "str_schema"],
        ["mcp:f", "nonsense"],
        ["mcp:f", "remote_ref"],
    ]
    assert SECRET not in text.stdout + done.stdout + text.stderr + done.stderr


def test_doctor_without_mcp_servers_leaves_the_mcp_client_unimported(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from harness_one._cli import main\n"
        "try:\n"
        "    main(['doctor', '--json'], standalone_mode=False)\n"
        "finally:\n"
        "    print('CLIENT', 'harness_one.mcp._client' in sys.modules)\n"
    )
    env = {**os.environ, "HARNESS_ONE_STATE": "memory:", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False
    )
    assert done.stdout.splitlines()[-1] == "CLIENT False", done.stdout + done.stderr


# --------------------------------------------------------------------------- 2. serve --path


@pytest.mark.parametrize("path", ["/x?t=1", "/a b", "/a#b", "/a\tb", "/mcp\n", "/a%20b"])
def test_serve_refuses_a_path_no_url_path_holds(tmp_path: Path, path: str) -> None:
    """``--path '/x?t=1'`` was served and its URL printed, a URL that answered 404 to every request. (In a child
    process, bounded: one that serves fails the test at its timeout.)"""
    command = serve_command("--transport", "http", "--port", "0", "--path", path)
    env = {**os.environ, **server_env(tmp_path)}
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, env=env, check=False)
    assert done.returncode == EXIT_CODES["usage"], done.stderr
    assert f"Invalid value for --path: must be a path alone, without '?', '#', '%' or spaces, got {path!r}" in done.stderr
    assert "serving MCP on" not in done.stderr


# --------------------------------------------------------------------------- 3. tools/call parameters the SDK refuses

TOKEN = "params._meta.progressToken: Input should be a valid string; Input should be a valid integer"
#: Parameters the SDK refuses, and the field and problem the answer names (each member of a union: what it said).
CALLS = [
    ({"name": "add", "arguments": {"a": 1}, "_meta": {"progressToken": 1.5}}, f"{TOKEN}, got a number with a fractional part"),
    ({"name": "add", "arguments": {}, "_meta": {"progressToken": None}}, TOKEN),
    ({"name": "add", "arguments": {}, "_meta": {"progressToken": {"o": 1}}}, TOKEN),
    ({"name": 5, "arguments": {}}, "params.name: Input should be a valid string"),
    ({"arguments": {}}, "params.name: Field required"),
    ({"name": "add", "arguments": [1, 2]}, "params.arguments: Input should be a valid dictionary"),
]


#: The 2026-07-28 protocol's per-request ``_meta`` (a client's info under a key with dots in it).
META26 = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: Requests refused inside a union (the place of the union named, each member's words) or under a dotted key (quoted).
UNIONS = [
    (
        "tools/call",
        {"name": "add", "arguments": {}, "inputResponses": {"k": {"action": 5}}, "_meta": META26},
        "params.inputResponses.k: Field required; Input should be 'accept', 'cancel' or 'decline'",  # not ".k.CreateMessageResult"
    ),
    (
        "completion/complete",
        {"ref": {"type": "ref/resource"}, "argument": {"name": "a", "value": "b"}, "_meta": META26},
        "params.ref: Field required; Input should be 'ref/prompt'",  # not ".ref.PromptReference"
    ),
    (
        "tools/call",
        {"name": "add", "arguments": {}, "_meta": {**META26, "io.modelcontextprotocol/clientInfo": {"name": 5, "version": "0"}}},
        'params._meta["io.modelcontextprotocol/clientInfo"].name: Input should be a valid string',
    ),
]


def test_a_refusal_inside_a_union_names_its_place_and_a_dotted_key_is_quoted(tmp_path: Path) -> None:
    lines = [json.dumps({"jsonrpc": "2.0", "id": n, "method": m, "params": p}) for n, (m, p, _) in enumerate(UNIONS, 1)]
    done = serve_file(tmp_path, "\n".join([*lines, ""]).encode())
    replies = {reply["id"]: reply for reply in map(json.loads, done.stdout.decode().splitlines())}
    for n, (_, _, wanted) in enumerate(UNIONS, 1):
        _named(replies[n], wanted)


def _named(reply: dict[str, object], wanted: str) -> None:
    assert reply["error"] == {"code": -32602, "message": f"Invalid request parameters: {wanted}", "data": ""}, reply


def test_a_call_whose_parameters_the_sdk_refuses_names_the_field_over_stdio(tmp_path: Path) -> None:
    """The SDK's ``Invalid request parameters``, ``data`` empty, named no field."""
    lines = [json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO})]
    lines.append('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    lines += [json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": p}) for n, (p, _) in enumerate(CALLS, 1)]
    done = serve_file(tmp_path, "\n".join([*lines, ""]).encode())
    replies = {reply["id"]: reply for reply in map(json.loads, done.stdout.decode().splitlines())}
    for n, (_, wanted) in enumerate(CALLS, 1):
        _named(replies[n], wanted)


async def test_a_call_whose_parameters_the_sdk_refuses_names_the_field_over_http(tmp_path: Path) -> None:
    with http_server(tmp_path) as url:
        async with httpx2.AsyncClient(timeout=30) as client:
            headers = await open_session(client, url)
            for n, (params, wanted) in enumerate(CALLS, 1):
                body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
                _named(answer(await client.post(url, json=body, headers=headers)), wanted)
