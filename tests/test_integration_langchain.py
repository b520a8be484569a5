"""LangChain / LangGraph: harness tools in a real ``create_agent`` loop driven by LangChain's fake chat model.

Shown: per-run identity (``context=`` of the ``ToolRuntime``) reaching ``Call.context`` and
keying a per-user rate limit across two users of one agent, provider call ids becoming harness
call ids, argument errors and refusals as error ``ToolMessage``s, and the reverse adapter.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.prebuilt import ToolRuntime

from harness_one import ManualClock, RateLimitExceeded, ToolArgumentError, ToolDefinitionError, ToolRegistry, define_tool
from harness_one.integrations.langchain import HarnessTool, as_langchain_tools, from_langchain, to_langchain

if TYPE_CHECKING:
    from conftest import PerUserAdd


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, answering tool-bound requests from its script."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@dataclass
class UserContext:
    user: str


def script(user: str, calls: list[dict[str, Any]]) -> ScriptedModel:
    """One tool call per model turn (so the order is exact), then a final answer."""
    turns = [
        AIMessage(content="", tool_calls=[{"name": "add", "args": args, "id": f"{user}-{i}"}]) for i, args in enumerate(calls)
    ]
    return ScriptedModel(messages=iter([*turns, AIMessage(content="done")]))


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def test_create_agent_per_user_limit_and_call_ids(per_user_add: PerUserAdd) -> None:
    registry, add, seen = per_user_add
    tools = as_langchain_tools([add], registry, context=lambda runtime: {"user": runtime.context.user})
    assert isinstance(tools[0], HarnessTool)

    def run(user: str, calls: list[dict[str, Any]]) -> list[ToolMessage]:
        agent = create_agent(script(user, calls), tools, context_schema=UserContext)  # the same tools for every user
        state = agent.invoke({"messages": [("user", "add things")]}, context=UserContext(user=user))
        assert state["messages"][-1].content == "done"
        return tool_messages(state)

    alice = run("alice", [{"a": "two", "b": 3}, {"a": 2, "b": 3}, {"a": 1, "b": 1}])
    assert [m.status for m in alice] == ["error", "success", "error"]
    assert "$.a: expected number, got string" in str(alice[0].content)
    assert alice[1].content == "5"
    assert "rate limited" in str(alice[2].content) and "Retry after" in str(alice[2].content)
    bob = run("bob", [{"a": 1, "b": 1}])  # alice's empty bucket is not bob's
    assert [(m.status, m.content) for m in bob] == [("success", "2")]
    assert [m.tool_call_id for m in alice + bob] == ["alice-0", "alice-1", "alice-2", "bob-0"]
    assert seen == [("alice-1", "alice"), ("bob-0", "bob")]  # the model's call ids are the harness call ids
    assert registry.call_count("add") == 4


def test_async_agent_gets_the_runtime(per_user_add: PerUserAdd) -> None:
    registry, add, seen = per_user_add
    runtimes: list[ToolRuntime[Any, Any]] = []

    def context(runtime: ToolRuntime[Any, Any]) -> dict[str, Any]:
        runtimes.append(runtime)
        return {"user": runtime.context.user}

    agent = create_agent(
        script("carol", [{"a": 1, "b": 2}]), [to_langchain(add, registry, context=context)], context_schema=UserContext
    )
    state = asyncio.run(agent.ainvoke({"messages": [("user", "add")]}, context=UserContext(user="carol")))
    assert tool_messages(state)[0].content == "3"
    assert seen == [("carol-0", "carol")]
    (runtime,) = runtimes
    assert runtime.tool_call_id == "carol-0" and len(runtime.state["messages"]) == 2


def test_outside_a_graph_the_config_and_call_id_still_arrive(per_user_add: PerUserAdd) -> None:
    registry, _add, seen = per_user_add
    tool = to_langchain("add", registry, context=lambda runtime: {"user": runtime.config["configurable"]["user"]})
    call = {"name": "add", "args": {"a": 1, "b": 2}, "id": "direct-1", "type": "tool_call"}
    message = tool.invoke(call, {"configurable": {"user": "dave"}})
    assert isinstance(message, ToolMessage) and message.content == "3" and message.tool_call_id == "direct-1"
    assert seen == [("direct-1", "dave")]
    refused = tool.invoke({**call, "id": "direct-2"}, {"configurable": {"user": "dave"}})
    assert refused.status == "error" and "rate limited" in refused.content
    assert tool.invoke({"a": 5, "b": 5}, {"configurable": {"user": "erin"}}) == "10"  # plain input, no call id
    assert seen[-1][1] == "erin" and seen[-1][0] != "direct-2"


@pytest.mark.parametrize(
    ("context", "problem"),
    [
        (lambda runtime: "alice", "returned str, not a mapping"),
        (lambda runtime: {"user": runtime.secret}, "raised AttributeError"),
    ],
)
def test_a_failing_context_function_is_an_error_message(
    per_user_add: PerUserAdd, context: Any, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    # It used to raise out of agent.invoke() (TypeError, AttributeError).
    registry, add, seen = per_user_add
    agent = create_agent(script("u", [{"a": 1, "b": 2}]), [to_langchain(add, registry, context=context)])
    with caplog.at_level(logging.ERROR, logger="harness_one.integrations"):
        state = agent.invoke({"messages": [("user", "add")]})
    assert [r.message.split(" tool=")[0] for r in caplog.records] == ["integration context function failed"]
    [message] = tool_messages(state)
    assert message.status == "error" and f"the application's context= function {problem}" in str(message.content)
    assert "alice" not in str(message.content) and "secret" not in str(message.content)
    assert state["messages"][-1].content == "done" and seen == []


def test_fixed_context_and_tool_node(per_user_add: PerUserAdd) -> None:
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    registry, add, seen = per_user_add
    tool = to_langchain(add.tool, registry, context={"user": "frank"})
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "tools")
    calls = [{"name": "add", "args": {"a": "x", "b": 1}, "id": "t1"}]
    out = asyncio.run(graph.compile().ainvoke({"messages": [AIMessage(content="", tool_calls=calls)]}))
    assert out["messages"][1].status == "error" and "expected number" in out["messages"][1].content
    assert asyncio.run(tool.ainvoke({"a": 1, "b": 2})) == "3"
    assert seen[0][1] == "frank"


def test_argument_names_cannot_clash_with_what_langchain_injects() -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def configure(config: str, runtime: int, run_manager: bool) -> str:
        """Arguments named like LangChain's own."""
        return f"{config}/{runtime}/{run_manager}"

    agent = create_agent(
        ScriptedModel(
            messages=iter(
                [
                    AIMessage(
                        content="",
                        tool_calls=[{"name": "configure", "args": {"config": "c", "runtime": 2, "run_manager": True}, "id": "x"}],
                    ),
                    AIMessage(content="done"),
                ]
            )
        ),
        as_langchain_tools(registry=registry),  # the registry's tools defined in code
    )
    state = agent.invoke({"messages": [("user", "go")]})
    assert tool_messages(state)[0].content == "c/2/True"


def test_langchain_tools_gain_harness_policies() -> None:
    from langchain_core.tools import tool as lc_tool

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


def test_string_results_are_made_utf8_safe() -> None:
    # A str result went out as is: its lone surrogate broke the next request to the model (UnicodeEncodeError).
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def read_file(path: str) -> str:
        """A file's text, undecodable bytes kept as surrogates (as os.fsdecode does)."""
        return b"caf\xe9 menu".decode("utf-8", "surrogateescape")

    model = ScriptedModel(
        messages=iter(
            [AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": "m"}, "id": "r1"}]), AIMessage("done")]
        )
    )
    state = create_agent(model, as_langchain_tools(registry=registry)).invoke({"messages": [("user", "read m")]})
    [message] = tool_messages(state)
    assert message.content == "caf\ufffd menu" == registry.try_call("read_file", {"path": "m"}).for_model()


def test_async_only_langchain_tools_become_async_harness_tools() -> None:
    # "StructuredTool does not support sync invocation" was every call's answer.
    from langchain_core.tools import tool as lc_tool

    @lc_tool
    async def weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    reg = ToolRegistry(autoload=False)
    built = from_langchain(weather, registry=reg, rate_limit={"rate": 1, "burst": 1})
    assert built.is_async
    assert asyncio.run(reg.acall("weather", {"city": "Oslo"})) == "sunny in Oslo"
    refused = asyncio.run(reg.atry_call("weather", {"city": "Oslo"}))
    assert refused.error is not None and refused.error.kind == "rate_limited"


def test_from_langchain_refuses_a_tool_with_injected_arguments() -> None:
    """Its schema hides what only a LangChain agent fills (a ToolRuntime, the tool call id): every call failed."""

    @tool
    def whoami(greeting: str, runtime: ToolRuntime) -> str:
        """Greet the current user."""
        return f"{greeting}, {runtime.context}"

    @tool
    def ack(note: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Acknowledge."""
        return f"ack {note} ({tool_call_id})"

    @tool
    def echo(note: str) -> str:
        """Echo."""
        return note

    reg = ToolRegistry(autoload=False)
    for injected, names in ((whoami, "runtime"), (ack, "tool_call_id")):
        with pytest.raises(ToolDefinitionError, match=rf"takes injected arguments \({names}\)"):
            from_langchain(injected, registry=reg)
    from_langchain(echo, registry=reg)
    assert reg.names() == ["echo"] and reg.call("echo", {"note": "n"}) == "n"


def test_a_model_cannot_stand_in_for_the_runtime_outside_a_graph() -> None:
    """Outside a graph (``tool.invoke(tool_call)``) a model-sent ``_harness_runtime`` became the runtime:
    the ``context=`` function read no run id from it, so the run's budget no longer counted (and a
    string there crashed the caller). Only what ToolNode injects is the runtime; the model's key is
    an argument like any other, refused as unexpected."""
    registry = ToolRegistry(autoload=False)

    def search(q: str) -> str:
        return f"results for {q}"

    registry.add(search, options={"max_calls": 2})
    seen: list[str] = []

    def context(runtime: Any) -> dict[str, Any]:
        seen.append(type(runtime).__name__)
        config = getattr(runtime, "config", None) or {}
        return {"run_id": config.get("configurable", {}).get("thread_id")}

    tool = to_langchain("search", registry, context=context)
    config: Any = {"configurable": {"thread_id": "run-1"}}
    answers = []
    for n, extra in enumerate([{}, {}, {"_harness_runtime": 0}, {"_harness_runtime": "boom"}, {}]):
        call = {"type": "tool_call", "name": "search", "args": {"q": f"q{n}", **extra}, "id": f"c{n}"}
        message = tool.invoke(call, config=config)
        answers.append((message.status, message.content.splitlines()[0]))
    assert answers[:2] == [("success", "results for q0"), ("success", "results for q1")]
    assert [status for status, _ in answers[2:4]] == ["error", "error"]
    assert all("Invalid arguments for tool 'search'" in text for _, text in answers[2:4])
    assert answers[4][0] == "error" and "already been called 2 times" in answers[4][1]  # the budget still counts
    assert set(seen) == {"ToolRuntime"}
    assert registry.plugins.get("budget").used("run-1", "search") == 2
