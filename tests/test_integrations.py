"""Harness tools inside real agent runtimes, driven by each framework's own offline model.

Each framework shows: a successful call, an argument error the agent receives as the
harness's readable message, and a rate-limit refusal reaching the agent.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from harness_one import ManualClock, ToolRegistry, define_tool


@pytest.fixture
def reg() -> ToolRegistry:
    registry = ToolRegistry(autoload=False, clock=ManualClock())

    @define_tool(registry=registry, rate_limit={"rate": 1, "burst": 2})
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    return registry


# The three calls each agent makes: ok, bad arguments, then one past the rate limit (burst 2).
CALLS = [{"a": 2, "b": 3}, {"a": "two", "b": 3}, {"a": 1, "b": 1}, {"a": 1, "b": 2}]


def check_outputs(outputs: list[str]) -> None:
    assert outputs[0] in ("5", "5.0")
    assert "$.a: expected number, got string" in outputs[1]
    assert outputs[2] in ("2", "2.0")
    assert "rate limited" in outputs[3] and "Retry after" in outputs[3]


# --------------------------------------------------------------------------- LangGraph


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")  # still LangGraph's prebuilt ReAct agent
def test_langgraph_react_agent(reg: ToolRegistry) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.prebuilt import create_react_agent

    from harness_one.integrations.langchain import as_langchain_tools

    class FakeToolModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    script = [AIMessage(content="", tool_calls=[{"name": "add", "args": args, "id": f"c{i}"}]) for i, args in enumerate(CALLS)]
    model = FakeToolModel(messages=iter([*script, AIMessage(content="all done")]))
    agent = create_react_agent(model, as_langchain_tools(reg))
    final = agent.invoke({"messages": [("user", "add things")]}, {"recursion_limit": 20})
    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    check_outputs([str(m.content) for m in tool_messages])
    assert [m.status for m in tool_messages] == ["success", "error", "success", "error"]
    assert final["messages"][-1].content == "all done"
    assert reg.call_count("add") == 4  # every call went through the harness


async def test_langchain_tool_async_and_tool_node(reg: ToolRegistry) -> None:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from harness_one.integrations.langchain import to_langchain

    tool = to_langchain("add", reg)
    assert tool.tool_call_schema is not None and await tool.ainvoke({"a": 1, "b": 2}) == "3"
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "tools")
    calls = [{"name": "add", "args": {"a": "x", "b": 1}, "id": "t1"}, {"name": "add", "args": {"a": 1, "b": 1}, "id": "t2"}]
    out = await graph.compile().ainvoke({"messages": [AIMessage(content="", tool_calls=calls)]})
    bad, good = out["messages"][1:]
    assert bad.status == "error" and "expected number" in bad.content
    assert good.status == "success" and good.content == "2"


def test_langchain_tools_gain_harness_policies() -> None:
    from langchain_core.tools import tool as lc_tool

    from harness_one import RateLimitExceeded, ToolArgumentError
    from harness_one.integrations.langchain import from_langchain

    @lc_tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    reg = ToolRegistry(autoload=False, clock=ManualClock())
    from_langchain(multiply, registry=reg, rate_limit={"rate": 1, "burst": 1})
    assert reg.call("multiply", {"a": 6, "b": 7}) == 42
    with pytest.raises(RateLimitExceeded):
        reg.call("multiply", {"a": 1, "b": 1})
    with pytest.raises(ToolArgumentError):
        reg.call("multiply", {"a": "x", "b": 1})


# --------------------------------------------------------------------------- AutoGen


def test_autogen_assistant_agent(reg: ToolRegistry) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.messages import ToolCallExecutionEvent
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from harness_one.integrations.autogen import as_autogen_tools

    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    calls = [FunctionCall(id=f"c{i}", name="add", arguments=json.dumps(args)) for i, args in enumerate(CALLS)]
    client = ReplayChatCompletionClient(
        [CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False)],
        model_info={
            "function_calling": True,
            "vision": False,
            "json_output": False,
            "family": "unknown",
            "structured_output": False,
        },
    )
    agent = AssistantAgent("assistant", model_client=client, tools=as_autogen_tools(reg))
    result = asyncio.run(agent.run(task="add things"))
    events = [m for m in result.messages if isinstance(m, ToolCallExecutionEvent)]
    outputs = [r.content for r in events[0].content]
    check_outputs(outputs)
    assert [r.is_error for r in events[0].content] == [False, True, False, True]
    assert reg.call_count("add") == 4


# --------------------------------------------------------------------------- OpenAI Agents SDK


def test_openai_agents_runner(reg: ToolRegistry) -> None:
    from agents import Agent, Runner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from harness_one.integrations.openai_agents import to_openai_agents

    seen: list[list[Any]] = []

    class ScriptedModel(Model):
        """The model interface, answering from a script: four tool calls, then text."""

        def __init__(self) -> None:
            self.turn = 0

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
            self.turn += 1
            seen.append(list(input) if isinstance(input, list) else [input])
            if self.turn == 1:
                output: list[Any] = [
                    ResponseFunctionToolCall(
                        type="function_call", call_id=f"c{i}", name="add", arguments=json.dumps(args), id=f"fc{i}"
                    )
                    for i, args in enumerate(CALLS)
                ]
            else:
                output = [
                    ResponseOutputMessage(
                        id="m1", role="assistant", status="completed", type="message",
                        content=[ResponseOutputText(type="output_text", text="all done", annotations=[])],
                    )
                ]  # fmt: skip
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    from agents import RunConfig

    agent = Agent(name="calc", instructions="add", model=ScriptedModel(), tools=[to_openai_agents("add", reg)])
    result = asyncio.run(Runner.run(agent, "add things", run_config=RunConfig(tracing_disabled=True)))
    assert result.final_output == "all done"
    outputs = {
        item["call_id"]: item["output"]
        for item in seen[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
    check_outputs([outputs[f"c{i}"] for i in range(4)])


def test_openai_agents_strict_schema(reg: ToolRegistry) -> None:
    from harness_one.integrations.openai_agents import to_openai_agents

    strict = to_openai_agents("add", reg, strict=True)
    assert strict.strict_json_schema and strict.params_json_schema["additionalProperties"] is False


# --------------------------------------------------------------------------- Pydantic AI


def test_pydantic_ai_agent(reg: ToolRegistry) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from harness_one.integrations.pydantic_ai import as_pydantic_ai_tools

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert [t.name for t in info.function_tools] == ["add"]
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("add", args, tool_call_id=f"c{i}") for i, args in enumerate(CALLS)])
        return ModelResponse(parts=[TextPart("all done")])

    agent = Agent(FunctionModel(script), tools=as_pydantic_ai_tools(reg), retries=3)
    result = agent.run_sync("add things")
    assert result.output == "all done"
    parts = {
        p.tool_call_id: p
        for m in result.all_messages()
        for p in getattr(m, "parts", [])
        if isinstance(p, (ToolReturnPart, RetryPromptPart))
    }
    assert parts["c0"].content == 5 and getattr(parts["c0"], "outcome", "success") == "success"

    def retried(part: Any) -> bool:  # older releases send a RetryPromptPart, newer a ToolReturnPart marked "retried"
        return isinstance(part, RetryPromptPart) or getattr(part, "outcome", None) == "retried"

    assert retried(parts["c1"]) and "$.a: expected number" in str(parts["c1"].content)
    assert retried(parts["c3"]) and "rate limited" in str(parts["c3"].content)
    assert reg.call_count("add") == 4
