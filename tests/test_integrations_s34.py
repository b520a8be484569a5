"""Review 34 of the framework adapters and dispatch.

Shown: with ``name=`` / ``names=`` the text the model reads names the tool as the framework
showed it (in a real OpenAI Agents run, the model that calls the tool by that name again
succeeds), while the error the application gets keeps the registry's name; ``dispatch_gemini``
names a tool as the call sent it; a LangChain tool whose schema holds ``$ref``s LangChain cannot
follow (JSON-Pointer-escaped, percent-encoded) is still bound by LangChain; and ``dispatch``
gives each call its own copy of ``context=``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from agents import Agent, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tool_context import ToolContext
from agents.usage import Usage
from autogen_core import CancellationToken
from langchain_core.utils.function_calling import convert_to_openai_tool
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness_one import Call, CallResult, ToolArgumentError, ToolError, ToolExecutionError, ToolRegistry, define_tool
from harness_one._errors import model_message
from harness_one.dispatch import adispatch, dispatch, dispatch_gemini
from harness_one.integrations.agent_framework import to_agent_framework
from harness_one.integrations.autogen import to_autogen
from harness_one.integrations.langchain import to_langchain
from harness_one.integrations.openai_agents import as_openai_agents_tools, to_openai_agents
from harness_one.integrations.pydantic_ai import to_pydantic_ai

AGAIN = re.compile(r"call '([^']+)' again")


def adder() -> ToolRegistry:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry, rate_limit={"rate": 0.001, "burst": 1})
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    return registry


# --------------------------------------------------------------------------- 1. the name shown, in the model's text


class Obedient(Model):
    """Calls ``plus`` with a bad argument, then the tool its error text says to call again; then answers."""

    def __init__(self) -> None:
        self.read: list[str] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        outputs = [i["output"] for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
        self.read[:] = outputs
        if len(outputs) >= 2:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            message = ResponseOutputMessage(id="m", role="assistant", status="completed", type="message", content=[text])
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        again = AGAIN.search(outputs[-1]) if outputs else None
        name, arguments = (again.group(1), {"a": 2}) if again else ("plus", {"a": "x"})
        call = ResponseFunctionToolCall(
            type="function_call", call_id=f"c{len(outputs)}", name=name, arguments=json.dumps(arguments), id=f"fc{len(outputs)}"
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_openai_agents_model_that_obeys_the_error_text_calls_the_tool_shown() -> None:
    registry = adder()
    model = Obedient()
    agent = Agent(name="x", model=model, tools=as_openai_agents_tools(["add"], registry, names={"add": "plus"}))
    result = asyncio.run(asyncio.wait_for(Runner.run(agent, "go"), 10))
    assert result.final_output == "done"  # not ModelBehaviorError: Tool add not found
    assert "call 'plus' again" in model.read[0] and "'add'" not in model.read[0]
    assert model.read[1] == "3"


def test_every_adapter_names_the_tool_as_shown_in_the_models_text() -> None:
    registry = adder()
    bad = {"a": "x"}
    lc = to_langchain("add", registry, name="plus").invoke({"name": "plus", "args": bad, "id": "c1", "type": "tool_call"})
    oa_tool = to_openai_agents("add", registry, name="plus")
    oa = asyncio.run(
        oa_tool.on_invoke_tool(
            ToolContext(context=None, tool_name="plus", tool_call_id="c2", tool_arguments='{"a":"x"}'), '{"a":"x"}'
        )
    )
    af = asyncio.run(to_agent_framework("add", registry, name="plus").invoke(arguments=bad, tool_call_id="c3"))[0].text
    with pytest.raises(ToolArgumentError) as autogen:
        asyncio.run(to_autogen("add", registry, name="plus").run_json(bad, CancellationToken(), call_id="c4"))
    texts = {"langchain": lc.content, "openai-agents": oa, "agent-framework": af, "autogen": str(autogen.value)}
    for adapter, text in texts.items():
        assert "Invalid arguments for tool 'plus'" in text and "call 'plus' again" in text, adapter
        assert "'add'" not in text, adapter
    assert autogen.value.tool == "add"  # the error object keeps the registry's name


def test_pydantic_ai_retry_prompt_names_the_tool_shown() -> None:
    registry = adder()
    seen: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PydanticResponse:
        replies = [
            str(getattr(p, "content", "")) for m in messages for p in getattr(m, "parts", []) if p.part_kind != "user-prompt"
        ]
        if len(messages) == 1:
            return PydanticResponse(parts=[ToolCallPart("plus", {"a": "x"}, tool_call_id="p1")])
        seen.extend(replies)
        return PydanticResponse(parts=[TextPart("done")])

    PydanticAgent(FunctionModel(respond), tools=[to_pydantic_ai("add", registry, name="plus")]).run_sync("go")
    assert any("call 'plus' again" in text for text in seen), seen
    assert not any("'add'" in text for text in seen), seen


def test_other_refusals_and_context_failures_name_the_tool_shown() -> None:
    registry = adder()
    tool = to_langchain("add", registry, name="plus")
    assert tool.invoke({"name": "plus", "args": {"a": 1}, "id": "r1", "type": "tool_call"}).content == "2"
    limited = tool.invoke({"name": "plus", "args": {"a": 1}, "id": "r2", "type": "tool_call"}).content
    assert limited.startswith("Tool 'plus' is rate limited")

    def broken(runtime: Any) -> Mapping[str, Any]:
        raise RuntimeError("secret")

    failed = to_langchain("add", registry, name="plus", context=broken)
    text = failed.invoke({"name": "plus", "args": {"a": 1}, "id": "r3", "type": "tool_call"}).content
    assert text.startswith("Tool 'plus' was not called")


def test_the_tools_own_text_keeps_the_registry_name() -> None:
    """Only harness-one's wording of the tool is renamed: the tool's exception text is the tool's, as written."""
    registry = ToolRegistry(autoload=False)

    def weather(city: str) -> str:
        """Weather."""
        return {"city": city}["weather"]  # the tool's own bug: KeyError('weather')

    registry.add(weather, name="weather")
    text = (
        to_langchain("weather", registry, name="get_forecast")
        .invoke({"name": "get_forecast", "args": {"city": "Oslo"}, "id": "w1", "type": "tool_call"})
        .content
    )
    assert text.startswith("Tool 'get_forecast' failed: KeyError: 'weather'"), text


def test_a_direct_call_raises_the_error_under_the_registry_name() -> None:
    registry = adder()
    with pytest.raises(ToolArgumentError) as caught:
        asyncio.run(to_agent_framework("add", registry, name="plus")(a="x"))
    assert caught.value.tool == "add" and "call 'add' again" in str(caught.value)


def test_dispatch_gemini_names_the_tool_as_the_call_sent_it() -> None:
    registry = ToolRegistry(autoload=False)
    schema = {"type": "object", "properties": {"code": {"type": "integer"}}, "required": ["code"]}
    registry.add(lambda code: code, name="2fa-check", parameters=schema)
    (answer,) = dispatch_gemini(registry, [{"function_call": {"id": "g1", "name": "_.2fa-check", "args": {"code": "x"}}}])
    error = answer["response"]["error"]
    assert answer["name"] == "_.2fa-check"
    assert "Invalid arguments for tool '_.2fa-check'" in error and "call '_.2fa-check' again" in error
    assert "'2fa-check'" not in error
    (same,) = dispatch_gemini(registry, [{"function_call": {"id": "g2", "name": "2fa-check", "args": {"code": "x"}}}])
    assert "call '2fa-check' again" in same["response"]["error"]  # sent by its own name: named so


# --------------------------------------------------------------------------- 2. LangChain and escaped $refs


@pytest.mark.parametrize(
    ("key", "ref"),
    [("a/b", "a~1b"), ("x~y", "x~0y"), ("with space", "with%20space"), ("Page[Item]", "Page%5BItem%5D")],
)
def test_langchain_binds_a_schema_with_escaped_refs(key: str, ref: str) -> None:
    registry = ToolRegistry(autoload=False)
    item = {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}
    schema = {"type": "object", "properties": {"p": {"$ref": f"#/$defs/{ref}"}}, "required": ["p"], "$defs": {key: item}}
    registry.add(lambda **kw: kw, name="t", parameters=schema)
    tool = to_langchain("t", registry)
    shown = convert_to_openai_tool(tool)["function"]["parameters"]  # what bind_tools sends (KeyError before)
    assert shown["properties"]["p"] == item
    refused = tool.invoke({"name": "t", "args": {"p": {"v": "1"}}, "id": "t1", "type": "tool_call"}).content
    assert "$.p.v: expected integer" in refused  # the harness still validates against its own schema
    assert registry.get("t").parameters == schema  # the harness tool's schema is left alone


@pytest.mark.parametrize(("key", "ref"), [("a/b", "a~1b"), ("with space", "with%20space")])
def test_langchain_binds_a_recursive_schema_with_escaped_refs(key: str, ref: str) -> None:
    registry = ToolRegistry(autoload=False)
    node = {"type": "object", "properties": {"next": {"$ref": f"#/$defs/{ref}"}}}
    schema = {"type": "object", "properties": {"n": {"$ref": f"#/$defs/{ref}"}}, "$defs": {key: node}}
    registry.add(lambda **kw: kw, name="t", parameters=schema)
    shown = convert_to_openai_tool(to_langchain("t", registry))["function"]["parameters"]
    assert shown["properties"]["n"] == {"type": "object", "properties": {"next": {}}}  # LangChain's cut of a cycle
    assert registry.get("t").parameters == schema


def test_langchain_keeps_a_schema_it_can_read_as_it_is() -> None:
    registry = ToolRegistry(autoload=False)
    schema = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
    }
    registry.add(lambda **kw: kw, name="tree", parameters=schema)
    assert to_langchain("tree", registry).args_schema == schema


# --------------------------------------------------------------------------- 3. dispatch: each call its own context


def recorder() -> ToolRegistry:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def t(n: int, call: Call) -> dict[str, Any]:
        """Reads the context, then writes into it."""
        seen = dict(call.context or {})
        assert call.context is not None
        call.context["user"] = f"hijacked-by-{n}"  # type: ignore[index]
        return seen

    return registry


CALLS = [{"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": json.dumps({"n": i})}} for i in range(3)]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_dispatch_gives_each_call_its_own_copy_of_context(concurrency: int) -> None:
    registry, app = recorder(), {"user": "alice"}
    answers = dispatch(registry, CALLS, concurrency=concurrency, context=app)
    assert [json.loads(a["content"]) for a in answers] == [{"user": "alice"}] * 3
    assert app == {"user": "alice"}


def test_adispatch_gives_each_call_its_own_copy_of_context() -> None:
    registry, app = recorder(), {"user": "alice"}
    answers = asyncio.run(asyncio.wait_for(adispatch(registry, CALLS, concurrency=1, context=app), 10))
    assert [json.loads(a["content"]) for a in answers] == [{"user": "alice"}] * 3
    assert app == {"user": "alice"}


class Vault(Mapping[str, Any]):
    """A mapping whose values cannot be read (a vault that is down)."""

    def __getitem__(self, key: str) -> Any:
        raise ToolError("vault down: token s3cr3t")

    def __iter__(self) -> Iterator[str]:
        return iter(["user"])

    def __len__(self) -> int:
        return 1


def test_dispatch_refuses_a_call_whose_context_cannot_be_copied() -> None:
    (answer,) = dispatch(recorder(), CALLS[:1], context=Vault())
    assert answer["content"].startswith("Error: Tool 't' was not called: the application's context= mapping raised ToolError")
    assert "s3cr3t" not in answer["content"]


def test_a_tools_own_exception_text_naming_it_is_left_as_written() -> None:
    """Only the "Tool 'add' failed" harness-one wrote is renamed: the exception's "no route for 'add'" is the tool's."""
    failure = ToolExecutionError(KeyError("no route for 'add'"), tool="add")
    assert model_message(failure, "plus") == "Tool 'plus' failed: KeyError: \"no route for 'add'\""
    result = CallResult(False, None, failure, "add", "c-1", 0.0, 1)
    assert result.for_model("plus") == "Error: " + model_message(failure, "plus") and "'add'" in result.for_model()
