"""The Redis backends on a real three-node Redis Cluster: every script's keys share a hash slot
(hash tags), the cluster clients route each decision to its node, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis_support import RedisClusterNodes

from harness_one import RateLimitExceeded, ToolBusy, ToolRegistry
from harness_one.testing import (
    CircuitStoreContract,
    ConcurrencySlotsContract,
    IdempotencyStoreContract,
    RateLimitBackendContract,
)


def link(url: str, **options: Any) -> Any:
    from harness_one.state import RedisLink

    return RedisLink(url + "?timeout=2", **options)


class TestClusterBuckets(RateLimitBackendContract):
    @pytest.fixture
    def backend(self, cluster_url: str) -> Any:
        from harness_one.state import RedisBuckets

        return RedisBuckets(link(cluster_url), server_time=False)


class TestClusterStore(IdempotencyStoreContract):
    @pytest.fixture
    def store(self, cluster_url: str) -> Any:
        from harness_one.state import RedisStore

        return RedisStore(link(cluster_url))


class TestClusterSlots(ConcurrencySlotsContract):
    expires_leases = True

    @pytest.fixture
    def slots(self, cluster_url: str) -> Any:
        from harness_one.state import RedisSlots

        return RedisSlots(link(cluster_url), server_time=False)


class TestClusterCircuits(CircuitStoreContract):
    @pytest.fixture
    def circuits(self, cluster_url: str) -> Any:
        from harness_one.state import RedisCircuits

        return RedisCircuits(link(cluster_url), server_time=False)


def test_keys_spread_over_the_nodes_and_scripts_keep_one_slot(redis_cluster: RedisClusterNodes, cluster_url: str) -> None:
    import redis

    from harness_one.state import RedisBuckets, RedisSlots

    shared = link(cluster_url)
    assert shared.cluster and isinstance(shared.client, redis.RedisCluster)
    buckets = RedisBuckets(shared)
    for i in range(30):
        assert buckets.acquire(f"tool-{i}", rate=1, burst=1, cost=1, now=0) == 0.0
    holding = {port: redis.Redis(port=port).dbsize() for port in redis_cluster.ports}
    assert sum(holding.values()) == 30 and all(holding.values())  # the buckets live on every master
    slots = RedisSlots(shared)
    tool_key, all_key = slots._keys("a-tool")
    assert shared.client.keyslot(tool_key) == shared.client.keyslot(all_key)  # one script checks both
    assert slots.acquire("a-tool", "h1", cap=1, total=5, now=0, lease=10) == (True, 0, 0)
    assert slots.acquire("another", "h2", cap=None, total=1, now=0, lease=10) == (False, 0, 1)  # the total counts across tools
    shared.close()


def test_cluster_url_puts_a_registry_on_the_cluster(cluster_url: str) -> None:
    from harness_one.state import RedisBuckets

    regs = [ToolRegistry(state=cluster_url + "?prefix=svc:", autoload=False) for _ in range(2)]
    runs: list[int] = []
    for reg in regs:
        reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 2})
        reg.add(lambda n: runs.append(n) or len(runs), name="once", max_concurrency=1)
    assert isinstance(regs[0].plugins.get("rate_limit").backend, RedisBuckets)
    assert regs[0].state.link().cluster and regs[0].state.link().prefix == "svc:"
    assert regs[0].call("limited") == regs[1].call("limited") == 1
    with pytest.raises(RateLimitExceeded):
        regs[1].call("limited")
    assert regs[0].call("once", {"n": 1}, idempotency_key="k") == regs[1].call("once", {"n": 1}, idempotency_key="k") == 1
    assert runs == [1]


async def test_acall_on_the_cluster_uses_the_asyncio_cluster_client(cluster_url: str) -> None:
    import redis.asyncio as aredis

    from harness_one.state import RedisSlots

    reg = ToolRegistry(state=cluster_url + "?timeout=2", autoload=False)
    gate = asyncio.Event()

    async def slow() -> str:
        await gate.wait()
        return "done"

    reg.add(slow, name="slow", max_concurrency=1)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 3})
    reg.add(lambda: 1, name="warm", rate_limit={"rate": 1000, "burst": 1000})
    limiter = reg.plugins.get("rate_limit")
    for _ in range(20):  # the asyncio cluster client's first connections, made before the exact count below
        before = limiter.fail.failed_open
        await reg.atry_call("warm")
        if limiter.fail.failed_open == before:
            break
        await asyncio.sleep(0.6)  # a failed connection is not retried for 0.5 s
    results = await asyncio.gather(*(reg.atry_call("limited") for _ in range(5)))
    assert [r.ok for r in results].count(True) == 3
    first = asyncio.create_task(reg.acall("slow", idempotency_key="k"))
    while RedisSlots(reg.state.link()).running("slow", now=0) == 0:
        await asyncio.sleep(0.005)
    with pytest.raises(ToolBusy):
        await reg.acall("slow")
    gate.set()
    assert await first == "done" == await reg.acall("slow", idempotency_key="k")
    link = reg.state.link()
    assert isinstance(link.aclient(), aredis.RedisCluster)
    await link.aclose()


async def test_an_unreachable_cluster_fails_calls_not_the_setup() -> None:
    from harness_one.state import RedisBuckets, RedisLink, StateUnavailable

    down = RedisLink("redis+cluster://127.0.0.1:1?timeout=0.2")  # nothing listens: no error yet
    with pytest.raises(StateUnavailable, match=r"The shared state \(Redis\) is unavailable") as refused:
        RedisBuckets(down).acquire("k", rate=1, burst=1, cost=1, now=0)
    assert refused.value.where == "redis+cluster://127.0.0.1:1" and "127.0.0.1" not in refused.value.message
    again = RedisLink("redis+cluster://127.0.0.1:1?timeout=0.2")
    with pytest.raises(StateUnavailable):
        await RedisBuckets(again).aacquire("k", rate=1, burst=1, cost=1, now=0)
    reg = ToolRegistry(state="redis+cluster://127.0.0.1:1?timeout=0.2", autoload=False)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 1, "burst": 1})
    assert reg.call("limited") == 1  # rate limits fail open
