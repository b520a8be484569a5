"""OpenAI Agents SDK: harness approval through the SDK's ``needs_approval`` and run interruptions.

A real ``Runner.run`` loop driven by a scripted ``Model``: the harness rule decides which calls
interrupt the run; an approved call (``state.approve``) runs once through the harness policies
(a rate limit still applies); a rejected one (``state.reject``) never reaches the tool and the
model reads the rejection.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, ToolApprovalItem
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tool_context import ToolContext
from agents.usage import Usage
from approval_support import Bank
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from harness_one import ToolRegistry, define_tool
from harness_one.integrations.openai_agents import to_openai_agents

CONFIG = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """One ``transfer`` call per turn from the script, then text; records what each turn was sent."""

    def __init__(self, calls: list[tuple[str, dict[str, Any] | str]]) -> None:
        self.calls = list(calls)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        if self.calls:
            call_id, arguments = self.calls.pop(0)
            output: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=call_id,
                    name="transfer",
                    arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
                    id=f"fc-{call_id}",
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


@pytest.fixture
def bank() -> Bank:
    """``transfer`` needs approval above 100 and runs once per user (per 1,000 s, manual clock)."""
    return Bank(per=1000)


@dataclass
class User:
    name: str


def outputs(model: ScriptedModel) -> dict[str, str]:
    return {
        item["call_id"]: item["output"]
        for item in model.inputs[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def agent_for(bank: Bank, model: ScriptedModel) -> Agent[User]:
    tool = to_openai_agents("transfer", bank.registry, context=lambda ctx: {"user": ctx.context.name})
    return Agent(name="bank", instructions="pay", model=model, tools=[tool])


def only(items: list[Any]) -> ToolApprovalItem:
    [item] = items
    assert isinstance(item, ToolApprovalItem)
    return item


def test_approve_resumes_and_the_call_runs_once_through_the_policies(bank: Bank) -> None:
    model = ScriptedModel([("c1", {"to": "ann", "amount": 500}), ("c2", {"to": "bob", "amount": 900})])
    agent = agent_for(bank, model)

    async def scenario() -> Any:
        result = await Runner.run(agent, "pay", context=User("alice"), run_config=CONFIG)
        pending = only(result.interruptions)  # the harness rule said yes: the run stopped before the tool ran
        assert (pending.tool_name, pending.call_id, json.loads(pending.arguments or "")) == (
            "transfer",
            "c1",
            {"to": "ann", "amount": 500},
        )
        assert bank.sent == [] and result.final_output is None
        state = result.to_state()
        state.approve(pending)
        result = await Runner.run(agent, state, run_config=CONFIG)
        assert bank.sent == [("c1", "ann", 500, "alice")]  # ran once, with the run's context
        second = only(result.interruptions)  # the next large transfer asks again: an approval is per call
        assert second.call_id == "c2"
        state = result.to_state()
        state.approve(second)
        return await Runner.run(agent, state, run_config=CONFIG)

    result = asyncio.run(scenario())
    assert result.final_output == "done"
    answers = outputs(model)
    assert answers["c1"] == "sent 500 to ann"
    assert answers["c2"].startswith("Error: Tool 'transfer' is rate limited. Retry after")  # approved, still limited
    assert bank.sent == [("c1", "ann", 500, "alice")]
    assert bank.registry.stats()["approval"] == {"pending": 0, "approved": 2, "denied": 0}


@pytest.mark.parametrize(
    ("message", "model_reads"),
    [
        ("Transfer to eve denied: unknown payee.", "Transfer to eve denied: unknown payee."),
        (None, "Tool execution was not approved."),
    ],
)
def test_reject_never_reaches_the_tool_and_the_model_reads_why(bank: Bank, message: str | None, model_reads: str) -> None:
    model = ScriptedModel([("c1", {"to": "eve", "amount": 5000})])
    agent = agent_for(bank, model)

    async def scenario() -> Any:
        result = await Runner.run(agent, "pay", context=User("alice"), run_config=CONFIG)
        state = result.to_state()
        state.reject(only(result.interruptions), rejection_message=message)
        return await Runner.run(agent, state, run_config=CONFIG)

    result = asyncio.run(scenario())
    assert result.final_output == "done" and result.interruptions == []
    assert outputs(model) == {"c1": model_reads}
    assert bank.sent == []
    assert bank.registry.stats()["approval"] == {"pending": 0, "approved": 0, "denied": 0}


def test_calls_the_rule_lets_through_do_not_interrupt(bank: Bank) -> None:
    model = ScriptedModel([("s1", {"to": "ann", "amount": 20})])
    result = asyncio.run(Runner.run(agent_for(bank, model), "pay", context=User("bob"), run_config=CONFIG))
    assert result.interruptions == [] and result.final_output == "done"
    assert outputs(model) == {"s1": "sent 20 to ann"} and bank.sent == [("s1", "ann", 20, "bob")]


def test_the_rule_sees_the_context_function(bank: Bank) -> None:
    seen: list[ToolContext[Any]] = []

    def context(ctx: ToolContext[User]) -> dict[str, Any]:
        seen.append(ctx)
        return {"user": ctx.context.name}

    tool = to_openai_agents("transfer", bank.registry, context=context)
    assert callable(tool.needs_approval)
    model = ScriptedModel([("k1", {"to": "ann", "amount": 500})])
    agent = Agent(name="bank", instructions="pay", model=model, tools=[tool])
    result = asyncio.run(Runner.run(agent, "pay", context=User("carol"), run_config=CONFIG))
    assert only(result.interruptions).call_id == "k1"
    assert [(c.tool_name, c.tool_call_id, c.context.name) for c in seen] == [("transfer", "k1", "carol")]


def test_a_context_function_the_rules_tool_context_cannot_serve_asks_a_person(bank: Bank) -> None:
    """The SDK's approval check has no agent, run config or tool call to give: a function reading ``ctx.agent``
    fails there. A person is asked (the harness holding the call with no one asked was the answer before); the
    approved call builds its context from its own full ``ToolContext``."""
    agents: list[Any] = []

    def context(ctx: ToolContext[User]) -> dict[str, Any]:
        agents.append(ctx.agent)
        return {"user": f"{ctx.context.name}@{ctx.agent.name}"}

    model = ScriptedModel([("a1", {"to": "ann", "amount": 500})])
    agent = Agent(
        name="bank", instructions="pay", model=model, tools=[to_openai_agents("transfer", bank.registry, context=context)]
    )

    async def scenario() -> Any:
        result = await Runner.run(agent, "pay", context=User("dave"), run_config=CONFIG)
        pending = only(result.interruptions)
        assert pending.call_id == "a1" and bank.sent == []
        state = result.to_state()
        state.approve(pending)
        return await Runner.run(agent, state, run_config=CONFIG)

    result = asyncio.run(scenario())
    assert result.final_output == "done" and outputs(model) == {"a1": "sent 500 to ann"}
    assert bank.sent == [("a1", "ann", 500, "dave@bank")]
    assert agents[0] is None and agents[-1] is agent  # the rule's context, then the call's own


def test_tools_without_a_rule_keep_needs_approval_off() -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def echo(text: str) -> str:
        """Echo."""
        return text

    @define_tool(registry=registry, options={"requires_approval": True})
    def wipe(path: str) -> str:
        """Wipe."""
        return path

    assert to_openai_agents(echo, registry).needs_approval is False  # malformed JSON still gets the harness's error
    assert callable(to_openai_agents(wipe, registry).needs_approval)
    assert to_openai_agents(wipe, ToolRegistry(standard_plugins=False, autoload=False)).needs_approval is False


def test_a_saved_run_state_is_approved_later(bank: Bank) -> None:
    # The person may decide much later: the interrupted run is saved as a string and restored.
    model = ScriptedModel([("c1", {"to": "ann", "amount": 500})])

    async def interrupt() -> str:
        result = await Runner.run(agent_for(bank, model), "pay", context=User("alice"), run_config=CONFIG)
        return result.to_state().to_string(context_serializer=lambda user: {"name": user.name})

    saved = asyncio.run(interrupt())
    assert bank.sent == []

    async def decide() -> Any:
        agent = agent_for(bank, model)  # a new agent, as another process would build it
        state = await RunState.from_string(agent, saved, context_deserializer=lambda data: User(data["name"]))
        state.approve(only(state.get_interruptions()))
        return await Runner.run(agent, state, run_config=CONFIG)

    result = asyncio.run(decide())
    assert result.final_output == "done" and outputs(model) == {"c1": "sent 500 to ann"}
    assert bank.sent == [("c1", "ann", 500, "alice")]


def test_arguments_the_harness_refuses_do_not_ask_a_person(bank: Bank) -> None:
    model = ScriptedModel([("c1", {"to": "ann"})])  # no amount: refused before the rule, not put to a person
    result = asyncio.run(Runner.run(agent_for(bank, model), "pay", context=User("alice"), run_config=CONFIG))
    assert result.interruptions == [] and result.final_output == "done" and bank.sent == []
    assert outputs(model)["c1"].startswith("Error: Invalid arguments") and "$.amount" in outputs(model)["c1"]


def test_arguments_that_are_not_json_ask_as_the_sdk_does(bank: Bank) -> None:
    model = ScriptedModel([("c1", '{"to": "ann", "amount": ')])  # the SDK cannot read them, so it asks

    async def scenario() -> Any:
        result = await Runner.run(agent_for(bank, model), "pay", context=User("alice"), run_config=CONFIG)
        state = result.to_state()
        state.approve(only(result.interruptions))
        return await Runner.run(agent_for(bank, model), state, run_config=CONFIG)

    result = asyncio.run(scenario())
    assert result.final_output == "done" and bank.sent == []
    assert outputs(model)["c1"].startswith("Error: Invalid arguments")  # approved, then refused by the harness
