"""The ``idempotency`` plugin: the first outcome of (tool, idempotency key) is stored and replayed.

Semantics follow Stripe and the IETF Idempotency-Key draft: the same key with different
arguments is an error; the same key while the first call still runs is a conflict (or a wait);
records expire; nothing is stored for arguments that fail validation. An in-progress record
holds the key for a lease that is renewed while the call runs, so a long call never runs
twice for one key while its first caller is alive, and a crashed caller frees the key when
its lease runs out.
"""

from __future__ import annotations

import threading
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
from harness_one.state import IdempotencyStore, MemoryStore, Record, SQLiteStore, WallClock

__all__ = ["IdempotencyPlugin", "IdempotencyStore", "MemoryStore", "Record", "SQLiteStore", "WallClock", "fingerprint"]

_OWNED = "idempotency.owned"
_WAITED = "idempotency.waited"


class _Renewer:
    """One daemon thread that renews the leases of the calls running now, every ``lease / 3``."""

    def __init__(self, plugin: IdempotencyPlugin) -> None:
        self._plugin = plugin
        self._held: dict[int, tuple[str, str]] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def hold(self, call: Call) -> None:
        assert call.idempotency_key is not None
        with self._wake:
            self._held[id(call)] = (call.tool.name, call.idempotency_key)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="harness-one-idempotency-leases", daemon=True)
                self._thread.start()

    def drop(self, call: Call) -> None:
        with self._wake:
            self._held.pop(id(call), None)

    def _run(self) -> None:
        plugin = self._plugin
        while True:
            with self._wake:
                self._wake.wait(plugin.lease / 3)
                held = list(self._held.values())
                if not held:
                    self._thread = None
                    return
            now = plugin.clock.now()
            for scope, key in held:
                try:
                    plugin.store.renew(scope, key, now, plugin.lease)
                except Exception as exc:  # the store is unreachable for now: the lease may lapse
                    log_event(30, "idempotency lease not renewed", tool=scope, error=f"{type(exc).__name__}: {exc}")


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
    ) -> None:
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
        self._leases = _Renewer(self)

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
        found = self.store.begin(call.tool.name, key, digest, self.clock.now(), self.lease)
        if found is None:
            call.state[_OWNED] = digest
            self._leases.hold(call)
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
        self._leases.drop(call)
        assert call.idempotency_key is not None
        stored_error = None if error is None else {**error.to_dict(), "call_id": None}
        record = Record(call.take(_OWNED), "done", self.clock.now() + self.ttl, ok, value, stored_error)
        try:
            self.store.finish(call.tool.name, call.idempotency_key, record)
            self.stored += 1
        except (TypeError, ValueError) as exc:
            self.store.release(call.tool.name, call.idempotency_key)
            log_event(30, "idempotent result not stored", tool=call.tool.name, error=str(exc))

    def _release(self, call: Call) -> None:
        self._leases.drop(call)
        call.take(_OWNED)
        assert call.idempotency_key is not None
        self.store.release(call.tool.name, call.idempotency_key)

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
        return {"replays": self.replays, "stored": self.stored}
