"""The ``idempotency`` plugin: the first outcome of (tool, idempotency key) is stored and replayed.

Semantics follow Stripe and the IETF Idempotency-Key draft: the same key with different
arguments is an error; the same key while the first call still runs is a conflict (or a wait);
records expire; nothing is stored for arguments that fail validation. An in-progress record
holds the key for a lease that is renewed while the call runs, so a long call never runs
twice for one key while its first caller is alive, and a crashed caller frees the key when
its lease runs out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness_one import (
    Call,
    Clock,
    IdempotencyConflict,
    IdempotencyKeyMismatch,
    Outcome,
    Retry,
    ToolArgumentError,
    ToolCancelled,
    ToolError,
    ToolRegistry,
    fingerprint,
    hookimpl,
    log_event,
)
from harness_one.state import (
    FailMode,
    IdempotencyStore,
    LeaseKeeper,
    MemoryStore,
    Record,
    SQLiteStore,
    StateUnavailable,
    WallClock,
)

__all__ = ["IdempotencyPlugin", "IdempotencyStore", "MemoryStore", "Record", "SQLiteStore", "WallClock", "fingerprint"]

_OWNED = "idempotency.owned"
_WAITED = "idempotency.waited"


class IdempotencyPlugin:
    """Replays the first outcome of a call made with ``idempotency_key=``.

    Args:
        store: where records live (default: the registry's state: in memory, or the SQLite
            file of a ``sqlite:`` state URL).
        path: a SQLite file to keep records in (instead of ``store``).
        ttl: seconds a finished record is kept (default 24 h).
        lease: seconds an in-progress record holds the key without renewal (default 5 min);
            it is renewed every ``lease / 3`` while the call runs.
        wait: seconds a call waits for an in-progress call with the same key to finish
            (0: fail at once with :class:`IdempotencyConflict`).
        poll: seconds between checks while waiting.
        clock: time for expiry (default: wall-clock time, comparable across processes).
        on_state_error: when a shared store (Redis) does not answer at admission:
            ``"closed"`` (default: the call fails with
            :class:`~harness_one.state.StateUnavailable`, so a key never runs twice) or
            ``"open"`` (the call runs without the key's protection, with a warning). An
            outcome that cannot be stored is logged; the key stays held until its lease ends.
    """

    name = "idempotency"
    order = 60

    def __init__(
        self,
        *,
        store: IdempotencyStore | None = None,
        path: str | Path | None = None,
        ttl: float = 24 * 3600.0,
        lease: float = 300.0,
        wait: float = 0.0,
        poll: float = 0.02,
        clock: Clock | None = None,
        on_state_error: str = "closed",
    ) -> None:
        self.fail = FailMode("idempotency", on_state_error)
        if store is not None and path is not None:
            raise ValueError("give a store or a path, not both")
        if path is not None:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            store = SQLiteStore(Path(path).expanduser())
        self.store: IdempotencyStore = store if store is not None else MemoryStore()
        self._own_store = store is not None
        self.ttl = ttl
        self.lease = lease
        self.wait = wait
        self.poll = poll
        self.clock: Clock = clock or WallClock()
        self.replays = 0
        self.stored = 0
        self._leases = LeaseKeeper("idempotency", lambda: self.lease / 3, self._renew)

    def _renew(self, held: tuple[str, str]) -> None:
        self.store.renew(held[0], held[1], self.clock.now(), self.lease)

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        if not self._own_store:
            self.store = registry.state.idempotency()

    @hookimpl(tryfirst=True)
    def harness_pre_call(self, call: Call) -> Outcome | None:
        key = call.idempotency_key
        if key is None or call.peek(_OWNED) is not None:
            return None
        digest = fingerprint(call.arguments)
        try:
            found = self.store.begin(call.tool.name, key, digest, self.clock.now(), self.lease)
        except StateUnavailable as exc:
            self.fail.handle(exc, call.tool.name, call.call_id, "idempotency key not claimed")
            return None
        if found is None:
            call.state[_OWNED] = digest
            self._leases.hold(id(call), (call.tool.name, key))
            return None
        if found.fingerprint != digest:
            raise IdempotencyKeyMismatch(
                f"Idempotency key '{key}' was already used for tool '{call.tool.name}' with different arguments. "
                "Use a new key for a new request, or repeat the original arguments.",
                tool=call.tool.name,
                call_id=call.call_id,
            )
        if found.state != "done":
            raise IdempotencyConflict(
                f"A call of tool '{call.tool.name}' with idempotency key '{key}' is still running. Retry shortly.",
                retry_after=self.poll,
                tool=call.tool.name,
                call_id=call.call_id,
            )
        self.replays += 1
        if found.ok:
            return Outcome.success(found.value)
        error = ToolError.from_dict(found.error or {})
        error.call_id = None  # the replaying call's id is filled in
        error.replayed = True
        return Outcome.failure(error)

    def _finish(self, call: Call, ok: bool, value: Any = None, error: ToolError | None = None) -> None:
        self._leases.drop(id(call))
        assert call.idempotency_key is not None
        stored_error = None if error is None else {**error.to_dict(), "call_id": None}
        record = Record(call.take(_OWNED), "done", self.clock.now() + self.ttl, ok, value, stored_error)
        try:
            self.store.finish(call.tool.name, call.idempotency_key, record)
            self.stored += 1
        except (TypeError, ValueError) as exc:
            self._release_key(call.tool.name, call.idempotency_key)
            log_event(30, "idempotent result not stored", tool=call.tool.name, error=str(exc))
        except StateUnavailable as exc:  # the caller still gets the outcome; the key is held until its lease ends
            log_event(40, "idempotent result not stored", tool=call.tool.name, error=str(exc))

    def _release_key(self, tool: str, key: str) -> None:
        try:
            self.store.release(tool, key)
        except StateUnavailable as exc:
            self.fail.note(exc, tool, "idempotency key not released; it frees when its lease ends")

    def _release(self, call: Call) -> None:
        self._leases.drop(id(call))
        call.take(_OWNED)
        assert call.idempotency_key is not None
        self._release_key(call.tool.name, call.idempotency_key)

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        if call.peek(_OWNED) is not None:
            self._finish(call, True, value=call.result)

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        if isinstance(error, IdempotencyConflict) and not call.ran:
            waited = call.peek(_WAITED, 0.0)
            if waited + self.poll <= self.wait:
                call.state[_WAITED] = waited + self.poll
                return Retry(self.poll)
            return None
        if call.peek(_OWNED) is None or type(call.decision) is Retry:
            return None
        if call.ran and isinstance(error, ToolError) and not isinstance(error, (ToolArgumentError, ToolCancelled)):
            self._finish(call, False, error=error)
        else:  # refused before running, wrong arguments, or cancelled: nothing to keep
            self._release(call)
        return None

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"replays": self.replays, "stored": self.stored, **self.fail.stats()}
