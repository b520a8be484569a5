"""Pydantic AI: a harness tool as a ``pydantic_ai.Tool`` built from its JSON schema.

Pydantic AI does not validate arguments of a schema-built tool; the harness validates them
once. A harness error raises ``ModelRetry`` with the harness's message, so the model sees it
and can call again with fixed arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_ai import ModelRetry, Tool

from .._registry import ToolRegistry
from ._common import pick

__all__ = ["as_pydantic_ai_tools", "to_pydantic_ai"]


def to_pydantic_ai(name: str, registry: ToolRegistry | None = None, *, context: Mapping[str, Any] | None = None) -> Tool[Any]:
    """The harness tool ``name`` as a Pydantic AI tool."""
    reg, (tool,) = pick(registry, [name])

    async def invoke(**kwargs: Any) -> Any:
        result = await reg.atry_call(tool.name, kwargs, context=context)
        if not result.ok:
            assert result.error is not None
            raise ModelRetry(result.error.message)
        return result.value

    built: Tool[Any] = Tool.from_schema(invoke, name=tool.name, description=tool.description, json_schema=tool.parameters)
    return built


def as_pydantic_ai_tools(
    registry: ToolRegistry | None = None, names: Iterable[str] | None = None, *, context: Mapping[str, Any] | None = None
) -> list[Tool[Any]]:
    """Every tool of ``registry`` (or the named ones) as Pydantic AI tools."""
    reg, tools = pick(registry, names)
    return [to_pydantic_ai(t.name, reg, context=context) for t in tools]
