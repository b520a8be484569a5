"""Budgets as shared state: the store contract in memory, on a real redis-server and on a Redis
Cluster; one round trip per decision; the asyncio path; the fail modes; and 4 processes sharing
one run's budget admitting exactly that budget."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import threading
import time
from typing import Any

import pytest
from redis_support import HoldingProxy, RedisServer
from test_cancel_state import reading, until

from harness_one import Await, Call, ToolError, ToolRegistry, hookimpl
from harness_one.state import AsyncBudgetStore, BudgetStore, MemoryBudgets, StateUnavailable
from harness_one.testing import BudgetStoreContract
from harness_one_plugins import BudgetPlugin

SPAWN = multiprocessing.get_context("spawn")


def budgets(url: str, **options: Any) -> Any:
    from harness_one.state import RedisBudgets, RedisLink

    return RedisBudgets(RedisLink(url), **options)


class TestMemoryBudgets(BudgetStoreContract):
    @pytest.fixture
    def store(self) -> MemoryBudgets:
        return MemoryBudgets()


class TestRedisBudgets(BudgetStoreContract):
    @pytest.fixture
    def store(self, redis_url: str) -> Any:
        return budgets(redis_url, server_time=False)


class TestClusterBudgets(BudgetStoreContract):
    @pytest.fixture
    def store(self, cluster_url: str) -> Any:
        return budgets(cluster_url + "?timeout=2", server_time=False)


def test_the_redis_store_has_async_twins_and_the_memory_store_none() -> None:
    redis_store = budgets("redis://127.0.0.1:1/0")
    assert isinstance(redis_store, AsyncBudgetStore) and isinstance(MemoryBudgets(), BudgetStore)
    assert not isinstance(MemoryBudgets(), AsyncBudgetStore)


def test_one_round_trip_per_decision_by_sha_keys_and_ttl(redis_server: RedisServer, redis_url: str) -> None:
    store = budgets(redis_url + "?prefix=app:")
    assert store.take("warm", "t", limit=None, total=None, now=0.0, ttl=60.0) == 0  # NOSCRIPT: EVAL loads it
    before = redis_server.commandstats()
    assert before.get("eval") == 1 and before.get("evalsha") == 1
    answers = [store.take("run-1", "search", limit=30, total=None, now=0.0, ttl=60.0) for _ in range(100)]
    after = redis_server.commandstats()
    assert answers.count(0) == 30 and answers.count(1) == 70
    grew = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    # The client sent nothing but EVALSHA; what else grew ran inside the scripts (INFO is this test).
    assert grew.pop("evalsha") == 100 and grew.pop("info") == 1
    assert set(grew) <= {"time", "hmget", "hset", "pexpire", "del"}, grew
    client = redis_server.client()
    try:
        assert sorted(client.keys("*")) == [b"app:budget:{4:warm}", b"app:budget:{5:run-1}"]
        assert client.hget("app:budget:{5:run-1}", "n:search") == b"30"
        assert 59_000 < client.pttl("app:budget:{5:run-1}") <= 60_000  # a finished run expires with its ttl
    finally:
        client.close()


def test_the_state_url_shares_one_runs_budget_between_registries(redis_url: str) -> None:
    regs = [ToolRegistry(state=redis_url, autoload=False, plugin_options={"budget": {"total": 3}}) for _ in range(2)]
    for reg in regs:
        reg.add(lambda: 1, name="f")
        assert type(reg.plugins.get("budget").store).__name__ == "RedisBudgets"
    run = {"run_id": "shared"}
    answers = [regs[i % 2].try_call("f", context=run).ok for i in range(5)]
    assert answers == [True, True, True, False, False]
    assert regs[1].plugins.get("budget").used("shared") == 3
    assert regs[0].stats()["budget"] == {"refused": 1}  # no run count: it lives in Redis
    regs[0].plugins.get("budget").reset("shared")
    assert regs[1].try_call("f", context=run).ok


def test_a_call_that_never_ran_gives_its_unit_back_in_redis(redis_url: str) -> None:
    reg = ToolRegistry(state=redis_url, autoload=False)
    reg.add(lambda: "pong", name="ping", rate_limit={"rate": 0.001, "burst": 1}, options={"max_calls": 2})
    run = {"run_id": "r"}
    assert reg.try_call("ping", context=run).ok
    assert reg.try_call("ping", context=run).error.kind == "rate_limited"  # type: ignore[union-attr]
    assert reg.plugins.get("budget").used("r", "ping") == 1


@pytest.mark.parametrize("where", ["memory", "redis"])
def test_a_hundred_calls_held_at_once_all_give_their_units_back(where: str, request: pytest.FixtureRequest) -> None:
    """100 calls of one run each take a unit, then all wait for approval (none runs): every unit
    comes back. When a store kept only the tickets of a run's last 64 takes, 36 stayed used."""
    state = "memory:" if where == "memory" else request.getfixturevalue("redis_url")
    reg = ToolRegistry(state=state, autoload=False)
    held = threading.Barrier(100)

    def ask(call: Any) -> bool:
        held.wait(timeout=30)  # every call has taken its unit before any gives it back
        return True

    reg.add(lambda: "sent", name="send", options={"max_calls": 1000, "requires_approval": ask})
    kinds: list[str] = []

    def one() -> None:
        kinds.append(reg.try_call("send", context={"run_id": "held"}).error.kind)  # type: ignore[union-attr]

    threads = [threading.Thread(target=one) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert kinds == ["approval_required"] * 100
    assert reg.plugins.get("budget").used("held") == 0


async def test_acall_counts_through_the_asyncio_client(redis_url: str) -> None:
    reg = ToolRegistry(state=redis_url, autoload=False)
    reg.add(lambda: 1, name="f", options={"max_calls": 4})
    ran: list[Any] = []

    async def one() -> None:
        result = await reg.atry_call("f", context={"run_id": "async"})
        ran.append(result.ok if result.ok else result.error.kind)  # type: ignore[union-attr]

    await asyncio.gather(*(one() for _ in range(10)))
    assert ran.count(True) == 4 and ran.count("budget_exhausted") == 6
    assert reg.plugins.get("budget").used("async") == 4


def test_fail_modes_when_redis_is_down(redis_server: RedisServer, redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    url = redis_url + "?timeout=0.2"
    lax = ToolRegistry(state=url, autoload=False)
    strict = ToolRegistry(state=url, autoload=False, plugins={"budget": BudgetPlugin(on_state_error="closed")})
    for reg in (lax, strict):
        reg.add(lambda: 1, name="f", options={"max_calls": 1})
    assert lax.call("f", context={"run_id": "before"}) == 1
    redis_server.stop()
    try:
        with caplog.at_level(logging.WARNING):
            assert lax.call("f", context={"run_id": "r"}) == 1  # open (default): runs uncounted, with a warning
        assert "budget: shared state unavailable" in caplog.text
        assert lax.stats()["budget"]["state_failed_open"] == 1
        with pytest.raises(StateUnavailable) as closed:
            strict.call("f", context={"run_id": "r"})
        assert closed.value.tool == "f" and strict.stats()["budget"]["state_failed_closed"] == 1
    finally:
        redis_server.start()
    # Restarted without persistence: the counters were lost, the old run starts again at zero.
    budget, deadline = lax.plugins.get("budget"), time.monotonic() + 5
    while True:  # until the link's fail-fast window ends and it reconnects
        try:
            assert budget.used("before") == 0
            break
        except StateUnavailable:
            assert time.monotonic() < deadline
    assert lax.try_call("f", context={"run_id": "before"}).ok
    assert lax.try_call("f", context={"run_id": "before"}).error.kind == "budget_exhausted"  # type: ignore[union-attr]


def budget_worker(url: str, threads: int, start: float, out: Any) -> None:
    """Call a budgeted tool of one shared run from ``threads`` threads until refused; report the
    calls admitted (the tool also counts its own runs in Redis)."""
    import redis

    counter = redis.Redis.from_url(url)
    reg = ToolRegistry(state=url, autoload=False)
    reg.add(lambda: counter.incr("test:budget-runs"), name="work", options={"max_calls": 50})
    admitted = [0] * threads

    def run(i: int) -> None:
        while time.time() < start:
            time.sleep(0.001)
        while True:
            result = reg.try_call("work", context={"run_id": "one-run"})
            if not result.ok:
                assert result.error.kind == "budget_exhausted", result.error  # type: ignore[union-attr]
                return
            admitted[i] += 1

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put(sum(admitted))


def test_four_processes_share_one_runs_budget_exactly(redis_server: RedisServer, redis_url: str) -> None:
    out = SPAWN.Queue()
    start = time.time() + 2.5  # time for the children to start and import
    procs = [SPAWN.Process(target=budget_worker, args=(redis_url, 8, start, out)) for _ in range(4)]
    for p in procs:
        p.start()
    admitted = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sum(admitted) == 50, admitted
    assert int(redis_server.client().get("test:budget-runs")) == 50  # the tool ran exactly 50 times


class RefusesThenWaits:
    """Refuses a call whose context says ``refuse`` after the budget took its unit; its ``on_error``
    then waits for ``gate``, before the budget's (``trylast``) gives the unit back."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if call.context.get("refuse"):
            raise ToolError("refused")

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Await | None:
        async def wait() -> None:
            self.entered.set()
            await self.gate.wait()

        return Await(lambda: None, wait) if call.context.get("refuse") and not call.cancelled else None


@pytest.mark.parametrize("where", ["queued behind another write", "on the wire"])
def test_a_give_back_a_cancel_cut_short_is_sent_again(proxy: HoldingProxy, where: str) -> None:
    """A call refused after the budget took its unit is cancelled while its give-back is on its way
    to Redis: the give-back is sent again before the cancellation goes on (its ticket makes that safe),
    as an idempotency release or a slot's is. Queued behind another write, it had never been sent
    (before, the run kept the unit as used); on the wire, Redis ran it, and the one sent again
    finds its ticket and does nothing (the unit comes back once)."""
    from harness_one.state._redis import _BUDGET_GIVE_BACK, _BUDGET_USED

    reg = ToolRegistry(state=proxy.url + "?timeout=5&prefix=bc:", autoload=False)
    refuses = RefusesThenWaits()
    reg.plugins.register(refuses, name="refuses")
    reg.add(lambda: "ran", name="f", options={"max_calls": 5})
    budget, link = reg.plugins.get("budget"), reg.state.link()

    async def scenario() -> None:
        assert await reg.acall("f", context={"run_id": "r"}) == "ran"  # one unit used
        budget.store.give_back("other", "f")  # the give-back's script is loaded (nothing to give back)
        task = asyncio.create_task(reg.acall("f", context={"run_id": "r", "refuse": True}))
        await refuses.entered.wait()  # its unit taken (2 used), the call refused
        if where == "on the wire":
            hold = proxy.hold(_BUDGET_GIVE_BACK)
            refuses.gate.set()
            await hold.wait()  # Redis gave the unit back; the reply is held
            await reading(task)
        else:
            hold = proxy.hold(_BUDGET_USED)
            first = asyncio.create_task(link.arun(_BUDGET_USED, ["bc:budget:{1:r}"], ["", "f"]))
            await hold.wait()
            refuses.gate.set()
            batcher = link._batchers[asyncio.get_running_loop()]
            await until(lambda: any(pending.script is _BUDGET_GIVE_BACK for pending in batcher.queue))
        task.cancel()
        hold.release()
        with pytest.raises(asyncio.CancelledError):
            await task
        if where != "on the wire":
            assert int(await first) == 2
        assert budget.used("r") == 1

    asyncio.run(scenario())


class TakesOnTheLoop:
    """A Redis budget store's ``take`` / ``untake`` with tickets, blocking or through the awaitable twins."""

    def __init__(self, store: Any, mode: str) -> None:
        self.store, self.mode = store, mode

    def take(self, ticket: str | None = None, run: str = "r", limit: int | None = None) -> int:
        keywords = {"limit": limit, "total": None, "now": 0.0, "ttl": 60.0, "ticket": ticket}
        if self.mode == "sync":
            return int(self.store.take(run, "t", **keywords))
        return int(asyncio.run(self.store.atake(run, "t", **keywords)))

    def untake(self, ticket: str, run: str = "r") -> None:
        if self.mode == "sync":
            self.store.untake(run, "t", ticket=ticket)
        else:
            asyncio.run(self.store.auntake(run, "t", ticket=ticket))

    def used(self, run: str = "r") -> tuple[int, int]:
        return self.store.used(run, "t", now=0.0), self.store.used(run, "*", now=0.0)


def ticketed_takes(store: Any, mode: str) -> None:
    """A take sent twice counts once; ``untake`` returns a counted take's unit once, nothing else."""
    takes = TakesOnTheLoop(store, mode)
    assert [takes.take("a"), takes.take("a")] == [0, 0]  # the same take sent again
    assert takes.used() == (1, 1)
    assert takes.take() == 0 and takes.used() == (2, 2)  # another call's unit
    takes.untake("a")
    takes.untake("a")  # sent again: nothing more
    assert takes.used() == (1, 1)
    assert takes.take("a") == 0 and takes.used() == (1, 1)  # the take, sent again after its untake
    takes.untake("never-came")  # a take Redis never got: the other call keeps its unit
    assert takes.used() == (1, 1)
    assert takes.take("never-came") == 0 and takes.used() == (1, 1)  # it comes late: counts nothing
    assert takes.take("refused", limit=1) == 1  # refused: nothing counted, nothing to give back
    takes.untake("refused")
    assert takes.used() == (1, 1)
    takes.untake("lost", run="empty")  # a run with nothing counted
    assert takes.take("lost", run="empty") == 0 and takes.used("empty") == (0, 0)
    assert takes.take(run="empty") == 0 and takes.used("empty") == (1, 1)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_take_with_a_ticket_counts_once_and_untake_gives_back_only_what_it_counted(
    redis_server: RedisServer, redis_url: str, mode: str
) -> None:
    """A take sent twice (its reply lost, the link sends it again) counted twice; with a ticket it
    counts once. ``untake`` of a take whose reply was cut short returns its unit if Redis counted it,
    once, and never a unit another call holds: of a take Redis never got (cancelled before its
    write) it returns nothing, and that take, should it come after all, counts nothing. The
    ticket of an ``untake`` of a run with nothing counted is kept a minute, no more."""
    from harness_one.state._redis import KEEP_GIVE_BACKS

    store = budgets(redis_url + "?prefix=tt:", server_time=False)
    ticketed_takes(store, mode)
    store.untake("other", "t", ticket="lost")
    client = redis_server.client()
    try:
        assert set(client.hgetall("tt:budget:{5:other}")) == {b"c"}
        assert 0 < client.pttl("tt:budget:{5:other}") <= KEEP_GIVE_BACKS * 1000
        assert len(client.hget("tt:budget:{1:r}", "c")) == 17 * 3  # a, never-came, refused
    finally:
        client.close()


def test_take_tickets_on_a_cluster(cluster_url: str) -> None:
    ticketed_takes(budgets(cluster_url + "?timeout=2", server_time=False), "async")


@pytest.mark.parametrize("where", ["on the wire", "queued behind another write"])
def test_a_take_a_cancel_cut_short_is_given_back_once(proxy: HoldingProxy, where: str) -> None:
    """An ``acall`` cancelled while its take is on its way to Redis. On the wire, Redis counted the
    unit, but the call never ran and the run kept it as used (the plugin holds a unit only once the
    reply is read): of a budget of 3, two calls ran and the next was refused. The take now has a
    ticket, and the plugin sends ``untake`` before the cancellation goes on: the unit Redis counted
    comes back once. Queued behind another write, the take was never sent; its ``untake`` returns
    nothing (a plain give-back would return the unit of the call that ran), and the take counts
    nothing should it come late."""
    from harness_one.state._redis import _BUDGET_TAKE, _BUDGET_USED

    reg = ToolRegistry(state=proxy.url + "?timeout=5&prefix=bt:", autoload=False)
    ran: list[str] = []
    reg.add(lambda: ran.append("f") or "ran", name="f", options={"max_calls": 3})
    budget, link = reg.plugins.get("budget"), reg.state.link()

    async def scenario() -> None:
        assert await reg.acall("f", context={"run_id": "r"}) == "ran"  # one unit used; the take's script is loaded
        first = None
        if where == "on the wire":
            hold = proxy.hold(_BUDGET_TAKE)
            task = asyncio.create_task(reg.acall("f", context={"run_id": "r"}))
            await hold.wait()  # Redis counted the unit; the reply is held
            await reading(task)
        else:
            hold = proxy.hold(_BUDGET_USED)
            first = asyncio.create_task(link.arun(_BUDGET_USED, ["bt:budget:{1:r}"], ["", "f"]))
            await hold.wait()
            task = asyncio.create_task(reg.acall("f", context={"run_id": "r"}))
            batcher = link._batchers[asyncio.get_running_loop()]
            await until(lambda: any(pending.script is _BUDGET_TAKE for pending in batcher.queue))
        task.cancel()
        hold.release()
        with pytest.raises(asyncio.CancelledError):
            await task
        if first is not None:
            assert int(await first) == 1
        assert budget.used("r") == 1 and ran == ["f"]  # the cancelled call never ran, and holds nothing
        assert [await reg.acall("f", context={"run_id": "r"}) for _ in range(2)] == ["ran", "ran"]
        refused = await reg.atry_call("f", context={"run_id": "r"})
        assert refused.error is not None and refused.error.kind == "budget_exhausted"
        assert budget.used("r") == 3 and ran == ["f"] * 3

    asyncio.run(scenario())
