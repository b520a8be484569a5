"""What dispatch reads a call from: the one reader of call shapes (``_requests.parse_call``)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import RootModel
from test_export_dispatch import _counted

from harness_one import ToolRegistry
from harness_one.dispatch import adispatch, dispatch

OPENAI_CALL = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
FUNCTION_CALL = {"type": "function_call", "call_id": "fc_1", "name": "add", "arguments": '{"a": 2}', "id": "i1"}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2}}
_ID_KEY = {"openai": "tool_call_id", "openai-responses": "call_id", "anthropic": "tool_use_id"}


def _both(registry: ToolRegistry, calls: Any, provider: str) -> list[dict[str, Any]]:
    """The answers of ``dispatch``, checked equal to ``adispatch``'s."""
    answers = dispatch(registry, calls, provider=provider)
    assert asyncio.run(adispatch(registry, calls, provider=provider)) == answers
    return list(answers)


class _DumpsAList:
    """An SDK-like object (``model_dump``) whose dump is not a call's fields."""

    def __init__(self, id: Any = None) -> None:
        self.id = id

    def model_dump(self, **_: Any) -> list[Any]:
        return ["not", "a", "call"]


def test_an_sdk_object_whose_dump_is_not_an_object_is_answered_on_its_id() -> None:
    """It was skipped: the model's call got no answer (OpenAI refuses the next request without one)."""
    registry, runs = _counted()
    odd, answer = _both(registry, [_DumpsAList("odd_1"), OPENAI_CALL], "openai")
    assert odd["tool_call_id"] == "odd_1" and "Invalid tool call: cannot read a call from a _DumpsAList" in odd["content"]
    assert answer == {"role": "tool", "tool_call_id": "call_1", "content": "3"} and runs == [2, 2]


@pytest.mark.parametrize(
    "calls", [RootModel[list[Any]]([OPENAI_CALL]), [_DumpsAList(), OPENAI_CALL]], ids=["root-model", "no-id"]
)
def test_an_sdk_object_whose_dump_is_not_an_object_without_an_id_is_a_type_error(calls: Any) -> None:
    """It answered nothing and raised nothing: the calls inside a RootModel were silently dropped."""
    registry, runs = _counted()
    with pytest.raises(TypeError, match="a tool call must be a dict or a provider SDK object, not "):
        dispatch(registry, calls)
    with pytest.raises(TypeError, match="a tool call must be a dict or a provider SDK object, not "):
        asyncio.run(adispatch(registry, calls))
    assert runs == []


@pytest.mark.parametrize(
    ("provider", "other", "good"),
    [
        ("openai-responses", SimpleNamespace(type="reasoning", id="rs_1", summary=[]), FUNCTION_CALL),
        ("openai-responses", SimpleNamespace(type="message", id="msg_1", role="assistant"), FUNCTION_CALL),
        ("anthropic", SimpleNamespace(type="server_tool_use", id="srvtoolu_1", name="web_search"), TOOL_USE),
    ],
)
def test_an_unreadable_item_its_type_marks_as_no_call_gets_no_answer(provider: str, other: Any, good: Any) -> None:
    """It was answered as an invalid call on its id, which names no call: the provider refuses the next request."""
    registry, runs = _counted()
    [answer] = _both(registry, [other, good], provider)
    assert answer[_ID_KEY[provider]] == (good.get("call_id") or good["id"]) and runs == [2, 2]


@pytest.mark.parametrize(
    ("provider", "call", "rid"),
    [
        ("openai-responses", SimpleNamespace(type="function_call", call_id="fc_9", id="i9"), "fc_9"),
        ("openai-responses", SimpleNamespace(id="i9"), "i9"),
        ("anthropic", SimpleNamespace(type="tool_use", id="toolu_9"), "toolu_9"),
        ("openai", SimpleNamespace(type="custom", id="call_9"), "call_9"),  # every item of tool_calls is a call
    ],
)
def test_an_unreadable_call_is_still_answered_as_invalid(provider: str, call: Any, rid: str) -> None:
    registry, runs = _counted()
    [answer] = _both(registry, [call], provider)
    assert answer[_ID_KEY[provider]] == rid and "Invalid tool call: cannot read a call from a SimpleNamespace" in json.dumps(
        answer
    )
    assert runs == []


def test_an_unreadable_item_without_an_id_is_a_type_error_whatever_its_type() -> None:
    registry, runs = _counted()
    with pytest.raises(TypeError, match="a tool call must be a dict or a provider SDK object, not SimpleNamespace"):
        dispatch(registry, [TOOL_USE, SimpleNamespace(type="text", text="hi")], provider="anthropic")
    assert runs == []
