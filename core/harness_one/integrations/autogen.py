"""AutoGen (for existing AutoGen users; AutoGen is archived upstream, its successor is the
Microsoft Agent Framework, see :mod:`harness_one.integrations.agent_framework`).

A harness tool as an AutoGen ``BaseTool``, usable by ``AssistantAgent``. The schema is the
harness schema with its ``$ref`` inlined (AutoGen's Anthropic client drops ``$defs``), and ``run_json`` hands the raw arguments and AutoGen's call id to the registry,
so arguments are validated once, by the harness. ``context=`` is a mapping or a function of the
call (an ``autogen_core.FunctionCall``: ``id``, ``name``, ``arguments``). A harness error is
raised as its own class (``RateLimitExceeded``, ``ApprovalUnavailable``, ..., its ``kind`` kept) with the
harness's message, which AutoGen returns to the model as an error result; its tool span's
``error.type`` is that class's name.

AutoGen has no step that asks a person about a tool call: a call the registry's ``approval``
plugin holds is refused, and the model reads that it was not run for want of approval (not
that its result will come).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping
from typing import Any, cast

from autogen_core import EVENT_LOGGER_NAME, CancellationToken, FunctionCall, trace_tool_span
from autogen_core.logging import ToolCallEvent
from autogen_core.tools import BaseTool, ParametersSchema, ToolSchema
from pydantic import BaseModel, ConfigDict

from .._errors import ToolError
from .._redact import redact
from .._registry import ToolRegistry
from .._render import dumps, render_value, safe_text
from .._tool import Tool
from ..export import StrictSchemaError, inline_refs
from ._common import (
    Context,
    ToolLike,
    call_context,
    check_context,
    no_longer_available,
    not_an_object,
    not_asked,
    resolve,
    select,
)

__all__ = ["HarnessAutoGenTool", "as_autogen_tools", "to_autogen"]

AutoGenContext = Context[FunctionCall]

_events = logging.getLogger(EVENT_LOGGER_NAME)


class _AnyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")


class HarnessAutoGenTool(BaseTool[_AnyArgs, BaseModel]):
    """A harness tool seen by AutoGen."""

    def __init__(self, tool: Tool, registry: ToolRegistry, context: AutoGenContext = None) -> None:
        self._tool = tool
        self._registry = registry
        self._context = context
        super().__init__(_AnyArgs, BaseModel, tool.name, tool.description or tool.name)

    @property
    def schema(self) -> ToolSchema:
        """The harness schema with its ``$ref`` inlined (AutoGen's Anthropic client keeps only ``properties``,
        ``required`` and ``type``, never ``$defs``); a recursive one, which cannot be inlined, as it is. A copy."""
        try:
            inlined = inline_refs(self._tool.parameters, tool=self._tool.name)
        except StrictSchemaError:
            inlined = copy.deepcopy(dict(self._tool.parameters))
        parameters = cast(ParametersSchema, {"type": "object", "properties": {}, **inlined})
        return ToolSchema(name=self._tool.name, description=self._tool.description, parameters=parameters)

    async def _call(self, args: object, call_id: str | None) -> Any:
        name = self._tool.name
        # AutoGen hands over whatever json.loads made of the model's text: JSON that is not an
        # object ([1, 2], "hi") goes to the registry to be refused as such.
        arguments = dict(args) if isinstance(args, Mapping) else not_an_object(args)

        def run_context() -> FunctionCall:
            return FunctionCall(id=call_id or "", name=name, arguments=dumps(arguments))

        context = call_context(self._context, run_context, tool=name, call_id=call_id or None)  # a ToolError: an error result
        result = await self._registry.atry_call(name, arguments, context=context, call_id=call_id or None)
        if not result.ok:
            result = no_longer_available(result, self._registry, name)  # removed from the registry since
            result = not_asked(result, "no_step")  # AutoGen has no approval step: a call the harness holds is refused
            assert result.error is not None
            raise _raised(result.error)
        return result.value

    async def run(self, args: _AnyArgs, cancellation_token: CancellationToken) -> Any:
        return await self._call(args.model_dump(), None)

    async def run_json(self, args: Mapping[str, Any], cancellation_token: CancellationToken, call_id: str | None = None) -> Any:
        """``BaseTool.run_json`` without AutoGen's argument model: the raw arguments go to the registry.

        As AutoGen's own tools, in a ``trace_tool_span`` with the call id, logging a ``ToolCallEvent``:
        with the arguments and the result masked (:func:`~harness_one.redact`), as the harness logs them.
        """
        with trace_tool_span(tool_name=self.name, tool_description=self.description, tool_call_id=call_id):
            value = await self._call(args, call_id)
        masked = redact(self.return_value_as_string(value))
        _events.info(ToolCallEvent(tool_name=self.name, arguments=redact(dict(args)), result=masked))
        return value

    def return_value_as_string(self, value: Any) -> str:
        return render_value(value)


def _raised(error: ToolError) -> ToolError:
    """``error`` as raised to AutoGen, which hands ``str(error)`` to the model and records the exception
    (its type and traceback) in the tool's span: the same class and fields (``kind``, ``retry_after``,
    ``cause``, ...), its text safe to encode, and no exception chained (a tool's own, whose text is not masked)."""
    raised = copy.copy(error)  # rebuilt from its state (ToolError.__reduce__): no __cause__, no traceback
    raised.message = safe_text(error.message)
    raised.args = (raised.message,)
    return raised


def to_autogen(tool: ToolLike, registry: ToolRegistry | None = None, *, context: AutoGenContext = None) -> HarnessAutoGenTool:
    """The harness tool (a name, a ``Tool`` or a ``@defineTool`` function) as an AutoGen tool."""
    check_context(context)
    reg, found = resolve(tool, registry)
    return HarnessAutoGenTool(found, reg, context)


def as_autogen_tools(
    tools: Iterable[ToolLike] | None = None, registry: ToolRegistry | None = None, *, context: AutoGenContext = None
) -> list[HarnessAutoGenTool]:
    """The given tools as AutoGen tools; by default the registry's tools defined in code."""
    check_context(context)
    reg, picked = select(tools, registry, adapter="as_autogen_tools")
    return [HarnessAutoGenTool(t, reg, context) for t in picked]
