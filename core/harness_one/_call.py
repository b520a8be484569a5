"""Per-call state handed to every hook, and the decisions hooks can return."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from ._errors import ToolError

if TYPE_CHECKING:
    from ._registry import ToolRegistry
    from ._runners import Runner
    from ._tool import Tool

__all__ = ["Await", "Call", "CallResult", "Lingering", "Outcome", "ProgressCallback", "Retry", "new_call_id"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_PREFIX = os.urandom(4).hex() + "-"  # a call id's prefix, with its dash
_ids = itertools.count(1)
_TOKEN_PREFIX = os.urandom(8).hex()
_tokens = itertools.count(1)
#: The call and attempt a tool running in a timeout worker thread belongs to (set in that
#: thread's context): ``Call.cancelled`` there answers for that attempt, not the current one.
_ATTEMPT: contextvars.ContextVar[tuple[Call, int] | None] = contextvars.ContextVar("harness_one_attempt", default=None)


def _forked() -> None:
    """A forked child draws its own prefixes: its call ids and tokens never repeat its parent's."""
    global _PREFIX, _ids, _TOKEN_PREFIX, _tokens
    _PREFIX, _ids = os.urandom(4).hex() + "-", itertools.count(1)
    _TOKEN_PREFIX, _tokens = os.urandom(8).hex(), itertools.count(1)


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forked)

#: ``callback(progress, total, message)``: what :meth:`Call.report_progress` calls.
ProgressCallback = Callable[[float, "float | None", "str | None"], None]


class _Unreportable(TypeError):
    """An ``on_progress`` no report can reach: the call refuses it up front (a ``TypeError``, never a ToolError)."""


def progress_callback(report: ProgressCallback) -> ProgressCallback:
    """``report``, a caller's ``on_progress``, checked once as the call begins: an ``async def`` (a
    tool reports from a plain call, often in a worker thread, so nothing would await it) or
    something not callable is refused with a ``TypeError`` naming it."""
    if not callable(report) or inspect.iscoroutinefunction(report) or inspect.iscoroutinefunction(type(report).__call__):
        what = "an async def" if callable(report) else "not callable"
        raise _Unreportable(
            f"on_progress {report!r} is {what}: it must be a plain function (progress, total, message) -> None"
            " (from async code, hand the report to the loop: loop.call_soon_threadsafe)"
        )
    return report


def new_call_id() -> str:
    """A process-unique call id: a random per-process prefix (a forked child draws its own) and a counter."""
    return _PREFIX + str(next(_ids))  # (an f-string costs about 150 instructions more on CPython 3.11)


def new_token() -> str:
    """A token unique across calls, processes and hosts: a random 64-bit per-process prefix (a
    forked child draws its own) and a counter. It names an idempotency claim's owner and a budget's give-back."""
    return f"{_TOKEN_PREFIX}-{next(_tokens)}"


class Lingering:
    """A tool its caller stopped waiting for that still runs (abandoned in a thread at its timeout).

    :meth:`then` registers what to do once it returns; the thread running it calls
    :meth:`finished` then. A plugin that holds something for the call's run (a concurrency
    slot) keeps it until then, so the tool never runs beyond what it was given. ``outcome``
    is then what the tool did: ``(True, value)``, ``(False, exception)``, or None if unknown.
    """

    __slots__ = ("_done", "_lock", "_started", "_waiting", "outcome")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._started: bool | None = False  # None: abandoned before it started, so it never runs
        self._waiting: list[Callable[[], object]] = []
        self.outcome: tuple[bool, Any] | None = None

    def start(self) -> bool:
        """Whether the tool may start (called by the thread about to run it): not if its caller gave it up first."""
        with self._lock:
            if self._started is None:
                return False
            self._started = True
            return True

    def abandon(self) -> bool:
        """Give up a tool not yet started (its caller stopped waiting): True if it never will, so nothing lingers."""
        with self._lock:
            if self._started:
                return False
            self._started = None
            return True

    def then(self, fn: Callable[[], object]) -> None:
        """Call ``fn()`` once the tool has returned (now, if it has); its errors are ignored."""
        if not self.later(fn):
            with contextlib.suppress(Exception):
                fn()

    def later(self, fn: Callable[[], object]) -> bool:
        """Have the tool's thread call ``fn()`` once it returns: True; False if it has returned already
        (``fn`` not called: the hook settles it itself, through an ``Await`` under ``acall``, where a
        blocking round trip in this thread would hold up the event loop)."""
        with self._lock:
            if self._done:
                return False
            self._waiting.append(fn)
            return True

    def finished(self, ok: bool | None = None, value: Any = None) -> None:
        """The tool returned ``value`` (``ok``) or raised it (not ``ok``; None: not known): run what
        was registered (called once, by the thread that ran it)."""
        with self._lock:
            if ok is not None:
                self.outcome = (ok, value)
            self._done = True
            waiting, self._waiting = self._waiting, []
        for fn in waiting:
            with contextlib.suppress(Exception):
                fn()


class Call:
    """One call of one tool, as the hooks see it. Every field plugins exchange is declared here.

    Read by every hook: ``tool`` (never assigned: the core runs and names the tool it looked up whatever
    a hook assigns, and sets it back before ``on_error`` runs), ``arguments``, ``context`` (the caller's mapping, read-only),
    ``call_id``, ``idempotency_key``, ``registry``, ``attempt`` (runs of the tool so far; a
    wait for a token does not add one), ``ran`` (the tool started in this attempt),
    ``started`` (``time.perf_counter()`` when the call began: the source of durations).

    Written by hooks, as the hook contract says (``harness_one.hookspecs``):

    - ``arguments``: replaced in pre-validate (normalisation, defaults);
    - ``deadline``, ``timeout``, ``runner``: this attempt's bounds, set in pre-call. ``deadline``
      is a value of ``registry.clock.now()`` that cooperative tools read through
      :meth:`remaining`; ``timeout`` (seconds) makes the core enforce it, running a sync tool
      with ``runner`` (a :class:`~harness_one.Runner`; ``None``: in the caller's thread,
      advisory only). All three are cleared before each attempt;
    - ``total_deadline``: the whole call's deadline on ``registry.clock`` (the timeout plugin's
      total), set in pre-call or on-error and kept across attempts; a plugin that waits between
      attempts (retry) starts no wait that ends after it;
    - ``lingering``: written by the core when this attempt's tool runs on after its caller
      stopped waiting (a ``thread``-mode timeout, a cancelled ``acall``): a :class:`Lingering`
      whose ``then(fn)`` calls ``fn`` once it returns. Cleared before each attempt;
    - ``result``: replaced in post-call;
    - ``decision``: the decision taken in this on-error round (the first non-``None`` one),
      which implementations that run after it read (``Retry`` means another attempt follows);
    - ``state``: each plugin's own per-call data, under keys prefixed with its name. A plugin
      never reads another plugin's keys.

    A tool function with a parameter annotated ``Call`` receives this object (for
    :meth:`report_progress`, :attr:`wants_progress`, :attr:`cancelled`, :meth:`remaining`).
    """

    # The fields every call sets are slots; the rest are class defaults until a call sets them.
    _id: str | None

    __slots__ = (
        "__dict__",
        "_cancelled_through",
        "_failure",
        "_id",
        "arguments",
        "attempt",
        "context",
        "decoded",
        "ran",
        "registry",
        "result",
        "started",
        "timeout",
        "tool",
    )

    #: The dict the registry decoded from JSON text that holds only JSON values within the
    #: registry's limits (no NaN, nesting bounded), so validation need not walk it; else None.
    #: (A pre-validate hook replaces ``arguments``, never changes the dict in place.)
    decoded: dict[str, Any] | None
    timeout: float | None
    #: The final error, set as the pipeline ends (the registry raises or returns it). A slot:
    #: a refusal that wrote it into a ``__dict__`` would pay for making the dict.
    _failure: ToolError | None
    idempotency_key: str | None = None
    deadline: float | None = None
    total_deadline: float | None = None
    runner: Runner | None = None
    lingering: Lingering | None = None
    decision: Retry | Outcome | None = None
    _state: dict[str, Any] | None = None
    _cancelled_through: int  # the last attempt cancelled (0: none); read before every tool starts
    _progress: ProgressCallback | None = None
    _cancels: int = 0  # cancel() calls (a class default until one): a retry's wait compares them
    _refusing: bool = False  # refused before admission: on_error may translate the error, not retry or recover
    _closing: bool = False  # the core closed the call's steps: a GeneratorExit there is the core's, not a hook's

    def __init__(
        self,
        registry: ToolRegistry,
        tool: Tool,
        arguments: Any,
        context: Mapping[str, Any] | None,
        call_id: str | None,
        idempotency_key: str | None = None,
        started: float = 0.0,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.registry = registry
        self.tool = tool
        self.arguments = arguments
        self.context: Mapping[str, Any] = _EMPTY if context is None else context
        self._id = call_id  # generated when first read
        self.started = started
        self.attempt = 1
        self.ran = False
        self._cancelled_through = 0
        self.result: Any = None
        self.decoded = self.timeout = self._failure = None
        if idempotency_key is not None:
            self.idempotency_key = idempotency_key
        if progress is not None:
            self._progress = progress_callback(progress)

    @property
    def call_id(self) -> str:
        """A process-unique id (``<random prefix>-<n>``) unless the caller gave one."""
        if self._id is None:
            self._id = _PREFIX + str(next(_ids))  # as new_call_id
        return self._id

    @property
    def attempts(self) -> int:
        """The attempts this call made, as :attr:`CallResult.attempts` reports them: the runs of
        its tool, at least 1 (a retry refused before the tool ran again, by the rate limit or the
        total timeout, is not one); :attr:`attempt` is the number of the current one."""
        return self.attempt if self.ran or self.attempt == 1 else self.attempt - 1

    @property
    def state(self) -> dict[str, Any]:
        """Per-call data of the plugins, keyed ``"<plugin>.<what>"``; created on first use."""
        if self._state is None:
            self._state = {}
        return self._state

    def peek(self, key: str, default: Any = None) -> Any:
        """``state.get(key, default)`` without creating the state (cheap on calls that have none)."""
        return default if self._state is None else self._state.get(key, default)

    def take(self, key: str, default: Any = None) -> Any:
        """``state.pop(key, default)`` without creating the state."""
        return default if self._state is None else self._state.pop(key, default)

    @property
    def cancelled(self) -> bool:
        """True once the caller stopped waiting for this attempt (its timeout, a cancelled task): stop early.

        Per attempt: a tool abandoned at its timeout still reads True, while the retry
        that follows it starts with False.
        """
        through = self._cancelled_through
        if not through:
            return False
        running = _ATTEMPT.get()
        return (running[1] if running is not None and running[0] is self else self.attempt) <= through

    def cancel(self) -> None:
        """Mark the call's current attempt as abandoned; cooperative tools check :attr:`cancelled`."""
        self._cancelled_through = self.attempt
        self._cancels += 1

    def _bind_attempt(self, context: contextvars.Context) -> None:
        """Make ``context`` (a worker thread's, for this attempt's tool) read :attr:`cancelled` for this attempt."""
        context.run(_ATTEMPT.set, (self, self.attempt))

    def remaining(self, *, total: bool = False) -> float | None:
        """Seconds until ``deadline`` (with ``total``: ``total_deadline``, the whole call's) on the registry's
        clock (None: no deadline). A deadline that is no number is the :class:`~harness_one.PluginError` of
        the hook that set it, which this raises."""
        deadline = self.total_deadline if total else self.deadline
        if deadline is None:
            return None
        if type(deadline) is not float:
            from ._registry import clock_value

            deadline = clock_value(self, "total_deadline" if total else "deadline")
        return deadline - self.registry.clock.now()

    @property
    def wants_progress(self) -> bool:
        """Whether the caller listens for progress (passed an ``on_progress``): a tool need not work out reports
        nobody reads, and an imported MCP tool asks its server for progress only then."""
        return self._progress is not None

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the caller how far the tool got (an MCP client that asked for progress sees it).

        Calls the caller's ``on_progress`` in this thread (the tool's). Does nothing when the caller
        passed none, or once this attempt was abandoned (its timeout, a cancelled call): the caller
        has its answer then. A failing callback is ignored.
        """
        report = self._progress
        if report is not None and not (self._cancelled_through and self.cancelled):
            with contextlib.suppress(Exception):  # the caller's problem must not fail the tool
                report(progress, total, message)

    def __repr__(self) -> str:
        return f"<Call {self.tool.name} id={self.call_id} attempt={self.attempt}>"


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished result that a hook supplies instead of running the tool.

    Returned from pre-call (e.g. a replayed idempotent result) or from on-error (to recover
    or to translate the error). Exactly one of ``value`` and ``error`` is meaningful.
    """

    value: Any = None
    error: ToolError | None = None

    @classmethod
    def success(cls, value: Any) -> Outcome:
        return cls(value=value)

    @classmethod
    def failure(cls, error: ToolError) -> Outcome:
        """The call fails with ``error``, a :class:`ToolError` (anything else is refused here, naming it)."""
        if not isinstance(error, ToolError):
            raise TypeError(
                f"Outcome.failure takes a ToolError, not {type(error).__name__}: wrap another exception in a ToolError "
                "(ToolExecutionError(exc, tool=call.tool.name) says the tool failed)"
            )
        return cls(error=error)


class Await:
    """A hook's answer that needs I/O (a Redis round trip): the core fetches it, blocking or awaiting.

    ``harness_pre_call``, ``harness_post_call`` and ``harness_on_error`` may return
    ``Await(sync, aio)`` instead of their answer. Under ``call``/``try_call`` the core calls
    ``sync()``; under ``acall``/``atry_call`` it awaits ``aio()``, so the event loop is never
    blocked. The value either returns is taken as the hook's answer (an ``Outcome``, a
    ``Retry`` or ``None``; for post-call only ``None``, any other is a ``PluginError``), and an exception either raises is the
    hook's exception. The next hook runs only after it. A cancelled ``acall`` still awaits
    ``aio()`` while it unwinds; cancelled again meanwhile, it calls ``sync()`` for the rest.
    """

    __slots__ = ("aio", "sync", "value")

    def __init__(self, sync: Callable[[], Any], aio: Callable[[], Awaitable[Any]]) -> None:
        self.sync = sync
        self.aio = aio
        self.value: Any = None

    def __repr__(self) -> str:
        return f"Await({self.sync!r}, {self.aio!r})"


@dataclass(frozen=True, slots=True)
class Retry:
    """Returned from on-error: run the call again after ``delay`` seconds."""

    delay: float = 0.0


class CallResult(NamedTuple):
    """What :meth:`ToolRegistry.try_call` returns: never raises for a :class:`ToolError`.

    An immutable record (a named tuple: built at C speed, as every ``try_call`` builds one).
    ``ran`` says whether the tool ran for this call: False when a plugin answered without
    running it (an idempotent replay, a cache hit) or the call was refused before its tool
    started, so nothing the tool does happened for it.
    """

    ok: bool
    value: Any
    error: ToolError | None
    tool: str
    call_id: str
    duration: float
    attempts: int
    ran: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON answer agent loops send back: ``{"ok", "result"}`` or ``{"ok", "error"}``.

        Always JSON data: ``result`` is the value as :meth:`for_model` writes it (a NaN as ``"NaN"``, a
        datetime as its ISO text, a pydantic model or a dataclass as an object, ...), the value itself
        when it is JSON already.
        """
        if self.ok:
            from ._render import json_data

            return {"ok": True, "result": json_data(self.value), "call_id": self.call_id}
        assert self.error is not None
        return {"ok": False, "error": self.error.to_dict(), "call_id": self.call_id}

    def for_model(self, shown: str | None = None) -> str:
        """Text for the model: the result as JSON, or ``Error: <message>``. ``shown``: the name the model was shown
        for the tool where it is not the registry's (an adapter's ``name=``): the error names the tool so
        (:func:`~harness_one._errors.model_message`)."""
        if not self.ok:
            from ._errors import model_message

            assert self.error is not None
            return f"Error: {model_message(self.error, shown)}"  # (cut late: a subclass may write its message late)
        from ._render import render_value

        return render_value(self.value)
