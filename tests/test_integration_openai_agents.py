"""OpenAI Agents SDK: harness tools in a real ``Runner.run`` loop driven by a scripted ``Model``.

Shown: ``Runner.run(context=...)`` reaching ``Call.context`` through the ``ToolContext`` and
keying a per-user rate limit across two users of one agent, the model's call ids becoming
harness call ids, argument errors and refusals as the harness's ``Error: ...`` text, strict mode.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tool_context import ToolContext
from agents.tracing import Span, Trace, TracingProcessor, set_trace_processors
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from harness_one.integrations.openai_agents import as_openai_agents_tools, to_openai_agents

if TYPE_CHECKING:
    from conftest import PerUserAdd


class ScriptedModel(Model):
    """The SDK's model interface answering from a script: one tool call per turn, then text."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = list(calls)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        if self.calls:
            call_id, arguments = self.calls.pop(0)
            output: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call", call_id=call_id, name="add", arguments=json.dumps(arguments), id=f"fc-{call_id}"
                )
            ]
        else:
            output = [
                ResponseOutputMessage(
                    id="m1", role="assistant", status="completed", type="message",
                    content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
                )
            ]  # fmt: skip
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@dataclass
class UserContext:
    user: str


def outputs(model: ScriptedModel) -> dict[str, str]:
    return {
        item["call_id"]: item["output"]
        for item in model.inputs[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def test_runner_per_user_limit_and_call_ids(per_user_add: PerUserAdd) -> None:
    registry, add, seen = per_user_add
    contexts: list[Any] = []

    def context(ctx: ToolContext[UserContext]) -> dict[str, Any]:
        contexts.append(ctx)
        return {"user": ctx.context.user}

    tools = as_openai_agents_tools([add], registry, context=context)

    def run(user: str, calls: list[dict[str, Any]]) -> dict[str, str]:
        model = ScriptedModel([(f"{user}-{i}", args) for i, args in enumerate(calls)])
        agent = Agent(name="calc", instructions="add", model=model, tools=tools)  # the same tools for every user
        result = asyncio.run(Runner.run(agent, "add", context=UserContext(user), run_config=RunConfig(tracing_disabled=True)))
        assert result.final_output == "done"
        return outputs(model)

    alice = run("alice", [{"a": "two", "b": 3}, {"a": 2, "b": 3}, {"a": 1, "b": 1}])
    assert "Error: Invalid arguments" in alice["alice-0"] and "$.a: expected number, got string" in alice["alice-0"]
    assert alice["alice-1"] == "5"
    assert alice["alice-2"].startswith("Error: Tool 'add' is rate limited. Retry after")
    bob = run("bob", [{"a": 1, "b": 1}])
    assert bob == {"bob-0": "2"}
    assert seen == [("alice-1", "alice"), ("bob-0", "bob")]
    assert all(isinstance(c, ToolContext) for c in contexts) and [c.tool_call_id for c in contexts][-1] == "bob-0"


def test_call_id_without_a_context(per_user_add: PerUserAdd) -> None:
    registry, _add, seen = per_user_add
    model = ScriptedModel([("only-1", {"a": 1, "b": 2})])
    agent = Agent(name="calc", instructions="add", model=model, tools=[to_openai_agents("add", registry)])
    asyncio.run(Runner.run(agent, "add", run_config=RunConfig(tracing_disabled=True)))
    assert outputs(model) == {"only-1": "3"} and seen == [("only-1", None)]


def test_strict_schema(per_user_add: PerUserAdd) -> None:
    registry, add, _ = per_user_add
    strict = to_openai_agents(add, registry, strict=True)
    assert strict.strict_json_schema and strict.params_json_schema["additionalProperties"] is False


@pytest.mark.parametrize("context", [lambda ctx: {"user": ctx.context.user}, lambda ctx: ["alice"]])
def test_a_failing_context_function_is_the_harness_error_text(per_user_add: PerUserAdd, context: Any) -> None:
    # It used to end Runner.run with UserError("Error running tool add: ...").
    registry, add, seen = per_user_add
    model = ScriptedModel([("c-0", {"a": 1, "b": 2})])
    agent = Agent(name="adder", model=model, tools=[to_openai_agents(add, registry, context=context)])
    result = asyncio.run(Runner.run(agent, "add", run_config=RunConfig(tracing_disabled=True)))  # no run context given
    assert result.final_output == "done"
    output = outputs(model)["c-0"]
    assert output.startswith("Error: Tool 'add' was not called: the application's context= function")
    assert "alice" not in output and "user" not in output and seen == []


class KeepSpans(TracingProcessor):
    """Keeps the finished spans of the SDK's traces."""

    def __init__(self) -> None:
        self.spans: list[Span[Any]] = []

    def on_trace_start(self, trace: Trace) -> None: ...
    def on_trace_end(self, trace: Trace) -> None: ...
    def on_span_start(self, span: Span[Any]) -> None: ...
    def on_span_end(self, span: Span[Any]) -> None:
        self.spans.append(span)

    def shutdown(self) -> None: ...
    def force_flush(self) -> None: ...


@pytest.mark.parametrize("sensitive", [True, False])
def test_a_harness_error_marks_the_function_span_failed(per_user_add: PerUserAdd, sensitive: bool) -> None:
    # The model read the error text while the SDK's trace showed a successful call.
    registry, add, _ = per_user_add
    kept = KeepSpans()
    set_trace_processors([kept])
    try:
        model = ScriptedModel([("c-0", {"a": "two", "b": 3}), ("c-1", {"a": 1, "b": 2})])
        agent = Agent(name="adder", model=model, tools=[to_openai_agents(add, registry)])
        asyncio.run(Runner.run(agent, "add", run_config=RunConfig(trace_include_sensitive_data=sensitive)))
    finally:
        set_trace_processors([])
    assert outputs(model)["c-1"] == "3"
    failed, passed = [s for s in kept.spans if s.span_data.type == "function"]
    assert passed.error is None and failed.error is not None
    assert failed.error["data"]["kind"] == "invalid_arguments"
    assert ("expected number" in failed.error["data"].get("error", "")) is sensitive
