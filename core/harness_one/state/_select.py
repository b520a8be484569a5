"""A registry's state location, from a URL: which backend each kind of shared state uses."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ._memory import MemoryBuckets, MemoryStore
from ._protocols import IdempotencyStore, RateLimitBackend

__all__ = ["State", "open_state"]


class State:
    """The backends of one registry, created on first use and then shared by its plugins.

    ``url``: ``None`` or ``"memory:"`` (this process), ``"sqlite:///PATH"`` or a plain file
    path (idempotency records in a SQLite file; other state in this process).
    """

    def __init__(self, url: str | None = None) -> None:
        self.url = url
        parsed = urlparse(url or "memory:")
        self.scheme = parsed.scheme or "sqlite"  # a plain path is a SQLite file
        if self.scheme not in ("memory", "sqlite"):
            raise ValueError(f"unknown state URL {url!r}: use 'memory:', 'sqlite:///PATH' or a file path")
        self.path: Path | None = None
        if self.scheme == "sqlite":
            if not parsed.path or parsed.path == "/":
                raise ValueError(f"state URL {url!r} names no file: use 'sqlite:///PATH'")
            self.path = Path(parsed.path).expanduser()
        self._lock = threading.Lock()
        self._made: dict[str, Any] = {}

    def _once(self, what: str, make: Any) -> Any:
        with self._lock:
            found = self._made.get(what)
            if found is None:
                found = self._made[what] = make()
            return found

    def rate_limits(self) -> RateLimitBackend:
        """The token-bucket backend."""
        return self._once("rate_limits", MemoryBuckets)  # type: ignore[no-any-return]

    def idempotency(self) -> IdempotencyStore:
        """The idempotency-record store (SQLite for ``sqlite:`` URLs; opened now, so errors show here)."""
        if self.path is None:
            return self._once("idempotency", MemoryStore)  # type: ignore[no-any-return]
        path = self.path

        def make() -> Any:
            from ._sqlite import SQLiteStore

            path.parent.mkdir(parents=True, exist_ok=True)
            return SQLiteStore(path)

        return self._once("idempotency", make)  # type: ignore[no-any-return]

    def check(self) -> None:
        """Open now what the state needs (the SQLite file), so a bad location fails here, not mid-call."""
        if self.path is not None:
            self.idempotency()

    @property
    def shared(self) -> bool:
        """Whether the state is visible to other processes (False for memory)."""
        return self.scheme != "memory"

    def __repr__(self) -> str:
        return f"State({self.url!r})"


def open_state(url: str | None) -> State:
    """The :class:`State` for ``url`` (``ValueError`` for an unknown scheme)."""
    return State(url)
