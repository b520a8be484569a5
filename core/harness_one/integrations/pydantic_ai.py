"""Pydantic AI: a harness tool as a ``pydantic_ai.Tool`` built from its JSON schema.

Pydantic AI does not validate arguments of a schema-built tool; the harness validates them
once, and reads the text pydantic-core cannot parse. The tool-call id becomes the harness call
id, and ``context=`` is a mapping or a function of the call's ``RunContext`` (``ctx.deps`` is
what ``agent.run(deps=...)`` was given). Without ``context=``, the context is
``{"run_id": ctx.run_id}``: Pydantic AI's id of the run (``agent.run(run_id=...)``, or a
fresh one per run), so per-run budgets count each run's calls.

An argument error raises ``ModelRetry`` with the harness's message: the model's fault, so it
counts against the tool's ``retries``. Every other refusal (rate limited, busy, circuit open,
timed out, the tool failed) raises ``ToolFailed``: the model reads the same message as a
failed tool result, and the retries it has for its own mistakes are left alone.

A call the harness's ``approval`` plugin would hold for a decision raises Pydantic AI's
``ApprovalRequired``: the run ends with the call in ``DeferredToolRequests.approvals`` (give
the agent ``output_type=[str, DeferredToolRequests]``). Run again with
``deferred_tool_results=``: an approved call (``ctx.tool_call_approved``) is granted by its
call id and runs through every harness policy; a denied one never reaches the tool. A call the
harness holds that Pydantic AI did not put to a person (the rule said no when the adapter
asked, yes when the call was made) is refused and withdrawn: the model reads that it was not
run for want of approval.

``name=`` (``names=``) sets the name Pydantic AI shows the model, such as one Gemini accepts
(``name=harness_one.export.gemini_name``); the registry is still called by the tool's own name.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, cast

from pydantic_ai import ApprovalRequired, ModelRetry, RunContext, Tool, ToolFailed
from pydantic_core import SchemaValidator, ValidationError, core_schema

from .._arguments import decode_arguments
from .._errors import ToolError
from .._registry import ToolRegistry
from .._render import json_data
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
    not_an_object,
    not_asked,
    resolve,
    select,
    shown_name,
    shown_names,
)

__all__ = ["as_pydantic_ai_tools", "to_pydantic_ai"]

PydanticAIContext = Context[RunContext[Any]]


#: The key under which the adapter's validator hands ``invoke`` arguments that are not a JSON object.
_NOT_AN_OBJECT = "\x00harness-one:arguments"


class _Unread:
    """Arguments that are not a JSON object, as the validator hands them under :data:`_NOT_AN_OBJECT`.

    An instance no JSON decodes to: a model that sends an object with that key sends arguments
    like any other (which the registry refuses as an unexpected argument), never this.
    """

    __slots__ = ("arguments",)

    def __init__(self, arguments: Any) -> None:
        self.arguments = arguments


def _unread(arguments: Any) -> dict[str, _Unread]:
    return {_NOT_AN_OBJECT: _Unread(arguments)}


def _as_object(arguments: Any) -> Any:
    """Arguments that are not a JSON object (``[1, 2]``, ``"hi"``) under :data:`_NOT_AN_OBJECT`, for the registry to refuse."""
    return arguments if isinstance(arguments, dict) else _unread(not_an_object(arguments))


#: Pydantic AI unpacks the validated arguments into the function (``**arguments``): anything but
#: a dict would end the run with a TypeError, so the harness is handed its JSON text instead.
_VALIDATOR = SchemaValidator(core_schema.no_info_after_validator_function(_as_object, core_schema.any_schema()))


class _Arguments:
    """The validator Pydantic AI runs on a tool's arguments (its ``SchemaValidatorProt``).

    JSON that pydantic-core parses goes through :data:`_VALIDATOR`. Text its parser refuses
    is read by the registry's decoder: a lone surrogate (pydantic-core refuses even its escape)
    is a string like any other, and what the decoder refuses too (malformed, nested too deep,
    an integer too long, invalid UTF-8) goes to the registry as the model sent it, so the
    model reads the harness's argument error rather than pydantic's (whose echo of a lone
    surrogate ended the run when Pydantic AI wrote it into the retry prompt).
    """

    def __init__(self, registry: ToolRegistry) -> None:
        self._registry = registry

    def validate_json(self, input: str | bytes | bytearray, *, allow_partial: Any = False, **kwargs: Any) -> Any:
        try:
            return _VALIDATOR.validate_json(input, allow_partial=allow_partial, **kwargs)
        except ValidationError:
            if allow_partial not in (False, "off"):
                raise  # arguments still streaming in: not the model's last word
        try:
            return decode_arguments(input, self._registry.limits)
        except ToolError:
            return _unread(input)  # the registry refuses it again, naming the problem

    def validate_python(self, input: Any, *, allow_partial: Any = False, **kwargs: Any) -> Any:
        return _VALIDATOR.validate_python(input, allow_partial=allow_partial, **kwargs)


def _run_id(ctx: RunContext[Any]) -> str | None:
    """The run's id: ``agent.run(run_id=...)``, or the fresh one Pydantic AI gives each run."""
    return ctx.run_id


def to_pydantic_ai(
    tool: ToolLike, registry: ToolRegistry | None = None, *, context: PydanticAIContext = None, name: Name = None
) -> Tool[Any]:
    """The harness tool (a name, a ``Tool`` or a ``@defineTool`` function) as a Pydantic AI tool.

    ``name``: the name Pydantic AI shows the model (a string, or a function of the tool's name); the tool's own by default.
    """
    check_context(context)
    check_name(name)
    reg, found = resolve(tool, registry)
    shown = shown_name(found, name)
    name = found.name  # the registry's name for it
    gated = approval_possible(reg, found)  # decided once: tools without an approval rule pay nothing per call

    async def invoke(ctx: RunContext[Any], /, **arguments: Any) -> Any:
        call_id = ctx.tool_call_id
        unread = arguments.get(_NOT_AN_OBJECT) if len(arguments) == 1 else None
        text = unread.arguments if isinstance(unread, _Unread) else None
        try:
            extra = call_context(context, lambda: ctx, tool=name, call_id=call_id, run_id=_run_id)
        except ToolError as err:
            raise ToolFailed(model_message(err, shown)) from None
        if (
            gated
            and text is None
            and call_id is not None
            and approval_needed(reg, found, arguments, context=extra, call_id=call_id)
        ):
            if not ctx.tool_call_approved:
                raise ApprovalRequired  # the run ends with this call in DeferredToolRequests.approvals
            # approved in Pydantic AI: the harness does not ask again (for this call, this context)
            grant_approval(reg, call_id, found, arguments, context=extra)
        result = await reg.atry_call(name, arguments if text is None else text, context=extra, call_id=call_id)
        if result.ok:
            if result.value is None:  # Pydantic AI shows None as nothing (''): the model reads null, as from the others
                return "null"
            return json_data(result.value)  # what the harness's text holds: NaN as "NaN", bytes and objects as text
        # held by the harness, yet Pydantic AI put it to no one (the rule said no then, or the tool has none), or
        # the approval it got was not for the call as it ran: refused
        result = not_asked(
            no_longer_available(result, reg, name),
            "approval_missed" if ctx.tool_call_approved else "rule_said_no" if gated else "no_step",
        )
        assert result.error is not None
        message = model_message(result.error, shown)  # the tool named as the model was shown it
        if result.error.kind == "invalid_arguments":
            raise ModelRetry(message)
        raise ToolFailed(message)

    schema = copy.deepcopy(found.parameters)  # a copy: a change made to it never reaches the harness tool
    description = found.description or name  # as the other adapters: the tool's name, if it has no description
    built: Tool[Any] = Tool.from_schema(invoke, name=shown, description=description, json_schema=schema, takes_ctx=True)
    built.function_schema.validator = cast(SchemaValidator, _Arguments(reg))  # any SchemaValidatorProt will do
    return built


def as_pydantic_ai_tools(
    tools: Iterable[ToolLike] | None = None,
    registry: ToolRegistry | None = None,
    *,
    context: PydanticAIContext = None,
    names: Names = None,
) -> list[Tool[Any]]:
    """The given tools as Pydantic AI tools; by default the registry's tools defined in code.

    ``names``: the names Pydantic AI shows (tool name -> name, or a function of the tool's name).
    """
    check_context(context)
    check_name(names, keyword="names")
    reg, picked = select(tools, registry, adapter="as_pydantic_ai_tools")
    shown = shown_names(picked, names, adapter="as_pydantic_ai_tools")
    return [to_pydantic_ai(t, reg, context=context, name=n) for t, n in zip(picked, shown, strict=True)]
