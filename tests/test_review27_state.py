"""Review 27, shared state: a Redis key prefix that makes an empty hash tag is refused when the state
is made (on a Redis Cluster a concurrency script's two keys would fall in different slots), while a
prefix with a non-empty tag (``{tenant-a}:``) keeps working; only the prefix used (``prefix=`` over
the URL's ``?prefix=``) is checked. A NaN lease, record expiry or budget ttl is a ``ValueError``
before any I/O, the same in every backend, through one helper that reads the value as ``float()``
does (``"30"`` still works). An outcome stored on a freed key with a NaN or infinite ``now`` gets its
TTL from the wall clock (it got 1 ms)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

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
LEASE = "a lease is a number of seconds, not NaN"
EXPIRES = "a record's expiry is a number of seconds, not NaN"
TTL = "a budget's ttl is a number of seconds, not NaN"
#: A Redis URL nothing listens on: making a state or a link parses it and connects to nothing.
NOWHERE = "redis://127.0.0.1:1/0"
EMPTY_TAGS = ["app{}:", "{}", "}x:", "a}{}:"]


def _empty_tag(prefix: str, where: str) -> str:
    return (
        f"the Redis key prefix {prefix!r} ({where}) makes an empty hash tag ('{{' then '}}'): Redis Cluster"
        " then hashes each key whole, and a concurrency script's two keys fall in different slots"
        " (CROSSSLOT); put a name between the braces ('{tenant-a}:') or use a prefix without them"
    )


def echo(x: int) -> int:
    """Echo."""
    return x


# --------------------------------------------------------------------------- the key prefix (no Redis needed)


@pytest.mark.parametrize("prefix", EMPTY_TAGS)
def test_a_prefix_making_an_empty_hash_tag_is_refused_when_the_registry_is_made(prefix: str) -> None:
    from redis.crc import key_slot

    from harness_one.state import RedisLink, RedisSlots

    with pytest.raises(ValueError) as from_url:
        ToolRegistry(state=f"{NOWHERE}?prefix={quote(prefix)}", autoload=True)
    assert str(from_url.value) == _empty_tag(prefix, "the URL's ?prefix=")
    with pytest.raises(ValueError) as given:
        State(NOWHERE, prefix=prefix)
    assert str(given.value) == _empty_tag(prefix, "prefix=")
    with pytest.raises(ValueError) as linked:
        RedisLink(NOWHERE, prefix=prefix)
    assert str(linked.value) == _empty_tag(prefix, "prefix=")
    # why: with an empty tag the two keys of a slot script hash whole, to two slots
    link = RedisLink(NOWHERE)
    try:
        link.prefix = prefix
        tool_key, all_key = RedisSlots(link)._keys("search")
        assert key_slot(tool_key.encode()) != key_slot(all_key.encode())
    finally:
        link.close()


@pytest.mark.parametrize("prefix", ["{tenant-a}:", "app:", "a{", "a}b:", "{a}{}:", ""])
def test_a_prefix_with_a_non_empty_tag_or_no_tag_is_kept_and_its_slot_keys_share_a_slot(prefix: str) -> None:
    from redis.crc import key_slot

    from harness_one.state import RedisLink, RedisSlots

    assert State(f"{NOWHERE}?prefix={quote(prefix)}").link().prefix == prefix
    link = RedisLink(NOWHERE, prefix=prefix)
    try:
        tool_key, all_key = RedisSlots(link)._keys("search")
        assert key_slot(tool_key.encode()) == key_slot(all_key.encode())
    finally:
        link.close()


def test_only_the_prefix_used_is_checked_an_explicit_one_over_the_urls() -> None:
    from harness_one.state import RedisLink

    overridden = f"{NOWHERE}?prefix=%7B%7D:"
    state = State(overridden, prefix="app:")
    assert state.link().prefix == "app:"
    link = RedisLink(overridden, prefix="app:")
    assert link.prefix == "app:"
    link.close()
    with pytest.raises(ValueError) as refused:
        State(f"{NOWHERE}?prefix=app:", prefix="x{}")
    assert str(refused.value) == _empty_tag("x{}", "prefix=")


@pytest.mark.parametrize("prefix", [5, b"x:"])
def test_a_prefix_that_is_not_a_string_is_a_type_error_naming_it(prefix: Any) -> None:
    from harness_one.state import RedisLink

    with pytest.raises(TypeError) as given:
        State(NOWHERE, prefix=prefix)
    assert str(given.value) == f"the Redis key prefix (prefix=) is a str, not {prefix!r}"
    with pytest.raises(TypeError) as linked:
        RedisLink(NOWHERE, prefix=prefix)
    assert str(linked.value) == f"the Redis key prefix (prefix=) is a str, not {prefix!r}"


# --------------------------------------------------------------------------- the key prefix on Redis


def test_a_tagged_prefix_works_on_a_plain_redis(redis_url: str) -> None:
    """``{tenant-a}:`` worked before the prefix check and was refused by it: a single Redis ignores tags."""
    import redis

    reg = ToolRegistry(
        state=f"{redis_url}?prefix={quote('{tenant-a}:')}&timeout=2",
        autoload=True,
        plugin_options={"concurrency": {"default": 2}},
    )
    reg.add(echo)
    assert reg.call("echo", {"x": 1}) == 1
    slots = reg.state.concurrency()
    assert slots.acquire("echo", "h1", cap=2, total=None, now=0, lease=5) == (True, 0, 0)
    raw = redis.Redis.from_url(redis_url)
    try:
        assert sorted(raw.scan_iter(match="{tenant-a}:*")) == [
            b"{tenant-a}:{{tenant-a}:cc}:*",
            b"{tenant-a}:{{tenant-a}:cc}:4:echo",
        ]
    finally:
        raw.close()


def test_on_a_cluster_an_empty_tag_is_refused_and_a_tagged_prefix_runs_capped_calls(cluster_url: str) -> None:
    from harness_one.state import RedisLink, RedisSlots

    with pytest.raises(ValueError) as refused:
        ToolRegistry(state=f"{cluster_url}?prefix={quote('app{}:')}", autoload=True)
    assert str(refused.value) == _empty_tag("app{}:", "the URL's ?prefix=")
    link = RedisLink(cluster_url + "?timeout=2")
    try:
        link.prefix = "app{}:"  # past the check: the cluster puts the slot script's keys in two slots
        tool_key, all_key = RedisSlots(link)._keys("search")
        assert link.client.keyslot(tool_key) != link.client.keyslot(all_key)
    finally:
        link.close()
    reg = ToolRegistry(
        state=f"{cluster_url}?prefix={quote('{tenant-a}:')}&timeout=2",
        autoload=True,
        plugin_options={"concurrency": {"default": 2}},
    )
    reg.add(echo)
    assert reg.call("echo", {"x": 1}) == 1
    assert reg.state.concurrency().acquire("echo", "h1", cap=2, total=5, now=0, lease=5) == (True, 0, 0)


def test_a_capped_call_on_the_cluster_runs_with_a_plain_prefix(cluster_url: str) -> None:
    """A guard (it passed before the prefix check too): a prefix without braces spreads and runs."""
    reg = ToolRegistry(
        state=cluster_url + "?prefix=app:&timeout=2", autoload=False, plugin_options={"concurrency": {"default": 2}}
    )
    reg.add(echo)
    assert reg.call("echo", {"x": 1}) == 1


# --------------------------------------------------------------------------- NaN and text times (no Redis needed)


def _local_stores(tmp_path: Path) -> list[tuple[str, Any]]:
    return [("memory", MemoryStore()), ("sqlite", SQLiteStore(tmp_path / "s.db"))]


def test_the_local_stores_refuse_a_nan_expiry_and_lease_before_writing(tmp_path: Path) -> None:
    for name, store in _local_stores(tmp_path):
        with pytest.raises(ValueError) as begun:
            store.begin("tool", "k", "fp", 1e9, NAN, owner="o")
        assert str(begun.value) == LEASE, name
        assert store.begin("tool", "k", "fp", 1e9, 30, owner="o") is None, name  # nothing was claimed
        with pytest.raises(ValueError) as renewed:
            store.renew("tool", "k", 1e9, NAN, owner="o")
        assert str(renewed.value) == LEASE, name
        with pytest.raises(ValueError) as finished:
            store.finish("tool", "k", Record("fp", "done", NAN, True, 1, None), owner="o", now=1e9)
        assert str(finished.value) == EXPIRES, name
        held = store.begin("tool", "k", "fp", 1e9 + 1, 30, owner="p")  # still o's running claim
        assert (held.state, held.expires) == ("running", 1e9 + 30), name


async def test_the_sqlite_store_refuses_a_nan_on_the_asyncio_path(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    assert await store.abegin("tool", "k", "fp", 1e9, 30, owner="o") is None
    with pytest.raises(ValueError) as refused:
        await store.afinish("tool", "k", Record("fp", "done", NAN, True, 1, None), owner="o", now=1e9)
    assert str(refused.value) == EXPIRES
    with pytest.raises(ValueError) as lease:
        await store.arenew("tool", "k", 1e9, NAN, owner="o")
    assert str(lease.value) == LEASE
    with pytest.raises(ValueError) as begun:
        await store.abegin("tool", "k2", "fp", 1e9, NAN, owner="o")
    assert str(begun.value) == LEASE


def test_a_lease_given_as_text_is_read_as_float_reads_it_and_other_values_are_named(tmp_path: Path) -> None:
    for name, store in _local_stores(tmp_path):
        assert store.begin("tool", "k", "fp", 1e9, "30", owner="o") is None, name
        held = store.begin("tool", "k", "fp", 1e9 + 1, 30, owner="p")
        assert held.expires == 1e9 + 30, name
        assert store.renew("tool", "k", 1e9 + 2, "40", owner="o") is True, name
        with pytest.raises(TypeError) as none:
            store.begin("tool", "k3", "fp", 1e9, None, owner="o")
        assert str(none.value) == "a lease is a number of seconds, not None", name
        with pytest.raises(ValueError) as word:
            store.begin("tool", "k3", "fp", 1e9, "soon", owner="o")
        assert str(word.value) == "a lease is a number of seconds, not 'soon'", name
    budgets = MemoryBudgets()
    assert budgets.take("run", "s", limit=None, total=None, now=100.0, ttl="60") == 0
    assert budgets.used("run", "s", now=159.0) == 1
    with pytest.raises(ValueError) as nan_ttl:
        budgets.take("run", "s", limit=1, total=None, now=100.0, ttl=NAN)
    assert str(nan_ttl.value) == TTL
    assert budgets.used("run", "s", now=100.0) == 1


def test_memory_slots_do_not_read_their_lease() -> None:
    """The memory slots keep no lease: they take any (None worked before the NaN check), at no cost."""
    slots = MemorySlots()
    assert slots.acquire("t", "h", cap=1, total=None, now=100.0, lease=None) == (True, 0, 0)
    assert slots.acquire("t", "h2", cap=2, total=None, now=100.0, lease=NAN) == (True, 1, 1)
    assert slots.renew("t", "h", now=100.0, lease=NAN) is True


# --------------------------------------------------------------------------- NaN and text times on Redis


def test_the_redis_store_refuses_a_nan_expiry_and_lease_before_writing(redis_url: str) -> None:
    import redis

    from harness_one.state import RedisLink, RedisStore

    store = RedisStore(RedisLink(redis_url, prefix="n:", timeout=2))
    raw = redis.Redis.from_url(redis_url)
    try:
        with pytest.raises(ValueError) as begun:
            store.begin("tool", "k", "fp", 1e9, NAN, owner="o")
        assert str(begun.value) == LEASE
        assert raw.exists("n:idem:4:tool:k") == 0
        assert store.begin("tool", "k", "fp", 1e9, 30, owner="o") is None
        for record_of in ({"owner": "o", "now": 1e9}, {}):
            with pytest.raises(ValueError) as refused:
                store.finish("tool", "k", Record("fp", "done", NAN, True, 1, None), **record_of)
            assert str(refused.value) == EXPIRES
        with pytest.raises(ValueError) as renewed:
            store.renew("tool", "k", 1e9, NAN, owner="o")
        assert str(renewed.value) == LEASE
        held = store.begin("tool", "k", "fp", 1e9 + 1, 30, owner="p")
        assert (held.state, held.expires) == ("running", 1e9 + 30)
        assert raw.hget("n:idem:4:tool:k", "st") == b"running" and raw.pttl("n:idem:4:tool:k") > 0
    finally:
        raw.close()


async def test_the_redis_backends_refuse_a_nan_on_the_asyncio_path(redis_url: str) -> None:
    import redis

    from harness_one.state import RedisBudgets, RedisLink, RedisSlots, RedisStore

    link = RedisLink(redis_url, prefix="a:", timeout=2)
    store = RedisStore(link)
    assert await store.abegin("tool", "k", "fp", 1e9, 30, owner="o") is None
    with pytest.raises(ValueError) as refused:
        await store.afinish("tool", "k", Record("fp", "done", NAN, True, 1, None), owner="o", now=1e9)
    assert str(refused.value) == EXPIRES
    with pytest.raises(ValueError) as lease:
        await store.arenew("tool", "k", 1e9, NAN, owner="o")
    assert str(lease.value) == LEASE
    slots = RedisSlots(link, server_time=False)
    with pytest.raises(ValueError) as acquired:
        await slots.aacquire("t", "h2", cap=None, total=None, now=100.0, lease=NAN)
    assert str(acquired.value) == LEASE
    budgets = RedisBudgets(link, server_time=False)
    with pytest.raises(ValueError) as taken:
        await budgets.atake("run2", "s", limit=1, total=None, now=100.0, ttl=NAN)
    assert str(taken.value) == TTL
    raw = redis.Redis.from_url(redis_url)
    try:
        assert raw.exists(budgets._key("run2")) == 0
    finally:
        raw.close()


def test_the_redis_slots_and_budgets_refuse_a_nan_and_cap_an_infinite_one(redis_url: str) -> None:
    import redis

    from harness_one.state import RedisBudgets, RedisLink, RedisSlots

    link = RedisLink(redis_url, prefix="b:", timeout=2)
    slots = RedisSlots(link, server_time=False)
    with pytest.raises(ValueError) as acquired:
        slots.acquire("t", "h", cap=1, total=None, now=100.0, lease=NAN)
    assert str(acquired.value) == LEASE
    assert slots.running("t", now=100.0) == 0
    assert slots.acquire("t", "h", cap=1, total=None, now=100.0, lease=5) == (True, 0, 0)
    with pytest.raises(ValueError) as renewed:
        slots.renew("t", "h", now=100.0, lease=NAN)
    assert str(renewed.value) == LEASE
    with pytest.raises(ValueError) as many:
        slots.renew_many([("t", "h")], now=100.0, lease=NAN)
    assert str(many.value) == LEASE
    assert slots.acquire("u", "h", cap=1, total=None, now=100.0, lease=float("inf")) == (True, 0, 1)
    budgets = RedisBudgets(link, server_time=False)
    with pytest.raises(ValueError) as taken:
        budgets.take("run", "s", limit=1, total=None, now=100.0, ttl=NAN)
    assert str(taken.value) == TTL
    assert budgets.used("run", "s", now=100.0) == 0
    assert budgets.take("run", "s", limit=1, total=None, now=100.0, ttl=60) == 0
    assert budgets.take("run3", "s", limit=None, total=None, now=100.0, ttl=float("inf")) == 0
    raw = redis.Redis.from_url(redis_url)
    try:
        assert 0 < raw.pttl(budgets._key("run3")) <= 604800000  # an infinite ttl is capped at 7 days, as before
    finally:
        raw.close()


def test_the_redis_backends_read_a_lease_or_ttl_given_as_text(redis_url: str) -> None:
    """``"30"`` worked before the NaN check (each backend sent ``repr(float(lease))``) and was then a raw
    ``TypeError`` from ``math.isnan``."""
    from harness_one.state import RedisBudgets, RedisLink, RedisSlots, RedisStore

    link = RedisLink(redis_url, prefix="t:", timeout=2)
    store = RedisStore(link)
    assert store.begin("tool", "k", "fp", 1e9, "30", owner="o") is None
    assert store.begin("tool", "k", "fp", 1e9 + 1, 30, owner="p").expires == 1e9 + 30
    slots = RedisSlots(link, server_time=False)
    assert slots.acquire("t", "h", cap=1, total=None, now=1.0, lease="5") == (True, 0, 0)
    assert slots.running("t", now=5.5) == 1
    budgets = RedisBudgets(link, server_time=False)
    assert budgets.take("r", "s", limit=None, total=None, now=1.0, ttl="60") == 0
    assert budgets.used("r", "s", now=2.0) == 1
    with pytest.raises(TypeError) as none:
        store.begin("tool", "k2", "fp", 1e9, None, owner="o")
    assert str(none.value) == "a lease is a number of seconds, not None"
