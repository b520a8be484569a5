"""Tool calls as providers and agent loops send them, parsed once for dispatch and ``harness-one run``.

Shapes (``Request.shape``):

==================  ===========================================================  ==============
shape               a call looks like                                            id from
==================  ===========================================================  ==============
``plain``           ``{"id", "name", "arguments"}`` (+ ``idempotency_key``, ``context``)  ``id``
``openai``          ``{"id", "type": "function", "function": {"name", "arguments"}}``  ``id``
``openai-responses``  ``{"type": "function_call", "call_id", "name", "arguments"}``  ``call_id``
``anthropic``       ``{"type": "tool_use", "id", "name", "input"}``                ``id``
``gemini``          ``{"function_call": {"id", "name", "args"}}`` or the inner part   ``id``
                    (REST's ``functionCall`` too)
==================  ===========================================================  ==============

What a dispatcher reads as a call (``parse_call`` with ``provider``): every item of OpenAI's
``tool_calls``; in the formats whose items are typed (Anthropic, OpenAI Responses), an item whose
``type`` is the call's (``tool_use``, ``function_call``, ``custom_tool_call``), and no item of another
``type`` (text, thinking, reasoning, a server tool's call); an item without a ``type`` (and every
Gemini part) when it holds a value in a field a call is read from: ``id``, ``name``, ``input``
(Anthropic), ``call_id``, ``id``, ``name``, ``arguments`` (Responses), ``function_call``,
``functionCall``, ``id``, ``name``, ``args`` (Gemini; no item with a ``type`` is a Gemini call). An item
in another format (:func:`_call_format`) is no call of ``provider``'s: a :class:`ForeignCalls` error. A call
without its arguments field (``input``, ``function.arguments``, ``arguments``; for Gemini, one with another
format's in place of ``args``, or with its arguments streamed: ``partial_args``, ``will_continue``) is a
:class:`BadRequest`. Without ``provider`` (a ``run`` line) the same :func:`_call_format` reads the shape, a plain
line by no mark of another format but its ``type``, OpenAI's ``function``, Gemini's part or ``args``: one with a
``call_id`` and no such ``type`` is plain, one with ``input`` in place of ``arguments`` an invalid call. Dicts and
SDK objects (their ``model_dump()``)
alike; an object that cannot be read shows only its ``type`` and id. A call of an OpenAI custom
(free-form) tool (Chat's ``{"type": "custom", "custom": {...}}``, a Responses ``custom_tool_call``)
is a :class:`CustomCall`: its input is free text, which no tool here takes.

A line of ``harness-one run`` may instead be a decision on a held call (``Decision``):
``{"approve": "<call id>"}`` or ``{"deny": "<call id>", "reason": "..."}``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._arguments import ArgumentLimits, LongNumber, decode_arguments, load_json
from ._errors import ToolArgumentError
from ._render import dumps

if TYPE_CHECKING:
    from ._registry import ToolRegistry

__all__ = [
    "BadRequest",
    "CustomCall",
    "Decision",
    "ForeignCalls",
    "CUT_KEEP",
    "Request",
    "cut_line",
    "drop_nulls",
    "head_members",
    "leading_members",
    "long_number_text",
    "parse_call",
    "parse_line",
    "partial_id",
    "read_object",
    "readable",
    "resolve",
    "tail_members",
    "text_id",
]


@dataclass(slots=True)
class Request:
    """One tool call, whatever shape it came in."""

    id: Any
    name: str
    arguments: Any
    shape: str
    idempotency_key: Any = None
    context: Any = None
    #: The name as the model sent it (before mapping back an exported name).
    exported: str = ""


@dataclass(slots=True)
class Decision:
    """A decision line: approve or deny the call held under ``call_id``."""

    call_id: str
    approve: bool
    reason: str | None = None
    #: The call id as the line sent it (a string or a number).
    id: Any = None


def text_id(rid: Any) -> str | None:
    """A request's id as the call id the registry gets: text (an int past the int-to-text limit in full).

    The one way a provider's or a line's id becomes a call id (dispatch, ``harness-one run`` and
    its decision lines), so that a call and a decision on it always name it alike.
    """
    return None if rid is None else dumps(rid) if type(rid) is int else str(rid)


class BadRequest(Exception):
    """A line or call that is not a tool call; ``request_id`` and the tool ``name`` it sent when they could be read."""

    def __init__(self, message: str, request_id: Any = None, name: str = "") -> None:
        super().__init__(message)
        self.request_id = request_id
        self.name = name


class CustomCall(BadRequest):
    """A call of an OpenAI custom (free-form) tool: not run (a tool here takes JSON arguments, not free text), but
    answered with why, in the answer shape of such a call (a Responses ``custom_tool_call_output``)."""

    def __init__(self, request_id: Any = None, name: str = "") -> None:
        # (``name``: the custom tool's, as the call sent it; "" when it sent none)
        super().__init__(
            "custom (free-form) tools are not supported; call a function tool, with JSON arguments", request_id, name
        )


def readable(obj: Any) -> bool:
    """Whether calls can be read from ``obj``: a mapping or an SDK object (``model_dump``).

    Raises ``TypeError`` for a class (``ToolUseBlock`` given for ``ToolUseBlock(...)``).
    """
    if isinstance(obj, Mapping):
        return True
    if isinstance(obj, type):
        raise TypeError(f"the class {obj.__name__} was given where an instance (a call object or a dict) was expected")
    return callable(getattr(obj, "model_dump", None))


def _fields(obj: Any) -> Mapping[str, Any] | None:
    """The fields a call is read from (an SDK object's ``model_dump()``); None when it has none to read."""
    if isinstance(obj, Mapping):
        return obj
    if not readable(obj):
        return None
    try:  # no pydantic serializer warning: it would print the arguments (a password) to stderr, or raise under -W error
        fields = obj.model_dump(exclude_none=False, warnings=False)
    except TypeError:  # a model_dump of another kind, without the keyword
        fields = obj.model_dump(exclude_none=False)
    return fields if isinstance(fields, Mapping) else None


#: The shape an item's ``type`` marks as a call, in the formats whose items are typed.
_CALL_TYPES = {"tool_use": "anthropic", "function_call": "openai-responses", "custom_tool_call": "openai-responses"}
#: The ``type`` of a custom (free-form) tool's call, by shape: a :class:`CustomCall`.
_CUSTOM_TYPES = {"custom": "openai", "custom_tool_call": "openai-responses"}
#: The fields a call is read from, by format: an item without a ``type`` that holds one is a call.
#: (Every item of OpenAI's ``tool_calls`` is a call.)
_CALL_FIELDS = {
    "anthropic": ("id", "name", "input"),
    "openai-responses": ("call_id", "id", "name", "arguments"),
    "gemini": ("function_call", "functionCall", "id", "name", "args"),
}


def _is_call(call: Mapping[str, Any], provider: str) -> bool:
    """Whether an item ``provider`` sent is one of its calls (the rule in the module docstring)."""
    kind = call.get("type")
    if provider != "openai" and isinstance(kind, str):  # (no Gemini part has a ``type``; OpenAI's are not this provider's)
        return _CALL_TYPES.get(kind) == provider
    fields = _CALL_FIELDS.get(provider)
    return fields is None or any(call.get(key) is not None for key in fields)


def _call_format(call: Mapping[str, Any], *, plain: bool = False) -> str | None:
    """The provider format whose call ``call`` (a call's fields) is by a mark no other format's has: a call's
    ``type`` (``function`` or ``custom`` with its object: OpenAI's), else the field that holds its arguments (OpenAI's
    ``function``, Anthropic's ``input``, Gemini's ``args`` or part) or a Responses ``call_id``; None when it has none.

    With ``plain`` (a ``harness-one run`` line, whose own format, the plain one, is ``id``, ``name``, ``arguments``):
    only by a mark a plain call cannot hold: its ``type``, OpenAI's ``function``, Gemini's part, or ``args`` without
    ``arguments``; a ``call_id`` or an ``input`` beside no ``type`` leaves it plain (answered on its ``id``)."""
    kind = call.get("type")
    if isinstance(kind, str):
        if kind in _CALL_TYPES:
            return _CALL_TYPES[kind]
        return "openai" if kind in ("function", "custom") and isinstance(call.get(kind), Mapping) else None
    if isinstance(call.get("function"), Mapping):
        return "openai"
    if not plain and "call_id" in call:
        return "openai-responses"
    if not plain and "input" in call:
        return "anthropic"
    if isinstance(_gemini_part(call), Mapping):
        return "gemini"
    return "gemini" if "args" in call and not (plain and "arguments" in call) else None


class ForeignCalls(TypeError):
    """Calls in the ``other`` format given for ``provider``'s (``holder``: what held them, and its verb): none is run,
    and answering none would leave the model's calls unanswered. With ``missing``: an item marked as the ``other``
    format's call but without the field that format pairs its answer with (a Gemini Interactions ``function_call``
    step has no ``call_id``), which no dispatcher runs."""

    def __init__(self, holder: str, other: str, provider: str, missing: str = "") -> None:
        if missing:
            super().__init__(
                f"{holder} an item of no supported tool call shape: marked as a call of the {other} format, it has "
                f"no {missing!r}, and it is no call of the {provider} format it was given for; none was run"
            )
        else:
            super().__init__(
                f"{holder} tool calls in the {other} format, not the {provider} format they were given for: "
                f"dispatch them with provider={other!r}"
            )


def _shape(call: Mapping[str, Any]) -> str:
    """The shape of a call read without a provider (a ``run`` line): its format, else ``plain``."""
    return _call_format(call, plain=True) or "plain"


def parse_call(obj: Any, *, provider: str | None = None, scalar_ids: bool = False) -> Request | None:
    """A :class:`Request` from one call: a mapping or a provider SDK object (``model_dump``).

    With ``provider`` given, an item that is not one of its calls (a text block, a reasoning
    item; the rule is in the module docstring) gives ``None``. Raises :class:`BadRequest` for a
    call without a usable name or without its arguments field, for a call that cannot be read but has an id
    (all answered as invalid calls), and (:class:`CustomCall`) for a custom tool's call; ``TypeError``
    for an item that is not a call at all (no dict, no SDK object, and no id), for a class
    given for an instance, and (:class:`ForeignCalls`, with ``provider``) for a call in another provider's format. An id that is an array or an object becomes its JSON text, or with ``scalar_ids`` (the lines of ``harness-one run``, as
    JSON-RPC asks) is a :class:`BadRequest` without an id, as is a boolean or a number that is not finite
    (``NaN``, ``Infinity``, ``1e400``: no JSON number): an answer on its text could not be matched, and a
    decision line could not name it.
    """
    call = _fields(obj)
    seen = _unreadable(obj, provider) if call is None else call
    if provider is None:
        shape = _shape(seen)
    elif (other := _call_format(seen)) not in (None, provider):  # never run with its arguments unread
        paired = _PAIRED.get(other)  # (a provider that could not pair an answer with it is no advice)
        raise ForeignCalls("the calls include", other, provider, paired if paired and seen.get(paired) is None else "")
    elif not _is_call(seen, provider):
        return None  # not a call: a text block, a reasoning item, ...
    else:
        shape = provider
    if call is None:
        if readable(obj):
            why = "its model_dump() did not give an object of the call's fields"
        else:
            why = "it is not a dict and has no model_dump() method (a call's fields are not read from attributes)"
        raise BadRequest(
            f"cannot read a call from a {type(obj).__name__}: {why}; give a dict or the provider SDK's object", seen["id"]
        )
    rid: Any = call.get("id")
    kind = call.get("type")
    absent = None  # the field the call's arguments belong in, when they are not there
    streamed = False  # a Gemini call whose arguments are still arriving in pieces
    custom = isinstance(kind, str) and _CUSTOM_TYPES.get(kind) == shape
    problem = "the request has no tool 'name'"
    if shape == "anthropic":
        name, arguments, absent = call.get("name"), call.get("input"), "input"
    elif shape == "openai":
        function = call.get("function")
        if not isinstance(function, Mapping):
            function, problem = {}, f"'function' must be an object with the tool's 'name', not {_kind(function)}"
        name, arguments, absent = function.get("name"), function.get("arguments"), "function.arguments"
    elif shape == "openai-responses":
        rid = call.get("call_id", None if provider else rid)  # its answer pairs with call_id, never the item's id
        name, arguments, absent = call.get("name"), call.get("arguments"), "arguments"
    elif shape == "gemini":
        inner = _gemini_part(call) or call
        if not isinstance(inner, Mapping):
            inner, problem = {}, "'function_call' must be an object"
        rid, name, arguments = inner.get("id", rid), inner.get("name"), inner.get("args")
        if arguments is None and any(inner.get(key) is not None for key in ("arguments", "input")):
            absent = "args"  # arguments in another format's field: not the no arguments of a function without any
        # Streamed arguments (stream_function_call_arguments): pieces in 'partial_args', more to come while
        # 'will_continue'; run now, the tool would get none of them (its defaults).
        streamed = (
            _gemini_field(inner, "partial_args", "partialArgs") or _gemini_field(inner, "will_continue", "willContinue") is True
        )
    else:
        name, arguments = call.get("name"), call.get("arguments")
        if arguments is None and call.get("input") is not None:
            absent = "arguments"  # Anthropic's field on a plain line: run, its arguments would be read as none
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (str, int, float))):
        if scalar_ids:  # JSON-RPC's ids: a string, a number or null (a boolean is none: its call id would be "True")
            raise BadRequest(f"the request's id must be a string or a number, not {_kind(rid)}")
        if not isinstance(rid, bool):
            rid = dumps(rid)[:200]
    if scalar_ids and isinstance(rid, float) and not math.isfinite(rid):  # NaN, 1e400: no JSON number, no id to answer on
        shown = "NaN" if math.isnan(rid) else "-Infinity" if rid < 0 else "Infinity"
        raise BadRequest(f"the request's id must be a string or a finite number, not {shown}")
    if custom:  # whatever else it holds: its input is text no tool here takes (answered under its id, as read)
        sent = call.get("custom") if shape == "openai" else call
        named = sent.get("name") if isinstance(sent, Mapping) else None
        raise CustomCall(rid, named if isinstance(named, str) else "")
    if not isinstance(name, str) or not name:
        raise BadRequest(problem, rid)
    if (rid is None or rid == "") and provider in _PAIRED:  # its answer could not be paired with it: it is not run
        raise BadRequest(f"the call has no '{_PAIRED[provider]}', so no answer can be paired with it; it was not run")
    if arguments is None and absent:  # (the provider always sends them, {} for none; Gemini may leave out 'args')
        raise BadRequest(f"the call has no '{absent}' (its arguments); it was not run", rid, name)
    if streamed:
        raise BadRequest(
            "the call's arguments are streamed ('partial_args', 'will_continue'): assemble the streamed arguments "
            "into 'args' first; it was not run",
            rid,
            name,
        )
    return Request(
        rid,
        name,
        {} if arguments is None else arguments,
        shape,
        call.get("idempotency_key"),
        call.get("context"),
        name,
    )


#: The providers whose answers name their call's id, and the field that holds it.
_PAIRED = {"openai": "id", "anthropic": "id", "openai-responses": "call_id"}


def _unreadable(item: Any, provider: str | None) -> dict[str, Any]:
    """What an item without fields to read shows: its ``type`` and id (``call_id`` for OpenAI
    Responses), read as a call's are; a ``TypeError`` when it has no id.
    """
    rid = getattr(item, "call_id", None) if provider == "openai-responses" else None
    rid = getattr(item, "id", None) if rid is None else rid
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        raise TypeError(f"a tool call must be a dict or a provider SDK object, not {type(item).__name__}")
    return {"type": getattr(item, "type", None), "id": rid}


def _gemini_part(call: Mapping[str, Any]) -> Any:
    """A Gemini part's call: ``function_call`` (the SDK's spelling) or ``functionCall`` (the REST API's)."""
    return _gemini_field(call, "function_call", "functionCall")


def _gemini_field(call: Mapping[str, Any], name: str, rest_name: str) -> Any:
    """A Gemini field by the SDK's name (``partial_args``), or by the REST API's (``partialArgs``) when that is absent."""
    value = call.get(name)
    return call.get(rest_name) if value is None else value


def _id_in(line: str) -> Any:
    """The request's id from a line holding a number too long to read, or nested too deeply (see :func:`read_object`)."""
    data = read_object(line)
    if data is None:
        return None
    try:
        return _item(data).id
    except BadRequest as exc:
        return exc.request_id


def _id_in_undecodable(line: bytes) -> Any:
    """The request's id from a line that is not valid UTF-8, when the id itself is (the bad bytes
    elsewhere, as in an argument): read with each bad byte as a lone surrogate, then as U+FFFD. The
    two readings differ only where a bad byte is, so an id they read alike holds none (an escaped
    ``"\\ud800"`` in it is JSON's own, kept as a valid line's id is) and one they read apart is not answered."""
    rid = _id_in(line.decode("utf-8", "surrogateescape"))
    if isinstance(rid, str) and not rid.isascii() and rid != _id_in(line.decode("utf-8", "replace")):
        return None  # the bad byte is in the id
    return rid


def read_object(line: str) -> dict[str, Any] | None:
    """The JSON object on a line a JSON decoder refused for its numbers or its depth, as far as it can be read.

    Parsed again with each integer past the int-to-text limit as None; nested too deeply, its
    members before the first one too deep (:func:`leading_members`). None for a line that is not
    JSON, or not an object.
    """
    try:
        data = _DECODER.decode(line)
    except RecursionError:
        data = leading_members(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


_SPACE = re.compile(r"[ \t\n\r]*")


def leading_members(text: str) -> dict[str, Any]:
    """The members of the JSON object ``text`` starts with, up to the first that cannot be read
    (nested too deeply, not JSON, or cut short): ``{"id": 7, "method": "x"}`` of
    ``{"id": 7, "method": "x", "params": [[[...``. Integers past the int-to-text limit are None."""
    found: dict[str, Any] = {}
    at = _skip(text, 0)
    if not text.startswith("{", at):
        return found
    try:
        while True:
            key, at = _DECODER.raw_decode(text, _skip(text, at + 1))
            at = _skip(text, at)
            if not isinstance(key, str) or not text.startswith(":", at):
                return found
            found[key], at = _DECODER.raw_decode(text, _skip(text, at + 1))
            at = _skip(text, at)
            if not text.startswith(",", at):
                return found
    except (ValueError, RecursionError):
        return found


def _skip(text: str, at: int) -> int:
    """Where the JSON whitespace at ``at`` ends."""
    space = _SPACE.match(text, at)
    return space.end() if space else at


#: Bytes kept of the start and of the end of a line dropped for its length, to read its ``id`` from (Python's MCP SDK
#: writes it before the ``params``, the TypeScript SDK last; a ``run`` line usually has it first).
CUT_KEEP = 1 << 12

#: An ``id`` written last (``{"method": ..., "params": ..., "jsonrpc": "2.0", "id": 7}``, as the TypeScript SDK
#: writes it): a string or an integer, the last member of the object the line holds.
_LAST_ID = re.compile(rb'[{,][ \t\r\n]*"id"[ \t\r\n]*:[ \t\r\n]*("(?:[^"\\]|\\.)*"|-?[0-9]{1,50})[ \t\r\n]*\}[ \t\r\n]*\Z')
_NAMES = json.JSONDecoder()
#: One member whose value is a string, a number, a boolean or null.
_MEMBER = (
    rb'[ \t\r\n]*"(?:[^"\\]|\\.)*"[ \t\r\n]*:[ \t\r\n]*'
    rb'(?:"(?:[^"\\]|\\.)*"|-?[0-9]{1,50}(?:\.[0-9]{1,50})?(?:[eE][+-]?[0-9]{1,4})?|true|false|null)[ \t\r\n]*'
)
#: The members an object ends with whose values are no array or object: the last members of the object the line
#: holds (a member of one nested in it would be followed by its closing brace).
_LAST_MEMBERS = re.compile(rb"[{,]" + _MEMBER + rb"(?:," + _MEMBER + rb")*\}[ \t\r\n]*\Z")


def tail_members(tail: bytes) -> dict[str, Any]:
    """The members the object on a line ends with that ``tail`` (the line's last bytes) holds whole, up to the last
    whose value is an array or an object: ``{"call_id": "c1", "name": "add"}`` of ``..."}", "call_id": "c1", "name":
    "add"}`` (a Responses item as the SDK writes it: its ``arguments`` first). Empty when none reads."""
    last = _LAST_MEMBERS.search(tail)
    try:
        found = None if last is None else json.loads(b"{" + last[0][1:])
    except ValueError:  # not UTF-8, or an escape JSON has not
        return {}
    return found if isinstance(found, dict) else {}


def partial_id(rid: Any, *parts: Mapping[str, Any]) -> Any:
    """The id a ``run`` line that does not read whole is answered on, from the members of it that do (``parts``: those
    at its start, at its end): the id the whole line would have been answered on, as far as they show it. A Responses
    item's ``call_id`` when they show its ``type`` (``function_call``; then never the item's ``id``: None without a
    ``call_id``), as :func:`_shape` reads a whole line (a ``call_id`` beside no such ``type`` is a plain line's,
    answered on its ``id``), else ``rid`` (its ``id`` as read); a string or a finite number, else None (as a whole
    line's id must be)."""
    seen = {key: value for part in parts for key, value in part.items()}
    if _shape(seen) == "openai-responses":  # the shape the whole line would have had, by the same rule
        rid = seen.get("call_id")
    return rid if type(rid) in (str, int) or (type(rid) is float and math.isfinite(rid)) else None


def cut_line(head: bytes, tail: bytes) -> tuple[dict[str, Any], str | None, Any]:
    """What a line dropped for its length shows of itself in its first and last :data:`CUT_KEEP` bytes (``head``,
    ``tail``): the members at its start that read whole and the name of the member cut short after them (see
    :func:`head_members`), and its ``id`` as JSON reads it: a top-level member read whole at the start, or else the
    object's last member; None when neither place holds one. ``serve`` and ``run`` answer such a line on that ``id``."""
    members, cut, _ = head_members(head.decode("utf-8", "surrogateescape"))
    if "id" in members:
        return members, cut, members["id"]
    last = _LAST_ID.search(tail)
    try:
        return members, cut, None if last is None else json.loads(last[1])
    except ValueError:  # not UTF-8, or an escape JSON has not
        return members, cut, None


def head_members(text: str) -> tuple[dict[str, Any], str | None, int]:
    """The members the JSON object ``text`` starts with that read whole, the name of the one after them whose value
    does not (cut short, nested too deeply; None: no such name, or ``text`` is no object), and where that value
    starts (-1: none). A number that ends where ``text`` ends does not read whole: ``"id":12345`` there may be
    ``123456789`` cut (a string, an array or an object ends with its own closing character)."""
    members: dict[str, Any] = {}
    at = _skip(text, 0)
    if not text.startswith("{", at):
        return members, None, -1
    try:
        while True:
            name, at = _NAMES.raw_decode(text, _skip(text, at + 1))
            at = _skip(text, at)
            if type(name) is not str or not text.startswith(":", at):
                return members, None, -1
            start = _skip(text, at + 1)
            try:
                value, at = _NAMES.raw_decode(text, start)
            except (ValueError, RecursionError):
                return members, name, start
            if type(value) in (int, float) and (at == len(text) or text[at] in ".eE+-"):  # cut within its digits
                return members, name, start
            members[name] = value
            at = _skip(text, at)
            if not text.startswith(",", at):  # the object's end, or the text's
                return members, None, -1
    except (ValueError, RecursionError):
        return members, None, -1


def _readable_int(digits: str) -> int | None:
    try:
        return int(digits)
    except ValueError:  # past the int-to-text limit in force
        return None


_DECODER = json.JSONDecoder(parse_int=_readable_int)


def _decision(data: Mapping[str, Any]) -> Decision:
    """A :class:`Decision` from an object with ``approve`` or ``deny``."""
    verbs = [verb for verb in ("approve", "deny") if verb in data]
    target = data[verbs[0]]
    rid = target if isinstance(target, (str, int, float)) and not isinstance(target, bool) else None
    if isinstance(rid, float) and not math.isfinite(rid):  # NaN, 1e400: no JSON number (as a request's id)
        shown = "NaN" if math.isnan(rid) else "-Infinity" if rid < 0 else "Infinity"
        raise BadRequest(f"'{verbs[0]}' must be the call id of a held call (a string or a finite number), not {shown}")
    if len(verbs) > 1 or "name" in data:
        raise BadRequest("a decision line has either 'approve' or 'deny' (a call id), and no tool 'name'", rid)
    call_id = text_id(rid)
    if not call_id:  # no id, or ""
        raise BadRequest(f"'{verbs[0]}' must be the call id of a held call (a string or a number), not {_kind(target)}")
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise BadRequest(f"'reason' must be a string, not {_kind(reason)}", rid)
    return Decision(call_id, verbs[0] == "approve", reason, rid)


def parse_line(line: bytes | str) -> Request | Decision:
    """A :class:`Request` or a :class:`Decision` from one JSON line; :class:`BadRequest` for anything else.

    Never raises anything but ``BadRequest``: invalid UTF-8, invalid JSON, nesting deeper
    than the JSON decoder allows, and JSON that is not an object all say so.
    """
    if isinstance(line, bytes):
        raw = line
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequest(
                f"the line is not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at position {exc.start})",
                _id_in_undecodable(raw),
            ) from None
    try:
        data = load_json(line)
    except LongNumber as exc:
        raise BadRequest(long_number_text(exc), _id_in(line)) from None
    except RecursionError:
        raise BadRequest("the line is nested too deeply to read", _id_in(line)) from None
    except ValueError as exc:  # (cut short, or with more after it: answered on the id its members that read show)
        members = head_members(line)[0]
        raise BadRequest(
            f"the line is not valid JSON: {str(exc).split(';')[0]}", partial_id(members.get("id"), members)
        ) from None
    if not isinstance(data, dict):
        raise BadRequest(f"a request must be a JSON object, not {_kind(data)}")
    return _item(data)


def long_number_text(exc: LongNumber) -> str:
    """What a number no Python number holds (an integer too long to read, a float too small: ``TinyNumber``) is
    called where JSON text is read (a ``run`` line, ``call --args``): its
    :meth:`~harness_one._arguments.LongNumber.problem`, as the registry and ``serve`` word it."""
    problem = exc.problem()
    return f"{problem.path}: {problem.message}"


def _item(data: dict[str, Any]) -> Request | Decision:
    """The request or decision a line's object holds."""
    if "approve" in data or "deny" in data:
        return _decision(data)
    request = parse_call(data, scalar_ids=True)
    assert request is not None
    return request


def resolve(request: Request, registry: ToolRegistry, *, strict: bool | str = False) -> Request:
    """Map an exported name back to the tool's (Gemini) and drop the nulls strict mode sends for absent
    arguments (OpenAI calls, and plain requests read as theirs).

    ``strict`` (``True`` or ``"auto"``) applies per tool, as ``registry.export(..., strict="auto")``
    does: a tool that cannot be strict was exported without it, so its nulls are values.
    """
    if request.shape == "gemini":
        request.name = _gemini_tool(request.name, registry)
    if strict and (request.shape.startswith("openai") or request.shape == "plain"):  # a plain one is read as an OpenAI call
        shape = "openai" if request.shape == "plain" else request.shape
        nullable = registry.export(shape, strict="auto", copy=False).nullable.get(request.name)
        if nullable:
            request.arguments = drop_nulls(request.arguments, nullable, registry.limits)
    return request


def _gemini_tool(name: str, registry: ToolRegistry) -> str:
    """The tool a Gemini call's name stands for: the name itself unless an export mapped it (see ``gemini_name``).

    A mapped name has a dot, which no tool name has. ``_`` + a name Gemini refuses (``_2fa``, how
    earlier versions exported ``2fa``) still means that tool when no tool has the name itself.
    """
    from .export import gemini_name

    if "." in name:
        if name.startswith("_.") and gemini_name(name[2:]) == name:
            return name[2:]
        original: str = registry.export("gemini", copy=False).names.original(name)  # a long name, cut and hashed
        return original
    if name[:1] == "_" and gemini_name(name[1:]) != name[1:] and name not in registry and name[1:] in registry:
        return name[1:]
    return name


def drop_nulls(args: Any, tree: Mapping[str, Any], limits: ArgumentLimits | None = None) -> Any:
    """``args`` without the ``null`` values strict mode sends for the optional properties in ``tree``.

    JSON text is decoded first by the registry's decoder, within ``limits`` (default
    :class:`ArgumentLimits`); arguments it refuses come back as they are, for the registry to report.
    """
    try:
        decoded = decode_arguments(args, limits or ArgumentLimits())
    except ToolArgumentError:
        return args
    return _without_nulls(decoded, tree)


def _without_nulls(value: Any, tree: Mapping[str, Any]) -> Any:
    """``value`` without the nulls ``tree`` (see :func:`~harness_one.export.strict_schema`) marks as absent.

    Each value is visited once, with the trees that may apply to it (where several branches of a union fit it, all
    of theirs, each once: equal subtrees of an export are one object), so the cost grows with the value alone."""
    if not isinstance(value, (dict, list)):
        return value
    branches = tree.get("anyOf")
    if branches:
        fits = _fitting(value, branches, tree.get("tags"))
        if fits:
            if len(fits) > 1 or not _bare(tree):  # several, or beside the tree's own nulls
                pending: list[tuple[tuple[Mapping[str, Any], ...], int]] = [
                    ((sub,), 0) if _bare(tree) else ((tree, sub), 1) for sub in reversed(fits)
                ]
                return _cleaned(value, _branched(value, pending))
            return _without_nulls(value, fits[0])
    if isinstance(value, list):
        items = tree.get("items")
        return [_without_nulls(v, items) if isinstance(v, (dict, list)) else v for v in value] if items else value
    absent, properties = tree.get("absent", ()), tree.get("properties", {})
    out = {}
    for key, item in value.items():
        if item is None and key in absent:
            continue
        sub = properties.get(key)
        out[key] = _without_nulls(item, sub) if sub and isinstance(item, (dict, list)) else item
    return out


#: What may apply at a value: alternatives (the branches of unions that fit it), each a conjunction of trees (a tree
#: and the branch of its ``anyOf`` chosen, which both apply). A null is dropped where every alternative drops it.
_Alternatives = list[tuple[Mapping[str, Any], ...]]

#: The most trees the conjunctions among the alternatives for one value may carry in all (a union beside a node's own
#: items or properties makes a conjunction: both apply; such unions nested multiply them); past it the value is kept as
#: sent, nulls and all, for validation to judge: the cost of dropping nulls stays bounded whatever the schema. An
#: alternative of one tree is not counted: those are distinct subtrees of the schema's tree, bounded by its size.
MAX_CARRIED_TREES = 64


def _bare(tree: Mapping[str, Any]) -> bool:
    """Whether ``tree`` holds nothing but an ``anyOf`` (and its tags): once its branch is chosen, the branch alone
    applies."""
    return len(tree) == (2 if "tags" in tree else 1)


def _cleaned(value: dict[str, Any] | list[Any], alternatives: _Alternatives | None) -> Any:
    """``value`` without the nulls every one of ``alternatives`` (each with its ``anyOf`` resolved for ``value``:
    see :func:`_branched`) marks as absent (a null one of them reads as a value is kept, for validation to judge);
    ``None`` (too many to carry) keeps ``value`` as sent."""
    if alternatives is None:
        return value
    if isinstance(value, list):
        inner = _below(alternatives, "items", None)
        if inner is None:
            return value
        return [_within(item, inner) for item in value]
    dropped = set.intersection(*({key for tree in trees for key in tree.get("absent", ())} for trees in alternatives))
    out: dict[str, Any] = {}
    for key, item in value.items():
        if item is None:
            if key not in dropped:
                out[key] = item
        elif isinstance(item, (dict, list)):
            inner = _below(alternatives, "properties", key)
            out[key] = item if inner is None else _within(item, inner)
        else:
            out[key] = item
    return out


def _within(value: Any, alternatives: _Alternatives) -> Any:
    """:func:`_cleaned`, by :func:`_without_nulls` where one tree alone applies."""
    if not isinstance(value, (dict, list)):
        return value
    if len(alternatives) == 1 and len(alternatives[0]) == 1:
        return _without_nulls(value, alternatives[0][0])
    return _cleaned(value, _branched(value, [(trees, 0) for trees in reversed(alternatives)]))


def _branched(
    value: dict[str, Any] | list[Any], pending: list[tuple[tuple[Mapping[str, Any], ...], int]]
) -> _Alternatives | None:
    """The alternatives ``pending`` (each with the index of its first tree whose ``anyOf`` is yet to resolve; the last
    first) with each ``anyOf`` resolved for ``value``: one alternative for each branch ``value`` fits (the branch's
    tree joins the tree's, or takes its place where the tree holds nothing else), each alternative once; a tree whose
    ``anyOf`` no branch of fits applies alone. ``None`` where the conjunctions among them (alternatives of more than
    one tree) would carry more than :data:`MAX_CARRIED_TREES` trees."""
    out: dict[tuple[int, ...], tuple[Mapping[str, Any], ...]] = {}  # (by the trees' identities: equal ones are one)
    seen: set[tuple[tuple[int, ...], int]] = set()  # (each state resolved once: shared subtrees do not multiply paths)
    carried = 0
    while pending:
        trees, start = pending.pop()
        state = (tuple(map(id, trees)), start)
        if state in seen:
            continue
        seen.add(state)
        for at in range(start, len(trees)):
            branches = trees[at].get("anyOf")
            fits = _fitting(value, branches, trees[at].get("tags")) if branches else None
            if fits:  # (the trees before ``at`` are resolved; the branch's joins those after it, or replaces a bare tree)
                if _bare(trees[at]):
                    pending.extend(((*trees[:at], sub, *trees[at + 1 :]), at) for sub in reversed(fits))
                else:
                    pending.extend(((*trees, sub), at + 1) for sub in reversed(fits))
                break
        else:
            key = state[0]
            if key in out:
                continue
            if len(trees) > 1:
                carried += len(trees)
                if carried > MAX_CARRIED_TREES:
                    return None
            out[key] = trees
    return list(out.values())


def _below(alternatives: _Alternatives, keyword: str, key: str | None) -> _Alternatives | None:
    """The alternatives for the items (``keyword`` ``"items"``) or the property ``key`` (``"properties"``) of a value
    ``alternatives`` apply to, each once; ``None`` where one of them drops no null there: the value is kept as sent."""
    out: dict[tuple[int, ...], tuple[Mapping[str, Any], ...]] = {}  # (by the trees' identities: equal ones are one)
    for trees in alternatives:
        subs: dict[int, Mapping[str, Any]] = {}
        for tree in trees:
            sub = tree.get(keyword)
            if sub and key is not None:
                sub = sub.get(key)
            if sub:
                subs.setdefault(id(sub), sub)
        if not subs:
            return None
        out.setdefault(tuple(subs), tuple(subs.values()))
    return list(out.values())


def _fitting(value: dict[str, Any] | list[Any], branches: Any, tags: Any) -> list[Mapping[str, Any]]:
    """The trees of the ``anyOf`` branches ``value`` may have been sent for (``tags``: each branch's, or ``None``
    where no branch has one), each once: those of its kind; for an
    object, of those that have all of its keys and whose tags it does not contradict (a branch's tag, a property it
    allows one value of, sent with another value), the ones whose properties are exactly its keys (a strict model
    sends every property of the branch it follows), else all of them; if it contradicts every branch's tags, the
    same of all."""
    if isinstance(value, list):
        fits = [entry[2] for entry in branches if entry[0] == "array"]
    else:
        keys, size = value.keys(), len(value)
        exact: list[Mapping[str, Any]] = []
        wider: list[Mapping[str, Any]] = []
        ruled_out_exact: list[Mapping[str, Any]] = []
        ruled_out_wider: list[Mapping[str, Any]] = []
        for at, entry in enumerate(branches):
            if entry[0] != "object" or not keys <= entry[1]:
                continue
            same = len(entry[1]) == size
            for name, tag in tags[at] if tags else ():
                item = value.get(name)
                if (item != tag or isinstance(item, bool) != isinstance(tag, bool)) and not (
                    item is None and (name not in value or name in entry[2].get("absent", ()))
                ):  # (a tag not sent, or sent as a null the branch reads as absent, says nothing)
                    (ruled_out_exact if same else ruled_out_wider).append(entry[2])
                    break
            else:
                (exact if same else wider).append(entry[2])
        fits = exact or wider or ruled_out_exact or ruled_out_wider
    if len(fits) < 2:
        return fits
    trees: list[Mapping[str, Any]] = []
    for sub in fits:
        if sub not in trees:
            trees.append(sub)
    return trees


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
