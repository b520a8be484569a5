"""Shared state: a Redis URL's socket timeouts do not outlast ``?timeout=``, a SQLite store sweeps expired
records as it opens, concurrency caps count the slots of the whole Redis prefix, and a refused budget take
restarts a run's ``ttl`` in Redis as in memory."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from redis_support import RedisServer

from harness_one import ManualClock, ToolRegistry
from harness_one.state import MemoryBudgets, Record, StateUnavailable
from harness_one_plugins import SQLiteStore

# ------------------------------------------------------------------ finding 1: the URL's socket timeouts


def test_a_urls_socket_timeouts_do_not_override_the_link_timeout() -> None:
    """Before, redis-py let ``?socket_timeout=60`` win over the link's ``timeout`` (0.5 here): each operation
    could wait 60 s. No connection is made: the clients' connection options are read."""
    from harness_one.state import RedisLink

    link = RedisLink("redis://127.0.0.1:1/0?socket_timeout=60&socket_connect_timeout=70&timeout=0.5&health_check_interval=3")
    assert "socket_timeout" not in link.url and "socket_connect_timeout" not in link.url
    assert "health_check_interval=3" in link.url  # the client's other options are kept
    options = link.client.connection_pool.connection_kwargs
    assert (options["socket_timeout"], options["socket_connect_timeout"]) == (0.5, 0.5)
    assert options["health_check_interval"] == 3

    async def async_options() -> dict[str, Any]:
        return dict(link.aclient().connection_pool.connection_kwargs)

    options = asyncio.run(async_options())
    assert (options["socket_timeout"], options["socket_connect_timeout"]) == (0.5, 0.5)
    cluster = RedisLink("redis+cluster://127.0.0.1:1?socket_timeout=60&timeout=0.5")
    assert "socket_timeout" not in cluster.url


def test_a_paused_redis_fails_a_call_at_the_timeout_despite_a_long_url_socket_timeout(
    redis_server: RedisServer, redis_url: str
) -> None:
    """Before, with ``?socket_timeout=60`` the calls waited out the whole pause (then ran) instead of failing
    at 0.25 s into ``on_state_error`` (closed: ``StateUnavailable``). The pause bounds a regression."""
    url = f"{redis_url}?socket_timeout=60&socket_connect_timeout=60"
    sync, aio = (ToolRegistry(state=url, autoload=False) for _ in range(2))  # a link each: no fail-fast window shared
    for reg in (sync, aio):
        reg.add(lambda: "ok", name="t", max_concurrency=1)
    assert sync.try_call("t").ok and asyncio.run(aio.atry_call("t")).ok  # connected, scripts loaded
    admin = redis_server.client()
    admin.execute_command("CLIENT", "PAUSE", 5000, "WRITE")  # the scripts write: they wait, UNPAUSE does not
    try:
        refused = sync.try_call("t")
        arefused = asyncio.run(asyncio.wait_for(aio.atry_call("t"), 10))
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
        admin.close()
    for result in (refused, arefused):
        assert not result.ok and isinstance(result.error, StateUnavailable), result


# ------------------------------------------------------------------ finding 2: SQLite records swept as the file opens


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM harness_one_idempotency").fetchone()[0])


def test_each_opening_of_a_sqlite_store_sweeps_the_records_expired_by_its_first_claim(tmp_path: Path) -> None:
    """Before, only every 1024th claim of one process swept: 30 short-lived processes (CLI commands) with
    ``ttl=1`` left 30 expired records, tools' values included, in the file for good."""
    path = tmp_path / "idem.sqlite3"
    for run in range(3):  # three processes, one after the other, each opening the file
        store = SQLiteStore(path)
        now = 1000.0 + 10 * run
        for i in range(10):
            assert store.begin("pay", f"r{run}-{i}", "fp", now, 30.0) is None
            assert store.finish("pay", f"r{run}-{i}", Record("fp", "done", now + 1, True, f"secret-{i}", None))
        store.close()
    assert _rows(path) == 10  # the last opening removed the 20 records expired at its first claim
    late = SQLiteStore(path)
    assert late.begin("pay", "early", "fp", 1015.0, 30.0) is None  # a clock behind the expiries: none is deleted
    late.close()
    assert _rows(path) == 11


def test_a_first_claim_that_fails_leaves_the_sweep_to_the_next(tmp_path: Path) -> None:
    """The sweep's DELETE is rolled back with a claim that fails: the next claim sweeps (it was marked done)."""
    path = tmp_path / "idem.sqlite3"
    store = SQLiteStore(path)
    assert store.begin("t", "old", "fp", 100.0, 30.0) is None
    assert store.finish("t", "old", Record("fp", "done", 101.0, True, "secret", None))
    store.close()
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON harness_one_idempotency WHEN NEW.key = 'bad' "
        "BEGIN SELECT RAISE(ABORT, 'disk trouble'); END"
    )
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    with pytest.raises(StateUnavailable):
        store.begin("t", "bad", "fp", 1000.0, 30.0)
    assert _rows(path) == 1  # the expired record is still there: its DELETE went with the failed claim
    assert store.begin("t", "good", "fp", 1000.0, 30.0) is None
    store.close()
    assert _rows(path) == 1  # swept: only the new claim is left


def test_the_sweep_at_opening_uses_the_idempotency_plugins_clock(tmp_path: Path) -> None:
    """Records expire on the plugin's clock (a ``ManualClock`` here, far from the wall clock's time)."""
    path = tmp_path / "cli.sqlite3"
    clock = ManualClock(50.0)
    for command in range(30):  # each a registry of its own, as each CLI command is a process of its own
        reg = ToolRegistry(state=f"sqlite:///{path}", autoload=False, plugin_options={"idempotency": {"ttl": 1, "clock": clock}})
        reg.add(lambda x: f"secret-{x}", name="pay")
        assert reg.try_call("pay", {"x": command}, idempotency_key=f"k-{command}").ok
        reg.state.idempotency().close()
        clock.advance(2.0)
    assert _rows(path) == 1  # each command removed what had expired by its claim: only its own is left


# ------------------------------------------------------------------ finding 3: what Redis concurrency caps count


def test_redis_caps_count_every_registry_on_the_prefix_and_a_prefix_separates_them(redis_url: str) -> None:
    """As docs/plugins.md now says: with Redis, ``total`` and a tool's cap count the calls of every
    registry (and process) on the same prefix; another prefix counts apart."""
    started, release = threading.Event(), threading.Event()

    def report() -> str:
        started.set()
        assert release.wait(10)
        return "a"

    a = ToolRegistry(state=redis_url, autoload=False, plugin_options={"concurrency": {"total": 10}})
    b = ToolRegistry(state=redis_url, autoload=False, plugin_options={"concurrency": {"total": 1}})
    other = ToolRegistry(state=f"{redis_url}?prefix=other:", autoload=False, plugin_options={"concurrency": {"total": 1}})
    a.add(report, name="report", max_concurrency=1)
    for reg in (b, other):
        reg.add(lambda: "b", name="send")
        reg.add(lambda: "b", name="report", max_concurrency=1)
    runner = threading.Thread(target=a.try_call, args=("report",))
    runner.start()
    try:
        assert started.wait(10)
        busy = b.try_call("send")  # b's total counts a's call
        assert not busy.ok and busy.error is not None and busy.error.kind == "busy", busy
        same_name = b.try_call("report")  # a tool's cap counts the calls of every tool of its name
        assert not same_name.ok and same_name.error is not None and same_name.error.kind == "busy"
        assert other.try_call("send").ok and other.try_call("report").ok  # another prefix: counted apart
    finally:
        release.set()
        runner.join(10)
    assert not runner.is_alive()


# ------------------------------------------------------------------ finding 4: a refused take and the run's ttl

#: Run "a": a give-back of a scope it did not count leaves 'y' counted with the run's total at 0; the
#: refused take at 28.1 restarts the run's ttl (1 s), so the take at 28.3 is refused too.
_SEQUENCE: list[tuple[str, str, dict[str, Any]]] = [
    ("take", "y", {"limit": 3, "total": None, "now": 1_800_000_025.0, "ttl": 5.0}),
    ("give", "x", {}),
    ("take", "y", {"limit": None, "total": 4, "now": 1_800_000_025.7, "ttl": 5.0}),
    ("take", "x", {"limit": 3, "total": 4, "now": 1_800_000_027.3, "ttl": 1.0}),
    ("give", "x", {}),
    ("give", "x", {}),
    ("take", "y", {"limit": 2, "total": 4, "now": 1_800_000_028.1, "ttl": 1.0}),
    ("take", "y", {"limit": 2, "total": 4, "now": 1_800_000_028.3, "ttl": 1.0}),
    ("used", "y", {"now": 1_800_000_028.4}),
    ("used", "y", {"now": 1_800_000_029.4}),  # expired 1 s after the last (refused) take
]


def _replay(budgets: Any) -> list[int | None]:
    seen: list[int | None] = []
    for op, scope, args in _SEQUENCE:
        if op == "take":
            seen.append(budgets.take("a", scope, **args))
        elif op == "give":
            budgets.give_back("a", scope)
            seen.append(None)
        else:
            seen.append(budgets.used("a", scope, **args))
    return seen


def test_a_refused_take_restarts_the_runs_ttl_in_redis_as_in_memory(redis_url: str) -> None:
    """Before, the Redis script took a run total of 0 for "nothing counted" and left the run's expiry where
    it was, so the run expired at 28.3 and the take then counted (0) where memory refused it (1)."""
    from harness_one.state import RedisBudgets, RedisLink

    redis_seen = _replay(RedisBudgets(RedisLink(redis_url), server_time=False))
    memory_seen = _replay(MemoryBudgets())
    assert redis_seen == memory_seen == [0, None, 0, 0, None, None, 1, 1, 2, 0]


def test_a_refused_take_of_a_run_with_nothing_counted_still_leaves_no_redis_key(redis_url: str) -> None:
    from harness_one.state import RedisBudgets, RedisLink

    link = RedisLink(redis_url, prefix=f"t{time.time_ns()}:")
    budgets = RedisBudgets(link, server_time=False)
    assert budgets.take("new", "y", limit=0, total=None, now=100.0, ttl=60.0) == 1
    assert budgets.take("new", "y", limit=None, total=0, now=100.0, ttl=60.0) == 2
    assert not link.client.keys(f"{link.prefix}*")
    assert budgets.take("new", "y", limit=1, total=None, now=100.0, ttl=60.0) == 0
    budgets.give_back("new", "y")  # all given back: the run counts nothing again
    assert budgets.take("new", "y", limit=0, total=None, now=101.0, ttl=3600.0) == 1
    assert not link.client.keys(f"{link.prefix}*")
