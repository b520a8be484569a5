"""Review 31: input edges of ``serve`` (stdio) and of ``run`` and ``call``, answered as every other entry point answers them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp_support import TOOLS, serving

from harness_one._cli import main

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
OPENING = [
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}).encode() + b"\n",
    b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
]
PING = b'{"jsonrpc": "2.0", "id": "ping", "method": "ping"}\n'


def _exchange(tmp_path: Path, lines: list[bytes], command: list[str] | None = None) -> dict[Any, dict[str, Any]]:
    """``harness-one serve`` on raw pipes: ``lines`` written after the handshake, each answered, by ``id``."""
    with serving(tmp_path, command) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join([*OPENING, *lines, PING]))
        proc.stdin.flush()
        read = [json.loads(proc.stdout.readline()) for _ in range(len(lines) + 2)]
        proc.stdin.close()
        assert proc.wait(20) == 0
    answers = {answer["id"]: answer for answer in read[1:]}
    assert answers.pop("ping")["result"] == {}
    return answers


def _add(rid: Any, arguments: str) -> bytes:
    head = {"jsonrpc": "2.0", "id": rid, "method": "tools/call"}
    return (json.dumps(head)[:-1] + ', "params": {"name": "add", "arguments": ' + arguments + "}}\n").encode()


def _problems(answer: dict[str, Any]) -> list[str]:
    """The ``isError`` result's problems, as ``path: message``."""
    result = answer["result"]
    assert result["isError"] is True, answer
    error = result["_meta"]["harness-one/error"]
    assert error["type"] == "ToolArgumentError" and error["tool"] == "add"
    assert result["content"][0]["text"].startswith("Invalid arguments for tool 'add'")
    return [f"{p['path']}: {p['message']}" for p in error["problems"]]


def test_serve_answers_arguments_too_deep_or_too_long_for_the_sdk_as_invalid_arguments(tmp_path: Path) -> None:
    """Arguments nested 199+ levels, or holding an integer of 4,301+ digits, were a -32600 "Invalid JSON: recursion
    limit exceeded" / "number out of range" naming no field, where 198 levels gave the isError ToolArgumentError."""
    nest = '{"a": 1, "b": 2, "x": %s}'
    lines = [
        _add(198, nest % ("[" * 198 + "]" * 198)),  # the SDK reads it: the registry refuses it
        _add(199, nest % ("[" * 199 + "]" * 199)),
        _add(600, nest % ("[" * 600 + "]" * 600)),
        _add(4301, '{"a": 1' + "0" * 4300 + ', "b": 2}'),
        _add(-5001, '{"a": 1, "b": -1' + "0" * 5000 + "}"),
        _add(100_000, nest % ("[" * 100_000 + "]" * 100_000)),  # too deep for Python's reader too
        # The id written last (as the TypeScript SDK writes it), too deep for Python's reader.
        b'{"method": "tools/call", "params": {"name": "add", "arguments": {"x": '
        + b"[" * 5000
        + b"]" * 5000
        + b'}}, "jsonrpc": "2.0", "id": "last"}\n',
    ]
    answers = _exchange(tmp_path, lines)
    deep = ["$: arguments are nested more than 64 levels deep"]
    assert _problems(answers[198]) == _problems(answers[199]) == _problems(answers[600]) == deep
    assert _problems(answers[4301]) == ["$.a: a number of 4301 digits is too long to read"]
    assert _problems(answers[-5001]) == ["$.b: a number of 5001 digits is too long to read"]
    assert _problems(answers[100_000]) == _problems(answers["last"]) == ["$: arguments are nested too deeply to read"]


def test_serve_keeps_a_protocol_error_for_other_lines_the_sdk_cannot_read(tmp_path: Path) -> None:
    """Not a tools/call, an id the client cannot know, a lone surrogate (which the SDK refuses wherever it stands):
    still -32600."""
    deep = "[" * 300 + "]" * 300
    lines = [
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": ' + deep.encode() + b"}}\n",
        _add(8, '{"a": 1, "b": 2, "x": ' + deep + ', "s": "\\ud800"}'),  # the SDK sees the depth first
        b'{"jsonrpc": "2.0", "id": 1' + b"0" * 5000 + b', "method": "tools/call", "params": {"name": "add"}}\n',
    ]
    answers = _exchange(tmp_path, lines)
    assert {rid: answer["error"]["code"] for rid, answer in answers.items()} == {7: -32600, 8: -32600, None: -32600}


def _run(runner: CliRunner, lines: list[str]) -> list[dict[str, Any]]:
    result = runner.invoke(main, ["--tools", TOOLS, "run"], input="".join(line + "\n" for line in lines))
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(autouse=True)
def _logging_reset() -> Any:
    import structlog

    yield
    structlog.reset_defaults()  # the CLI configures structlog; later tests expect a library default


def test_run_answers_a_line_over_the_length_limit_on_its_id_as_serve_does(runner: CliRunner) -> None:
    """``run`` answered a line over the limit with "id": null even when its id came first."""
    pad = "x" * 600_000
    lines = [
        json.dumps({"id": "first", "name": "add", "arguments": {"pad": pad}}),
        json.dumps({"name": "add", "arguments": {"pad": pad}, "id": 7}),  # the last member
        json.dumps({"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "add", "arguments": pad}),
        json.dumps({"name": "add", "arguments": {"pad": pad}}),  # no id anywhere
        json.dumps({"id": 5, "name": "add", "arguments": {"a": 1, "b": 2}}),
    ]
    answers = _run(runner, lines)
    assert [(a["id"], a["ok"]) for a in answers] == [("first", False), (7, False), ("call_9", False), (None, False), (5, True)]
    assert all("the line is longer than" in a["error"]["message"] for a in answers[:4])


@pytest.mark.parametrize("given", ["", "  \n\t"])
def test_call_takes_empty_args_as_the_registry_does(runner: CliRunner, given: str) -> None:
    """``call NAME --args ''`` was "not valid JSON" (exit 2), while registry.call("x", "") and a run line with
    "arguments": "" take it as {}."""
    missing = runner.invoke(main, ["--tools", TOOLS, "call", "add", "--args", given])
    assert missing.exit_code == 4, missing.stderr  # a call with {}: the tool's required arguments are missing
    assert json.loads(missing.stdout)["error"]["type"] == "ToolArgumentError" and "required" in missing.stderr
    done = runner.invoke(main, ["--tools", TOOLS, "call", "test_simple_text", "--args", given])
    assert done.exit_code == 0, done.stderr
    bad = runner.invoke(main, ["--tools", TOOLS, "call", "add", "--args", given + "{"])
    assert bad.exit_code == 2 and "not valid JSON" in bad.stderr


def test_no_tool_sees_an_integer_past_the_digit_limit_without_the_validation_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a stand-in of the integer's size reached the tool when no validation plugin refused it
    tools = tmp_path / "digits_tools.py"
    tools.write_text(
        "from typing import Any\nfrom harness_one import defineTool\n"
        "@defineTool(registry=None)\ndef digits(n: Any) -> str:\n    return f'ran with {n.bit_length()} bits'\n"
    )
    line = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "digits", "arguments": {"n": %s}}}'
    command = [sys.executable, "-m", "harness_one", "--tools", str(tools), "serve"]
    monkeypatch.setenv("HARNESS_ONE_BLOCK_PLUGINS", "validation")
    answers = _exchange(tmp_path, [(line % ("7" * 5000)).encode() + b"\n"], command)
    result = answers[7]["result"]
    assert result["isError"] is True and "ran with" not in result["content"][0]["text"], result
    assert [p["path"] + ": " + p["message"] for p in result["_meta"]["harness-one/error"]["problems"]] == [
        "$.n: a number of 5000 digits is too long to read"
    ]


def test_a_lone_surrogate_beside_a_long_integer_is_still_a_protocol_error(tmp_path: Path) -> None:
    # the long integer's refusal was answered first, the tool's name sent back with a U+FFFD in it
    line = (
        '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "add", "arguments": {"a": "\\ud800", "n": %s}}}'
    )
    answers = _exchange(tmp_path, [(line % ("7" * 5000)).encode() + b"\n"])
    assert answers[9]["error"]["code"] == -32600
