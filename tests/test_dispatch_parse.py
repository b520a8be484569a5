"""What dispatch reads a call from: the one reader of call shapes (``_requests.parse_call``)."""

from __future__ import annotations

import asyncio
import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
from anthropic.types import ToolUseBlock
from openai.types.responses import ResponseFunctionToolCall
from pydantic import BaseModel, RootModel
from test_export_dispatch import _counted

from harness_one import Call, ToolRegistry, hookimpl
from harness_one._cli.loop import Loop
from harness_one._requests import parse_call
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


class _UntypedToolUse(BaseModel):
    """An SDK-like object of Anthropic's call fields, without ``type``."""

    id: str
    name: str
    input: dict[str, Any]


@pytest.mark.parametrize(
    ("provider", "untyped", "rid"),
    [
        ("anthropic", {"id": "toolu_5", "name": "add", "input": {"a": 5}}, "toolu_5"),
        ("anthropic", _UntypedToolUse(id="toolu_5", name="add", input={"a": 5}), "toolu_5"),
        ("openai-responses", {"call_id": "fc_5", "name": "add", "arguments": '{"a": 5}'}, "fc_5"),
        ("gemini", {"id": "g_5", "name": "add", "args": {"a": 5}}, "g_5"),
    ],
    ids=["anthropic-dict", "anthropic-object", "responses-dict", "gemini-dict"],
)
def test_an_item_without_a_type_that_holds_a_calls_fields_is_a_call(provider: str, untyped: Any, rid: str) -> None:
    """An Anthropic tool use without ``type`` was skipped as a dict (no answer) but answered as an unreadable object."""
    registry, runs = _counted()
    [answer] = _both(registry, [untyped], provider)
    assert answer.get(_ID_KEY.get(provider, "id")) == rid and runs == [5, 5]


@pytest.mark.parametrize(
    ("provider", "untyped"),
    [
        ("anthropic", SimpleNamespace(id="toolu_5", name="add", input={"a": 5})),
        ("openai-responses", SimpleNamespace(call_id="fc_5", name="add", arguments="{}")),
    ],
)
def test_an_unreadable_item_without_a_type_is_a_call_as_a_dict_is(provider: str, untyped: Any) -> None:
    """The same rule as for dicts: answered (as invalid: it cannot be read) on its id."""
    registry, runs = _counted()
    [answer] = _both(registry, [untyped], provider)
    assert answer[_ID_KEY[provider]] == (getattr(untyped, "call_id", None) or untyped.id) and runs == []
    assert "Invalid tool call: cannot read a call from a SimpleNamespace" in json.dumps(answer)


@pytest.mark.parametrize(
    ("provider", "other"),
    [
        ("anthropic", {"text": "let me add"}),
        ("anthropic", {"type": "text", "text": "let me add", "id": "x"}),
        ("openai-responses", {"role": "assistant", "content": "adding"}),
        ("openai-responses", {}),
        ("gemini", {"text": "adding", "function_call": None}),
    ],
)
def test_an_item_with_no_calls_fields_or_another_type_is_no_call(provider: str, other: Any) -> None:
    """An untyped Responses item was read as a call whatever it held: answered under ``call_id`` None."""
    registry, runs = _counted()
    good = {
        "anthropic": TOOL_USE,
        "openai-responses": FUNCTION_CALL,
        "gemini": {"function_call": {"name": "add", "args": {"a": 2}}},
    }
    assert _both(registry, [other, good[provider]], provider) == _both(registry, [good[provider]], provider)
    assert runs == [2, 2, 2, 2]


@pytest.mark.parametrize(
    ("provider", "calls", "name"),
    [
        ("anthropic", [ToolUseBlock], "ToolUseBlock"),
        ("anthropic", ToolUseBlock, "ToolUseBlock"),
        ("openai-responses", [FUNCTION_CALL, ResponseFunctionToolCall], "ResponseFunctionToolCall"),
        ("openai", [dict], "dict"),
        ("gemini", SimpleNamespace, "SimpleNamespace"),
    ],
)
def test_a_class_given_for_a_call_is_a_clear_type_error(provider: str, calls: Any, name: str) -> None:
    """It was ``BaseModel.model_dump() missing 1 required positional argument: 'self'``, or "not type"."""
    registry, runs = _counted()
    message = f"the class {name} was given where an instance \\(a call object or a dict\\) was expected"
    with pytest.raises(TypeError, match=message):
        dispatch(registry, calls, provider=provider)
    with pytest.raises(TypeError, match=message):
        asyncio.run(adispatch(registry, calls, provider=provider))
    assert runs == []


class _CallIds:
    """Records the call id of every call the registry runs."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.seen.append(call.call_id)


def test_run_and_dispatch_give_the_registry_one_call_id() -> None:
    """``harness-one run`` made its own with ``str(id)``: an int past the int-to-text limit was an internal error there."""
    registry, runs = _counted()
    ids = _CallIds()
    registry.plugins.register(ids, name="ids")
    long = 10**5000  # past the default int-to-text limit (4300 digits)
    dispatch(registry, [{"type": "tool_use", "id": long, "name": "add", "input": {"a": 1}}], provider="anthropic")
    request = parse_call({"id": long, "name": "add", "arguments": {"a": 1}})
    assert request is not None
    out = io.BytesIO()
    asyncio.run(Loop(registry, out).handle(1, request))
    assert json.loads(out.getvalue(), parse_int=str)["ok"] is True and runs == [1, 1]
    assert ids.seen == ["1" + "0" * 5000] * 2


@pytest.mark.parametrize(
    ("provider", "call", "key"),
    [
        ("anthropic", {"type": "tool_use", "id": 10**5000, "name": "add", "input": {"a": 1}}, "tool_use_id"),
        ("openai", {"id": 10**5000, "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}, "tool_call_id"),
        ("gemini", {"function_call": {"id": 10**5000, "name": "add", "args": {"a": 1}}}, "id"),
        ("anthropic", SimpleNamespace(type="tool_use", id=10**5000), "tool_use_id"),  # unreadable: answered on its id
    ],
)
def test_an_int_id_too_long_for_text_is_answered_as_its_digits_in_text(provider: str, call: Any, key: str) -> None:
    """It was written as the int: the application's ``json.dumps`` of the answer raised (past 4300 digits)."""
    registry, _ = _counted()
    ids = _CallIds()
    registry.plugins.register(ids, name="ids")
    [answer] = _both(registry, [call], provider)
    assert answer[key] == "1" + "0" * 5000
    json.dumps(answer)  # the answer can be sent
    ran = not isinstance(call, SimpleNamespace)  # the unreadable object is refused before it is a call
    assert ids.seen == [answer[key]] * 2 * ran  # the call id the registry got (dispatch, adispatch)


def test_an_int_id_within_the_limit_is_answered_as_it_came() -> None:
    registry, _ = _counted()
    [answer] = _both(registry, [{"type": "tool_use", "id": 10**4000, "name": "add", "input": {"a": 1}}], "anthropic")
    assert answer["tool_use_id"] == 10**4000


def test_an_unreadable_object_with_a_calls_attributes_is_told_what_could_not_be_read() -> None:
    """It said only "cannot read a call from a SimpleNamespace", not that it has no model_dump()."""
    registry, runs = _counted()
    call = SimpleNamespace(type="tool_use", id="toolu_9", name="add", input={"a": 1})
    [answer] = _both(registry, [call], "anthropic")
    assert answer["tool_use_id"] == "toolu_9" and answer["is_error"] and runs == []
    assert (
        "cannot read a call from a SimpleNamespace: it is not a dict and has no model_dump() method "
        "(a call's fields are not read from attributes)" in answer["content"]
    )
    [odd] = _both(registry, [_DumpsAList("odd_1")], "openai")
    assert "cannot read a call from a _DumpsAList: its model_dump() did not give an object of the call's fields" in odd["content"]
