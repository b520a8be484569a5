"""Review 27, shared state: a Redis key prefix holding a hash tag's brace is refused when the state is
made (on a Redis Cluster it would put every key on one node, or a concurrency script's two keys in
different slots); a NaN lease, record expiry or budget ttl is a ``ValueError`` before any I/O, the
same in every backend (Redis wrote a record it then could not give a TTL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness_one import ToolRegistry
from harness_one.state import (
    MemoryBudgets,
    MemorySlots,
    MemoryStore,
    Record,
    SQLiteStore,
    State,
)

NAN = float("nan")
BRACES = "holds a '{' or '}': Redis Cluster hashes a key by its first {...}"
LEASE = "a lease is a number of seconds, not NaN"
EXPIRES = "a record's expiry is a number of seconds, not NaN"
TTL = "a budget's ttl is a number of seconds, not NaN"


# --------------------------------------------------------------------------- the key prefix


@pytest.mark.parametrize("prefix", ["app{}:", "{tenant-a}:", "a}b:"])
def test_a_prefix_with_a_brace_is_refused_when_the_registry_is_made(cluster_url: str, prefix: str) -> None:
    from urllib.parse import quote

    with pytest.raises(ValueError) as url_refused:
        ToolRegistry(state=f"{cluster_url}?prefix={quote(prefix)}", autoload=False)
    assert str(url_refused.value).startswith(f"the Redis key prefix {prefix!r} {BRACES}")
    with pytest.raises(ValueError) as state_refused:
        State(cluster_url, prefix=prefix)
    assert str(state_refused.value).startswith(f"the Redis key prefix {prefix!r} {BRACES}")


def test_a_link_refuses_a_prefix_with_a_brace_and_keeps_one_without(cluster_url: str) -> None:
    from harness_one.state import RedisLink, RedisSlots

    with pytest.raises(ValueError, match=r"^the Redis key prefix '\{tenant-a\}:' holds a '\{' or '\}'"):
        RedisLink(cluster_url, prefix="{tenant-a}:")
    link = RedisLink(cluster_url + "?prefix=tenant-a:&timeout=2")
    try:
        slots = RedisSlots(link)
        tool_key, all_key = slots._keys("search")
        assert link.client.keyslot(tool_key) == link.client.keyslot(all_key)
        assert slots.acquire("search", "h1", cap=2, total=5, now=0, lease=5) == (True, 0, 0)
    finally:
        link.close()


def test_a_capped_call_on_the_cluster_runs_with_a_plain_prefix(cluster_url: str) -> None:
    reg = ToolRegistry(
        state=cluster_url + "?prefix=app:&timeout=2", autoload=False, plugin_options={"concurrency": {"default": 2}}
    )

    def echo(x: int) -> int:
        """Echo."""
        return x

    reg.add(echo)
    assert reg.call("echo", {"x": 1}) == 1


# --------------------------------------------------------------------------- NaN times


def _stores(redis_url: str, tmp_path: Path) -> list[tuple[str, Any]]:
    from harness_one.state import RedisLink, RedisStore

    return [
        ("memory", MemoryStore()),
        ("sqlite", SQLiteStore(tmp_path / "s.db")),
        ("redis", RedisStore(RedisLink(redis_url, prefix="n:", timeout=2))),
    ]


def test_every_store_refuses_a_nan_expiry_before_writing_anything(redis_url: str, tmp_path: Path) -> None:
    import redis

    raw = redis.Redis.from_url(redis_url)
    for name, store in _stores(redis_url, tmp_path):
        assert store.begin("tool", "k", "fp", 1e9, 30, owner="o") is None, name
        with pytest.raises(ValueError) as refused:
            store.finish("tool", "k", Record("fp", "done", NAN, True, 1, None), owner="o", now=1e9)
        assert str(refused.value) == EXPIRES, name
        with pytest.raises(ValueError) as anyones:
            store.finish("tool", "k", Record("fp", "done", NAN, True, 1, None))
        assert str(anyones.value) == EXPIRES, name
        # the claim is left as it was: running, its lease live, another caller still told so
        held = store.begin("tool", "k", "fp", 1e9 + 1, 30, owner="p")
        assert (held.state, held.expires) == ("running", 1e9 + 30), name
    key = "n:idem:4:tool:k"
    assert raw.hget(key, "st") == b"running" and raw.pttl(key) > 0  # not a 'done' record with no TTL
    raw.close()


async def test_every_store_refuses_a_nan_expiry_on_the_asyncio_path(redis_url: str, tmp_path: Path) -> None:
    for name, store in _stores(redis_url, tmp_path)[1:]:
        assert await store.abegin("tool", "k", "fp", 1e9, 30, owner="o") is None, name
        with pytest.raises(ValueError) as refused:
            await store.afinish("tool", "k", Record("fp", "done", NAN, True, 1, None), owner="o", now=1e9)
        assert str(refused.value) == EXPIRES, name
        with pytest.raises(ValueError) as lease:
            await store.arenew("tool", "k", 1e9, NAN, owner="o")
        assert str(lease.value) == LEASE, name


def test_every_store_refuses_a_nan_lease(redis_url: str, tmp_path: Path) -> None:
    for name, store in _stores(redis_url, tmp_path):
        with pytest.raises(ValueError) as begun:
            store.begin("tool", "k", "fp", 1e9, NAN, owner="o")
        assert str(begun.value) == LEASE, name
        assert store.begin("tool", "k", "fp", 1e9, 30, owner="o") is None, name  # nothing was claimed
        with pytest.raises(ValueError) as renewed:
            store.renew("tool", "k", 1e9, NAN, owner="o")
        assert str(renewed.value) == LEASE, name
        assert store.renew("tool", "k", 1e9, 30, owner="o") is True, name


async def test_every_slots_backend_refuses_a_nan_lease(redis_url: str) -> None:
    from harness_one.state import RedisLink, RedisSlots

    redis_slots = RedisSlots(RedisLink(redis_url, timeout=2), server_time=False)
    for name, slots in (("memory", MemorySlots()), ("redis", redis_slots)):
        with pytest.raises(ValueError) as acquired:
            slots.acquire("t", "h", cap=1, total=None, now=100.0, lease=NAN)
        assert str(acquired.value) == LEASE, name
        assert slots.running("t", now=100.0) == 0, name
        assert slots.acquire("t", "h", cap=1, total=None, now=100.0, lease=5) == (True, 0, 0), name
        with pytest.raises(ValueError) as renewed:
            slots.renew("t", "h", now=100.0, lease=NAN)
        assert str(renewed.value) == LEASE, name
    with pytest.raises(ValueError) as aacquired:
        await redis_slots.aacquire("t", "h2", cap=None, total=None, now=100.0, lease=NAN)
    assert str(aacquired.value) == LEASE
    with pytest.raises(ValueError) as many:
        redis_slots.renew_many([("t", "h")], now=100.0, lease=NAN)
    assert str(many.value) == LEASE
    # an infinite lease is capped, as before: the slot is held, its keys given a TTL
    assert redis_slots.acquire("u", "h", cap=1, total=None, now=100.0, lease=float("inf")) == (True, 0, 1)


async def test_every_budget_backend_refuses_a_nan_ttl(redis_url: str) -> None:
    import redis

    from harness_one.state import RedisBudgets, RedisLink

    redis_budgets = RedisBudgets(RedisLink(redis_url, prefix="b:", timeout=2), server_time=False)
    for name, budgets in (("memory", MemoryBudgets()), ("redis", redis_budgets)):
        with pytest.raises(ValueError) as taken:
            budgets.take("run", "s", limit=1, total=None, now=100.0, ttl=NAN)
        assert str(taken.value) == TTL, name
        assert budgets.used("run", "s", now=100.0) == 0, name
        assert budgets.take("run", "s", limit=1, total=None, now=100.0, ttl=60) == 0, name
        assert budgets.take("run", "s", limit=1, total=None, now=100.0, ttl=60) == 1, name  # counted, kept
    with pytest.raises(ValueError) as async_taken:
        await redis_budgets.atake("run2", "s", limit=1, total=None, now=100.0, ttl=NAN)
    assert str(async_taken.value) == TTL
    raw = redis.Redis.from_url(redis_url)
    assert raw.exists(redis_budgets._key("run2")) == 0
    assert redis_budgets.take("run3", "s", limit=None, total=None, now=100.0, ttl=float("inf")) == 0
    assert 0 < raw.pttl(redis_budgets._key("run3")) <= 604800000  # an infinite ttl is capped at 7 days, as before
    raw.close()
