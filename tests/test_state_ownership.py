"""Who may act on shared state: an idempotency claim is released or finished only by its owner (a
caller whose lease lapsed frees and overwrites nothing another caller claimed since), and a
budget's give-back (or take) that reaches the store twice counts once, driven by injected times,
and through a real connection dropped after Redis applied a give-back.

The stores' owner and ticket scenarios are the conformance kit's (``IdempotencyStoreContract``,
``BudgetStoreContract``): here with two handles on one store, as two workers hold (one SQLite file
opened twice, two connections to one redis-server); the memory stores, and the budget stores on
Redis, pass them in tests/test_idempotency.py and tests/test_budget_state.py."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_support import RedisServer, RelayProxy

from harness_one import IdempotencyConflict, ManualClock, ToolArgumentError, ToolRegistry
from harness_one.state import Accepts, MemoryBudgets, MemoryStore, Record, SQLiteStore, new_token
from harness_one.testing import IdempotencyStoreContract
from harness_one_plugins import BudgetPlugin, IdempotencyPlugin


def redis_store(url: str) -> Any:
    from harness_one.state import RedisLink, RedisStore

    return RedisStore(RedisLink(url))


def redis_budgets(url: str) -> Any:
    from harness_one.state import RedisBudgets, RedisLink

    return RedisBudgets(RedisLink(url), server_time=False)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Any]:
    """Two handles on one idempotency store, as two workers have: one MemoryStore twice, two
    SQLiteStores on one file, two RedisStores with their own connections to one redis-server."""
    if request.param == "memory":
        shared = MemoryStore()
        return shared, shared
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "idem.sqlite3"), SQLiteStore(tmp_path / "idem.sqlite3")
    url = request.getfixturevalue("redis_url")
    return redis_store(url), redis_store(url)


def done(value: Any, expires: float = 1000.0) -> Record:
    return Record("fp", "done", expires, True, value)


# --------------------------------------------------------------------------- idempotency stores


class TestSQLiteFileOpenedTwice(IdempotencyStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> SQLiteStore:
        return SQLiteStore(tmp_path / "idem.sqlite3")

    @pytest.fixture
    def peer(self, store: SQLiteStore, tmp_path: Path) -> SQLiteStore:
        return SQLiteStore(tmp_path / "idem.sqlite3")


class TestRedisTwoConnections(IdempotencyStoreContract):
    @pytest.fixture
    def store(self, redis_url: str) -> Any:
        return redis_store(redis_url)

    @pytest.fixture
    def peer(self, redis_url: str) -> Any:
        return redis_store(redis_url)


async def test_the_asyncio_twins_check_the_owner(redis_url: str) -> None:
    a, b = redis_store(redis_url), redis_store(redis_url)
    assert await a.abegin("t", "k", "fp", 0.0, 10.0, owner="A") is None
    assert await b.abegin("t", "k", "fp", 10.0, 10.0, owner="B") is None
    await a.arelease("t", "k", owner="A")
    assert await a.afinish("t", "k", done("A"), owner="A", now=11.0) is False
    assert (await b.abegin("t", "k", "fp", 12.0, 10.0, owner="C")).state == "running"  # type: ignore[union-attr]
    assert await b.arenew("t", "k", 12.0, 10.0, owner="B") is True
    assert await b.afinish("t", "k", done("B"), owner="B", now=13.0) is True
    assert (await a.abegin("t", "k", "fp", 14.0, 10.0, owner="D")).value == "B"  # type: ignore[union-attr]


def test_a_sqlite_file_made_before_owners_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE harness_one_idempotency (scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
        " state TEXT NOT NULL, expires REAL NOT NULL, ok INTEGER NOT NULL DEFAULT 0, value TEXT, error TEXT,"
        " PRIMARY KEY (scope, key))"
    )
    old.execute(
        "INSERT INTO harness_one_idempotency (scope, key, fingerprint, state, expires) VALUES ('t', 'k', 'fp', 'running', 100)"
    )
    old.commit()
    old.close()
    store, again = SQLiteStore(path), SQLiteStore(path)  # the second finds the column there
    store.release("t", "k", owner="A")  # the old claim is no owner's: kept
    assert store.begin("t", "k", "fp", 50.0, 10.0, owner="A").state == "running"  # type: ignore[union-attr]
    assert again.begin("t", "k2", "fp", 50.0, 10.0, owner="A") is None
    assert again.finish("t", "k2", done("v"), owner="A", now=51.0) is True


# --------------------------------------------------------------------------- the idempotency plugin


class Charge:
    """A tool whose first run waits for ``first`` then ends as ``ending`` says; the second waits
    for ``second`` and returns "B"; any later run returns "C" at once. It counts its runs."""

    def __init__(self, ending: Callable[[], str]) -> None:
        self.ending = ending
        self.runs = 0
        self.entered = [threading.Event(), threading.Event()]
        self.first, self.second = threading.Event(), threading.Event()
        self.lock = threading.Lock()

    def __call__(self) -> str:
        with self.lock:
            self.runs += 1
            run = self.runs
        if run == 1:
            self.entered[0].set()
            assert self.first.wait(10)
            return self.ending()
        if run == 2:
            self.entered[1].set()
            assert self.second.wait(10)
            return "B"
        return "C"


def fails_on_its_arguments() -> str:
    raise ToolArgumentError("amount: the account was closed meanwhile")


def workers(pair: tuple[Any, Any], clock: ManualClock, tool: Charge) -> list[ToolRegistry]:
    regs = []
    for store in pair:
        plugin = IdempotencyPlugin(store=store, clock=clock)  # lease 300 s: renewals every 100 s of real time
        reg = ToolRegistry(plugins={"idempotency": plugin}, autoload=False)
        reg.add(tool, name="charge")
        regs.append(reg)
    return regs


def in_thread(reg: ToolRegistry, results: list[Any]) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.append(reg.try_call("charge", idempotency_key="order-1")))
    thread.start()
    return thread


@pytest.mark.parametrize("first_run", ["fails_on_its_arguments", "returns"])
def test_a_key_runs_once_more_at_most_after_a_lapsed_lease(stores: tuple[Any, Any], clock: ManualClock, first_run: str) -> None:
    """Worker A's call outlives its lease (its renewals failed), B claims the key and runs; then A's
    call ends: failed (it releases the key) or with a result (it finishes). C, calling meanwhile,
    meets B's claim instead of running the key a third time, and every later caller is replayed B's outcome."""
    tool = Charge(fails_on_its_arguments if first_run == "fails_on_its_arguments" else lambda: "A")
    reg_a, reg_b = workers(stores, clock, tool)
    a_result: list[Any] = []
    b_result: list[Any] = []
    try:
        a = in_thread(reg_a, a_result)
        assert tool.entered[0].wait(10)
        clock.advance(301)  # A's lease lapsed
        b = in_thread(reg_b, b_result)
        assert tool.entered[1].wait(10)
        tool.first.set()
        a.join(10)
        c = reg_b.try_call("charge", idempotency_key="order-1")
        assert isinstance(c.error, IdempotencyConflict) and tool.runs == 2
    finally:
        tool.first.set()
        tool.second.set()
    b.join(10)
    assert b_result[0].value == "B"
    if first_run == "returns":
        assert a_result[0].value == "A"  # A's caller gets its own outcome, which is not stored
    else:
        assert isinstance(a_result[0].error, ToolArgumentError)
    assert reg_a.call("charge", idempotency_key="order-1") == "B" and tool.runs == 2
    a_stats = reg_a.stats()["idempotency"]
    assert a_stats.get("lapsed", 0) == (first_run == "returns")


async def test_acall_keeps_the_claim_of_the_caller_after_a_lapsed_lease(redis_url: str, clock: ManualClock) -> None:
    gates = [asyncio.Event(), asyncio.Event()]
    entered = [asyncio.Event(), asyncio.Event()]
    runs: list[int] = []

    async def charge() -> str:
        run = len(runs)
        runs.append(run)
        entered[run].set()
        await gates[run].wait()
        return "AB"[run]

    regs = []
    for _ in range(2):
        reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=redis_store(redis_url), clock=clock)}, autoload=False)
        reg.add(charge, name="charge")
        regs.append(reg)
    a = asyncio.ensure_future(regs[0].atry_call("charge", idempotency_key="k"))
    await entered[0].wait()
    clock.advance(301)
    b = asyncio.ensure_future(regs[1].atry_call("charge", idempotency_key="k"))
    await entered[1].wait()
    gates[0].set()
    assert (await a).value == "A"
    assert isinstance((await regs[1].atry_call("charge", idempotency_key="k")).error, IdempotencyConflict)
    gates[1].set()
    assert (await b).value == "B"
    assert (await regs[0].atry_call("charge", idempotency_key="k")).value == "B" and runs == [0, 1]
    assert regs[0].stats()["idempotency"] == {"replays": 1, "stored": 0, "lapsed": 1}


class LegacyStore:
    """An idempotency store written before owners (no ``owner`` or ``now`` arguments)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.calls: list[str] = []

    def begin(self, scope: str, key: str, fingerprint: str, now: float, lease: float) -> Record | None:
        self.calls.append("begin")
        return self.inner.begin(scope, key, fingerprint, now, lease)

    def renew(self, scope: str, key: str, now: float, lease: float) -> bool:
        return self.inner.renew(scope, key, now, lease)

    def finish(self, scope: str, key: str, record: Record) -> None:
        self.calls.append("finish")
        self.inner.finish(scope, key, record)

    def release(self, scope: str, key: str) -> None:
        self.calls.append("release")
        self.inner.release(scope, key)


class LegacyBudgets:
    """A budget store written before tickets."""

    def __init__(self) -> None:
        self.inner = MemoryBudgets()

    def take(self, run: str, scope: str, *, limit: int | None, total: int | None, now: float, ttl: float) -> int:
        return self.inner.take(run, scope, limit=limit, total=total, now=now, ttl=ttl)

    def give_back(self, run: str, scope: str) -> None:
        self.inner.give_back(run, scope)

    def used(self, run: str, scope: str, *, now: float) -> int:
        return self.inner.used(run, scope, now=now)

    def forget(self, run: str | None) -> None:
        self.inner.forget(run)


def test_stores_written_before_owners_and_tickets_still_work(tmp_path: Path) -> None:
    legacy = LegacyStore()
    reg = ToolRegistry(
        plugins={"idempotency": IdempotencyPlugin(store=legacy), "budget": BudgetPlugin(store=LegacyBudgets(), total=2)},  # type: ignore[arg-type]
        autoload=False,
    )
    reg.add(lambda n: n, name="echo", rate_limit={"rate": 0.001, "burst": 1})
    assert reg.call("echo", {"n": 1}, idempotency_key="a", context={"run_id": "r"}) == 1
    assert reg.call("echo", {"n": 1}, idempotency_key="a", context={"run_id": "r"}) == 1  # replayed
    refused = reg.try_call("echo", {"n": 2}, idempotency_key="b", context={"run_id": "r"})  # rate limited: released, given back
    assert refused.error is not None and refused.error.kind == "rate_limited"
    assert legacy.calls == ["begin", "finish", "begin", "begin", "release"]
    assert reg.plugins.get("budget").used("r") == 1
    owners, tickets = Accepts("owner", "begin", "renew", "finish", "release"), Accepts("ticket", "give_back", "agive_back")
    assert not owners(legacy) and not tickets(LegacyBudgets())
    assert owners(MemoryStore()) and owners(SQLiteStore(tmp_path / "s.sqlite3")) and tickets(MemoryBudgets())


def test_tokens_are_unique_and_a_forked_child_draws_its_own() -> None:
    import os

    tokens = {new_token() for _ in range(1000)}
    assert len(tokens) == 1000
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first token, to the parent
        os.write(write, new_token().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert child.split("-")[0] != new_token().split("-")[0]


# --------------------------------------------------------------------------- budgets


class RecordingBudgets(MemoryBudgets):
    """Records the tickets the plugin passes; its ``take`` still takes ``ticket=`` (as a store written when takes had tickets)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str | None]] = []

    def take(
        self, run: str, scope: str, *, limit: int | None, total: int | None, now: float, ttl: float, ticket: str | None = None
    ) -> int:
        self.seen.append(("take", ticket))
        return super().take(run, scope, limit=limit, total=total, now=now, ttl=ttl)

    def give_back(self, run: str, scope: str, *, ticket: str | None = None) -> None:
        self.seen.append(("give_back", ticket))
        super().give_back(run, scope, ticket=ticket)


class GiveBackTickets(RecordingBudgets):
    """A store whose ``give_back`` alone takes ``ticket=``."""

    def take(self, run: str, scope: str, *, limit: int | None, total: int | None, now: float, ttl: float) -> int:  # type: ignore[override]
        self.seen.append(("take", None))
        return MemoryBudgets.take(self, run, scope, limit=limit, total=total, now=now, ttl=ttl)


@pytest.mark.parametrize("kind", [RecordingBudgets, GiveBackTickets])
def test_a_take_has_no_ticket_and_each_give_back_its_own(kind: type[RecordingBudgets]) -> None:
    """Only a give-back has a ticket, made when it is sent: the plugin made one per take and passed it to
    ``take``, which ignored it, and called a store whose ``give_back`` alone takes ``ticket=`` without tickets."""
    store = kind()
    reg = ToolRegistry(plugins={"budget": BudgetPlugin(store=store, total=10)}, autoload=False)
    reg.add(lambda: 1, name="f", rate_limit={"rate": 0.001, "burst": 1})
    run = {"run_id": "r"}
    assert reg.try_call("f", context=run).ok
    assert [reg.try_call("f", context=run).error.kind for _ in range(2)] == ["rate_limited"] * 2  # type: ignore[union-attr]
    assert [what for what, _ in store.seen] == ["take", "take", "give_back", "take", "give_back"]
    assert [ticket for what, ticket in store.seen if what == "take"] == [None, None, None]
    given = [ticket for what, ticket in store.seen if what == "give_back"]
    assert None not in given and len(set(given)) == 2
    assert reg.plugins.get("budget").used("r") == 1


def test_redis_keeps_a_runs_give_back_tickets_in_17_bytes_each(redis_url: str) -> None:
    """The kit checks which give-backs a run remembers (the last 64); Redis keeps each as one field's
    17 bytes, and a take keeps none."""
    store = redis_budgets(redis_url)
    taken = [store.take("r", "t", limit=None, total=None, now=0.0, ttl=60.0) for _ in range(70)]
    assert taken == [0] * 70
    assert store.link.command("HGET", store._key("r"), "g") is None
    for i in range(66):
        store.give_back("r", "t", ticket=f"t{i}")
    assert store.used("r", "t", now=0.0) == 4
    assert len(store.link.command("HGET", store._key("r"), "g")) == 17 * 64


class DroppingProxy(RelayProxy):
    """A :class:`RelayProxy` that, armed with a script's SHA, forwards the next command calling it
    and then, when Redis's reply comes back, closes the client's connection instead of passing the
    reply on: Redis applied the command and the client never hears so."""

    def __init__(self, port: int) -> None:
        self.watched: bytes | None = None
        self.armed = False
        self.seen = 0  # commands calling the watched script, since it was armed
        self.dropped = 0
        self.resend: threading.Event | None = None  # set: the command sent again is held until this is set
        self.holding = threading.Event()  # the command sent again has come and is held
        super().__init__(port)

    def arm(self, sha: str, *, hold: bool = False) -> None:
        self.watched, self.armed = sha.encode(), True
        self.resend = threading.Event() if hold else None

    def _connection(self) -> threading.Event:
        return threading.Event()  # set: drop this connection at Redis's next reply

    def _requests(self, client: socket.socket, upstream: socket.socket, state: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                if self.watched is not None and self.watched in data:
                    self.seen += 1
                    if self.armed:
                        self.armed = False
                        state.set()
                    elif self.resend is not None and self.seen == 2:  # the command sent again: held
                        self.holding.set()
                        self.resend.wait(30)
                upstream.sendall(data)
        except OSError:
            pass

    def _replies(self, upstream: socket.socket, client: socket.socket, state: threading.Event) -> None:
        try:
            while data := upstream.recv(65536):
                if state.is_set():  # Redis answered: it ran the command
                    self.dropped += 1
                    for sock in (client, upstream):
                        sock.shutdown(socket.SHUT_RDWR)
                        sock.close()
                    return
                client.sendall(data)
        except OSError:
            pass


@pytest.fixture
def proxy(redis_url: str) -> Iterator[DroppingProxy]:
    from urllib.parse import urlparse

    found = DroppingProxy(urlparse(redis_url).port or 6379)
    try:
        yield found
    finally:
        found.close()


@pytest.mark.parametrize("path", ["call", "acall"])
def test_a_give_back_whose_reply_was_lost_returns_the_unit_once(
    redis_server: RedisServer, proxy: DroppingProxy, path: str
) -> None:
    """The third call of a run with a budget of 3 is refused by the rate limit after its unit was
    taken; Redis applies its give-back, the connection drops before the reply, the client sends it
    again. The run then has one call left, not two (4 calls ran on a budget of 3 before tickets)."""
    from harness_one.state._redis import _BUDGET_GIVE_BACK

    reg = ToolRegistry(state=proxy.url, autoload=False, plugin_options={"budget": {"total": 3}})
    reg.add(lambda: "ran", name="limited", rate_limit={"rate": 0.001, "burst": 2})
    reg.add(lambda: "ran", name="other")
    run = {"run_id": "r"}

    def call(name: str) -> Any:
        if path == "call":
            return reg.try_call(name, context=run)
        return asyncio.run(reg.atry_call(name, context=run))

    assert [call("limited").ok for _ in range(2)] == [True, True]
    client = redis_server.client()
    try:
        client.script_load(_BUDGET_GIVE_BACK.source)  # so the reply dropped is the script's, not NOSCRIPT
    finally:
        client.close()
    proxy.arm(_BUDGET_GIVE_BACK.sha)
    assert call("limited").error.kind == "rate_limited"
    assert (proxy.dropped, proxy.seen) == (1, 2)  # the give-back's reply was lost, and the command was sent again
    assert reg.plugins.get("budget").used("r") == 2
    assert [call("other").ok for _ in range(2)] == [True, False]
    assert reg.plugins.get("budget").used("r") == 3


def test_a_lost_give_back_that_emptied_its_run_sent_again_after_a_new_take_returns_nothing(
    redis_server: RedisServer, redis_url: str, proxy: DroppingProxy
) -> None:
    """A call of a new run (budget 1) takes its unit and is refused by the rate limit; its give-back
    leaves the run with nothing counted, Redis applies it, the reply is lost, and the command sent
    again is held while another worker's call of the run takes the unit. The give-back sent again
    then returns nothing: the hash used to be deleted with its tickets, so it returned the new
    call's unit, and a third call ran on a budget of 1."""
    from harness_one.state._redis import _BUDGET_GIVE_BACK

    budget = {"budget": {"total": 1}}
    reg = ToolRegistry(state=proxy.url + "?timeout=10", autoload=False, plugin_options=budget)
    reg.add(lambda: "ran", name="limited", rate_limit={"rate": 0.001, "burst": 1})
    other = ToolRegistry(state=redis_url, autoload=False, plugin_options=budget)  # another worker, straight to Redis
    other.add(lambda: "ran", name="work")
    assert reg.try_call("limited", context={"run_id": "warm-up"}).ok  # the rate limit's one token
    client = redis_server.client()
    try:
        client.script_load(_BUDGET_GIVE_BACK.source)
    finally:
        client.close()
    proxy.arm(_BUDGET_GIVE_BACK.sha, hold=True)
    refused: list[Any] = []
    caller = threading.Thread(target=lambda: refused.append(reg.try_call("limited", context={"run_id": "r"})))
    caller.start()
    try:
        assert proxy.holding.wait(30)  # applied, its reply lost, and sent again: held
        assert other.plugins.get("budget").used("r") == 0
        assert other.try_call("work", context={"run_id": "r"}).ok  # the run's one unit, taken meanwhile
    finally:
        assert proxy.resend is not None
        proxy.resend.set()
        caller.join(30)
    assert refused[0].error.kind == "rate_limited" and proxy.dropped == 1
    assert other.plugins.get("budget").used("r") == 1
    assert other.try_call("work", context={"run_id": "r"}).error.kind == "budget_exhausted"  # type: ignore[union-attr]
