"""Adapters, third review: blank ``raw`` text in the Agent Framework, AutoGen's falsy non-object
arguments through :class:`HarnessWorkbench`, the name a framework shows for a tool (``name=`` /
``names=``, e.g. Gemini's), and LangChain's sync ``invoke`` of an async tool inside a running loop.

Each runs the real framework with its own offline fake model, as the other integration tests.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from agent_framework import Agent as AFAgent
from agents import Agent, RunConfig, Runner
from agents.models.interface import Model, ModelResponse
from agents.usage import Usage
from approval_support import Bank
from autogen_agentchat.agents import AssistantAgent
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, RequestUsage
from autogen_core.tools import FunctionTool as AutoGenFunctionTool
from autogen_core.tools import ToolOverride
from autogen_ext.models.replay import ReplayChatCompletionClient
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from pydantic_ai import Agent as PAIAgent
from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.messages import ModelResponse as PAIResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.google import _function_declaration_from_tool
from test_integration_agent_framework import OR_RAW, ScriptedClient
from test_integration_autogen import MODEL_INFO, results
from test_integration_langchain import ScriptedModel as LCModel
from test_integration_langchain import tool_messages

from harness_one import Call, Tool, ToolDefinitionError, ToolRegistry, define_tool
from harness_one.export import GEMINI_NAME, gemini_name
from harness_one.integrations.agent_framework import as_agent_framework_tools, to_agent_framework
from harness_one.integrations.autogen import HarnessWorkbench, as_autogen_tools, to_autogen
from harness_one.integrations.langchain import approval_middleware, as_langchain_tools, to_langchain
from harness_one.integrations.openai_agents import as_openai_agents_tools, to_openai_agents
from harness_one.integrations.pydantic_ai import as_pydantic_ai_tools, to_pydantic_ai

if TYPE_CHECKING:
    from conftest import PerUserAdd


# ---------------------------------------------------------------- Agent Framework: blank text under "raw"


@pytest.mark.parametrize("arguments", ['""', {"raw": ""}, {"raw": "   "}, {"raw": "\n"}])
def test_a_blank_raw_is_refused_not_read_as_no_arguments(per_user_add: PerUserAdd, arguments: Any) -> None:
    # The framework turns the JSON text "" into {"raw": ""}; the adapter passed the blank text on, which the
    # registry reads as no arguments: a tool whose parameters all have defaults ran with them.
    registry, add, seen = per_user_add
    client = ScriptedClient([("x-0", arguments)])
    asyncio.run(AFAgent(client, tools=[to_agent_framework(add, registry)]).run("add"))
    assert client.results()["x-0"] == (
        "Error: Invalid arguments for tool 'add' (1 problem):\n- $: arguments must be a JSON object, got string"
        f"{OR_RAW}a, b\nFix the arguments and call 'add' again."
    )
    assert seen == []


def test_a_blank_raw_never_runs_a_tool_with_its_defaults() -> None:
    registry = ToolRegistry(autoload=False)
    ran: list[bool] = []

    @define_tool(registry=registry)
    def delete_all(confirm: bool = False) -> str:
        """Delete everything when confirm is true; otherwise a dry run."""
        ran.append(confirm)
        return f"ran with confirm={confirm}"

    client = ScriptedClient([("d-0", {"raw": ""}), ("d-1", {})], tool="delete_all")
    asyncio.run(AFAgent(client, tools=[to_agent_framework(delete_all, registry)]).run("go"))
    answers = client.results()
    assert answers["d-0"].startswith(
        "Error: Invalid arguments for tool 'delete_all' (1 problem):\n- $: arguments must be a JSON object, got string"
    )
    assert answers["d-1"] == "ran with confirm=False" and ran == [False]  # {} is no arguments: the defaults apply


def test_a_tool_with_a_raw_parameter_takes_a_blank_raw() -> None:
    registry = ToolRegistry(autoload=False)
    ran: list[str] = []

    @define_tool(registry=registry)
    def shell(raw: str) -> str:
        """Run a command."""
        ran.append(raw)
        return "ran"

    client = ScriptedClient([("s-0", {"raw": ""})], tool="shell")
    asyncio.run(AFAgent(client, tools=[to_agent_framework(shell, registry)]).run("go"))
    assert client.results() == {"s-0": "ran"} and ran == [""]  # the model's own object, for a tool that takes raw


# ---------------------------------------------------------------- AutoGen: falsy JSON that is not an object


def ping_registry() -> tuple[ToolRegistry, list[int]]:
    registry = ToolRegistry(autoload=False)
    ran: list[int] = []

    @define_tool(registry=registry)
    def ping(n: int = 1) -> str:
        """Ping n times."""
        ran.append(n)
        return f"pong {n}"

    return registry, ran


FALSY = [("[]", "array"), ("0", "integer"), ("false", "boolean"), ('""', "string"), ("null", "null")]


def replay_calls(texts: list[str], *, name: str = "ping") -> ReplayChatCompletionClient:
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    calls = [FunctionCall(id=f"c{i}", name=name, arguments=t) for i, t in enumerate(texts)]
    return ReplayChatCompletionClient(
        [CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False)], model_info=MODEL_INFO
    )


def test_harness_workbench_refuses_falsy_arguments_that_are_not_an_object() -> None:
    # AutoGen's StaticWorkbench does `if not arguments: arguments = {}`: the tool ran with its defaults.
    registry, ran = ping_registry()
    texts = [t for t, _ in FALSY] + ["{}", '{"n": 2}']
    workbench = HarnessWorkbench([to_autogen("ping", registry)])
    out = asyncio.run(AssistantAgent("a", model_client=replay_calls(texts), workbench=workbench).run(task="go"))
    answers = results(out.messages)
    for i, (_, got) in enumerate(FALSY):
        assert answers[f"c{i}"] == (
            f"Invalid arguments for tool 'ping' (1 problem):\n- $: arguments must be a JSON object, got {got}\n"
            "Fix the arguments and call 'ping' again.",
            True,
        )
    assert answers["c5"] == ("pong 1", False) and answers["c6"] == ("pong 2", False)
    assert ran == [1, 2]


def test_plain_tools_run_falsy_arguments_with_the_defaults() -> None:
    # What the AutoGen page says of tools=: AutoGen's own workbench makes {} of them before the tool sees them.
    registry, ran = ping_registry()
    agent = AssistantAgent("a", model_client=replay_calls(["[]", "null"]), tools=[to_autogen("ping", registry)])
    answers = results(asyncio.run(agent.run(task="go")).messages)
    assert answers == {"c0": ("pong 1", False), "c1": ("pong 1", False)} and ran == [1, 1]


def test_harness_workbench_leaves_other_tools_and_direct_calls_as_autogen_does() -> None:
    registry, ran = ping_registry()
    other: list[int] = []

    def count(n: int = 3) -> str:
        """Count to n."""
        other.append(n)
        return f"counted {n}"

    workbench = HarnessWorkbench(
        [to_autogen("ping", registry), AutoGenFunctionTool(count, description="Count to n.")],
        tool_overrides={"ping": ToolOverride(name="ping2")},
    )

    async def go() -> list[tuple[str, bool]]:
        answers = [
            await workbench.call_tool("count", []),  # not a harness tool: {} as in AutoGen
            await workbench.call_tool("ping2"),  # no arguments given: none
            await workbench.call_tool("ping2", None),  # what AssistantAgent passes for the model's null
            await workbench.call_tool("ping2", {"n": 4}),
        ]
        return [(r.to_text(), r.is_error) for r in answers]

    assert asyncio.run(go()) == [
        ("counted 3", False),
        ("pong 1", False),
        (
            "Invalid arguments for tool 'ping2' (1 problem):\n- $: arguments must be a JSON object, got null\n"
            "Fix the arguments and call 'ping2' again.",
            True,
        ),
        ("pong 4", False),
    ]
    assert other == [3] and ran == [1, 4]


def test_harness_workbench_takes_a_tool_overrides_name_on_the_agents_stream_path() -> None:
    # AssistantAgent calls call_tool_stream, which (in AutoGen) finds no tool by its override name: "Tool ping2 not found."
    registry, ran = ping_registry()
    workbench = HarnessWorkbench([to_autogen("ping", registry)], tool_overrides={"ping": ToolOverride(name="ping2")})
    agent = AssistantAgent("a", model_client=replay_calls(['{"n": 5}', "[]"], name="ping2"), workbench=workbench)
    out = asyncio.run(agent.run(task="go"))
    assert results(out.messages) == {
        "c0": ("pong 5", False),
        "c1": (
            "Invalid arguments for tool 'ping2' (1 problem):\n- $: arguments must be a JSON object, got array\n"
            "Fix the arguments and call 'ping2' again.",
            True,
        ),
    }
    names = [r.name for m in out.messages if type(m).__name__ == "ToolCallExecutionEvent" for r in m.content]
    assert names == ["ping2", "ping2"] and ran == [5]  # answered under the name the model called


# ---------------------------------------------------------------- the name a framework shows


def two_factor() -> tuple[ToolRegistry, list[tuple[str, Any]]]:
    """A registry whose tool ``2fa-check`` starts with a digit (Gemini refuses it); ``ran`` holds (call id, code)."""
    registry = ToolRegistry(autoload=False)
    ran: list[tuple[str, Any]] = []

    def check(code: str, call: Call) -> str:
        ran.append((call.call_id, code))
        return f"checked {code}"

    registry.add(Tool.create(check, name="2fa-check", description="Check a 2FA code."))
    return registry, ran


SHOWN = "_.2fa-check"


def test_the_tool_name_error_says_which_providers_accept_it() -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        Tool.create(lambda: None, name="2fa check")
    assert caught.value.message == (
        "Invalid tool name '2fa check': use 1-64 letters, digits, '_' or '-' (the names OpenAI and Anthropic accept; "
        "Gemini also needs a letter or '_' first, so its export renames the others)."
    )


def test_pydantic_ai_shows_gemini_a_name_it_accepts() -> None:
    registry, ran = two_factor()
    plain = to_pydantic_ai("2fa-check", registry)
    assert not GEMINI_NAME.match(_function_declaration_from_tool(plain.tool_def)["name"])  # the request would fail
    tool = to_pydantic_ai("2fa-check", registry, name=gemini_name)
    assert _function_declaration_from_tool(tool.tool_def)["name"] == SHOWN and GEMINI_NAME.match(SHOWN)
    queue = [ToolCallPart(SHOWN, {"code": "123"}, tool_call_id="p-1")]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PAIResponse:
        assert [t.name for t in info.function_tools] == [SHOWN]
        return PAIResponse(parts=[queue.pop(0)] if queue else [TextPart("done")])

    result = PAIAgent(FunctionModel(respond), tools=[tool]).run_sync("go")
    parts = [p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    assert [(p.tool_name, p.content) for p in parts] == [(SHOWN, "checked 123")] and ran == [("p-1", "123")]


def test_langchain_shows_the_name_and_calls_the_harness_tool() -> None:
    registry, ran = two_factor()
    [tool] = as_langchain_tools(["2fa-check"], registry, names={"2fa-check": "two_factor_check"})
    assert tool.name == "two_factor_check"
    turns = [AIMessage(content="", tool_calls=[{"name": "two_factor_check", "args": {"code": "7"}, "id": "l-1"}])]
    model = LCModel(messages=iter([*turns, AIMessage(content="done")]))
    agent = create_agent(model, [tool], middleware=[approval_middleware([tool])])
    state = agent.invoke({"messages": [("user", "go")]})
    assert [(m.name, m.content, m.status) for m in tool_messages(state)] == [("two_factor_check", "checked 7", "success")]
    assert ran == [("l-1", "7")]


class NamedModel(Model):
    """The Agents SDK's model interface calling one tool by ``name`` once, then answering text."""

    def __init__(self, name: str, arguments: dict[str, Any]) -> None:
        self.calls = [("o-1", name, arguments)]
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        if self.calls:
            call_id, name, arguments = self.calls.pop(0)
            output: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments), id=f"fc-{call_id}"
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


def test_openai_agents_shows_the_name_and_calls_the_harness_tool() -> None:
    registry, ran = two_factor()
    [tool] = as_openai_agents_tools(["2fa-check"], registry, names=gemini_name)
    assert tool.name == SHOWN
    model = NamedModel(SHOWN, {"code": "9"})
    result = Runner.run_sync(Agent("a", model=model, tools=[tool]), "go")
    outputs = [i for i in model.inputs[-1] if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert result.final_output == "done" and [o["output"] for o in outputs] == ["checked 9"] and ran == [("o-1", "9")]
    assert to_openai_agents("2fa-check", registry, name="tfa").name == "tfa"


def test_agent_framework_shows_the_name_and_calls_the_harness_tool() -> None:
    registry, ran = two_factor()
    [tool] = as_agent_framework_tools(["2fa-check"], registry, names=gemini_name)
    assert tool.name == SHOWN
    client = ScriptedClient([("a-1", {"code": "5"}), ("a-2", {"code": 5})], tool=SHOWN)
    asyncio.run(AFAgent(client, tools=[tool]).run("go"))
    assert client.results() == {
        "a-1": "checked 5",
        # (the model's text names the tool as the model was shown it: it can call it by no other name)
        "a-2": f"Error: Invalid arguments for tool '{SHOWN}' (1 problem):\n- $.code: expected string, got integer 5\n"
        f"Fix the arguments and call '{SHOWN}' again.",
    }
    assert ran == [("a-1", "5")]
    assert to_agent_framework("2fa-check", registry, name="tfa").name == "tfa"


def test_autogen_shows_the_name_and_calls_the_harness_tool() -> None:
    registry, ran = two_factor()
    [tool] = as_autogen_tools(["2fa-check"], registry, names=gemini_name)
    assert tool.name == SHOWN and tool.schema["name"] == SHOWN
    agent = AssistantAgent("a", model_client=replay_calls(['{"code": "4"}'], name=SHOWN), tools=[tool])
    assert results(asyncio.run(agent.run(task="go")).messages) == {"c0": ("checked 4", False)}
    assert ran == [("c0", "4")]
    assert to_autogen("2fa-check", registry, name="tfa").schema["name"] == "tfa"


def test_names_that_clash_or_are_not_names_are_refused() -> None:
    registry, _ = two_factor()

    @define_tool(registry=registry)
    def tfa(code: str) -> str:
        """Another check."""
        return code

    with pytest.raises(ValueError) as clash:
        as_pydantic_ai_tools(["2fa-check", tfa], registry, names={"2fa-check": "tfa"})
    assert str(clash.value) == "as_pydantic_ai_tools(): names= shows tools '2fa-check', 'tfa' under one name, 'tfa'."
    with pytest.raises(ValueError) as empty:
        to_langchain("2fa-check", registry, name=lambda name: "")
    assert str(empty.value) == "The name shown for tool '2fa-check' must be a non-empty string, got ''."
    with pytest.raises(TypeError) as mapping:
        to_autogen("2fa-check", registry, name={"2fa-check": "x"})  # type: ignore[arg-type]
    assert str(mapping.value) == "name= must be a string, a function of the tool's name, or None; got dict."
    with pytest.raises(TypeError) as text:
        as_agent_framework_tools(["2fa-check"], registry, names="x")  # type: ignore[arg-type]
    assert str(text.value) == (
        "names= must be a mapping of tool names to the names shown, a function of the tool's name, or None; got str."
    )


# ---------------------------------------------------------------- LangChain: sync invoke inside a running loop

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


def test_sync_invoke_of_an_async_tool_inside_a_running_loop_is_answered() -> None:
    # The model read "Tool 'add' is async and an event loop is running here: use 'await registry.acall(...)'."
    registry = ToolRegistry(autoload=False)
    seen: list[tuple[str, str]] = []

    @define_tool(registry=registry)
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        seen.append((request_id.get(), threading.current_thread().name))
        await asyncio.sleep(0)
        return a + b

    tool = to_langchain("add", registry)

    async def handler() -> Any:  # an async handler (or a notebook cell) calling the sync API
        request_id.set("req-7")
        return tool.invoke({"name": "add", "args": {"a": 1, "b": 1}, "id": "d1", "type": "tool_call"})

    message = asyncio.run(handler())
    assert isinstance(message, ToolMessage)
    assert (message.content, message.status, message.tool_call_id) == ("2", "success", "d1")
    [(seen_id, thread)] = seen
    assert seen_id == "req-7"  # the caller's context reached the worker thread
    assert thread.startswith("harness-one-langchain")


def test_sync_invoke_of_a_sync_tool_inside_a_running_loop_stays_in_the_callers_thread() -> None:
    registry = ToolRegistry(autoload=False)
    threads: list[str] = []

    @define_tool(registry=registry)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        threads.append(threading.current_thread().name)
        return a + b

    tool = to_langchain("add", registry)

    async def handler() -> Any:
        return tool.invoke({"name": "add", "args": {"a": 2, "b": 3}, "id": "d2", "type": "tool_call"})

    message = asyncio.run(handler())
    assert (message.content, message.status) == ("5", "success")
    assert threads == [threading.current_thread().name]


def test_openai_agents_approval_of_a_renamed_tool_runs_it_once() -> None:
    # The SDK records an approval under the name it knows the tool by: the adapter asks it by that name.
    bank = Bank(per=1000)
    tool = to_openai_agents("transfer", bank.registry, name="send_money", context={"user": "alice"})
    model = NamedModel("send_money", {"to": "ann", "amount": 500})
    agent = Agent("bank", model=model, tools=[tool])

    async def scenario() -> Any:
        result = await Runner.run(agent, "pay", run_config=RunConfig(tracing_disabled=True))
        [pending] = result.interruptions
        assert (pending.tool_name, pending.call_id, bank.sent) == ("send_money", "o-1", [])
        state = result.to_state()
        state.approve(pending)
        return await Runner.run(agent, state, run_config=RunConfig(tracing_disabled=True))

    assert asyncio.run(scenario()).final_output == "done"
    outputs = [i for i in model.inputs[-1] if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert [o["output"] for o in outputs] == ["sent 500 to ann"]
    assert bank.sent == [("o-1", "ann", 500, "alice")]
    assert bank.registry.stats()["approval"] == {"pending": 0, "approved": 1, "denied": 0}
