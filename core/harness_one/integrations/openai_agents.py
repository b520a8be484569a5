"""OpenAI Agents SDK: a harness tool as a ``FunctionTool``.

The SDK hands the tool the model's raw JSON arguments; the harness decodes and validates
them once. Errors come back to the model as the harness's ``Error: ...`` text. With
``strict=True`` the schema is converted to OpenAI's strict form and the nulls the model sends
for optional arguments are dropped, so the harness's defaults apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agents import FunctionTool, RunContextWrapper

from .._registry import ToolRegistry
from ..dispatch import _drop_nulls
from ..export import strict_schema
from ._common import pick

__all__ = ["as_openai_agents_tools", "to_openai_agents"]


def to_openai_agents(
    name: str, registry: ToolRegistry | None = None, *, strict: bool = False, context: Mapping[str, Any] | None = None
) -> FunctionTool:
    """The harness tool ``name`` as an OpenAI Agents SDK tool."""
    reg, (tool,) = pick(registry, [name])
    schema, nullable = strict_schema(tool.parameters, tool=tool.name) if strict else (tool.parameters, {})

    async def invoke(ctx: RunContextWrapper[Any], arguments: str) -> str:
        args: Any = _drop_nulls(arguments, nullable) if nullable else arguments
        call_id = getattr(ctx, "tool_call_id", None)
        result = await reg.atry_call(tool.name, args, context=context, call_id=call_id)
        return result.for_model()

    return FunctionTool(
        name=tool.name,
        description=tool.description or tool.name,
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=strict,
    )


def as_openai_agents_tools(
    registry: ToolRegistry | None = None,
    names: Iterable[str] | None = None,
    *,
    strict: bool = False,
    context: Mapping[str, Any] | None = None,
) -> list[FunctionTool]:
    """Every tool of ``registry`` (or the named ones) as OpenAI Agents SDK tools."""
    reg, tools = pick(registry, names)
    return [to_openai_agents(t.name, reg, strict=strict, context=context) for t in tools]
