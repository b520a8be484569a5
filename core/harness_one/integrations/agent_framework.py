"""Microsoft Agent Framework (``agent-framework-core``): a harness tool as a ``FunctionTool``.

The tool advertises the harness schema and hands the model's raw arguments to the registry,
so they are validated once, by the harness (the framework's own checks of a schema-built tool
are skipped, as are its ``max_invocations`` counters: the harness policies apply instead).
Arguments the framework could not read as a JSON object (its ``{"raw": ...}``) reach the
registry as the model's text again, for the harness to refuse; for a tool that takes no ``raw``,
the refusal also names the other reading (the model's own ``{"raw": ...}``, an unexpected property).
A blank string under ``raw`` (the JSON text ``""``, or a model's ``{"raw": "  "}``) is refused as a
string, never read as no arguments. For a tool that takes a ``raw`` property (a parameter of that name,
or any property: ``**kwargs``, ``additionalProperties``), ``{"raw": ...}`` is the model's own object
unless it holds malformed object text. ``name=`` (``names=``) sets the name the framework shows
the model; the registry is still called by the tool's own name.
Function middleware wraps it like any other tool. The tool-call id becomes the harness call
id, and ``context=`` is a mapping or a function of the ``FunctionInvocationContext``
(``ctx.kwargs`` is what ``agent.run(..., function_invocation_kwargs=...)`` was given,
``ctx.session`` the session). Without ``context=``, a call in a session has the context
``{"run_id": session.session_id}``, so per-run budgets count the session's calls; a run
without a session has none. Results and errors reach the model as the harness's text
(``Error: ...`` for errors), not the framework's "Error: Function failed.".

A tool that needs approval under the registry's ``approval`` plugin (``requires_approval``
true or a predicate) gets ``approval_mode="always_require"``: the framework stops the run with
a ``function_approval_request`` (``response.user_input_requests``) and, once the person
approves it, invokes the tool; the adapter then grants that call id to the plugin and the call
runs through every policy. A rejected call never reaches the tool. ``approval_mode`` is per
tool, so the framework asks about every call of a tool with a predicate; the predicate then
decides whether the grant is needed (a call it waves through just runs). A call the harness
holds anyway in the framework's loop (the predicate's answer changed, other arguments than the
approved ones, a tool adapted before it had a rule) is refused and withdrawn: no later result
would reach the model. A direct call (no invocation context) waits in the harness instead.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from agent_framework import Content, FunctionInvocationContext, FunctionTool
from pydantic import BaseModel

from .._call import CallResult
from .._errors import ToolArgumentError, ToolError
from .._registry import ToolRegistry
from .._tool import Tool
from ._common import (
    Context,
    Name,
    Names,
    ToolLike,
    approval_needed,
    approval_possible,
    call_context,
    check_context,
    check_name,
    grant_approval,
    is_json,
    no_longer_available,
    not_an_object,
    not_asked,
    refusal,
    resolve,
    select,
    shown_name,
    shown_names,
)

__all__ = ["HarnessFunctionTool", "as_agent_framework_tools", "to_agent_framework"]

AgentFrameworkContext = Context[FunctionInvocationContext]


class HarnessFunctionTool(FunctionTool):
    """A harness tool seen by the Agent Framework."""

    def __init__(
        self, tool: Tool, registry: ToolRegistry, context: AgentFrameworkContext = None, *, name: str | None = None
    ) -> None:
        name = tool.name if name is None else name  # the name the framework shows; the registry's is tool.name

        # What a direct call (``tool(a=1)``) runs; the framework's agent loop goes through invoke().
        # The FunctionInvocationContext annotation makes the loop build the invocation context. Positional
        # only: every keyword is the tool's argument, a tool's own ``ctx`` parameter too.
        async def call(ctx: FunctionInvocationContext | None = None, /, **arguments: Any) -> Any:
            if ctx is not None and not isinstance(ctx, FunctionInvocationContext):
                raise TypeError(
                    f"tool '{name}' takes its arguments by keyword; the one positional argument it takes "
                    f"is a FunctionInvocationContext, not {type(ctx).__name__}"
                )
            return _value(await self._call(arguments, ctx, None))

        super().__init__(
            name=name,
            description=tool.description or tool.name,
            func=call,
            input_model=dict(tool.parameters),
            approval_mode="always_require" if approval_possible(registry, tool) else "never_require",
        )
        self.harness_tool = tool
        self.registry = registry
        self._context_source = context

    async def _call(self, arguments: Any, ctx: FunctionInvocationContext | None, call_id: str | None) -> CallResult:
        def run_context() -> FunctionInvocationContext:
            given = arguments if isinstance(arguments, Mapping) else {}
            return ctx if ctx is not None else FunctionInvocationContext(function=self, arguments=given)

        name = self.harness_tool.name
        try:
            context = call_context(self._context_source, run_context, tool=name, call_id=call_id, run_id=_run_id)
        except ToolError as err:
            return refusal(err)
        if (
            self.approval_mode == "always_require"
            and ctx is not None
            and call_id is not None
            and isinstance(arguments, Mapping)
            and approval_needed(self.registry, self.harness_tool, arguments, context=context, call_id=call_id)
        ):
            # The framework's loop invokes an always_require tool only once the person approved the call:
            # granted with the arguments they approved (a call with other ones is held by the harness).
            grant_approval(self.registry, call_id, self.harness_tool, _approved_arguments(ctx, arguments), context=context)
        result = await self.registry.atry_call(name, arguments, context=context, call_id=call_id)
        result = no_longer_available(result, self.registry, name)  # removed from the registry since
        if not result.ok and ctx is not None and call_id is not None:
            # In the framework's loop a call the harness holds would never bring its result back to the model:
            # refused. An always_require call was approved, but not as it ran (the rule needed no grant when checked).
            result = not_asked(result, "approval_missed" if self.approval_mode == "always_require" else "no_step")
        return result

    def _model_text(self, arguments: dict[str, Any]) -> Any:
        """The model's arguments: the framework hands arguments it could not read as a JSON object
        as ``{"raw": value}``: its text (malformed), or the JSON value that is not an object, which
        go to the registry to refuse (:func:`not_an_object`).

        For a tool that takes a ``raw`` property (:func:`_takes_raw`: a ``raw`` parameter, or any
        property), ``{"raw": ...}`` is a valid call: only a value that is no JSON but starts like a
        JSON object (``{"``) is taken for the model's malformed text, anything else is a ``raw``
        argument. An object under ``raw`` is never the framework's (it hands a JSON object over as
        it is): those are the model's arguments. For a tool that refuses a ``raw`` property, the
        model may as well have sent ``{"raw": ...}`` itself: its refusal says both (:meth:`_both_readings`).
        A blank string there (the framework's reading of the JSON text ``""``, or the model's own) is a
        string, not an object: as text, the registry would read it as no arguments and run the tool.
        """
        if len(arguments) != 1 or "raw" not in arguments:
            return arguments
        value = arguments["raw"]
        if isinstance(value, Mapping):
            return arguments
        readable = is_json(value) if isinstance(value, str) else True
        if _takes_raw(self.harness_tool.parameters):
            return value if not readable and _OBJECT_START.match(value) else arguments
        return not_an_object(value) if readable or not value.strip() else value

    def _both_readings(self, arguments: Mapping[str, Any], result: CallResult) -> CallResult:
        """The refusal of ``{"raw": value}`` read as the model's text, naming the other reading too.

        The framework hands text it cannot read as an object as ``{"raw": text}``, the same as a
        model's own ``{"raw": "..."}``: for a tool that refuses a ``raw`` property the model reads
        that its arguments were either the text refused, or an object with that unexpected
        property (and which properties the tool takes).
        """
        error = result.error
        parameters = self.harness_tool.parameters
        properties = parameters.get("properties") or {}
        if (
            not isinstance(error, ToolArgumentError)
            or len(arguments) != 1
            or "raw" not in arguments
            or isinstance(arguments["raw"], Mapping)
            or _takes_raw(parameters)
            or not error.problems
            or any(p.path != "$" for p in error.problems)
        ):
            return result
        allowed = ", ".join(sorted(properties)) or "none"
        also = (
            f'; or, if the arguments were the object {{"raw": ...}} (the framework passes on both the same way), '
            f"'raw' is an unexpected property; allowed properties: {allowed}"
        )
        first, *rest = error.problems
        problems = [dataclasses.replace(first, message=first.message + also), *rest]
        return result._replace(error=ToolArgumentError(problems, tool=error.tool, call_id=error.call_id))

    async def invoke(
        self,
        *,
        arguments: BaseModel | Mapping[str, Any] | None = None,
        context: FunctionInvocationContext | None = None,
        tool_call_id: str | None = None,
        skip_parsing: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Call the harness tool with the model's raw arguments; ``list[Content]`` holding the harness's text."""
        if arguments is None:
            arguments = context.arguments if context is not None else kwargs
        raw = arguments.model_dump(exclude_unset=True) if isinstance(arguments, BaseModel) else dict(arguments)
        if context is not None:
            # As the framework's own FunctionTool.invoke: arguments changed after its security middleware
            # saw them fail the run, and arguments changed after the person approved them are asked about again.
            self._ensure_security_arguments_unchanged(context, raw)
            self._ensure_approved_arguments_unchanged(context, self._approval_visible_arguments(arguments, context))
        result = self._both_readings(raw, await self._call(self._model_text(raw), context, tool_call_id or None))
        if skip_parsing:
            return _value(result)
        return [Content.from_text(result.for_model(self.name))]  # the tool named as the model was shown it


#: How the text of a JSON object starts, whole or cut short: ``{"``, ``{'`` (a Python dict), ``{}``, ``{``.
_OBJECT_START = re.compile(r"\s*\{\s*(?:[\"'}]|$)")


def _takes_raw(parameters: Mapping[str, Any]) -> bool:
    """Whether a tool's schema takes a ``raw`` property: a parameter of that name, or any property
    (``additionalProperties`` absent, true or a schema: a ``**kwargs`` tool)."""
    return "raw" in (parameters.get("properties") or {}) or parameters.get("additionalProperties") is not False


def _approved_arguments(ctx: FunctionInvocationContext, arguments: Mapping[str, Any]) -> Any:
    """The arguments the person approved: the approved call's, when the framework hands its approval to
    function middleware (``metadata["approval_response"]``); otherwise the call's own (nothing came between)."""
    response = ctx.metadata.get("approval_response")
    approved = getattr(response, "function_call", None)
    if not isinstance(approved, Content):
        return arguments
    return approved.parse_arguments() or {}


def _run_id(ctx: FunctionInvocationContext) -> str | None:
    """The id of the run's session (``agent.run(..., session=...)``); None without one."""
    return ctx.session.session_id if ctx.session is not None else None


def _value(result: CallResult) -> Any:
    if not result.ok:
        assert result.error is not None
        raise result.error
    return result.value


def to_agent_framework(
    tool: ToolLike, registry: ToolRegistry | None = None, *, context: AgentFrameworkContext = None, name: Name = None
) -> HarnessFunctionTool:
    """The harness tool (a name, a ``Tool`` or a ``@defineTool`` function) as an Agent Framework tool.

    ``name``: the name the framework shows the model (a string, or a function of the tool's name); the tool's own by default.
    """
    check_context(context)
    check_name(name)
    reg, found = resolve(tool, registry)
    return HarnessFunctionTool(found, reg, context, name=shown_name(found, name))


def as_agent_framework_tools(
    tools: Iterable[ToolLike] | None = None,
    registry: ToolRegistry | None = None,
    *,
    context: AgentFrameworkContext = None,
    names: Names = None,
) -> list[HarnessFunctionTool]:
    """The given tools as Agent Framework tools; by default the registry's tools defined in code.

    ``names``: the names the framework shows (tool name -> name, or a function of the tool's name).
    """
    check_context(context)
    check_name(names, keyword="names")
    reg, picked = select(tools, registry, adapter="as_agent_framework_tools")
    shown = shown_names(picked, names, adapter="as_agent_framework_tools")
    return [HarnessFunctionTool(t, reg, context, name=n) for t, n in zip(picked, shown, strict=True)]
