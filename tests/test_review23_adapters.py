"""Review 23 (framework adapters, approval plugin): a framework's approval runs only the call it was
given for (its context and registry too), each adapted call gets its own context (a plain dict), shown
names are checked when the tool is adapted, ``p: T = Field(...)`` is read as ``Annotated``, and
LangChain's loss of recursive schemas is logged."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from approval_support import Bank
from autogen_core import CancellationToken
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel, Field
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from test_integration_langchain_approval import CONFIG as LC_CONFIG
from test_integration_langchain_approval import ScriptedModel as LangChainModel
from test_integration_langchain_approval import UserContext
from test_integration_langchain_approval import tool_messages as lc_tool_messages
from test_integration_langchain_approval import transfer as lc_transfer
from test_integration_openai_agents_approval import ScriptedModel

from harness_one import ApprovalUnavailable, Call, ToolDefinitionError, ToolRegistry, define_tool
from harness_one.dispatch import dispatch
from harness_one.export import gemini_name
from harness_one.integrations import agent_framework, autogen, langchain, openai_agents, pydantic_ai
from harness_one.integrations._common import call_context
from harness_one.integrations.autogen import to_autogen
from harness_one.integrations.langchain import to_langchain
from harness_one.integrations.openai_agents import to_openai_agents
from harness_one.integrations.pydantic_ai import to_pydantic_ai
from harness_one_plugins.approval import ApprovalConflict, ApprovalPlugin

BIG = {"to": "ann", "amount": 500}

# ---------------------------------------------------------------- 1. a grant holds for its own call only


@dataclass
class Deps:
    user: str


def _pydantic_agent(
    bank: Bank, calls: list[tuple[str, dict[str, Any]]], context: Any = None
) -> PydanticAgent[Deps, str | DeferredToolRequests]:
    queue = [ToolCallPart("transfer", args, tool_call_id=call_id) for call_id, args in calls]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[queue.pop(0)] if queue else [TextPart("done")])

    tool = to_pydantic_ai("transfer", bank.registry, context=context or (lambda ctx: {"user": ctx.deps.user}))
    return PydanticAgent(FunctionModel(respond), tools=[tool], deps_type=Deps, output_type=[str, DeferredToolRequests])


def _alice_approves_c1_and_her_rate_limit_refuses_it(bank: Bank) -> None:
    agent = _pydantic_agent(bank, [("small", {"to": "x", "amount": 5}), ("c1", BIG)])
    first = agent.run_sync("pay", deps=Deps("alice"))
    [asked] = first.output.approvals
    assert asked.tool_call_id == "c1"
    second = agent.run_sync(
        message_history=first.all_messages(),
        deps=Deps("alice"),
        deferred_tool_results=DeferredToolResults(approvals={"c1": True}),
    )
    answered = {p.tool_call_id: p for m in second.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)}
    assert "rate limited" in str(answered["c1"].content)
    assert bank.sent == [("small", "x", 5, "alice")]


def test_a_framework_approval_does_not_run_another_users_call_under_its_id() -> None:
    bank = Bank(per=1000)
    _alice_approves_c1_and_her_rate_limit_refuses_it(bank)  # the grant is kept for her call made again

    bob = to_autogen("transfer", bank.registry, context={"user": "bob"})  # no approval step
    with pytest.raises(ApprovalUnavailable) as refused:
        asyncio.run(bob.run_json(BIG, CancellationToken(), call_id="c1"))
    assert "needs a person's approval, and no one was asked (this agent has no approval step for it)" in str(refused.value)
    assert bank.sent == [("small", "x", 5, "alice")]


def test_a_framework_approval_does_not_run_a_raw_loops_call_for_another_user() -> None:
    bank = Bank(per=1000)
    _alice_approves_c1_and_her_rate_limit_refuses_it(bank)
    # carol's call under the same id: held for a decision of its own, not run on alice's approval
    out = dispatch(
        bank.registry,
        [{"id": "c1", "type": "function", "function": {"name": "transfer", "arguments": json.dumps(BIG)}}],
        context={"user": "carol"},
    )
    assert [(held.call_id, held.tool) for held in out.pending] == [("c1", "transfer")] and list(out) == []
    assert bank.sent == [("small", "x", 5, "alice")]


def test_a_grant_holds_for_its_context_and_idempotency_key() -> None:
    bank = Bank(per=0.001)
    plugin, tool = bank.approval, bank.registry.get("transfer")
    assert plugin.grant(bank.registry, tool, BIG, call_id="g1", context={"user": "alice"}, idempotency_key="k1")

    bob = bank.registry.try_call("transfer", BIG, call_id="g1", context={"user": "bob"}, idempotency_key="k1")
    assert bob.error is not None and bob.error.kind == "approval_required"
    assert plugin.grant(bank.registry, tool, BIG, call_id="g3", context={"user": "alice"}, idempotency_key="k1")
    keyless = bank.registry.try_call("transfer", BIG, call_id="g3", context={"user": "alice"})
    assert keyless.error is not None and keyless.error.kind == "approval_required"
    assert bank.sent == []

    assert plugin.grant(bank.registry, tool, BIG, call_id="g2", context={"user": "alice"})
    ran = bank.registry.try_call("transfer", BIG, call_id="g2", context={"user": "alice"})
    assert ran.value == "sent 500 to ann" and bank.sent == [("g2", "ann", 500, "alice")]


# ---------------------------------------------------------------- 2. one plugin, two registries


def _two_registries(shared: ApprovalPlugin) -> tuple[ToolRegistry, ToolRegistry]:
    first = ToolRegistry(autoload=False, plugins={"approval": shared})
    second = ToolRegistry(autoload=False, plugins={"approval": shared})
    first.add(lambda: "r1 ran", name="x", options={"requires_approval": True})
    second.add(lambda: "r2 ran", name="x", options={"requires_approval": True})
    return first, second


def test_an_approval_in_one_registry_does_not_run_another_registrys_call() -> None:
    shared = ApprovalPlugin()
    first, second = _two_registries(shared)
    held = first.try_call("x", call_id="c1")
    assert held.error is not None and held.error.kind == "approval_required"
    shared.approve("c1")

    other = second.try_call("x", call_id="c1")
    assert isinstance(other.error, ApprovalConflict) and not other.ran
    assert "Another call of 'x' was already decided under call id c1" in other.error.message
    assert first.try_call("x", call_id="c1").value == "r1 ran"  # the approved call still runs


def test_a_grant_in_one_registry_does_not_run_another_registrys_call() -> None:
    shared = ApprovalPlugin()
    first, second = _two_registries(shared)
    assert shared.grant(first, first.get("x"), {}, call_id="g1")
    other = second.try_call("x", call_id="g1")
    assert other.error is not None and other.error.kind == "approval_required" and not other.ran
    shared.withdraw("g1")
    assert first.try_call("x", call_id="g1").value == "r1 ran"


# ---------------------------------------------------------------- 1. the OpenAI Agents SDK grants only held calls


def test_openai_agents_grants_only_a_call_the_harness_rule_holds() -> None:
    bank = Bank(per=0.000001)
    model = ScriptedModel([("c1", BIG), ("c2", {"to": "bob", "amount": 50})])  # c2: under the rule's 100
    tool = to_openai_agents("transfer", bank.registry, context=lambda ctx: {"user": ctx.context})
    agent = Agent(name="bank", instructions="pay", model=model, tools=[tool])
    config = RunConfig(tracing_disabled=True)

    async def run() -> None:
        first = await Runner.run(agent, "pay", context="alice", run_config=config)
        state = first.to_state()
        [item] = first.interruptions
        state.approve(item, always_approve=True)  # the SDK then reports every later call of the tool approved
        bank.registry.clock.advance(1)
        await Runner.run(agent, state, run_config=config)

    asyncio.run(run())
    assert bank.sent[0] == ("c1", "ann", 500, "alice")
    assert bank.approval.approved == 1  # c1's grant only: none made (and left behind) for c2


# ---------------------------------------------------------------- 3. `p: T = Field(...)`


def test_a_field_as_the_signature_default_is_read_as_annotated() -> None:
    reg = ToolRegistry(autoload=False)

    @define_tool(registry=reg)
    def search(q: str = Field(description="the query", min_length=2), n: int = Field(..., ge=1)) -> str:
        """Search."""
        return f"{q} {n}"

    assert reg.get("search").parameters == {
        "type": "object",
        "properties": {
            "q": {"type": "string", "minLength": 2, "description": "the query"},
            "n": {"type": "integer", "minimum": 1},
        },
        "required": ["q", "n"],
        "additionalProperties": False,
    }
    missing = reg.try_call("search", {})
    assert missing.error is not None and missing.error.kind == "invalid_arguments"
    assert "$.q: required property is missing" in missing.error.message
    low = reg.try_call("search", {"q": "xy", "n": 0})
    assert low.error is not None and "$.n: expected a number >= 1, got 0" in low.error.message
    assert reg.try_call("search", {"q": "xy", "n": 3}).value == "xy 3"


@pytest.mark.parametrize(
    ("field", "given"), [(Field(default=5, ge=1), "default"), (Field(default_factory=lambda: 5), "default_factory")]
)
def test_a_field_default_holding_a_default_is_refused(field: Any, given: str) -> None:
    def count(n: int = field) -> int:
        """Count."""
        return n

    with pytest.raises(ToolDefinitionError) as refused:
        define_tool(count, registry=None)
    assert str(refused.value) == (
        f"Tool 'count': parameter 'n': its default is a pydantic Field({given}=...), which the function would receive "
        "itself when the model leaves 'n' out; give the default in the signature and the settings in Annotated: "
        "'n: Annotated[type, Field(...)] = value'."
    )


def test_a_field_default_refuses_what_annotated_refuses() -> None:
    def alias(q: str = Field(alias="Q")) -> str:
        """Alias."""
        return q

    with pytest.raises(ToolDefinitionError) as refused:
        define_tool(alias, registry=None)
    assert str(refused.value) == "Tool 'alias': parameter 'q': Field(alias=...) cannot be used on a tool parameter"


# ---------------------------------------------------------------- 4. LangChain and recursive schemas


class Node(BaseModel):
    title: str
    children: list[Node] = []


class Point(BaseModel):
    x: int


def test_to_langchain_warns_of_a_recursive_schema(caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry(autoload=False)

    @define_tool(registry=reg)
    def post(tree: Node) -> str:
        """Post."""
        return tree.title

    @define_tool(registry=reg)
    def plot(a: Point, b: Point) -> int:
        """Plot."""
        return a.x + b.x

    with caplog.at_level(logging.WARNING, logger="harness_one.integrations"):
        to_langchain("plot", reg)
        assert caplog.records == []  # references LangChain inlines whole
        to_langchain("post", reg)
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.getMessage().startswith("integration schema weakened")
    fields = record.harness_one  # type: ignore[attr-defined]
    assert (fields["tool"], fields["reasons"]) == ("post", ["$ref '#/$defs/Node' is recursive and cannot be inlined"])


# ---------------------------------------------------------------- 5. each call's own context, a plain dict


@pytest.mark.parametrize("given", ["mapping", "function"])
def test_an_adapter_gives_each_call_its_own_context(given: str) -> None:
    reg = ToolRegistry(autoload=False)
    seen: list[Any] = []

    @define_tool(registry=reg)
    def login(user: str, call: Call) -> str:
        """Log a user in for this call; an audit line of who asked, as JSON."""
        seen.append(call.context)
        call.context.setdefault("session_user", user)  # type: ignore[attr-defined]  # what a careless tool does
        return json.dumps({"who": call.context})

    agent_context = {"tenant": "acme"}
    tool = to_autogen("login", reg, context=agent_context if given == "mapping" else (lambda run: agent_context))
    answers = [asyncio.run(tool.run_json({"user": user}, CancellationToken(), call_id=user)) for user in ("alice", "bob")]
    assert answers == [
        '{"who": {"tenant": "acme", "session_user": "alice"}}',
        '{"who": {"tenant": "acme", "session_user": "bob"}}',  # alice's write is not seen by bob's call
    ]
    assert agent_context == {"tenant": "acme"}
    assert type(seen[0]) is dict and seen[0] is not seen[1] and seen[0] is not agent_context


def test_a_run_id_context_is_a_plain_dict_of_its_own() -> None:
    first = call_context(None, lambda: "run-1", tool="t", run_id=str)
    second = call_context(None, lambda: "run-1", tool="t", run_id=str)
    assert type(first) is dict and first == second == {"run_id": "run-1"} and first is not second
    assert json.dumps(first) == '{"run_id": "run-1"}'


@pytest.mark.parametrize("shared", [{"user": "a"}, None])
def test_call_context_copies_a_mapping_and_a_functions_result(shared: Any) -> None:
    given = {"user": "a"}
    source: Any = given if shared is not None else (lambda run: given)
    first = call_context(source, lambda: None, tool="t")
    second = call_context(source, lambda: None, tool="t")
    assert first == second == given and first is not second and first is not given
    assert type(first) is dict and json.dumps(first) == '{"user": "a"}'
    first["user"] = "b"
    assert second == given == {"user": "a"}


# ---------------------------------------------------------------- 6. shown names


ADAPTERS: list[tuple[Callable[..., Any], Callable[..., Any]]] = [
    (langchain.to_langchain, langchain.as_langchain_tools),
    (openai_agents.to_openai_agents, openai_agents.as_openai_agents_tools),
    (pydantic_ai.to_pydantic_ai, pydantic_ai.as_pydantic_ai_tools),
    (agent_framework.to_agent_framework, agent_framework.as_agent_framework_tools),
    (autogen.to_autogen, autogen.as_autogen_tools),
]


def _echo_registry() -> ToolRegistry:
    reg = ToolRegistry(autoload=False)

    def echo(x: str) -> str:
        """Echo."""
        return x

    reg.add(echo)
    reg.add(echo, name="2fa-check")
    return reg


@pytest.mark.parametrize(("to_one", "as_many"), ADAPTERS)
@pytest.mark.parametrize("shown", ["tööl", "a b", "x" * 65, "\u200becho", "-lead.dot"])
def test_a_name_no_provider_accepts_is_refused_when_adapting(to_one: Any, as_many: Any, shown: str) -> None:
    reg = _echo_registry()
    expected = (
        f"The name shown for tool 'echo', {shown!r}, is one no model provider accepts: use 1-64 letters, digits, '_' "
        "or '-' (OpenAI, Anthropic; Gemini also needs a letter or '_' first, and takes '.' and ':')."
    )
    with pytest.raises(ValueError) as one:
        to_one("echo", reg, name=shown)
    assert str(one.value) == expected
    with pytest.raises(ValueError) as many:
        as_many(["echo"], reg, names={"echo": shown})
    assert str(many.value) == expected


@pytest.mark.parametrize(("to_one", "as_many"), ADAPTERS)
def test_tool_names_and_gemini_names_are_accepted(to_one: Any, as_many: Any) -> None:
    reg = _echo_registry()
    assert to_one("echo", reg, name="x" * 64).name == "x" * 64
    assert [t.name for t in as_many(["echo", "2fa-check"], reg, names=gemini_name)] == ["echo", "_.2fa-check"]


class Session:
    """A context value equal only to itself (no ``__eq__``), as a client or session object is."""


def test_a_grant_holds_for_a_context_value_equal_only_to_itself() -> None:
    bank = Bank(per=0.001)
    session = Session()
    agent = _pydantic_agent(bank, [("c1", BIG)], lambda ctx: {"user": ctx.deps.user, "session": session})
    first = agent.run_sync("pay", deps=Deps("alice"))
    second = agent.run_sync(
        message_history=first.all_messages(),
        deps=Deps("alice"),
        deferred_tool_results=DeferredToolResults(approvals={"c1": True}),
    )
    assert bank.sent == [("c1", "ann", 500, "alice")] and second.output == "done"


# ---------------------------------------------------------------- 7. LangChain: an approved call's context is made once


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_langchain_grants_an_approved_call_whose_context_is_a_new_object_each_time(mode: str, asynchronous: bool) -> None:
    bank = Bank()
    made: list[str | None] = []

    def context(runtime: Any) -> dict[str, Any]:  # a request-scoped object, as a DB session is: equal only to itself
        made.append(runtime.tool_call_id)
        return {"user": runtime.context.user, "session": Session()}

    tools = langchain.as_langchain_tools(registry=bank.registry, context=context)
    agent = create_agent(
        LangChainModel(messages=iter([AIMessage(content="", tool_calls=[lc_transfer("c-1", 500)]), AIMessage(content="done")])),
        tools,
        middleware=[langchain.approval_middleware(tools, interrupt_mode=mode)],  # type: ignore[arg-type]
        context_schema=UserContext,
        checkpointer=InMemorySaver(),
    )

    def invoke(given: Any) -> Any:
        if asynchronous:
            return asyncio.run(agent.ainvoke(given, LC_CONFIG, context=UserContext("alice")))
        return agent.invoke(given, LC_CONFIG, context=UserContext("alice"))

    [interrupt] = invoke({"messages": [("user", "pay bob 500")]})["__interrupt__"]
    del made[:]
    approve = {"type": "approve"}
    done = invoke(Command(resume={"decisions": [approve]} if mode == "batched" else {interrupt.id: approve}))
    answer = lc_tool_messages(done)["c-1"]
    assert (answer.status, answer.content) == ("success", "sent 500 to bob")
    assert bank.sent == [("c-1", "bob", 500, "alice")]
    assert made == ["c-1", "c-1"]  # the rule, as LangChain resumes its review; the call, granted with that same context
