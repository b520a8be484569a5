"""What the framework adapters share: which tools to adapt, through which registry, with which context.

Every adapter takes the tools as names, :class:`Tool` objects or ``@defineTool`` functions,
and a ``context=`` that is a mapping (the same for every call) or a function of the
framework's run context, called once per tool call, whose result becomes ``Call.context``:
each call gets its own copy of it, a plain ``dict`` (:func:`call_context`), so nothing a hook or
tool writes into one call's context reaches another call or the application's mapping.
Whatever arguments a framework hands over, the adapter passes them to the registry in a form
whose refusal names the model's mistake (:func:`not_an_object`, :func:`is_json`), never raising.
A call the harness holds for approval where nothing can approve it is refused with
:func:`not_asked`, which ``harness-one call`` and the MCP server use too. A call of an adapted
tool that was removed from the registry since is refused with :func:`no_longer_available`,
which names no other tool. Without ``context=``, an adapter whose framework names its runs
passes that id as ``Call.context["run_id"]`` (:func:`call_context`), so per-run budgets count
its calls. ``name=`` / ``names=`` set the name the framework (and so the model) is shown for a
tool, such as one a provider accepts (:func:`~harness_one.export.gemini_name`): the adapter
still calls the registry by the tool's own name (:func:`shown_name`, :func:`shown_names`); a name
no provider accepts is refused when the tool is adapted, not at the model request. The text the
model reads names the tool as it was shown (``CallResult.for_model(shown)``, :func:`model_message` with the
name shown); a :class:`ToolError` raised to the application keeps the registry's name.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, TypeAlias, TypeVar
from uuid import UUID

from .._approval import NotAsked, not_asked
from .._arguments import decode_arguments
from .._call import CallResult, new_call_id
from .._errors import ToolError, ToolNotFound, exception_text, model_message
from .._log import log_event
from .._redact import redact
from .._registry import ToolRegistry
from .._tool import NAME_PATTERN, Tool
from ..export import GEMINI_NAME, StrictSchemaError, inline_refs

__all__ = [
    "RUN_ID",
    "Context",
    "Name",
    "Names",
    "NotAsked",
    "ToolLike",
    "approval_needed",
    "approval_possible",
    "call_context",
    "check_context",
    "check_inlinable",
    "check_name",
    "grant_approval",
    "is_json",
    "model_message",
    "no_longer_available",
    "not_an_object",
    "not_asked",
    "refusal",
    "resolve",
    "select",
    "shown_name",
    "shown_names",
]

T = TypeVar("T")

#: A tool as the adapters accept it: its name, the :class:`Tool`, or the ``@defineTool`` function.
ToolLike: TypeAlias = str | Tool | Callable[..., Any]
#: ``context=`` of an adapter: one mapping for every call, or a function of the framework's run context.
Context: TypeAlias = Mapping[str, Any] | Callable[[T], Mapping[str, Any] | None] | None
#: ``name=`` of ``to_<framework>``: the name the framework is shown for the tool, or a function of the tool's name.
Name: TypeAlias = str | Callable[[str], str] | None
#: ``names=`` of ``as_<framework>_tools``: tool name -> name shown (others keep theirs), or a function of the tool's name.
Names: TypeAlias = Mapping[str, str] | Callable[[str], str] | None
#: The ``Call.context`` field an adapter fills with the framework's run id when no ``context=`` is given.
RUN_ID = "run_id"


def _registry(registry: ToolRegistry | None) -> ToolRegistry:
    if registry is not None and not isinstance(registry, ToolRegistry):
        raise TypeError(f"registry= must be a ToolRegistry or None, got {type(registry).__name__}.")
    return registry if registry is not None else ToolRegistry.default()


def _lookup(reg: ToolRegistry, tool: ToolLike) -> Tool:
    if isinstance(tool, str):
        return reg.get(tool)
    found = tool if isinstance(tool, Tool) else getattr(tool, "tool", None)
    if not isinstance(found, Tool):
        raise TypeError(f"Expected a tool name, a Tool or a @defineTool function, got {type(tool).__name__}: {tool!r}.")
    if found.name not in reg or reg.get(found.name) is not found:
        reg.add(found)  # calls go through a registry; a different tool of the same name raises ToolDefinitionError
    return found


def resolve(tool: ToolLike, registry: ToolRegistry | None = None) -> tuple[ToolRegistry, Tool]:
    """The registry (default: the default registry) and the tool, added to it when not registered yet."""
    reg = _registry(registry)
    return reg, _lookup(reg, tool)


def select(tools: Iterable[ToolLike] | None, registry: ToolRegistry | None, *, adapter: str) -> tuple[ToolRegistry, list[Tool]]:
    """The registry and the tools to adapt.

    ``tools=None`` means the registry's tools defined in code (``Tool.source is None``), never
    the tools installed from entry points: those must be named. What was picked, and what was
    left out, is logged at INFO on ``harness_one.integrations``. Nothing to pick is an error.
    """
    if isinstance(tools, ToolRegistry):
        raise TypeError(f"{adapter}(): the first argument is the tools; pass the registry as registry=.")
    if isinstance(tools, (str, Tool)) or (tools is not None and not isinstance(tools, Iterable)):
        raise TypeError(f"{adapter}(): tools= must be a list of names, Tools or @defineTool functions, got {tools!r}.")
    reg = _registry(registry)
    if tools is not None:
        return reg, [_lookup(reg, t) for t in tools]
    everything = reg.tools()
    picked = [t for t in everything if t.source is None]
    left_out = sorted(t.name for t in everything if t.source is not None)
    if not picked:
        raise ValueError(
            f"{adapter}(): the registry has no tools defined in code, and installed tools are never included by default; "
            f"name the ones the agent may use, e.g. {adapter}({left_out[:2] or ['calculate']!r})."
        )
    log_event(
        logging.INFO,
        "integration tools selected",
        logger="harness_one.integrations",
        adapter=adapter,
        tools=[t.name for t in picked],
        installed_left_out=left_out,
    )
    return reg, picked


def check_context(context: Context[Any]) -> None:
    """Refuse a ``context=`` that is neither a mapping, a function, nor None; or an ``async def`` one (its coroutine
    would be no mapping on every call: it is called in the adapter's sync path as well)."""
    if context is not None and not isinstance(context, Mapping) and not callable(context):
        raise TypeError(f"context= must be a mapping, a function of the run context, or None; got {type(context).__name__}.")
    if callable(context) and (
        inspect.iscoroutinefunction(context) or inspect.iscoroutinefunction(getattr(context, "__call__", None))  # noqa: B004
    ):
        raise TypeError(
            "context= must be a plain function of the run context (it is called for sync and async calls alike); "
            "got an async function: compute the context before the run, or in a sync function."
        )


def check_inlinable(tool: Tool, adapter: str, shown: str) -> None:
    """Log a WARNING on ``harness_one.integrations`` when a framework that inlines every ``$ref`` cannot show the
    model ``tool``'s schema whole: recursive, or past the export's inlining budget. ``shown`` says what the
    framework shows then; the harness still validates calls against the whole schema."""
    try:
        inline_refs(tool.parameters, tool=tool.name)
    except StrictSchemaError as exc:
        log_event(
            logging.WARNING,
            "integration schema weakened",
            logger="harness_one.integrations",
            adapter=adapter,
            tool=tool.name,
            reasons=exc.reasons,
            detail=f"{shown}; the harness still validates calls against the whole schema",
        )


def check_name(name: object, *, keyword: str = "name") -> None:
    """Refuse a ``name=`` (a string or a function) or ``names=`` (a mapping or a function) of another type."""
    if name is None or callable(name):
        return
    if keyword == "name" and isinstance(name, str):
        return
    if keyword == "names" and isinstance(name, Mapping):
        return
    expected = "a string" if keyword == "name" else "a mapping of tool names to the names shown"
    raise TypeError(f"{keyword}= must be {expected}, a function of the tool's name, or None; got {type(name).__name__}.")


def shown_name(tool: Tool, name: Name | Names) -> str:
    """The name the framework is shown for ``tool``: ``name=`` itself, its entry for the tool, what its function
    gives for the tool's name; the tool's own name without one. Anything but a non-empty string is a ValueError,
    and so is a name no provider accepts: neither a tool name (1-64 letters, digits, ``_`` or ``-``: OpenAI's
    and Anthropic's rule, the one every tool name meets) nor a Gemini name (what
    :func:`~harness_one.export.gemini_name` gives, :data:`~harness_one.export.GEMINI_NAME`); such a name would
    fail every model request of the agent, not the adapter."""
    if name is None:
        return tool.name
    if isinstance(name, str):
        shown: object = name
    elif isinstance(name, Mapping):
        shown = name.get(tool.name, tool.name)
    else:
        shown = name(tool.name)
    if not isinstance(shown, str) or not shown:
        raise ValueError(f"The name shown for tool '{tool.name}' must be a non-empty string, got {shown!r}.")
    if not NAME_PATTERN.match(shown) and not GEMINI_NAME.match(shown):
        raise ValueError(
            f"The name shown for tool '{tool.name}', {shown!r}, is one no model provider accepts: use 1-64 letters, "
            "digits, '_' or '-' (OpenAI, Anthropic; Gemini also needs a letter or '_' first, and takes '.' and ':')."
        )
    return shown


def shown_names(tools: Sequence[Tool], names: Names, *, adapter: str) -> list[str]:
    """The name shown for each of ``tools`` (:func:`shown_name`); two tools shown under one name are a ValueError.

    One tool listed twice is shown twice under its name, as without ``names=``.
    """
    shown = [shown_name(t, names) for t in tools]
    if names is not None and len(set(shown)) < len({t.name for t in tools}):  # one tool may be listed twice
        owners: dict[str, set[str]] = {}
        for tool, label in zip(tools, shown, strict=True):
            owners.setdefault(label, set()).add(tool.name)
        label, found = next((label, found) for label, found in owners.items() if len(found) > 1)
        raise ValueError(f"{adapter}(): names= shows tools {', '.join(map(repr, sorted(found)))} under one name, {label!r}.")
    return shown


def call_context(
    context: Context[T],
    run_context: Callable[[], T],
    *,
    tool: str,
    call_id: str | None = None,
    run_id: Callable[[T], object] | None = None,
) -> Mapping[str, Any] | None:
    """The ``Call.context`` for one call; ``run_context`` builds the framework object only when a function needs it.

    Without ``context=``, ``run_id`` reads the framework's own id of the run from its run
    context: a string, an integer or a UUID becomes ``{"run_id": ...}`` (what per-run budgets
    count by), anything else (None) no context. A ``context=`` given replaces it.

    The context is the call's own: a plain ``dict`` copy of the mapping (``context=`` itself,
    or what its function returned), made for each call, so what a hook or tool writes into it
    never reaches the next call (another user's) or the application's mapping; a ``dict``, so
    a tool can encode it (``json.dumps``) or send it to a worker process (pickle) as the
    application's own mapping. The copy is shallow: a mutable value inside is still the
    application's.

    A ``context=`` function that raises, or returns neither a mapping nor None, or a mapping
    (``context=`` or the function's) that raises when copied, is the application's fault:
    logged at ERROR on ``harness_one.integrations`` and raised as a :class:`ToolError` for the
    adapter to answer the model with. Its message names only the exception's type, never its
    text (which may hold what the context was meant to carry).
    """
    if context is None:
        return None if run_id is None else _run_scope(run_id(run_context()))
    if isinstance(context, Mapping):
        value, source = context, "mapping"
    else:
        try:
            returned = context(run_context())
        except Exception as exc:
            _context_failed(tool, call_id, f"function raised {type(exc).__name__}", exc)
        if returned is None:
            return None
        if not isinstance(returned, Mapping):
            _context_failed(tool, call_id, f"function returned {type(returned).__name__}, not a mapping", None)
        value, source = returned, "function's mapping"
    try:  # a lazy mapping (a vault, a settings object) may fail to read its values, with a secret in the text
        return dict(value)
    except Exception as exc:
        _context_failed(tool, call_id, f"{source} raised {type(exc).__name__} when copied", exc)


def _run_scope(run: object) -> Mapping[str, Any] | None:
    """``{"run_id": run}`` for a framework's run id that names a run (a non-empty string, an integer, a UUID)."""
    if isinstance(run, (str, int, UUID)) and not isinstance(run, bool) and run != "":
        return {RUN_ID: run}
    return None


def _context_failed(tool: str, call_id: str | None, problem: str, exc: Exception | None) -> NoReturn:
    fields = {"error": redact(exception_text(exc))} if exc is not None else {}  # it may hold the context's secrets
    log_event(
        logging.ERROR,
        "integration context function failed",
        logger="harness_one.integrations",
        tool=tool,
        call_id=call_id,
        problem=problem,
        **fields,
    )
    raise ToolError(
        f"Tool '{tool}' was not called: the application's context= {problem}. "
        "This is not a problem with the arguments; calling again will fail the same way.",
        tool=tool,
        call_id=call_id,
    ) from exc


def is_json(text: str) -> bool:
    """Whether ``json.loads`` reads ``text``: False for malformed text, and also for text nested
    past Python's recursion limit or holding an integer past its digit limit (which raise
    ``RecursionError`` and ``ValueError`` rather than ``JSONDecodeError``)."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def not_an_object(value: Any) -> Any:
    """Arguments a framework decoded from JSON that is not an object (``[1, 2]``, ``"hi"``, ``null``),
    in the form the registry refuses as "arguments must be a JSON object, got ...".

    A string or None becomes its JSON text (the registry reads a string as JSON text, and None
    as no arguments); anything else is handed over as it is, never encoded again (which could
    fail on a value nested close to the recursion limit).
    """
    return json.dumps(value) if value is None or isinstance(value, str) else value


def refusal(error: ToolError) -> CallResult:
    """The :class:`CallResult` of a call refused before it reached the registry (``call_context`` failed)."""
    return CallResult(False, None, error, error.tool or "", error.call_id or new_call_id(), 0.0, 0)


def no_longer_available(result: CallResult, registry: ToolRegistry, name: str) -> CallResult:
    """``result``, where the registry no longer holds the adapted tool ``name``, as a refusal naming no other tool.

    The registry's own "Unknown tool" lists its tools (or suggests close names): tools this
    agent was never given, which the model must not learn of. The refusal is still a
    :class:`ToolNotFound` (``kind`` ``not_found``). Any other result is returned as it is.
    """
    error = result.error
    if not isinstance(error, ToolNotFound) or error.tool != name or name in registry:
        return result
    refused = ToolNotFound(name)
    refused.message = f"Tool '{name}' is no longer available; continue without it."
    refused.args = (refused.message,)
    refused.call_id = error.call_id if error.call_id is not None else result.call_id
    return result._replace(error=refused)


def _approval(reg: ToolRegistry) -> Any:
    plugin = reg.plugins.get("approval")
    return plugin if plugin is not None and hasattr(plugin, "needs_approval") else None


def approval_possible(reg: ToolRegistry, tool: Tool) -> bool:
    """Whether the registry's ``approval`` plugin has a rule (true or a predicate) for ``tool`` at all."""
    plugin = _approval(reg)
    return plugin is not None and plugin.rule_for(tool) is not False


def approval_needed(
    reg: ToolRegistry,
    tool: Tool,
    arguments: Mapping[str, Any],
    *,
    context: Mapping[str, Any] | None = None,
    call_id: str | None = None,
) -> bool:
    """Whether the registry's ``approval`` plugin would hold this call for a decision (False without the plugin)."""
    plugin = _approval(reg)
    return plugin is not None and bool(plugin.needs_approval(reg, tool, arguments, context=context, call_id=call_id))


def grant_approval(reg: ToolRegistry, call_id: str, tool: Tool, arguments: Any, *, context: Mapping[str, Any] | None) -> None:
    """Tell the ``approval`` plugin that the framework's own approval step approved this call.

    ``arguments`` as the call will be made: a mapping or JSON text; ``context`` the
    ``Call.context`` it will be made with (:func:`call_context`). The grant holds for that call
    only: another call under the id, with another context (another user) or through another
    registry, is not approved by it. Arguments that cannot be read are granted nothing (the
    call is refused for them anyway). Nor is a call id a person decided in the harness
    (``approval_conflict`` from the plugin): the call made under it meets that decision, which
    refuses it (denied, another call's, or run already) unless the person approved this very call.
    """
    plugin = _approval(reg)
    if plugin is None:
        return
    try:
        decoded = decode_arguments(arguments, reg.limits)
    except ToolError:
        return
    try:
        plugin.grant(reg, tool, decoded, call_id=call_id, context=context)
    except ToolError as err:
        if err.kind != "approval_conflict":
            raise
