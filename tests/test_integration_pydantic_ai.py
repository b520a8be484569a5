"""Pydantic AI: harness tools in a real agent run driven by ``FunctionModel`` (and ``TestModel``).

Shown: ``deps`` reaching ``Call.context`` through the ``RunContext`` and keying a per-user rate
limit across two users of one agent, the model's call ids becoming harness call ids, argument
errors as ``ModelRetry`` (counted against ``retries``), and refusals that are not the model's
fault as failed tool results that leave its retries alone.
"""

from __future__ import annotations

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


def scripted(user: str, calls: list[dict[str, Any]]) -> FunctionModel:
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
