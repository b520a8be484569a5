"""The SQLite state under a write lock held elsewhere: one deadline per operation, ``?timeout=``, ``acall``.

Another connection's ``BEGIN IMMEDIATE`` holds the file's write lock as another process would.
Bounds are multiples of the configured timeout with wide margins: before the fix the waits
added up (the last of N threads waited about N timeouts).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness_one import ToolRegistry
from harness_one.state import AsyncIdempotencyStore, MemoryStore, Record, SQLiteStore, State, StateUnavailable
from harness_one_plugins import IdempotencyPlugin

TIMEOUT = 0.25  # the store's wait for the file in these tests
THREADS = 8


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state.sqlite3"


@pytest.fixture
def locked(path: Path) -> Iterator[sqlite3.Connection]:
    """The file, made, with its write lock held by another connection until the test ends."""
    made = SQLiteStore(path)
    made.release("t", "k")  # the first operation makes the file (the constructor touches nothing)
    made.close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    yield other
    if other.in_transaction:
        other.execute("ROLLBACK")
    other.close()


def in_threads(n: int, work: Any) -> list[tuple[float, Any]]:
    """``work(i)`` in ``n`` threads started together: each one's seconds and answer (or exception)."""
    barrier = threading.Barrier(n)
    found: list[tuple[float, Any]] = []

    def run(i: int) -> None:
        barrier.wait()
        start = time.monotonic()
        try:
            answer = work(i)
        except Exception as exc:
            answer = exc
        found.append((time.monotonic() - start, answer))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return found


def registry_with(store: SQLiteStore, mode: str = "closed") -> tuple[ToolRegistry, IdempotencyPlugin, list[int]]:
    plugin = IdempotencyPlugin(store=store, on_state_error=mode)
    reg = ToolRegistry(plugins={"idempotency": plugin}, autoload=False)
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or "done", name="work")
    return reg, plugin, runs


def test_a_new_file_locked_elsewhere_is_waited_for_at_its_first_operation(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite fails the switch to WAL at once, without its busy timeout, while another connection holds a
    lock on a file not in WAL yet (processes opening a new file together): the store tries again within
    its timeout (one of 4 processes failed its first claim in about 1 run of 40)."""
    from types import SimpleNamespace

    from harness_one.state import _sqlite

    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    pauses: list[float] = []

    def pause(seconds: float) -> None:  # the store backs off, and the other connection lets go meanwhile
        pauses.append(seconds)
        if other.in_transaction:
            other.execute("ROLLBACK")

    monkeypatch.setattr(_sqlite, "time", SimpleNamespace(monotonic=time.monotonic, sleep=pause))
    try:
        assert SQLiteStore(path, timeout=TIMEOUT).begin("t", "k", "fp", 0.0, 30.0) is None  # was StateUnavailable
        assert len(pauses) == 1
    finally:
        other.close()


def test_threads_waiting_for_a_locked_file_give_up_together(path: Path, locked: sqlite3.Connection) -> None:
    """Each operation waits ``timeout`` from when it asked, not behind the threads queued before it."""
    store = SQLiteStore(path, timeout=TIMEOUT)
    found = in_threads(THREADS, lambda i: store.begin("t", f"k{i}", "fp", time.time(), 30.0, owner=f"o{i}"))
    assert [type(answer) for _, answer in found] == [StateUnavailable] * THREADS
    assert sum(seconds < 3 * TIMEOUT for seconds, _ in found) == THREADS  # was up to THREADS x TIMEOUT
    assert sum(seconds >= TIMEOUT / 2 for seconds, _ in found) == THREADS  # none gave up before its time
    locked.execute("ROLLBACK")
    assert store.begin("t", "k0", "fp", time.time(), 30.0, owner="o0") is None


@pytest.mark.parametrize("mode", ["closed", "open"])
def test_calls_waiting_for_a_locked_file_take_the_fail_mode_together(path: Path, locked: sqlite3.Connection, mode: str) -> None:
    """``closed``: every keyed call fails with ``StateUnavailable``; ``open``: every one runs
    unprotected; each after about one timeout, not one per thread queued before it."""
    reg, plugin, runs = registry_with(SQLiteStore(path, timeout=TIMEOUT), mode)
    found = in_threads(THREADS, lambda i: reg.try_call("work", idempotency_key=f"k{i}"))
    assert sum(seconds < 3 * TIMEOUT for seconds, _ in found) == THREADS
    if mode == "closed":
        assert [result.error.kind for _, result in found] == ["state_unavailable"] * THREADS
        assert runs == [] and plugin.fail.failed_closed == THREADS
    else:
        assert [result.value for _, result in found] == ["done"] * THREADS
        assert len(runs) == THREADS and plugin.fail.failed_open == THREADS


# --------------------------------------------------------------------------- ?timeout= in the URL


def test_the_state_urls_timeout_is_the_stores(path: Path, locked: sqlite3.Connection) -> None:
    state = State(f"sqlite://{path}?timeout={TIMEOUT}")
    store = state.idempotency()
    assert isinstance(store, SQLiteStore) and store.timeout == TIMEOUT
    reg = ToolRegistry(state=f"sqlite://{path}?timeout={TIMEOUT}", autoload=False)
    reg.add(lambda: "done", name="work")
    start = time.monotonic()
    refused = reg.try_call("work", idempotency_key="k")
    assert refused.error is not None and refused.error.kind == "state_unavailable"
    assert time.monotonic() - start < 20 * TIMEOUT  # the default is 10 s (40 x TIMEOUT)
    assert State(f"sqlite://{path}").idempotency().timeout == 10.0  # type: ignore[attr-defined]
    assert State(f"sqlite://{path.parent}/a%3Fb.db").path == path.parent / "a?b.db"  # a '?' in the name


@pytest.mark.parametrize("option", ["timeout=0", "timeout=-1", "timeout=abc", "timeout=", "timeout=inf", "timeout=nan"])
def test_a_bad_timeout_in_the_state_url_is_refused(path: Path, option: str) -> None:
    with pytest.raises(ValueError, match="the SQLite state URL's timeout must be a number of seconds above 0"):
        State(f"sqlite://{path}?{option}")
    assert not path.exists()  # refused before the file is made


@pytest.mark.parametrize("option", ["timout=2", "mode=ro", "b.db"])
def test_an_unknown_option_in_a_sqlite_state_url_is_refused(path: Path, option: str) -> None:
    """Ignored before: ``?timout=2`` kept 10 s, and ``sqlite:///a?b.db`` wrote the file ``a``."""
    name = option.partition("=")[0]
    with pytest.raises(ValueError, match=f"has the option '{name}': a SQLite state URL takes only 'timeout'"):
        State(f"sqlite://{path}?{option}")


def test_a_hash_in_a_sqlite_state_url_is_refused(path: Path) -> None:
    """``sqlite:///DIR/a#b.db`` opened the file ``DIR/a``: the rest was read as a URL fragment and dropped."""
    for url in (f"sqlite://{path.parent}/a#b.db", f"sqlite://{path}?timeout=2#x", f"sqlite://{path}#"):
        with pytest.raises(ValueError, match="has a '#': write a '#' in the file's name as %23"):
            State(url)
    with pytest.raises(ValueError, match="%23"):
        ToolRegistry(state=f"sqlite://{path.parent}/a#b.db", autoload=False)
    assert not (path.parent / "a").exists()
    assert State(f"sqlite://{path.parent}/a%23b.db").path == path.parent / "a#b.db"
    assert State(f"{path.parent}/a#b.db").path == path.parent / "a#b.db"  # a plain path is taken as written


def test_the_plugins_path_takes_a_timeout(path: Path, locked: sqlite3.Connection) -> None:
    """``IdempotencyPlugin(path=...)`` had no way to set the wait for the file (only a state URL's
    ``?timeout=`` had): a locked file held each keyed call for the default 10 s."""
    plugin = IdempotencyPlugin(path=path, timeout=TIMEOUT)
    assert isinstance(plugin.store, SQLiteStore) and plugin.store.timeout == TIMEOUT
    configured = ToolRegistry(plugin_options={"idempotency": {"path": str(path), "timeout": TIMEOUT}}, autoload=False)
    assert configured.plugins.get("idempotency").store.timeout == TIMEOUT  # [plugins.idempotency] path and timeout
    assert IdempotencyPlugin(path=path).store.timeout == 10.0  # type: ignore[attr-defined]
    reg = ToolRegistry(plugins={"idempotency": plugin}, autoload=False)
    reg.add(lambda: "done", name="work")
    start = time.monotonic()
    refused = reg.try_call("work", idempotency_key="k")
    assert refused.error is not None and refused.error.kind == "state_unavailable"
    assert time.monotonic() - start < 20 * TIMEOUT  # the default is 10 s (40 x TIMEOUT)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 2.0}, "idempotency timeout= is the wait for the SQLite file of path="),
        ({"store": "memory", "timeout": 2.0}, "as SQLiteStore\\(path, timeout=...\\) for store="),
        ({"path": "file", "timeout": 0}, "idempotency timeout must be a positive number of seconds"),
        ({"path": "file", "timeout": True}, "idempotency timeout must be a positive number of seconds"),
    ],
)
def test_a_timeout_without_a_path_or_not_a_wait_is_refused(path: Path, options: dict[str, Any], message: str) -> None:
    given = {**options, **({"path": path} if "path" in options else {})}
    if given.get("store") == "memory":
        given["store"] = MemoryStore()
    with pytest.raises(ValueError, match=message):
        IdempotencyPlugin(**given)
    assert not path.exists()  # refused before the file is made


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf")])
def test_a_store_refuses_a_timeout_that_is_not_a_wait(path: Path, timeout: float) -> None:
    with pytest.raises(ValueError, match="the SQLite store's timeout must be a number of seconds above 0"):
        SQLiteStore(path, timeout=timeout)


# --------------------------------------------------------------------------- acall


async def test_acall_waits_for_a_locked_file_off_the_event_loop(path: Path, locked: sqlite3.Connection) -> None:
    """The loop runs this coroutine while the call waits for the file; released, the call claims the key."""
    store = SQLiteStore(path, timeout=3.0)
    reg, _, runs = registry_with(store)
    task = asyncio.create_task(reg.acall("work", idempotency_key="k"))
    for _ in range(300):  # until the call's thread holds the connection, waiting for the file
        if store._lock.locked():
            break
        await asyncio.sleep(0.01)
    assert not task.done()  # a call blocking the loop would have ended, failed, before this ran
    locked.execute("ROLLBACK")
    assert await task == "done" and runs == [1]
    assert await reg.acall("work", idempotency_key="k") == "done" and runs == [1]  # replayed


async def test_acalls_waiting_for_a_locked_file_give_up_together(path: Path, locked: sqlite3.Connection) -> None:
    """With one worker thread, the calls queued for it count their wait from when they asked:
    all fail about one timeout after they started, not one timeout after another."""
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))
    reg, plugin, runs = registry_with(SQLiteStore(path, timeout=TIMEOUT))
    calls = 16  # waits that added up would take 16 x TIMEOUT: well past the bound below even unloaded
    start = time.monotonic()
    found = await asyncio.gather(*(reg.atry_call("work", idempotency_key=f"k{i}") for i in range(calls)))
    # a wide margin for a loaded machine; the bug (one timeout after another) took calls x TIMEOUT
    assert time.monotonic() - start < 10 * TIMEOUT
    assert [result.error.kind for result in found if result.error] == ["state_unavailable"] * calls
    assert runs == [] and plugin.fail.failed_closed == calls


async def test_an_operation_after_a_shorter_wait_waits_its_whole_timeout(path: Path) -> None:
    """A twin's attempt at once sets SQLite's wait to nothing; the next operation waits its own timeout."""
    store = SQLiteStore(path, timeout=TIMEOUT)
    assert await store.abegin("t", "k", "fp", time.time(), 30.0) is None  # the file was free
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        start = time.monotonic()
        with pytest.raises(StateUnavailable):
            store.begin("t", "k2", "fp", time.time(), 30.0)
        assert time.monotonic() - start >= TIMEOUT / 2  # gave up at once when the wait stayed at 0
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_the_sqlite_asyncio_twins_answer_as_the_methods(tmp_path: Path) -> None:
    a, b = SQLiteStore(tmp_path / "idem.sqlite3"), SQLiteStore(tmp_path / "idem.sqlite3")
    assert isinstance(a, AsyncIdempotencyStore)
    done = Record("fp", "done", 1000.0, True, "B")
    assert await a.abegin("t", "k", "fp", 0.0, 10.0, owner="A") is None
    assert await b.abegin("t", "k", "fp", 10.0, 10.0, owner="B") is None  # A's lease lapsed
    await a.arelease("t", "k", owner="A")  # frees nothing B holds
    assert await a.afinish("t", "k", Record("fp", "done", 1000.0, True, "A"), owner="A", now=11.0) is False
    assert await a.arenew("t", "k", 12.0, 10.0, owner="A") is False
    assert await b.arenew("t", "k", 12.0, 10.0, owner="B") is True
    assert await b.afinish("t", "k", done, owner="B", now=13.0) is True
    assert await a.abegin("t", "k", "fp", 14.0, 10.0, owner="D") == done
    with pytest.raises(TypeError):  # not JSON: the caller releases the key, as with finish
        await a.afinish("t", "k2", Record("fp", "done", 1000.0, True, {1, 2}), owner="A", now=1.0)


async def test_the_twins_of_a_free_file_take_no_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread costs more than the work (a keyed acall took 4 times as long): the twins use one
    only to wait for the file."""
    reg, _, runs = registry_with(SQLiteStore(tmp_path / "free.sqlite3"))

    async def awork() -> str:  # an async tool: acall runs a sync one in a thread
        runs.append(1)
        return "done"

    reg.add(awork)

    def no_thread(*args: Any) -> Any:
        raise AssertionError("a thread for a free file")

    monkeypatch.setattr(asyncio, "to_thread", no_thread)
    assert await reg.acall("awork", idempotency_key="k") == "done"
    assert await reg.acall("awork", idempotency_key="k") == "done" and runs == [1]


# --------------------------------------------------------------------------- a file made before owners


def old_format(path: Path) -> Path:
    """A file as the store wrote it before claims had owners: no ``owner`` column."""
    old = sqlite3.connect(path)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute(
        "CREATE TABLE harness_one_idempotency (scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
        " state TEXT NOT NULL, expires REAL NOT NULL, ok INTEGER NOT NULL DEFAULT 0, value TEXT, error TEXT,"
        " PRIMARY KEY (scope, key))"
    )
    old.commit()
    old.close()
    return path


def has_owner(path: Path) -> bool:
    with sqlite3.connect(path) as conn:
        return "owner" in {row[1] for row in conn.execute("PRAGMA table_info(harness_one_idempotency)")}


@pytest.mark.parametrize("mode", ["closed", "open"])
def test_an_old_file_locked_at_start_up_is_migrated_once_the_lock_is_gone(
    path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``owner`` column is added by the first operation, not the constructor: with the write lock
    held elsewhere, the registry was built after the lock's wait and without its idempotency plugin
    (a raw ``OperationalError``), so every keyed call was refused for the registry's life."""
    from harness_one.state import _sqlite

    other = sqlite3.connect(old_format(path), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    opened: list[object] = []
    connect = sqlite3.connect

    def counted(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(database)
        return connect(database, *args, **kwargs)

    try:
        monkeypatch.setattr(_sqlite.sqlite3, "connect", counted)
        reg = ToolRegistry(
            state=f"sqlite://{path}?timeout={TIMEOUT}",
            autoload=False,
            strict=True,  # a plugin failing to load raises
            plugin_options={"idempotency": {"on_state_error": mode}},
        )
        # the constructor opened no connection, so it wrote nothing and waited for nothing (a check of
        # what it did, not of wall time, which a loaded machine stretches past the timeout)
        assert opened == []
        assert not has_owner(path)
        runs: list[int] = []
        reg.add(lambda: runs.append(1) or "done", name="work")
        held = reg.try_call("work", idempotency_key="k")
        if mode == "closed":
            assert held.error is not None and held.error.kind == "state_unavailable" and runs == []
        else:
            assert held.value == "done" and runs == [1]
        assert not has_owner(path)
    finally:
        other.execute("ROLLBACK")
        other.close()
    runs.clear()
    assert reg.call("work", idempotency_key="k2") == "done"
    assert reg.call("work", idempotency_key="k2") == "done" and runs == [1]  # claimed, then replayed
    assert has_owner(path)


def test_a_read_only_old_file_fails_open_when_asked(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read-only, the column cannot be added: each keyed call takes ``on_state_error`` (here ``open``:
    it runs) as before owners; the plugin failed to load before (and ``path=`` raised)."""
    old_format(path)
    connect = sqlite3.connect

    def read_only(database: Any, **kwargs: Any) -> sqlite3.Connection:  # as a file this user cannot write
        return connect(f"file:{database}?mode=ro", uri=True, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", read_only)
    reg = ToolRegistry(
        state=f"sqlite://{path}?timeout={TIMEOUT}",
        autoload=False,
        strict=True,
        plugin_options={"idempotency": {"on_state_error": "open"}},
    )
    reg.add(lambda: "done", name="work")
    assert reg.call("work", idempotency_key="k") == "done"
    plugin = IdempotencyPlugin(path=path, on_state_error="open")
    direct = ToolRegistry(plugins={"idempotency": plugin}, autoload=False, strict=True)
    direct.add(lambda: "done", name="work")
    assert direct.call("work", idempotency_key="k") == "done" and plugin.fail.failed_open == 1
    monkeypatch.undo()
    assert not has_owner(path)
