"""Hostile tool-call arguments and results in every framework's real agent loop.

Each framework is driven offline by its own model stand-in (the helpers of
``tests/test_integration_<framework>.py``) sending the model's arguments as text: a lone
surrogate (the JSON escape ``\\ud800``, the character itself, and what undecodable bytes become
under ``surrogateescape``), malformed JSON, JSON that is not an object, JSON nested past the
harness's depth limit and an integer past Python's digit limit. Wherever the arguments reach the
adapter, the run goes on and the model reads the harness's answer: the tool's result (a lone
surrogate as U+FFFD) or the harness's argument error naming the problem. Where the framework
fails on the arguments before the adapter sees them, a ``*_boundary`` test shows exactly that
(docs/integrations/index.md, "Hostile arguments"): if one starts failing, the framework changed
and the docs must say so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, NamedTuple

import httpx
import pytest
from agent_framework import Agent as FrameworkAgent
from agents import Agent as AgentsAgent
from agents import RunConfig, Runner
from agents.exceptions import ModelBehaviorError
from agents.items import ModelResponse as AgentsResponse
from agents.tool_context import ToolContext
from agents.usage import Usage
from autogen_agentchat.agents import AssistantAgent
from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import CreateResult, RequestUsage
from autogen_core.tools import FunctionTool, StaticWorkbench
from autogen_ext.models.replay import ReplayChatCompletionClient
from langchain.agents import create_agent
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.output_parsers.openai_tools import parse_tool_call
from langchain_core.tools import tool as lc_tool
from langchain_openai import ChatOpenAI
from openai.types.responses import ResponseFunctionToolCall
from pydantic import ValidationError
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage as PydanticUsage
from pydantic_core import PydanticSerializationError
from test_integration_agent_framework import ScriptedClient
from test_integration_autogen import MODEL_INFO
from test_integration_autogen import results as autogen_results
from test_integration_langchain import ScriptedModel as FakeChatModel
from test_integration_langchain import tool_messages
from test_integration_openai_agents import ScriptedModel as AgentsModel
from test_integration_openai_agents import outputs as agents_outputs
from test_integration_pydantic_ai import retried, tool_parts

from harness_one import ToolNotFound, ToolRegistry, define_tool
from harness_one.integrations.agent_framework import to_agent_framework
from harness_one.integrations.autogen import to_autogen
from harness_one.integrations.langchain import to_langchain
from harness_one.integrations.openai_agents import to_openai_agents
from harness_one.integrations.pydantic_ai import to_pydantic_ai

LONE = "\ud800"
#: What os.fsdecode / surrogateescape makes of the invalid UTF-8 in b"caf\xe9".
UNDECODABLE = b"caf\xe9".decode("utf-8", "surrogateescape")


def nested(depth: int) -> str:
    return '{"text": ' + "[" * depth + "]" * depth + "}"


LONG_INTEGER = '{"text": ' + "1" * 5000 + "}"


class Case(NamedTuple):
    arguments: str
    #: What the model reads: a fragment of the harness's answer.
    reads: str
    #: What ``echo`` was called with, if it ran.
    ran: list[str]


CASES: dict[str, Case] = {
    "surrogate-escape": Case('{"text": "\\ud800"}', "\ufffd", [LONE]),
    "surrogate-character": Case('{"text": "\ud800"}', "\ufffd", [LONE]),
    "undecodable-bytes": Case(json.dumps({"text": UNDECODABLE}, ensure_ascii=False), "caf\ufffd", [UNDECODABLE]),
    "malformed": Case('{"text": "hi",', "arguments are not valid JSON", []),
    "not-an-object": Case('["hi"]', "arguments must be a JSON object, got array", []),
    "nested": Case(nested(300), "arguments are nested more than 64 levels deep", []),
    "long-integer": Case(LONG_INTEGER, "a number of 5000 digits is too long to read", []),
}


def cases(*names: str) -> Any:
    return pytest.mark.parametrize("case", [pytest.param(CASES[n], id=n) for n in names])


class Tools(NamedTuple):
    registry: ToolRegistry
    #: The text of each ``echo`` call that ran.
    received: list[str]


@pytest.fixture
def tools() -> Tools:
    registry = ToolRegistry(autoload=False)
    received: list[str] = []

    @define_tool(registry=registry)
    def echo(text: str) -> str:
        """Echo a text."""
        received.append(text)
        return text

    @define_tool(registry=registry)
    def reply(kind: str) -> Any:
        """A result, structured result or error holding a lone surrogate."""
        if kind == "error":
            raise ValueError(f"no {UNDECODABLE}")
        return UNDECODABLE if kind == "text" else {"v": UNDECODABLE}

    return Tools(registry, received)


#: ``reply(kind)``: what the model reads, by kind (the error's text is a fragment).
RESULTS = {"text": "caf\ufffd", "data": '{"v": "caf\ufffd"}', "error": "no caf\ufffd"}


def readable(text: str, fragment: str) -> bool:
    text.encode("utf-8")  # no lone surrogate reaches the model
    return fragment in text


# LangChain / LangGraph ------------------------------------------------------------------------


def langchain_call(tool: str, arguments: str) -> dict[str, Any]:
    """The model's call as LangChain's own parser (langchain-openai's) reads the arguments' text."""
    return dict(parse_tool_call({"id": "c1", "function": {"name": tool, "arguments": arguments}}, return_id=True) or {})


def run_langchain(tools: Tools, tool: str, args: dict[str, Any]) -> ToolMessage:
    call = AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": "c1"}])
    agent = create_agent(FakeChatModel(messages=iter([call, AIMessage("done")])), [to_langchain(tool, tools.registry)])
    state = agent.invoke({"messages": [("user", "go")]})
    assert state["messages"][-1].content == "done"
    [message] = tool_messages(state)
    return message


@cases("surrogate-escape", "surrogate-character", "undecodable-bytes", "nested")
def test_langchain(tools: Tools, case: Case) -> None:
    message = run_langchain(tools, "echo", langchain_call("echo", case.arguments)["args"])
    assert readable(message.content, case.reads) and tools.received == case.ran
    assert message.status == ("success" if case.ran else "error")


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_langchain_results(tools: Tools, kind: str) -> None:
    message = run_langchain(tools, "reply", {"kind": kind})
    assert readable(message.content, RESULTS[kind])


def openai_chat_model(tool: str, arguments: str) -> ChatOpenAI:
    """LangChain's OpenAI chat model over a scripted HTTP transport: one call with these arguments, then "done"."""
    turns: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": tool, "arguments": arguments}}],
        }
    ]

    def reply(request: httpx.Request) -> httpx.Response:
        message = turns.pop(0) if turns else {"role": "assistant", "content": "done"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx.Response(200, json={"id": "r", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]})

    client = httpx.Client(transport=httpx.MockTransport(reply))
    return ChatOpenAI(model="m", api_key="offline", max_retries=0, http_client=client)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "arguments", [CASES["malformed"].arguments, nested(5000), LONG_INTEGER], ids=["malformed", "nested-5000", "long-integer"]
)
def test_langchain_boundary_unreadable_arguments_are_never_run(tools: Tools, arguments: str) -> None:
    with pytest.raises((OutputParserException, ValueError, RecursionError)):
        langchain_call("echo", arguments)
    # langchain-openai keeps them as invalid_tool_calls, which create_agent never runs: the run
    # ends on that message, and the model is never told.
    agent = create_agent(openai_chat_model("echo", arguments), [to_langchain("echo", tools.registry)])
    state = agent.invoke({"messages": [("user", "go")]})
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and len(last.invalid_tool_calls) == 1 and not last.tool_calls
    assert tool_messages(state) == [] and tools.received == []


def test_langchain_boundary_arguments_that_are_not_an_object_fail_the_model_call(tools: Tools) -> None:
    agent = create_agent(openai_chat_model("echo", '["hi"]'), [to_langchain("echo", tools.registry)])
    with pytest.raises(ValidationError, match=r"tool_calls\.0\.args"):  # an AIMessage holds only object arguments
        agent.invoke({"messages": [("user", "go")]})
    assert tools.received == []


def test_langchain_boundary_a_lone_surrogate_fails_the_next_openai_request(tools: Tools) -> None:
    agent = create_agent(openai_chat_model("echo", '{"text": "\\ud800"}'), [to_langchain("echo", tools.registry)])
    with pytest.raises(UnicodeEncodeError):  # langchain-openai writes the call's args back with ensure_ascii=False
        agent.invoke({"messages": [("user", "go")]})
    assert tools.received == [LONE]  # the adapter answered; the failure is the next request's


# OpenAI Agents SDK ---------------------------------------------------------------------------

CONFIG = RunConfig(tracing_disabled=True)


class RawAgentsModel(AgentsModel):
    """The scripted Agents SDK model, calling ``tool`` once with these arguments as text."""

    def __init__(self, tool: str, arguments: str) -> None:
        super().__init__([])
        self.call: tuple[str, str] | None = (tool, arguments)

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> AgentsResponse:
        if self.call is None:
            return await super().get_response(system_instructions, input, *args, **kwargs)
        self.inputs.append(input)
        (tool, arguments), self.call = self.call, None
        output = [ResponseFunctionToolCall(type="function_call", call_id="c1", name=tool, arguments=arguments)]
        return AgentsResponse(output=output, usage=Usage(), response_id=None)  # type: ignore[arg-type]


def run_agents(tools: Tools, tool: str, arguments: str, *, strict: bool = False) -> str:
    model = RawAgentsModel(tool, arguments)
    agent = AgentsAgent(name="x", model=model, tools=[to_openai_agents(tool, tools.registry, strict=strict)])
    assert asyncio.run(Runner.run(agent, "go", run_config=CONFIG)).final_output == "done"
    return agents_outputs(model)["c1"]


@pytest.mark.parametrize("strict", [False, True])
@cases("malformed", "not-an-object", "nested", "long-integer")
def test_openai_agents(tools: Tools, case: Case, strict: bool) -> None:
    assert readable(run_agents(tools, "echo", case.arguments, strict=strict), case.reads) and tools.received == case.ran


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_openai_agents_results(tools: Tools, kind: str) -> None:
    assert readable(run_agents(tools, "reply", json.dumps({"kind": kind})), RESULTS[kind])


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (CASES["surrogate-escape"].arguments, UnicodeEncodeError),
        (CASES["surrogate-character"].arguments, UnicodeEncodeError),
        (CASES["undecodable-bytes"].arguments, UnicodeEncodeError),
        (nested(600), RecursionError),
    ],
    ids=["surrogate-escape", "surrogate-character", "undecodable-bytes", "nested-600"],
)
def test_openai_agents_boundary(tools: Tools, arguments: str, error: type[Exception]) -> None:
    # The SDK fingerprints each call before running any tool (agents._tool_invocation): it
    # decodes the arguments, recursing per level, and encodes them to UTF-8 with ensure_ascii=False.
    agent = AgentsAgent(name="x", model=RawAgentsModel("echo", arguments), tools=[to_openai_agents("echo", tools.registry)])
    with pytest.raises(error):
        asyncio.run(Runner.run(agent, "go", run_config=CONFIG))
    assert tools.received == []
    # Handed the same text, the adapter answers.
    function = to_openai_agents("echo", tools.registry)
    context = ToolContext(context=None, tool_name="echo", tool_call_id="c2", tool_arguments=arguments)
    answer = asyncio.run(function.on_invoke_tool(context, arguments))
    assert readable(answer, "\ufffd" if error is UnicodeEncodeError else "nested more than 64 levels deep")


# Pydantic AI ----------------------------------------------------------------------------------


def run_pydantic_ai(tools: Tools, tool: str, arguments: Any) -> Any:
    queue = [ToolCallPart(tool, arguments, tool_call_id="c1")]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # With usage given, FunctionModel does not estimate it from the messages (see the boundary test).
        return ModelResponse(parts=[queue.pop(0)] if queue else [TextPart("done")], usage=PydanticUsage(input_tokens=1))

    result = PydanticAgent(FunctionModel(respond), tools=[to_pydantic_ai(tool, tools.registry)]).run_sync("go")
    assert result.output == "done"
    return tool_parts(result)["c1"]


@cases(*CASES)
def test_pydantic_ai(tools: Tools, case: Case) -> None:
    # The lone surrogate character ended the run (pydantic's error echoed it into the retry prompt,
    # which Pydantic AI could not serialize); the rest reached the model as pydantic's json_invalid.
    part = run_pydantic_ai(tools, "echo", case.arguments)
    assert readable(str(part.content), case.reads) and tools.received == case.ran
    assert retried(part) is not bool(case.ran)  # an argument error is the model's to fix: ModelRetry


def test_pydantic_ai_invalid_utf8_bytes(tools: Tools) -> None:
    # A TypeError ended the run (bytes were json.dumps'ed); the validator takes bytes too.
    part = run_pydantic_ai(tools, "echo", b'{"text": "caf\xe9"}')
    assert retried(part) and readable(part.content, "arguments are not valid UTF-8 (byte 0xe9 at position 13)")


def test_pydantic_ai_a_lone_surrogate_is_put_to_a_person_like_any_argument(tools: Tools) -> None:
    # pydantic-core refuses even the escape; the harness reads it, so the call is deferred for
    # approval as any other (it used to come back as the harness's "needs approval" refusal).
    @define_tool(registry=tools.registry, options={"requires_approval": True})
    def note(text: str) -> str:
        """Keep a note."""
        tools.received.append(text)
        return "kept"

    queue = [ToolCallPart("note", CASES["surrogate-escape"].arguments, tool_call_id="c1")]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[queue.pop(0)] if queue else [TextPart("done")], usage=PydanticUsage(input_tokens=1))

    agent = PydanticAgent(
        FunctionModel(respond), tools=[to_pydantic_ai(note, tools.registry)], output_type=[str, DeferredToolRequests]
    )
    first = agent.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests) and [c.tool_call_id for c in first.output.approvals] == ["c1"]
    approved = DeferredToolResults(approvals={"c1": True})
    second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=approved)
    assert second.output == "done" and tools.received == [LONE] and tool_parts(second)["c1"].content == "kept"


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_pydantic_ai_results(tools: Tools, kind: str) -> None:
    content = run_pydantic_ai(tools, "reply", {"kind": kind}).content  # data, as the harness's JSON holds it
    assert readable(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False), RESULTS[kind])


@pytest.mark.parametrize(
    ("arguments", "error"),
    [('{"text": "\ud800"}', (TypeError, PydanticSerializationError)), ({"text": LONE}, PydanticSerializationError)],
    ids=["surrogate-character-text", "surrogate-in-dict"],
)
def test_pydantic_ai_boundary(tools: Tools, arguments: Any, error: Any) -> None:
    # Pydantic AI writes a call's arguments back as JSON (ToolCallPart.args_as_json_str): for the
    # next request to a model, and in FunctionModel's usage estimate. Arguments holding a lone
    # surrogate character (not its \ud800 escape) cannot be written (text arguments: a TypeError before
    # pydantic-ai 2.78, its serialization error since).
    with pytest.raises(error):
        ToolCallPart("echo", arguments, tool_call_id="c1").args_as_json_str()
    queue = [ToolCallPart("echo", arguments, tool_call_id="c1")]
    model = FunctionModel(lambda messages, info: ModelResponse(parts=[queue.pop(0)] if queue else [TextPart("done")]))
    with pytest.raises(error):
        PydanticAgent(model, tools=[to_pydantic_ai("echo", tools.registry)]).run_sync("go")
    assert tools.received == []


# Microsoft Agent Framework -------------------------------------------------------------------


def run_agent_framework(tools: Tools, tool: str, arguments: str | dict[str, Any]) -> str:
    client = ScriptedClient([("c1", arguments)], tool=tool)
    response = asyncio.run(FrameworkAgent(client, tools=[to_agent_framework(tool, tools.registry)]).run("go"))
    assert response.text == "done"
    return client.results()["c1"]


@cases("surrogate-escape", "surrogate-character", "undecodable-bytes", "malformed", "not-an-object", "nested")
def test_agent_framework(tools: Tools, case: Case) -> None:
    assert readable(run_agent_framework(tools, "echo", case.arguments), case.reads) and tools.received == case.ran


@pytest.mark.parametrize(
    ("arguments", "reads"),
    [
        # Read as the model's text again, which the adapter parsed with json.loads: a RecursionError,
        # and the model read the framework's "Error: Function failed."
        ({"raw": "[" * 5000}, "arguments are nested more than 64 levels deep"),
        # An object under "raw" is the model's own: it used to be taken for the arguments and run.
        ({"raw": {"text": "hi"}}, "$.raw: unexpected property"),
    ],
    ids=["deep-text-under-raw", "object-under-raw"],
)
def test_agent_framework_raw(tools: Tools, arguments: dict[str, Any], reads: str) -> None:
    result = run_agent_framework(tools, "echo", arguments)
    assert result.startswith("Error: Invalid arguments") and readable(result, reads) and tools.received == []


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_agent_framework_results(tools: Tools, kind: str) -> None:
    assert readable(run_agent_framework(tools, "reply", {"kind": kind}), RESULTS[kind])


@pytest.mark.parametrize(
    ("arguments", "error"), [(nested(5000), RecursionError), (LONG_INTEGER, ValueError)], ids=["nested-5000", "long-integer"]
)
def test_agent_framework_boundary(tools: Tools, arguments: str, error: type[Exception]) -> None:
    # Content.parse_arguments catches only JSONDecodeError and TypeError from json.loads.
    client = ScriptedClient([("c1", arguments)], tool="echo")
    with pytest.raises(error):
        asyncio.run(FrameworkAgent(client, tools=[to_agent_framework("echo", tools.registry)]).run("go"))
    assert tools.received == []


# AutoGen --------------------------------------------------------------------------------------


def autogen_client(tool: str, arguments: str) -> ReplayChatCompletionClient:
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    call = FunctionCall(id="c1", name=tool, arguments=arguments)
    turn = CreateResult(finish_reason="function_calls", content=[call], usage=usage, cached=False)
    return ReplayChatCompletionClient([turn], model_info=MODEL_INFO)


def run_autogen(tools: Tools, tool: str, arguments: str) -> tuple[str, bool]:
    agent = AssistantAgent("a", model_client=autogen_client(tool, arguments), tools=[to_autogen(tool, tools.registry)])
    return autogen_results(asyncio.run(agent.run(task="go")).messages)["c1"]


@cases("surrogate-escape", "surrogate-character", "undecodable-bytes", "not-an-object", "nested")
def test_autogen(tools: Tools, case: Case) -> None:
    # JSON that is not an object reached the model as the adapter's TypeError ("cannot convert
    # dictionary update sequence element #0 to a sequence").
    content, is_error = run_autogen(tools, "echo", case.arguments)
    assert readable(content, case.reads) and is_error is not bool(case.ran) and tools.received == case.ran


def test_autogen_a_string_is_not_an_object(tools: Tools) -> None:
    content, is_error = run_autogen(tools, "echo", '"hi"')
    assert is_error and readable(content, "arguments must be a JSON object, got string")


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_autogen_results(tools: Tools, kind: str) -> None:
    content, is_error = run_autogen(tools, "reply", json.dumps({"kind": kind}))
    assert readable(content, RESULTS[kind]) and is_error is (kind == "error")


def test_autogen_boundary_malformed_arguments_are_answered_by_autogen(tools: Tools) -> None:
    content, is_error = run_autogen(tools, "echo", CASES["malformed"].arguments)
    assert is_error and content.startswith("Error: Expecting") and tools.received == []  # json's message, not the harness's


@pytest.mark.parametrize(
    ("arguments", "error"), [(nested(5000), RecursionError), (LONG_INTEGER, ValueError)], ids=["nested-5000", "long-integer"]
)
def test_autogen_boundary(tools: Tools, arguments: str, error: type[Exception]) -> None:
    # AssistantAgent's tool step catches only JSONDecodeError from json.loads: this error kills the
    # step's task, and agent.run() then never returns (so it is not run here).
    execute: Callable[..., Any] = AssistantAgent._execute_tool_call
    step = execute(
        FunctionCall(id="c1", name="echo", arguments=arguments),
        workbench=[StaticWorkbench([to_autogen("echo", tools.registry)])],
        handoff_tools=[],
        agent_name="a",
        cancellation_token=CancellationToken(),
        stream=asyncio.Queue(),
    )
    with pytest.raises(error):
        asyncio.run(step)
    assert tools.received == []


# A tool removed from the registry after the agent was built -------------------------------------


def removed_echo(tools: Tools) -> None:
    """Another tool in the registry, which the agent was never given, then ``echo`` (adapted already) removed."""

    @define_tool(registry=tools.registry)
    def admin_delete_all_users(confirm: bool) -> str:
        """Not for this agent."""
        return "deleted"

    tools.registry.remove("echo")


def refused_as_gone(text: str) -> bool:
    """The model reads that ``echo`` is gone, and no other tool's name (the registry's "Available tools: ...")."""
    return "Tool 'echo' is no longer available; continue without it." in text and not any(
        name in text for name in ("admin_delete_all_users", "reply", "Available", "Did you mean")
    )


def test_langchain_removed_tool(tools: Tools) -> None:
    adapted = to_langchain("echo", tools.registry)
    removed_echo(tools)
    call = AIMessage(content="", tool_calls=[{"name": "echo", "args": {"text": "a"}, "id": "c1"}])
    state = create_agent(FakeChatModel(messages=iter([call, AIMessage("done")])), [adapted]).invoke(
        {"messages": [("user", "go")]}
    )
    [message] = tool_messages(state)
    assert message.status == "error" and refused_as_gone(message.content) and tools.received == []


def test_openai_agents_removed_tool(tools: Tools) -> None:
    model = RawAgentsModel("echo", '{"text": "a"}')
    agent = AgentsAgent(name="x", model=model, tools=[to_openai_agents("echo", tools.registry)])
    removed_echo(tools)
    assert asyncio.run(Runner.run(agent, "go", run_config=CONFIG)).final_output == "done"
    assert refused_as_gone(agents_outputs(model)["c1"]) and tools.received == []


def test_pydantic_ai_removed_tool(tools: Tools) -> None:
    queue = [ToolCallPart("echo", '{"text": "a"}', tool_call_id="c1")]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[queue.pop(0)] if queue else [TextPart("done")], usage=PydanticUsage(input_tokens=1))

    agent = PydanticAgent(FunctionModel(respond), tools=[to_pydantic_ai("echo", tools.registry)])
    removed_echo(tools)
    result = agent.run_sync("go")
    part = tool_parts(result)["c1"]
    assert result.output == "done" and not retried(part) and refused_as_gone(str(part.content)) and tools.received == []


def test_agent_framework_removed_tool(tools: Tools) -> None:
    client = ScriptedClient([("c1", '{"text": "a"}')], tool="echo")
    agent = FrameworkAgent(client, tools=[to_agent_framework("echo", tools.registry)])
    removed_echo(tools)
    assert asyncio.run(agent.run("go")).text == "done"
    assert refused_as_gone(client.results()["c1"]) and tools.received == []


def test_autogen_removed_tool(tools: Tools) -> None:
    agent = AssistantAgent("a", model_client=autogen_client("echo", '{"text": "a"}'), tools=[to_autogen("echo", tools.registry)])
    removed_echo(tools)
    content, is_error = autogen_results(asyncio.run(agent.run(task="go")).messages)["c1"]
    assert is_error and refused_as_gone(content) and tools.received == []


def test_a_removed_tool_is_still_not_found_for_programs(tools: Tools) -> None:
    adapted = to_agent_framework("echo", tools.registry)
    removed_echo(tools)
    with pytest.raises(ToolNotFound) as raised:  # the direct call raises the refusal
        asyncio.run(adapted.invoke(arguments={"text": "a"}, tool_call_id="c9", skip_parsing=True))
    assert raised.value.kind == "not_found" and raised.value.call_id == "c9" and refused_as_gone(str(raised.value))
    assert raised.value.to_dict()["type"] == "ToolNotFound" and raised.value.suggestions == []
    # The registry's own answer is unchanged: it lists its tools.
    assert "Available tools: reply, admin_delete_all_users." in str(tools.registry.try_call("echo", {"text": "a"}).error)


# Calls the framework itself fails on, whatever the tool (docs/integrations/index.md, "Calls a framework fails on") ---


class CallsAgentsModel(AgentsModel):
    """The scripted Agents SDK model, making these calls (call id, tool, arguments) in one response."""

    def __init__(self, calls: list[tuple[str, str, str]]) -> None:
        super().__init__([])
        self.turn: list[tuple[str, str, str]] | None = calls

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> AgentsResponse:
        if self.turn is None:
            return await super().get_response(system_instructions, input, *args, **kwargs)
        self.inputs.append(input)
        turn, self.turn = self.turn, None
        output = [ResponseFunctionToolCall(type="function_call", call_id=c, name=n, arguments=a) for c, n, a in turn]
        return AgentsResponse(output=output, usage=Usage(), response_id=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        ([("c1", "nope", "{}")], "Tool nope not found in agent x"),
        ([("c1", "ECHO", '{"text": "a"}')], "Tool ECHO not found in agent x"),  # a name differing in case only
        ([("c1", "echo", '{"text": "a"}'), ("c1", "echo", '{"text": "b"}')], "Model reused a tool call ID"),
        ([("", "echo", '{"text": "a"}')], "require a non-empty string call ID"),
    ],
    ids=["unknown-tool", "case-only", "one-id-two-calls", "empty-id"],
)
def test_openai_agents_boundary_calls(tools: Tools, calls: list[tuple[str, str, str]], message: str) -> None:
    agent = AgentsAgent(name="x", model=CallsAgentsModel(calls), tools=[to_openai_agents("echo", tools.registry)])
    with pytest.raises(ModelBehaviorError, match=message):
        asyncio.run(Runner.run(agent, "go", run_config=CONFIG))
    assert tools.received == []


def test_openai_agents_boundary_the_same_call_twice_runs_once(tools: Tools) -> None:
    model = CallsAgentsModel([("c1", "echo", '{"text": "a"}'), ("c1", "echo", '{"text": "a"}')])
    agent = AgentsAgent(name="x", model=model, tools=[to_openai_agents("echo", tools.registry)])
    assert asyncio.run(Runner.run(agent, "go", run_config=CONFIG)).final_output == "done"
    assert tools.received == ["a"] and agents_outputs(model) == {"c1": "a"}


def test_pydantic_ai_boundary_a_repeated_call_id(tools: Tools) -> None:
    # Even for the same call sent twice.
    queue = [[ToolCallPart("echo", '{"text": "a"}', tool_call_id="c1"), ToolCallPart("echo", '{"text": "a"}', tool_call_id="c1")]]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=queue.pop(0) if queue else [TextPart("done")], usage=PydanticUsage(input_tokens=1))

    agent = PydanticAgent(FunctionModel(respond), tools=[to_pydantic_ai("echo", tools.registry)])
    with pytest.raises(UnexpectedModelBehavior, match="Function tool calls must have unique `tool_call_id` values"):
        agent.run_sync("go")
    assert tools.received == []


@pytest.mark.parametrize("native", [False, True], ids=["harness", "native"])
def test_langchain_boundary_no_call_id(tools: Tools, native: bool) -> None:
    @lc_tool
    def echo(text: str) -> str:
        """Echo a text."""
        tools.received.append(text)
        return text

    call = AIMessage(content="", tool_calls=[{"name": "echo", "args": {"text": "a"}, "id": None}])
    adapted = echo if native else to_langchain("echo", tools.registry)
    agent = create_agent(FakeChatModel(messages=iter([call, AIMessage("done")])), [adapted])
    with pytest.raises(TypeError, match="Tool echo returned unexpected type"):  # ToolNode wants a ToolMessage for it
        agent.invoke({"messages": [("user", "go")]})
    assert tools.received == ["a"]  # the tool ran


@pytest.mark.parametrize("call_id", [7, None])
@pytest.mark.parametrize("native", [False, True], ids=["harness", "native"])
def test_autogen_boundary_a_call_id_that_is_not_a_string(tools: Tools, call_id: Any, native: bool) -> None:
    def echo(text: str) -> str:
        """Echo a text."""
        tools.received.append(text)
        return text

    # As test_autogen_boundary: the error kills AssistantAgent's tool step, and agent.run() never returns.
    tool = FunctionTool(echo, description="Echo a text.") if native else to_autogen("echo", tools.registry)
    execute: Callable[..., Any] = AssistantAgent._execute_tool_call
    step = execute(
        FunctionCall(id=call_id, name="echo", arguments='{"text": "a"}'),
        workbench=[StaticWorkbench([tool])],
        handoff_tools=[],
        agent_name="a",
        cancellation_token=CancellationToken(),
        stream=asyncio.Queue(),
    )
    with pytest.raises(ValidationError, match="FunctionExecutionResult"):
        asyncio.run(step)
    assert tools.received == ["a"]  # the tool ran
