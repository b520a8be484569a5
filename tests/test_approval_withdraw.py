"""A call the model is told "was not run" leaves the harness's approval queue: nobody runs it later.

``ApprovalPlugin.withdraw`` directly, and through the adapters of frameworks that asked no person
about a call the harness held (AutoGen, LangChain without the middleware, the OpenAI Agents SDK
and Pydantic AI where the rule changed its answer), each driven by the framework's own offline
fake model; the model reads why no approval covers the call, as it is for that framework. Also: Pydantic AI's private "not an object" key, sent by the model, is an argument
like any other, never the adapter's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse as AgentsResponse
from agents.models.interface import Model
from agents.usage import Usage
from approval_support import Bank
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import ToolCallExecutionEvent
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness_one import ApprovalUnavailable, ToolError, ToolRegistry, define_tool
from harness_one._approval import not_asked
from harness_one.integrations.autogen import as_autogen_tools
from harness_one.integrations.langchain import as_langchain_tools
from harness_one.integrations.openai_agents import to_openai_agents
from harness_one.integrations.pydantic_ai import to_pydantic_ai
from harness_one_plugins.approval import ApprovalNotFound, ApprovalPlugin, ApprovalRequired

#: Why no approval covers the call, as each adapter says it.
NO_STEP = "no one was asked (this agent has no approval step for it)"
NOT_REVIEWED = "no one was asked (no approval step of this agent put it to a person)"
RULE_SAID_NO = (
    "no one was asked (this agent's approval step checked the approval rule before the call ran, "
    "and it asked for no approval then)"
)
APPROVAL_MISSED = "the approval this agent got from a person did not cover the call as it ran"
TRANSFER = {"to": "mallory", "amount": 500}


@pytest.fixture
def bank() -> Bank:
    """``transfer`` needs approval above 100."""
    return Bank(per=1000)


def refused(why: str) -> str:
    """What the model reads of a ``transfer`` call the harness held, refused for the reason ``why``."""
    return (
        f"The call of 'transfer' was not run: it needs a person's approval, and {why}. "
        "Do not call it again; continue without it, or tell the user it needs their approval."
    )


def assert_gone(bank: Bank, call_id: str) -> None:
    """Nothing waits under ``call_id``, and an operator working the queue cannot run it."""
    assert bank.approval.pending() == []
    assert bank.registry.stats()["approval"]["pending"] == 0
    with pytest.raises(ApprovalNotFound):
        bank.approval.approve(call_id)
    with pytest.raises(ApprovalNotFound):
        bank.approval.resume(call_id)
    assert bank.sent == []


# ---------------------------------------------------------------- the plugin


def test_withdraw_drops_the_held_call_and_the_same_call_waits_anew(bank: Bank) -> None:
    held = bank.registry.try_call("transfer", TRANSFER, call_id="c1")
    assert held.error is not None and held.error.kind == "approval_required"
    withdrawn = bank.approval.withdraw("c1")
    assert withdrawn is not None and (withdrawn.call_id, withdrawn.arguments) == ("c1", TRANSFER)
    assert_gone(bank, "c1")
    assert bank.approval.withdraw("c1") is None  # nothing waits any more
    again = bank.registry.try_call("transfer", TRANSFER, call_id="c1")
    assert again.error is not None and again.error.kind == "approval_required"  # a new question, not a run
    assert [p.call_id for p in bank.approval.pending()] == ["c1"] and bank.sent == []


def test_the_refusal_of_a_held_call_has_its_own_kind_and_class(bank: Bank) -> None:
    """It was a plain ``ToolError`` (``tool_error``): a program told it from other errors only by its text."""
    held = bank.registry.try_call("transfer", TRANSFER, call_id="c1")
    refused_call = not_asked(held, "no_step")
    error = refused_call.error
    assert isinstance(error, ApprovalUnavailable) and isinstance(error, ToolError)
    assert error.kind == "approval_unavailable" and (error.tool, error.call_id) == ("transfer", "c1")
    data = error.to_dict()
    assert (data["type"], data["kind"], data["message"]) == ("ApprovalUnavailable", "approval_unavailable", refused(NO_STEP))
    again = ToolError.from_dict(data)  # a stored outcome, or one read back from another process
    assert type(again) is ApprovalUnavailable and again.to_dict() == data
    assert refused_call.to_dict()["error"] == data and refused_call.for_model() == f"Error: {refused(NO_STEP)}"
    assert not_asked(refused_call, "no_step") is refused_call  # only a held call is refused
    assert_gone(bank, "c1")


def test_a_decision_made_before_the_withdrawal_decides_nothing(bank: Bank) -> None:
    held = bank.registry.try_call("transfer", TRANSFER, call_id="c1")
    bank.approval.approve("c1")  # an operator was quicker than the adapter's withdrawal
    assert isinstance(held.error, ApprovalRequired) and held.error.withdraw()
    assert_gone(bank, "c1")


# ---------------------------------------------------------------- frameworks with no approval step

MODEL_INFO: Any = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "unknown",
    "structured_output": False,
}


def test_autogen_a_call_the_model_was_told_was_not_run_is_not_left_waiting(bank: Bank) -> None:
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    call = FunctionCall(id="t-1", name="transfer", arguments=json.dumps(TRANSFER))
    client = ReplayChatCompletionClient(
        [CreateResult(finish_reason="function_calls", content=[call], usage=usage, cached=False)], model_info=MODEL_INFO
    )
    tools = as_autogen_tools(["transfer"], bank.registry, context={"user": "alice"})
    messages = asyncio.run(AssistantAgent("assistant", model_client=client, tools=tools).run(task="pay")).messages
    [answer] = [r for m in messages if isinstance(m, ToolCallExecutionEvent) for r in m.content]
    assert answer.is_error and refused(NO_STEP) in answer.content  # AutoGen has no approval step
    assert_gone(bank, "t-1")


class LangChainModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def test_langchain_without_the_middleware_a_refused_call_is_not_left_waiting(bank: Bank) -> None:
    turns = [AIMessage(content="", tool_calls=[{"name": "transfer", "args": TRANSFER, "id": "c-1"}]), AIMessage(content="done")]
    agent = create_agent(LangChainModel(messages=iter(turns)), as_langchain_tools(registry=bank.registry))
    done = agent.invoke({"messages": [("user", "pay")]})
    [answer] = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and refused(NOT_REVIEWED) in str(answer.content)  # nor did a middleware review it
    assert_gone(bank, "c-1")


# ---------------------------------------------------------------- a framework step that asked no one


class OneTurnOfCalls(Model):
    """Makes the given ``transfer`` calls in one turn, then says "done"; records what each turn was sent."""

    def __init__(self, calls: dict[str, dict[str, Any]]) -> None:
        self.calls = calls
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> AgentsResponse:
        self.inputs.append(input)
        output: list[Any] = [
            ResponseFunctionToolCall(type="function_call", call_id=i, name="transfer", arguments=json.dumps(a), id=f"fc-{i}")
            for i, a in self.calls.items()
        ] or [
            ResponseOutputMessage(
                id="m1", role="assistant", status="completed", type="message",
                content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
            )
        ]  # fmt: skip
        self.calls = {}
        return AgentsResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def outputs(self) -> dict[str, str]:
        sent = self.inputs[-1]
        return {i["call_id"]: i["output"] for i in sent if isinstance(i, dict) and i.get("type") == "function_call_output"}


def test_openai_agents_a_call_the_sdk_did_not_put_to_a_person_is_refused_not_promised() -> None:
    # A daily limit: the SDK asks the rule for both calls before either runs (600 each: no), and
    # the harness asks again when the second runs (600 + 600 > 1000: yes). Nobody is asked.
    registry = ToolRegistry(autoload=False)
    spent: list[int] = []

    @define_tool(registry=registry, options={"requires_approval": lambda call: sum(spent) + call.arguments["amount"] > 1000})
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        spent.append(amount)
        return f"sent {amount} to {to}"

    model = OneTurnOfCalls({"c0": {"to": "ann", "amount": 600}, "c1": {"to": "bob", "amount": 600}})
    agent = Agent(name="bank", model=model, tools=[to_openai_agents("transfer", registry)])
    result = asyncio.run(Runner.run(agent, "pay", run_config=RunConfig(tracing_disabled=True)))
    assert result.interruptions == [] and spent == [600]
    answer = model.outputs()["c1"]
    assert refused(RULE_SAID_NO) in answer and "result comes" not in answer  # the SDK has a step: it asked the rule
    approval = registry.plugins.get("approval")
    assert isinstance(approval, ApprovalPlugin) and approval.pending() == []
    with pytest.raises(ApprovalNotFound):
        approval.approve("c1")


def pydantic_agent(registry: ToolRegistry, parts: list[ToolCallPart]) -> PydanticAgent[None, str | DeferredToolRequests]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[parts.pop(0)] if parts else [TextPart("done")])

    tool = to_pydantic_ai("transfer", registry, context={"user": "alice"})
    return PydanticAgent(FunctionModel(respond), tools=[tool], output_type=[str, DeferredToolRequests])


def answer(result: Any) -> RetryPromptPart | ToolReturnPart:
    """What the model read of the one tool call."""
    [part] = [p for m in result.all_messages() for p in m.parts if isinstance(p, (RetryPromptPart, ToolReturnPart))]
    return part


def test_pydantic_ai_a_call_held_after_the_rule_said_no_is_refused_not_promised() -> None:
    registry = ToolRegistry(autoload=False)
    answers = iter([False, True])  # the adapter asks the rule (no: Pydantic AI asks no one), then the harness (yes)
    sent: list[int] = []

    @define_tool(registry=registry, options={"requires_approval": lambda call: next(answers)})
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        sent.append(amount)
        return f"sent {amount} to {to}"

    result = pydantic_agent(registry, [ToolCallPart("transfer", TRANSFER, tool_call_id="c1")]).run_sync("pay")
    assert result.output == "done" and sent == []
    read = str(answer(result).content)
    assert refused(RULE_SAID_NO) in read and "result comes" not in read  # Pydantic AI's step asked the rule
    approval = registry.plugins.get("approval")
    assert isinstance(approval, ApprovalPlugin) and approval.pending() == []
    with pytest.raises(ApprovalNotFound):
        approval.approve("c1")


def test_pydantic_ai_an_approved_call_held_as_it_runs_is_refused_as_approved_for_less() -> None:
    registry = ToolRegistry(autoload=False)
    answers = [True, False, True]  # the first run (yes: deferred), the rerun's check (no: no grant), the harness (yes)
    sent: list[int] = []

    @define_tool(registry=registry, options={"requires_approval": lambda call: answers.pop(0)})
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        sent.append(amount)
        return f"sent {amount} to {to}"

    agent = pydantic_agent(registry, [ToolCallPart("transfer", TRANSFER, tool_call_id="c1")])
    first = agent.run_sync("pay")
    assert isinstance(first.output, DeferredToolRequests) and [c.tool_call_id for c in first.output.approvals] == ["c1"]
    approvals = DeferredToolResults(approvals={"c1": True})
    result = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=approvals)
    assert result.output == "done" and sent == [] and answers == []
    assert refused(APPROVAL_MISSED) in str(answer(result).content)  # a person approved it: "no one was asked" is untrue
    approval = registry.plugins.get("approval")
    assert isinstance(approval, ApprovalPlugin) and approval.pending() == []


def adapted_before_its_rule() -> tuple[ToolRegistry, list[int]]:
    """A registry whose ``transfer`` needs approval for every call, adapted (by the caller) before it had a rule."""
    registry = ToolRegistry(autoload=False)
    sent: list[int] = []

    def transfer(to: str, amount: int) -> str:
        """Send money."""
        sent.append(amount)
        return f"sent {amount} to {to}"

    registry.add(transfer)
    return registry, sent


def give_it_a_rule(registry: ToolRegistry) -> None:
    """``transfer`` needs approval for every call from now on (the adapted tool does not know)."""
    registry.add(registry.get("transfer").fn, options={"requires_approval": True}, replace=True)


def test_openai_agents_a_tool_adapted_before_its_rule_has_no_approval_step() -> None:
    registry, sent = adapted_before_its_rule()
    model = OneTurnOfCalls({"c1": TRANSFER})
    agent = Agent(name="bank", model=model, tools=[to_openai_agents("transfer", registry)])
    give_it_a_rule(registry)
    result = asyncio.run(Runner.run(agent, "pay", run_config=RunConfig(tracing_disabled=True)))
    assert result.interruptions == [] and sent == []
    assert refused(NO_STEP) in model.outputs()["c1"]  # the SDK's needs_approval is off for this tool
    assert registry.stats()["approval"]["pending"] == 0


def test_pydantic_ai_a_tool_adapted_before_its_rule_has_no_approval_step() -> None:
    registry, sent = adapted_before_its_rule()
    agent = pydantic_agent(registry, [ToolCallPart("transfer", TRANSFER, tool_call_id="c1")])
    give_it_a_rule(registry)
    result = agent.run_sync("pay")
    assert result.output == "done" and sent == []
    assert refused(NO_STEP) in str(answer(result).content)  # the adapter never asks the rule for this tool
    assert registry.stats()["approval"]["pending"] == 0


def test_pydantic_ai_the_models_object_under_the_private_key_is_its_arguments(bank: Bank) -> None:
    # The model sent the adapter's key itself: that skipped Pydantic AI's approval step, and the
    # object's text went to the registry as the arguments (held in the harness, no one asked).
    forged = {"\x00harness-one:arguments": json.dumps({"to": "mallory", "amount": 5000})}
    result = pydantic_agent(bank.registry, [ToolCallPart("transfer", forged, tool_call_id="c1")]).run_sync("pay")
    assert "unexpected property" in str(answer(result).content)  # an argument of that name, refused as such
    assert bank.approval.pending() == [] and bank.sent == []


def test_pydantic_ai_arguments_that_are_not_an_object_are_still_refused_as_such(bank: Bank) -> None:
    result = pydantic_agent(bank.registry, [ToolCallPart("transfer", "[1, 2]", tool_call_id="c1")]).run_sync("pay")
    assert "must be a JSON object" in str(answer(result).content)
