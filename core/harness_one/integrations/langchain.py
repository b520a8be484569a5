"""LangChain and LangGraph: harness tools as ``BaseTool`` (accepted by ``ToolNode`` and
``create_react_agent``), and LangChain tools as harness tools.

A harness error becomes a ``ToolException`` carrying the harness's message, which LangChain
turns into an error ``ToolMessage`` (``status="error"``) that the model reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict

from .._registry import ToolRegistry
from .._tool import Tool
from ._common import pick

__all__ = ["HarnessTool", "as_langchain_tools", "from_langchain", "to_langchain"]


class HarnessTool(BaseTool):
    """A harness tool seen by LangChain. Arguments are validated once, by the harness."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    registry: Any
    context: Mapping[str, Any] | None = None
    handle_tool_error: bool = True

    def _answer(self, result: Any) -> Any:
        if not result.ok:
            raise ToolException(result.error.message)
        return result.value if isinstance(result.value, str) else result.for_model()

    def _run(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        return self._answer(self.registry.try_call(self.name, kwargs, context=self.context))

    async def _arun(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        return self._answer(await self.registry.atry_call(self.name, kwargs, context=self.context))


def to_langchain(name: str, registry: ToolRegistry | None = None, *, context: Mapping[str, Any] | None = None) -> HarnessTool:
    """The harness tool ``name`` as a LangChain tool."""
    reg, (tool,) = pick(registry, [name])
    return HarnessTool(
        name=tool.name, description=tool.description or tool.name, args_schema=tool.parameters, registry=reg, context=context
    )


def as_langchain_tools(
    registry: ToolRegistry | None = None, names: Iterable[str] | None = None, *, context: Mapping[str, Any] | None = None
) -> list[HarnessTool]:
    """Every tool of ``registry`` (or the named ones) as LangChain tools."""
    reg, tools = pick(registry, names)
    return [to_langchain(t.name, reg, context=context) for t in tools]


def from_langchain(tool: BaseTool, *, registry: ToolRegistry | None = None, **definition: Any) -> Tool:
    """A LangChain tool as a harness tool, so it gains harness policies (``rate_limit=``, ``timeout=``, ...).

    Registers it in ``registry`` when one is given.
    """
    schema = convert_to_openai_tool(tool)["function"]
    parameters = dict(schema.get("parameters") or {"type": "object", "properties": {}})
    parameters.setdefault("type", "object")

    def run(**kwargs: Any) -> Any:
        return tool.invoke(kwargs)

    built = Tool.create(
        run,
        name=definition.pop("name", tool.name),
        description=definition.pop("description", tool.description),
        parameters=parameters,
        **definition,
    )
    if registry is not None:
        registry.add(built)
    return built
