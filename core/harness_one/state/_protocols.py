"""The backend contracts (checked for every backend by ``harness_one.testing``)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["IdempotencyStore", "RateLimitBackend", "Record"]


@runtime_checkable
class RateLimitBackend(Protocol):
    """Where token buckets live.

    ``acquire`` takes ``cost`` tokens from the bucket ``key`` (``rate`` tokens per second,
    ``burst`` capacity, full when new) at time ``now`` and answers 0.0 when allowed, or the
    seconds until the tokens will be there. A refused call takes nothing.
    """

    def acquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float: ...


@dataclass
class Record:
    """What an idempotency store keeps per (scope, key): ``running`` until the outcome is ``done``.

    ``error`` is the failure's :meth:`ToolError.to_dict <harness_one.ToolError.to_dict>`,
    rebuilt with :meth:`ToolError.from_dict <harness_one.ToolError.from_dict>` on replay.
    """

    fingerprint: str
    state: str
    expires: float
    ok: bool = False
    value: Any = None
    error: dict[str, Any] | None = None


@runtime_checkable
class IdempotencyStore(Protocol):
    """Where idempotency records live. ``begin`` is atomic: exactly one caller gets ``None``."""

    def begin(self, scope: str, key: str, fingerprint: str, now: float, lease: float) -> Record | None:
        """Return the live record for (scope, key), or create a ``running`` one (until ``now + lease``) and return None."""
        ...

    def renew(self, scope: str, key: str, now: float, lease: float) -> bool:
        """Extend a ``running`` record's lease to ``now + lease``; False if it is gone or no longer running."""
        ...

    def finish(self, scope: str, key: str, record: Record) -> None:
        """Store the outcome (``record.state == "done"``)."""
        ...

    def release(self, scope: str, key: str) -> None:
        """Forget the key (the call produced no outcome to keep)."""
        ...
