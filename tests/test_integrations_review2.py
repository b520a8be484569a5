"""Adapters, second review: per-run budgets through the frameworks' own run ids, AutoGen's schema
without ``$defs`` and its masked ``ToolCallEvent``, schemas handed over as copies,
``from_langchain`` of tools that handle their own errors or run only async, the Agents SDK's
``strict="auto"``, and sync dispatch with an event loop running in the caller's thread.

Each runs the real framework with its own offline fake model, as the other integration tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

import pytest
from agent_framework import Agent as AFAgent
from agents import Agent, RunConfig, Runner
from autogen_agentchat.agents import AssistantAgent
from autogen_core import EVENT_LOGGER_NAME, FunctionCall
from autogen_core.logging import ToolCallEvent
from autogen_core.models import CreateResult, RequestUsage
from autogen_ext.models.anthropic._anthropic_client import convert_tools
from autogen_ext.models.replay import ReplayChatCompletionClient
from langchain.agents import create_agent
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel
from pydantic_ai import Agent as PAIAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from test_integration_agent_framework import ScriptedClient
from test_integration_autogen import MODEL_INFO
from test_integration_langchain import script
from test_integration_openai_agents import ScriptedModel

from harness_one import Call, ToolRegistry, define_tool
from harness_one.dispatch import dispatch_openai
from harness_one.integrations.agent_framework import to_agent_framework
from harness_one.integrations.autogen import to_autogen
from harness_one.integrations.langchain import from_langchain, to_langchain
from harness_one.integrations.openai_agents import as_openai_agents_tools, to_openai_agents
from harness_one.integrations.pydantic_ai import to_pydantic_ai

CALLS = [{"a": i, "b": 1} for i in range(5)]


def budgeted() -> tuple[ToolRegistry, list[Any]]:
    """A registry whose ``add`` may run twice per run; ``ran`` holds the context of each call that ran."""
    registry = ToolRegistry(autoload=False)
    ran: list[Any] = []

    @define_tool(registry=registry, options={"max_calls": 2})
    def add(a: float, b: float, call: Call) -> float:
        """Add two numbers."""
        ran.append(dict(call.context))
        return a + b

    return registry, ran


# ----------------------------------------------------------------------- 1. budgets and run ids


def test_budget_warns_once_per_tool_and_counts_calls_without_run_id(caplog: pytest.LogCaptureFixture) -> None:
    registry, ran = budgeted()
    registry.add(lambda: 1, name="one", description="One.", options={"max_calls": 1})
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert registry.try_call("add", {"a": 1, "b": 2}).ok
        assert registry.try_call("one", {}).ok
        assert registry.try_call("add", {"a": 1, "b": 2}, context={"run_id": "r1"}).ok
    warned = [r.getMessage() for r in caplog.records if "no run id" in r.getMessage()]
    assert len(warned) == 2 and "tool='add'" in warned[0] and "tool='one'" in warned[1]
    assert "context={'run_id': ...}" in warned[0]
    assert registry.stats()["budget"]["unscoped"] == 4 and len(ran) == 4


def _pydantic_ai_model() -> FunctionModel:
    queue = [ToolCallPart("add", args, tool_call_id=f"c{i}") for i, args in enumerate(CALLS)]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[queue.pop(0)] if queue else [TextPart("done")])

    return FunctionModel(respond)


def test_pydantic_ai_run_id_scopes_the_budget() -> None:
    registry, ran = budgeted()
    tool = to_pydantic_ai("add", registry)
    PAIAgent(_pydantic_ai_model(), tools=[tool]).run_sync("go", run_id="run-1")
    assert ran == [{"run_id": "run-1"}] * 2  # two ran, three refused
    PAIAgent(_pydantic_ai_model(), tools=[tool]).run_sync("go")  # a fresh run id: its own budget
    assert len(ran) == 4 and ran[2] == ran[3] and ran[2]["run_id"] != "run-1"
    assert registry.plugins.get("budget").refused == 6
    # a context= given is the context: no run id added
    PAIAgent(_pydantic_ai_model(), tools=[to_pydantic_ai("add", registry, context={"user": "u"})]).run_sync("go")
    assert ran[4:] == [{"user": "u"}] * 5


def test_langgraph_run_id_or_thread_id_scopes_the_budget() -> None:
    registry, ran = budgeted()
    tools = [to_langchain("add", registry)]
    run_id = uuid.uuid4()
    create_agent(script("u", CALLS), tools).invoke({"messages": [("user", "go")]}, {"run_id": run_id})
    assert ran == [{"run_id": str(run_id)}] * 2
    agent = create_agent(script("u", CALLS), tools, checkpointer=InMemorySaver())
    agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "t-1"}})
    assert ran[2:] == [{"run_id": "t-1"}] * 2
    create_agent(script("u", CALLS), tools).invoke({"messages": [("user", "go")]})  # neither: not counted
    assert ran[4:] == [{}] * 5 and registry.stats()["budget"]["unscoped"] == 5


def test_agent_framework_session_scopes_the_budget() -> None:
    registry, ran = budgeted()
    agent = AFAgent(ScriptedClient([(f"c{i}", a) for i, a in enumerate(CALLS)]), tools=[to_agent_framework("add", registry)])
    session = agent.create_session()
    asyncio.run(agent.run("go", session=session))
    assert ran == [{"run_id": session.session_id}] * 2


def test_openai_agents_has_no_run_id_calls_are_unscoped() -> None:
    registry, ran = budgeted()
    agent = Agent(
        name="a", model=ScriptedModel([(f"c{i}", a) for i, a in enumerate(CALLS)]), tools=[to_openai_agents("add", registry)]
    )
    asyncio.run(Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))
    assert len(ran) == 5 and registry.stats()["budget"]["unscoped"] == 5
    # the documented way: a run id through context=
    agent = Agent(
        name="a",
        model=ScriptedModel([(f"c{i}", a) for i, a in enumerate(CALLS)]),
        tools=[to_openai_agents("add", registry, context=lambda ctx: {"run_id": ctx.context["run"]})],
    )
    asyncio.run(Runner.run(agent, "go", context={"run": "r1"}, run_config=RunConfig(tracing_disabled=True)))
    assert ran[5:] == [{"run_id": "r1"}] * 2


# ----------------------------------------------------------------------- 2. AutoGen schema, 4. its ToolCallEvent


class Item(BaseModel):
    sku: str
    qty: int


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_autogen_schema_inlines_refs_for_anthropic() -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def order(items: list[Item]) -> str:
        """Order items."""
        return "ok"

    @define_tool(registry=registry)
    def tree(root: Node) -> str:
        """A tree."""
        return "ok"

    sent = convert_tools([to_autogen("order", registry)])[0]["input_schema"]
    assert "$ref" not in json.dumps(sent)
    assert sent["properties"]["items"]["items"]["properties"]["sku"] == {"title": "Sku", "type": "string"}
    recursive = to_autogen("tree", registry).schema["parameters"]
    assert recursive == registry.get("tree").parameters and "$defs" in recursive  # cannot be inlined: as it is
    recursive["properties"]["root"]["description"] = "changed"  # a copy
    assert "description" not in registry.get("tree").parameters["properties"]["root"]


def test_autogen_tool_call_event_is_masked(caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def login(user: str, password: str) -> str:
        """Log in."""
        return "token=tok_live_abcdef123456"

    call = FunctionCall(id="c1", name="login", arguments=json.dumps({"user": "bob", "password": "hunter2-secret"}))
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    client = ReplayChatCompletionClient(
        [CreateResult(finish_reason="function_calls", content=[call], usage=usage, cached=False), "done"], model_info=MODEL_INFO
    )
    with caplog.at_level(logging.INFO, logger=EVENT_LOGGER_NAME):
        asyncio.run(AssistantAgent("a", model_client=client, tools=[to_autogen("login", registry)]).run(task="go"))
    events = [r.msg for r in caplog.records if isinstance(r.msg, ToolCallEvent)]
    assert len(events) == 1
    text = str(events[0])
    assert "hunter2" not in text and "tok_live" not in text
    assert json.loads(text)["arguments"] == {"user": "bob", "password": "[REDACTED]"}


# ----------------------------------------------------------------------- 5. schemas as copies


@pytest.mark.parametrize(
    ("adapt", "schema"),
    [
        (to_openai_agents, lambda t: t.params_json_schema),
        (to_langchain, lambda t: t.args_schema),
        (to_pydantic_ai, lambda t: t.tool_def.parameters_json_schema),
        (to_agent_framework, lambda t: t.parameters()),
        (to_autogen, lambda t: t.schema["parameters"]),
    ],
    ids=["openai_agents", "langchain", "pydantic_ai", "agent_framework", "autogen"],
)
def test_adapted_schema_is_a_copy(adapt: Any, schema: Any) -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def add(a: float, b: float) -> float:
        """Add."""
        return a + b

    before = json.dumps(registry.get("add").parameters)
    adapted = schema(adapt("add", registry))
    adapted["properties"]["a"]["description"] = "changed by the app"
    adapted["properties"]["b"]["type"] = "string"
    assert json.dumps(registry.get("add").parameters) == before
    assert registry.export("openai").tools[0]["function"]["parameters"]["properties"]["b"] == {"type": "number"}


# ----------------------------------------------------------------------- 6., 7. from_langchain


def test_from_langchain_tool_handling_its_errors_fails_in_the_harness() -> None:
    registry = ToolRegistry(autoload=False)
    attempts: list[int] = []

    def flaky(x: int) -> str:
        """Flaky."""
        attempts.append(x)
        raise ToolException("backend down")

    original = StructuredTool.from_function(flaky, handle_tool_error=True, handle_validation_error=True)
    from_langchain(original, registry=registry, retry={"attempts": 3, "rerun_non_idempotent": True, "on": [ToolException]})
    result = registry.try_call("flaky", {"x": 1})
    assert not result.ok and result.error is not None and result.error.kind == "tool_failed"
    assert "backend down" in result.error.message and len(attempts) == 3  # retried
    assert original.handle_tool_error is True and original.handle_validation_error is True  # the caller's tool untouched


class AsyncOnly(BaseTool):
    name: str = "async_only"
    description: str = "Only async."

    def _run(self, q: str) -> str:
        raise NotImplementedError("use ainvoke")

    async def _arun(self, q: str) -> str:
        return f"async {q}"


def test_from_langchain_tool_class_with_only_arun_is_async() -> None:
    registry = ToolRegistry(autoload=False)
    built = from_langchain(AsyncOnly(), registry=registry)
    assert built.is_async
    assert asyncio.run(registry.atry_call("async_only", {"q": "hi"})).value == "async hi"
    assert registry.call("async_only", {"q": "there"}) == "async there"  # a sync call runs it in its own loop


# ----------------------------------------------------------------------- 8. Agents SDK strict="auto"


def test_openai_agents_strict_auto_is_per_tool() -> None:
    registry = ToolRegistry(autoload=False)

    @registry.add
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @registry.add
    def count_labels(labels: dict[str, int]) -> int:
        """Count."""
        return len(labels)

    tools = as_openai_agents_tools(None, registry, strict="auto")
    assert [(t.name, t.strict_json_schema) for t in tools] == [("add", True), ("count_labels", False)]
    assert tools[0].params_json_schema["additionalProperties"] is False
    exported = {t["function"]["name"]: t["function"].get("strict", False) for t in registry.export("openai", strict="auto").tools}
    assert exported == {t.name: t.strict_json_schema for t in tools}
    for wrong in ("yes", 1, None):
        with pytest.raises(ValueError, match="strict must be True, False or 'auto'"):
            as_openai_agents_tools(None, registry, strict=wrong)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="strict must be True, False or 'auto'"):
            to_openai_agents("add", registry, strict=wrong)  # type: ignore[arg-type]


# ----------------------------------------------------------------------- 3. sync dispatch inside a running loop


def test_sync_dispatch_with_a_running_loop_answers_one_call_as_several() -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    async def fetch(n: int) -> int:
        """Fetch."""
        await asyncio.sleep(0)
        return n

    def call(i: int) -> dict[str, Any]:
        return {"id": f"c{i}", "type": "function", "function": {"name": "fetch", "arguments": json.dumps({"n": i})}}

    async def handler() -> list[list[str]]:
        return [
            [m["content"] for m in dispatch_openai(registry, [call(1)])],
            [m["content"] for m in dispatch_openai(registry, [call(1), call(2)])],
            [m["content"] for m in dispatch_openai(registry, [call(1), call(2)], concurrency=1)],
            [m["content"] for m in dispatch_openai(registry, [])],
        ]

    assert asyncio.run(handler()) == [["1"], ["1", "2"], ["1", "2"], []]
    assert [m["content"] for m in dispatch_openai(registry, [call(3)])] == ["3"]  # no loop: in this thread
