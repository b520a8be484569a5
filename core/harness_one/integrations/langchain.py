"""LangChain and LangGraph: harness tools as LangChain tools (accepted by ``create_agent``,
``ToolNode`` and ``bind_tools``), and LangChain tools as harness tools.

The provider's tool-call id becomes the harness call id. ``context=`` is a mapping or a
function of the call's ``ToolRuntime`` (``runtime.context``, ``runtime.config``,
``runtime.state``, ``runtime.tool_call_id``); outside a graph the function gets a runtime
holding only the config and the call id. A harness error becomes a ``ToolException`` carrying
the harness's message, which LangChain turns into an error ``ToolMessage`` (``status="error"``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolRuntime
from pydantic import ConfigDict

from .._call import CallResult
from .._registry import ToolRegistry
from .._tool import Tool
from ._common import Context, ToolLike, call_context, check_context, resolve, select

__all__ = ["HarnessTool", "as_langchain_tools", "from_langchain", "to_langchain"]

LangChainContext = Context[ToolRuntime[Any, Any]]


class HarnessTool(StructuredTool):
    """A harness tool seen by LangChain. Arguments are validated once, by the harness."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    registry: Any
    handle_tool_error: bool = True

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Hand the function the model's arguments as one value, so no argument name can clash
        # with what LangChain injects (config, run_manager, the runtime), plus the tool-call id.
        _, arguments = super()._to_args_and_kwargs(tool_input, tool_call_id)
        runtime = arguments.pop("_harness_runtime", None)
        return (), {"_harness_runtime": runtime, "_harness_call": (arguments, tool_call_id)}


def _no_writer(chunk: Any) -> None:
    """The stream writer of a runtime built outside a graph: drops what it is given."""


def _answer(result: CallResult) -> Any:
    if not result.ok:
        assert result.error is not None
        raise ToolException(result.error.message)
    return result.value if isinstance(result.value, str) else result.for_model()


def _functions(
    registry: ToolRegistry, name: str, context: LangChainContext
) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]]]:
    def request(
        runtime: ToolRuntime[Any, Any] | None, config: RunnableConfig, call: tuple[dict[str, Any], str | None]
    ) -> tuple[dict[str, Any], Mapping[str, Any] | None, str | None]:
        arguments, call_id = call
        if call_id is None and runtime is not None:
            call_id = runtime.tool_call_id

        def run_context() -> ToolRuntime[Any, Any]:
            if runtime is not None:
                return runtime
            return ToolRuntime(
                state=None, context=None, config=config, stream_writer=_no_writer, tool_call_id=call_id, store=None
            )

        return arguments, call_context(context, run_context), call_id

    # The annotations are what LangChain and LangGraph read: a ToolRuntime parameter gets the
    # runtime injected (by ToolNode), a RunnableConfig parameter the config.
    def run(
        *,
        _harness_runtime: ToolRuntime[Any, Any],
        _harness_config: RunnableConfig,
        _harness_call: tuple[dict[str, Any], str | None],
    ) -> Any:
        arguments, ctx, call_id = request(_harness_runtime, _harness_config, _harness_call)
        return _answer(registry.try_call(name, arguments, context=ctx, call_id=call_id))

    async def arun(
        *,
        _harness_runtime: ToolRuntime[Any, Any],
        _harness_config: RunnableConfig,
        _harness_call: tuple[dict[str, Any], str | None],
    ) -> Any:
        arguments, ctx, call_id = request(_harness_runtime, _harness_config, _harness_call)
        return _answer(await registry.atry_call(name, arguments, context=ctx, call_id=call_id))

    return run, arun


def to_langchain(tool: ToolLike, registry: ToolRegistry | None = None, *, context: LangChainContext = None) -> HarnessTool:
    """The harness tool (a name, a ``Tool`` or a ``@defineTool`` function) as a LangChain tool."""
    check_context(context)
    reg, found = resolve(tool, registry)
    run, arun = _functions(reg, found.name, context)
    return HarnessTool(
        name=found.name,
        description=found.description or found.name,
        args_schema=found.parameters,
        func=run,
        coroutine=arun,
        registry=reg,
    )


def as_langchain_tools(
    tools: Iterable[ToolLike] | None = None, registry: ToolRegistry | None = None, *, context: LangChainContext = None
) -> list[HarnessTool]:
    """The given tools as LangChain tools; by default the registry's tools defined in code (installed ones must be named)."""
    check_context(context)
    reg, picked = select(tools, registry, adapter="as_langchain_tools")
    return [to_langchain(t, reg, context=context) for t in picked]


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
