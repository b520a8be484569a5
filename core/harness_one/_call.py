"""Per-call state handed to every hook, and the decisions hooks can return."""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._errors import ToolError

if TYPE_CHECKING:
    from ._registry import ToolRegistry
    from ._runners import Runner
    from ._tool import Tool

__all__ = ["Call", "CallResult", "Outcome", "Retry", "new_call_id"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_PREFIX = os.urandom(4).hex()
_ids = itertools.count(1)


def new_call_id() -> str:
    """A process-unique call id: a random per-process prefix and a counter."""
    return f"{_PREFIX}-{next(_ids)}"


class Call:
    """One call of one tool, as the hooks see it.

    Plugins read ``tool``, ``arguments``, ``context``, ``call_id``, ``idempotency_key`` and
    ``attempt`` (which counts runs of the tool: a wait for a token does not add one), and
    ``ran`` (whether the function started in this attempt). They may replace ``arguments`` in
    pre-validate and ``result`` in post-call, set ``deadline``/``timeout``/``runner`` in
    pre-call, and keep their own per-call data in ``state``. A tool function that declares a parameter
    annotated ``Call`` receives this object.
    """

    __slots__ = (
        "_cancelled",
        "_id",
        "_state",
        "arguments",
        "attempt",
        "context",
        "deadline",
        "error",
        "idempotency_key",
        "ran",
        "registry",
        "result",
        "runner",
        "started",
        "timeout",
        "tool",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        tool: Tool,
        arguments: Any,
        context: Mapping[str, Any] | None,
        call_id: str | None,
        idempotency_key: str | None,
        started: float,
    ) -> None:
        self.registry = registry
        self.tool = tool
        self.arguments = arguments
        self.context: Mapping[str, Any] = _EMPTY if context is None else context
        self._id: str | int = next(_ids) if call_id is None else call_id
        self.idempotency_key = idempotency_key
        self.started = started
        self.attempt = 1
        self.result: Any = None
        self.error: ToolError | None = None
        self.deadline: float | None = None
        #: Seconds this attempt may run, and how a sync tool is run to enforce it (set by the timeout plugin).
        self.timeout: float | None = None
        self.runner: Runner | None = None
        #: True once the tool function started in the current attempt.
        self.ran = False
        self._state: dict[str, Any] | None = None
        self._cancelled = False

    @property
    def call_id(self) -> str:
        """A process-unique id (``<random prefix>-<n>``) unless the caller gave one."""
        if isinstance(self._id, int):
            self._id = f"{_PREFIX}-{self._id}"
        return self._id

    @property
    def state(self) -> dict[str, Any]:
        """Scratch space for plugins, keyed by plugin name; created on first use."""
        if self._state is None:
            self._state = {}
        return self._state

    @property
    def cancelled(self) -> bool:
        """True once the caller stopped waiting (for example at a timeout): stop early."""
        return self._cancelled

    def remaining(self) -> float | None:
        """Seconds until ``deadline`` on the registry's clock (None: no deadline)."""
        if self.deadline is None:
            return None
        return self.deadline - self.registry.clock.now()

    def cancel(self) -> None:
        """Mark the call as abandoned; cooperative tools check :attr:`cancelled`."""
        self._cancelled = True

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
        return cls(error=error)


@dataclass(frozen=True, slots=True)
class Retry:
    """Returned from on-error: run the call again after ``delay`` seconds."""

    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class CallResult:
    """What :meth:`ToolRegistry.try_call` returns: never raises for a :class:`ToolError`."""

    ok: bool
    value: Any
    error: ToolError | None
    tool: str
    call_id: str
    duration: float
    attempts: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON answer agent loops send back: ``{"ok", "result"}`` or ``{"ok", "error"}``."""
        if self.ok:
            return {"ok": True, "result": self.value, "call_id": self.call_id}
        assert self.error is not None
        return {"ok": False, "error": self.error.to_dict(), "call_id": self.call_id}

    def for_model(self) -> str:
        """Text for the model: the result as JSON, or ``Error: <message>``."""
        if not self.ok:
            assert self.error is not None
            return f"Error: {self.error.message}"
        from ._render import render_value

        return render_value(self.value)
