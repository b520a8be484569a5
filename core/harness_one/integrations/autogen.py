"""AutoGen (for existing AutoGen users; AutoGen is archived upstream, its successor is the
Microsoft Agent Framework, see :mod:`harness_one.integrations.agent_framework`).

A harness tool as an AutoGen ``BaseTool``, usable by ``AssistantAgent``. The schema is the
harness schema with its ``$ref`` inlined (AutoGen's Anthropic client drops ``$defs``), and ``run_json`` hands the raw arguments and AutoGen's call id to the registry,
so arguments are validated once, by the harness. ``context=`` is a mapping or a function of the
call (an ``autogen_core.FunctionCall``: ``id``, ``name``, ``arguments``). A harness error is
raised as its own class (``RateLimitExceeded``, ``ApprovalUnavailable``, ..., its ``kind`` kept) with the
harness's message, which AutoGen returns to the model as an error result; its tool span's
``error.type`` is that class's name.

AutoGen's own workbench (``StaticWorkbench``, what ``AssistantAgent(tools=...)`` builds) hands
a tool ``{}`` for arguments that are JSON but falsy (``[]``, ``0``, ``false``, ``""``, ``null``),
so the tool runs with its defaults. :class:`HarnessWorkbench` (``AssistantAgent(workbench=
HarnessWorkbench(tools))``) hands harness tools the value itself, which the registry refuses as
not an object. ``name=`` (``names=``) sets the name AutoGen shows the model; the registry is
still called by the tool's own name.

AutoGen has no step that asks a person about a tool call: a call the registry's ``approval``
plugin holds is refused, and the model reads that it was not run for want of approval (not
that its result will come).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncGenerator, Iterable, Mapping
from types import MappingProxyType
from typing import Any, cast

from autogen_core import EVENT_LOGGER_NAME, CancellationToken, FunctionCall, trace_tool_span
from autogen_core.logging import ToolCallEvent
from autogen_core.tools import BaseTool, ParametersSchema, StaticStreamWorkbench, ToolResult, ToolSchema
from pydantic import BaseModel, ConfigDict

from .._errors import ToolError
from .._redact import redact
from .._registry import ToolRegistry
from .._render import dumps, render_value
from .._tool import Tool
from ..export import StrictSchemaError, inline_refs
from ._common import (
    Context,
    Name,
    Names,
    ToolLike,
    call_context,
    check_context,
    check_inlinable,
    check_name,
    model_message,
    no_longer_available,
    not_an_object,
    not_asked,
    resolve,
    select,
    shown_name,
    shown_names,
)

__all__ = ["HarnessAutoGenTool", "HarnessWorkbench", "as_autogen_tools", "to_autogen"]

AutoGenContext = Context[FunctionCall]

_events = logging.getLogger(EVENT_LOGGER_NAME)


class _AnyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")


class HarnessAutoGenTool(BaseTool[_AnyArgs, BaseModel]):
    """A harness tool seen by AutoGen."""

    def __init__(self, tool: Tool, registry: ToolRegistry, context: AutoGenContext = None, *, name: str | None = None) -> None:
        self._tool = tool
        self._registry = registry
        self._context = context
        # the name AutoGen shows the model (name=); the registry is called by the tool's own name
        super().__init__(_AnyArgs, BaseModel, tool.name if name is None else name, tool.description or tool.name)
        check_inlinable(tool, "to_autogen", "AutoGen is shown the schema with its $defs, which its Anthropic client drops")

    @property
    def schema(self) -> ToolSchema:
        """The harness schema with its ``$ref`` inlined (AutoGen's Anthropic client keeps only ``properties``,
        ``required`` and ``type``, never ``$defs``); one that cannot be inlined (recursive, or past the export's
        inlining budget) as it is, which a WARNING said when the tool was adapted. A copy."""
        try:
            inlined = inline_refs(self._tool.parameters, tool=self._tool.name)
        except StrictSchemaError:
            inlined = copy.deepcopy(dict(self._tool.parameters))
        parameters = cast(ParametersSchema, {"type": "object", "properties": {}, **inlined})
        return ToolSchema(name=self.name, description=self.description, parameters=parameters)  # the name if none

    async def _call(self, args: object, call_id: str | None) -> Any:
        name = self._tool.name
        shown = self.name  # the name the model's texts give the tool: AutoGen's, or a HarnessWorkbench override
        # AutoGen hands over whatever json.loads made of the model's text: JSON that is not an
        # object ([1, 2], "hi", and through HarnessWorkbench [], 0, null) goes to the registry to be refused as such.
        if isinstance(args, _Handed):
            shown = args.shown
            args = args.value
        arguments = dict(args) if isinstance(args, Mapping) else not_an_object(args)

        def run_context() -> FunctionCall:
            return FunctionCall(id=call_id or "", name=name, arguments=dumps(arguments))

        try:
            context = call_context(self._context, run_context, tool=name, call_id=call_id or None)
        except ToolError as err:  # an error result, as a tool's failure is: no chained cause (its text is not masked)
            refused: ToolError | None = _raised(err, shown)
        else:
            refused = None
        if refused is not None:
            raise refused
        result = await self._registry.atry_call(name, arguments, context=context, call_id=call_id or None)
        if not result.ok:
            result = no_longer_available(result, self._registry, name)  # removed from the registry since
            result = not_asked(result, "no_step")  # AutoGen has no approval step: a call the harness holds is refused
            assert result.error is not None
            raise _raised(result.error, shown)
        return result.value

    async def _until_cancelled(self, args: object, call_id: str | None, token: CancellationToken | None) -> Any:
        """The call, cancelled with ``token`` (what AutoGen's workbench does for its tools, done here for any caller:
        ``ToolAgent`` and the assistants of other services call ``run_json`` directly): a token cancelled already
        runs nothing; one cancelled meanwhile cancels the call (an async tool, a cooperative tool's ``call.cancelled``,
        the plugins release what it held). Either way ``CancelledError``, as AutoGen's own tools raise."""
        if token is None:
            return await self._call(args, call_id)
        if token.is_cancelled():
            raise asyncio.CancelledError
        task = asyncio.ensure_future(self._call(args, call_id))  # (in this context: the tool's span its parent)
        token.link_future(task)
        return await task

    async def run(self, args: _AnyArgs, cancellation_token: CancellationToken) -> Any:
        return await self._until_cancelled(args.model_dump(), None, cancellation_token)

    async def run_json(self, args: Mapping[str, Any], cancellation_token: CancellationToken, call_id: str | None = None) -> Any:
        """``BaseTool.run_json`` without AutoGen's argument model: the raw arguments go to the registry.

        As AutoGen's own tools, in a ``trace_tool_span`` with the call id, logging a ``ToolCallEvent``:
        with the arguments and the result masked (:func:`~harness_one.redact`), as the harness logs them.
        """
        with trace_tool_span(tool_name=self.name, tool_description=self.description, tool_call_id=call_id):
            value = await self._until_cancelled(args, call_id, cancellation_token)
        masked = redact(self.return_value_as_string(value))
        given = args.value if isinstance(args, _Handed) else args
        _events.info(ToolCallEvent(tool_name=self.name, arguments=redact(dict(given)), result=masked))
        return value

    def return_value_as_string(self, value: Any) -> str:
        return render_value(value)


class _Handed:
    """A call's arguments as :class:`HarnessWorkbench` hands them through ``StaticWorkbench.call_tool`` to a harness
    tool's ``run_json``: as they are (the base class makes ``{}`` of falsy ones: ``[]``, ``0``, ``false``, ``""``,
    ``null``), with the name the workbench shows the tool (a ``tool_overrides`` name), which the model's texts give it."""

    __slots__ = ("shown", "value")

    def __init__(self, value: Any, shown: str) -> None:
        self.value = value
        self.shown = shown


#: ``HarnessWorkbench.call_tool`` called without arguments (not the same as ``arguments=None``, the model's ``null``).
_NO_ARGUMENTS: Mapping[str, Any] = MappingProxyType({})


class HarnessWorkbench(StaticStreamWorkbench):
    """AutoGen's workbench for an agent's tools, handing harness tools the model's arguments as they are.

    ``AssistantAgent(tools=...)`` puts its tools in a ``StaticStreamWorkbench``, which hands a
    tool ``{}`` for arguments that are falsy JSON (``[]``, ``0``, ``false``, ``""``, ``null``): a
    harness tool would run with its defaults. ``AssistantAgent(workbench=HarnessWorkbench(tools))``
    hands those to the harness tools among ``tools`` as they are, which the registry refuses as
    not a JSON object; other tools get ``{}`` as in AutoGen. ``AssistantAgent`` passes what
    ``json.loads`` made of the model's text, so ``arguments=None`` is the model's ``null``; a
    call without ``arguments`` has none.
    """

    def _arguments(self, tool_name: str, arguments: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """``arguments`` as the base class should pass them on: for a harness tool, wrapped with the name shown."""
        tool = next((t for t in self._tools if t.name == tool_name), None)
        if not isinstance(tool, HarnessAutoGenTool):
            return None if arguments is _NO_ARGUMENTS else arguments
        override = self._tool_overrides.get(tool_name)
        shown = override.name if override is not None and override.name else tool_name  # as list_tools shows it
        value = {} if arguments is _NO_ARGUMENTS else arguments
        return cast(Mapping[str, Any], _Handed(value, shown))  # truthy: StaticWorkbench passes it on to run_json

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = _NO_ARGUMENTS,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """``StaticWorkbench.call_tool``, with a harness tool's falsy non-object arguments kept for the registry to refuse,
        and its texts naming it as the workbench shows it (a ``tool_overrides`` name)."""
        original = self._override_name_to_original.get(name, name)
        return await super().call_tool(name, self._arguments(original, arguments), cancellation_token, call_id)

    async def call_tool_stream(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = _NO_ARGUMENTS,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> AsyncGenerator[Any | ToolResult, None]:
        """``StaticStreamWorkbench.call_tool_stream`` (what ``AssistantAgent`` calls), keeping them as :meth:`call_tool`
        does, and, as it does, taking a ``tool_overrides`` name for its tool (AutoGen's stream finds none by it)."""
        original = self._override_name_to_original.get(name, name)
        async for event in super().call_tool_stream(original, self._arguments(original, arguments), cancellation_token, call_id):
            if isinstance(event, ToolResult) and event.name != name:
                yield event.model_copy(update={"name": name})  # the name the model called, as call_tool answers
            else:
                yield event


def _raised(error: ToolError, shown: str) -> ToolError:
    """``error`` as raised to AutoGen, which hands ``str(error)`` to the model and records the exception
    (its type and traceback) in the tool's span: the same class and fields (``kind``, ``retry_after``,
    ``cause``, ...), its text safe to encode and naming the tool as AutoGen shows it (``shown``; its ``tool``
    is still the registry's name), and no exception chained (a tool's own, whose text is not masked)."""
    raised = copy.copy(error)  # rebuilt from its state (ToolError.__reduce__): no __cause__, no traceback
    raised.message = model_message(error, shown)
    raised.args = (raised.message,)
    return raised


def to_autogen(
    tool: ToolLike, registry: ToolRegistry | None = None, *, context: AutoGenContext = None, name: Name = None
) -> HarnessAutoGenTool:
    """The harness tool (a name, a ``Tool`` or a ``@defineTool`` function) as an AutoGen tool.

    ``name``: the name AutoGen shows the model (a string, or a function of the tool's name); the tool's own by default.
    """
    check_context(context)
    check_name(name)
    reg, found = resolve(tool, registry)
    return HarnessAutoGenTool(found, reg, context, name=shown_name(found, name))


def as_autogen_tools(
    tools: Iterable[ToolLike] | None = None,
    registry: ToolRegistry | None = None,
    *,
    context: AutoGenContext = None,
    names: Names = None,
) -> list[HarnessAutoGenTool]:
    """The given tools as AutoGen tools; by default the registry's tools defined in code.

    ``names``: the names AutoGen shows (tool name -> name, or a function of the tool's name).
    """
    check_context(context)
    check_name(names, keyword="names")
    reg, picked = select(tools, registry, adapter="as_autogen_tools")
    shown = shown_names(picked, names, adapter="as_autogen_tools")
    return [HarnessAutoGenTool(t, reg, context, name=n) for t, n in zip(picked, shown, strict=True)]
