"""Review 32, raw provider loops: the tool name a Gemini answer repeats is bounded, and OpenAI custom (free-form) tool
calls are answered, in their own answer shape, with an error saying to call a function tool."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessageCustomToolCall, ChatCompletionToolMessageParam
from openai.types.responses import ResponseCustomToolCall, ResponseCustomToolCallOutput, ResponseFunctionToolCall
from pydantic import TypeAdapter

from harness_one import ToolRegistry
from harness_one._requests import CustomCall, parse_line
from harness_one.dispatch import adispatch, dispatch

_CUSTOM_ERROR = "Error: Invalid tool call: custom (free-form) tools are not supported; call a function tool, with JSON arguments."


def _counted() -> tuple[ToolRegistry, list[Any]]:
    runs: list[Any] = []
    reg = ToolRegistry(autoload=False)
    reg.add(lambda a=0: runs.append(a) or a, name="add", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
    return reg, runs


def _both(reg: ToolRegistry, calls: Any, provider: str, **options: Any) -> list[dict[str, Any]]:
    """The answers of :func:`dispatch` and :func:`adispatch`, checked alike."""
    answers = dispatch(reg, calls, provider=provider, **options)
    assert asyncio.run(asyncio.wait_for(adispatch(reg, calls, provider=provider, **options), 10)) == answers
    return list(answers)


@pytest.mark.parametrize("names", [None, ["add"]])
@pytest.mark.parametrize(
    "call", [{"function_call": {"id": "g1", "name": "n" * 1_000_000, "args": {}}}, {"id": "g1", "name": "n" * 1_000_000}]
)
def test_a_gemini_answer_repeats_a_long_tool_name_cut_as_the_error_text_cuts_it(call: Any, names: Any) -> None:
    reg, runs = _counted()
    [answer] = _both(reg, [call], "gemini", names=names)
    assert answer["name"] == "n" * 200 and answer["id"] == "g1"
    assert "Unknown tool '" + "n" * 200 + "'" in answer["response"]["error"]
    assert len(json.dumps(answer)) < 1000 and runs == []


def test_a_gemini_answer_repeats_a_tool_name_as_sent_up_to_200_characters() -> None:
    reg, _ = _counted()
    sent = ["add", "x" * 64, "y\ud800" * 100, "z" * 201]
    answers = _both(reg, [{"id": str(at), "name": name, "args": {}} for at, name in enumerate(sent)], "gemini")
    assert [answer["name"] for answer in answers] == ["add", "x" * 64, "y\ufffd" * 100, "z" * 200]
    assert answers[0]["response"] == {"output": 0}


def test_a_responses_custom_tool_call_is_answered_as_such_with_an_error_and_not_run() -> None:
    reg, runs = _counted()
    items = [
        ResponseFunctionToolCall(type="function_call", call_id="c1", name="add", arguments='{"a": 1}'),
        ResponseCustomToolCall(type="custom_tool_call", call_id="c2", name="add", input="1"),
        {"type": "custom_tool_call", "call_id": "c3", "name": "add", "input": "2"},
    ]
    answers = _both(reg, items, "openai-responses")
    assert answers == [
        {"type": "function_call_output", "call_id": "c1", "output": "1"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": _CUSTOM_ERROR},
        {"type": "custom_tool_call_output", "call_id": "c3", "output": _CUSTOM_ERROR},
    ]
    for answer in answers[1:]:  # the SDK's own type of the answer to such a call
        assert ResponseCustomToolCallOutput.model_validate(answer).model_dump(exclude_none=True) == answer
    assert runs == [1, 1]  # the function call alone ran (once per dispatcher)


def test_a_responses_custom_tool_call_in_a_response_output_is_answered() -> None:
    reg, runs = _counted()
    response = {
        "output": [{"type": "reasoning", "id": "r1"}, {"type": "custom_tool_call", "call_id": "c2", "name": "add", "input": "1"}]
    }
    assert _both(reg, response, "openai-responses") == [
        {"type": "custom_tool_call_output", "call_id": "c2", "output": _CUSTOM_ERROR}
    ]
    assert runs == []


@pytest.mark.parametrize(
    "call",
    [
        {"id": "c2", "type": "custom", "custom": {"name": "add", "input": "1"}},
        ChatCompletionMessageCustomToolCall.model_validate(
            {"id": "c2", "type": "custom", "custom": {"name": "add", "input": "1"}}
        ),
    ],
)
def test_a_chat_custom_tool_call_is_answered_with_one_clear_error_and_not_run(call: Any) -> None:
    reg, runs = _counted()
    [answer] = _both(reg, [call], "openai")
    assert answer == {"role": "tool", "tool_call_id": "c2", "content": _CUSTOM_ERROR}
    TypeAdapter(ChatCompletionToolMessageParam).validate_python(answer)
    assert runs == []


def test_a_custom_tool_call_line_of_run_is_refused_not_run_without_its_input() -> None:
    for line in (
        b'{"type": "custom_tool_call", "call_id": "c2", "name": "add", "input": "1"}',
        b'{"id": "c3", "type": "custom", "custom": {"name": "add", "input": "1"}}',
    ):
        with pytest.raises(CustomCall, match="custom \\(free-form\\) tools are not supported") as caught:
            parse_line(line)
        assert caught.value.request_id == json.loads(line).get("call_id", json.loads(line).get("id"))


def test_a_refused_custom_tool_call_is_observed_under_the_name_it_sent() -> None:
    """harness_call_refused saw '' for a custom call, whose name was read; an unknown tool's refusal names it."""
    from harness_one import hookimpl

    seen: list[str] = []

    class Watch:
        @hookimpl
        def harness_call_refused(self, registry: ToolRegistry, name: str, error: Exception) -> None:
            seen.append(name)

    reg = ToolRegistry(autoload=False, plugins={"watch": Watch()})
    reg.add(lambda a=0: a, name="add", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
    dispatch(reg, [{"type": "custom_tool_call", "call_id": "c1", "name": "add", "input": "1"}], provider="openai-responses")
    chat = {"id": "c2", "type": "custom", "custom": {"name": "grep", "input": "x"}}
    dispatch(reg, [chat], provider="openai")
    assert seen == ["add", "grep"]
