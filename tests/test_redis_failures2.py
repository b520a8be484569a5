"""Redis failures at their edges, against a real redis-server: what settles a call is sent while the
link fails fast after a failure; a write of several calls has the time of them all; a configuration
error met while connecting fails every call, sync and async, and names no address; ``NOREPLICAS``
takes the fail mode; durations as long as 10^15 s are clamped where Redis takes milliseconds."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis_support import RedisServer

from harness_one import CircuitBreakerPolicy, ToolRegistry
from harness_one.state import StateUnavailable

# Returns ARGV[1] once Redis's clock has moved on ARGV[2] ms: a script as slow as a long record (busy, not blocked).
_SPIN = """
local function ms() local t = redis.call('TIME') return t[1] * 1000 + t[2] / 1000 end
local stop = ms() + tonumber(ARGV[2])
while ms() < stop do end
return ARGV[1]
"""


@pytest.fixture
def no_replicas(redis_server: RedisServer, redis_url: str) -> Iterator[Any]:
    """An admin client; a test sets ``min-replicas-to-write`` 1 (Redis then answers writes ``NOREPLICAS``), reset after."""
    admin = redis_server.client()
    try:
        yield admin
    finally:
        admin.config_set("min-replicas-to-write", 0)
        admin.close()


def backends(url: str) -> Any:
    """Every Redis backend on one link that fails fast for a minute after a failure (``server_time=False``)."""
    from types import SimpleNamespace

    from harness_one.state import RedisBuckets, RedisBudgets, RedisCircuits, RedisLink, RedisSlots, RedisStore

    link = RedisLink(url, down_for=60)
    return SimpleNamespace(
        link=link,
        slots=RedisSlots(link, server_time=False),
        store=RedisStore(link),
        budgets=RedisBudgets(link, server_time=False),
        buckets=RedisBuckets(link, server_time=False),
        circuits=RedisCircuits(link, server_time=False),
    )


PROBED = CircuitBreakerPolicy.parse({"min_calls": 1, "open_for": 5, "probes": 1}, tool="t")


@pytest.mark.parametrize("how", ["call", "acall"])
async def test_what_settles_a_call_is_sent_while_the_link_fails_fast(no_replicas: Any, redis_url: str, how: str) -> None:
    """A call holds a slot, an idempotency claim, a budget unit, a token and a half-open probe; Redis then fails
    one call (``NOREPLICAS``: a real failure, the link fails fast for ``down_for``) and is well again at once.
    The release, the outcome, the give-backs and the probe's outcome are still sent (before, each failed
    with 'it failed moments ago': the slot stayed held for its lease, the key 'running' for 5 minutes), while
    a new decision still fails fast."""
    from harness_one.state import Record

    b = backends(redis_url)
    now = time.time()
    assert b.slots.acquire("t", "h", cap=1, total=None, now=0, lease=30)[0]
    assert b.store.begin("s", "k", "fp", now, 300, owner="o") is None
    assert b.store.begin("s", "k2", "fp", now, 300) is None  # released without an owner below
    assert b.budgets.take("run", "t", limit=1, total=None, now=0, ttl=60, ticket="take") == 0
    assert b.buckets.acquire("b", rate=1e-9, burst=1, cost=1, now=0) == 0
    b.circuits.record("t", PROBED, now=100, failed=True, probe=0)  # opens
    wait, probe = b.circuits.admit("t", PROBED, now=106)
    assert wait == 0 and probe

    no_replicas.config_set("min-replicas-to-write", 1)
    with pytest.raises(StateUnavailable, match=r"\(ResponseError\)"):
        b.slots.acquire("u", "h", cap=1, total=None, now=0, lease=30)
    no_replicas.config_set("min-replicas-to-write", 0)
    assert b.link._is_down()

    done = Record("fp", "done", now + 3600, True, "paid")
    if how == "call":
        b.slots.release("t", "h")
        assert b.store.finish("s", "k", done, owner="o", now=now)
        b.store.release("s", "k2")
        b.budgets.give_back("run", "t", ticket="back")
        b.buckets.give_back("b", burst=1, cost=1)
        b.circuits.record("t", PROBED, now=107, failed=False, probe=probe)
        with pytest.raises(StateUnavailable, match="failed moments ago"):
            b.slots.acquire("t", "h2", cap=1, total=None, now=0, lease=30)
    else:
        await b.slots.arelease("t", "h")
        assert await b.store.afinish("s", "k", done, owner="o", now=now)
        await b.store.arelease("s", "k2")
        await b.budgets.agive_back("run", "t", ticket="back")
        await b.buckets.agive_back("b", burst=1, cost=1)
        await b.circuits.arecord("t", PROBED, now=107, failed=False, probe=probe)
        with pytest.raises(StateUnavailable, match="failed moments ago"):
            await b.slots.aacquire("t", "h2", cap=1, total=None, now=0, lease=30)
        await b.link.aclose()
    assert b.link._is_down()  # the settling calls went through the window, which they neither end nor extend

    b.link._down_until = 0.0
    assert b.slots.running("t", now=0) == 0
    found = b.store.begin("s", "k", "fp", now, 300)
    assert found is not None and found.state == "done" and found.value == "paid"
    assert b.store.begin("s", "k2", "fp", now, 300) is None  # free again: claimed anew
    assert b.budgets.used("run", "t", now=0) == 0
    assert b.buckets.acquire("b", rate=1e-9, burst=1, cost=1, now=0) == 0
    assert b.circuits.snapshot("t", PROBED, now=108)["state"] == "closed"


def spin() -> Any:
    """The spinning script (``_SPIN``) as the link runs its own."""
    from harness_one.state._redis import _Script

    return _Script(_SPIN)


@pytest.mark.parametrize("how", ["call", "acall"])
async def test_a_write_of_several_calls_has_the_time_of_them_all(redis_url: str, how: str) -> None:
    """Eight calls of 40 ms each under a 0.1 s timeout: Redis answers their write after 0.32 s, when it
    ran them all. Each is answered (before, every call of the write timed out, Redis having run them,
    and the link was marked down for the other tools)."""
    from harness_one.state import RedisLink

    link = RedisLink(redis_url, timeout=0.1)
    script = spin()
    if how == "call":
        link.run(script, [], ["warm", "0"])
        got = link.run_many(script, [([], [f"r{i}", "40"]) for i in range(8)])
    else:
        await link.arun(script, [], ["warm", "0"])  # the first call of a loop is written alone: the seven after it share a write
        got = await asyncio.gather(*(link.arun(script, [], [f"r{i}", "40"]) for i in range(8)))
        await link.aclose()
    assert got == [f"r{i}".encode() for i in range(8)]
    assert not link._is_down() and link.failures == 0


@pytest.mark.parametrize("how", ["call", "acall"])
async def test_a_write_of_several_calls_too_slow_fails_them_but_not_the_link(
    redis_server: RedisServer, redis_url: str, how: str
) -> None:
    """Four calls of 0.75 s each under a 0.25 s timeout: their write has 1 s and takes 3 s. They take the
    fail mode (``StateUnavailable``), but the link is not marked down: Redis was slow on them, not gone, and
    the next call is sent (a single call not answered still marks it down: ``test_redis_batching``).
    (The timeout is the link's for its warm-up and last calls too, which a loaded machine answered in up to
    46 ms: 0.25 s leaves them room, where 0.05 s did not.)"""
    from harness_one.state import RedisLink

    link = RedisLink(redis_url, timeout=0.25, down_for=60)
    script = spin()
    link.run(script, [], ["warm", "0"])
    if how == "call":
        with pytest.raises(StateUnavailable, match=r"\(BatchTimeout\)"):
            link.run_many(script, [([], [f"r{i}", "750"]) for i in range(4)])
    else:
        tasks = [asyncio.create_task(link.arun(script, [], [f"r{i}", "750" if i else "0"])) for i in range(5)]
        got = await asyncio.gather(*tasks, return_exceptions=True)
        assert got[0] == b"r0" and all(isinstance(e, StateUnavailable) and "BatchTimeout" in str(e) for e in got[1:]), got
        await link.aclose()
    assert not link._is_down()
    admin = redis_server.client()
    admin.connection_pool.connection_kwargs["socket_timeout"] = 30  # Redis runs the 3 s of calls to their end
    admin.ping()  # (waits for Redis to be done with them)
    admin.close()
    assert link.run(script, [], ["after", "0"]) == b"after"


def _garbage_server() -> tuple[socket.socket, threading.Thread]:
    """A TCP service that is not Redis: it answers anything with an HTTP error page."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.0 400 Bad request\r\n\r\n<html>no</html>\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.fixture(params=["db out of range", "SELECT denied", "not Redis"])
def misconfigured_url(request: pytest.FixtureRequest, redis_server: RedisServer, redis_url: str) -> Iterator[tuple[str, str]]:
    """A state URL wrong in a way found while connecting, and what the error says."""
    if request.param == "db out of range":
        yield redis_url.rsplit("/", 1)[0] + "/99", "DB index is out of range"
    elif request.param == "SELECT denied":
        admin = redis_server.client()
        admin.execute_command("ACL", "SETUSER", "noselect", "on", ">pw", "~*", "+@all", "-select")
        try:
            yield redis_url.replace("redis://", "redis://noselect:pw@").rsplit("/", 1)[0] + "/1", "denied the state's user"
        finally:
            admin.execute_command("ACL", "DELUSER", "noselect")
            admin.close()
    else:
        listener, thread = _garbage_server()
        try:
            yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0", "Protocol error"
        finally:
            listener.close()
            thread.join(5)


async def test_a_configuration_error_met_while_connecting_fails_every_call(misconfigured_url: tuple[str, str]) -> None:
    """Every call, sync and async, fails with the error (``plugin_error``), whatever ``on_state_error``
    says: before, the first sync call got it and the link was marked down, so the next calls failed open
    (the rate limit was not checked) and the async ones all took the fail mode."""
    url, says = misconfigured_url
    reg = ToolRegistry(state=url, autoload=False)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 1})
    found = [reg.try_call("limited") for _ in range(4)] + [await reg.atry_call("limited") for _ in range(4)]
    for result in found:
        assert result.error is not None and result.error.kind == "plugin_error" and says in result.error.message, result
    assert "state_failed_open" not in reg.stats().get("rate_limit", {})
    link = reg.plugins.get("rate_limit").backend.link
    assert not link._is_down() and link.failures == 0


def test_noreplicas_takes_the_fail_mode(no_replicas: Any, redis_url: str) -> None:
    """``min-replicas-to-write`` unmet: Redis answers writes ``NOREPLICAS``, which takes each plugin's fail
    mode (before, ``plugin_error`` quoting the script's SHA and line)."""
    reg = ToolRegistry(state=redis_url, autoload=False)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 5})
    reg.add(lambda: 2, name="keyed")
    no_replicas.config_set("min-replicas-to-write", 1)
    assert reg.call("limited") == 1  # rate_limit: open
    keyed = reg.try_call("keyed", idempotency_key="k")  # idempotency: closed
    assert keyed.error is not None and keyed.error.kind == "state_unavailable", keyed
    assert reg.stats()["rate_limit"]["state_failed_open"] == 1


def test_a_refused_password_names_no_address_to_the_model(redis_server: RedisServer, redis_url: str) -> None:
    """The error a model reads says what is wrong, not where Redis is; the application finds the address in
    the error's ``where`` (and in the log)."""
    from harness_one.state import RedisBuckets, RedisLink

    url = redis_url.replace("redis://", "redis://nobody:wrong@")
    reg = ToolRegistry(state=url, autoload=False)
    reg.add(lambda: 1, name="limited", rate_limit={"rate": 1, "burst": 5})
    result = reg.try_call("limited")
    assert result.error is not None and "refused the user or password" in result.error.message
    port = str(redis_server.port)
    assert port not in result.error.message and "127.0.0.1" not in result.error.message
    with pytest.raises(Exception, match="refused the user or password") as raised:
        RedisBuckets(RedisLink(url)).acquire("b", rate=1, burst=1, cost=1, now=0)
    assert port not in str(raised.value) and raised.value.where == f"redis://127.0.0.1:{port}"  # type: ignore[attr-defined]


def test_durations_of_10_15_seconds_are_clamped(redis_server: RedisServer, redis_url: str) -> None:
    """A circuit's ``window`` and a slot's ``lease`` of 10^15 s: the keys expire after 10^15 ms, at most, as
    buckets, budgets and idempotency records do (before, ``PEXPIRE`` refused the 1e+18 ms Lua wrote:
    ``plugin_error``)."""
    from harness_one.state import RedisCircuits, RedisLink, RedisSlots

    link = RedisLink(redis_url)
    huge = CircuitBreakerPolicy.parse({"window": 1e15, "open_for": 60}, tool="t")
    circuits, slots = RedisCircuits(link), RedisSlots(link)
    assert circuits.admit("t", huge, now=0) == (0.0, 0)
    circuits.record("t", huge, now=0, failed=True, probe=0)
    assert slots.acquire("t", "h", cap=2, total=None, now=0, lease=1e15)[0]
    assert slots.renew("t", "h", now=0, lease=1e15)
    admin = redis_server.client()
    ttls = [admin.pttl(key) for key in admin.keys("*")]
    assert len(ttls) == 3 and all(10**15 - 10**6 < ttl <= 10**15 for ttl in ttls), ttls


def test_a_circuit_record_reads_only_the_seconds_that_left_its_window(redis_server: RedisServer, redis_url: str) -> None:
    """A one-hour window holding a call a second (7,200 fields, as an earlier version kept them, without
    running totals): the first record sums the fields once; each later one subtracts the seconds that
    left the window since (one here), not the whole hash (a record cost 9 ms at one hour, 0.6 s at a
    day, blocking Redis; now 0.1 ms at either). The counts stay those of the window, and a circuit idle
    for longer than its window counts from zero."""
    from harness_one.state import RedisCircuits, RedisLink

    circuits = RedisCircuits(RedisLink(redis_url, timeout=5), server_time=False)
    hour = CircuitBreakerPolicy.parse({"window": 3600, "min_calls": 10**9}, tool="t")
    admin = redis_server.client()
    key = circuits._call("t", hour, 0)[0][0]
    start = 1_000_000
    admin.hset(key, mapping={f"{kind}{start + i}": n for i in range(3600) for kind, n in (("c", 2), ("f", 1))})
    circuits.record("t", hour, now=start + 3600.5, failed=True, probe=0)  # second `start` leaves: sums the rest
    assert circuits.snapshot("t", hour, now=start + 3600.5) == {"state": "closed", "calls": 7199, "failures": 3600, "opened": 0}
    before = redis_server.commandstats()
    for second in range(1, 11):
        circuits.record("t", hour, now=start + 3600.5 + second, failed=False, probe=0)
    used = {name: n - before.get(name, 0) for name, n in redis_server.commandstats().items()}
    assert used.get("hgetall", 0) == 0 and used["hmget"] == 20  # the totals and the second that left, per record
    assert circuits.snapshot("t", hour, now=start + 3610.5) == {"state": "closed", "calls": 7189, "failures": 3590, "opened": 0}
    assert admin.hlen(key) == 2 * 3589 + 2 + 10 + 3  # no second out of the window is kept (+ tc, tf, lo)
    circuits.record("t", hour, now=start + 9000.5, failed=True, probe=0)  # idle for longer than the window
    assert circuits.snapshot("t", hour, now=start + 9000.5)["calls"] == 1 and admin.hlen(key) == 2 + 3
