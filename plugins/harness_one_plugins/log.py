"""The ``logging`` plugin: one structured event per finished call, one per retried attempt."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from harness_one import (
    SECRET_KEYS,
    Call,
    Outcome,
    Redactor,
    Retry,
    ToolCancelled,
    ToolError,
    applies_to,
    hookimpl,
    log_enabled_for,
    log_event,
    log_gated,
    per_tool,
    redact,
)

from ._options import flag
from ._text import arguments_shown, holding

__all__ = ["SECRET_KEYS", "LoggingPlugin", "redact"]

_LOGGER = "harness_one.calls"
_MAX_KEYS = 64  # argument names logged per event; the rest are counted
#: In ``call.state``: ``_OK`` once the call's success is logged (nothing more is), else the attempt whose error was.
_LOGGED = "logging.logged"
_OK = "ok"


#: The sized types, each with its own length (a subclass's ``__len__`` may raise after the tool ran).
_LENGTHS: tuple[tuple[type[Any], Callable[[Any], int]], ...] = tuple(
    (kind, kind.__len__) for kind in (str, bytes, list, dict, tuple)
)


def _size(value: Any) -> int:
    if value is None:
        return 0
    for kind, length in _LENGTHS:
        if isinstance(value, kind):
            return length(value)
    return 1


class LoggingPlugin:
    """Emits ``tool_call`` events (and ``tool_call_retry`` for attempts that will be retried).

    Fields: tool, call_id, attempt, outcome (``ok``/``error``/``retry``/``wait``), error_type, error,
    duration_ms, arg_keys, result_size; ``arguments`` (redacted, about 16,384 characters at most)
    only with ``log_arguments=True``. The call id and argument names are redacted and cut at 200
    characters. Events go to structlog when the application configured it, else
    to the stdlib ``harness_one.calls`` logger; the library never configures logging itself.

    Redaction (``harness_one.Redactor``): values under secret-looking keys (any case or
    separator: ``api_key``, ``apiKey``, ``API-KEY``), at any depth of dicts, lists and tuples;
    the user-info of URLs in text; any of ``secret_values`` wherever it appears; and, in the arguments and the
    error, any text the call's arguments or context hold under a secret key (:meth:`harness_one.Redactor.held`).

    Args:
        level: the level of the events (default INFO).
        log_arguments: include argument values, redacted.
        secret_keys: the key names that mark a secret (default :data:`harness_one.SECRET_KEYS`).
        extra_secret_keys: key names added to ``secret_keys``.
        secret_values: exact strings (API keys, passwords) to mask in any logged text.
    """

    name = "logging"
    order = 95

    def __init__(
        self,
        *,
        level: int | str = logging.INFO,
        log_arguments: bool = False,
        secret_keys: Iterable[str] = SECRET_KEYS,
        extra_secret_keys: Iterable[str] = (),
        secret_values: Iterable[str] = (),
    ) -> None:
        self.level = logging.getLevelName(level.upper()) if isinstance(level, str) else level
        if not isinstance(self.level, int):
            raise ValueError(f"unknown log level {level!r}")
        self.log_arguments = flag(log_arguments, "logging log_arguments")
        self._enabled = log_enabled_for(_LOGGER)
        # What every tool's plan calls: the events behind the check, with the level bound (the
        # common answer, no one listens, taken in the hook's own frame).
        self._post_call = log_gated(_LOGGER, self.level, self._succeeded)
        self._on_error = log_gated(_LOGGER, self.level, self._failed)
        self._on_decision = log_gated(_LOGGER, self.level, self._settled)
        self.redactor = Redactor(secret_keys, extra_keys=extra_secret_keys, values=secret_values)

    def _emit(self, event: str, call: Call, outcome: str, error: BaseException | None = None, **extra: Any) -> None:
        """Log ``event``; with ``error`` (a ToolError), its first line as ``error``. Where the event shows the arguments
        or an error, what the call's arguments or context hold under a secret key is masked wherever it stands: in
        them, in the arguments' names and in the error (one walk of them; none for an event that shows neither)."""
        args = call.arguments
        shows = self.log_arguments or isinstance(error, ToolError)
        redactor = holding(self.redactor, args, call.context) if shows else self.redactor
        if error is not None:
            extra["error_type"] = type(error).__name__
        if isinstance(error, ToolError):
            extra["error"] = _first_line(redactor, error)
        fields: dict[str, Any] = {
            "tool": call.tool.name,
            "call_id": self.redactor.key(call.call_id),  # masked and cut at 200 characters, as argument names
            "attempt": call.attempt,
            "outcome": outcome,
            "duration_ms": round((time.perf_counter() - call.started) * 1000, 3),
            "arg_keys": sorted(map(redactor.key, itertools.islice(args, _MAX_KEYS))) if isinstance(args, dict) else [],
            **extra,
        }
        if isinstance(args, dict) and len(args) > _MAX_KEYS:  # a flood of keys makes no flood of log
            fields["arg_keys_omitted"] = len(args) - _MAX_KEYS
        if self.log_arguments:
            fields["arguments"] = arguments_shown(redactor, args)
        log_event(self.level, event, logger=_LOGGER, **fields)

    def _succeeded(self, call: Call) -> None:
        if call.peek(_LOGGED) is _OK:
            return  # a retry after a later post_call hook failed: the call was logged
        call.state[_LOGGED] = _OK  # (a later post_call hook's failure logs nothing more)
        self._emit("tool_call", call, "ok", result_size=_size(call.result))

    def _failed(self, call: Call, error: BaseException) -> None:
        """The error stands (no decision): its event. A decision is logged by :meth:`_settled`, once final."""
        logged = call.peek(_LOGGED)
        if (call.decision is not None and not isinstance(error, ToolCancelled)) or logged is _OK or logged == call.attempt:
            return
        call.state[_LOGGED] = call.attempt  # a decision a later on_error hook takes on this attempt is not logged again
        self._error(call, error)

    def _settled(self, call: Call, error: BaseException) -> None:
        """A decision, final (after every on_error hook, the output limit's included): a retry, or a wait when the
        attempt's tool never ran (a rate limit's refusal waited out); with an ``Outcome``, a success when it
        recovered, else the translated error (what the caller gets)."""
        decision = call.decision
        logged = call.peek(_LOGGED)
        if isinstance(error, ToolCancelled) or logged is _OK or logged == call.attempt:
            return  # logged by _failed (this attempt's error), or the call's success was
        if type(decision) is Retry:
            self._emit("tool_call_retry", call, "retry" if call.ran else "wait", error)
            return
        if type(decision) is Outcome:
            if decision.error is None:
                self._emit("tool_call", call, "ok", result_size=_size(decision.value))
                return
            error = decision.error
        self._error(call, error)

    def _error(self, call: Call, error: BaseException) -> None:
        self._emit("tool_call", call, "error", error)

    @hookimpl(trylast=True)
    @per_tool(lambda plugin, tool: plugin._post_call)
    def harness_post_call(self, call: Call) -> None:
        self._post_call(call)

    @hookimpl(trylast=True)
    @per_tool(lambda plugin, tool: plugin._on_error)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self._on_error(call, error)

    @hookimpl(trylast=True, specname="harness_on_error")
    @applies_to(after_decision=True)
    @per_tool(lambda plugin, tool: plugin._on_decision)
    def _decided(self, call: Call, error: BaseException) -> None:
        self._on_decision(call, error)

    @hookimpl(trylast=True)
    def harness_call_refused(self, name: str, error: ToolError) -> None:
        """A request refused before it became a call: its ``tool_call`` event, ``outcome`` ``refused``."""
        if not self._enabled(self.level):
            return
        fields = {
            "tool": self.redactor.key(name),  # a model's made-up name: masked and cut like a key
            "call_id": self.redactor.key(error.call_id or ""),
            "attempt": 0,
            "outcome": "refused",
            "error_type": type(error).__name__,
            "error": _first_line(self.redactor, error),
        }
        log_event(self.level, "tool_call", logger=_LOGGER, **fields)


def _first_line(redactor: Redactor, error: ToolError) -> str:
    """The first line of ``error``'s message, masked by ``redactor`` (a call's: :func:`holding`'s)."""
    return redactor.text(error.message.splitlines()[0] if error.message else "")
