"""LangChain and LangGraph: harness tools as LangChain tools (accepted by ``create_agent``,
``ToolNode`` and ``bind_tools``), and LangChain tools as harness tools.

The provider's tool-call id becomes the harness call id. ``context=`` is a mapping or a
function of the call's ``ToolRuntime`` (``runtime.context``, ``runtime.config``,
``runtime.state``, ``runtime.tool_call_id``); outside a graph the function gets a runtime
holding only the config and the call id. Without ``context=``, a call in a graph has the
context ``{"run_id": ...}``: the graph run's ``run_id`` (``invoke(..., config={"run_id": ...})``),
else its ``thread_id`` (``config={"configurable": {"thread_id": ...}}``), so per-run budgets
count its calls; a run with neither has none. A harness error becomes a ``ToolException`` carrying
the harness's message, which LangChain turns into an error ``ToolMessage`` (``status="error"``).
A sync call (``invoke``) of an async harness tool where an event loop runs in this thread (a
Jupyter cell, an async handler) runs on a worker thread in a copy of the caller's context, as
``harness_one.dispatch`` does: it is answered, though it blocks that loop meanwhile (``ainvoke``
there instead). ``name=`` (``names=``) sets the name LangChain shows the model; the registry is
still called by the tool's own name. The tool's ``args_schema`` is the harness schema, which
LangChain inlines (each ``$ref`` replaced by its definition) when it shows the tool to a model: a
recursive reference (a tree of models) becomes ``{}`` there, any value, so ``to_langchain`` logs a
WARNING naming the tool; the harness still validates the call against its own schema.

Tools that need approval under the registry's ``approval`` plugin are reviewed by LangChain's
human-in-the-loop step: :func:`approval_middleware` is a ``HumanInTheLoopMiddleware`` for
``create_agent`` whose ``interrupt_on`` asks about exactly the calls the harness rule holds
(its ``when`` is the rule, predicates included). The run stops with an interrupt; when the
person approves (or edits) a call, the middleware grants that call id, with the arguments the
person saw (or wrote), to the plugin and the call runs through every policy. Only calls
LangChain put to a person are granted: a call the harness holds when it runs but that was not
reviewed (the rule read other state, or another ``context=``, when LangChain asked) is refused
by the harness. The grant holds for that call as it is made (its context too: another user's
call under the same id is not approved by it): the tool's run makes it, with the context it
makes the call with, so the grant and the call use one result of ``context=``, which may be a new
object each time (the approval rule calls ``context=`` too). A rejected call never runs; the model reads
LangChain's refusal.
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Annotated, Any, NamedTuple, get_args
from urllib.parse import unquote

from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig
from langchain.agents.middleware.human_in_the_loop import (
    _EDITED_TOOL_CALLS_KEY,
    Action,
    DecisionType,
    InterruptMode,
    _HumanInTheLoopState,
)
from langchain.agents.middleware.types import PrivateStateAttr, ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools import Tool as LangChainTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.utils.json_schema import dereference_refs
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import ConfigDict

from .._call import CallResult
from .._errors import ToolDefinitionError, ToolError
from .._registry import ToolRegistry
from .._schema import _to_pydantic, schema_for_type
from .._tool import Tool
from ..dispatch import _loop_running
from ..export import StrictSchemaError, inline_refs
from ._common import (
    Context,
    Name,
    Names,
    ToolLike,
    approval_needed,
    call_context,
    check_context,
    check_inlinable,
    check_name,
    grant_approval,
    model_message,
    no_longer_available,
    not_asked,
    resolve,
    select,
    shown_name,
    shown_names,
)

__all__ = [
    "HarnessApprovalMiddleware",
    "HarnessTool",
    "approval_middleware",
    "as_langchain_tools",
    "from_langchain",
    "to_langchain",
]

LangChainContext = Context[ToolRuntime[Any, Any]]


class HarnessTool(StructuredTool):
    """A harness tool seen by LangChain. Arguments are validated once, by the harness."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    registry: Any
    #: The harness :class:`Tool` and the ``context=`` of the adapter, for the approval rule.
    harness_tool: Any = None
    harness_context: Any = None
    handle_tool_error: bool = True

    def context_for(self, runtime: ToolRuntime[Any, Any], call_id: str | None) -> Mapping[str, Any] | None:
        """The ``Call.context`` this tool's call is made with (a :class:`ToolError` if ``context=`` fails)."""
        return call_context(self.harness_context, lambda: runtime, tool=self.harness_tool.name, call_id=call_id, run_id=_run_id)

    def needs_approval(self, arguments: Mapping[str, Any], runtime: ToolRuntime[Any, Any], call_id: str | None) -> bool:
        """Whether the registry's ``approval`` plugin would hold this call for a decision."""
        context = self.context_for(runtime, call_id)
        return approval_needed(self.registry, self.harness_tool, arguments, context=context, call_id=call_id)

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Hand the function the model's arguments as one value, so no argument name can clash
        # with what LangChain injects (config, run_manager, the runtime), plus the tool-call id.
        _, arguments = super()._to_args_and_kwargs(tool_input, tool_call_id)
        runtime = arguments.get("_harness_runtime")
        if isinstance(runtime, ToolRuntime):  # what ToolNode injects
            del arguments["_harness_runtime"]
        else:  # none, or a model's key of that name: an argument like any other (refused as unexpected)
            runtime = None
        return (), {"_harness_runtime": runtime, "_harness_call": (arguments, tool_call_id)}


def _run_id(runtime: ToolRuntime[Any, Any]) -> str | None:
    """The graph run's id: its ``run_id`` (``config={"run_id": ...}``), else its ``thread_id``; None outside a graph."""
    info = runtime.execution_info
    if info is None:
        return None
    return info.run_id if info.run_id is not None else info.thread_id


def _no_writer(chunk: Any) -> None:
    """The stream writer of a runtime built outside a graph: drops what it is given."""


def _answer(result: CallResult, registry: ToolRegistry, name: str, shown: str) -> str:
    """The harness's text for the model; an error as a ``ToolException`` (an error ``ToolMessage``), naming the
    tool as LangChain shows it (``shown``).

    A call the harness holds for approval reached the tool without LangChain asking a person
    about it (no :func:`approval_middleware`, or one that did not review it): it is refused.
    A call of the tool removed from the registry since is refused naming no other tool.
    """
    if not result.ok:
        result = not_asked(no_longer_available(result, registry, name), "not_reviewed")
        assert result.error is not None
        raise ToolException(model_message(result.error, shown))
    return result.for_model()


def _functions(
    registry: ToolRegistry, tool: Tool, context: LangChainContext, shown: str
) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]]]:
    name = tool.name

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

        try:
            ctx = call_context(context, run_context, tool=name, call_id=call_id, run_id=_run_id)
        except ToolError as err:
            raise ToolException(model_message(err, shown)) from None
        _grant_approved(registry, tool, call_id, ctx)
        return arguments, ctx, call_id

    # The annotations are what LangChain and LangGraph read: a ToolRuntime parameter gets the
    # runtime injected (by ToolNode), a RunnableConfig parameter the config.
    def run(
        *,
        _harness_runtime: ToolRuntime[Any, Any],
        _harness_config: RunnableConfig,
        _harness_call: tuple[dict[str, Any], str | None],
    ) -> Any:
        arguments, ctx, call_id = request(_harness_runtime, _harness_config, _harness_call)
        if _loop_running() and _is_async(registry, name):
            # an async tool cannot start its own loop here (invoke() in a Jupyter cell, an async handler): a worker
            # thread runs the call, in a copy of the caller's context (its span stays the parent), as dispatch() does
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-one-langchain") as pool:
                done = pool.submit(
                    contextvars.copy_context().run, registry.try_call, name, arguments, context=ctx, call_id=call_id
                )
                return _answer(done.result(), registry, name, shown)
        return _answer(registry.try_call(name, arguments, context=ctx, call_id=call_id), registry, name, shown)

    async def arun(
        *,
        _harness_runtime: ToolRuntime[Any, Any],
        _harness_config: RunnableConfig,
        _harness_call: tuple[dict[str, Any], str | None],
    ) -> Any:
        arguments, ctx, call_id = request(_harness_runtime, _harness_config, _harness_call)
        return _answer(await registry.atry_call(name, arguments, context=ctx, call_id=call_id), registry, name, shown)

    return run, arun


def _is_async(registry: ToolRegistry, name: str) -> bool:
    """Whether the registry's tool ``name`` is async (False once it was removed: the registry answers that)."""
    return name in registry and registry.get(name).is_async


def to_langchain(
    tool: ToolLike, registry: ToolRegistry | None = None, *, context: LangChainContext = None, name: Name = None
) -> HarnessTool:
    """The harness tool (a name, a ``Tool`` or a ``@defineTool`` function) as a LangChain tool.

    ``name``: the name LangChain shows the model (a string, or a function of the tool's name); the tool's own by default.
    """
    check_context(context)
    check_name(name)
    reg, found = resolve(tool, registry)
    shown = shown_name(found, name)
    check_inlinable(
        found,
        "to_langchain",
        "LangChain inlines each $ref when it shows the tool to a model: a recursive one becomes {} (any value) there",
    )
    run, arun = _functions(reg, found, context, shown)
    return HarnessTool(
        name=shown,
        description=found.description or found.name,
        args_schema=_args_schema(found),
        func=run,
        coroutine=arun,
        registry=reg,
        harness_tool=found,
        harness_context=context,
    )


def _args_schema(tool: Tool) -> dict[str, Any]:
    """The schema LangChain is given, a copy (a change to it never reaches the harness tool): the tool's, inlined
    (:func:`~harness_one.export.inline_refs`) when LangChain's own reader of ``$ref`` cannot follow one, which would
    fail ``bind_tools`` with a ``KeyError``: it looks each part of the pointer up as written, so a JSON-Pointer-escaped
    or percent-encoded one (``#/$defs/a~1b`` for ``a/b``, ``#/$defs/with%20space``) names nothing, or another
    definition; nor does it read an anchor (``#node``). A recursive schema cannot be inlined (``check_inlinable``
    warned of it): its root definitions an escaped ``$ref`` names are also put under the name as written."""
    schema = copy.deepcopy(dict(tool.parameters))
    try:
        escaped = set(_escaped_refs(schema))
        if not escaped:
            dereference_refs(schema)  # what bind_tools does with it
            return schema
    except Exception:  # (KeyError for a target it cannot find, ValueError for a $ref that is no pointer, ...)
        escaped = set()
    try:
        return inline_refs(tool.parameters, tool=tool.name)
    except StrictSchemaError:
        pass
    for ref in escaped:  # (#/$defs/a~1b: LangChain finds $defs["a~1b"], the definition "a/b" itself)
        group, _, written = ref.removeprefix("#/").partition("/")
        name = unquote(written).replace("~1", "/").replace("~0", "~")
        defs = schema.get(group) if ref.startswith("#/") and group in ("$defs", "definitions") else None
        if isinstance(defs, dict) and "/" not in written and name in defs and written not in defs:
            defs[written] = defs[name]
    return schema


def _escaped_refs(node: Any) -> Iterator[str]:
    """The ``$ref``s in ``node`` escaped (holding ``~`` or ``%``), which LangChain follows as written."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ("~" in ref or "%" in ref):
            yield ref
        for value in node.values():
            yield from _escaped_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _escaped_refs(value)


def as_langchain_tools(
    tools: Iterable[ToolLike] | None = None,
    registry: ToolRegistry | None = None,
    *,
    context: LangChainContext = None,
    names: Names = None,
) -> list[HarnessTool]:
    """The given tools as LangChain tools; by default the registry's tools defined in code (installed ones must be named).

    ``names``: the names LangChain shows (tool name -> name, or a function of the tool's name).
    """
    check_context(context)
    check_name(names, keyword="names")
    reg, picked = select(tools, registry, adapter="as_langchain_tools")
    shown = shown_names(picked, names, adapter="as_langchain_tools")
    return [to_langchain(t, reg, context=context, name=n) for t, n in zip(picked, shown, strict=True)]


#: State key of the harness calls a person approved (or edited) in LangChain's batched review of this model turn.
_APPROVED_KEY = "harness_approved_calls"

#: Call ids the harness rule held while LangChain decided whom to ask, in the review running now.
_asked: ContextVar[set[str] | None] = ContextVar("harness_langchain_asked", default=None)


class _Approved(NamedTuple):
    """A harness call a person approved (or edited), as the middleware hands it to the tool's run to grant."""

    tool: Tool
    arguments: Any


#: The call the middleware is running now, by call id, if a person approved it: the tool's run takes it (once) and
#: grants it with the ``Call.context`` it makes the call with, so the grant and the call use one result of ``context=``
#: and the grant holds for that very context (a function returning a new object each time included). A context variable:
#: another thread's (another user's) call under the same id never sees it.
_approving: ContextVar[dict[str, _Approved] | None] = ContextVar("harness_langchain_approving", default=None)


def _grant_approved(registry: ToolRegistry, tool: Tool, call_id: str | None, context: Mapping[str, Any] | None) -> None:
    """Grant the call about to run with ``context`` when it is the one the middleware runs as a person approved it."""
    approving = _approving.get()
    if not approving or not call_id:
        return
    approved = approving.pop(call_id, None)
    if approved is not None and approved.tool is tool:
        grant_approval(registry, call_id, tool, approved.arguments, context=context)


class _ApprovalState(_HumanInTheLoopState[Any], total=False):
    """LangChain's human-in-the-loop state, plus the calls approved in the batched review."""

    harness_approved_calls: Annotated[dict[str, Action], PrivateStateAttr]


class HarnessApprovalMiddleware(HumanInTheLoopMiddleware[Any, Any, Any]):
    """``HumanInTheLoopMiddleware`` over the harness approval rules; build it with :func:`approval_middleware`.

    A harness call is granted only when LangChain put it to a person (its ``when``, the harness
    rule, said yes) and the person approved or edited it: with the arguments they saw (or
    wrote). A call the harness holds when it runs that no person reviewed is not granted, so
    the harness refuses it.
    """

    state_schema = _ApprovalState

    def __init__(
        self,
        tools: Iterable[BaseTool],
        *,
        allowed_decisions: Sequence[DecisionType] = ("approve", "edit", "reject", "respond"),
        interrupt_on: Mapping[str, bool | InterruptOnConfig] | None = None,
        description_prefix: str = "Tool execution requires approval",
        interrupt_mode: InterruptMode = "batched",
    ) -> None:
        self.harness_tools = {t.name: t for t in tools if isinstance(t, HarnessTool)}
        gated: dict[str, Any] = dict(interrupt_on or {})
        for name in self.harness_tools:
            gated[name] = {"allowed_decisions": list(allowed_decisions), "when": self._needed}
        super().__init__(gated, description_prefix=description_prefix, interrupt_mode=interrupt_mode)

    def _tool(self, request: ToolCallRequest) -> HarnessTool | None:
        """The tool of the call when it adapts the harness tool this middleware knows by that name.

        Matched by the harness tool, not the LangChain object: tools built by another
        ``as_langchain_tools`` call for the same harness tools are reviewed (and granted) alike.
        Without the agent's tool (LangChain's batched review asks before looking it up), the known
        one, with its own ``context=``: a rule that reads ``Call.context`` needs the agent's tools here.
        """
        known = self.harness_tools.get(request.tool_call["name"])
        tool = request.tool
        if tool is None or known is None:
            return known
        return tool if isinstance(tool, HarnessTool) and tool.harness_tool is known.harness_tool else None

    def _needed(self, request: ToolCallRequest) -> bool:
        """LangChain's ``when``: the harness rule; a call it holds is noted as put to the person."""
        call = request.tool_call
        tool = self._tool(request)
        if tool is None:
            return False  # not a harness tool this middleware knows: LangChain does not review it
        try:
            needed = tool.needs_approval(call["args"], request.runtime, call["id"])
        except Exception:  # a rule failing on bad arguments, a failing context=: the harness answers the call instead
            return False
        asked = _asked.get()
        if needed and asked is not None and call["id"]:
            asked.add(call["id"])
        return needed

    def after_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """LangChain's batched review; the harness calls the person approved or edited are kept in the state."""
        if self.interrupt_mode == "per_call":
            return super().after_model(state, runtime)
        asked: set[str] = set()
        token = _asked.set(asked)
        try:
            update = super().after_model(state, runtime)
        finally:
            _asked.reset(token)
        approved = _reviewed(update, asked) if asked and update is not None else {}
        if not approved and not state.get(_APPROVED_KEY):
            return update
        return {**(update or {}), _APPROVED_KEY: approved}  # always replaced: an earlier turn's approvals lapse

    def _approved(self, request: ToolCallRequest, asked: set[str]) -> Action | None:
        """The call as the person approved it, if they reviewed this one; None if nobody did."""
        call = request.tool_call
        if self.interrupt_mode == "per_call":
            return Action(name=call["name"], args=call["args"]) if call["id"] in asked else None
        recorded = request.state.get(_APPROVED_KEY) if isinstance(request.state, Mapping) else None
        return recorded.get(call["id"]) if isinstance(recorded, Mapping) else None

    def _grant(self, request: ToolCallRequest, asked: set[str]) -> dict[str, _Approved]:
        """The call about to run, by its id, when a person approved it, with the arguments they approved (else empty).

        The tool's run grants it to the harness with the context the call is made with (:data:`_approving`):
        the grant holds for that call only, and ``context=`` is not called a second time for it.
        """
        call_id = request.tool_call["id"]
        tool = self._tool(request)
        if not call_id or tool is None:
            return {}
        action = self._approved(request, asked)
        if action is None or action["name"] != tool.name:
            return {}
        return {call_id: _Approved(tool.harness_tool, action["args"])}

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        """Review the call as ``HumanInTheLoopMiddleware`` does; an approved harness call is granted before it runs."""
        asked: set[str] = set()

        def run(approved: ToolCallRequest) -> ToolMessage | Command[Any]:
            granted = _approving.set(self._grant(approved, asked))
            try:
                return handler(approved)
            finally:
                _approving.reset(granted)

        token = _asked.set(asked)
        try:
            return super().wrap_tool_call(request, run)
        finally:
            _asked.reset(token)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """The awaitable :meth:`wrap_tool_call`."""
        asked: set[str] = set()

        async def run(approved: ToolCallRequest) -> ToolMessage | Command[Any]:
            granted = _approving.set(self._grant(approved, asked))
            try:
                return await handler(approved)
            finally:
                _approving.reset(granted)

        token = _asked.set(asked)
        try:
            return await super().awrap_tool_call(request, run)
        finally:
            _asked.reset(token)


def _reviewed(update: Mapping[str, Any], asked: set[str]) -> dict[str, Action]:
    """The calls of the batched review's ``update`` that were put to the person and approved or edited.

    A rejected call, or one the person answered for (``respond``), has a ``ToolMessage`` in the
    update; an edited one runs as the person wrote it.
    """
    messages = update.get("messages") or []
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    edited = update.get(_EDITED_TOOL_CALLS_KEY) or {}
    calls = next((m.tool_calls for m in messages if isinstance(m, AIMessage)), [])
    return {
        c["id"]: edited.get(c["id"]) or Action(name=c["name"], args=c["args"])
        for c in calls
        if c["id"] in asked and c["id"] not in answered
    }


def approval_middleware(
    tools: Iterable[BaseTool],
    *,
    allowed_decisions: Sequence[DecisionType] = ("approve", "edit", "reject", "respond"),
    interrupt_on: Mapping[str, bool | InterruptOnConfig] | None = None,
    description_prefix: str = "Tool execution requires approval",
    interrupt_mode: InterruptMode = "batched",
) -> HarnessApprovalMiddleware:
    """LangChain's human-in-the-loop middleware for ``create_agent``, asking about the harness calls that need approval.

    ``tools`` are the agent's tools: each :class:`HarnessTool` among them is reviewed when its
    harness rule holds the call (``requires_approval`` true, or its predicate true for the
    call), with ``allowed_decisions``; ``interrupt_on`` adds entries for other tools, as in
    ``HumanInTheLoopMiddleware``. The agent needs a checkpointer; resume with
    ``Command(resume=...)``.
    """
    return HarnessApprovalMiddleware(
        tools,
        allowed_decisions=allowed_decisions,
        interrupt_on=interrupt_on,
        description_prefix=description_prefix,
        interrupt_mode=interrupt_mode,
    )


def _fields(schema: Any) -> set[str]:
    """The field names of a LangChain tool's argument schema (a pydantic model, or a JSON Schema dict)."""
    fields = getattr(schema, "model_fields", None)
    if isinstance(fields, Mapping):
        return set(fields)
    return set((schema or {}).get("properties", {})) if isinstance(schema, Mapping) else set()


def _input_model(tool: BaseTool) -> tuple[dict[str, Any], Callable[[Any, str], Any] | None]:
    """The harness parameters of a LangChain tool, and the check of its arguments against its pydantic input model.

    A tool whose input is a pydantic model (``@tool`` functions, ``args_schema=Model``) gets the schema the
    harness infers for that model, as a native tool's pydantic parameter does: by alias, with
    ``additionalProperties: false`` on each model object whose ``extra`` is unset or ``"ignore"`` (a misspelt
    argument is refused, not dropped by LangChain), and without pydantic's titles, as LangChain shows it. The
    check validates the arguments with that model, as LangChain will, so a validator's refusal is a
    :class:`ToolArgumentError` with one problem per pydantic error at its path, never a failure of the tool.
    Any other tool (a JSON Schema dict, a one-string ``Tool``), or a model that accepts a field's name beside
    its alias (:func:`_by_name`), keeps LangChain's own schema and no check.
    """
    from pydantic import BaseModel

    model = tool.get_input_schema()
    if (
        isinstance(model, type)
        and issubclass(model, BaseModel)
        and isinstance(tool.args_schema, type)
        and not _by_name(model, set())
    ):
        try:
            parameters = schema_for_type(model)
        except TypeError:
            pass  # pydantic cannot write it as JSON Schema: LangChain's own, below
        else:
            parameters.pop("description", None)  # the model's, not the tool's: the description is the tool's own
            _untitled(parameters)
            return parameters, _to_pydantic(model)
    schema = convert_to_openai_tool(tool)["function"]
    parameters = dict(schema.get("parameters") or {"type": "object", "properties": {}})
    parameters.setdefault("type", "object")
    return parameters, None


def _by_name(model: Any, seen: set[int]) -> bool:
    """Whether pydantic model ``model``, or one its fields hold, accepts a field's name beside its alias
    (``populate_by_name``, ``validate_by_name``) or more than one name for a field (a ``validation_alias``
    that is an ``AliasChoices`` or ``AliasPath``): a schema by one alias would refuse a name LangChain accepts."""
    from pydantic import BaseModel

    if isinstance(model, type) and issubclass(model, BaseModel):
        if id(model) in seen:
            return False
        seen.add(id(model))
        config = model.model_config
        if config.get("populate_by_name") or config.get("validate_by_name"):
            return True
        fields = model.model_fields.values()
        if any(not isinstance(field.validation_alias, (str, type(None))) for field in fields):
            return True
        return any(_by_name(field.annotation, seen) for field in fields)
    return any(_by_name(arg, seen) for arg in get_args(model))


#: The keywords whose value is one schema, and those whose value is a list or a name map of schemas.
_SUBSCHEMA = frozenset({"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"})
_SUBSCHEMAS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems", "properties", "patternProperties", "$defs"})


def _untitled(schema: Any) -> None:
    """Drop ``title`` from ``schema`` and each schema in it (pydantic titles every model and field; LangChain
    and a native tool's schema do not): a property named ``title``, and a default or example, stay whole."""
    if not isinstance(schema, dict):
        return
    schema.pop("title", None)
    for key, value in schema.items():
        if key in _SUBSCHEMA:
            _untitled(value)
        elif key in _SUBSCHEMAS:
            for each in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
                _untitled(each)


def _async_only(tool: BaseTool) -> bool:
    """Whether a LangChain tool runs as a coroutine: a ``StructuredTool`` or ``Tool`` with a coroutine and no
    function, or a tool class that implements ``_arun`` itself (its ``_run`` may only raise ``NotImplementedError``)."""
    if isinstance(tool, (StructuredTool, LangChainTool)):
        return tool.func is None and tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


def _run_options() -> dict[str, Any]:
    """What ``BaseTool.invoke`` passes ``run`` (``arun``) for arguments that are not a tool call: the config of the
    run the call is made in (its callbacks, tags, metadata, run name and id). ``invoke`` itself takes arguments
    holding ``"type": "tool_call"`` for LangChain's call envelope and runs the tool with their ``"args"``: with
    arguments the harness never checked nor put to approval."""
    config = ensure_config()
    return {
        "callbacks": config.get("callbacks"),
        "tags": config.get("tags"),
        "metadata": config.get("metadata"),
        "run_name": config.get("run_name"),
        "run_id": config.pop("run_id", None),
        "config": config,
    }


def from_langchain(tool: BaseTool, *, registry: ToolRegistry | None = None, **definition: Any) -> Tool:
    """A LangChain tool as a harness tool, so it gains harness policies (``rate_limit=``, ``timeout=``, ...).

    A tool with only a coroutine (``@tool async def``, langchain-mcp-adapters), or a tool class
    that implements ``_arun``, becomes an async harness tool. A tool that handles its own errors
    (``handle_tool_error``, ``handle_validation_error``) is called as a copy that does not, so a
    failure is the harness's failure (retried, counted by the circuit breaker). A tool whose input
    is a pydantic model is shown and checked as a native tool's model is (:func:`_input_model`): a
    misspelt argument, or a validator's refusal, is an argument error, not a failure. The tool runs with
    exactly the arguments the harness checked, under the config of the LangChain run it is called in, and
    gives its own result (:func:`_run_options`). Registers it in ``registry`` when one is given.
    """
    given = tool.args_schema  # a JSON Schema dict (langchain-mcp-adapters) injects nothing; LangChain's input schema
    # for it is a model of one "root" field, not the tool's arguments
    injected = [] if isinstance(given, Mapping) else sorted(_fields(tool.get_input_schema()) - _fields(tool.tool_call_schema))
    if injected:  # a ToolRuntime, an InjectedToolCallId, injected state: only a LangChain agent fills them
        raise ToolDefinitionError(
            f"LangChain tool '{tool.name}' takes injected arguments ({', '.join(injected)}) that only a LangChain "
            "agent provides: from_langchain cannot call it. Use it in a LangChain agent, or adapt the function it wraps.",
            tool=tool.name,
        )
    if tool.handle_tool_error or tool.handle_validation_error:  # LangChain would answer a failure as a result
        tool = tool.model_copy(update={"handle_tool_error": False, "handle_validation_error": False})
    parameters, check = _input_model(tool)

    def run(**kwargs: Any) -> Any:
        if check is not None:
            check(kwargs, "$")
        return tool.run(kwargs, **_run_options())

    async def arun(**kwargs: Any) -> Any:
        if check is not None:
            check(kwargs, "$")
        return await tool.arun(kwargs, **_run_options())

    built = Tool.create(
        arun if _async_only(tool) else run,
        name=definition.pop("name", tool.name),
        description=definition.pop("description", tool.description),
        parameters=parameters,
        **definition,
    )
    if registry is not None:
        registry.add(built)
    return built
