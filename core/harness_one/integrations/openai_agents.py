"""OpenAI Agents SDK: a harness tool as a ``FunctionTool``.

The SDK hands the tool the model's raw JSON arguments; the harness decodes and validates
them once. The tool-call id becomes the harness call id, and ``context=`` is a mapping or a
function of the call's ``ToolContext`` (``ctx.context`` is what ``Runner.run(context=...)``
was given). Errors come back to the model as the harness's ``Error: ...`` text, and mark the
SDK's function span as failed (as a tool that raised does). With
``strict=True`` the schema is converted to OpenAI's strict form and the nulls the model sends
for optional arguments are dropped, so the harness's defaults apply; ``strict="auto"`` does so
for each tool whose schema strict mode can express, and leaves the others non-strict.
``name=`` (``names=``) sets the name the SDK shows the model; the registry is still called by
the tool's own name.

A tool the harness's ``approval`` plugin may hold for a decision (``requires_approval``)
gets the SDK's ``needs_approval``: the plugin's rule decides per call, and when it says
yes the run stops with the call in ``result.interruptions``. Once approved
(``state.approve(item)``), the call is granted by its call id (for its arguments and context, when
the harness rule holds it as it runs) and runs through every harness policy; a rejected one never
reaches the tool. A call the harness holds that the SDK did not
put to a person (its rule said no when the SDK asked, yes when the call was made) is refused
and withdrawn: the model reads that it was not run for want of approval.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from agents import FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext
from agents.tracing import SpanError, get_current_span

from .._arguments import decode_arguments
from .._call import CallResult
from .._errors import ToolError
from .._log import log_event
from .._registry import ToolRegistry
from .._requests import drop_nulls
from .._tool import Tool
from ..export import StrictSchemaError, strict_schema
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
    model_message,
    no_longer_available,
    not_asked,
    refusal,
    resolve,
    select,
    shown_name,
    shown_names,
)

__all__ = ["as_openai_agents_tools", "to_openai_agents"]

AgentsContext = Context[ToolContext[Any]]
#: ``strict=`` of the adapter: every tool strict, each where its schema allows (``"auto"``), or none.
Strict = bool | Literal["auto"]


def to_openai_agents(
    tool: ToolLike,
    registry: ToolRegistry | None = None,
    *,
    strict: Strict = False,
    context: AgentsContext = None,
    name: Name = None,
) -> FunctionTool:
    """The harness tool (a name, a ``Tool`` or a ``@defineTool`` function) as an OpenAI Agents SDK tool.

    ``strict``: ``True`` (the strict schema, or :class:`~harness_one.export.StrictSchemaError`),
    ``"auto"`` (strict where the schema allows, as ``export(strict="auto")``) or ``False``.
    ``name``: the name the SDK shows the model (a string, or a function of the tool's name); the tool's own by default.
    """
    _check_strict(strict)
    check_context(context)
    check_name(name)
    reg, found = resolve(tool, registry)
    shown = shown_name(found, name)  # what the SDK (its approvals included) knows the tool by
    name = found.name  # what the registry does
    schema, nullable, strict = _schema(found, strict)

    gated = approval_possible(reg, found)

    # Annotated ToolContext (not RunContextWrapper): only then does the SDK pass the tool-call id.
    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        args: Any = drop_nulls(arguments, nullable, reg.limits) if nullable else arguments
        call_id = getattr(ctx, "tool_call_id", None)
        try:
            extra = call_context(context, lambda: ctx, tool=name, call_id=call_id)
        except ToolError as err:
            result = refusal(err)
        else:
            if gated and call_id and ctx.is_tool_approved(shown, call_id):
                _grant(reg, found, args, extra, call_id)  # the person approved it in the SDK: the harness does not ask again
            result = no_longer_available(await reg.atry_call(name, args, context=extra, call_id=call_id), reg, name)
        if not result.ok:
            # held by the harness, yet the SDK asked no one about it (its rule said no then, or the tool has none)
            result = not_asked(result, "rule_said_no" if gated else "no_step")
            _mark_failed(ctx, result, shown)
        return result.for_model(shown)  # the tool named as the model was shown it

    async def needs_approval(run: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        args = drop_nulls(params, nullable, reg.limits) if nullable else params

        def tool_context() -> ToolContext[Any]:
            # (the SDK gives the rule only the run's context: no agent, run config nor tool call in it)
            return ToolContext.from_agent_context(run, call_id, tool_name=shown, tool_arguments=json.dumps(params))

        try:
            extra = call_context(context, tool_context, tool=name, call_id=call_id)
        except ToolError:
            # No context to judge by (a function that reads ctx.agent, which this one lacks): a person is asked,
            # rather than the harness holding the call as it runs, with no one asked. The call, approved, builds
            # its context from its own ToolContext; one that fails there too is the model's error then.
            return True
        return approval_needed(reg, found, args, context=extra, call_id=call_id)

    return FunctionTool(
        name=shown,
        description=found.description or name,
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=strict,
        needs_approval=needs_approval if gated else False,
    )


def _grant(reg: ToolRegistry, tool: Tool, arguments: Any, context: Mapping[str, Any] | None, call_id: str) -> None:
    """Grant the call a person approved in the SDK, with its context, when the harness rule holds it as it is made.

    The SDK reports a call approved for the rest of the run once a person approved it with
    ``always_approve=True``; a call the rule does not hold needs no grant, and gets none (one
    left unused would wait in the plugin for ``ttl``).
    """
    try:
        decoded = decode_arguments(arguments, reg.limits)
    except ToolError:
        return  # the call is refused for its arguments anyway
    if approval_needed(reg, tool, decoded, context=context, call_id=call_id):
        grant_approval(reg, call_id, tool, decoded, context=context)


def _check_strict(strict: object) -> None:
    if not isinstance(strict, bool) and strict != "auto":
        raise ValueError(f"strict must be True, False or 'auto', not {strict!r}")


def _schema(tool: Tool, strict: Strict) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """The schema the SDK gets (a copy: a change to it never reaches the harness tool and its exports), the
    properties made nullable, and whether it is strict: with ``"auto"``, a tool strict mode cannot express is not."""
    if strict:
        try:
            return (*strict_schema(tool.parameters, tool=tool.name), True)
        except StrictSchemaError as exc:
            if strict is True:
                raise
            log_event(
                logging.INFO,
                "integration tool not strict",
                logger="harness_one.integrations",
                tool=tool.name,
                reasons=exc.reasons,
            )
    return copy.deepcopy(dict(tool.parameters)), {}, False


def _mark_failed(ctx: ToolContext[Any], result: CallResult, shown: str) -> None:
    """Record the harness's refusal on the SDK's function span, as the SDK does for a tool that raised.

    The model reads the harness's text all the same. The message goes into the trace only when
    the run allows sensitive data in traces (``RunConfig.trace_include_sensitive_data``).
    """
    span = get_current_span()
    if span is None or result.error is None:
        return
    data: dict[str, Any] = {"tool_name": result.tool, "kind": result.error.kind}
    if ctx.run_config is None or ctx.run_config.trace_include_sensitive_data:
        data["error"] = model_message(result.error, shown)
    span.set_error(SpanError(message="Error running tool (non-fatal)", data=data))


def as_openai_agents_tools(
    tools: Iterable[ToolLike] | None = None,
    registry: ToolRegistry | None = None,
    *,
    strict: Strict = False,
    context: AgentsContext = None,
    names: Names = None,
) -> list[FunctionTool]:
    """The given tools as OpenAI Agents SDK tools; by default the registry's tools defined in code.

    ``strict="auto"`` makes each tool strict where its schema allows (see :func:`to_openai_agents`).
    ``names``: the names the SDK shows (tool name -> name, or a function of the tool's name).
    """
    _check_strict(strict)
    check_context(context)
    check_name(names, keyword="names")
    reg, picked = select(tools, registry, adapter="as_openai_agents_tools")
    shown = shown_names(picked, names, adapter="as_openai_agents_tools")
    return [to_openai_agents(t, reg, strict=strict, context=context, name=n) for t, n in zip(picked, shown, strict=True)]
