"""The one log sink: structlog when the application configured it, else stdlib ``logging``.

The library never configures logging. structlog is never imported here: if the application
has not imported it, it cannot have configured it.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = ["log_enabled", "log_enabled_for", "log_event", "log_gated"]

A = TypeVar("A")
B = TypeVar("B")
_ONE: Any = object()  # log_gated's hook was called with one argument

_loggers: dict[str, logging.Logger] = {}
_checks: dict[str, Callable[[int], bool]] = {}
_modules = sys.modules
# structlog's level check per logger, with the configuration it was made for (its wrapper class and logger factory)
_structlog_checks: dict[str, tuple[tuple[Any, Any], Callable[[int], Any] | None]] = {}
# A level's method on a structlog bound logger: every wrapper class has these (the generic ``structlog.BoundLogger``
# by its proxy to the logger), not all a ``log(level, ...)`` that takes any level; a level between two goes as the
# higher one (25: warning), which every filter that keeps the level keeps too
_STRUCTLOG_METHODS = {10: "debug", 20: "info", 30: "warning", 40: "error", 50: "critical"}


def _structlog_method(level: int) -> str:
    """The name of the structlog method that logs at ``level``: its own, else the nearest standard level's above
    (a logger kept at 25 drops what ``info`` sends, and keeps what ``warning`` does); past 50, ``critical``."""
    name = _STRUCTLOG_METHODS.get(level)
    if name is None:
        name = _STRUCTLOG_METHODS[min((known for known in _STRUCTLOG_METHODS if known >= level), default=50)]
    return name


def _stdlib(name: str) -> logging.Logger:
    found = _loggers.get(name)
    if found is None:
        found = _loggers[name] = logging.getLogger(name)
    return found


def _structlog() -> Any:
    module = sys.modules.get("structlog")
    return module if module is not None and module.is_configured() else None


def _structlog_enabled(structlog: Any, logger: str, level: int) -> bool:
    """Whether the application's structlog configuration keeps an event at ``level`` on ``logger``: its bound
    logger's ``is_enabled_for`` (a ``make_filtering_bound_logger`` or ``structlog.stdlib.BoundLogger`` has one),
    found once per configuration on its type (the generic ``structlog.BoundLogger`` proxies any other name to its
    logger, as an event through the processors); True for a logger without one, or whose check raises."""
    config = structlog.get_config()
    made_for = (config["wrapper_class"], config["logger_factory"])
    found = _structlog_checks.get(logger)
    if found is None or found[0] != made_for:
        try:
            bound = structlog.get_logger(logger).bind()
            check = bound.is_enabled_for if callable(getattr(type(bound), "is_enabled_for", None)) else None
        except Exception:  # a logger factory that fails: log_event reports it when an event is emitted
            check = None
        found = _structlog_checks[logger] = (made_for, check)
    check = found[1]
    if check is None:
        return True
    try:
        return bool(check(level))
    except Exception:
        return True


def log_enabled(level: int, logger: str = "harness_one") -> bool:
    """Whether an event at ``level`` on ``logger`` would go anywhere (check before building fields).

    With structlog configured by the application, its bound logger's level check
    (``is_enabled_for``, where it has one) answers; otherwise the stdlib logger's."""
    return (_checks.get(logger) or log_enabled_for(logger))(level)


def log_enabled_for(logger: str) -> Callable[[int], bool]:
    """``log_enabled`` for one logger, as a function of the level: the per-call path's form."""
    found = _checks.get(logger)
    if found is not None:
        return found
    target = _stdlib(logger)
    # The stdlib's own answers: ``isEnabledFor`` caches them here, and clears (never replaces)
    # this dict whenever a level changes or ``logging.disable`` is called.
    cache: dict[int, bool] = getattr(target, "_cache", {})

    def enabled(level: int) -> bool:
        module = _modules.get("structlog")
        if module is not None and module.is_configured():  # the events go to structlog: its level check answers
            return _structlog_enabled(module, logger, level)
        if target.disabled:
            return False
        answer = cache.get(level)
        return bool(answer or (answer is None and target.isEnabledFor(level)))

    return _checks.setdefault(logger, enabled)


@overload
def log_gated(logger: str, level: int, emit: Callable[[A], object]) -> Callable[[A], None]: ...


@overload
def log_gated(logger: str, level: int, emit: Callable[[A, B], object]) -> Callable[[A, B], None]: ...


def log_gated(logger: str, level: int, emit: Callable[..., object]) -> Callable[..., None]:
    """``emit`` (of a hook's one or two arguments), called only when an event at ``level`` on ``logger`` would go anywhere.

    The answer a hook most often gets, no one listens, costs two dict reads in the hook's own
    frame (the stdlib's cached "no" for ``level``, and structlog not imported), not a call of
    :func:`log_enabled_for`'s check; any other case asks that check.
    """
    enabled = log_enabled_for(logger)
    cache: dict[int, bool] = getattr(_stdlib(logger), "_cache", {})  # as in log_enabled_for

    def gated(first: Any, second: Any = _ONE) -> None:  # fixed arguments: no tuple nor dict made per call
        if cache.get(level) is False and _modules.get("structlog") is None:
            return
        if enabled(level):
            if second is _ONE:
                emit(first)
            else:
                emit(first, second)

    return gated


def log_event(level: int, event: str, *, logger: str = "harness_one", **fields: Any) -> None:
    """Emit ``event`` with ``fields`` at ``level``; never raises.

    With structlog configured by the application, a structlog event with the fields as
    key-value pairs, sent by the level's method (``info``, ``warning``: a level between two by the higher one's);
    otherwise a stdlib record on ``logger`` whose message is
    ``event key=value ...`` and whose ``harness_one`` attribute holds the fields. An exception
    raised by the application's handlers, filters or structlog processors is counted and the
    first one shown on stderr (unless ``logging.raiseExceptions`` is false), as the stdlib shows
    a handler's error: a failing log sink never fails a call whose tool has already run.
    """
    try:
        structlog = _structlog()
        if structlog is not None:
            getattr(structlog.get_logger(logger), _structlog_method(level))(event, **fields)
            return
        target = _stdlib(logger)
        if target.isEnabledFor(level):
            detail = " ".join(f"{k}={_short_repr(v)}" for k, v in fields.items())
            target.log(level, "%s %s", event, detail, extra={"harness_one": fields})
    except Exception:
        _dropped(event, logger)


_failures = 0  # events lost to an exception of the application's handlers, filters or processors
_failures_lock = threading.Lock()


def _dropped(event: str, logger: str) -> None:
    """Count an event lost to the application's logging; show the first one (with ``logging.raiseExceptions``, as the stdlib does)."""
    global _failures
    with _failures_lock:
        _failures += 1
        first = _failures == 1
    stream = sys.stderr
    if first and logging.raiseExceptions and stream is not None:
        try:
            stream.write(
                f"--- harness_one: the log event {event!r} on {logger!r} failed in the application's logging"
                " (a handler, filter or structlog processor raised); the call goes on, and later failures"
                " are only counted ---\n"
            )
            # The sink's own error alone: an event logged while a tool's exception is handled would chain
            # that exception, whose text is unmasked (the event's fields are masked; it is not).
            traceback.print_exc(file=stream, chain=False)
        except Exception:  # a closed or broken stderr
            pass


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # e.g. an int past the int-to-text limit
        text = f"<{type(value).__name__}: {type(exc).__name__}>"
    return text if len(text) <= 500 else text[:497] + "..."
