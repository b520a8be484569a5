"""The ``logging`` plugin: one structured event per finished call, one per retried attempt."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from harness_one import Call, Retry, ToolError, hookimpl

__all__ = ["SECRET_KEYS", "LoggingPlugin", "redact"]

SECRET_KEYS = (
    "password",
    "passwd",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "secret",
    "cookie",
    "credential",
    "private_key",
)
REDACTED = "[REDACTED]"


def redact(value: Any, secret_keys: Iterable[str] = SECRET_KEYS, _depth: int = 0) -> Any:
    """A copy of ``value`` with every secret-looking key's value replaced by ``[REDACTED]``."""
    keys = tuple(k.lower() for k in secret_keys)
    if _depth > 32:
        return "..."
    if isinstance(value, Mapping):
        return {
            k: REDACTED if any(s in str(k).lower().replace("-", "_") for s in keys) else redact(v, keys, _depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v, keys, _depth + 1) for v in value]
    return value


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, (str, bytes, list, dict, tuple)):
        return len(value)
    return 1


class LoggingPlugin:
    """Emits ``tool_call`` events (and ``tool_call_retry`` for attempts that will be retried).

    Fields: tool, call_id, attempt, outcome (``ok``/``error``/``retry``), error_type,
    duration_ms, arg_keys, result_size; ``arguments`` (redacted) only with
    ``log_arguments=True``. Uses structlog when the application configured it, else the
    stdlib ``harness_one`` logger; the library never configures logging itself.

    Args:
        level: the level of the events (default INFO).
        log_arguments: include argument values, with secret-looking keys redacted.
        secret_keys: substrings that mark a key as secret.
    """

    name = "logging"
    order = 95

    def __init__(
        self, *, level: int = logging.INFO, log_arguments: bool = False, secret_keys: Iterable[str] = SECRET_KEYS
    ) -> None:
        self.level = level
        self.log_arguments = log_arguments
        self.secret_keys = tuple(secret_keys)
        self._stdlib = logging.getLogger("harness_one.calls")

    def _sink(self) -> bool | None:
        """True: structlog (the application configured it); False: stdlib; None: nobody listens at this level."""
        if structlog.is_configured():
            return True
        return False if self._stdlib.isEnabledFor(self.level) else None

    def _emit(self, to_structlog: bool, event: str, call: Call, outcome: str, **extra: Any) -> None:
        fields: dict[str, Any] = {
            "tool": call.tool.name,
            "call_id": call.call_id,
            "attempt": call.attempt,
            "outcome": outcome,
            "duration_ms": round((time.perf_counter() - call.started) * 1000, 3),
            "arg_keys": sorted(call.arguments) if isinstance(call.arguments, dict) else [],
            **extra,
        }
        if self.log_arguments:
            fields["arguments"] = redact(call.arguments, self.secret_keys)
        if to_structlog:
            structlog.get_logger("harness_one.calls").log(self.level, event, **fields)
        else:
            detail = " ".join(f"{k}={v!r}" for k, v in fields.items())
            self._stdlib.log(self.level, "%s %s", event, detail, extra={"harness_one": fields})

    @hookimpl(trylast=True)
    def harness_post_call(self, call: Call) -> None:
        sink = self._sink()
        if sink is not None:
            self._emit(sink, "tool_call", call, "ok", result_size=_size(call.result))

    @hookimpl(trylast=True)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        sink = self._sink()
        if sink is None:
            return
        retrying = type(call.state.get("decision")) is Retry
        extra: dict[str, Any] = {"error_type": type(error).__name__}
        if isinstance(error, ToolError):
            extra["error"] = error.message.splitlines()[0]
        self._emit(sink, "tool_call_retry" if retrying else "tool_call", call, "retry" if retrying else "error", **extra)
