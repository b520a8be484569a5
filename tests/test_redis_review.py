"""Redis state against hostile caller data and odd configuration, on a real redis-server: run ids
that cannot be sent, keys left behind, record lifetimes, circuit expiry, URL options and secrets."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from redis_support import RedisServer

from harness_one import CircuitBreakerPolicy, ToolRegistry
from harness_one.state import Record, State


def link(url: str, **options: Any) -> Any:
    from harness_one.state import RedisLink

    return RedisLink(url, **options)


def test_a_run_id_that_cannot_be_sent_fails_no_call_and_no_neighbour(redis_server: RedisServer, redis_url: str) -> None:
    """A lone surrogate in a run id failed every call batched with it and marked the link down."""
    from harness_one.state import RedisBudgets

    budgets = RedisBudgets(link(redis_url, timeout=2), server_time=False)
    budgets.take("warm", "f", limit=None, total=None, now=0.0, ttl=60.0)
    bad, huge = "mallory\udc80", "r" * (8 << 20)
    outcomes: list[Any] = []

    def work(run: str) -> None:
        for _ in range(100):
            try:
                outcomes.append(budgets.take(run, "f", limit=None, total=None, now=0.0, ttl=60.0))
            except Exception as exc:
                outcomes.append(exc)

    pool = [threading.Thread(target=work, args=(run,)) for run in ("alice", "bob", bad, "carol")]
    for t in pool:
        t.start()
    for t in pool:
        t.join(30)
    assert outcomes == [0] * 400 and budgets.link.failures == 0 and not budgets.link._down_until
    assert budgets.take(huge, "f", limit=1, total=None, now=0.0, ttl=60.0) == 0  # 8 MiB: sent as its digest
    assert budgets.take(huge, "f", limit=1, total=None, now=0.0, ttl=60.0) == 1  # one run, kept
    assert budgets.used(bad, "f", now=0.0) == 100 and budgets.used(huge[:-1], "f", now=0.0) == 0
    client = redis_server.client()
    try:
        assert max(len(key) for key in client.keys("*")) < 120
    finally:
        client.close()


def test_a_call_that_cannot_be_packed_fails_alone_in_a_shared_write(redis_url: str) -> None:
    """Any error packing one call (here a lone surrogate in a script argument) is that call's own."""
    from harness_one.state._redis import _BUCKET, _Pending

    shared = link(redis_url)
    keys, good = ["{d}"], ["0", "1", "5", "1"]
    batch = [
        _Pending(_BUCKET, ("EVALSHA", _BUCKET.sha, 1, *keys, *args), threading.Lock())
        for args in (good, ["0", "1", "5\udc80", "1"], good)
    ]
    for pending in batch:
        pending.done.acquire()
    shared._sending = True
    shared._lead(batch)
    assert [type(p.outcome) for p in batch] == [bytes, UnicodeEncodeError, bytes]
    assert not shared._down_until and shared.failures == 0

    async def gather() -> list[Any]:
        got = await asyncio.gather(
            shared.arun(_BUCKET, keys, good),
            shared.arun(_BUCKET, keys, ["0", "1", "5\udc80", "1"]),
            shared.arun(_BUCKET, keys, good),
            return_exceptions=True,
        )
        await shared.aclose()
        return got

    got = asyncio.run(gather())
    assert got[0] == got[2] == b"0" and isinstance(got[1], UnicodeEncodeError)
    assert not shared._down_until and shared.failures == 0


def test_a_lone_surrogate_run_id_does_not_open_the_rate_limit_for_others(redis_url: str) -> None:
    """Its failures marked the link down, and the fail-open rate limit then admitted every call."""
    reg = ToolRegistry(state=redis_url, autoload=False, plugin_options={"budget": {"total": 10**9}})
    reg.add(lambda q: q, name="search", rate_limit={"rate": 0.001, "burst": 2})
    admitted: list[bool] = []
    stop = time.monotonic() + 1.0

    def call(run: str) -> None:
        while time.monotonic() < stop:
            admitted.append(reg.try_call("search", {"q": "x"}, context={"run_id": run}).ok)

    pool = [threading.Thread(target=call, args=(run,)) for run in ("alice", "bob", "carol", "\udc80")]
    for t in pool:
        t.start()
    for t in pool:
        t.join(30)
    assert admitted.count(True) == 2 and len(admitted) > 100  # the burst, whoever took it
    assert "state_failed_open" not in reg.stats().get("rate_limit", {})


def test_refused_calls_of_new_runs_leave_no_key_for_a_day(redis_server: RedisServer, redis_url: str) -> None:
    """A call given back (refused later) or refused by a budget of 0 left a hash for a day per run. A run
    given back with a ticket keeps it for KEEP_GIVE_BACKS (60 s), for a give-back sent again; without, none."""
    from harness_one.state import RedisBudgets
    from harness_one.state._redis import KEEP_GIVE_BACKS

    reg = ToolRegistry(state=redis_url, autoload=False, plugin_options={"budget": {"total": 100}})
    reg.add(lambda q: q, name="search", rate_limit={"rate": 0.001, "burst": 1})
    reg.add(lambda: 1, name="never", options={"max_calls": 0})
    kinds = [reg.try_call("search", {"q": "x"}, context={"run_id": f"run-{i}"}) for i in range(20)]
    assert [r.ok for r in kinds] == [True] + [False] * 19
    assert all(not reg.try_call("never", context={"run_id": f"other-{i}"}).ok for i in range(5))
    budgets = RedisBudgets(link(redis_url), server_time=False)
    assert budgets.take("kept", "a", limit=None, total=None, now=0.0, ttl=60.0) == 0
    assert budgets.take("kept", "b", limit=None, total=None, now=0.0, ttl=60.0) == 0
    budgets.give_back("kept", "a")  # one call still counted: the run stays
    assert budgets.used("kept", "b", now=0.0) == 1
    client = redis_server.client()
    try:
        given_back = {f"harness-one:budget:{{{len(run)}:{run}}}".encode() for run in (f"run-{i}" for i in range(1, 20))}
        assert set(client.keys("*budget*")) == {b"harness-one:budget:{4:kept}", b"harness-one:budget:{5:run-0}"} | given_back
        for key in given_back:  # the run's ticket only, for a minute (the run's ttl is a day)
            assert client.hget(key, "n:*") == b"0" and len(client.hget(key, "g")) == 17
            assert 0 < client.pttl(key) <= KEEP_GIVE_BACKS * 1000
        assert client.pttl("harness-one:budget:{5:run-0}") > 86_000_000
        budgets.give_back("kept", "b")  # no ticket, and none remembered: deleted at once
        assert b"harness-one:budget:{4:kept}" not in client.keys("*budget*")
    finally:
        client.close()
    assert budgets.take("kept", "b", limit=1, total=None, now=0.0, ttl=60.0) == 0  # a deleted run counts from zero


def test_an_idempotency_record_lives_its_full_ttl(redis_server: RedisServer, redis_url: str) -> None:
    """The record's key was cut to 7 days whatever its ttl, unlike in memory and SQLite."""
    from harness_one.state import RedisStore

    store = RedisStore(link(redis_url))
    now, ttl = time.time(), 30 * 86_400.0
    assert store.begin("charge", "order-7", "fp", now, 60.0) is None
    store.finish("charge", "order-7", Record("fp", "done", now + ttl, True, {"charged": 5}, None))
    client = redis_server.client()
    try:
        assert client.pttl("harness-one:idem:6:charge:order-7") > (ttl - 60) * 1000
    finally:
        client.close()


def test_a_probe_ending_after_its_circuit_expired_leaves_no_key(redis_server: RedisServer, redis_url: str) -> None:
    """The probe's outcome recreated the expired hash with no expiry (kept forever)."""
    from harness_one.state import RedisCircuits

    circuits = RedisCircuits(link(redis_url), server_time=False)
    policy = CircuitBreakerPolicy.parse({"failure_ratio": 0.5, "min_calls": 1, "window": 1, "open_for": 1, "probes": 1}, tool="t")
    circuits.record("t", policy, now=100.0, failed=True, probe=0)  # opens
    wait, probe = circuits.admit("t", policy, now=102.0)
    assert wait == 0.0 and probe > 0  # half-open: this call probes (the id of its period)
    client = redis_server.client()
    try:
        client.delete("harness-one:cb:{1:t}")  # the hash expired while the probe ran
        circuits.record("t", policy, now=110.0, failed=False, probe=probe)
        assert client.keys("*") == []
    finally:
        client.close()


def test_a_circuit_key_that_cannot_be_sent_is_digested(redis_url: str) -> None:
    from harness_one.state import RedisCircuits

    circuits = RedisCircuits(link(redis_url), server_time=False)
    policy = CircuitBreakerPolicy.parse({"failure_ratio": 0.5, "min_calls": 1, "window": 10, "open_for": 10}, tool="t")
    circuits.record("api\udc80", policy, now=100.0, failed=True, probe=0)
    assert circuits.snapshot("api\udc80", policy, now=100.0)["state"] == "open"
    assert circuits.snapshot("api", policy, now=100.0)["state"] == "closed"


def test_decode_responses_in_the_url_does_not_break_replays(redis_url: str) -> None:
    reg = ToolRegistry(state=redis_url + "?decode_responses=true", autoload=False)
    runs: list[int] = []

    def pay(x: int) -> dict[str, int]:
        runs.append(x)
        return {"paid": x}

    reg.add(pay)
    answers = [reg.try_call("pay", {"x": 1}, idempotency_key="k1") for _ in range(2)]
    assert [r.value for r in answers] == [{"paid": 1}, {"paid": 1}] and runs == [1]
    assert asyncio.run(reg.acall("pay", {"x": 1}, idempotency_key="k1")) == {"paid": 1} and runs == [1]


def test_the_state_url_password_is_never_shown() -> None:
    with pytest.raises(ValueError) as refused:
        State("redis+sentinel://admin:hunter2@redis.internal:26379/0")
    assert "hunter2" not in str(refused.value) and "redis.internal:26379" in str(refused.value)
    state = State("redis://admin:hunter2@redis.internal:6379/0")
    assert "hunter2" not in repr(state) and "redis.internal:6379" in repr(state)
    for url in ("redis://redis.internal:6379/0?password=hunter2", "redis+sentinel://redis.internal:26379/0?password=hunter2"):
        try:  # a password given as a query option (redis-py reads it there too)
            shown = repr(State(url))
        except ValueError as exc:
            shown = str(exc)
        assert "hunter2" not in shown and "redis.internal" in shown, shown
    assert repr(State()) == "State(None)"


def test_key_names_are_digested_only_when_they_must_be() -> None:
    """Short printable names keep their text (``#42`` too: its key did not move); a digest look-alike is digested."""
    from harness_one.state import key_text as _name

    digest = _name("\ud800")
    assert digest.startswith("#") and len(digest) == 65
    assert [_name(n) for n in ("run-1", "#42", "#" + "a" * 63)] == ["run-1", "#42", "#" + "a" * 63]
    assert _name(digest) != digest and _name("x" * 201).startswith("#")
