"""The ``idempotency`` plugin: the first outcome of (tool, idempotency key) is stored and replayed.

Semantics follow Stripe and the IETF Idempotency-Key draft: the same key with different
arguments is an error; the same key while the first call still runs is a conflict (or a wait);
records expire; nothing is stored for arguments that fail validation; an in-progress record
has its own, shorter expiry (a lease), so a crashed worker does not lock a key forever.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import harness_one
from harness_one import (
    Call,
    Clock,
    IdempotencyConflict,
    IdempotencyKeyMismatch,
    Outcome,
    Retry,
    ToolArgumentError,
    ToolError,
    ToolRegistry,
    hookimpl,
)
from harness_one._errors import _restore
from harness_one._log import emit

__all__ = ["IdempotencyPlugin", "IdempotencyStore", "MemoryStore", "Record", "SQLiteStore", "WallClock", "fingerprint"]

_OWNED = "idempotency.owned"
_WAITED = "idempotency.waited"


class WallClock:
    """Wall-clock time (``time.time``): records outlive processes, so expiry uses real time."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))

    async def asleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(max(seconds, 0.0))


def fingerprint(arguments: Any) -> str:
    """A stable digest of the (validated) arguments."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Record:
    """What a store keeps per (scope, key): ``running`` until the outcome is ``done``."""

    fingerprint: str
    state: str
    expires: float
    ok: bool = False
    value: Any = None
    error: dict[str, Any] | None = None


@runtime_checkable
class IdempotencyStore(Protocol):
    """Where records live. ``begin`` must be atomic: exactly one caller gets ``None`` (ownership)."""

    def begin(self, scope: str, key: str, fingerprint: str, now: float, lease: float) -> Record | None:
        """Return the live record for (scope, key), or create a ``running`` one and return None."""
        ...

    def finish(self, scope: str, key: str, record: Record) -> None:
        """Store the outcome (``record.state == "done"``)."""
        ...

    def release(self, scope: str, key: str) -> None:
        """Forget the key (the call produced no outcome to keep)."""
        ...


class MemoryStore:
    """Records in a dict, for one process. Values are kept as they are (not copied)."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], Record] = {}
        self._lock = threading.Lock()
        self._ops = 0

    def begin(self, scope: str, key: str, fingerprint: str, now: float, lease: float) -> Record | None:
        with self._lock:
            self._ops += 1
            if self._ops % 1024 == 0:
                for k in [k for k, r in self._records.items() if r.expires <= now]:
                    del self._records[k]
            found = self._records.get((scope, key))
            if found is not None and found.expires > now:
                return found
            self._records[(scope, key)] = Record(fingerprint, "running", now + lease)
            return None

    def finish(self, scope: str, key: str, record: Record) -> None:
        with self._lock:
            self._records[(scope, key)] = record

    def release(self, scope: str, key: str) -> None:
        with self._lock:
            self._records.pop((scope, key), None)

    def __len__(self) -> int:
        return len(self._records)


class SQLiteStore:
    """Records in a SQLite file: survives restarts, safe for several processes on one machine.

    ``begin`` runs in a ``BEGIN IMMEDIATE`` transaction (one writer at a time across
    processes); the file is in WAL mode. Values are stored as JSON, so a replay returns the
    JSON form of the first result (tuples come back as lists); a result that is not JSON is
    not stored (the key is released and a warning logged).
    """

    def __init__(self, path: str | Path, *, timeout: float = 10.0) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes; an OS crash may lose the last records
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS harness_one_idempotency ("
            " scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, state TEXT NOT NULL,"
            " expires REAL NOT NULL, ok INTEGER NOT NULL DEFAULT 0, value TEXT, error TEXT,"
            " PRIMARY KEY (scope, key))"
        )
        self._ops = 0

    def begin(self, scope: str, key: str, fingerprint: str, now: float, lease: float) -> Record | None:
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._ops += 1
                if self._ops % 1024 == 0:
                    conn.execute("DELETE FROM harness_one_idempotency WHERE expires <= ?", (now,))
                row = conn.execute(
                    "SELECT fingerprint, state, expires, ok, value, error FROM harness_one_idempotency WHERE scope = ? AND key = ?",
                    (scope, key),
                ).fetchone()
                if row is not None and row[2] > now:
                    conn.execute("COMMIT")
                    return Record(
                        row[0],
                        row[1],
                        row[2],
                        bool(row[3]),
                        None if row[4] is None else json.loads(row[4]),
                        None if row[5] is None else json.loads(row[5]),
                    )
                conn.execute(
                    "INSERT OR REPLACE INTO harness_one_idempotency (scope, key, fingerprint, state, expires) VALUES (?, ?, ?, 'running', ?)",
                    (scope, key, fingerprint, now + lease),
                )
                conn.execute("COMMIT")
                return None
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def finish(self, scope: str, key: str, record: Record) -> None:
        value = json.dumps(record.value)  # TypeError for non-JSON values: the plugin releases the key
        error = None if record.error is None else json.dumps(record.error)
        with self._lock:
            self._conn.execute(
                "UPDATE harness_one_idempotency SET state = ?, expires = ?, ok = ?, value = ?, error = ? WHERE scope = ? AND key = ?",
                (record.state, record.expires, int(record.ok), value, error, scope, key),
            )

    def release(self, scope: str, key: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM harness_one_idempotency WHERE scope = ? AND key = ?", (scope, key))

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _error_state(error: ToolError) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for name, value in vars(error).items():
        kept = type(value).__name__ if name == "cause" and isinstance(value, BaseException) else value
        if kept is None or isinstance(kept, (str, int, float, bool)):
            state[name] = kept
    return {"class": type(error).__name__, "state": state}


def _rebuild(data: dict[str, Any]) -> ToolError:
    cls = getattr(harness_one, str(data.get("class")), ToolError)
    if not (isinstance(cls, type) and issubclass(cls, ToolError)):
        cls = ToolError
    err = _restore(cls, dict(data.get("state") or {}))
    err.call_id = None  # the replaying call's id is filled in
    err.replayed = True  # type: ignore[attr-defined]
    return err


class IdempotencyPlugin:
    """Replays the first outcome of a call made with ``idempotency_key=``.

    Args:
        store: where records live (default: in memory, per registry; :class:`SQLiteStore`
            for several processes or restarts).
        ttl: seconds a finished record is kept (default 24 h).
        lease: seconds an in-progress record holds the key (default 5 min): a worker that
            dies mid-call frees the key after this.
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
        ttl: float = 24 * 3600.0,
        lease: float = 300.0,
        wait: float = 0.0,
        poll: float = 0.02,
        clock: Clock | None = None,
    ) -> None:
        self.store: IdempotencyStore = store if store is not None else MemoryStore()
        self.ttl = ttl
        self.lease = lease
        self.wait = wait
        self.poll = poll
        self.clock: Clock = clock or WallClock()
        self.replays = 0
        self.stored = 0

    @hookimpl(tryfirst=True)
    def harness_pre_call(self, call: Call) -> Outcome | None:
        key = call.idempotency_key
        if key is None or (call._state is not None and _OWNED in call._state):
            return None
        digest = fingerprint(call.arguments)
        found = self.store.begin(call.tool.name, key, digest, self.clock.now(), self.lease)
        if found is None:
            call.state[_OWNED] = digest
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
        return Outcome.failure(_rebuild(found.error or {}))

    def _finish(self, call: Call, ok: bool, value: Any = None, error: ToolError | None = None) -> None:
        record = Record(
            call.state.pop(_OWNED), "done", self.clock.now() + self.ttl, ok, value, None if error is None else _error_state(error)
        )
        assert call.idempotency_key is not None
        try:
            self.store.finish(call.tool.name, call.idempotency_key, record)
            self.stored += 1
        except (TypeError, ValueError) as exc:
            self.store.release(call.tool.name, call.idempotency_key)
            emit(30, "idempotent result not stored", tool=call.tool.name, error=str(exc))

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        if call._state is not None and _OWNED in call._state:
            self._finish(call, True, value=call.result)

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        if isinstance(error, IdempotencyConflict) and not call.ran:
            waited = call.state.get(_WAITED, 0.0)
            if waited + self.poll <= self.wait:
                call.state[_WAITED] = waited + self.poll
                return Retry(self.poll)
            return None
        if call._state is None or _OWNED not in call._state or type(call._state.get("decision")) is Retry:
            return None
        if call.ran and isinstance(error, ToolError) and not isinstance(error, ToolArgumentError):
            self._finish(call, False, error=error)
        else:  # refused before running, or the arguments were wrong: nothing to keep
            call.state.pop(_OWNED)
            assert call.idempotency_key is not None
            self.store.release(call.tool.name, call.idempotency_key)
        return None

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"replays": self.replays, "stored": self.stored}
