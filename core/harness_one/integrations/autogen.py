"""AutoGen: a harness tool as an AutoGen ``BaseTool``, usable by ``AssistantAgent``.

The tool's schema is the harness schema, and ``run_json`` hands the raw arguments to the
registry, so arguments are validated once, by the harness. A harness error is raised with
the harness's message, which AutoGen returns to the model as an error result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from autogen_core import CancellationToken
from autogen_core.tools import BaseTool, ParametersSchema, ToolSchema
from pydantic import BaseModel, ConfigDict

from .._errors import ToolError
from .._registry import ToolRegistry
from ._common import pick

__all__ = ["HarnessAutoGenTool", "as_autogen_tools", "to_autogen"]


class _AnyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")


class HarnessAutoGenTool(BaseTool[_AnyArgs, BaseModel]):
    """A harness tool seen by AutoGen."""

    def __init__(self, name: str, registry: ToolRegistry, context: Mapping[str, Any] | None = None) -> None:
        self._tool = registry.get(name)
        self._registry = registry
        self._context = context
        super().__init__(_AnyArgs, BaseModel, self._tool.name, self._tool.description or self._tool.name)

    @property
    def schema(self) -> ToolSchema:
        parameters = self._tool.parameters
        return ToolSchema(
            name=self._tool.name,
            description=self._tool.description,
            parameters=ParametersSchema(
                type="object",
                properties=parameters.get("properties", {}),
                required=parameters.get("required", []),
                additionalProperties=parameters.get("additionalProperties", True),
            ),
        )

    async def _call(self, args: Mapping[str, Any], call_id: str | None) -> Any:
        result = await self._registry.atry_call(self._tool.name, dict(args), context=self._context, call_id=call_id)
        if not result.ok:
            assert result.error is not None
            raise ToolError(result.error.message, tool=self._tool.name, call_id=result.call_id)
        return result.value

    async def run(self, args: _AnyArgs, cancellation_token: CancellationToken) -> Any:
        return await self._call(args.model_dump(), None)

    async def run_json(self, args: Mapping[str, Any], cancellation_token: CancellationToken, call_id: str | None = None) -> Any:
        return await self._call(args, call_id)

    def return_value_as_string(self, value: Any) -> str:
        from .._render import render_value

        return render_value(value)


def to_autogen(
    name: str, registry: ToolRegistry | None = None, *, context: Mapping[str, Any] | None = None
) -> HarnessAutoGenTool:
    """The harness tool ``name`` as an AutoGen tool."""
    reg, _ = pick(registry, [name])
    return HarnessAutoGenTool(name, reg, context)


def as_autogen_tools(
    registry: ToolRegistry | None = None, names: Iterable[str] | None = None, *, context: Mapping[str, Any] | None = None
) -> list[HarnessAutoGenTool]:
    """Every tool of ``registry`` (or the named ones) as AutoGen tools."""
    reg, tools = pick(registry, names)
    return [HarnessAutoGenTool(t.name, reg, context) for t in tools]
