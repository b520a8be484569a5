"""The peers ``bench/percall.py`` measures beside harness-one, each calling the same ``add`` tool.

Each peer is built by a function that returns ``(label, call)``: ``call`` is a function of no
arguments, or of none that returns an awaitable (the peer's API is async), which makes one call
the way that peer's agent loop makes it. A peer that is not installed is left out with a note;
``pip install -r bench/requirements.txt`` installs them all (``make bench`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["ARGS", "Peer", "add", "close", "peers"]

ARGS = {"a": 5, "b": 3}
ARGS_JSON = json.dumps(ARGS)
_STACK = contextlib.AsyncExitStack()

Peer = tuple[str, Callable[[], Any], bool]
"""A label, a no-argument call, and whether the call returns an awaitable."""


def add(a: float, b: float) -> float:
    """Adds two numbers."""
    return a + b


def _toolregistry() -> Peer:
    from toolregistry import ToolRegistry

    reg = ToolRegistry()
    reg.register(add)
    return "peer: toolregistry ToolRegistry.invoke", lambda: reg.invoke("add", ARGS), False


def _langchain() -> Peer:
    from langchain_core.tools import StructuredTool

    tool = StructuredTool.from_function(add, name="add", description="Adds two numbers")
    return "peer: langchain-core StructuredTool.invoke", lambda: tool.invoke(ARGS), False


def _openai_agents() -> Peer:
    from agents import function_tool
    from agents.tool_context import ToolContext

    tool = function_tool(add)

    def invoke() -> Awaitable[Any]:
        ctx: ToolContext[None] = ToolContext(context=None, tool_name="add", tool_call_id="call_1", tool_arguments=ARGS_JSON)
        return tool.on_invoke_tool(ctx, ARGS_JSON)

    return "peer: OpenAI Agents SDK FunctionTool.on_invoke_tool", invoke, True


def _pydantic_ai() -> Peer:
    from pydantic_ai import Tool

    # What the agent's tool manager does per call: the function schema's pydantic-core validator
    # over the model's arguments, then the function (a sync tool also hops to a thread there).
    schema = Tool(add, takes_ctx=False).function_schema
    validator, fn = schema.validator, schema.function

    def call() -> Any:
        return fn(**validator.validate_python(ARGS, allow_partial="off"))

    return "peer: Pydantic AI validate-and-call", call, False


def _fastmcp(loop: asyncio.AbstractEventLoop) -> Peer:
    from fastmcp import Client, FastMCP

    server = FastMCP("bench")
    server.tool(add)
    client: Client[Any] = Client(server)
    loop.run_until_complete(_STACK.enter_async_context(client))  # open until the process exits
    return "peer: FastMCP in-memory Client.call_tool", lambda: client.call_tool("add", ARGS), True


def peers(loop: asyncio.AbstractEventLoop) -> list[Peer]:
    """Every installed peer, built on ``loop`` (where its async calls will run); notes for the rest."""
    out = []
    makers: list[tuple[str, Callable[[], Peer]]] = [
        ("toolregistry", _toolregistry),
        ("langchain-core", _langchain),
        ("openai-agents", _openai_agents),
        ("pydantic-ai-slim", _pydantic_ai),
        ("fastmcp", lambda: _fastmcp(loop)),
    ]
    for package, make in makers:
        try:
            out.append(make())
        except ImportError as exc:
            print(f"note: {package} is not installed ({exc}); its row is skipped")
    return out


def close(loop: asyncio.AbstractEventLoop) -> None:
    """Close what the peers opened on ``loop`` (the FastMCP client)."""
    loop.run_until_complete(_STACK.aclose())
