"""Redis down, slow or restarted mid-run, against a real redis-server: the fail modes that are not
the defaults (``test_redis_state`` has the defaults), a server slower than the timeout (``CLIENT
PAUSE``), threads and asyncio tasks calling through a restart, the default registry on
``HARNESS_ONE_REDIS_URL``, and the multi-worker example run as a program."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_support import RedisServer

from harness_one import RateLimitExceeded, ToolError, ToolRegistry
from harness_one.state import StateUnavailable
from harness_one_plugins import BudgetPlugin, CircuitBreakerPlugin, ConcurrencyPlugin, IdempotencyPlugin, RateLimitPlugin
from harness_one_plugins.budget import BudgetExhausted

ROOT = Path(__file__).resolve().parent.parent
Run = Callable[..., Awaitable[Any]]


def caller(reg: ToolRegistry, how: str) -> Run:
    """``reg.acall``, or ``reg.call`` in a worker thread (so that two sync calls can overlap)."""
    if how == "acall":
        return reg.acall

    async def run(name: str, arguments: Any = None, **options: Any) -> Any:
        return await asyncio.to_thread(reg.call, name, arguments, **options)

    return run


def inverted(url: str) -> tuple[ToolRegistry, Counter[str]]:
    """A registry whose stateful plugins all take the fail mode opposite to their default, and
    the runs of each of its tools."""
    plugins = {
        "rate_limit": RateLimitPlugin(on_state_error="closed"),
        "idempotency": IdempotencyPlugin(on_state_error="open"),
        "concurrency": ConcurrencyPlugin(on_state_error="open"),
        "circuit_breaker": CircuitBreakerPlugin(on_state_error="closed"),
        "budget": BudgetPlugin(on_state_error="closed"),
    }
    reg = ToolRegistry(state=url, autoload=False, plugins=plugins)
    runs: Counter[str] = Counter()
    together = threading.Barrier(2, timeout=3)  # two calls of the capped tool inside it at once

    def counted(name: str) -> int:
        runs[name] += 1
        return runs[name]

    def capped() -> str:
        together.wait()  # broken (an error) unless both calls run at the same time
        return "both inside"

    reg.add(lambda: counted("limited"), name="limited", rate_limit={"rate": 0.001, "burst": 1})
    reg.add(lambda: counted("keyed"), name="keyed")
    reg.add(capped, name="capped", max_concurrency=1)
    reg.add(lambda: counted("guarded"), name="guarded", circuit_breaker=True)
    reg.add(lambda: counted("budgeted"), name="budgeted", options={"max_calls": 1})
    return reg, runs


def typed_refusal(error: BaseException) -> str:
    return error.kind if isinstance(error, ToolError) else f"untyped {type(error).__name__}: {error}"


@pytest.mark.parametrize("how", ["call", "acall"])
async def test_the_other_fail_modes_when_redis_is_down(redis_server: RedisServer, redis_url: str, how: str) -> None:
    reg, runs = inverted(redis_url + "?timeout=0.2")
    run = caller(reg, how)
    # With Redis up, every policy holds: what follows is the fail mode, not a policy that never applied.
    assert await run("limited") == 1
    with pytest.raises(RateLimitExceeded):
        await run("limited")
    assert await run("keyed", idempotency_key="k") == await run("keyed", idempotency_key="k") == 1  # a replay
    assert await run("guarded") == 1
    assert await run("budgeted", context={"run_id": "up"}) == 1
    with pytest.raises(BudgetExhausted):
        await run("budgeted", context={"run_id": "up"})
    assert reg.stats()["rate_limit"] == {"refused": 1}
    redis_server.stop()
    try:
        with pytest.raises(StateUnavailable) as refused:
            await run("limited")  # rate limit "closed": refused, not admitted
        assert refused.value.tool == "limited" and refused.value.kind == "state_unavailable" and refused.value.retry_after
        # idempotency "open": the call runs without the key's protection, so a repeat runs again
        assert await run("keyed", idempotency_key="down") == 2
        assert await run("keyed", idempotency_key="down") == 3
        # concurrency "open": uncapped, two calls of a tool capped at 1 run together
        assert list(await asyncio.gather(run("capped"), run("capped"))) == ["both inside"] * 2
        with pytest.raises(StateUnavailable) as broken:
            await run("guarded")  # circuit breaker "closed"
        assert broken.value.tool == "guarded"
        with pytest.raises(StateUnavailable) as unbudgeted:
            await run("budgeted", context={"run_id": "down"})  # budget "closed"
        assert unbudgeted.value.tool == "budgeted"
        assert runs == {"limited": 1, "keyed": 3, "guarded": 1, "budgeted": 1}  # no refused call ran
        stats = reg.stats()
        assert stats["rate_limit"] == {"refused": 1, "state_failed_closed": 1}
        assert stats["idempotency"] == {"replays": 1, "stored": 1, "state_failed_open": 2}
        assert stats["concurrency"]["state_failed_open"] == 2 and "state_failed_closed" not in stats["concurrency"]
        assert stats["circuit_breaker"]["state_failed_closed"] == 1 and "state_failed_open" not in stats["circuit_breaker"]
        assert stats["budget"]["state_failed_closed"] == 1 and "state_failed_open" not in stats["budget"]
    finally:
        redis_server.start()
    # Back (empty: no persistence here) once the fail-fast window ends: the policies hold again.
    deadline = time.monotonic() + 5
    while True:
        try:
            assert await run("limited") == 2  # a fresh bucket
            break
        except StateUnavailable:  # the fail-fast window (0.5 s) after the last failure
            assert time.monotonic() < deadline, "no reconnection after the restart"
            await asyncio.sleep(0.05)
    failed = reg.stats()["idempotency"]["state_failed_open"]
    with pytest.raises(RateLimitExceeded):
        await run("limited")
    assert await run("keyed", idempotency_key="after") == await run("keyed", idempotency_key="after") == 4
    assert reg.stats()["idempotency"]["state_failed_open"] == failed  # the key was claimed in Redis again


@pytest.mark.parametrize("mode", ["ALL", "WRITE"])
def test_a_server_slower_than_the_timeout_takes_the_fail_mode_in_time(
    redis_server: RedisServer, redis_url: str, mode: str
) -> None:
    """``CLIENT PAUSE`` longer than ``?timeout=0.2``: each call gives up after about the timeout
    (``WRITE`` pauses only writes, which every script is; ``ALL`` also holds new connections)."""
    pause, bound = 2.5, 2.0  # a call that waited for the server would take the whole pause
    url = redis_url + "?timeout=0.2&prefix="
    # The defaults (rate limits open, idempotency closed), on three links (each waits out its own
    # timeout, not another's fail-fast window) and three namespaces (three buckets).
    lax, strict, aio = (ToolRegistry(state=url + name, autoload=False) for name in ("lax:", "strict:", "aio:"))
    runs: Counter[str] = Counter()
    for reg in (lax, strict, aio):
        reg.add(lambda: 1, name="limited", rate_limit={"rate": 0.001, "burst": 1})
        reg.add(lambda: runs.update(["keyed"]) or runs["keyed"], name="keyed")

    def timed(call: Callable[[], Any]) -> tuple[Any, float]:
        started = time.monotonic()
        try:
            outcome = call()
        except ToolError as exc:
            outcome = exc
        return outcome, time.monotonic() - started

    async def paused_acall() -> tuple[Any, float]:
        assert await aio.acall("limited") == 1  # connected on this loop, script loaded: then the pause
        admin.execute_command("CLIENT", "PAUSE", int(pause * 1000), mode)
        started = time.monotonic()
        return await aio.acall("limited"), time.monotonic() - started

    assert lax.call("limited") == 1 and strict.call("keyed", idempotency_key="warm") == 1
    admin = redis_server.client()
    admin.connection_pool.connection_kwargs["socket_timeout"] = pause + 5  # its UNPAUSE waits out an ALL pause
    try:
        paused_at = time.monotonic()
        admitted, took_async = asyncio.run(paused_acall())
        refused, took_keyed = timed(lambda: strict.call("keyed", idempotency_key="k"))
        opened, took_sync = timed(lambda: lax.call("limited"))
        assert time.monotonic() - paused_at < pause  # all three met the paused server
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
        admin.close()
    assert admitted == 1 and opened == 1  # rate limits fail open...
    assert lax.stats()["rate_limit"]["state_failed_open"] == aio.stats()["rate_limit"]["state_failed_open"] == 1
    assert isinstance(refused, StateUnavailable) and "Timeout" in str(refused)  # ...idempotency fails closed
    port = str(redis_server.port)  # what the model reads names no address; the application finds it in `where`
    assert port not in refused.message and port not in json.dumps(refused.to_dict()) and port in str(refused.where)
    assert strict.stats()["idempotency"]["state_failed_closed"] == 1 and runs["keyed"] == 1
    for took in (took_async, took_keyed, took_sync):
        assert 0.15 < took < bound  # it waited for the server, about the timeout, not the pause
    time.sleep(0.5)  # the links' fail-fast window ends
    for reg in (lax, aio):
        with pytest.raises(RateLimitExceeded):  # Redis decides again: the bucket is still empty
            reg.call("limited")
    assert asyncio.run(aio.acall("keyed", idempotency_key="k2")) == 2
    assert strict.call("keyed", idempotency_key="k") == 3 and strict.call("keyed", idempotency_key="k") == 3
    assert strict.stats()["idempotency"]["state_failed_closed"] == 1


class Outcomes:
    """What each call of a run saw, with when it started: ``ok``, a typed refusal's kind, or ``untyped ...``.
    (The start, not the end: on a loaded machine a call refused in the fail-fast window can end well after it.)"""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def add(self, started: float, outcome: str) -> None:
        with self.lock:
            self.seen.append((started, outcome))

    def kinds(self, after: float = 0.0, before: float = float("inf")) -> Counter[str]:
        """The outcomes of the calls ended so far that started in ``[after, before)``."""
        with self.lock:
            return Counter(kind for at, kind in self.seen if after <= at < before)


def restartable(url: str) -> ToolRegistry:
    """A rate-limited tool whose outages show: the rate limit fails closed."""
    reg = ToolRegistry(state=url, autoload=False, plugins={"rate_limit": RateLimitPlugin(on_state_error="closed")})
    reg.add(lambda: "ok", name="search", rate_limit={"rate": 200, "burst": 20})
    return reg


#: After a restart, the run goes on until this many calls ended past the fail-fast window (or ``SETTLE_LIMIT`` s
#: passed): on a loaded machine a fixed second could end before any call did.
SETTLE_CALLS, SETTLE_LIMIT = 20, 15.0


def settled(outcomes: Outcomes, since: float) -> bool:
    return sum(outcomes.kinds(after=since).values()) >= SETTLE_CALLS


#: Before the stop, the run goes on until this many calls succeeded (or ``SETTLE_LIMIT`` s passed): on a loaded
#: machine the first calls (connecting, loading the script) can take longer than any fixed wait.
WARM_CALLS = 8


def warmed(outcomes: Outcomes) -> bool:
    return outcomes.kinds()["ok"] >= WARM_CALLS


def outage_seen(outcomes: Outcomes, stopped: float) -> bool:
    return outcomes.kinds(after=stopped)["state_unavailable"] > 0


def check_the_run(outcomes: Outcomes, stopped: float, restarted: float, ended: float) -> None:
    everything = outcomes.kinds()
    assert set(everything) <= {"ok", "rate_limited", "state_unavailable"}, everything  # only typed refusals
    assert outcomes.kinds(before=stopped)["ok"] > 0
    assert outcomes.kinds(after=stopped, before=restarted)["state_unavailable"] > 0  # the outage was seen
    back = outcomes.kinds(after=restarted + 0.7, before=ended)  # started after the fail-fast window (0.5 s)
    assert back["ok"] > 0 and back["state_unavailable"] == 0, back


def test_threads_calling_through_a_restart(redis_server: RedisServer, redis_url: str) -> None:
    reg = restartable(redis_url + "?timeout=1")
    outcomes, stop = Outcomes(), threading.Event()

    def work() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                reg.call("search")
                outcomes.add(started, "ok")
            except ToolError as exc:
                outcomes.add(started, exc.kind)
            except Exception as exc:  # anything else is what the test looks for
                outcomes.add(started, typed_refusal(exc))

    pool = [threading.Thread(target=work, daemon=True) for _ in range(8)]
    for t in pool:
        t.start()
    try:
        limit = time.monotonic() + SETTLE_LIMIT
        while not warmed(outcomes) and time.monotonic() < limit:
            time.sleep(0.05)
        stopped = time.monotonic()
        redis_server.stop()
        time.sleep(0.4)
        while not outage_seen(outcomes, stopped) and time.monotonic() < stopped + SETTLE_LIMIT:
            time.sleep(0.05)
    finally:
        redis_server.start()
    restarted = time.monotonic()
    time.sleep(1.0)
    while not settled(outcomes, restarted + 0.7) and time.monotonic() < restarted + SETTLE_LIMIT:
        time.sleep(0.05)
    ended = time.monotonic()
    stop.set()
    for t in pool:
        t.join(10)
    assert not any(t.is_alive() for t in pool), "a call hung"
    check_the_run(outcomes, stopped, restarted, ended)
    time.sleep(0.1)  # a token or more
    assert reg.call("search") == "ok"


async def test_asyncio_tasks_calling_through_a_restart(redis_server: RedisServer, redis_url: str) -> None:
    reg = restartable(redis_url + "?timeout=1")
    outcomes, stop = Outcomes(), asyncio.Event()

    async def work() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                await reg.acall("search")
                outcomes.add(started, "ok")
            except ToolError as exc:
                outcomes.add(started, exc.kind)
            except Exception as exc:  # anything else is what the test looks for
                outcomes.add(started, typed_refusal(exc))
            await asyncio.sleep(0.001)  # a call refused at once (the fail-fast window) awaits nothing

    tasks = [asyncio.create_task(work()) for _ in range(8)]
    try:
        limit = time.monotonic() + SETTLE_LIMIT
        while not warmed(outcomes) and time.monotonic() < limit:
            await asyncio.sleep(0.05)
        stopped = time.monotonic()
        await asyncio.to_thread(redis_server.stop)
        await asyncio.sleep(0.4)
        while not outage_seen(outcomes, stopped) and time.monotonic() < stopped + SETTLE_LIMIT:
            await asyncio.sleep(0.05)
    finally:
        await asyncio.to_thread(redis_server.start)
    restarted = time.monotonic()
    await asyncio.sleep(1.0)
    while not settled(outcomes, restarted + 0.7) and time.monotonic() < restarted + SETTLE_LIMIT:
        await asyncio.sleep(0.05)
    ended = time.monotonic()
    stop.set()
    done, hung = await asyncio.wait(tasks, timeout=10)
    for task in hung:
        task.cancel()
    assert not hung, "a call hung"
    for task in done:
        task.result()
    check_the_run(outcomes, stopped, restarted, ended)
    await asyncio.sleep(0.1)
    assert await reg.acall("search") == "ok"


@pytest.fixture
def unset_default() -> Iterator[None]:
    """No default registry: the next ``ToolRegistry.default()`` makes one from the environment."""
    old = ToolRegistry.set_default(None)
    try:
        yield
    finally:
        made = ToolRegistry.set_default(old)
        if made is not None:
            made.state.close()


def test_the_default_registry_takes_redis_from_the_environment(
    redis_server: RedisServer, redis_url: str, monkeypatch: pytest.MonkeyPatch, unset_default: None
) -> None:
    from harness_one.state import RedisBuckets, RedisCircuits, RedisSlots, RedisStore

    monkeypatch.setenv("HARNESS_ONE_REDIS_URL", redis_url)
    monkeypatch.setenv("HARNESS_ONE_STATE", "memory:")  # the Redis URL wins
    monkeypatch.setenv("HARNESS_ONE_REDIS_PREFIX", "fm:")
    reg = ToolRegistry.default()
    assert isinstance(reg.plugins.get("rate_limit").backend, RedisBuckets)
    assert isinstance(reg.plugins.get("idempotency").store, RedisStore)
    assert isinstance(reg.plugins.get("concurrency").slots, RedisSlots)
    assert isinstance(reg.plugins.get("circuit_breaker").store, RedisCircuits)
    reg.add(lambda: 1, name="failmodes_limited", rate_limit={"rate": 0.001, "burst": 1})
    reg.add(lambda n: n, name="failmodes_keyed")
    assert ToolRegistry.call("failmodes_limited") == 1  # the class-level call goes to the default registry
    assert ToolRegistry.call("failmodes_keyed", {"n": 1}, idempotency_key="k") == 1
    client = redis_server.client()
    try:
        keys = set(client.keys("*"))
    finally:
        client.close()
    assert {b"fm:rl:{failmodes_limited}", b"fm:idem:15:failmodes_keyed:k"} <= keys
    other = ToolRegistry(state=redis_url + "?prefix=fm:", autoload=False)  # another worker on the same Redis
    other.add(lambda: 1, name="failmodes_limited", rate_limit={"rate": 0.001, "burst": 1})
    with pytest.raises(RateLimitExceeded):
        other.call("failmodes_limited")  # the default registry took the one token
    other.state.close()


def test_the_redis_workers_example_shares_one_limit(redis_url: str) -> None:
    """The example run as its docs say, on a URL that already has a query (``?timeout=1``).

    The total is checked against the window the example measured (its first admitted call to
    its last), not against ``--seconds``: the clock starts once the workers are ready, however
    late a loaded machine starts them, and the window is what the limit refilled over.
    """
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "redis_workers.py"), redis_url + "?timeout=1", "--seconds", "1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"total (\d+) \(one shared limit: 10 \+ 20/s x ([\d.]+) s = (\d+) \+-1\)", done.stdout)
    assert found is not None, done.stdout
    total, window, expected = int(found[1]), float(found[2]), int(found[3])
    assert expected == 10 + int(20 * window)  # burst + rate * the window the example measured
    assert abs(total - expected) <= 1, done.stdout  # one limit for four processes, not four
    assert window > 0.5, done.stdout  # the workers called for about --seconds: not a run too short to tell
    assert done.stdout.endswith("the shared limit held\n")


def test_state_prefix_from_the_configuration_and_the_environment(
    redis_server: RedisServer, redis_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from harness_one._config import ConfigError, environment_state, load_settings

    for name in ("HARNESS_ONE_REDIS_URL", "HARNESS_ONE_STATE", "HARNESS_ONE_REDIS_PREFIX", "HARNESS_ONE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "harness-one.toml"
    config.write_text(f'[state]\nredis_url = "{redis_url}?timeout=1&prefix=old:"\nprefix = "app-a:"\n')
    settings = load_settings(str(config))
    assert settings.state_prefix == "app-a:"
    assert settings.state == f"{redis_url}?timeout=1&prefix=app-a:"  # the key wins over the URL's, the rest is kept
    reg = ToolRegistry(state=settings.state, autoload=False)
    reg.add(lambda: 1, name="prefixed", rate_limit={"rate": 0.001, "burst": 1})
    assert reg.call("prefixed") == 1 and reg.state.link().timeout == 1.0
    client = redis_server.client()
    try:
        assert client.keys("*") == [b"app-a:rl:{prefixed}"]
    finally:
        client.close()
        reg.state.close()
    monkeypatch.setenv("HARNESS_ONE_REDIS_PREFIX", "app-b:")  # the environment wins over the file
    assert load_settings(str(config)).state == f"{redis_url}?timeout=1&prefix=app-b:"
    monkeypatch.setenv("HARNESS_ONE_REDIS_URL", redis_url)
    assert load_settings(str(config)).state == environment_state() == f"{redis_url}?prefix=app-b:"
    monkeypatch.delenv("HARNESS_ONE_REDIS_URL")
    monkeypatch.setenv("HARNESS_ONE_STATE", "sqlite:///x.db")  # a prefix means nothing to other state
    assert load_settings(str(config)).state == environment_state() == "sqlite:///x.db"
    config.write_text("[state]\nprefix = 3\n")
    with pytest.raises(ConfigError, match=r"\[state\] prefix must be a string"):
        load_settings(str(config))
