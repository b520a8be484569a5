"""Session 35, dispatch and ``harness-one run``: another provider's calls given as a list, a call without its arguments
field, and the id an oversized or cut-short ``run`` line is answered on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import ToolUseBlock
from click.testing import CliRunner
from google.genai import types as gt
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import ResponseFunctionToolCall

from harness_one import ToolRegistry
from harness_one._cli import main
from harness_one.dispatch import adispatch, dispatch

PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini")


def _registry() -> tuple[ToolRegistry, list[str]]:
    """A ``delete_files`` tool whose default pattern is ``*``: run with its arguments dropped, it deletes everything."""
    registry, ran = ToolRegistry(autoload=False), []

    def delete_files(pattern: str = "*") -> str:
        ran.append(pattern)
        return f"DELETED {pattern}"

    registry.add(delete_files, name="delete_files")
    return registry, ran


_ARGS: dict[str, object] = {"pattern": "*.tmp"}
#: Each provider's call of ``delete_files("*.tmp")``, as its SDK returns it.
CALLS: dict[str, Any] = {
    "openai": ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "delete_files", "arguments": json.dumps(_ARGS)}}
            ],
        }
    ).tool_calls[0],  # type: ignore[index]
    "openai-responses": ResponseFunctionToolCall(
        type="function_call", call_id="call_1", name="delete_files", arguments=json.dumps(_ARGS)
    ),
    "anthropic": ToolUseBlock(type="tool_use", id="toolu_1", name="delete_files", input=_ARGS),
    "gemini": gt.FunctionCall(id="g1", name="delete_files", args=_ARGS),
}


def _both(registry: ToolRegistry, calls: Any, provider: str) -> list[dict[str, Any]]:
    sync = dispatch(registry, calls, provider=provider)
    assert asyncio.run(adispatch(registry, calls, provider=provider)) == sync
    return list(sync)


@pytest.mark.parametrize("given", PROVIDERS)
@pytest.mark.parametrize("sent", [*PROVIDERS, "gemini-part"])
def test_another_providers_calls_in_a_list_are_a_type_error_naming_it_and_none_runs(sent: str, given: str) -> None:
    """Gemini calls given to the Anthropic dispatcher (and the like) ran with their arguments dropped (``{}``: the
    tool's defaults, ``pattern="*"``), or were dropped with no answer; as the message they came in already was, they
    are refused before any call runs, naming the provider to dispatch them with."""
    call = gt.Part(function_call=CALLS["gemini"]) if sent == "gemini-part" else CALLS[sent]
    sent = sent.removesuffix("-part")
    registry, ran = _registry()
    if sent == given:
        assert _both(registry, [call], given) and ran == ["*.tmp", "*.tmp"]
        return
    own = CALLS[given]
    for calls in ([call], [own, call], [call, own]):
        with pytest.raises(TypeError, match=rf"^the calls include tool calls in the {sent} format, not the {given} format"):
            dispatch(registry, calls, provider=given)
        with pytest.raises(TypeError, match=rf"dispatch them with provider='{sent}'$"):
            asyncio.run(adispatch(registry, calls, provider=given))
    assert ran == []


def test_a_call_of_no_call_at_all_in_the_list_still_says_so_first() -> None:
    registry, ran = _registry()
    with pytest.raises(TypeError, match="a tool call must be a dict or a provider SDK object, not str"):
        dispatch(registry, [CALLS["openai"], "call_1"], provider="anthropic")
    assert ran == []


@pytest.mark.parametrize(
    ("provider", "call", "field", "key"),
    [
        ("anthropic", {"type": "tool_use", "id": "t1", "name": "delete_files"}, "input", "tool_use_id"),
        ("anthropic", {"type": "tool_use", "id": "t1", "name": "delete_files", "input": None}, "input", "tool_use_id"),
        ("anthropic", {"id": "t1", "name": "delete_files", "arguments": _ARGS}, "input", "tool_use_id"),
        ("openai", {"id": "t1", "type": "function", "function": {"name": "delete_files"}}, "function.arguments", "tool_call_id"),
        ("openai-responses", {"type": "function_call", "call_id": "t1", "name": "delete_files"}, "arguments", "call_id"),
        ("gemini", {"id": "t1", "name": "delete_files", "arguments": _ARGS}, "args", "id"),
        ("gemini", {"functionCall": {"id": "t1", "name": "delete_files", "input": _ARGS}}, "args", "id"),
    ],
)
def test_a_call_without_its_arguments_field_is_an_invalid_call_not_run_with_none(
    provider: str, call: dict[str, Any], field: str, key: str
) -> None:
    """An Anthropic ``tool_use`` without ``input`` ran with ``{}`` (every argument its default)."""
    registry, ran = _registry()
    [answer] = _both(registry, [call], provider)
    text = json.dumps(answer)
    assert answer[key] == "t1" and f"Invalid tool call: the call has no '{field}' (its arguments); it was not run" in text
    if provider == "gemini":  # Gemini's answer names the function it answers
        assert answer["name"] == "delete_files" and "error" in answer["response"]
    assert ran == []


@pytest.mark.parametrize(
    ("provider", "call"),
    [
        ("gemini", gt.FunctionCall(id="g1", name="delete_files")),  # a function without parameters: no args at all
        ("gemini", gt.Part(function_call=gt.FunctionCall(name="delete_files"))),
        ("gemini", {"functionCall": {"name": "delete_files"}}),  # the REST API's, args left out
        ("anthropic", ToolUseBlock(type="tool_use", id="toolu_1", name="delete_files", input={})),
        ("openai-responses", ResponseFunctionToolCall(type="function_call", call_id="c1", name="delete_files", arguments="{}")),
        ("openai", {"id": "c1", "type": "function", "function": {"name": "delete_files", "arguments": "{}"}}),
    ],
)
def test_a_call_without_arguments_as_its_provider_sends_one_still_runs(provider: str, call: Any) -> None:
    registry, ran = _registry()
    [answer] = _both(registry, [call], provider)
    assert "DELETED *" in json.dumps(answer) and ran == ["*", "*"]


TOOLS = '''
from harness_one import defineTool

@defineTool
def add(a: str = "") -> str:
    """Echo."""
    return a
'''


def _run(tmp_path: Path, lines: list[bytes]) -> list[Any]:
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS)
    done = CliRunner().invoke(main, ["--tools", str(tools), "run"], input=b"".join(line + b"\n" for line in lines))
    assert done.exit_code == 0, done.stderr
    return [json.loads(line)["id"] for line in done.stdout_bytes.decode().splitlines()]


def _item(*order: str, big: int = 600_000) -> bytes:
    """A Responses ``function_call`` item with its members in ``order``, its arguments ``big`` characters long."""
    values = {"arguments": json.dumps({"a": "x" * big}), "call_id": "c1", "name": "add", "type": "function_call", "id": "fc_1"}
    return json.dumps({key: values[key] for key in order}).encode()


@pytest.mark.parametrize(
    "order",
    [
        ("arguments", "call_id", "name", "type", "id"),  # the SDK's model_dump_json order
        ("type", "id", "arguments", "call_id", "name"),
        ("id", "arguments", "call_id", "name", "type"),
        ("id", "call_id", "arguments", "name", "type"),
        ("type", "call_id", "arguments", "id", "name"),
    ],
)
def test_an_oversized_responses_line_is_answered_on_its_call_id_wherever_it_is(tmp_path: Path, order: tuple[str, ...]) -> None:
    """It was answered on the item's ``id`` (``fc_1``) when ``type`` and ``call_id`` came after the huge arguments."""
    assert _run(tmp_path, [_item(*order)]) == ["c1"]


def test_an_oversized_function_call_without_a_call_id_in_sight_is_answered_on_no_id(tmp_path: Path) -> None:
    line = _item("type", "id", "arguments", "name")
    assert _run(tmp_path, [line]) == [None]  # never the item's own id, which names no call


@pytest.mark.parametrize(
    ("line", "rid"),
    [
        (b'{"id": "call_7", "name": "add", "arguments": {"a": "1"', "call_7"),  # cut short
        (b'{"id": 7, "name": "add", "arguments": {"a": "1"}} {"id": 8}', 7),  # more after it
        (b'{"id": 12345', None),  # the id itself may be cut: a longer number
        (b'{"id": true, "name": "add", "arguments": {', None),  # no id a whole line could have
        (b'{"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "ad', "c1"),  # a Responses item: its call_id
        (b'{"type": "function_call", "id": "fc_1", "call_id": "c', None),  # never its own id
        (b'{"id": "fc_1", "call_id": "c1", "arguments": "{', "c1"),
        (_item("arguments", "call_id", "name", "type", "id", big=3) * 2, "c1"),
    ],
)
def test_a_line_cut_short_under_the_limit_is_answered_on_the_id_its_start_shows(tmp_path: Path, line: bytes, rid: Any) -> None:
    """It was answered ``"id": null``, while a cut line longer than the limit kept its id."""
    assert _run(tmp_path, [line]) == [rid]
