"""Review 30, raw provider loops: results whose reading raises (Gemini), SDK objects pydantic warns about, context
variables a tool sets, and a message given to another provider's dispatcher."""

from __future__ import annotations

import asyncio
import contextvars
import warnings
from typing import Any

import pytest
from anthropic.types import Message
from google.genai import types
from openai._models import construct_type
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from harness_one import ToolRegistry
from harness_one.dispatch import adispatch, dispatch, dispatch_anthropic, dispatch_gemini, dispatch_openai


class _ClosedMapping(dict):  # type: ignore[type-arg]
    """A lazy mapping whose backend closed: reading its items raises."""

    def items(self) -> Any:
        raise ConnectionError("backend closed")


class _BrokenList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise RuntimeError("cannot iterate")


def _gemini_calls(*names: str) -> list[dict[str, Any]]:
    return [{"id": name, "name": name, "args": {}} for name in names]


def test_gemini_answers_every_call_when_a_result_cannot_be_read_as_the_other_providers_do() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: _ClosedMapping(a=1), name="closed", parameters={"type": "object", "properties": {}})
    reg.add(lambda: _BrokenList([1]), name="broken", parameters={"type": "object", "properties": {}})
    reg.add(lambda: {"a": 1}, name="fine", parameters={"type": "object", "properties": {}})
    calls = _gemini_calls("closed", "broken", "fine")
    for answers in (dispatch_gemini(reg, calls), asyncio.run(adispatch(reg, calls, provider="gemini"))):
        outputs = {a["name"]: a["response"]["output"] for a in answers}
        assert outputs == {"closed": "<_ClosedMapping>", "broken": "<_BrokenList>", "fine": {"a": 1}}
    texts = {a["tool_call_id"]: a["content"] for a in dispatch_openai(reg, [_openai_call(n) for n in ("closed", "broken")])}
    assert texts == {"closed": '"<_ClosedMapping>"', "broken": '"<_BrokenList>"'}  # what the other providers read


def _openai_call(name: str, arguments: Any = "{}") -> dict[str, Any]:
    return {"id": name, "type": "function", "function": {"name": name, "arguments": arguments}}


class _Token(BaseModel):
    token: str


def test_sdk_objects_and_results_pydantic_would_warn_about_are_read_without_a_warning() -> None:
    reg = ToolRegistry(autoload=False)

    def login(user: str, password: str) -> Any:
        return _Token.model_construct(token={"secret": password})  # a field of the wrong type: pydantic warns on dump

    reg.add(login)
    raw = {
        "id": "r",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_openai_call("login", {"user": "bob", "password": "hunter2"})],
                },
            }
        ],
    }
    completion = construct_type(type_=ChatCompletion, value=raw)  # what the SDK builds of a server's reply
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would raise here (and print the password elsewhere)
        answers = dispatch(reg, completion)
    assert answers == [{"role": "tool", "tool_call_id": "login", "content": '{"token": {"secret": "hunter2"}}'}]


_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("review30_var", default="unset")


def test_a_context_variable_a_tool_sets_reaches_neither_the_caller_nor_the_next_call() -> None:
    reg = ToolRegistry(autoload=False)
    seen: list[str] = []

    def mark(label: str) -> str:
        seen.append(_VAR.get())
        _VAR.set(label)
        return "ok"

    reg.add(mark)
    one = [_openai_call("mark", '{"label": "one"}')]
    two = [{**one[0], "id": "a"}, {**one[0], "id": "b"}]
    for calls, options in ((one, {}), (two, {"concurrency": 1}), (two, {})):
        assert dispatch(reg, calls, **options)
        assert _VAR.get() == "unset"
    assert seen == ["unset"] * 5


def test_a_message_given_to_another_providers_dispatcher_is_a_type_error_not_an_empty_answer() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(
        lambda a, b=1: a + b,
        name="add",
        parameters={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    )
    message = Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "x",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
            "content": [
                {"type": "text", "text": "adding"},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2}},
            ],
        }
    )
    with pytest.raises(
        TypeError, match=r"^the message holds tool calls in the anthropic format, not the openai format .*provider='anthropic'"
    ):
        dispatch(reg, message)
    content = types.Content(
        role="model", parts=[types.Part(function_call=types.FunctionCall(id="g1", name="add", args={"a": 1}))]
    )
    with pytest.raises(TypeError, match=r"in the gemini format, not the anthropic format"):
        dispatch_anthropic(reg, content)
    with pytest.raises(TypeError, match=r"in the gemini format, not the openai format"):
        asyncio.run(adispatch(reg, content))
    assert dispatch_anthropic(reg, message) == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3", "is_error": False}
    ]
    # a message with no calls at all is answered with none, whichever dispatcher reads it
    text_only = {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
    assert dispatch_openai(reg, text_only) == [] and dispatch_anthropic(reg, text_only) == []
    assert dispatch_gemini(reg, {"role": "assistant", "content": "done", "tool_calls": None}) == []


def test_a_models_own_model_dump_without_the_warnings_option_keeps_its_aliases() -> None:
    from pydantic import Field

    from harness_one._render import json_data

    class Renamed(BaseModel):
        user_id: int = Field(alias="userId")

        def model_dump(self, *, by_alias: bool | None = False, mode: str = "python") -> dict[str, Any]:  # type: ignore[override]
            return super().model_dump(by_alias=by_alias, mode=mode)

    assert json_data(Renamed(userId=3)) == {"userId": 3}
