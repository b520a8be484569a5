"""What every framework adapter shares: which tools it takes, the default selection, ``context=``.

Each adapter's behaviour inside its framework's real agent loop is in
``tests/test_integration_<framework>.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness_one import ToolDefinitionError, ToolNotFound, ToolRegistry, defineTool
from harness_one.integrations import agent_framework, autogen, langchain, openai_agents, pydantic_ai

# (to_x, as_x_tools, the name an adapted tool goes by)
ADAPTERS: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[[Any], str]]] = {
    "langchain": (langchain.to_langchain, langchain.as_langchain_tools, lambda t: t.name),
    "openai_agents": (openai_agents.to_openai_agents, openai_agents.as_openai_agents_tools, lambda t: t.name),
    "pydantic_ai": (pydantic_ai.to_pydantic_ai, pydantic_ai.as_pydantic_ai_tools, lambda t: t.name),
    "autogen": (autogen.to_autogen, autogen.as_autogen_tools, lambda t: t.name),
    "agent_framework": (agent_framework.to_agent_framework, agent_framework.as_agent_framework_tools, lambda t: t.name),
}


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> tuple[Callable[..., Any], Callable[..., Any], Callable[[Any], str]]:
    return ADAPTERS[request.param]


@pytest.fixture
def installed(dists: Any) -> Iterator[ToolRegistry]:
    """A registry that discovers one installed tool (``shout``) and holds one defined in code (``add``)."""
    dists.make(
        "demo-installed-tools",
        {
            "demo_installed_tools": """
                from harness_one import defineTool

                @defineTool(registry=None)
                def shout(text: str) -> str:
                    \"\"\"Upper-case a text.\"\"\"
                    return text.upper()
            """
        },
        {"harness_one.tools": {"shout": "demo_installed_tools:shout"}},
    )
    registry = ToolRegistry(autoload=False, discover=True)

    @defineTool(registry=registry)
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    yield registry


def test_default_is_the_tools_defined_in_code(adapter: Any, installed: ToolRegistry, caplog: pytest.LogCaptureFixture) -> None:
    _, as_tools, name = adapter
    names = installed.names()
    assert "add" in names and "shout" in names  # (and any tool package installed in this environment)
    with caplog.at_level(logging.INFO, logger="harness_one.integrations"):
        tools = as_tools(registry=installed)
    assert [name(t) for t in tools] == ["add"]  # the installed tool is not handed to the agent unasked
    (record,) = [r for r in caplog.records if r.name == "harness_one.integrations"]
    fields = getattr(record, "harness_one", {})
    assert fields["tools"] == ["add"] and fields["installed_left_out"] == sorted(set(names) - {"add"})
    assert [name(t) for t in as_tools(["shout", "add"], installed)] == ["shout", "add"]  # named: any tool


def test_no_tools_defined_in_code_is_an_error(adapter: Any, dists: Any) -> None:
    _, as_tools, _ = adapter
    dists.make(
        "demo-only-installed",
        {
            "demo_only_installed": "from harness_one import defineTool\n\n@defineTool(registry=None)\ndef ping() -> str:\n    return 'pong'\n"
        },
        {"harness_one.tools": {"ping": "demo_only_installed:ping"}},
    )
    with pytest.raises(
        ValueError,
        match=r"no tools defined in code, and installed tools are never included by default; name the ones the agent may use",
    ):
        as_tools(registry=ToolRegistry(autoload=False, discover=True))


def test_accepts_names_tools_and_decorated_functions(adapter: Any) -> None:
    to_tool, as_tools, name = adapter
    registry = ToolRegistry(autoload=False)

    @defineTool(registry=registry)
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    assert [name(to_tool(t, registry)) for t in ("add", add, add.tool)] == ["add"] * 3
    assert [name(t) for t in as_tools([add, "add", add.tool], registry)] == ["add"] * 3
    with pytest.raises(ToolNotFound, match="Unknown tool 'sub'"):
        to_tool("sub", registry)


def test_a_tool_not_yet_registered_is_added(adapter: Any) -> None:
    to_tool, _, name = adapter
    registry = ToolRegistry(autoload=False)

    @defineTool(registry=None)
    def mul(a: float, b: float) -> float:
        """Multiply."""
        return a * b

    assert name(to_tool(mul, registry)) == "mul" and registry.get("mul") is mul.tool
    assert registry.call("mul", {"a": 2, "b": 3}) == 6

    @defineTool(registry=None, name="mul")
    def other(a: float) -> float:
        """Another tool of the same name."""
        return a

    with pytest.raises(ToolDefinitionError, match="already registered"):
        to_tool(other, registry)


def test_the_default_registry_is_used_without_one(adapter: Any, fresh_default: ToolRegistry) -> None:
    to_tool, as_tools, name = adapter

    @defineTool
    def echo(text: str) -> str:
        """Echo."""
        return text

    assert name(to_tool(echo)) == "echo" and [name(t) for t in as_tools()] == ["echo"]


def test_bad_arguments_are_typed_errors(adapter: Any) -> None:
    to_tool, as_tools, _ = adapter
    registry = ToolRegistry(autoload=False)
    registry.add(
        lambda text: text,
        name="echo",
        description="Echo.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )
    with pytest.raises(TypeError, match="pass the registry as registry="):
        as_tools(registry)
    with pytest.raises(TypeError, match="tools= must be a list"):
        as_tools("echo", registry)
    with pytest.raises(TypeError, match="Expected a tool name, a Tool or a @defineTool function, got int"):
        to_tool(42, registry)
    with pytest.raises(TypeError, match="context= must be a mapping, a function of the run context, or None; got int"):
        to_tool("echo", registry, context=42)
    with pytest.raises(TypeError, match="registry= must be a ToolRegistry"):
        to_tool("echo", {"echo": 1})


def test_an_async_context_function_is_refused_when_adapting(adapter: Any) -> None:
    to_tool, as_tools, _ = adapter
    registry = ToolRegistry(autoload=False)
    registry.add(lambda text: text, name="echo", parameters={"type": "object", "properties": {"text": {"type": "string"}}})

    async def context(run: Any) -> dict[str, Any]:
        return {"user": "bob"}

    class AsyncCallable:
        async def __call__(self, run: Any) -> dict[str, Any]:
            return {"user": "bob"}

    for given in (context, AsyncCallable()):
        with pytest.raises(TypeError, match=r"^context= must be a plain function of the run context .*got an async function"):
            to_tool("echo", registry, context=given)
        with pytest.raises(TypeError, match=r"^context= must be a plain function"):
            as_tools(registry=registry, context=given)


def test_a_failing_context_function_is_logged_without_the_secrets_it_held(caplog: pytest.LogCaptureFixture) -> None:
    from harness_one import ToolError
    from harness_one.integrations._common import call_context

    def context(run: object) -> dict[str, str]:
        raise KeyError("Authorization: Bearer Q9-SESSION-TOKEN not valid for tenant")

    with caplog.at_level(logging.ERROR, logger="harness_one.integrations"), pytest.raises(ToolError) as err:
        call_context(context, lambda: None, tool="t", call_id="c1")
    assert "Q9" not in str(err.value)
    (record,) = [r for r in caplog.records if r.name == "harness_one.integrations"]
    assert "Q9-SESSION-TOKEN" not in record.getMessage() and "Bearer [REDACTED]" in record.getMessage()
