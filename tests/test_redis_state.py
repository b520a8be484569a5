"""Redis backends against a real redis-server: the shared contracts, one round trip per decision,
scripts by SHA, key layout, configuration, the asyncio client, and the fail modes."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from redis_support import RedisServer

from harness_one import CircuitOpen, IdempotencyConflict, ManualClock, RateLimitExceeded, ToolBusy, ToolRegistry, ToolTimeout
from harness_one._config import load_settings
from harness_one.state import MemoryCircuits, MemorySlots, Record, State, StateUnavailable
from harness_one.testing import (
    CircuitStoreContract,
    ConcurrencySlotsContract,
    IdempotencyStoreContract,
    RateLimitBackendContract,
    RateLimitPluginContract,
)
from harness_one_plugins import CircuitBreakerPlugin, ConcurrencyPlugin, IdempotencyPlugin, RateLimitPlugin


def link(url: str, **options: Any) -> Any:
    from harness_one.state import RedisLink

    return RedisLink(url, **options)


class TestRedisBuckets(RateLimitBackendContract):
    @pytest.fixture
    def backend(self, redis_url: str) -> Any:
        from harness_one.state import RedisBuckets

        return RedisBuckets(link(redis_url), server_time=False)


class TestRedisBucketsInThePlugin(RateLimitPluginContract):
    @pytest.fixture
    def make_plugin(self, redis_url: str) -> Any:
        from harness_one.state import RedisBuckets

        shared = link(redis_url)
        return lambda **options: RateLimitPlugin(backend=RedisBuckets(shared, server_time=False), **options)


class TestRedisStore(IdempotencyStoreContract):
    @pytest.fixture
    def store(self, redis_url: str) -> Any:
        from harness_one.state import RedisStore

        return RedisStore(link(redis_url))


class TestMemorySlots(ConcurrencySlotsContract):
    @pytest.fixture
    def slots(self) -> MemorySlots:
        return MemorySlots()


class TestRedisSlots(ConcurrencySlotsContract):
    expires_leases = True

    @pytest.fixture
    def slots(self, redis_url: str) -> Any:
        from harness_one.state import RedisSlots

        return RedisSlots(link(redis_url), server_time=False)


class TestMemoryCircuits(CircuitStoreContract):
    @pytest.fixture
    def circuits(self) -> MemoryCircuits:
        return MemoryCircuits()


class TestRedisCircuits(CircuitStoreContract):
    @pytest.fixture
    def circuits(self, redis_url: str) -> Any:
        from harness_one.state import RedisCircuits

        return RedisCircuits(link(redis_url), server_time=False)


def test_one_round_trip_per_decision_and_scripts_by_sha(redis_server: RedisServer, redis_url: str) -> None:
    from harness_one.state import RedisBuckets

    buckets = RedisBuckets(link(redis_url))
    buckets.acquire("warm", rate=1, burst=1, cost=1, now=0)  # NOSCRIPT on a flushed cache: EVAL loads it
    before = redis_server.commandstats()
    assert before.get("eval") == 1 and before.get("evalsha") == 1
    waits = [buckets.acquire("k", rate=1, burst=50, cost=1, now=0) for _ in range(200)]
    after = redis_server.commandstats()
    assert sum(w == 0 for w in waits) in (50, 51)  # the burst, plus at most a token refilled meanwhile
    assert after["evalsha"] - before["evalsha"] == 200
    grew = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    # Redis counts the commands a script runs too: each ran exactly once per script call, so the
    # client sent nothing but EVALSHA (INFO is this test asking).
    assert grew == {"evalsha": 200, "time": 200, "hmget": 200, "hset": 200, "pexpire": 200, "info": 1}


def test_server_clock_ttl_prefix_and_hash_tags(redis_server: RedisServer, redis_url: str) -> None:
    from harness_one.state import RedisBuckets

    a = RedisBuckets(link(redis_url + "?prefix=app-a:"))
    b = RedisBuckets(link(redis_url, prefix="app-b:"))
    assert a.acquire("tool", rate=10, burst=1, cost=1, now=-5e9) == 0.0  # the caller's now is ignored
    assert a.acquire("tool", rate=10, burst=1, cost=1, now=1e12) == pytest.approx(0.1, abs=0.01)
    assert b.acquire("tool", rate=10, burst=1, cost=1, now=0) == 0.0  # another namespace, another bucket
    client = redis_server.client()
    assert sorted(client.keys("*")) == [b"app-a:rl:{tool}", b"app-b:rl:{tool}"]
    assert 0 < client.pttl("app-a:rl:{tool}") <= 1100  # full again after burst / rate: the key expires
    client.close()


async def test_async_client_decisions(redis_url: str) -> None:
    from harness_one.state import RedisBuckets, RedisSlots, RedisStore

    shared = link(redis_url)
    buckets = RedisBuckets(shared, server_time=False)
    waits = await asyncio.gather(*(buckets.aacquire("k", rate=1, burst=5, cost=1, now=0) for _ in range(8)))
    assert sorted(waits) == [0.0] * 5 + [pytest.approx(1.0)] * 3  # a refusal takes nothing
    store = RedisStore(shared)
    owners = await asyncio.gather(*(store.abegin("t", "k", "fp", 0.0, 30.0) for _ in range(8)))
    assert sum(o is None for o in owners) == 1
    await store.afinish("t", "k", Record("fp", "done", 100.0, True, {"v": 1}))
    found = await store.abegin("t", "k", "fp", 1.0, 30.0)
    assert found is not None and found.value == {"v": 1}
    slots = RedisSlots(shared)
    taken = await asyncio.gather(*(slots.aacquire("w", f"h{i}", cap=3, total=None, now=0, lease=5) for i in range(5)))
    assert [t[0] for t in taken].count(True) == 3
    assert shared.client is not shared.aclient()  # the sync pool is not used on the loop
    await shared.aclose()


def test_bucket_names_that_cannot_be_sent_are_digested(redis_url: str) -> None:
    """A lone surrogate or a 100,000-character key made the link fail for every caller batched with it."""
    from harness_one.state import RedisBuckets

    buckets = RedisBuckets(link(redis_url), server_time=False)

    class Odd:
        def __repr__(self) -> str:
            return "report\udcff.txt"

    for key in (Odd(), "x" * 100_000, ("tool", "line\nbreak")):
        assert buckets.acquire(key, rate=1.0, burst=1.0, cost=1.0, now=0.0) == 0.0
        assert buckets.acquire(key, rate=1.0, burst=1.0, cost=1.0, now=0.0) == pytest.approx(1.0)  # one bucket, kept
    assert buckets.acquire("plain", rate=1.0, burst=1.0, cost=1.0, now=0.0) == 0.0  # the link stays up


def test_redis_buckets_refill_from_a_clock_that_stepped_back(redis_url: str) -> None:
    from harness_one.state import RedisBuckets

    buckets = RedisBuckets(link(redis_url), server_time=False)
    assert buckets.acquire("back", rate=10.0, burst=1.0, cost=1.0, now=1000.0) == 0.0
    assert buckets.acquire("back", rate=10.0, burst=1.0, cost=1.0, now=940.0) == pytest.approx(0.1)
    assert buckets.acquire("back", rate=10.0, burst=1.0, cost=1.0, now=940.1) == 0.0  # refused until 1000 before


def test_an_outcome_too_large_for_a_record_is_not_stored(redis_url: str) -> None:
    """Over ``max_value`` the outcome is returned and not stored (a 150 MB record was stored, then timed out on
    every replay); the key keeps OutcomeNotReplayable, so the tool does not run again for it."""
    from harness_one.state import RedisStore
    from harness_one_plugins.idempotency import OutcomeNotReplayable

    store = RedisStore(link(redis_url), max_value=1000)
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store)}, autoload=False)
    runs: list[int] = []
    reg.add(lambda n: runs.append(1) or "x" * n, name="big")
    assert reg.call("big", {"n": 5000}, idempotency_key="k") == "x" * 5000
    again = reg.try_call("big", {"n": 5000}, idempotency_key="k").error
    assert isinstance(again, OutcomeNotReplayable) and again.replayed and len(runs) == 1  # not kept, not run again
    assert reg.call("big", {"n": 10}, idempotency_key="small") == reg.call("big", {"n": 10}, idempotency_key="small")
    assert len(runs) == 2  # within the bound: stored and replayed
    assert RedisStore(link(redis_url)).max_value == 8 << 20


def test_state_url_puts_every_plugin_on_redis(redis_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from harness_one.state import RedisBuckets, RedisCircuits, RedisSlots, RedisStore

    reg = ToolRegistry(state=redis_url + "?prefix=svc:", autoload=False)
    assert isinstance(reg.plugins.get("rate_limit").backend, RedisBuckets)
    assert isinstance(reg.plugins.get("idempotency").store, RedisStore)
    assert isinstance(reg.plugins.get("concurrency").slots, RedisSlots)
    assert isinstance(reg.plugins.get("circuit_breaker").store, RedisCircuits)
    assert reg.state.link().prefix == "svc:" and reg.state.shared
    other = ToolRegistry(state=redis_url, autoload=False)
    assert other.state.link() is not reg.state.link()  # pools per registry
    monkeypatch.setenv("HARNESS_ONE_REDIS_URL", redis_url)
    assert load_settings().state == redis_url
    monkeypatch.delenv("HARNESS_ONE_REDIS_URL")
    config = tmp_path / "harness-one.toml"
    config.write_text(f'[state]\nurl = "sqlite:///{tmp_path}/x.db"\nredis_url = "{redis_url}"\n')
    assert load_settings(str(config)).state == redis_url
    with pytest.raises(ValueError, match="unknown state URL"):
        State("valkey://x")


def test_plugins_share_state_across_registries(redis_url: str) -> None:
    """Two registries on one Redis behave as one: limits, keys, slots and circuits are shared."""
    regs = [ToolRegistry(state=redis_url, autoload=False) for _ in range(2)]
    runs = []
    for reg in regs:
        reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 2})
        reg.add(lambda n: runs.append(n) or len(runs), name="once")
    assert regs[0].call("limited") == regs[1].call("limited") == 1
    with pytest.raises(RateLimitExceeded):
        regs[0].call("limited")
    assert regs[0].call("once", {"n": 1}, idempotency_key="k") == regs[1].call("once", {"n": 1}, idempotency_key="k") == 1
    assert runs == [1]


def test_slots_cap_lease_and_total(redis_url: str) -> None:
    from harness_one.state import RedisSlots

    slots = RedisSlots(link(redis_url), server_time=False)
    assert slots.acquire("a", "h1", cap=2, total=3, now=0, lease=5) == (True, 0, 0)
    assert slots.acquire("a", "h2", cap=2, total=3, now=0, lease=5) == (True, 1, 1)
    assert slots.acquire("a", "h3", cap=2, total=3, now=0, lease=5) == (False, 2, 2)
    assert slots.acquire("b", "h4", cap=None, total=3, now=0, lease=5) == (True, 0, 2)
    assert slots.acquire("b", "h5", cap=None, total=3, now=0, lease=5) == (False, 1, 3)  # the total is full
    assert slots.renew("a", "h1", now=4, lease=5) is True  # held until 9
    assert slots.acquire("a", "h6", cap=2, total=None, now=5, lease=5) == (True, 1, 1)  # h2 and h4 lapsed at 5
    assert slots.running("a", now=5) == 2 and slots.running(None, now=5) == 2
    slots.release("a", "h1")
    assert slots.renew("a", "h1", now=5, lease=5) is False
    assert slots.running("a", now=5) == 1


def test_circuit_opens_for_every_registry(redis_url: str) -> None:
    from harness_one.state import RedisCircuits

    clock = ManualClock(start=1000.0)
    shared = link(redis_url)
    policy = {"failure_ratio": 0.5, "min_calls": 4, "window": 10, "open_for": 5, "probes": 2}

    def make() -> ToolRegistry:
        plugin = CircuitBreakerPlugin(store=RedisCircuits(shared, server_time=False))
        reg = ToolRegistry(clock=clock, autoload=False, plugins={"circuit_breaker": plugin})
        reg.add(lambda ok: ok or 1 / 0, name="flaky", circuit_breaker=policy)
        return reg

    a, b = make(), make()
    for _ in range(2):
        a.try_call("flaky", {"ok": True})
        a.try_call("flaky", {"ok": False})
    with pytest.raises(CircuitOpen) as refused:
        b.call("flaky", {"ok": True})  # a's failures opened it for b
    assert refused.value.retry_after == pytest.approx(5.0)
    assert b.plugins.get("circuit_breaker").state("flaky") == "open"
    clock.advance(5)
    assert b.call("flaky", {"ok": True}) is True  # a probe
    assert a.call("flaky", {"ok": True}) is True  # the second probe closes it
    assert a.plugins.get("circuit_breaker").state("flaky") == "closed"
    assert a.stats()["tools"]["flaky"]["circuit"] == {"state": "closed", "calls": 0, "failures": 0, "opened": 1}
    clock.advance(20)
    for _ in range(4):
        a.try_call("flaky", {"ok": False})
    clock.advance(5)
    assert b.try_call("flaky", {"ok": False}).error.kind == "tool_failed"  # a failed probe reopens
    assert isinstance(a.try_call("flaky", {"ok": True}).error, CircuitOpen)


def test_fail_modes_when_redis_is_down(redis_server: RedisServer, redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry(state=redis_url + "?timeout=0.2", autoload=False)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 1})
    reg.add(lambda: 2, name="keyed")
    reg.add(lambda: 3, name="capped", max_concurrency=1)
    reg.add(lambda: 4, name="guarded", circuit_breaker=True)
    reg.call("limited")
    redis_server.stop()
    try:
        with caplog.at_level(logging.WARNING):
            assert reg.call("limited") == 1  # rate limits fail open, with a warning and a count
        assert reg.stats()["rate_limit"]["state_failed_open"] == 1
        assert "shared state unavailable" in caplog.text
        with pytest.raises(StateUnavailable) as closed:
            reg.call("keyed", idempotency_key="k")  # idempotency fails closed: the key never runs twice
        assert closed.value.tool == "keyed" and closed.value.kind == "state_unavailable" and closed.value.retry_after
        with pytest.raises(StateUnavailable):
            reg.call("capped")
        assert reg.call("guarded") == 4  # circuits fail open
    finally:
        redis_server.start()
    strict = ToolRegistry(state=redis_url, autoload=False, plugins={"rate_limit": RateLimitPlugin(on_state_error="closed")})
    assert strict.plugins.get("rate_limit").fail.mode == "closed"
    with pytest.raises(ValueError, match="on_state_error"):
        RateLimitPlugin(on_state_error="maybe")


@pytest.mark.parametrize(
    "make_unable, undo",
    [
        (("REPLICAOF", "127.0.0.1", "1"), ("REPLICAOF", "NO", "ONE")),  # a failover demoted it: READONLY
        (("CONFIG", "SET", "maxmemory", "1"), ("CONFIG", "SET", "maxmemory", "0")),  # full, noeviction: OOM
    ],
    ids=["read-only replica", "out of memory"],
)
def test_error_replies_of_a_server_that_cannot_write_take_the_fail_modes(
    redis_server: RedisServer, redis_url: str, make_unable: tuple[str, ...], undo: tuple[str, ...]
) -> None:
    reg = _unable_registry(redis_url)
    admin = redis_server.client()
    admin.execute_command(*make_unable)
    try:
        _fail_modes_hold(reg)
    finally:
        admin.execute_command(*undo)
        admin.close()


def test_a_server_refusing_writes_after_a_failed_snapshot_takes_the_fail_modes(redis_server: RedisServer, tmp_path: Path) -> None:
    """``MISCONF``: a snapshot failed (its directory is gone), so Redis refuses writes until one succeeds."""
    own = RedisServer(tmp_path / "gone")  # a server of its own: its directory is taken away
    own.directory.mkdir()
    own.start()
    admin = own.client()
    try:
        reg = _unable_registry(own.url)
        own.directory.rmdir()
        admin.config_set("save", "3600 1")
        admin.bgsave()
        while admin.info("persistence")["rdb_bgsave_in_progress"]:
            time.sleep(0.01)
        assert admin.info("persistence")["rdb_last_bgsave_status"] == "err"
        _fail_modes_hold(reg)
        admin.config_set("save", "")  # no snapshots wanted: writable again
        time.sleep(reg.plugins.get("rate_limit").backend.link.down_for)  # the fail-fast window ends
        assert reg.call("keyed", idempotency_key="k") == 2
    finally:
        admin.close()
        own.stop()


def _unable_registry(redis_url: str) -> ToolRegistry:
    reg = ToolRegistry(state=redis_url, autoload=False)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 1})
    reg.add(lambda: 2, name="keyed")
    reg.add(lambda: 4, name="guarded", circuit_breaker=True)
    reg.call("limited")
    return reg


def _fail_modes_hold(reg: ToolRegistry) -> None:
    assert reg.call("limited") == 1  # rate limits fail open, as when Redis is down
    assert reg.stats()["rate_limit"]["state_failed_open"] == 1
    with pytest.raises(StateUnavailable, match="unavailable"):
        reg.call("keyed", idempotency_key="k")  # idempotency fails closed
    assert reg.call("guarded") == 4


def test_asyncio_clients_of_closed_loops_are_let_go(redis_server: RedisServer, redis_url: str) -> None:
    reg = ToolRegistry(state=redis_url, autoload=False)

    async def one() -> int:
        return 1

    reg.add(one, name="limited", rate_limit={"rate": 1e6, "burst": 1e6})
    link = reg.plugins.get("rate_limit").backend.link
    for _ in range(20):  # each asyncio.run is a new event loop
        assert asyncio.run(reg.acall("limited")) == 1
    assert len(link._aclients) == 1 and len(link._batchers) == 1  # only the last loop's
    gc.collect()
    admin = redis_server.client()
    clients = admin.client_list()
    admin.close()
    assert len(clients) <= 4  # this test's admin, the fixture's stats client, the last loop's connection


def test_reconnects_after_a_restart(redis_server: RedisServer, redis_url: str) -> None:
    """A restarted server (empty: no persistence here) is used again once the fail-fast window ends."""
    reg = ToolRegistry(
        state=redis_url,
        autoload=False,
        plugins={"idempotency": IdempotencyPlugin(), "concurrency": ConcurrencyPlugin(on_state_error="open")},
    )
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 1})
    reg.add(lambda n: n, name="keyed", max_concurrency=1)
    reg.call("limited")
    assert reg.call("keyed", {"n": 1}, idempotency_key="a") == 1
    redis_server.stop()
    redis_server.start()
    # The pool's old connections are dead: the first command is sent again on a new one.
    assert reg.call("limited") == 1  # a fresh bucket: the restart lost it (no persistence configured)
    with pytest.raises(RateLimitExceeded):
        reg.call("limited")
    assert reg.call("keyed", {"n": 2}, idempotency_key="a") == 2  # the record was lost with the data
    assert reg.stats()["concurrency"].get("state_failed_open", 0) == 0


def test_conflict_and_busy_across_registries(redis_url: str) -> None:
    import threading

    gate = threading.Event()
    started = threading.Event()
    regs = [ToolRegistry(state=redis_url, autoload=False, block=["retry"]) for _ in range(2)]

    def slow() -> str:
        started.set()
        gate.wait(5)
        return "done"

    for reg in regs:
        reg.add(slow, name="slow", max_concurrency=1)
    first = threading.Thread(target=lambda: regs[0].call("slow", idempotency_key="k"))
    first.start()
    assert started.wait(5)
    with pytest.raises(ToolBusy):
        regs[1].call("slow")
    with pytest.raises(IdempotencyConflict):
        regs[1].call("slow", idempotency_key="k")
    gate.set()
    first.join()
    assert regs[1].call("slow", idempotency_key="k") == "done"


async def test_acall_goes_through_the_redis_plugins(redis_url: str) -> None:
    """Concurrent acalls share one bucket: the limit holds (``test_redis_async`` checks the client used)."""
    reg = ToolRegistry(state=redis_url, autoload=False)

    async def tool() -> int:
        return 1

    reg.add(tool, name="limited", rate_limit={"rate": 0.001, "burst": 3})
    results = await asyncio.gather(*(reg.atry_call("limited") for _ in range(5)))
    assert [r.ok for r in results].count(True) == 3
    assert all(isinstance(r.error, RateLimitExceeded) for r in results if not r.ok)


@pytest.mark.parametrize("timeout", ["abc", "0", "-1", "inf", ""])
def test_a_malformed_option_of_a_redis_url_is_refused_when_the_registry_is_made(timeout: str) -> None:
    # Not later, plugin by plugin: a plugin that failed to set up its Redis backend would be left
    # on state of its own process, and N workers would admit N times the limit.
    with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
        ToolRegistry(state=f"redis://user:secret@127.0.0.1:1/0?timeout={timeout}", autoload=False)
    with pytest.raises(ValueError) as err:
        State(f"redis://user:secret@127.0.0.1:1/0?timeout={timeout}")
    assert "secret" not in str(err.value)


def test_a_shared_slot_of_a_tool_abandoned_at_its_timeout_is_renewed_until_it_returns(redis_url: str) -> None:
    """Across processes too: the slot stays taken, its lease renewed, while the abandoned thread runs."""
    reg = ToolRegistry(state=redis_url, autoload=False, plugins={"concurrency": ConcurrencyPlugin(lease=0.3)})
    other = ToolRegistry(state=redis_url, autoload=False)  # another process's view of the same slots
    release = threading.Event()
    reg.add(lambda: release.wait(10) and "done", name="work", max_concurrency=1, timeout=0.05)
    other.add(lambda: "other", name="work", max_concurrency=1)
    assert isinstance(reg.try_call("work").error, ToolTimeout)
    time.sleep(1.0)  # more than three leases: only renewal keeps the slot
    assert isinstance(other.try_call("work").error, ToolBusy)
    release.set()
    deadline = time.monotonic() + 10
    while other.plugins.get("concurrency").running("work") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert other.call("work") == "other"


@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_token_taken_by_an_attempt_refused_later_goes_back_in_redis(redis_url: str, how: str) -> None:
    """An attempt refused by the circuit after it took its token gives it back, blocking under call and
    awaited under acall; a bucket that expired (full again) is not recreated."""
    from harness_one.state import RedisBuckets

    buckets = RedisBuckets(link(redis_url), server_time=False)
    clock = ManualClock()
    reg = ToolRegistry(plugins={"rate_limit": RateLimitPlugin(backend=buckets)}, clock=clock, autoload=False)
    reg.add(lambda: 1 / 0, name="down", rate_limit={"rate": 0.001, "burst": 2}, circuit_breaker={"min_calls": 1, "open_for": 60})
    first = reg.try_call("down")  # a token, and the failure opens the circuit
    assert first.error is not None and first.error.kind == "tool_failed"

    def run() -> Any:
        return reg.try_call("down") if how == "call" else asyncio.run(reg.atry_call("down"))

    for _ in range(3):  # refused by the open circuit after each took the last token: each gives it back
        refused = run()
        assert isinstance(refused.error, CircuitOpen)
    assert buckets.acquire("down", rate=0.001, burst=2.0, cost=1.0, now=0.0) == 0.0  # the last token is there
    assert buckets.acquire("down", rate=0.001, burst=2.0, cost=1.0, now=0.0) > 0.0
    buckets.give_back("never-made", burst=1.0, cost=1.0)
    assert buckets.link.client.exists(f"{buckets.link.prefix}rl:{{never-made}}") == 0


@pytest.mark.parametrize("where", ["memory", "redis"])
def test_a_reclaimed_probes_late_end_frees_no_new_probes_place(redis_url: str, where: str) -> None:
    """A probe hung past open_for gave its place to a new one; its late end then freed the new probe's
    place too, letting a third call probe beside it (probes=1)."""
    import dataclasses

    from harness_one import CircuitBreakerPolicy
    from harness_one.state import RedisCircuits

    policy = dataclasses.replace(CircuitBreakerPolicy(), probes=1, open_for=10.0, min_calls=1, failure_ratio=0.5)
    circuits: Any = MemoryCircuits() if where == "memory" else RedisCircuits(link(redis_url), server_time=False)
    circuits.record("t", policy, now=0.0, failed=True, probe=0)  # opens
    wait, hung = circuits.admit("t", policy, now=11.0)
    assert wait == 0.0 and hung
    assert circuits.admit("t", policy, now=12.0)[1] == 0  # its place is taken
    wait, fresh = circuits.admit("t", policy, now=22.0)  # hung past open_for: its place goes to a new probe
    assert wait == 0.0 and fresh and fresh != hung
    circuits.unprobe("t", policy, probe=hung)  # the hung one ends (neither way) at last
    circuits.record("t", policy, now=23.0, failed=True, probe=hung)  # (or fails): counts for nothing
    assert circuits.admit("t", policy, now=23.0)[1] == 0  # the new probe still holds the one place
    circuits.record("t", policy, now=24.0, failed=False, probe=fresh)
    assert circuits.snapshot("t", policy, now=24.0)["state"] == "closed"


def test_a_probe_that_outlives_its_circuits_hash_decides_nothing_after_it_expired(redis_url: str) -> None:
    """An idle circuit's hash expires (twice max(window, open_for) untouched: a probe whose tool runs on in a
    thread). The circuit made again numbered its half-open periods from the start, so the old probe's late end
    counted in the new period: its give-back freed the new probe's place, its success closed the circuit."""
    import dataclasses

    from harness_one import CircuitBreakerPolicy
    from harness_one.state import RedisCircuits

    policy = dataclasses.replace(CircuitBreakerPolicy(), probes=1, open_for=10.0, min_calls=1, failure_ratio=0.5)
    shared = link(redis_url)
    circuits = RedisCircuits(shared, server_time=False)
    circuits.record("t", policy, now=0.0, failed=True, probe=0)  # opens
    wait, old = circuits.admit("t", policy, now=10.0)
    assert wait == 0.0 and old
    (key,) = shared.client.keys(f"{shared.prefix}cb:*")
    shared.client.delete(key)  # what its expiry does
    circuits.record("t", policy, now=100.0, failed=True, probe=0)  # the circuit made again opens
    wait, new = circuits.admit("t", policy, now=110.0)
    assert wait == 0.0 and new and new != old
    circuits.unprobe("t", policy, probe=old)  # the old probe ends neither way: no place of this period is freed
    assert circuits.admit("t", policy, now=110.0)[1] == 0
    circuits.record("t", policy, now=111.0, failed=False, probe=old)  # nor does its success close the circuit
    assert circuits.snapshot("t", policy, now=111.0)["state"] == "half_open"
    circuits.record("t", policy, now=111.0, failed=False, probe=new)
    assert circuits.snapshot("t", policy, now=111.0)["state"] == "closed"
