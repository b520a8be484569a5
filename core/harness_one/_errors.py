"""The exception hierarchy: every error carries the tool, the call id and a model-readable text."""

from __future__ import annotations

import contextlib
import math
import numbers
import sys
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from ._call import Call

__all__ = [
    "APPROVAL_REQUIRED",
    "APPROVAL_UNAVAILABLE",
    "ERROR_TEXT_LIMIT",
    "PROBLEMS_LIMIT",
    "ApprovalUnavailable",
    "ArgumentProblem",
    "CircuitOpen",
    "IdempotencyConflict",
    "IdempotencyKeyMismatch",
    "RetryableError",
    "ToolBusy",
    "ToolCancelled",
    "PluginError",
    "RateLimitExceeded",
    "ToolArgumentError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFound",
    "ToolTimeout",
    "call_failure",
    "capped",
    "exception_text",
    "from_state",
    "late_capped",
    "model_message",
    "outside_text",
    "secrets_held",
    "tool_failure",
    "type_name",
    "unawaited",
]

#: The ``kind`` of the approval plugin's error: core code (dispatch, the agent loop) recognises a
#: held call by it without importing the plugins.
APPROVAL_REQUIRED = "approval_required"
#: The ``kind`` of :class:`ApprovalUnavailable`: a held call refused where nothing can approve it.
APPROVAL_UNAVAILABLE = "approval_unavailable"


#: The most characters of an exception's own text an error keeps (a tool's exception, a remote
#: server's error): the model reads the start, and a marker says how much there was.
ERROR_TEXT_LIMIT = 10_000


#: The most problems a :class:`ToolArgumentError` keeps: past it, the first ones and a note saying how
#: many there were, as the validation plugin cuts its listing (harness-one's own checks list fewer).
PROBLEMS_LIMIT = 100
#: The most characters of each text of a problem (its path, message, ``expected``, ``got``) an
#: error's :meth:`~ToolArgumentError.to_dict` lists: a problem naming every accepted property is cut.
_PROBLEM_TEXT = 1_000
#: The ``expected`` of the note ending a cut listing (:meth:`ArgumentProblem.listing_cut`).
_CUT = "the problems above fixed first"


def capped(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, ending with a marker saying how much there was.

    Never longer than ``limit``: when the marker does not fit, the text is cut without one.
    """
    if len(text) <= limit:
        return text
    marker = f"\n[error text truncated: {len(text):,} characters in all, the first {{}} shown]"
    keep = limit - len(marker.format(f"{limit:,}"))  # the marker is longest showing ``limit``
    while keep + 1 + len(marker.format(f"{keep + 1:,}")) <= limit:  # a shorter number left room: keep more
        keep += 1
    if keep <= 0:
        return text[: max(limit, 0)]
    return text[:keep] + marker.format(f"{keep:,}")


def outside_text(text: str, held: Sequence[str] = ()) -> str:
    """Text harness-one did not write (an exception's, a remote server's) as an error shows it to
    the model: the ``held`` texts (a failed call's secret values) masked where they stand as whole
    tokens, then URL user-info and the values of secret keys (``mask_secrets``), cut as :func:`capped` cuts.

    Only what can be shown is read (masking costs up to ~0.3 us a character): the first twice
    :data:`ERROR_TEXT_LIMIT` characters; the rest is never shown, even when masking shortened them.
    """
    from ._redact import mask_held, mask_secrets  # on a failure only: not imported with harness_one

    window = 2 * ERROR_TEXT_LIMIT
    if held:  # before any cut: a secret cut by it would show its start
        text = mask_held(text, held, window)
    if len(text) <= window:
        return capped(mask_secrets(text))
    head = mask_secrets(text[:window])
    if len(head) > ERROR_TEXT_LIMIT:
        return capped(head + text[window:])  # (cut within the masked head; the count is the whole text's)
    return f"{head}\n[error text truncated: {len(text):,} characters in all]"


#: The attribute a thread-mode tool's exception carries its ``str()`` in, read in the worker thread (see
#: :func:`text_ahead`), until the error made of it reads it (:func:`exception_text`, which takes it off).
_AHEAD = "__harness_one_text__"


def text_ahead(exc: BaseException, text: str) -> None:
    """Have the next :func:`exception_text` of ``exc`` read ``text``, its ``str()`` built in another thread, once:
    a slow ``__str__`` then holds that thread, not the caller that builds the error (past its deadline). Kept on
    the exception itself: nothing else holds it, whoever builds the error, or none."""
    with contextlib.suppress(Exception):  # (an exception whose attributes cannot be set: its str() is read again)
        exc.__dict__[_AHEAD] = text


def exception_text(exc: BaseException, held: Sequence[str] = ()) -> str:
    """``Type: text`` of an exception harness-one did not raise, as an error shows it (:func:`outside_text`,
    the ``held`` texts masked)."""
    try:
        ahead = exc.__dict__.pop(_AHEAD, None)
    except Exception:  # (a hostile __getattribute__: its str() is read as before)
        ahead = None
    try:
        text = str(exc) if type(ahead) is not str else ahead
    except BaseException:  # a broken __str__ (one raising SystemExit too): its type says what it was
        text = ""
    return f"{type(exc).__name__}: {outside_text(text, held)}" if text else type(exc).__name__


def secrets_held(*values: Any) -> list[str]:
    """The secret values a failed call's arguments and context, ``values``, hold by the keys of the errors the
    model reads (:data:`~harness_one.MODEL_SECRET_KEYS`, walked as :meth:`Redactor.held` walks them: 4 characters
    or more), for :func:`outside_text` to mask where a tool's exception quotes them. Read on a failure only."""
    from ._redact import _MODEL

    return _MODEL.held(*values) if values else []


def tool_failure(cause: BaseException, tool: str, call_id: str | None, *values: Any) -> ToolExecutionError:
    """The :class:`ToolExecutionError` of a call of ``tool`` that raised ``cause``, ``values`` its arguments
    and context: the secret values they hold (:func:`secrets_held`) masked where the cause's text quotes
    them. The core builds every such error of a call here."""
    return ToolExecutionError(cause, tool=tool, call_id=call_id, held=secrets_held(*values))


def call_failure(call: Call, cause: BaseException, tool: Any = None) -> ToolExecutionError:
    """:func:`tool_failure` of ``call``, whose tool raised ``cause``: named by ``tool`` (the one looked up, where a
    hook may have replaced ``call.tool``) or else ``call.tool``, its arguments' and context's secret values masked."""
    return tool_failure(cause, (call.tool if tool is None else tool).name, call.call_id, call.arguments, call.context)


def unawaited(value: Coroutine[Any, Any, Any]) -> TypeError:
    """The failure of a sync tool that returned ``value``, a coroutine (an async function it called without
    ``await``): nothing would ever await it. Raised where the tool's own exception would be, so the caller
    builds the tool's :class:`ToolExecutionError` from it. ``value`` is closed when it never started (no
    "never awaited" warning; a task it was handed to that has not started it fails then); one running is left alone."""
    import inspect  # (cold: the success path only compares the value's type)

    if inspect.getcoroutinestate(value) == inspect.CORO_CREATED:
        value.close()
    name = getattr(value, "__qualname__", None) or "?"
    return TypeError(
        f"the tool returned a coroutine ({name}) instead of a result: a sync tool's value is never awaited; "
        "declare the tool `async def` and await the coroutine inside it"
    )


def type_name(cls: type) -> str:
    """``module.qualname`` of an exception class (a builtin's bare): the ``error.type`` of a tool's
    exception, as a live one and one stored (an idempotent replay, a process-mode description) name it."""
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


#: Room for what a harness error writes before a cut text (``Tool 'x' failed on MCP server 'y': ...``).
_PREFIX_ROOM = 1_000


def late_capped(message: str) -> str:
    """``message`` where the model reads it: as it is when an error built it (its cut text after a
    prefix), cut to ``ERROR_TEXT_LIMIT`` when longer still (a subclass wrote or computed it after
    ``__init__``, which cuts it): never cut twice, so its marker states the true size."""
    return message if len(message) <= ERROR_TEXT_LIMIT + _PREFIX_ROOM else capped(message)


def model_message(error: ToolError, shown: str | None = None) -> str:
    """The text of ``error`` the model reads, as :meth:`CallResult.for_model` writes it (without ``Error:``): safe
    to encode, and cut (:func:`late_capped`) when a subclass wrote a longer message after ``__init__``.

    ``shown``: the name the model was shown for the tool, where it is not ``error.tool`` (an adapter's ``name=``,
    a Gemini export's name): each mention of the tool as harness-one's texts word it (``tool 'add'``, ``Tool 'add'
    failed``, ``call 'add' again``, ``the call of 'add'``) names it so, since the model can call it by no other
    ("call 'plus' again"); the rest (a tool's own exception text, ``KeyError: 'add'``) is left as written, and so
    is ``error`` itself."""
    from ._render import safe_text  # imported when first needed, as _text does

    text = late_capped(error.message)
    tool = error.tool
    if shown and tool and shown != tool:
        if isinstance(error, ToolExecutionError):  # harness-one wrote only "Tool 'add' failed": the rest is the tool's
            text = text.replace(f"Tool '{tool}' failed", f"Tool '{shown}' failed", 1)
        else:
            import re

            named = re.compile(rf"\b(Tool|tool|call|calling|of|named|for) '{re.escape(tool)}'")
            text = named.sub(lambda found: f"{found.group(1)} '{shown}'", text)
    return safe_text(text)


def _text(message: Any) -> str:
    """An error's message as the model reads it: text, capped; anything else (``ToolError(exc)``)
    is another's text, masked as :func:`outside_text` masks it."""
    if type(message) is not str:
        from ._render import text_of  # rare: imported when first needed

        return outside_text(text_of(message))
    return capped(message)


def _number(value: Any) -> Any:
    """A number for :meth:`ToolError.to_dict`: NaN and the infinities as :func:`~harness_one._render.dumps` writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        from ._render import json_data

        return json_data(value)
    return value


def _seconds_from(value: Any) -> float | None:
    """A number of seconds read back from :meth:`ToolError.to_dict` output (``"Infinity"`` too), else None."""
    if isinstance(value, (int, float)) or value in ("NaN", "Infinity", "-Infinity"):
        return float(value)
    return None


def _wait_hint(value: Any) -> float | None:
    """A ``retry_after`` a tool gave, as seconds: a float; None for what is no number (``"5"``, ``True``);
    the infinity for an integer past a float's range. (NaN and negatives are kept: a wait reads them as none.)"""
    if value is None or type(value) is float:
        return value
    if type(value) is bool or not isinstance(value, numbers.Real):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf  # type: ignore[operator]  # (a Real compares)


def _seconds(value: float, *, up: bool = False) -> str:
    """Seconds as a person reads them: three significant digits, whole seconds from 1,000 on (not ``3.6e+03``);
    ``up``: never less than ``value`` (a wait: one who waits what it says is not refused again)."""
    short = f"{value:.3g}"
    if up and 0.0 < value < math.inf and float(short) < value:
        step = 10.0 ** (math.floor(math.log10(value)) - 2)  # the third significant digit's
        short = f"{math.ceil(value / step) * step:.3g}"
    if float(short) < 1000:
        return short
    return f"{math.ceil(value) if up and value < math.inf else value:,.0f}"  # (999.6 rounds to 1e+03: whole seconds too)


class _LazyMessage:
    """``ToolError.message`` of an error that left it unwritten: ``_default_message()``, kept.

    A subclass may leave ``message`` to be written on first use (a refusal is built on the hot
    path and often never printed). A descriptor without ``__set__``, so the instance's own
    ``message`` wins once written, and reading any other attribute of an error stays plain.
    """

    def __get__(self, err: ToolError | None, owner: type[ToolError]) -> Any:
        if err is None:
            return self
        message = err.__dict__["message"] = err._default_message()
        return message


#: Every ToolError class by name, for :meth:`ToolError.from_dict` (None: two classes share the name).
_ERRORS: dict[str, type[ToolError] | None] = {}


def _live(kind: type[ToolError]) -> type[ToolError]:
    """The class its module now holds under ``kind``'s name (a module imported twice made two); else ``kind``."""
    found: Any = sys.modules.get(kind.__module__)
    for part in kind.__qualname__.split("."):
        found = getattr(found, part, None)
    return found if isinstance(found, type) and issubclass(found, ToolError) and found.__name__ == kind.__name__ else kind


class ToolError(Exception):
    """Base of every error harness-one raises about a tool or a call.

    ``str(err)`` is written for the model: it says what went wrong and what to do next.
    ``tool`` and ``call_id`` are slots: the per-call path writes them on every refusal.
    """

    __slots__ = ("call_id", "tool")

    #: Short machine-readable kind, used in JSON answers (``error.type``).
    kind: str = "tool_error"
    #: Seconds after which the same call may succeed, when the error knows (rate limits, busy, ...).
    retry_after: float | None = None
    #: True when the error is a stored outcome replayed (idempotency), not a new failure: never retry it.
    replayed: bool = False
    #: The model-readable text (``str(err)``).
    message: str = _LazyMessage()  # type: ignore[assignment]

    def __init__(self, message: str, *, tool: str | None = None, call_id: str | None = None) -> None:
        if type(message) is not str or len(message) > ERROR_TEXT_LIMIT:  # not text (an exception object), or too long
            message = _text(message)
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.call_id = call_id

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        known = _ERRORS.get(cls.__name__, cls)  # None: two classes already share the name
        # A module's class again (the module re-imported or reloaded) is the same class; a function's are two.
        where = (cls.__module__, cls.__qualname__)
        again = known is not None and (known.__module__, known.__qualname__) == where and "<locals>" not in where[1]
        _ERRORS[cls.__name__] = cls if known is cls or again else None

    def __str__(self) -> str:
        return self.message

    def _default_message(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle by state, whatever the subclass's __init__ takes (errors cross process boundaries).
        state = {name: getattr(self, name) for name in _slots(type(self)) if hasattr(self, name)}
        state.update(self.__dict__)
        return (from_state, (type(self), state))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: ``type``, ``message`` and the error's own fields."""
        data: dict[str, Any] = {"type": type(self).__name__, "kind": self.kind, "message": late_capped(self.message)}
        if self.tool is not None:
            data["tool"] = self.tool
        if self.call_id is not None:
            data["call_id"] = self.call_id
        if self.retry_after is not None:
            data["retry_after"] = _number(self.retry_after)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolError:
        """Rebuild an error from :meth:`to_dict` output (e.g. a stored idempotent outcome).

        The class is looked up by ``data["type"]`` among the ``ToolError`` classes imported
        (``ToolError`` when none, or more than one, has that name; a module imported again, or
        reloaded, replaces its classes rather than adding namesakes); ``message``, ``tool``,
        ``call_id``, ``retry_after`` and the class's own fields (``problems``, ``timeout``,
        ``cause``; a plugin's class gets back every other key its ``to_dict`` wrote, as an
        attribute) come back; a cause comes back as its type name.
        """
        kind = _live(_ERRORS.get(str(data.get("type"))) or ToolError)
        state: dict[str, Any] = {k: data.get(k) for k in ("message", "tool", "call_id")}
        state["message"] = str(state["message"] or "")
        if (wait := _seconds_from(data.get("retry_after"))) is not None:
            state["retry_after"] = wait
        if issubclass(kind, ToolArgumentError):
            state["problems"] = [ArgumentProblem.from_dict(p) for p in data.get("problems") or () if isinstance(p, Mapping)]
        elif issubclass(kind, ToolTimeout) and (timeout := _seconds_from(data.get("timeout"))) is not None:
            state["timeout"] = timeout
        elif issubclass(kind, ToolExecutionError):
            state["cause"] = str(data.get("cause") or "Exception")
        elif issubclass(kind, ToolNotFound):
            state["suggestions"] = [str(s) for s in data.get("suggestions") or ()]
        elif issubclass(kind, PluginError):
            state["plugin"] = data.get("plugin")
        if kind.__module__ != __name__:  # a plugin's class: its own fields, as its to_dict wrote them
            own = (
                k
                for k in data
                if isinstance(k, str) and k not in state and k != "type" and k.isidentifier() and not hasattr(ToolError, k)
            )  # (a key no attribute can be named by, an int too, is not one)
            state.update({k: data[k] for k in own})
        if kind is ToolError and isinstance(data.get("kind"), str):
            state["kind"] = data["kind"]
        return from_state(kind, state)


class ToolNotFound(ToolError):
    """No tool of that name is registered; ``suggestions`` lists close names.

    ``discovers`` is whether the registry loads installed tool packages (``None``: not said). An
    empty registry that does not (or may not) gets a note that a new ``ToolRegistry()`` starts
    empty and loads them only with ``discover=True``; one with tools does not (the model reads
    the message, and its mistake is the name). ``still_loading``: seconds a lookup waited for
    another thread's loading of the packages, in vain.
    """

    kind = "not_found"

    def __init__(
        self,
        name: str,
        *,
        available: Sequence[str] = (),
        suggestions: Sequence[str] = (),
        total: int | None = None,
        discovers: bool | None = None,
        still_loading: float | None = None,
    ) -> None:
        text = f"Unknown tool '{name}'."
        total = len(available) if total is None else total
        if suggestions:
            text += " Did you mean: " + ", ".join(f"'{s}'" for s in suggestions) + "?"
        elif available:
            shown = list(available)[:20]
            more = "" if total <= len(shown) else f", ... ({total} in all)"
            text += " Available tools: " + ", ".join(shown) + more + "."
        elif discovers is False:
            text += (
                " No tools are registered: this registry started empty and does not load installed tool packages."
                " Add tools to it, or use ToolRegistry(discover=True) or the default registry (ToolRegistry.call(...))."
            )
        elif discovers is None:
            text += (
                " No tools are registered. A new ToolRegistry() starts empty and loads installed tool packages"
                " only with ToolRegistry(discover=True); the default registry (ToolRegistry.call(...)) loads them."
            )
        else:
            text += " No tools are registered."
        if still_loading is not None:  # the tool may be in a package another thread is still importing
            text += (
                f" The installed tool packages were still loading in another thread after {still_loading:g} s:"
                " try again once they are loaded."
            )
        super().__init__(text, tool=name)
        self.suggestions = list(suggestions)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if self.suggestions:
            data["suggestions"] = self.suggestions
        return data


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """One reason the arguments were refused.

    ``path`` is a JSON path such as ``$.items[2].name``; ``keyword`` the JSON Schema keyword
    that failed (or ``json``/``limits``/``signature``); ``expected`` and ``got`` are short texts.
    """

    path: str
    message: str
    keyword: str = ""
    expected: str | None = None
    got: str | None = None

    @classmethod
    def mismatch(cls, path: str, expected: str, value: Any, keyword: str = "type") -> ArgumentProblem:
        """``value``, at ``path``, is not what was ``expected``, worded as the validation plugin words it: ``expected
        string, got integer 5`` (a ``type`` problem: the value's JSON type, then its short JSON text; ``null`` alone),
        ``expected one of ["a", "b"], got "c"`` (another keyword).

        For a tool that checks its own arguments (what must hold without the validation plugin too). The value is
        shown by :func:`~harness_one.preview`, masked as the errors the model reads mask it, and ``(redacted)`` under
        a name whose value they hide (``$.api_key``)."""
        from ._schema import json_type, shown_at

        got = shown_at(value, path)
        kind = json_type(value)
        plain = got == kind or (isinstance(value, float) and not math.isfinite(value))  # "got Infinity", as the plugin
        said = f"{kind} {got}" if keyword == "type" and not plain else got
        return cls(path, f"expected {expected}, got {said}", keyword, expected, got)

    @classmethod
    def listing_cut(cls, message: str) -> ArgumentProblem:
        """The note that ends a listing cut short (``message`` says why): not a problem of its own."""
        return cls("$", message, "limits", _CUT)

    @property
    def is_listing_cut(self) -> bool:
        """Whether this is the note :meth:`listing_cut` makes."""
        return self.keyword == "limits" and self.expected == _CUT and self.path == "$"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArgumentProblem:
        return cls(
            str(data.get("path", "$")),
            str(data.get("message", "")),
            str(data.get("keyword", "")),
            None if data.get("expected") is None else str(data["expected"]),
            None if data.get("got") is None else str(data["got"]),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "keyword": self.keyword, "message": self.message}
        if self.expected is not None:
            data["expected"] = self.expected
        if self.got is not None:
            data["got"] = self.got
        return data


class ToolArgumentError(ToolError):
    """The arguments do not fit the tool. ``problems`` lists the failing fields.

    At most :data:`PROBLEMS_LIMIT` of them and a note saying how many there were.
    """

    kind = "invalid_arguments"
    #: How many problems there were, when this error cut the listing (kept by ``with_tool``).
    _total: int | None = None

    def __init__(
        self,
        problems: Sequence[ArgumentProblem] | str,
        *,
        tool: str | None = None,
        call_id: str | None = None,
    ) -> None:
        if isinstance(problems, str):
            problems = [ArgumentProblem(path="$", message=problems)]
        self.problems = list(problems)
        if len(self.problems) > PROBLEMS_LIMIT:  # a tool's own listing: cut as the validation plugin cuts its own
            self._total = len(self.problems) - self.problems[-1].is_listing_cut
            note = f"only the first {PROBLEMS_LIMIT} of {self._total:,} problems are listed"
            self.problems[PROBLEMS_LIMIT:] = [ArgumentProblem.listing_cut(note)]
        super().__init__(self._render(self.problems, tool, self._total), tool=tool, call_id=call_id)

    @staticmethod
    def _render(problems: Sequence[ArgumentProblem], tool: str | None, total: int | None = None) -> str:
        """The message: a line per problem, as many as :data:`ERROR_TEXT_LIMIT` holds, then how many more.

        The first line counts the problems, not the note ending a cut listing: ``total`` when
        known, else "at least" those listed.
        """
        where = f" for tool '{tool}'" if tool else ""
        listed = len(problems) - (bool(problems) and problems[-1].is_listing_cut)
        number = total if total is not None else listed
        at_least = "at least " if total is None and listed < len(problems) else ""
        count = f"{at_least}{number:,} problem{'s' if number != 1 else ''}"
        lines = [f"Invalid arguments{where} ({count}):"]
        again = f"call '{tool}' again" if tool else "call the tool again"
        last = f"Fix the arguments and {again}."
        room = ERROR_TEXT_LIMIT - len(lines[0]) - len(last) - 100  # the line saying how many more
        for index, problem in enumerate(problems):
            line = f"- {problem.path}: {problem.message}"
            if len(line) >= room:  # the listing ends here; the first problem is shown cut, never left out
                shown = index or 1
                if not index:
                    lines.append(capped(line, room))
                if shown < listed:
                    kept = "each is in the error's problems" if total is None else f"the first {listed:,} are in its problems"
                    lines.append(f"- ... and {(total or listed) - shown:,} more, not shown here ({kept})")
                break
            lines.append(line)
            room -= len(line) + 1
        lines.append(last)
        return "\n".join(lines)

    def with_tool(self, tool: str) -> ToolArgumentError:
        """Name the tool (re-rendering the message) when the raiser did not know it."""
        if self.tool != tool:
            self.tool = tool
            self.message = self._render(self.problems, tool, self._total)
            self.args = (self.message,)
        return self

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`ToolError.to_dict`, with ``problems``: bounded as the message is (each text cut
        to :data:`_PROBLEM_TEXT` characters; those that fit in twice :data:`ERROR_TEXT_LIMIT`
        characters, at least one, then a note saying how many there were)."""
        data = super().to_dict()
        room = 2 * ERROR_TEXT_LIMIT
        listed: list[dict[str, Any]] = []
        for problem in self.problems:
            entry = {key: _problem_field(value) for key, value in problem.to_dict().items()}
            room -= sum(len(value) if type(value) is str else 20 for value in entry.values())
            if room < 0 and listed and not problem.is_listing_cut:
                number = len(self.problems) - self.problems[-1].is_listing_cut
                at_least = "at least " if self._total is None and number < len(self.problems) else ""
                note = f"only the first {len(listed):,} of {at_least}{self._total or number:,} problems are listed"
                listed.append(ArgumentProblem.listing_cut(note).to_dict())
                break
            listed.append(entry)
        data["problems"] = listed
        return data


def _problem_field(value: Any) -> Any:
    """A field of a problem in :meth:`ToolArgumentError.to_dict`: text cut to :data:`_PROBLEM_TEXT` characters; a JSON
    number, boolean or None as it is (a tool's own problem may give ``expected=2``); anything else as its text, cut."""
    kind = type(value)
    if value is None or kind is bool or (kind is int and abs(value) <= 2**53) or (kind is float and math.isfinite(value)):
        return value
    if type(value) is not str:
        import reprlib  # (a tool's own problem of another type: rare)

        try:
            value = outside_text(reprlib.repr(value))  # bounded, however large the value
        except Exception:  # a broken __repr__
            value = f"<{type(value).__name__}>"
    return capped(value, _PROBLEM_TEXT)


class RateLimitExceeded(ToolError):
    """The tool's rate limit refused the call; try again after ``retry_after`` seconds."""

    kind = "rate_limited"
    __slots__ = ("retry_after",)

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_after: float,
        tool: str | None = None,
        call_id: str | None = None,
    ) -> None:
        self.retry_after = retry_after
        self.tool = tool
        self.call_id = call_id
        if message is not None:
            self.message = _text(message)
            self.args = (self.message,)

    @classmethod
    def of(cls, retry_after: float, tool: str | None, call_id: str | None) -> RateLimitExceeded:
        """The same error built from positional fields, without a call of ``__init__``.

        What a rate limit raises on every refused call: about 60% of the constructor's instructions.
        """
        err = _new(cls)
        err.retry_after = retry_after
        err.tool = tool
        err.call_id = call_id
        return err

    def _default_message(self) -> str:
        subject = f"Tool '{self.tool}'" if self.tool else "The tool"
        return f"{subject} is rate limited. Retry after {_seconds(self.retry_after or 0.0, up=True)} s or use another tool."


class ToolTimeout(ToolError):
    """The tool did not finish within ``timeout`` seconds."""

    kind = "timeout"

    def __init__(self, timeout: float, *, tool: str | None = None, call_id: str | None = None) -> None:
        self.timeout = timeout
        subject = f"Tool '{tool}'" if tool else "The tool"
        super().__init__(
            f"{subject} timed out after {_seconds(timeout)} s. Try a smaller request or another tool; "
            "if the call changes something, check whether it took effect before repeating it.",
            tool=tool,
            call_id=call_id,
        )

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["timeout"] = _number(self.timeout)
        return data


class ToolExecutionError(ToolError):
    """The tool itself raised; the original exception is ``__cause__`` (and ``cause``).

    The message holds the exception's text with secrets masked (:func:`outside_text`; ``held``,
    texts masked where they stand as whole tokens: the call's secret values, see :func:`tool_failure`):
    it goes to the model. The exception, kept as the cause, is whole.
    """

    kind = "tool_failed"

    def __init__(
        self, cause: BaseException, *, tool: str | None = None, call_id: str | None = None, held: Sequence[str] = ()
    ) -> None:
        #: The tool's exception (after an idempotent replay from a store: its :func:`type_name`).
        self.cause: BaseException | str = cause
        subject = f"Tool '{tool}'" if tool else "The tool"
        message = f"{subject} failed: {exception_text(cause, held)}"  # a broken __str__ is still the tool's failure
        Exception.__init__(self, message)  # not ToolError's: the cause's text is capped already, not again with the rest
        self.message = message
        self.tool = tool
        self.call_id = call_id
        self.__cause__ = cause

    @classmethod
    def of(cls, call: Call, cause: BaseException) -> Self:
        """The error (of this class) of ``call``, whose tool raised ``cause``, as the core builds it: the secret
        values the call's arguments and context hold masked where the cause's text quotes them (:func:`call_failure`)."""
        return cls(cause, tool=call.tool.name, call_id=call.call_id, held=secrets_held(call.arguments, call.context))

    @property
    def cause_type(self) -> str:
        """The cause's class as ``module.qualname`` (a builtin's bare; a replayed record's, as stored): the
        ``"cause"`` of :meth:`to_dict` and the ``error.type`` of its span and metrics."""
        return self.cause if isinstance(self.cause, str) else type_name(type(self.cause))

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["cause"] = self.cause_type
        return data


class ToolDefinitionError(ToolError):
    """A tool definition is invalid; raised when the tool is defined, never per call."""

    kind = "invalid_definition"


class PluginError(ToolError):
    """A plugin failed to load or raised something other than a :class:`ToolError`."""

    kind = "plugin_error"
    #: Raised by an entry-point plugin's set-up (``harness_configure``): True, a load failure (logged, the
    #: registry goes on without the plugin); False, the registry's creation fails (a plugin refusing it that
    #: left out would let every call through, as the standard plugins' refusal of a registry on another state).
    load_failure: bool = True

    def __init__(self, message: str, *, plugin: str | None = None, tool: str | None = None, call_id: str | None = None) -> None:
        super().__init__(message, tool=tool, call_id=call_id)
        self.plugin = plugin

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if self.plugin is not None:
            data["plugin"] = self.plugin
        return data


class ToolCancelled(ToolError):
    """The caller stopped waiting (its task was cancelled, or Ctrl-C): the call ends here.

    Plugins see it in ``on_error`` so they can release what the call held; no decision they
    return is taken, and the caller gets the original cancellation, not this error.
    """

    kind = "cancelled"

    @classmethod
    def of(cls, call: Call) -> ToolCancelled:
        """The error of ``call``, cancelled by its caller (what plugins' ``on_error`` sees)."""
        tool = call.tool.name
        return cls(f"The call of '{tool}' was cancelled.", tool=tool, call_id=call.call_id)


class _MayWait(ToolError):
    """A ToolError that may say when to try again."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, tool: str | None = None, call_id: str | None = None
    ) -> None:
        super().__init__(message, tool=tool, call_id=call_id)
        self.retry_after = _wait_hint(retry_after)


class RetryableError(_MayWait):
    """Raise from a tool to say the failure is transient; ``retry_after`` suggests a wait."""

    kind = "retryable"

    def __init__(self, message: str = "temporary failure", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class ToolBusy(_MayWait):
    """Too many calls of the tool are running (its concurrency cap or the timeout worker pool)."""

    kind = "busy"


class CircuitOpen(ToolError):
    """The tool failed too often recently; calls fail fast until ``retry_after`` seconds pass."""

    kind = "circuit_open"

    def __init__(
        self, *, retry_after: float, tool: str | None = None, call_id: str | None = None, circuit: str | None = None
    ) -> None:
        subject, wait = f"Tool '{tool}'" if tool else "The tool", _seconds(retry_after, up=True)
        if circuit is None or circuit == tool:
            message = f"{subject} is failing repeatedly and is paused. Retry after {wait} s or use another tool."
        else:  # a circuit tools share: the model's other tools may be in it
            message = (
                f"{subject} is paused: the tools sharing its circuit '{circuit}' are failing repeatedly. "
                f"Retry after {wait} s or use a tool outside that circuit."
            )
        super().__init__(message, tool=tool, call_id=call_id)
        self.retry_after = retry_after


class IdempotencyKeyMismatch(ToolError):
    """An idempotency key was reused with different arguments (HTTP 422 in the IETF draft)."""

    kind = "idempotency_mismatch"


class IdempotencyConflict(_MayWait):
    """A call with this idempotency key is still running (HTTP 409 in the IETF draft)."""

    kind = "idempotency_conflict"


class ApprovalUnavailable(ToolError):
    """A call that needs a person's approval, not run: where it was made, nothing can approve it.

    What the agent-framework adapters without an approval step, ``harness-one call`` and the MCP
    server answer for a call the ``approval`` plugin held (``approval_required``): the call is
    withdrawn from the approval queue, and the message tells the model not to call it again.
    """

    kind = APPROVAL_UNAVAILABLE


_new = BaseException.__new__


def _slots(cls: type[ToolError]) -> tuple[str, ...]:
    """The slot names of ``cls`` and its bases (their values are not in ``__dict__``)."""
    return tuple(name for klass in cls.__mro__ for name in klass.__dict__.get("__slots__", ()) if name != "__dict__")


def from_state(cls: type[ToolError], state: dict[str, Any]) -> ToolError:
    """An error of class ``cls`` with the attributes in ``state`` (its slots unset otherwise), its ``__init__``
    not run: how errors are unpickled, rebuilt from a record, or built from fields already checked (the MCP client's)."""
    err = cls.__new__(cls)
    Exception.__init__(err, state.get("message", ""))
    for name, value in {**dict.fromkeys(_slots(cls)), **state}.items():
        setattr(err, name, value)
    return err


_ERRORS["ToolError"] = ToolError
