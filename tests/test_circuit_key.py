"""The circuit breaker's ``key``: tools with one key share one circuit, in memory and in Redis."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import CircuitBreakerPolicy, CircuitOpen, ManualClock, ToolDefinitionError, ToolRegistry
from harness_one_plugins import CircuitBreakerPlugin

SHARED = {"min_calls": 2, "failure_ratio": 0.5, "open_for": 30, "probes": 1, "key": "backend"}


def backend(ok: bool = False) -> str:
    if not ok:
        raise OSError("backend down")
    return "fine"


def tools(reg: ToolRegistry, **policy: Any) -> ToolRegistry:
    """``read`` and ``write`` share the circuit ``backend``; ``other`` has its own."""
    settings = {**SHARED, **policy}
    reg.add(backend, name="read", circuit_breaker=settings)
    reg.add(backend, name="write", circuit_breaker=settings)
    reg.add(backend, name="other", circuit_breaker={k: v for k, v in settings.items() if k != "key"})
    return reg


def test_two_tools_share_one_circuit(clock: ManualClock) -> None:
    reg = tools(ToolRegistry(clock=clock, autoload=False))
    assert "OSError" in reg.try_call("read").for_model()
    assert "OSError" in reg.try_call("write").for_model()  # two failures of two tools: one circuit opens
    refused = reg.try_call("read", {"ok": True}).error
    assert isinstance(refused, CircuitOpen) and refused.retry_after == pytest.approx(30)
    assert refused.message == (
        "Tool 'read' is paused: the tools sharing its circuit 'backend' are failing repeatedly. "
        "Retry after 30 s or use a tool outside that circuit."
    )
    assert reg.call("other", {"ok": True}) == "fine"  # its own circuit is closed
    breaker = reg.plugins.get("circuit_breaker")
    assert breaker.state("read") == breaker.state("write") == "open" and breaker.state("other") == "closed"
    stats = reg.stats()["tools"]
    shared = {"state": "open", "calls": 0, "failures": 0, "opened": 1, "key": "backend"}
    assert stats["read"]["circuit"] == stats["write"]["circuit"] == shared
    assert "key" not in stats["other"]["circuit"]
    clock.advance(30)
    assert reg.call("write", {"ok": True}) == "fine"  # the one probe, through the other tool, closes it for both
    assert breaker.state("read") == "closed"
    assert reg.call("read", {"ok": True}) == "fine"


def test_tools_of_one_key_keep_their_settings(clock: ManualClock) -> None:
    """Each call is judged with its own tool's settings, on the state the key's tools built together."""
    reg = ToolRegistry(clock=clock, autoload=False)
    reg.add(backend, name="patient", circuit_breaker={"min_calls": 4, "key": "backend"})
    reg.add(backend, name="strict", circuit_breaker={"min_calls": 2, "key": "backend"})
    reg.try_call("patient")
    assert reg.plugins.get("circuit_breaker").state("strict") == "closed"  # one call: neither opens
    reg.try_call("strict")  # the second failure on the key: enough for strict's min_calls
    assert isinstance(reg.try_call("patient", {"ok": True}).error, CircuitOpen)


async def test_async_calls_share_the_circuit(clock: ManualClock) -> None:
    reg = tools(ToolRegistry(clock=clock, autoload=False))
    await reg.atry_call("read")
    await reg.atry_call("write")
    assert isinstance((await reg.atry_call("write", {"ok": True})).error, CircuitOpen)
    assert (await reg.acall("other", {"ok": True})) == "fine"


def test_a_key_is_a_non_empty_string() -> None:
    assert CircuitBreakerPolicy.parse({"key": "mcp:files"}, tool="t").key == "mcp:files"
    assert CircuitBreakerPolicy.parse(True, tool="t").key is None  # the tool's own circuit
    for bad in ("", 3):
        with pytest.raises(ToolDefinitionError, match="circuit_breaker key must be a non-empty string"):
            CircuitBreakerPolicy.parse({"key": bad}, tool="t")


def test_redis_workers_share_a_keyed_circuit(redis_url: str) -> None:
    """Two registries on one Redis (two workers): ``read`` failing in one pauses ``write`` in the other."""
    first, second = (tools(ToolRegistry(state=redis_url, autoload=False)) for _ in range(2))
    first.try_call("read")
    first.try_call("read")
    refused = second.try_call("write", {"ok": True}).error
    assert isinstance(refused, CircuitOpen) and 29 < refused.retry_after <= 30
    assert second.call("other", {"ok": True}) == "fine"
    assert second.plugins.get("circuit_breaker").state("read") == "open"  # a tool second never called
    assert second.stats()["tools"]["write"]["circuit"]["key"] == "backend"


async def test_redis_async_probe_closes_the_shared_circuit(redis_url: str) -> None:
    """The awaitable Redis path, with a manual clock: a probe through one tool closes the key for both workers."""
    from harness_one.state import RedisCircuits, RedisLink

    clock, link = ManualClock(start=1000.0), RedisLink(redis_url)

    def worker() -> ToolRegistry:
        plugin = CircuitBreakerPlugin(store=RedisCircuits(link, server_time=False))
        return tools(ToolRegistry(clock=clock, autoload=False, plugins={"circuit_breaker": plugin}))

    first, second = worker(), worker()
    await first.atry_call("read")
    await second.atry_call("write")
    assert isinstance((await first.atry_call("write", {"ok": True})).error, CircuitOpen)
    clock.advance(30)
    assert (await second.acall("read", {"ok": True})) == "fine"  # the probe
    assert (await first.acall("write", {"ok": True})) == "fine"
    assert first.plugins.get("circuit_breaker").state("read") == "closed"


def test_each_call_of_a_shared_circuit_is_judged_with_its_own_tools_policy() -> None:
    from harness_one import CircuitBreakerPolicy
    from harness_one.state import MemoryCircuits

    store = MemoryCircuits()
    strict = CircuitBreakerPolicy(key="api", min_calls=2, failure_ratio=0.5, open_for=30.0)
    lax = CircuitBreakerPolicy(key="api", min_calls=1000, failure_ratio=0.99, open_for=1.0)
    store.admit("api", lax, now=0.0)  # another tool of the key, in between: it changes nothing for the strict one
    store.record("api", strict, now=0.0, failed=True, probe=False)
    store.snapshot("api", lax, now=0.0)
    store.record("api", strict, now=0.0, failed=True, probe=False)
    assert store.snapshot("api", strict, now=0.0)["state"] == "open"
    assert store.admit("api", lax, now=2.0) == (0.0, True)  # the lax tool's own open_for (1 s) is over: a probe


def _stepped_back(reg: ToolRegistry, clock: ManualClock) -> None:
    """Open the circuit, step the clock back 900 s: the open period stays at most ``open_for``."""
    tools(reg)
    reg.try_call("read")
    reg.try_call("write")
    clock.advance(-900)
    refused = reg.try_call("read", {"ok": True}).error
    assert isinstance(refused, CircuitOpen) and refused.retry_after == pytest.approx(30)  # was 930
    clock.advance(31)
    assert reg.call("read", {"ok": True}) == "fine"  # half open: the probe ran (was open for 900 s more)


def test_a_clock_stepping_back_does_not_stretch_the_open_period(clock: ManualClock) -> None:
    _stepped_back(ToolRegistry(clock=clock, autoload=False), clock)


def test_a_clock_stepping_back_does_not_stretch_the_open_period_in_redis(redis_url: str) -> None:
    """Redis times circuits by its own clock (TIME, a wall clock that can step back): the opening
    time is moved 900 s ahead of it, as a step back would leave it."""
    import redis

    reg = tools(ToolRegistry(state=redis_url, autoload=False))
    reg.try_call("read")
    reg.try_call("write")
    client = redis.Redis.from_url(redis_url)
    (key,) = [k for k in client.scan_iter("*backend*") if client.type(k) == b"hash" and client.hget(k, "op") is not None]
    client.hset(key, "op", float(client.hget(key, "op") or 0) + 900)
    refused = reg.try_call("read", {"ok": True}).error
    assert isinstance(refused, CircuitOpen) and 29 < (refused.retry_after or 0) <= 30  # was 930
    assert float(client.hget(key, "op") or 0) <= float(client.time()[0]) + 1  # the period runs from now
