"""Adapters, review 36: the name a ``HarnessWorkbench`` ``tool_overrides`` entry shows is the one the model's
texts give the tool, and a tool without a description is described by its name in every adapter.

Each runs the real framework with its own offline fake model, as the other integration tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core import EVENT_LOGGER_NAME, FunctionCall
from autogen_core.logging import ToolCallEvent
from autogen_core.models import CreateResult, RequestUsage
from autogen_core.tools import ToolOverride, ToolResult
from autogen_ext.models.replay import ReplayChatCompletionClient
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic_ai import Agent as PAIAgent
from pydantic_ai.messages import ModelMessage, TextPart
from pydantic_ai.messages import ModelResponse as PAIResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from test_integration_autogen import MODEL_INFO, results

from harness_one import ToolRegistry, define_tool
from harness_one.integrations.agent_framework import to_agent_framework
from harness_one.integrations.autogen import HarnessWorkbench, to_autogen
from harness_one.integrations.langchain import to_langchain
from harness_one.integrations.openai_agents import to_openai_agents
from harness_one.integrations.pydantic_ai import to_pydantic_ai


def ping_registry() -> tuple[ToolRegistry, list[int]]:
    registry = ToolRegistry(autoload=False)
    ran: list[int] = []

    @define_tool(registry=registry)
    def ping(n: int) -> str:
        """Ping n times."""
        ran.append(n)
        return f"pong {n}"

    return registry, ran


def invalid(name: str) -> str:
    return (
        f"Invalid arguments for tool '{name}' (1 problem):\n- $.n: expected integer, got string \"x\"\n"
        f"Fix the arguments and call '{name}' again."
    )


# ---------------------------------------------------------------- HarnessWorkbench: a tool_overrides name


def test_the_agent_reads_the_tool_overrides_name_in_an_argument_error() -> None:
    # The model is shown only `ping2`; it read "call 'ping' again", a tool it does not have.
    registry, ran = ping_registry()
    workbench = HarnessWorkbench([to_autogen("ping", registry)], tool_overrides={"ping": ToolOverride(name="ping2")})
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    calls = [
        FunctionCall(id="c0", name="ping2", arguments='{"n": "x"}'),
        FunctionCall(id="c1", name="ping2", arguments='{"n": 2}'),
    ]
    client = ReplayChatCompletionClient(
        [CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False), "done"], model_info=MODEL_INFO
    )
    out = asyncio.run(AssistantAgent("a", model_client=client, workbench=workbench).run(task="go"))
    assert results(out.messages) == {"c0": (invalid("ping2"), True), "c1": ("pong 2", False)}
    assert ran == [2]


def test_call_tool_and_its_stream_name_the_tool_as_the_workbench_shows_it(caplog: Any) -> None:
    registry, ran = ping_registry()
    workbench = HarnessWorkbench(
        [to_autogen("ping", registry, name="pinger")], tool_overrides={"pinger": ToolOverride(name="ping2")}
    )
    plain = HarnessWorkbench([to_autogen("ping", registry, name="pinger")])

    async def streamed(bench: HarnessWorkbench, name: str, arguments: Any) -> ToolResult:
        events = [e async for e in bench.call_tool_stream(name, arguments)]
        assert isinstance(events[-1], ToolResult)
        return events[-1]

    async def go() -> list[tuple[str, str, bool]]:
        answers = [
            await workbench.call_tool("ping2", {"n": "x"}),
            await workbench.call_tool("pinger", {"n": "x"}),  # AutoGen also takes the tool's own name: still shown as ping2
            await asyncio.wait_for(streamed(workbench, "ping2", {"n": "x"}), 10),
            await workbench.call_tool("ping2"),  # no arguments: the registry's missing-argument error
            await plain.call_tool("pinger", {"n": "x"}),  # no override: the name= given to to_autogen
            await workbench.call_tool("ping2", {"n": 3}),
        ]
        return [(r.name, r.to_text(), r.is_error) for r in answers]

    with caplog.at_level(logging.INFO, logger=EVENT_LOGGER_NAME):
        answers = asyncio.run(go())
    assert answers[:3] == [
        ("ping2", invalid("ping2"), True),
        ("pinger", invalid("ping2"), True),
        ("ping2", invalid("ping2"), True),
    ]
    assert answers[3][1].startswith("Invalid arguments for tool 'ping2'") and "'ping'" not in answers[3][1]
    assert answers[4:] == [("pinger", invalid("pinger"), True), ("ping2", "pong 3", False)]
    assert ran == [3]
    logged = [r.msg for r in caplog.records if isinstance(r.msg, ToolCallEvent)]
    assert [json.loads(str(e)) for e in logged] == [
        {"type": "ToolCall", "tool_name": "pinger", "arguments": {"n": 3}, "result": "pong 3", "agent_id": None}
    ]


# ---------------------------------------------------------------- a tool without a description


def test_a_tool_without_a_description_is_described_by_its_name_in_every_adapter() -> None:
    # Pydantic AI and AutoGen's schema sent "", the other adapters (and AutoGen's own `description`) the name.
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def nodoc(a: int) -> int:
        return a

    tool = registry.get("nodoc")
    assert tool.description == ""
    assert registry.export("openai").tools[0]["function"]["description"] == ""  # the exports keep the registry's own

    seen: list[str | None] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> PAIResponse:
        seen.extend(t.description for t in info.function_tools)
        return PAIResponse(parts=[TextPart("done")])

    PAIAgent(FunctionModel(model), tools=[to_pydantic_ai(tool, registry)]).run_sync("go")
    autogen = to_autogen(tool, registry)
    shown = asyncio.run(HarnessWorkbench([autogen]).list_tools())
    described = {
        "langchain": convert_to_openai_tool(to_langchain(tool, registry))["function"].get("description"),
        "openai_agents": to_openai_agents(tool, registry).description,
        "pydantic_ai": to_pydantic_ai(tool, registry).tool_def.description,
        "pydantic_ai_model": seen[0],
        "agent_framework": to_agent_framework(tool, registry).to_json_schema_spec()["function"].get("description"),
        "autogen": autogen.description,
        "autogen_schema": autogen.schema.get("description"),
        "autogen_workbench": shown[0].get("description"),
    }
    assert described == dict.fromkeys(described, "nodoc")
