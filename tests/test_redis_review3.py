"""Redis state URLs refused at setup, misconfigurations that take no fail mode, one failed cluster node,
huge leases and TTLs, and writes under ``maxmemory`` with ``noeviction``, on a real redis-server and a
real Redis Cluster."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_support import RedisClusterNodes, RedisServer

from harness_one import ToolRegistry
from harness_one.state import Record, State


@pytest.mark.parametrize(
    ("query", "says"),
    [
        (":99999/0", "is malformed: Port out of range 0-65535"),
        (":0/0", "is malformed: port 0"),
        ("/0?socket_timeout=abc", "is malformed: Invalid value for 'socket_timeout' in connection URL."),
        (
            "/0?bogus=1",
            "is refused by the Redis client: AbstractConnection.__init__() got an unexpected keyword argument 'bogus'",
        ),
        ("/0?timeout=1e12", "the Redis state URL's timeout is 1000000000000.0 seconds: at most 1e+06"),
        ("/0?socket_timeout=1e12", "the Redis state URL's socket_timeout is 1000000000000.0 seconds: at most 1e+06"),
        ("/abc", "names the database 'abc': use a number ('redis://HOST:PORT/0')"),
    ],
)
def test_a_bad_redis_url_is_refused_when_the_registry_is_made(query: str, says: str) -> None:
    """Before, the registry was made and each of the five state plugins failed to load (a warning): rate
    limits and caps were silently not applied; ``?bogus=1`` and ``?timeout=1e12`` failed every call with an
    internal ``TypeError``/``OverflowError``, and a path ``/abc`` used database 0."""
    url = f"redis://:s3cretPW@127.0.0.1{query}"
    for make in (lambda: State(url), lambda: ToolRegistry(state=url, autoload=False)):
        with pytest.raises(ValueError) as refused:
            make()
        assert says in str(refused.value) and "s3cretPW" not in str(refused.value), refused.value


@pytest.mark.parametrize("url", ["redis+cluster://127.0.0.1:7000/3", "redis+cluster://127.0.0.1:7000?db=2"])
def test_a_cluster_url_with_a_database_other_than_0_is_refused_at_setup(url: str) -> None:
    """Before, every call took the fail mode (fail-open admitted everything for ever)."""
    with pytest.raises(ValueError, match=r"names database [23]: a Redis Cluster has only database 0"):
        State(url)


def test_good_redis_urls_are_still_taken() -> None:
    for url in (
        "redis://127.0.0.1:6379/0",
        "redis://127.0.0.1",
        "redis://127.0.0.1/",
        "rediss://user:pw@127.0.0.1:6380/3?ssl_cert_reqs=none",
        "redis://127.0.0.1/0?timeout=2&prefix=app:&socket_timeout=5",
        "redis+cluster://127.0.0.1:7000/0?read_from_replicas=true",
    ):
        assert State(url).redis


def _one_call(reg: ToolRegistry, name: str) -> Any:
    result = reg.try_call(name)
    assert result.error is not None, result
    return result.error


def test_a_database_the_server_lacks_is_a_named_misconfiguration(
    redis_server: RedisServer, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: ``Internal error in plugin 'rate_limit': ResponseError: DB index is out of range``, ``where`` None
    and no "redis misconfigured" logged."""
    reg = ToolRegistry(state=redis_url.rsplit("/", 1)[0] + "/99", autoload=False)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 1})
    with caplog.at_level(logging.ERROR):
        error = _one_call(reg, "limited")
    assert error.kind == "plugin_error"
    assert "Redis has no database the state URL names (DB index is out of range" in error.message
    assert "no fail mode applies" in error.message
    cause = error.__cause__
    assert cause is not None and cause.where == f"redis://127.0.0.1:{redis_server.port}"
    assert "redis misconfigured" in caplog.text
    assert "state_failed_open" not in reg.stats().get("rate_limit", {})


def test_a_redis_url_naming_a_cluster_node_says_so_without_an_address(cluster_url: str) -> None:
    """Before, the model read ``MovedError: 13006 127.0.0.1:41479``."""
    from harness_one.state import RedisBuckets, RedisLink

    port = cluster_url.rsplit(":", 1)[1]
    link = RedisLink(f"redis://127.0.0.1:{port}/0")
    buckets = RedisBuckets(link)
    failed = []
    for key in (f"k{i}" for i in range(12)):  # some live on another node
        try:
            buckets.acquire(key, rate=1, burst=1, cost=1, now=0)
        except Exception as exc:
            failed.append(exc)
    assert failed
    for exc in failed:
        assert "the state URL names a node of a Redis Cluster (use 'redis+cluster://HOST:PORT')" in str(exc)
        assert "127.0.0.1" not in str(exc) and exc.where == f"redis://127.0.0.1:{port}"
    assert not link._is_down() and link.failures == 0


def test_a_cluster_url_naming_a_plain_server_is_a_misconfiguration(redis_server: RedisServer, redis_url: str) -> None:
    """``Cluster mode is not enabled`` took the fail mode: fail-open admitted every call for ever."""
    reg = ToolRegistry(state=f"redis+cluster://127.0.0.1:{redis_server.port}", autoload=False)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 1})
    for _ in range(3):
        error = _one_call(reg, "limited")
        assert error.kind == "plugin_error"
        assert "Redis Cluster state: the server is not in cluster mode (use 'redis://' for a single server)" in error.message
    assert "state_failed_open" not in reg.stats().get("rate_limit", {})


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[RedisClusterNodes]:
    """A cluster of its own: the test kills one of its nodes."""
    nodes = RedisClusterNodes(tmp_path)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


async def test_one_dead_cluster_node_fails_only_the_calls_of_its_keys(own_cluster: RedisClusterNodes) -> None:
    """Before, the link was marked down as a whole: each failure on the dead node made every call on every
    node fail at once for ``down_for`` (healthy-node calls: 9 admitted, 47,799 refused in 4 s)."""
    from harness_one.state import RedisBuckets, RedisLink, StateUnavailable

    link = RedisLink(own_cluster.url, down_for=3600.0, timeout=1.0)  # an hour: no timing in the test
    buckets = RedisBuckets(link)
    node = {f"k{i}": link.client.get_node_from_key(buckets._key(f"k{i}")).port for i in range(30)}
    dead_port = own_cluster.ports[1]
    dead = [key for key, port in node.items() if port == dead_port]
    healthy = [key for key, port in node.items() if port != dead_port]
    assert dead and healthy
    for key in node:  # the sync client and this loop's asyncio client know the slot map
        assert buckets.acquire(key, rate=1e6, burst=1e6, cost=1, now=0) == 0.0
        assert await buckets.aacquire(key, rate=1e6, burst=1e6, cost=1, now=0) == 0.0
    own_cluster.processes[1].kill()
    own_cluster.processes[1].wait(10)
    with pytest.raises(StateUnavailable, match=r"unavailable \((Connection|Timeout)Error\)"):
        buckets.acquire(dead[0], rate=1e6, burst=1e6, cost=1, now=0)
    for key in healthy:
        assert buckets.acquire(key, rate=1e6, burst=1e6, cost=1, now=0) == 0.0
    assert list(link._down_nodes) == [f"127.0.0.1:{dead_port}"] and not link._is_down()
    for key in dead:  # at once, without trying the dead node again
        with pytest.raises(StateUnavailable, match=r"it failed moments ago"):
            buckets.acquire(key, rate=1e6, burst=1e6, cost=1, now=0)
    assert link.failures == 1
    for key in healthy:  # the asyncio client: the same
        assert await buckets.aacquire(key, rate=1e6, burst=1e6, cost=1, now=0) == 0.0
    with pytest.raises(StateUnavailable, match=r"it failed moments ago"):
        await buckets.aacquire(dead[0], rate=1e6, burst=1e6, cost=1, now=0)
    assert link.failures == 1
    await link.aclose()
    link.close()


def test_huge_and_infinite_idempotency_durations_leave_every_record_a_ttl(redis_server: RedisServer, redis_url: str) -> None:
    """A lease of 10^15 s: ``PEXPIRE`` refused the ``1e+18`` Lua wrote after the ``running`` record was written,
    so it had no TTL (``IdempotencyConflict`` for ever); an infinite record TTL raised ``OverflowError`` once
    the tool had run, leaving the key ``running``."""
    from harness_one.state import RedisLink, RedisStore

    store = RedisStore(RedisLink(redis_url))
    admin = redis_server.client()
    try:
        for lease in (1e15, 1e13, math.inf):
            key = f"k{lease}"
            assert store.begin("tool", key, "fp", time.time(), lease) is None
            assert store.renew("tool", key, time.time(), lease)
            pttl = admin.pttl(store._key("tool", key))
            assert 10**15 - 10**6 < pttl <= 10**15, (lease, pttl)
        assert store.finish("tool", "kinf", Record("fp", "done", math.inf, True, "ran", None))
        assert store.finish("tool", "other", Record("fp", "done", math.inf, True, "ran", None))
        for key in ("kinf", "other"):
            pttl = admin.pttl(store._key("tool", key))
            assert 10**15 - 10**6 < pttl <= 10**15 and admin.hget(store._key("tool", key), "st") == b"done", pttl
    finally:
        admin.close()


def test_an_outcome_stored_on_a_free_key_lives_until_its_expiry_on_the_callers_clock(
    redis_server: RedisServer, redis_url: str
) -> None:
    """A key freed meanwhile (no claim left to measure from): the record's TTL was ``expires`` minus the wall
    clock, so with the caller's own clock (``now=1.0``, ``expires=1000.0``) the outcome lived 1 ms and the next
    caller ran the tool again; the CI run on a Redis Cluster saw it gone."""
    from harness_one.state import RedisLink, RedisStore

    store = RedisStore(RedisLink(redis_url))
    admin = redis_server.client()
    try:
        assert store.begin("tool", "freed", "fp", 0.0, 10.0, owner="A") is None
        store.release("tool", "freed")
        assert store.finish("tool", "freed", Record("fp", "done", 1000.0, True, "kept", None), owner="A", now=1.0)
        assert 998_000 < admin.pttl(store._key("tool", "freed")) <= 999_000
        start = time.time()  # no `now`: measured from wall time
        assert store.finish("tool", "walled", Record("fp", "done", start + 60.0, True, "kept", None))
        assert 58_000 < admin.pttl(store._key("tool", "walled")) <= 60_000
        for broken in (float("nan"), float("inf"), -float("inf")):  # nor a `now` that is not finite (it gave 1 ms)
            key = f"broken{broken}"
            assert store.begin("tool", key, "fp", start, 10.0, owner="A") is None
            store.release("tool", key)
            assert store.finish("tool", key, Record("fp", "done", start + 60.0, True, "kept", None), owner="A", now=broken)
            assert 58_000 < admin.pttl(store._key("tool", key)) <= 60_000, broken
    finally:
        admin.close()


@pytest.fixture
def out_of_memory(redis_server: RedisServer, redis_url: str) -> Iterator[Any]:
    admin = redis_server.client()
    admin.config_set("maxmemory-policy", "noeviction")
    try:
        yield admin
    finally:
        admin.config_set("maxmemory", "0")
        admin.close()


def test_claims_and_slots_are_refused_under_maxmemory(redis_url: str, out_of_memory: Any) -> None:
    """Redis refuses a script under ``maxmemory`` with ``noeviction`` only until its first write: a claim's
    ``DEL`` and a slot acquire's ``ZREMRANGEBYSCORE`` came first, so both went on writing past maxmemory."""
    from harness_one.state import RedisLink, RedisSlots, RedisStore, StateUnavailable

    link = RedisLink(redis_url, down_for=0.0)
    store, slots = RedisStore(link), RedisSlots(link, server_time=False)
    assert store.begin("tool", "lapsed", "fp", 100.0, 1000.0) is None  # lapses at 1100 (the key lives 1000 s)
    assert slots.acquire("t", "old", cap=5, total=None, now=100.0, lease=60.0)[0]  # lapses at 160
    out_of_memory.config_set("maxmemory", "1")
    for attempt in (
        lambda: store.begin("tool", "new", "fp", 200.0, 60.0),
        lambda: store.begin("tool", "lapsed", "fp2", 2000.0, 60.0),
        lambda: slots.acquire("t", "new", cap=5, total=None, now=200.0, lease=60.0),
    ):
        with pytest.raises(StateUnavailable, match=r"unavailable \(OutOfMemoryError\)"):
            attempt()
    out_of_memory.config_set("maxmemory", "0")
    assert not out_of_memory.exists(store._key("tool", "new"))
    assert out_of_memory.hget(store._key("tool", "lapsed"), "fp") == b"fp"  # not the refused claim's
    assert slots.running("t", now=150.0) == 1 and slots.running("t", now=200.0) == 0
    assert out_of_memory.zrange(slots._keys("t")[0], 0, -1) == [b"old"]
    # With memory again: a lapsed claim is replaced whole, a lapsed slot is dropped when another is taken.
    assert store.begin("tool", "new", "fp", 200.0, 60.0) is None
    assert slots.acquire("t", "new", cap=1, total=None, now=200.0, lease=60.0) == (True, 0, 0)
    assert out_of_memory.zrange(slots._keys("t")[0], 0, -1) == [b"new"]
