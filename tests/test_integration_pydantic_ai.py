"""Pydantic AI: harness tools in a real agent run driven by ``FunctionModel`` (and ``TestModel``).

Shown: ``deps`` reaching ``Call.context`` through the ``RunContext`` and keying a per-user rate
limit across two users of one agent, the model's call ids becoming harness call ids, argument
errors as ``ModelRetry`` (counted against ``retries``), and refusals that are not the model's
fault as failed tool results that leave its retries alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from harness_one import ToolBusy, ToolRegistry, define_tool
from harness_one.integrations.pydantic_ai import as_pydantic_ai_tools, to_pydantic_ai

if TYPE_CHECKING:
    from conftest import PerUserAdd


@dataclass
class Deps:
    user: str


def scripted(user: str, calls: list[dict[str, Any]] | list[str]) -> FunctionModel:
    """One tool call per model turn (so the order is exact), then text."""
    queue = [ToolCallPart("add", args, tool_call_id=f"{user}-{i}") for i, args in enumerate(calls)]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[queue.pop(0)] if queue else [TextPart("done")])

    return FunctionModel(respond)


def tool_parts(result: Any) -> dict[str, Any]:
    return {
        p.tool_call_id: p
        for m in result.all_messages()
        for p in getattr(m, "parts", [])
        if isinstance(p, (ToolReturnPart, RetryPromptPart))
    }


def retried(part: Any) -> bool:  # older releases send a RetryPromptPart, newer a ToolReturnPart marked "retried"
    return isinstance(part, RetryPromptPart) or getattr(part, "outcome", None) == "retried"


def test_deps_per_user_limit_and_call_ids(per_user_add: PerUserAdd) -> None:
    registry, add, seen = per_user_add
    tools = as_pydantic_ai_tools([add], registry, context=lambda ctx: {"user": ctx.deps.user})

    def run(user: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
        agent = Agent(scripted(user, calls), tools=tools, deps_type=Deps)  # the same tools for every user
        result = agent.run_sync("add", deps=Deps(user))
        assert result.output == "done"
        return tool_parts(result)

    alice = run("alice", [{"a": "two", "b": 3}, {"a": 2, "b": 3}, {"a": 1, "b": 1}])
    assert retried(alice["alice-0"]) and "$.a: expected number, got string" in str(alice["alice-0"].content)
    assert alice["alice-1"].content == 5 and alice["alice-1"].outcome == "success"
    assert alice["alice-2"].outcome == "failed" and "rate limited" in str(alice["alice-2"].content)
    bob = run("bob", [{"a": 1, "b": 1}])
    assert bob["bob-0"].content == 2
    assert seen == [("alice-1", "alice"), ("bob-0", "bob")]


def test_refusals_do_not_burn_the_models_retries(per_user_add: PerUserAdd) -> None:
    # With the default retries=1, two refusals in a row used to abort the run with
    # "UnexpectedModelBehavior: Tool 'add' exceeded max retries": they are not the model's fault.
    registry, add, _ = per_user_add
    agent = Agent(scripted("alice", [{"a": 1, "b": 1}] * 4), tools=[to_pydantic_ai(add, registry, context={"user": "alice"})])
    result = agent.run_sync("add")
    assert result.output == "done"
    parts = tool_parts(result)
    assert parts["alice-0"].outcome == "success"
    assert [parts[f"alice-{i}"].outcome for i in (1, 2, 3)] == ["failed"] * 3
    assert all("Retry after" in str(parts[f"alice-{i}"].content) for i in (1, 2, 3))


def test_other_failures_are_failed_results_too() -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def busy(x: int) -> int:
        """Always busy."""
        raise ToolBusy("Tool 'busy' is busy. Retry after 2 s.", retry_after=2)

    @define_tool(registry=registry)
    def broken(x: int) -> int:
        """Always raises."""
        raise RuntimeError("disk on fire")

    calls = [ToolCallPart("busy", {"x": 1}, tool_call_id="b1"), ToolCallPart("broken", {"x": 1}, tool_call_id="b2")] * 2

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[calls.pop(0)] if calls else [TextPart("done")])

    result = Agent(FunctionModel(respond), tools=as_pydantic_ai_tools(registry=registry)).run_sync("go")
    parts = [p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    assert [p.outcome for p in parts] == ["failed"] * 4
    assert "busy" in str(parts[0].content) and "RuntimeError: disk on fire" in str(parts[1].content)


def test_argument_errors_still_count_against_retries(per_user_add: PerUserAdd) -> None:
    registry, add, _ = per_user_add
    agent = Agent(scripted("alice", [{"a": "x", "b": 1}] * 3), tools=[to_pydantic_ai(add, registry)])
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        agent.run_sync("add")


def test_test_model_calls_through_the_harness(per_user_add: PerUserAdd) -> None:
    registry, _add, seen = per_user_add

    def context(ctx: RunContext[Deps]) -> dict[str, Any]:
        return {"user": ctx.deps.user}

    agent = Agent(TestModel(), tools=[to_pydantic_ai("add", registry, context=context)], deps_type=Deps)
    result = agent.run_sync("add", deps=Deps("zoe"))
    assert seen and seen[0][1] == "zoe" and seen[0][0] == tool_parts(result).popitem()[0]


def test_results_reach_the_model_as_the_harness_renders_them() -> None:
    # Pydantic AI serializes what the tool returns itself: a plain object ended the run with
    # PydanticSerializationError, a lone surrogate went out as is (UnicodeEncodeError at the
    # provider), NaN as null and bytes as base64, where every other adapter sends the harness's text.
    registry = ToolRegistry(autoload=False)

    class Point:
        def __str__(self) -> str:
            return "Point(x=1)"

    values: dict[str, Any] = {
        "nan": math.nan,
        "bytes": b"caf\xe9",
        "object": Point(),
        "surrogate": b"caf\xe9".decode("utf-8", "surrogateescape"),
        "nested": {"x": [math.inf, b"ok"]},
        "number": 5,
        "none": None,
    }

    @define_tool(registry=registry)
    def odd(kind: str) -> Any:
        """Values JSON cannot hold as they are."""
        return values[kind]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("odd", {"kind": k}, tool_call_id=k) for k in values])
        return ModelResponse(parts=[TextPart("done")])

    result = Agent(FunctionModel(respond), tools=as_pydantic_ai_tools(registry=registry)).run_sync("go")
    parts = tool_parts(result)
    assert {k: p.model_response_str() for k, p in parts.items()} == {
        "nan": "NaN",
        "bytes": "caf\ufffd",
        "object": "Point(x=1)",
        "surrogate": "caf\ufffd",
        "nested": '{"x":["Infinity","ok"]}',
        "number": "5",
        "none": "null",  # (Pydantic AI showed None as nothing, '')
    }
    assert parts["number"].content == 5  # data stays data
    for kind in ("nan", "bytes", "object", "nested"):  # what the harness's text for any other loop holds
        assert parts[kind].content == json.loads(registry.try_call("odd", {"kind": kind}).for_model())


@pytest.mark.parametrize(("arguments", "got"), [("[1, 2]", "array"), ('"hi"', "string"), ("3", "integer"), ("null", "null")])
def test_arguments_that_are_not_an_object_are_the_models_to_fix(per_user_add: PerUserAdd, arguments: str, got: str) -> None:
    # Pydantic AI unpacked them into the tool function: TypeError "argument after ** must be a mapping" ended the run.
    registry, add, seen = per_user_add
    result = Agent(scripted("u", [arguments]), tools=[to_pydantic_ai(add, registry)]).run_sync("add")
    assert result.output == "done"
    part = tool_parts(result)["u-0"]
    assert retried(part) and f"arguments must be a JSON object, got {got}" in str(part.content)
    assert seen == []


@pytest.mark.parametrize("context", [lambda ctx: {"user": ctx.missing}, lambda ctx: ["alice"]])
def test_a_failing_context_function_is_a_failed_result(per_user_add: PerUserAdd, context: Any) -> None:
    # It used to raise out of agent.run_sync() (AttributeError, TypeError).
    registry, add, seen = per_user_add
    result = Agent(scripted("u", [{"a": 1, "b": 2}]), tools=[to_pydantic_ai(add, registry, context=context)]).run_sync("add")
    assert result.output == "done"
    part = tool_parts(result)["u-0"]
    assert part.outcome == "failed" and "the application's context= function" in str(part.content)
    assert "missing" not in str(part.content) and "alice" not in str(part.content)  # the type only, no details
    assert seen == []
