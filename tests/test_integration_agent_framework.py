"""Microsoft Agent Framework: harness tools in a real ``Agent`` run with an offline chat client.

The client is the framework's own stack (``FunctionInvocationLayer`` over ``BaseChatClient``)
answering from a script, so the real function-calling loop and middleware run. Shown:
``function_invocation_kwargs`` reaching ``Call.context`` through the invocation context and
keying a per-user rate limit across two users of one agent, the model's call ids becoming
harness call ids (with and without function middleware), and the harness's error text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    Content,
    FunctionInvocationContext,
    FunctionInvocationLayer,
    FunctionMiddleware,
    Message,
)

from harness_one import RateLimitExceeded, ToolRegistry, define_tool
from harness_one.integrations.agent_framework import HarnessFunctionTool, as_agent_framework_tools, to_agent_framework

if TYPE_CHECKING:
    from conftest import PerUserAdd


class ScriptedClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """The framework's chat-client stack, answering from a script: one tool call per turn, then text."""

    def __init__(self, calls: list[tuple[str, dict[str, Any] | str]], *, tool: str = "add", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls = list(calls)
        self.tool = tool
        self.requests: list[list[Message]] = []

    async def _respond(self, messages: Sequence[Message]) -> ChatResponse:
        self.requests.append(list(messages))
        if self.calls:
            call_id, arguments = self.calls.pop(0)
            content = [Content.from_function_call(call_id=call_id, name=self.tool, arguments=arguments)]
            return ChatResponse(messages=[Message(role="assistant", contents=content)])
        return ChatResponse(messages=[Message(role="assistant", contents=["done"])])

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any) -> Any:
        assert not stream
        return self._respond(messages)

    def results(self) -> dict[str, str]:
        return {c.call_id: c.result for m in self.requests[-1] for c in m.contents if c.type == "function_result"}


def test_agent_per_user_limit_and_call_ids(per_user_add: PerUserAdd) -> None:
    registry, add, seen = per_user_add
    tools = as_agent_framework_tools([add], registry, context=lambda ctx: {"user": ctx.kwargs["user"]})
    assert isinstance(tools[0], HarnessFunctionTool) and tools[0].parameters()["required"] == ["a", "b"]

    def run(user: str, calls: list[dict[str, Any]]) -> dict[str, str]:
        client = ScriptedClient([(f"{user}-{i}", args) for i, args in enumerate(calls)])
        agent = Agent(client, tools=tools)  # the same tools for every user
        response = asyncio.run(agent.run("add", function_invocation_kwargs={"user": user}))
        assert response.text == "done"
        return client.results()

    alice = run("alice", [{"a": "two", "b": 3}, {"a": 2, "b": 3}, {"a": 1, "b": 1}])
    assert alice["alice-0"].startswith("Error: Invalid arguments") and "$.a: expected number, got string" in alice["alice-0"]
    assert alice["alice-1"] == "5"
    assert alice["alice-2"].startswith("Error: Tool 'add' is rate limited. Retry after")
    bob = run("bob", [{"a": 1, "b": 1}])
    assert bob == {"bob-0": "2"}
    assert seen == [("alice-1", "alice"), ("bob-0", "bob")]


def test_function_middleware_wraps_the_harness_tool(per_user_add: PerUserAdd) -> None:
    registry, _add, seen = per_user_add
    around: list[tuple[str, Any]] = []

    class Audit(FunctionMiddleware):
        async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
            around.append((context.function.name, context.metadata.get("call_id")))
            await call_next()

    contexts: list[FunctionInvocationContext] = []

    def context(ctx: FunctionInvocationContext) -> dict[str, Any]:
        contexts.append(ctx)
        return {"user": "carol"}

    client = ScriptedClient([("m-0", {"a": 1, "b": 2})], middleware=[Audit()])
    agent = Agent(client, tools=[to_agent_framework("add", registry, context=context)])
    asyncio.run(agent.run("add"))
    assert client.results() == {"m-0": "3"}
    assert around == [("add", "m-0")] and seen == [("m-0", "carol")]
    assert contexts[0].metadata["call_id"] == "m-0"


def test_direct_calls(per_user_add: PerUserAdd) -> None:
    registry, add, seen = per_user_add
    tool = to_agent_framework(add.tool, registry, context={"user": "dave"})
    (content,) = asyncio.run(tool.invoke(arguments={"a": 2, "b": 2}, tool_call_id="d-1"))
    assert content.text == "4" and seen == [("d-1", "dave")]
    assert "rate limited" in asyncio.run(tool.invoke(arguments={"a": 2, "b": 2}))[0].text
    other = to_agent_framework(add, registry, context={"user": "erin"})
    assert asyncio.run(other(a=1, b=2)) == 3  # calling the tool object runs it through the harness too
    with pytest.raises(RateLimitExceeded):  # skip_parsing: the raw value, or the harness error raised
        asyncio.run(other.invoke(arguments={"a": 1, "b": 1}, skip_parsing=True))


MALFORMED = [
    ('{"a": 2, "b": ', "arguments are not valid JSON"),
    ("[1, 2]", "arguments must be a JSON object, got array"),
    ('"{\\"a\\": 1, \\"b\\": 2}"', "arguments must be a JSON object, got string"),  # an object's text in a string
]


@pytest.mark.parametrize(("arguments", "problem"), MALFORMED)
def test_arguments_that_are_not_an_object_reach_the_harness_as_the_models_text(
    per_user_add: PerUserAdd, arguments: str, problem: str
) -> None:
    # The framework hands them over as {"raw": ...}, which the harness refused as an unexpected property
    # (only); the model reads the problem with its text, and the other reading (a "raw" it sent itself).
    registry, add, seen = per_user_add
    client = ScriptedClient([("x-0", arguments)])
    asyncio.run(Agent(client, tools=[to_agent_framework(add, registry)]).run("add"))
    result = client.results()["x-0"]
    assert result.startswith(f"Error: Invalid arguments for tool 'add' (1 problem):\n- $: {problem}")
    assert result.endswith(f"{OR_RAW}a, b\nFix the arguments and call 'add' again.") and seen == []


#: The other reading of ``{"raw": ...}``, as the refusal words it for a tool without a ``raw`` parameter.
OR_RAW = (
    '; or, if the arguments were the object {"raw": ...} (the framework passes on both the same way), '
    "'raw' is an unexpected property; allowed properties: "
)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"raw": "hello"}, "arguments are not valid JSON: Expecting value at line 1 column 1 (near 'hello')"),
        ({"raw": "[1, 2]"}, "arguments must be a JSON object, got string"),
        ({"raw": 5}, "arguments must be a JSON object, got integer"),
    ],
)
def test_a_models_own_raw_is_told_as_either_reading(per_user_add: PerUserAdd, arguments: dict[str, Any], problem: str) -> None:
    # {"raw": "hello"} is the model's own object, or the framework's for the text hello: the model read only the latter.
    registry, add, seen = per_user_add
    client = ScriptedClient([("x-0", arguments)])
    asyncio.run(Agent(client, tools=[to_agent_framework(add, registry)]).run("add"))
    assert client.results()["x-0"] == (
        f"Error: Invalid arguments for tool 'add' (1 problem):\n- $: {problem}{OR_RAW}a, b\n"
        "Fix the arguments and call 'add' again."
    )
    assert seen == []


def open_tools() -> tuple[ToolRegistry, list[dict[str, Any]]]:
    """``fields``, a ``**kwargs`` tool (any property, of text), and ``anything``, whose schema takes
    any property (``additionalProperties`` true); what each ran with."""
    registry = ToolRegistry(autoload=False)
    ran: list[dict[str, Any]] = []

    @define_tool(registry=registry)
    def fields(**given: str) -> str:
        """Store the fields."""
        ran.append(given)
        return "stored"

    def anything(**given: Any) -> str:
        ran.append(given)
        return "stored"

    registry.add(anything, name="anything", parameters={"type": "object", "additionalProperties": True})
    return registry, ran


@pytest.mark.parametrize("tool", ["fields", "anything"])
def test_a_tool_that_takes_any_property_takes_the_models_own_raw(tool: str) -> None:
    # The model's valid {"raw": "hello"} was refused as "arguments are not valid JSON (near 'hello')", and
    # {"raw": "5"} as "arguments must be a JSON object": it sent an object, which the tool takes.
    registry, ran = open_tools()
    client = ScriptedClient([("x-0", {"raw": "hello"}), ("x-1", {"raw": "5"}), ("x-2", '{"raw": "ls", ')], tool=tool)
    asyncio.run(Agent(client, tools=[to_agent_framework(tool, registry)]).run("go"))
    results = client.results()
    assert (results["x-0"], results["x-1"]) == ("stored", "stored")
    assert ran == [{"raw": "hello"}, {"raw": "5"}]  # malformed object text is never run
    assert results["x-2"].startswith(
        f"Error: Invalid arguments for tool '{tool}' (1 problem):\n- $: arguments are not valid JSON"
    )
    assert "unexpected property" not in results["x-2"]


def test_a_value_a_tool_that_takes_any_property_refuses_is_refused_under_raw() -> None:
    # {"raw": 5} was "arguments must be a JSON object, got integer": the object's raw is refused as such.
    registry, ran = open_tools()
    client = ScriptedClient([("x-0", {"raw": 5})], tool="fields")
    asyncio.run(Agent(client, tools=[to_agent_framework("fields", registry)]).run("go"))
    assert client.results()["x-0"].startswith("Error: Invalid arguments for tool 'fields' (1 problem):\n- $.raw: expected string")
    assert ran == []


def test_a_tool_with_a_raw_parameter_never_runs_on_malformed_text() -> None:
    registry = ToolRegistry(autoload=False)
    ran: list[str] = []

    @define_tool(registry=registry)
    def shell(raw: str) -> str:
        """Run a command line."""
        ran.append(raw)
        return "ran " + raw

    client = ScriptedClient(
        [("s-0", '{"raw": "ls", "raw": '), ("s-1", {"raw": "ls"}), ("s-2", {"raw": "{ echo hi; }"})], tool="shell"
    )
    asyncio.run(Agent(client, tools=as_agent_framework_tools(registry=registry)).run("go"))
    results = client.results()
    assert "arguments are not valid JSON" in results["s-0"]
    assert (results["s-1"], results["s-2"]) == ("ran ls", "ran { echo hi; }")
    assert ran == ["ls", "{ echo hi; }"]


@pytest.mark.parametrize("context", [lambda ctx: {"user": ctx.kwargs["user"]}, lambda ctx: "alice"])
def test_a_failing_context_function_is_the_harness_error_text(per_user_add: PerUserAdd, context: Any) -> None:
    # The framework answered "Error: Function failed." and logged the exception's text.
    registry, add, seen = per_user_add
    client = ScriptedClient([("c-0", {"a": 1, "b": 2})])
    asyncio.run(Agent(client, tools=[to_agent_framework(add, registry, context=context)]).run("add"))  # no kwargs given
    result = client.results()["c-0"]
    assert result.startswith("Error: Tool 'add' was not called: the application's context= function")
    assert "alice" not in result and "user" not in result and seen == []
