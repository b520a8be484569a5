"""Idempotency records in a SQLite file: several processes of one host, and restarts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from .._clock import WallClock
from ._memory import known_moment, moment
from ._protocols import EXPIRES, LEASE, Record, StateUnavailable, outcome_json, positive_seconds, seconds

__all__ = ["SQLiteStore", "WallClock"]

_T = TypeVar("_T")

#: The longest wait SQLite's busy timeout can express (a C int of milliseconds, about 24.8 days).
_MAX_TIMEOUT = (2**31 - 1) / 1000
#: Columns added to a file made before them, with their types: what an older version writes reads as it did.
_ADDED = {"owner": "TEXT", "quoted": "INTEGER NOT NULL DEFAULT 0"}

#: SQLite's primary result codes for a file it cannot open as it is, however long one waits: not a database
#: (NOTADB), damaged (CORRUPT), not there to open (CANTOPEN: a directory, a missing parent, no access). A
#: configuration error, not an outage: no fail mode applies. (Only as the file opens: once open, an error is
#: taken for a passing one, a finished call's outcome not stored rather than its result lost.)
_UNUSABLE = frozenset({sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_CANTOPEN})
_CONFIGURATION = "This is a configuration error, not an outage: no fail mode applies."

#: The deadline of an attempt that waits for nothing (``time.monotonic`` is past it).
_AT_ONCE = -1.0

#: How many claims waiting in threads a store follows (:meth:`SQLiteStore._on_its_way`).
_FOLLOWED = 1024

#: Every store, made fit for a forked child (see :func:`_forked`).
_STORES: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()

#: The stores whose connections :func:`_forking` holds while the process forks.
_HELD: list[SQLiteStore] = []

#: The parent's connections a forked child inherited: kept, never used nor closed (see :func:`_forked`).
_ABANDONED: list[sqlite3.Connection] = []


def _forking() -> None:
    """Before a fork: each store's connection is taken, so no operation (no transaction, whose locks
    the child would inherit as its own, for ever) is in progress as the child is made; an operation
    under way in another thread ends first, within its ``timeout``."""
    for store in list(_STORES):
        if store._lock.acquire(timeout=store.timeout):
            _HELD.append(store)


def _forked_parent() -> None:
    while _HELD:
        _HELD.pop()._lock.release()


def _forked() -> None:
    """In a forked child only the forking thread goes on: each store gets new locks, forgets the claims
    waiting in the parent's threads, and opens its own connection at its next operation. The parent's
    is abandoned: a SQLite connection must not cross a fork, and closing it is a use too (a rollback
    or a checkpoint writes the files the parent still uses), so it stays referenced, never closed."""
    _HELD.clear()
    for store in list(_STORES):
        store._lock = threading.Lock()
        store._waiting_lock = threading.Lock()
        store._waiting = {}
        if store._conn is not None:
            _ABANDONED.append(store._conn)
            store._conn = None


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(before=_forking, after_in_parent=_forked_parent, after_in_child=_forked)


def _unusable(exc: sqlite3.Error, path: str) -> sqlite3.Error:
    """The error to raise for ``exc``, a file SQLite cannot open as it is: its message names the problem and what
    to check, not the path (the message reaches the model; ``where`` names it, as :class:`StateUnavailable`'s)."""
    err = type(exc)(
        f"The SQLite state cannot open its file: {str(exc).rstrip('.')} (the state's path must name a SQLite database"
        f" file this process can read and write, or none yet in a directory it can write). {_CONFIGURATION}"
    )
    err.where = path  # type: ignore[attr-defined]
    return err


def _unopenable(exc: sqlite3.Error, path: str) -> bool:
    """Whether ``exc``, met opening the file at ``path``, says it cannot be opened as it is, however long one waits
    (:data:`_UNUSABLE`): not a database, damaged; for CANTOPEN, only where the path says why (a directory, no
    directory to hold it, no access): out of file descriptors is CANTOPEN too, and passes."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # (an extended code's low byte)
    if code not in _UNUSABLE:
        return False
    if code != sqlite3.SQLITE_CANTOPEN:
        return True
    file = Path(path)
    if file.is_dir() or not file.parent.is_dir():
        return True
    return not os.access(file, os.R_OK | os.W_OK) if file.exists() else not os.access(file.parent, os.W_OK | os.X_OK)


def _write_ahead(conn: sqlite3.Connection, until: float) -> None:
    """Put the file in WAL mode (kept in the file: a file already in it needs no lock). SQLite fails the
    switch at once, without its busy timeout, while another connection holds a lock on the file (several
    processes opening a new file together), so it is tried again, backing off, until ``until``."""
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            left = until - time.monotonic()
            if "locked" not in str(exc) or left <= 0:
                raise
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)


#: The paths SQLite reads as a database in memory, one per connection.
_IN_MEMORY = ("", ":memory:")


def _private(path: str) -> None:
    """Create the database file for its owner only (0o600) if it does not exist yet: it keeps tools' outcomes (values,
    error messages) for a day. SQLite gives its ``-wal`` and ``-shm`` files the same mode; a file that exists keeps its
    own. (Not for ``:memory:`` or a ``file:`` URI; a path SQLite cannot use fails at its connect, as before.)"""
    if path in _IN_MEMORY or path.startswith("file:"):
        return
    with contextlib.suppress(OSError):  # there already (FileExistsError), or a directory that is not there
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


class SQLiteStore:
    """Records in a SQLite file: survives restarts, safe for several processes on one machine.

    ``begin`` runs in a ``BEGIN IMMEDIATE`` transaction (one writer at a time across
    processes); the file is in WAL mode with ``synchronous=NORMAL`` (durable across process
    crashes; an OS crash may lose the last records). Values are stored as JSON, so a replay
    returns the JSON form of the first result (tuples come back as lists); ``finish`` raises
    ``TypeError``/``ValueError`` for a result that is not JSON (the idempotency plugin then
    stores the JSON the model read for it). A file SQLite cannot use now
    (locked by another connection past ``timeout``, full, an I/O error) raises
    :class:`StateUnavailable`, so the plugin's ``on_state_error`` decides, as for Redis; a file it
    cannot open as it is (:data:`_UNUSABLE`: not a database, damaged, a directory) raises the
    ``sqlite3`` error, its message naming the problem (a configuration error: no fail mode).
    The constructor touches no file: the first operation opens it (WAL, the table; then a file
    SQLite cannot open fails that operation as above and the next one tries again), and so does the
    first after :meth:`close`. A claim's ``owner`` and a record's ``quoted`` are columns of its row, added
    to a file made before them the same way. Expired records are deleted by the first ``begin`` after the file
    opens (so each process, however short-lived, sweeps once) and by every 1024th after that.

    ``timeout`` (seconds above 0, at most SQLite's 24.8 days; default 10) bounds each
    operation's wait for the file: the threads of a process share one connection, and a thread
    queued behind another waits only what is left of its own ``timeout``, so every caller gives
    up about ``timeout`` after it asked, however many wait. The ``a...`` twins do the work at
    once when the connection and the file are free, and otherwise wait in a thread
    (``asyncio.to_thread``), their ``timeout`` counted from when they are awaited: ``acall``
    never waits for the file on the event loop. A release (``arelease``, ``release``) of a claim
    still waiting in its thread (its caller cancelled) takes effect too: the claim is not made.

    A forked child opens a connection of its own (the parent's is left unused); a fork waits for
    an operation another thread is making on the store, so the child inherits no transaction.
    """

    def __init__(self, path: str | Path, *, timeout: float = 10.0) -> None:
        self.path = str(path)
        self.timeout = min(positive_seconds(timeout, "the SQLite store's timeout"), _MAX_TIMEOUT)
        self._whole = self._waits = int(self.timeout * 1000)  # SQLite's busy timeout: whole, and as set now (ms)
        self._lock = threading.Lock()
        # Opened by the first operation, not here: a file SQLite cannot use now would fail the
        # constructor (and the plugin's setup, for good) outside the error mapping and the deadline.
        self._conn: sqlite3.Connection | None = None
        self._closed = False  # an in-memory database closed: gone (see close)
        self._missing: tuple[str, ...] = ()  # columns a file made by an older version lacks (owner, quoted)
        self._ops = 0
        self._sweep = False  # the next claim first deletes the expired records (set as the file opens)
        # The owners of claims waiting in threads (oldest first): True once released before the claim came.
        self._waiting: dict[str | None, bool] = {}
        self._waiting_lock = threading.Lock()  # not the connection's: the loop never waits for it
        _STORES.add(self)  # (a forked child opens its own connection)

    @contextmanager
    def _connection(self, deadline: float | None = None, *, claim: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection, one thread at a time, until ``deadline`` (``time.monotonic``; None: ``timeout``
        from now); SQLite's errors as :class:`StateUnavailable` (locked, full: ``DatabaseError``, not only
        ``OperationalError``), but, for a ``claim`` (a key's first operation: nothing has run yet), a file it
        cannot open as it is (:func:`_unopenable`). Storing an outcome, renewing or releasing a claim never
        raises that: a tool that ran keeps its result (logged as not stored) whatever became of the file."""
        if deadline is None and self._lock.acquire(blocking=False):
            until = None  # no one else was using it: SQLite's busy timeout is the whole wait
        else:  # wait for the connection, then for the file, both within one deadline
            until = time.monotonic() + self.timeout if deadline is None else deadline
            if not self._lock.acquire(timeout=max(until - time.monotonic(), 0.0)):
                raise StateUnavailable(
                    f"The SQLite state cannot be used now: busy past {self.timeout:g} s.", where=str(self.path)
                )
        try:
            conn = self._conn
            if conn is None or self._missing:  # within this operation's deadline, not a second one after it
                until = time.monotonic() + self.timeout if until is None else until
                conn = self._open(until) if conn is None else conn
                if self._missing:
                    self._wait_until(conn, until)
                    self._add_columns(conn)
            self._wait_until(conn, until)
            yield conn
        except sqlite3.DataError as exc:  # a value SQLite cannot hold (past its string limit): not stored
            raise ValueError(f"The SQLite state cannot hold this value: {exc}.") from exc
        except sqlite3.Error as exc:
            if claim and self._conn is None and _unopenable(exc, self.path):
                raise _unusable(exc, self.path) from exc
            raise StateUnavailable(f"The SQLite state cannot be used now: {exc}.", where=str(self.path)) from exc
        finally:
            self._lock.release()

    def open(self) -> None:
        """Open the file now if it is not open yet (:class:`StateUnavailable` if SQLite cannot use it now, the
        ``sqlite3`` error if it cannot open it as it is), so that a command fails as it starts rather than at its
        first keyed call."""
        with self._connection(claim=True):
            pass

    def _open(self, until: float) -> sqlite3.Connection:
        """The connection, opened and the file made ready (WAL, the table) by ``until``; the caller maps
        SQLite's errors, and a file that cannot be used now is opened again by the next operation."""
        if self._closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed in-memory database.")
        _private(self.path)
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        self._waits = self._whole
        try:
            self._wait_until(conn, until)
            _write_ahead(conn, until)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS harness_one_idempotency ("
                " scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, state TEXT NOT NULL,"
                " expires REAL NOT NULL, ok INTEGER NOT NULL DEFAULT 0, value TEXT, error TEXT, "
                + "".join(f"{name} {kind}, " for name, kind in _ADDED.items())  # (as an older file gets them)
                + "PRIMARY KEY (scope, key))"
            )
            columns = {row[1] for row in conn.execute("PRAGMA table_info(harness_one_idempotency)")}
        except BaseException:
            conn.close()
            raise
        self._missing = tuple(name for name in _ADDED if name not in columns)
        self._conn = conn
        self._sweep = True  # (at the first claim, on the clock the records' expiry is on: a short-lived process sweeps too)
        return conn

    def _wait_until(self, conn: sqlite3.Connection, until: float | None) -> None:
        """SQLite's busy timeout: what is left until ``until`` (None: the whole ``timeout``)."""
        waits = self._whole if until is None else max(int((until - time.monotonic()) * 1000), 0)
        if waits != self._waits:  # set only when it changes
            conn.execute(f"PRAGMA busy_timeout = {waits}")
            self._waits = waits

    def _add_columns(self, conn: sqlite3.Connection) -> None:
        """The columns a file made by an older version lacks, added (its older users write NULL for an
        ``owner``, a claim no owner matches, and 0 for ``quoted``, as they read it); the caller maps SQLite's errors."""
        for name in self._missing:
            try:
                conn.execute(f"ALTER TABLE harness_one_idempotency ADD COLUMN {name} {_ADDED[name]}")
            except sqlite3.OperationalError as exc:
                if "duplicate column" not in str(exc):  # another process added it meanwhile: done
                    raise
        self._missing = ()

    async def _off_loop(self, work: Callable[..., _T], *args: Any, claim: str | None = None) -> _T:
        """``work(*args, deadline)``: at once if the connection and the file are free, else in a thread,
        its deadline ``timeout`` from now (not from when a thread is free). ``claim``: the owner of the
        claim ``work`` makes, followed while it waits (:meth:`_on_its_way`)."""
        deadline = time.monotonic() + self.timeout
        try:  # a thread costs more than the work (100 us and more a call): only to wait
            return work(*args, _AT_ONCE)
        except StateUnavailable:  # busy (or failing): nothing was written, so the thread does it all
            if claim is not None:
                self._on_its_way(claim)
            return await asyncio.to_thread(work, *args, deadline)

    def _on_its_way(self, owner: str) -> None:
        """Follow ``owner``'s claim, about to wait in a thread: a release of ``owner`` that comes first
        (threads do not get the connection in the order they asked; the claim's caller was cancelled)
        marks it, and the claim is then not made. The oldest of over :data:`_FOLLOWED` claims followed
        is let go (a claim cancelled before its thread started never comes)."""
        with self._waiting_lock:
            self._waiting[owner] = False
            if len(self._waiting) > _FOLLOWED:
                del self._waiting[next(iter(self._waiting))]

    def _released(self, owner: str | None) -> bool:
        """Whether ``owner``'s claim, followed while it waited, was released meanwhile (it is not made);
        it is followed no longer. Called with the connection, as releases mark claims."""
        with self._waiting_lock:
            return self._waiting.pop(owner, False)

    def begin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, *, owner: str | None = None
    ) -> Record | None:
        return self._begin(scope, key, fingerprint, moment(now), seconds(lease, LEASE), owner, None)

    async def abegin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, *, owner: str | None = None
    ) -> Record | None:
        return await self._off_loop(self._begin, scope, key, fingerprint, moment(now), seconds(lease, LEASE), owner, claim=owner)

    def _begin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, owner: str | None, deadline: float | None
    ) -> Record | None:
        with self._connection(deadline, claim=True) as conn:
            if self._waiting and self._released(owner):  # only while claims wait in threads
                return None  # released while it waited (its caller was cancelled): not made
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._ops += 1
                sweep = self._sweep or self._ops % 1024 == 0
                if sweep:
                    conn.execute("DELETE FROM harness_one_idempotency WHERE expires <= ?", (now,))
                row = conn.execute(
                    "SELECT fingerprint, state, expires, ok, value, error, quoted FROM harness_one_idempotency WHERE scope = ? AND key = ?",
                    (scope, key),
                ).fetchone()
                if row is not None and row[2] > now:
                    conn.execute("COMMIT")
                    if sweep:  # (swept once committed: a claim that failed leaves it to the next)
                        self._sweep = False
                    return Record(
                        row[0],
                        row[1],
                        row[2],
                        bool(row[3]),
                        None if row[4] is None else json.loads(row[4]),
                        None if row[5] is None else json.loads(row[5]),
                        bool(row[6]),
                    )
                conn.execute(
                    "INSERT OR REPLACE INTO harness_one_idempotency (scope, key, fingerprint, state, expires, owner)"
                    " VALUES (?, ?, ?, 'running', ?, ?)",
                    (scope, key, fingerprint, now + lease, owner),
                )
                conn.execute("COMMIT")
                if sweep:
                    self._sweep = False
                return None
            except BaseException:
                if conn.in_transaction:  # SQLite may have rolled back already (a full disk): keep the first error
                    conn.execute("ROLLBACK")
                raise

    def renew(self, scope: str, key: str, now: float, lease: float, *, owner: str | None = None) -> bool:
        return self._renew(scope, key, moment(now), seconds(lease, LEASE), owner, None)

    async def arenew(self, scope: str, key: str, now: float, lease: float, *, owner: str | None = None) -> bool:
        return await self._off_loop(self._renew, scope, key, moment(now), seconds(lease, LEASE), owner)

    def _renew(self, scope: str, key: str, now: float, lease: float, owner: str | None, deadline: float | None) -> bool:
        mine = "" if owner is None else " AND owner = ?"
        with self._connection(deadline) as conn:
            cursor = conn.execute(
                "UPDATE harness_one_idempotency SET expires = ? WHERE scope = ? AND key = ? AND state = 'running' AND expires > ?"
                + mine,
                (now + lease, scope, key, now) + (() if owner is None else (owner,)),
            )
            return cursor.rowcount > 0

    def finish(self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None) -> bool:
        return self._finish(scope, key, record, owner, known_moment(now), None)

    async def afinish(self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None) -> bool:
        return await self._off_loop(self._finish, scope, key, record, owner, known_moment(now))

    def _finish(self, scope: str, key: str, record: Record, owner: str | None, now: float | None, deadline: float | None) -> bool:
        seconds(record.expires, EXPIRES)  # else SQLite stores NULL, which the table refuses: a StateUnavailable
        # TypeError/ValueError for values not JSON as they are: the plugin then stores their JSON form for the model
        value = outcome_json(record.value)
        error = None if record.error is None else outcome_json(record.error)
        with self._connection(deadline) as conn:
            if owner is None:  # whatever the key holds (a row gone meanwhile is not brought back)
                cursor = conn.execute(
                    "UPDATE harness_one_idempotency SET state = ?, expires = ?, ok = ?, value = ?, error = ?, quoted = ?, owner = NULL"
                    " WHERE scope = ? AND key = ?",
                    (record.state, record.expires, int(record.ok), value, error, int(record.quoted), scope, key),
                )
                return cursor.rowcount > 0
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT owner, expires FROM harness_one_idempotency WHERE scope = ? AND key = ?", (scope, key)
                ).fetchone()
                if row is not None and row[0] != owner and (now is None or row[1] > now):
                    conn.execute("COMMIT")
                    return False  # another caller's live claim or outcome: kept
                conn.execute(
                    "INSERT OR REPLACE INTO harness_one_idempotency"
                    " (scope, key, fingerprint, state, expires, ok, value, error, quoted, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        scope,
                        key,
                        record.fingerprint,
                        record.state,
                        record.expires,
                        int(record.ok),
                        value,
                        error,
                        int(record.quoted),
                        owner,
                    ),
                )
                conn.execute("COMMIT")
                return True
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def release(self, scope: str, key: str, *, owner: str | None = None) -> None:
        self._release(scope, key, owner, None)

    async def arelease(self, scope: str, key: str, *, owner: str | None = None) -> None:
        await self._off_loop(self._release, scope, key, owner)

    def _release(self, scope: str, key: str, owner: str | None, deadline: float | None) -> None:
        with self._connection(deadline) as conn:
            if owner is None:
                conn.execute("DELETE FROM harness_one_idempotency WHERE scope = ? AND key = ?", (scope, key))
            else:
                cursor = conn.execute(
                    "DELETE FROM harness_one_idempotency WHERE scope = ? AND key = ? AND owner = ?", (scope, key, owner)
                )
                if not cursor.rowcount and self._waiting:
                    with self._waiting_lock:
                        if owner in self._waiting:  # the claim, still waiting in its thread, is not made
                            self._waiting[owner] = True

    def close(self) -> None:
        """Close the connection, after the operation under way; the next operation opens the file again
        (as a :class:`~harness_one.state.RedisLink` reconnects), so a registry on the store goes on. An
        in-memory database (``:memory:``) is gone once closed: its store stays closed (each later operation
        :class:`StateUnavailable`), so no key it held runs its tool again on an empty one."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            self._closed = self.path in _IN_MEMORY
