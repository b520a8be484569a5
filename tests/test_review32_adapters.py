"""Adapters, review 32: ``from_langchain`` runs a LangChain tool with exactly the arguments the harness checked
(arguments holding ``"type": "tool_call"`` are arguments, not LangChain's call envelope), and a ``context=``
that fails (a mapping that raises when copied, an exception whose text raises) is the harness's error.

Each runs the real framework offline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from typing import Any
from uuid import UUID

import pytest
from agents.tool_context import ToolContext
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool, tool
from pydantic import BaseModel

from harness_one import ToolRegistry, defineTool
from harness_one.integrations.langchain import from_langchain, to_langchain
from harness_one.integrations.openai_agents import to_openai_agents

# ---------------------------------------------------------------- from_langchain: arguments are never an envelope

#: Arguments shaped as LangChain's tool-call envelope, whose "args" ask for what approval holds.
WRAPPED = {"type": "tool_call", "id": "x", "args": {"type": "delete", "id": "prod-db", "args": {}}}


class Operation(BaseModel):
    type: str
    id: str
    args: dict[str, Any]


def manage(type: str, id: str, args: dict[str, Any]) -> str:
    return f"ran {type} on {id} with {args}"


async def amanage(type: str, id: str, args: dict[str, Any]) -> str:
    return f"ran {type} on {id} with {args}"


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_arguments_shaped_as_a_tool_call_run_the_tool_with_themselves(is_async: bool) -> None:
    # They ran the tool with their "args" (a delete approval never saw) and returned a ToolMessage.
    registry = ToolRegistry()
    body = {"coroutine": amanage} if is_async else {"func": manage}
    lc = StructuredTool.from_function(**body, name="manage", description="Run an operation", args_schema=Operation)
    from_langchain(lc, registry=registry, options={"requires_approval": lambda call: call.arguments["type"] == "delete"})
    if is_async:
        result = asyncio.run(asyncio.wait_for(registry.atry_call("manage", WRAPPED, call_id="c1"), 10))
    else:
        result = registry.try_call("manage", WRAPPED, call_id="c1")
    assert result.value == "ran tool_call on x with {'type': 'delete', 'id': 'prod-db', 'args': {}}"
    held = registry.try_call("manage", WRAPPED["args"], call_id="c2")  # the same delete, given as itself, is held
    assert held.error is not None and held.error.kind == "approval_required"


@tool
def label(type: str, text: str) -> str:
    """Label a text with a type."""
    return f"{text} is {type}"


@tool
async def alabel(type: str, text: str) -> str:
    """Label a text with a type."""
    return f"{text} is {type}"


@pytest.mark.parametrize("lc", [label, alabel], ids=["sync", "async"])
def test_a_tool_decorated_tool_takes_type_tool_call_as_its_argument(lc: BaseTool) -> None:
    # It failed with KeyError: 'id' (LangChain read the arguments as an envelope without one).
    registry = ToolRegistry()
    from_langchain(lc, registry=registry)
    assert registry.try_call(lc.name, {"type": "tool_call", "text": "hi"}).value == "hi is tool_call"
    assert asyncio.run(asyncio.wait_for(registry.atry_call(lc.name, {"type": "event", "text": "hi"}), 10)).value == "hi is event"


def test_a_content_and_artifact_tool_gives_its_content() -> None:
    registry = ToolRegistry()
    lc = StructuredTool.from_function(
        lambda type, text: (f"{text} is {type}", {"raw": text}),
        name="tagged",
        description="Tag",
        args_schema=None,
        response_format="content_and_artifact",
    )
    from_langchain(lc, registry=registry)
    for kind in ("event", "tool_call"):
        assert registry.try_call("tagged", {"type": kind, "text": "hi"}).value == f"hi is {kind}"


class Starts(BaseCallbackHandler):
    """Keeps the tags and run id of each tool run LangChain reports."""

    def __init__(self) -> None:
        self.starts: list[tuple[list[str] | None, UUID]] = []

    def on_tool_start(
        self, serialized: Any, input_str: str, *, run_id: UUID, tags: list[str] | None = None, **kwargs: Any
    ) -> Any:
        self.starts.append((tags, run_id))


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_the_run_config_still_reaches_the_tool(is_async: bool) -> None:
    registry = ToolRegistry()
    from_langchain(label, registry=registry)
    handler = Starts()

    def call(kind: str) -> Any:
        return registry.try_call("label", {"type": kind, "text": "hi"}).value

    async def acall(kind: str) -> Any:
        return (await registry.atry_call("label", {"type": kind, "text": "hi"})).value

    step = RunnableLambda(call, afunc=acall)
    config: Any = {"callbacks": [handler], "tags": ["outer"]}
    for kind in ("event", "tool_call"):
        value = asyncio.run(asyncio.wait_for(step.ainvoke(kind, config), 10)) if is_async else step.invoke(kind, config)
        assert value == f"hi is {kind}"
    assert [tags for tags, _ in handler.starts] == [["outer"], ["outer"]]


# ---------------------------------------------------------------- context=: every failure is the harness's error


class Vault(Mapping[str, Any]):
    """A mapping that fails to read its values, with a secret in the error."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("vault fetch failed: token=hvs.SECRETSECRET password=hunter2")

    def __iter__(self) -> Iterator[str]:
        return iter(["user"])

    def __len__(self) -> int:
        return 1


@pytest.fixture
def add() -> tuple[ToolRegistry, Any]:
    registry = ToolRegistry()

    @defineTool(registry=registry)
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    return registry, add


def assert_logged_masked(caplog: pytest.LogCaptureFixture, problem: str) -> None:
    [record] = caplog.records
    assert record.message.startswith("integration context function failed") and problem in record.message
    assert "SECRET" not in record.message and "hunter2" not in record.message


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (Vault, "mapping raised RuntimeError when copied"),  # (made in the test: a parameter lives all session)
        (lambda: lambda runtime: Vault(), "function's mapping raised RuntimeError when copied"),
    ],
    ids=["mapping", "function"],
)
def test_a_context_mapping_that_fails_to_copy_is_an_error_message(
    add: tuple[ToolRegistry, Any], make: Any, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The mapping's RuntimeError, secret and all, was raised into the agent loop.
    registry, tool_ = add
    context = make()
    call = {"type": "tool_call", "id": "c", "name": "add", "args": {"a": 1}}
    with caplog.at_level(logging.ERROR, logger="harness_one.integrations"):
        message = asyncio.run(asyncio.wait_for(to_langchain(tool_, registry, context=context).ainvoke(call), 10))
    assert isinstance(message, ToolMessage) and message.status == "error"
    assert f"the application's context= {problem}." in str(message.content) and "SECRET" not in str(message.content)
    assert_logged_masked(caplog, problem)


def test_a_context_mapping_that_fails_to_copy_is_the_openai_agents_error_text(
    add: tuple[ToolRegistry, Any], caplog: pytest.LogCaptureFixture
) -> None:
    registry, tool_ = add
    oa = to_openai_agents(tool_, registry, context=Vault())
    ctx = ToolContext(context=None, tool_name="add", tool_call_id="c", tool_arguments='{"a": 1}')
    with caplog.at_level(logging.ERROR, logger="harness_one.integrations"):
        output = asyncio.run(asyncio.wait_for(oa.on_invoke_tool(ctx, '{"a": 1}'), 10))
    assert output.startswith("Error: Tool 'add' was not called: the application's context= mapping raised RuntimeError")
    assert "SECRET" not in output
    assert_logged_masked(caplog, "mapping raised RuntimeError when copied")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str of the exception failed")


def test_a_context_function_raising_an_unprintable_exception_is_an_error_message(
    add: tuple[ToolRegistry, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Logging its text raised RuntimeError out of the adapter.
    registry, tool_ = add

    def context(runtime: Any) -> Mapping[str, Any]:
        raise Unprintable

    call = {"type": "tool_call", "id": "c", "name": "add", "args": {"a": 1}}
    with caplog.at_level(logging.ERROR, logger="harness_one.integrations"):
        message = to_langchain(tool_, registry, context=context).invoke(call)
    assert isinstance(message, ToolMessage) and message.status == "error"
    assert "the application's context= function raised Unprintable." in str(message.content)
    [record] = caplog.records
    assert "problem='function raised Unprintable'" in record.message and "error='Unprintable'" in record.message
