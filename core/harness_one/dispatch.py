"""Run a provider's tool calls through a registry and answer in that provider's shape.

========================  ====================================  ==========================================
provider                  calls in                              results out
========================  ====================================  ==========================================
OpenAI Chat Completions   ``message.tool_calls``                ``{"role": "tool", "tool_call_id", "content"}``
OpenAI Responses          ``function_call`` output items        ``{"type": "function_call_output", "call_id", "output"}``
Anthropic Messages        ``tool_use`` content blocks           ``{"type": "tool_result", "tool_use_id", "content", "is_error"}``
Gemini                    ``function_call`` parts               ``{"id", "name", "response": {"output"} | {"error"}}``
========================  ====================================  ==========================================

Calls may be dicts or the providers' SDK objects (anything with ``model_dump``); Gemini parts
may also be spelled as the REST API returns them (``functionCall``). ``calls`` is the list of
them, ``None`` (no calls), one call, or the message or response that holds them (OpenAI's
message or ``ChatCompletion``, a Responses ``Response``, Anthropic's ``Message``, Gemini's
``Content``, ``Candidate`` or response: the first choice's or candidate's calls).
A call is every item of OpenAI's ``tool_calls``; an Anthropic block or Responses item whose
``type`` is ``tool_use``, ``function_call`` or ``custom_tool_call`` (one of another ``type`` is
skipped); and an item without a ``type``, or a Gemini part, that holds a value in a field a call
of its format is read from (``id``, ``name``, ``input``; ``call_id``, ``arguments``;
``function_call``, ``args``): dicts and SDK objects alike. A call in another provider's format (by its ``type``,
or without one by the field holding its arguments or a Responses ``call_id``) is never run: it raises a
``TypeError`` naming the provider to dispatch it with (one marked as another format's call but without the id
that format answers on, a Gemini Interactions step, says it is of no supported shape), and so does another
provider's message or response given where one call is read. A call without its arguments field (an Anthropic
``tool_use`` without ``input``; a Gemini call may leave out ``args``: a function without parameters), or a Gemini
call with its arguments streamed (``partial_args``, ``will_continue``), is not run but answered as an invalid call.
Nothing the model sent raises out of a dispatcher: invalid ``arguments`` JSON, unknown tools,
an unreadable call with an id and every :class:`ToolError` become error results the model can
read (a call whose id no answer can carry, text with a lone surrogate or a ``NaN``, is answered
so under a null id). A call of an OpenAI custom (free-form) tool is not run: it is answered in
its own shape (a Responses ``custom_tool_call_output``) with an error saying to call a function
tool. A Gemini answer repeats the tool name the call sent, cut to 200 characters (more than any
tool name has). Only ``calls`` that are no calls at all (a string, a number, a list holding one), a
class given for an instance, and calls in another provider's format raise a ``TypeError``, before any call runs. Several calls run
concurrently (up to ``concurrency``), and results come back in the order of the calls.
With ``names=`` (the tools the model was shown, or their :class:`~harness_one.export.Export`;
for Gemini, the registry's names or the declarations') only those run: a call of another is
answered as an unknown tool naming only those.

A call that waits for a person's approval (the ``approval`` plugin) is not answered: it is
listed in the result's :attr:`Dispatched.pending`. Once the application has approved or
denied it by its call id (the provider's tool-call id), :func:`resume` runs it and returns
its provider-shaped result: the tool's result, or the refusal.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._call import CallResult, new_call_id
from ._errors import APPROVAL_REQUIRED, ToolError, ToolNotFound, exception_text
from ._formats import CALL_FORMATS, check_format
from ._render import safe_text, struct_data
from ._requests import BadRequest, CustomCall, ForeignCalls, Request, parse_call, readable, resolve, text_id
from ._suggest import NameIndex

if TYPE_CHECKING:
    from ._registry import ToolRegistry
    from .export import Export

__all__ = [
    "PROVIDERS",
    "Dispatched",
    "HeldCall",
    "adispatch",
    "adispatch_anthropic",
    "adispatch_gemini",
    "adispatch_openai",
    "adispatch_openai_responses",
    "aresume",
    "dispatch",
    "dispatch_anthropic",
    "dispatch_gemini",
    "dispatch_openai",
    "dispatch_openai_responses",
    "resume",
]

#: The providers whose tool calls a dispatcher answers.
PROVIDERS = CALL_FORMATS


@dataclass(frozen=True)
class HeldCall:
    """A call that did not run: it waits for a decision on ``call_id`` (the provider's tool-call id)."""

    call_id: str
    #: The tool's name in the registry.
    tool: str
    #: The arguments as validated: what an approval holds for.
    arguments: dict[str, Any]
    provider: str
    _request: Request = field(repr=False, compare=False)
    #: The tools the model was shown (``names=``), for a tool removed before :func:`resume` runs it.
    _shown: _Shown | None = field(default=None, repr=False, compare=False)


class Dispatched(list[dict[str, Any]]):
    """The provider-shaped results, in the order of the calls; held calls have none and are in :attr:`pending`."""

    def __init__(self, answers: Iterable[dict[str, Any]] = (), pending: Iterable[HeldCall] = ()) -> None:
        super().__init__(answers)
        #: The calls waiting for a decision, in the order of the calls.
        self.pending: list[HeldCall] = list(pending)


def _collect(items: Iterable[dict[str, Any] | HeldCall]) -> Dispatched:
    out = Dispatched()
    for item in items:
        if isinstance(item, HeldCall):
            out.pending.append(item)
        else:
            out.append(item)
    return out


#: Where a message or a response holds the provider's calls (keys and indexes), tried in order.
_HOLDERS: dict[str, tuple[tuple[str | int, ...], ...]] = {
    "openai": (("tool_calls",), ("choices", 0, "message", "tool_calls")),
    "openai-responses": (("output",),),
    "anthropic": (("content",),),
    "gemini": (("parts",), ("content", "parts"), ("candidates", 0, "content", "parts")),
}
_ABSENT = object()


def _step(value: Any, key: str | int) -> Any:
    if isinstance(key, int):
        return value[key] if isinstance(value, (list, tuple)) and len(value) > key else _ABSENT
    return value.get(key, _ABSENT) if isinstance(value, Mapping) else getattr(value, key, _ABSENT)


def _held(provider: str, message: Any) -> Any:
    """The calls a message or response holds (None: it has none), or ``_ABSENT`` when it is not one."""
    for path in _HOLDERS[provider]:
        value = message
        for depth, key in enumerate(path):
            value = _step(value, key)
            if value is _ABSENT or value is None:
                if depth:  # its holder, without the calls' place: no calls (a completion with no choices)
                    return None
                break
        if value is None or isinstance(value, (list, tuple)):
            return value
    return None if _step(message, "role") is not _ABSENT else _ABSENT  # a message without calls


def _listed(provider: str, calls: Any) -> Iterable[Any]:
    """The calls in ``calls``: a list of them, None (no calls), a message or response holding them, or one call."""
    if isinstance(calls, (list, tuple)):
        return calls
    if calls is None:
        return ()
    if readable(calls):
        held = _held(provider, calls)
        if held is _ABSENT:  # one call, unless another format's message or response holding calls (a Response)
            _check_foreign(provider, calls)
            return (calls,)
        return held or ()
    if isinstance(calls, (str, bytes, bytearray)) or not isinstance(calls, Iterable):
        raise TypeError(
            "calls must be the model's tool calls (a list of dicts or SDK objects), a message or response "
            f"holding them, or one call; not {type(calls).__name__}"
        )
    return calls


def _requests(
    provider: str, calls: Any, registry: ToolRegistry, strict: bool | str, shown: _Shown | None
) -> list[Request | BadRequest | _NotShown]:
    check_format(provider, calls=True)
    if strict not in (True, False, "auto"):
        raise ValueError(f"strict must be True, False or 'auto', not {strict!r}")
    out: list[Request | BadRequest | _NotShown] = []
    seen: set[Any] = set()
    foreign: ForeignCalls | None = None
    for raw in _listed(provider, calls):
        try:
            request = parse_call(raw, provider=provider)
        except ForeignCalls as exc:  # raised once every item is read: an item that is no call at all says so first
            foreign = foreign or exc
            continue
        except BadRequest as exc:
            if not _writable(exc.request_id):  # no answer could carry it: answered unpaired, as a readable call is
                exc.request_id = None
            out.append(exc)
            if exc.request_id is not None:  # answered under its id: a later call under that id is not run
                seen.add((type(exc.request_id), exc.request_id))
            continue
        if request is None:
            continue
        rid = request.id
        if not _writable(rid):  # its answer could carry it neither as valid UTF-8 nor as JSON: answered unpaired
            why = f"the call's id {_shown(rid)} cannot be written back (not valid UTF-8, or not a JSON number)"
            out.append(_Unrun(why, None, request.exported))
            continue
        if rid is not None and (type(rid), rid) in seen:  # two answers under one id could not be told apart
            out.append(_Unrun(f"another call in this turn has the id {_sent_id(rid)!r}; it was not run", rid, request.exported))
            continue
        if rid is not None:
            seen.add((type(rid), rid))
        request = resolve(request, registry, strict=strict)
        out.append(request if shown is None or shown.allows(request, provider) else _NotShown(request))
    if foreign is not None:
        raise foreign
    if not out and readable(calls):
        _check_foreign(provider, calls)
    return out


def _check_foreign(provider: str, message: Any) -> None:
    """A ``TypeError`` when ``message``, which holds no call of ``provider``'s shape, holds another provider's calls
    (an Anthropic ``Message`` given to the OpenAI dispatcher): answering none would leave the model's calls unanswered."""
    for other in _HOLDERS:
        held = None if other == provider else _held(other, message)
        if isinstance(held, (list, tuple)) and any(_is_call(other, item) for item in held):
            raise ForeignCalls("the message holds", other, provider)


def _is_call(provider: str, item: Any) -> bool:
    try:
        return parse_call(item, provider=provider) is not None
    except BadRequest:  # a call all the same, one that does not read
        return True
    except ForeignCalls:  # a call of a third format: not one of this provider's
        return False


def _checked_options(concurrency: Any, context: Any) -> int:
    """``concurrency`` as an ``int`` (an int-like one, ``numpy.int64(4)``, by its ``__index__``), or a ``TypeError`` or
    ``ValueError`` for a ``concurrency`` or ``context`` the caller got wrong (no model's doing)."""
    try:
        if isinstance(concurrency, bool):  # (an int by type, a flag by meaning)
            raise TypeError
        workers = operator.index(concurrency)
    except TypeError:
        raise TypeError(f"concurrency must be an int of at least 1, not {type(concurrency).__name__}: {concurrency!r}") from None
    if workers < 1:
        raise ValueError(f"concurrency must be at least 1, not {workers}")
    if context is not None and not isinstance(context, Mapping):
        raise TypeError(f"context must be a mapping (or None), not {type(context).__name__}")
    return workers


class _Shown:
    """The tools the model was shown (``names=``): the only ones a dispatcher runs."""

    def __init__(self, names: Any) -> None:
        from .export import Export

        if isinstance(names, Export):
            names = names.tool_names
        elif isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
            raise TypeError(f"names must be an iterable of tool names or an Export, not {type(names).__name__}")
        listed = list(dict.fromkeys(names))
        wrong = next((name for name in listed if not isinstance(name, str)), None)
        if wrong is not None:
            raise TypeError(f"names must be tool names (strings), not {type(wrong).__name__}: {wrong!r}")
        self.order: list[str] = listed
        self.names = frozenset(listed)
        self._gemini: list[str] | None = None  # the names as Gemini shows them, made at the first Gemini call

    def gemini(self) -> list[str]:
        """The names as a Gemini export shows them (see :func:`~harness_one.export.gemini_name`), in order: a
        registry name mapped, a name as shown kept as it is."""
        if self._gemini is None:
            from .export import gemini_name

            self._gemini = list(dict.fromkeys(gemini_name(name) for name in self.order))
        return self._gemini

    def allows(self, request: Request, provider: str) -> bool:
        """Whether ``request`` calls a tool shown: its registry name is listed, or (Gemini) the name as sent or the
        tool's name as a Gemini export shows it is (names may be given either way)."""
        if request.name in self.names:
            return True
        if provider != "gemini":
            return False
        from .export import gemini_name

        shown = self.gemini()
        return request.exported in self.names or request.exported in shown or gemini_name(request.name) in shown

    def not_found(self, sent: str, provider: str) -> ToolNotFound:
        """The registry's "Unknown tool" for the name the model sent, naming (and suggesting) only the tools shown,
        under the names it was shown (Gemini's, see :func:`~harness_one.export.gemini_name`); never ``sent``
        itself as the name meant."""
        shown = self.gemini() if provider == "gemini" else self.order
        index = NameIndex()
        for each in shown:
            index.add(each)
        close = [name for name in index.suggest(sent) if name != sent] if len(sent) <= 256 else []
        error = ToolNotFound(_sent_name(sent), available=shown[:20], suggestions=close, total=len(shown))
        if not shown:  # no tool was shown: nothing to name (nor any note on registries, which this is not about)
            error.message = f"Unknown tool '{error.tool}'."
            error.args = (error.message,)
        return error


def _scope(names: Any) -> _Shown | None:
    return None if names is None else _Shown(names)


@dataclass(frozen=True, slots=True)
class _NotShown:
    """A call of a tool the model was not shown (see ``names=``): not run, answered as an unknown tool."""

    request: Request


def _unrun(registry: ToolRegistry, provider: str, item: BadRequest | _NotShown, shown: _Shown | None) -> dict[str, Any]:
    """The answer to a call that is not run: unreadable, a repeated id, or of a tool not shown."""
    if isinstance(item, BadRequest):
        return _refused(registry, provider, item)
    assert shown is not None
    request = item.request
    error = registry._refused(request.name, shown.not_found(request.exported, provider), text_id(request.id))
    assert error.call_id is not None
    return _answer(provider, request, CallResult(False, None, error, request.name, error.call_id, 0.0, 0))


def _scoped(result: CallResult, registry: ToolRegistry, request: Request, shown: _Shown | None) -> CallResult:
    """``result``; with ``names=``, a shown tool the registry no longer has is refused as the framework adapters
    refuse it, naming no other tool (the registry's own "Unknown tool" lists all of its tools). Without, a Gemini
    call of an unknown tool is told the registry's tools under the names Gemini was shown (:func:`_gemini_named`)."""
    if result.ok:
        return result
    if shown is None:
        return _gemini_named(result, registry, request) if request.shape == "gemini" else result
    from .integrations._common import no_longer_available

    return no_longer_available(result, registry, request.name)


def _gemini_named(result: CallResult, registry: ToolRegistry, request: Request) -> CallResult:
    """``result``; when the registry refused the Gemini call ``request`` as an unknown tool, its "Unknown tool" under
    the names a Gemini export shows (:func:`~harness_one.export.gemini_name`): the name as sent, and the tools it
    suggests or lists as Gemini was shown them, so the model retries with a name Gemini takes. The registry's own
    suggestions (its one matcher, over its names) are mapped; its notes after them (packages still loading or
    failed) kept. Left as the registry wrote it when its tools changed between the refusal and here."""
    error = result.error
    if not isinstance(error, ToolNotFound) or request.name in registry:
        return result
    from .export import gemini_name

    listed = [] if error.suggestions else registry._index.first(20)  # what the registry listed when it suggested none
    total = len(registry._index)
    head = ToolNotFound(error.tool or "", available=listed, suggestions=error.suggestions, total=total).message
    if not (error.suggestions or listed) or not error.message.startswith(head):  # no tool named, or they changed
        return result
    named = ToolNotFound(
        _sent_name(request.exported),
        available=[gemini_name(name) for name in listed],
        suggestions=[gemini_name(name) for name in error.suggestions],
        total=total,
    )
    named.message += error.message[len(head) :]
    named.args = (named.message,)
    named.call_id = error.call_id if error.call_id is not None else result.call_id
    return result._replace(error=named)


class _Unrun(BadRequest):
    """A call read in full but not run (its id): refused under the tool name it sent, which Gemini's answer names."""


def _writable(rid: Any) -> bool:
    """Whether an answer can carry the id ``rid`` as it came: text that is valid UTF-8 (no lone surrogate), or a
    finite number (``NaN`` and infinities are no JSON)."""
    if isinstance(rid, str):
        if rid.isascii():
            return True
        try:
            rid.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    return not isinstance(rid, float) or math.isfinite(rid)


#: The most characters of the tool name a call sent that an answer or an error repeats: more than any tool name has (64
#: at most, as Gemini's function names), so a name cut to it names no tool, and an answer stays small whatever was sent.
_NAME_SHOWN = 200


def _sent_name(name: str) -> str:
    """The tool name a call sent, as an answer or an error repeats it: cut to :data:`_NAME_SHOWN` characters, then
    made valid UTF-8 (a lone surrogate as U+FFFD)."""
    return safe_text(name[:_NAME_SHOWN])


def _shown(rid: Any) -> str:
    """``rid`` for an error message: as ``ascii()`` writes it (a lone surrogate escaped), cut to 200 characters."""
    return ascii(rid)[:200]


def _sent_id(rid: Any) -> Any:
    """The call's id as its answer carries it: as the call gave it, but for an int too long for text
    (past Python's int-to-text limit, which ``json.dumps`` cannot write): its digits as text, the call
    id the registry got (:func:`~harness_one._requests.text_id`)."""
    if isinstance(rid, int) and not isinstance(rid, bool):
        try:
            int.__repr__(rid)
        except ValueError:
            return text_id(int(rid))
    return rid


def _settle(
    provider: str, request: Request, outcome: CallResult | Exception, shown: _Shown | None = None
) -> dict[str, Any] | HeldCall:
    """The provider-shaped answer for a finished call, or an exception it raised (never re-raised).

    A call held for approval is not answered: its :class:`HeldCall`.
    """
    if isinstance(outcome, CallResult) and outcome.error is not None and outcome.error.kind == APPROVAL_REQUIRED:
        arguments = getattr(outcome.error, "arguments", request.arguments)
        return HeldCall(outcome.call_id, outcome.tool, dict(arguments), provider, request, shown)
    if not isinstance(outcome, CallResult):
        message = f"Internal error while calling '{request.name}': {exception_text(outcome)}"
        error = outcome if isinstance(outcome, ToolError) else ToolError(message)
        outcome = CallResult(False, None, error, request.name, new_call_id(), 0.0, 0)
    return _answer(provider, request, outcome)


def _refused(registry: ToolRegistry, provider: str, request: BadRequest) -> dict[str, Any]:
    """The answer to a call the provider's format cannot be read from (or of a custom tool), once the plugins observed it."""
    name = request.name  # (a call whose name could not be read has none: "")
    advice = "" if isinstance(request, CustomCall) else " Send a tool name and its arguments."  # (it says what to do)
    error = registry._refused(name, ToolError(f"Invalid tool call: {request}.{advice}"), None)
    assert error.call_id is not None
    answer = _answer(
        provider,
        Request(request.request_id, name, {}, provider, exported=name),
        CallResult(False, None, error, name, error.call_id, 0.0, 0),
    )
    if isinstance(request, CustomCall) and provider == "openai-responses":  # the item type that answers such a call
        answer["type"] = "custom_tool_call_output"
    return answer


def _answer(provider: str, request: Request, result: CallResult) -> dict[str, Any]:
    rid = _sent_id(request.id)
    if provider == "gemini" and result.ok:  # Gemini takes data, not text (see below)
        return _gemini_answer(request, rid, {"output": struct_data(result.value)})
    # an error names the tool as the model called it (a Gemini name, "_.2fa-check"), not by the registry's name
    text = result.for_model(_sent_name(request.exported))
    if provider == "openai":
        return {"role": "tool", "tool_call_id": rid, "content": text}
    if provider == "openai-responses":
        return {"type": "function_call_output", "call_id": rid, "output": text}
    if provider == "anthropic":
        return {"type": "tool_result", "tool_use_id": rid, "content": text, "is_error": not result.ok}
    return _gemini_answer(request, rid, {"error": text.removeprefix("Error: ")})


def _gemini_answer(request: Request, rid: Any, response: dict[str, Any]) -> dict[str, Any]:
    """Gemini's answer: data, not text (a protobuf Struct: doubles, string keys), made valid UTF-8 as for_model()
    makes the others' text, with the ints a double would round as their digits (see struct_data)."""
    answer: dict[str, Any] = {"name": _sent_name(request.exported), "response": response}
    if rid is not None:
        answer["id"] = rid
    return answer


def dispatch(
    registry: ToolRegistry,
    calls: Any,
    *,
    provider: str = "openai",
    strict: bool | str = False,
    concurrency: int = 8,
    context: Mapping[str, Any] | None = None,
    names: Iterable[str] | Export | None = None,
) -> Dispatched:
    """Run ``calls`` (``provider``-shaped: a list, ``None``, one call, or a message holding them)
    and return the provider-shaped results, in order.

    Each call runs in a copy of the caller's context (its current span stays their parent; what a tool sets reaches
    neither the caller nor the other calls). Several run in a thread pool of up to ``concurrency`` workers; so does
    a single one when an
    event loop runs in this thread (a Jupyter cell, an async handler), where an async tool could not
    run its own loop: every call is answered, though it blocks that loop meanwhile (``await``
    :func:`adispatch` there instead). ``strict`` (``True`` or
    ``"auto"``) must match the export the model saw (OpenAI strict mode): for each tool that can be
    strict, nulls it sends for optional arguments are dropped so defaults apply (a ``ValueError``
    for another value, as for an unknown ``provider``). Calls held for approval get no result here:
    they are in the returned list's ``pending`` (see :func:`resume`).

    ``names`` (tool names, or the :class:`~harness_one.export.Export` the model was shown; for Gemini,
    the registry's names or the declarations'): only these tools run; a call of any other is
    answered as an unknown tool, naming and suggesting only these. ``None`` (the default): every tool in the registry
    (named and suggested to Gemini, as with ``names``, by the names its declarations show).

    ``concurrency`` must be an int of at least 1 (or an int-like one, with ``__index__``, such as ``numpy.int64``; not
    a bool) and ``context`` a mapping or ``None``: else a ``TypeError`` (a ``ValueError`` for a ``concurrency`` below
    1), raised before any call runs. Each call's ``Call.context`` is its own copy of ``context`` (a plain ``dict``,
    shallow): what a tool or a hook writes into it reaches neither the other calls nor the caller's mapping.
    """
    concurrency = _checked_options(concurrency, context)
    shown = _scope(names)
    requests = _requests(provider, calls, registry, strict, shown)

    def one(request: Request | BadRequest | _NotShown) -> dict[str, Any] | HeldCall:
        if not isinstance(request, Request):
            return _unrun(registry, provider, request, shown)
        own = _own_context(context, request)
        if isinstance(own, CallResult):
            return _settle(provider, request, own)
        result = registry.try_call(request.name, request.arguments, context=own, call_id=text_id(request.id))
        return _settle(provider, request, _scoped(result, registry, request, shown), shown)

    if not requests or ((len(requests) == 1 or concurrency <= 1) and not _loop_running()):
        # in this thread, each in a copy of the context too: what a tool sets reaches neither the others nor the caller
        return _collect(contextvars.copy_context().run(one, r) for r in requests)
    # several calls, or an event loop running in this thread (an async tool cannot start its own loop here): threads
    workers = min(concurrency, len(requests))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="harness-one-dispatch") as pool:
        # each call in a copy of the caller's context (a pool's threads have their own): the caller's span stays the
        # parent of each tool's span, as it is for a call run in the caller's thread; answers in the order of the calls
        running = [pool.submit(contextvars.copy_context().run, one, r) for r in requests]
        return _collect(future.result() for future in running)


def _own_context(context: Mapping[str, Any] | None, request: Request) -> Mapping[str, Any] | CallResult | None:
    """The call's own copy of ``context=`` (a plain ``dict``, as the framework adapters make one), so what a tool or
    a hook writes into it reaches neither the batch's other calls nor the caller's mapping; a mapping that fails to
    copy, the refusal of the call (see :func:`~harness_one.integrations._common.call_context`)."""
    if context is None:
        return None
    from .integrations._common import call_context, refusal

    try:
        return call_context(context, _no_run_context, tool=request.name, call_id=text_id(request.id))
    except ToolError as err:
        return refusal(err)


def _no_run_context() -> None:
    """The run context ``call_context`` may ask for: a dispatcher has none (its ``context=`` is a mapping)."""


def _loop_running() -> bool:
    """Whether an event loop runs in this thread (a Jupyter cell, an async handler calling sync code)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def adispatch(
    registry: ToolRegistry,
    calls: Any,
    *,
    provider: str = "openai",
    strict: bool | str = False,
    concurrency: int = 8,
    context: Mapping[str, Any] | None = None,
    names: Iterable[str] | Export | None = None,
) -> Dispatched:
    """The awaitable :func:`dispatch`: calls run as tasks, at most ``concurrency`` at once."""
    concurrency = _checked_options(concurrency, context)
    shown = _scope(names)
    requests = _requests(provider, calls, registry, strict, shown)
    slots = asyncio.Semaphore(concurrency)

    async def one(request: Request | BadRequest | _NotShown) -> dict[str, Any] | HeldCall:
        if not isinstance(request, Request):
            return _unrun(registry, provider, request, shown)
        own = _own_context(context, request)
        if isinstance(own, CallResult):
            return _settle(provider, request, own)
        async with slots:
            result = await registry.atry_call(request.name, request.arguments, context=own, call_id=text_id(request.id))
        return _settle(provider, request, _scoped(result, registry, request, shown), shown)

    return _collect(await asyncio.gather(*(one(r) for r in requests)))


def _approval(registry: ToolRegistry, held: HeldCall) -> Any:
    plugin = registry.plugins.get("approval")
    if plugin is None:
        raise ToolError(f"No approval plugin is registered: call id '{held.call_id}' cannot be resumed.", call_id=held.call_id)
    return plugin


def resume(registry: ToolRegistry, held: HeldCall) -> dict[str, Any]:
    """Run a held call once it is decided and return its provider-shaped result.

    Approved: the tool's result (every policy applied); denied: the ``ApprovalDenied`` refusal,
    which the model can read. Raises ``ApprovalNotFound`` when no decision was made for
    ``held.call_id`` (approve or deny it first, with ``registry.plugins.get("approval")``).
    """
    result = _approval(registry, held).resume(held.call_id)
    return _answer(held.provider, held._request, _scoped(result, registry, held._request, held._shown))


async def aresume(registry: ToolRegistry, held: HeldCall) -> dict[str, Any]:
    """The awaitable :func:`resume`."""
    result = await _approval(registry, held).aresume(held.call_id)
    return _answer(held.provider, held._request, _scoped(result, registry, held._request, held._shown))


def _bind(provider: str) -> tuple[Callable[..., Dispatched], Callable[..., Any]]:
    def sync(registry: ToolRegistry, calls: Any, **options: Any) -> Dispatched:
        return dispatch(registry, calls, provider=provider, **options)

    async def run_async(registry: ToolRegistry, calls: Any, **options: Any) -> Dispatched:
        return await adispatch(registry, calls, provider=provider, **options)

    sync.__doc__ = f"``dispatch(..., provider={provider!r})``."
    run_async.__doc__ = f"``adispatch(..., provider={provider!r})``."
    return sync, run_async


dispatch_openai, adispatch_openai = _bind("openai")
dispatch_openai_responses, adispatch_openai_responses = _bind("openai-responses")
dispatch_anthropic, adispatch_anthropic = _bind("anthropic")
dispatch_gemini, adispatch_gemini = _bind("gemini")
