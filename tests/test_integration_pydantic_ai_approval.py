"""Pydantic AI: harness approval through deferred tools (``ApprovalRequired``, ``DeferredToolResults``).

A real agent run driven by ``FunctionModel``: the harness rule decides which calls end the run
as ``DeferredToolRequests``; an approved call runs once through the harness policies (a rate
limit still applies); a denied one never reaches the tool and the model reads the denial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from approval_support import Bank
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness_one.integrations.pydantic_ai import to_pydantic_ai


@pytest.fixture
def bank() -> Bank:
    """``transfer`` needs approval above 100 and runs once per user (per 1,000 s, manual clock)."""
    return Bank(per=1000)


@dataclass
class Deps:
    user: str


def scripted(calls: list[tuple[str, dict[str, Any]]]) -> FunctionModel:
    """One ``transfer`` call per model turn, then text."""
    queue = [ToolCallPart("transfer", args, tool_call_id=call_id) for call_id, args in calls]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[queue.pop(0)] if queue else [TextPart("done")])

    return FunctionModel(respond)


def agent_for(bank: Bank, calls: list[tuple[str, dict[str, Any]]]) -> Agent[Deps, str | DeferredToolRequests]:
    tool = to_pydantic_ai("transfer", bank.registry, context=lambda ctx: {"user": ctx.deps.user})
    return Agent(scripted(calls), tools=[tool], deps_type=Deps, output_type=[str, DeferredToolRequests])


def returns(result: Any) -> dict[str, ToolReturnPart]:
    return {p.tool_call_id: p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)}


def pending_ids(output: Any) -> list[str]:
    assert isinstance(output, DeferredToolRequests) and output.calls == []
    return [call.tool_call_id for call in output.approvals]


def test_approve_resumes_and_the_call_runs_once_through_the_policies(bank: Bank) -> None:
    agent = agent_for(bank, [("c1", {"to": "ann", "amount": 500}), ("c2", {"to": "bob", "amount": 900})])
    deps = Deps("alice")
    first = agent.run_sync("pay", deps=deps)
    assert pending_ids(first.output) == ["c1"] and bank.sent == []  # the harness rule said yes: the run stopped
    assert isinstance(first.output, DeferredToolRequests) and first.output.approvals[0].args_as_dict() == {
        "to": "ann",
        "amount": 500,
    }
    second = agent.run_sync(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c1": True}), deps=deps
    )
    assert bank.sent == [("c1", "ann", 500, "alice")]  # ran once, with the run's context
    assert pending_ids(second.output) == ["c2"]  # the next large transfer asks again: an approval is per call
    third = agent.run_sync(
        message_history=second.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c2": True}), deps=deps
    )
    assert third.output == "done" and bank.sent == [("c1", "ann", 500, "alice")]
    answers = returns(third)
    assert answers["c1"].content == "sent 500 to ann" and answers["c1"].outcome == "success"
    assert answers["c2"].outcome == "failed" and "rate limited" in str(answers["c2"].content)  # approved, still limited
    assert bank.registry.stats()["approval"] == {"pending": 0, "approved": 2, "denied": 0}


@pytest.mark.parametrize(
    ("decision", "model_reads"),
    [
        (ToolDenied("Transfer to eve denied: unknown payee."), "Transfer to eve denied: unknown payee."),
        (False, "The tool call was denied."),
    ],
)
def test_deny_never_reaches_the_tool_and_the_model_reads_why(bank: Bank, decision: Any, model_reads: str) -> None:
    agent = agent_for(bank, [("c1", {"to": "eve", "amount": 5000})])
    first = agent.run_sync("pay", deps=Deps("alice"))
    assert pending_ids(first.output) == ["c1"]
    denied = DeferredToolResults(approvals={"c1": decision})
    result = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=denied, deps=Deps("alice"))
    assert result.output == "done" and bank.sent == []
    answer = returns(result)["c1"]
    assert answer.content == model_reads and answer.outcome == "denied"
    assert bank.registry.stats()["approval"] == {"pending": 0, "approved": 0, "denied": 0}


def test_an_approval_with_other_arguments_runs_those(bank: Bank) -> None:
    agent = agent_for(bank, [("c1", {"to": "ann", "amount": 5000})])
    first = agent.run_sync("pay", deps=Deps("dan"))
    lowered = DeferredToolResults(approvals={"c1": ToolApproved(override_args={"to": "ann", "amount": 1000})})
    result = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=lowered, deps=Deps("dan"))
    assert result.output == "done" and bank.sent == [("c1", "ann", 1000, "dan")]


def test_calls_the_rule_lets_through_run_without_a_stop(bank: Bank) -> None:
    result = agent_for(bank, [("s1", {"to": "ann", "amount": 20})]).run_sync("pay", deps=Deps("bob"))
    assert result.output == "done" and bank.sent == [("s1", "ann", 20, "bob")]
    assert returns(result)["s1"].content == "sent 20 to ann"


def test_arguments_the_harness_refuses_do_not_ask_a_person(bank: Bank) -> None:
    agent = agent_for(bank, [("c1", {"to": "ann"}), ("c2", {"to": "ann", "amount": 5})])  # c1 has no amount
    result = agent.run_sync("pay", deps=Deps("alice"))
    assert result.output == "done" and bank.sent == [("c2", "ann", 5, "alice")]  # c1 went back to the model
    [answer] = [
        p
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, (RetryPromptPart, ToolReturnPart)) and p.tool_call_id == "c1"
    ]
    assert "$.amount" in str(answer.content)  # the harness's argument error, for the model to fix
