"""``acall`` on Redis state: the plugins' hooks answer with ``Await``, so every decision is
awaited on the asyncio client. The sync client is never used, the event loop keeps serving
other tasks while Redis is slow, and refusals, replays, slots, circuits and fail modes are the
same as under ``call``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis_support import RedisServer

from harness_one import CallResult, ToolRegistry
from harness_one.state import MemoryBuckets, MemoryCircuits, MemorySlots, MemoryStore

Caller = Callable[..., Awaitable[CallResult]]


def make_registry(url: str) -> tuple[ToolRegistry, list[int]]:
    """Four tools, one per shared-state plugin; ``runs`` counts the idempotent tool's runs."""
    reg = ToolRegistry(state=url, autoload=False, block=["retry"])
    runs: list[int] = []

    def charge(amount: int) -> dict[str, int]:
        runs.append(amount)
        return {"charged": amount, "run": len(runs)}

    def refund(amount: int) -> None:
        raise ValueError(f"cannot refund {amount}")

    def flaky(ok: bool) -> bool:
        if not ok:
            raise RuntimeError("down")
        return ok

    reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 2})
    reg.add(charge, name="charge")
    reg.add(refund, name="refund")
    reg.add(lambda: "ran", name="capped", max_concurrency=1)
    reg.add(flaky, name="flaky", circuit_breaker={"failure_ratio": 0.5, "min_calls": 2, "window": 60, "open_for": 60})
    return reg, runs


def outcome(result: CallResult) -> Any:
    if result.ok:
        return result.value
    assert result.error is not None
    return (result.error.kind, result.error.replayed)


async def scenario(call: Caller, slots: Any) -> list[Any]:
    """The same calls, through ``call`` (wrapped) or ``acall``; ``slots`` (another link) holds a slot meanwhile."""
    seen = [outcome(await call("limited")) for _ in range(3)]
    seen += [outcome(await call("charge", {"amount": 5}, idempotency_key="k")) for _ in range(2)]
    seen.append(outcome(await call("charge", {"amount": 6}, idempotency_key="k")))
    seen += [outcome(await call("refund", {"amount": 1}, idempotency_key="r")) for _ in range(2)]
    assert slots.acquire("capped", "elsewhere", cap=1, total=None, now=0, lease=30)[0]
    seen.append(outcome(await call("capped")))
    slots.release("capped", "elsewhere")
    seen += [outcome(await call("capped")), slots.running("capped", now=0)]  # released after the call
    seen += [outcome(await call("flaky", {"ok": False})) for _ in range(2)]
    seen.append(outcome(await call("flaky", {"ok": True})))
    return seen


EXPECTED = [
    1,
    1,
    ("rate_limited", False),
    {"charged": 5, "run": 1},
    {"charged": 5, "run": 1},
    ("idempotency_mismatch", False),
    ("tool_failed", False),
    ("tool_failed", True),
    ("busy", False),
    "ran",
    0,
    ("tool_failed", False),
    ("tool_failed", False),
    ("circuit_open", False),
]


def sync_client_unused(reg: ToolRegistry) -> bool:
    """Whether the sync client of the registry's plugins never opened a connection (its pool or the kept one)."""
    link = reg.plugins.get("rate_limit").backend.link
    assert all(
        backend.link is link
        for backend in (
            reg.plugins.get("idempotency").store,
            reg.plugins.get("concurrency").slots,
            reg.plugins.get("circuit_breaker").store,
        )
    )
    pool = link.client.connection_pool
    return link._hot is None and not pool._available_connections and not pool._in_use_connections


async def test_acall_matches_call_and_never_uses_the_sync_client(redis_url: str) -> None:
    from harness_one.state import RedisLink, RedisSlots

    sync_reg, sync_runs = make_registry(redis_url + "?prefix=sync:")

    async def blocking(*args: Any, **kwargs: Any) -> CallResult:
        return sync_reg.try_call(*args, **kwargs)

    assert await scenario(blocking, RedisSlots(RedisLink(redis_url, prefix="sync:"))) == EXPECTED
    assert not sync_client_unused(sync_reg)  # call used the sync client

    async_reg, async_runs = make_registry(redis_url + "?prefix=async:")
    assert await scenario(async_reg.atry_call, RedisSlots(RedisLink(redis_url, prefix="async:"))) == EXPECTED
    assert sync_runs == async_runs == [5]
    assert sync_client_unused(async_reg)


async def test_the_loop_keeps_serving_while_redis_is_paused(redis_server: RedisServer, redis_url: str) -> None:
    reg, _ = make_registry(redis_url + "?timeout=3")
    assert (await reg.atry_call("limited")).ok  # connected, script loaded
    ticks: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    admin = redis_server.client()
    try:
        admin.execute_command("CLIENT", "PAUSE", 200, "ALL")
        started = time.monotonic()
        beat = asyncio.create_task(ticker())
        result = await reg.atry_call("limited")
        took = time.monotonic() - started
        done.set()
        await beat
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
        admin.close()
    assert result.ok and took >= 0.15  # the decision waited for Redis...
    assert len(ticks) >= 5  # ...while the loop ran the ticker (every 10 ms; blocked, it would tick once)
    assert sync_client_unused(reg)


async def test_fail_modes_under_acall_are_those_of_call(redis_server: RedisServer, redis_url: str) -> None:
    kinds: dict[str, list[Any]] = {}
    regs = {"sync": make_registry(redis_url + "?timeout=0.2")[0], "async": make_registry(redis_url + "?timeout=0.2")[0]}
    redis_server.stop()
    try:
        for how, reg in regs.items():
            run: Caller = reg.atry_call
            if how == "sync":

                async def run(*args: Any, _reg: ToolRegistry = reg, **kwargs: Any) -> CallResult:
                    return _reg.try_call(*args, **kwargs)

            kinds[how] = [
                outcome(await run("limited")),  # rate limits fail open
                outcome(await run("charge", {"amount": 1}, idempotency_key="k")),  # idempotency fails closed
                outcome(await run("capped")),  # concurrency fails closed
                outcome(await run("flaky", {"ok": True})),  # circuits fail open
            ]
            assert reg.stats()["rate_limit"]["state_failed_open"] == 1
            assert reg.stats()["circuit_breaker"]["state_failed_open"] == 1
            assert reg.stats()["idempotency"]["state_failed_closed"] == 1
    finally:
        redis_server.start()
    assert kinds["sync"] == kinds["async"] == [1, ("state_unavailable", False), ("state_unavailable", False), True]
    assert sync_client_unused(regs["async"])


def test_memory_backends_answer_without_await() -> None:
    """In one process the hooks answer at once: no ``Await``, nothing to fetch."""
    from harness_one import Await, hookimpl
    from harness_one_plugins import CircuitBreakerPlugin, ConcurrencyPlugin, IdempotencyPlugin, RateLimitPlugin

    answers: list[Any] = []
    plugins = [RateLimitPlugin(), CircuitBreakerPlugin(), ConcurrencyPlugin(), IdempotencyPlugin()]
    assert isinstance(plugins[0].backend, MemoryBuckets) and isinstance(plugins[1].store, MemoryCircuits)
    assert isinstance(plugins[2].slots, MemorySlots) and isinstance(plugins[3].store, MemoryStore)

    class Spy:
        """Asks plugins outside the registry what they answer for the registry's call."""

        @hookimpl
        def harness_pre_call(self, call: Any) -> None:
            answers.extend(plugin.harness_pre_call(call) for plugin in plugins)

        @hookimpl
        def harness_post_call(self, call: Any) -> None:
            answers.extend(plugin.harness_post_call(call) for plugin in plugins[1:])  # rate_limit has none

    reg = ToolRegistry(  # the spy stands in for the idempotency plugin (a keyed call needs one)
        autoload=False, plugins={"idempotency": Spy()}, block=["rate_limit", "circuit_breaker", "concurrency"]
    )
    reg.add(lambda: 1, name="t", rate_limit={"rate": 100, "burst": 100}, max_concurrency=5, circuit_breaker=True)
    assert reg.call("t", idempotency_key="x") == 1
    assert answers == [None] * 7 and not any(isinstance(a, Await) for a in answers)
    assert plugins[2].running("t") == 0 and plugins[3].stored == 1


@pytest.mark.parametrize("kind", ["RedisBuckets", "RedisStore", "RedisSlots", "RedisCircuits"])
def test_redis_backends_have_async_twins(kind: str) -> None:
    from harness_one import state

    protocol = {
        "RedisBuckets": state.AsyncRateLimitBackend,
        "RedisStore": state.AsyncIdempotencyStore,
        "RedisSlots": state.AsyncConcurrencySlots,
        "RedisCircuits": state.AsyncCircuitStore,
    }[kind]
    backend = getattr(state, kind)(state.RedisLink("redis://127.0.0.1:1/0"))
    assert isinstance(backend, protocol)
    memory = {
        "RedisBuckets": MemoryBuckets,
        "RedisStore": MemoryStore,
        "RedisSlots": MemorySlots,
        "RedisCircuits": MemoryCircuits,
    }
    assert not isinstance(memory[kind](), protocol)
