"""Adapters, review 27: ``from_langchain`` validating with the tool's pydantic model (a validator's refusal is
an argument error; a misspelt argument is refused; no pydantic titles; a model that accepts field names keeps
LangChain's schema), error text capped in every adapter and the MCP server, a tool of another registry through
``registry=``, and non-string dict keys in Pydantic AI's data.

Each runs the real framework (LangChain, AutoGen, Pydantic AI, ...) offline.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from autogen_core import CancellationToken
from langchain_core.tools import StructuredTool, ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from mcp_support import Session
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator
from pydantic_ai import Agent as PAIAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness_one import CircuitOpen, ManualClock, Tool, ToolArgumentError, ToolError, ToolExecutionError, ToolRegistry, defineTool
from harness_one._render import json_data
from harness_one.integrations.agent_framework import as_agent_framework_tools, to_agent_framework
from harness_one.integrations.autogen import as_autogen_tools, to_autogen
from harness_one.integrations.langchain import as_langchain_tools, from_langchain, to_langchain
from harness_one.integrations.openai_agents import as_openai_agents_tools, to_openai_agents
from harness_one.integrations.pydantic_ai import as_pydantic_ai_tools, to_pydantic_ai
from harness_one.mcp import create_server

# ---------------------------------------------------------------- from_langchain: the tool's pydantic model


class MailArgs(BaseModel):
    email: str

    @field_validator("email")
    @classmethod
    def has_at(cls, value: str) -> str:
        if "@" not in value:
            raise ValueError("email must contain @")
        return value


def test_a_validator_refusal_is_an_argument_error_the_breaker_does_not_count() -> None:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals
    mail = StructuredTool.from_function(lambda email: f"mailed {email}", name="mail", description="Send", args_schema=MailArgs)
    from_langchain(mail, registry=registry, circuit_breaker={"failure_ratio": 0.5, "min_calls": 3, "window": 60, "open_for": 60})
    for _ in range(4):  # past min_calls: a count of them would have opened the circuit
        result = registry.try_call("mail", {"email": "nobody"})
        assert isinstance(result.error, ToolArgumentError)
        assert result.error.kind == "invalid_arguments"
        assert [(p.path, p.message) for p in result.error.problems] == [("$.email", "Value error, email must contain @")]
    assert registry.try_call("mail", {"email": "a@b.c"}).value == "mailed a@b.c"  # another user's valid call runs


def test_the_tool_body_failing_is_still_a_tool_failure() -> None:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals

    @tool
    def boom(x: int) -> str:
        """boom"""
        raise ToolException("broken backend")

    from_langchain(boom, registry=registry, circuit_breaker={"failure_ratio": 0.5, "min_calls": 3, "window": 60, "open_for": 60})
    for _ in range(3):
        error = registry.try_call("boom", {"x": 1}).error
        assert isinstance(error, ToolExecutionError)
        assert error.message == "Tool 'boom' failed: ToolException: broken backend"
    assert isinstance(registry.try_call("boom", {"x": 1}).error, CircuitOpen)


def test_a_misspelt_argument_is_refused_not_dropped() -> None:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals

    @tool
    def search(query: str, limit: int = 10, include_deleted: bool = False) -> str:
        """Search records."""
        return f"query={query} limit={limit} include_deleted={include_deleted}"

    built = from_langchain(search, registry=registry)
    assert built.parameters["additionalProperties"] is False
    error = registry.try_call("search", {"query": "x", "limt": 2}).error
    assert isinstance(error, ToolArgumentError)
    assert [(p.path, p.message) for p in error.problems] == [
        ("$.limt", "unexpected property; allowed properties: include_deleted, limit, query")
    ]
    assert registry.call("search", {"query": "x", "limit": 2}) == "query=x limit=2 include_deleted=False"


class Inner(BaseModel):
    a: int


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    b: int = 0


class Nested(BaseModel):
    inner: Inner
    open: Open = Open()
    alias_field: str = Field(alias="from", default="x")


def test_nested_models_are_closed_and_an_alias_is_the_name_shown() -> None:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals

    @tool(args_schema=Nested)
    def nested(inner: Inner, open: Open, alias_field: str = "x") -> str:
        """nested"""
        return f"a={inner.a} {alias_field}"

    built = from_langchain(nested, registry=registry)
    assert set(built.parameters["properties"]) == {"inner", "open", "from"}
    assert "title" not in built.parameters and "description" not in built.parameters  # the tool's own description
    assert built.parameters["properties"]["from"] == {"default": "x", "type": "string"}  # no pydantic title
    assert {"title", "description"}.isdisjoint(built.parameters["$defs"]["Inner"])
    assert built.parameters["$defs"]["Inner"]["properties"] == {"a": {"type": "integer"}}
    error = registry.try_call("nested", {"inner": {"a": 1, "z": 2}}).error
    assert isinstance(error, ToolArgumentError)
    assert [p.path for p in error.problems] == ["$.inner.z"]
    assert registry.call("nested", {"inner": {"a": 1}, "open": {"more": 1}, "from": "y"}) == "a=1 y"  # extra="allow"


def test_no_property_has_a_title_as_a_native_tool_and_langchain_show_it() -> None:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals

    @tool
    def search(query: str, limit: int = 10, title: str | None = None) -> str:
        """Search records."""
        return f"{query} {limit} {title}"

    built = from_langchain(search, registry=registry)
    assert built.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"default": 10, "type": "integer"},
            "title": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},  # a property named title stays
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert registry.call("search", {"query": "q", "title": "t"}) == "q 10 t"


class ByName(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    user_id: int = Field(alias="userId")


class HoldsByName(BaseModel):
    who: ByName


@pytest.mark.parametrize("model", [ByName, HoldsByName])
def test_a_model_that_accepts_field_names_keeps_langchains_schema(model: type[BaseModel]) -> None:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals
    lc = StructuredTool.from_function(lambda **kw: repr(kw), name="pop", description="p", args_schema=model)
    built = from_langchain(lc, registry=registry)
    assert built.parameters == convert_to_openai_tool(lc)["function"]["parameters"]  # LangChain's own, as before
    if model is ByName:
        assert built.parameters == {"type": "object", "properties": {"user_id": {"type": "integer"}}, "required": ["user_id"]}
        assert registry.call("pop", {"user_id": 5}) == "{'user_id': 5}"  # the field name, which LangChain accepts
    else:  # (LangChain shows a nested model by alias)
        assert built.parameters["properties"]["who"]["properties"] == {"userId": {"type": "integer"}}
        assert registry.call("pop", {"who": {"userId": 5}}) == "{'who': ByName(user_id=5)}"


class Choices(BaseModel):
    query: str = Field(validation_alias=AliasChoices("q", "query"))


def test_a_field_of_several_names_keeps_langchains_schema() -> None:
    """``AliasChoices``: a schema by the first alias, closed, refused the field name LangChain accepts."""
    registry = ToolRegistry(clock=ManualClock())
    lc = StructuredTool.from_function(lambda **kw: repr(kw), name="t", description="t", args_schema=Choices)
    built = from_langchain(lc, registry=registry)
    assert built.parameters == convert_to_openai_tool(lc)["function"]["parameters"]
    assert registry.call("t", {"query": "x"}) == "{'query': 'x'}"


def test_a_json_schema_tool_keeps_its_schema() -> None:
    # (as langchain-mcp-adapters builds its tools: LangChain's input schema for it, one "root" field, is no
    # injected argument)
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    async def fetch(**arguments: Any) -> str:
        return f"got {sorted(arguments)}"

    raw = StructuredTool(name="raw", description="raw", args_schema=schema, coroutine=fetch)
    built = from_langchain(raw, registry=registry)
    assert built.parameters == schema and built.is_async
    assert asyncio.run(registry.acall("raw", {"q": "x", "more": 1})) == "got ['more', 'q']"


# ---------------------------------------------------------------- error text written after __init__


class Late(ToolError):
    def __init__(self, size: int) -> None:
        super().__init__("short")
        self.message = "Q" * size


@pytest.fixture
def late() -> tuple[ToolRegistry, Any, str]:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals

    @defineTool(registry=registry)
    def big(n: int) -> str:
        """big"""
        raise Late(n)

    expected = registry.try_call("big", {"n": 1_000_000}).for_model().removeprefix("Error: ")
    assert len(expected) < 11_000
    return registry, big, expected


def test_langchain_caps_a_late_message(late: tuple[ToolRegistry, Any, str]) -> None:
    registry, big, expected = late
    message = to_langchain(big, registry).invoke({"type": "tool_call", "id": "c1", "name": "big", "args": {"n": 1_000_000}})
    assert message.status == "error" and message.content == expected


def test_autogen_caps_a_late_message(late: tuple[ToolRegistry, Any, str]) -> None:
    registry, big, expected = late
    with pytest.raises(Late) as raised:
        asyncio.run(to_autogen(big, registry).run_json({"n": 1_000_000}, CancellationToken(), call_id="a1"))
    assert str(raised.value) == expected


def test_pydantic_ai_caps_a_late_message(late: tuple[ToolRegistry, Any, str]) -> None:
    registry, big, expected = late
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages for p in m.parts if isinstance(p, (ToolReturnPart, RetryPromptPart))]
        if not parts:
            return ModelResponse(parts=[ToolCallPart("big", {"n": 1_000_000}, tool_call_id="t1")])
        part = parts[-1]
        seen.append(part.model_response_str() if isinstance(part, ToolReturnPart) else part.model_response())
        return ModelResponse(parts=[TextPart("ok")])

    PAIAgent(FunctionModel(model), tools=[to_pydantic_ai(big, registry)]).run_sync("go")
    assert [json.loads(text) for text in seen] == [{"error": expected}]


async def test_the_mcp_server_caps_a_late_message(late: tuple[ToolRegistry, Any, str]) -> None:
    registry, _, expected = late
    async with Session(create_server(registry)) as session:
        got = await session.call_tool("big", {"n": 1_000_000})
    assert got.is_error and [c.text for c in got.content] == [expected]


# ---------------------------------------------------------------- a tool of another registry


ADAPTERS: list[tuple[Callable[..., Any], Callable[..., Any]]] = [
    (to_langchain, as_langchain_tools),
    (to_autogen, as_autogen_tools),
    (to_pydantic_ai, as_pydantic_ai_tools),
    (to_openai_agents, as_openai_agents_tools),
    (to_agent_framework, as_agent_framework_tools),
]


@pytest.mark.parametrize(("one", "several"), ADAPTERS)
def test_without_registry_a_tool_is_added_to_the_default_registry(one: Callable[..., Any], several: Callable[..., Any]) -> None:
    default = ToolRegistry.default()
    for adapt in (one, lambda t: several([t])):
        free = Tool.create(
            lambda x: x,
            name="free_r27",
            description="free",
            parameters={"type": "object", "properties": {"x": {"type": "integer"}}},
        )
        assert "free_r27" not in default
        try:
            adapt(free)  # as before: a tool of no registry (or another) joins the default registry
            assert default.get("free_r27") is free
        finally:
            default.remove("free_r27")


def test_through_its_registry_the_adapter_shares_its_state() -> None:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals

    @defineTool(registry=registry, rate_limit={"rate": 0.001, "burst": 1})
    def once_r27b(x: int) -> int:
        """once"""
        return x

    adapted = to_langchain(once_r27b, registry)
    assert registry.call("once_r27b", {"x": 1}) == 1  # the only token
    message = adapted.invoke({"type": "tool_call", "id": "c1", "name": "once_r27b", "args": {"x": 2}})
    assert message.status == "error" and "is rate limited" in message.content


# ---------------------------------------------------------------- non-string dict keys


def test_json_data_leaves_a_value_json_holds_as_it_is() -> None:
    plain = {"a": [1, {"b": "{"}], "c": "x"}
    assert json_data(plain) is plain
    keyed = {1: "a", None: "b"}  # (not walked for its keys: pydantic writes them, docs/integrations/pydantic-ai.md)
    assert json_data(keyed) is keyed


def test_pydantic_ai_writes_a_non_string_key_as_pydantic_does() -> None:
    registry = ToolRegistry(clock=ManualClock())  # the listing budget never runs out: exact refusals

    @defineTool(registry=registry)
    def keyed() -> object:
        """keyed"""
        return {1: "a", None: "b"}

    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not parts:
            return ModelResponse(parts=[ToolCallPart("keyed", {}, tool_call_id="t1")])
        seen.append(parts[-1].model_response_str())
        return ModelResponse(parts=[TextPart("ok")])

    PAIAgent(FunctionModel(model), tools=[to_pydantic_ai(keyed, registry)]).run_sync("go")
    assert seen == ['{"1":"a","None":"b"}']  # the documented difference: the other adapters write "null"
