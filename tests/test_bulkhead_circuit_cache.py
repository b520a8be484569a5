"""Concurrency caps, the circuit breaker, the result cache, and the order policies compose in."""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import types
from collections.abc import Generator
from typing import Any

import pytest
from gate_support import Gated, cancel_once_entered

from harness_one import (
    Call,
    CircuitBreakerPolicy,
    CircuitOpen,
    ManualClock,
    Outcome,
    RetryableError,
    ToolArgumentError,
    ToolBusy,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    fingerprint,
    hookimpl,
)
from harness_one_plugins import CachePlugin, CircuitBreakerPlugin, ConcurrencyPlugin

# --------------------------------------------------------------------------- bulkhead


def test_cap_fails_fast_then_frees() -> None:
    reg = ToolRegistry(autoload=False)
    inside, release = threading.Barrier(3), threading.Event()

    def work() -> str:
        inside.wait(5)
        release.wait(5)
        return "done"

    reg.add(work, max_concurrency=2)
    threads = [threading.Thread(target=reg.call, args=("work",)) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait(5)  # both slots are taken
    with pytest.raises(ToolBusy, match=r"Tool 'work' is busy \(2 running, its limit at once\)\. Try again shortly\.") as err:
        reg.call("work")
    assert err.value.retry_after is None  # max_wait 0: the cap waited what it would (a retry policy lets it stand)
    release.set()
    for t in threads:
        t.join()
    assert reg.plugins.get("concurrency").running("work") == 0
    inside.reset()
    assert reg.stats()["concurrency"]["refused"] == 1


def test_waiting_for_a_slot_threads() -> None:
    reg = ToolRegistry(plugins={"concurrency": ConcurrencyPlugin(max_wait=10, poll=0.002)}, autoload=False)
    peak, now, lock = [0], [0], threading.Lock()

    def work() -> int:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        threading.Event().wait(0.01)
        with lock:
            now[0] -= 1
        return 1

    reg.add(work, max_concurrency=2)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(reg.call("work"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [1] * 8 and peak[0] <= 2


async def test_waiting_for_a_slot_async() -> None:
    reg = ToolRegistry(plugins={"concurrency": ConcurrencyPlugin(max_wait=10, poll=0.001)}, autoload=False)
    now, peak = [0], [0]

    async def work() -> int:
        now[0] += 1
        peak[0] = max(peak[0], now[0])
        await asyncio.sleep(0.005)
        now[0] -= 1
        return 1

    reg.add(work, max_concurrency=1)
    assert await asyncio.gather(*(reg.acall("work") for _ in range(5))) == [1] * 5
    assert peak[0] == 1


def test_registry_wide_cap() -> None:
    reg = ToolRegistry(plugins={"concurrency": ConcurrencyPlugin(total=1)}, autoload=False)
    entered, release = threading.Event(), threading.Event()
    reg.add(lambda: (entered.set(), release.wait(5)), name="a")
    reg.add(lambda: 1, name="b")
    t = threading.Thread(target=reg.call, args=("a",))
    t.start()
    entered.wait(5)
    with pytest.raises(ToolBusy, match=r"is busy \(1 running of all tools, their limit at once\)"):
        reg.call("b")
    release.set()
    t.join()
    assert reg.call("b") == 1


def _freed(reg: ToolRegistry, name: str) -> bool:
    """Whether the slots of ``name`` are all free within 10 s (a tool's thread returning frees one)."""
    deadline = time.monotonic() + 10
    while reg.plugins.get("concurrency").running(name) and time.monotonic() < deadline:
        time.sleep(0.005)
    return reg.plugins.get("concurrency").running(name) == 0


@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_tool_abandoned_at_its_timeout_keeps_its_slot_until_it_returns(how: str) -> None:
    """``thread`` mode abandons a timed-out tool; the cap counts it until its thread returns."""
    reg = ToolRegistry(autoload=False)
    release = threading.Event()
    running, most = [0], [0]

    def work() -> str:
        running[0] += 1
        most[0] = max(most[0], running[0])
        release.wait(10)
        running[0] -= 1
        return "done"

    reg.add(work, max_concurrency=1, timeout=0.05)
    first = asyncio.run(reg.atry_call("work")) if how == "acall" else reg.try_call("work")
    assert isinstance(first.error, ToolTimeout)
    assert isinstance(reg.try_call("work").error, ToolBusy)  # its thread still runs the first call
    release.set()
    assert _freed(reg, "work")
    assert reg.call("work") == "done" and most[0] == 1


def test_a_retry_after_an_abandoned_attempt_frees_its_own_slot_at_once() -> None:
    """Each attempt's slot is its own: the retry's is freed as it returns, the abandoned one's later."""
    reg = ToolRegistry(autoload=False)
    release = threading.Event()
    hang = [True]

    def work() -> str:
        if hang.pop() if hang else False:
            release.wait(10)
        return "done"

    reg.add(work, max_concurrency=2, timeout=0.05, idempotent=True, retry={"attempts": 2, "timeouts": True, "initial": 0.001})
    assert reg.call("work") == "done"
    assert reg.plugins.get("concurrency").running("work") == 1  # the first attempt's thread still runs
    release.set()
    assert _freed(reg, "work")


def test_a_cancelled_acall_of_a_sync_tool_keeps_its_slot_until_the_thread_returns() -> None:
    reg = ToolRegistry(autoload=False)
    work = Gated()
    reg.add(work, name="work", max_concurrency=1)

    async def cancel_it() -> None:
        await cancel_once_entered(reg, "work", work.entered)
        assert isinstance(reg.try_call("work").error, ToolBusy)  # the thread runs on
        work.gate.set()
        assert await asyncio.to_thread(_freed, reg, "work")

    asyncio.run(cancel_it())
    assert reg.call("work") == "done"


def test_slot_released_on_errors() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(
        lambda n: 1 / n, name="inv", max_concurrency=1, parameters={"type": "object", "properties": {"n": {"type": "number"}}}
    )
    for _ in range(3):
        assert not reg.try_call("inv", {"n": 0}).ok
    assert reg.call("inv", {"n": 2}) == 0.5


def watched() -> tuple[ToolRegistry, list[str]]:
    """A registry, and the names of the errors its on_error hooks see."""
    seen: list[str] = []

    class Watch:
        @hookimpl
        def harness_on_error(self, error: BaseException) -> None:
            seen.append(type(error).__name__)

    return ToolRegistry(plugins={"watch": Watch()}, autoload=False), seen


@pytest.mark.parametrize(
    ("how", "stop"),
    [
        ("call", KeyboardInterrupt),
        ("try_call", KeyboardInterrupt),
        ("acall", KeyboardInterrupt),
    ],
)
def test_slot_released_when_the_tool_is_interrupted(how: str, stop: type[BaseException]) -> None:
    """A tool run in the caller's thread (no timeout; non-blocking under acall) is interrupted.

    The caller gets the ``KeyboardInterrupt``; on_error hooks see ``ToolCancelled``, so the
    slot the call held is free again.
    """
    reg, seen = watched()
    interrupt = [False, True]  # popped from the end: the first call is interrupted

    def work() -> str:
        if interrupt.pop():
            raise stop
        return "done"

    reg.add(work, max_concurrency=1, blocking=False)
    with pytest.raises(stop):
        if how == "acall":
            asyncio.run(reg.acall("work"))
        else:
            getattr(reg, how)("work")
    assert seen == ["ToolCancelled"]
    assert reg.plugins.get("concurrency").running("work") == 0
    assert reg.call("work") == "done"


def test_slot_released_when_the_caller_is_cancelled_or_the_tool_raises_its_own_cancelled_error() -> None:
    """Under acall, a cancel of the caller's task cancels the call (on_error sees ``ToolCancelled``);
    a ``CancelledError`` the tool raises while nobody cancels the task is its failure."""
    reg, seen = watched()
    entered, release = asyncio.Event(), asyncio.Event()

    async def waits() -> str:
        entered.set()
        await release.wait()
        return "done"

    def own() -> str:
        raise asyncio.CancelledError

    reg.add(waits, max_concurrency=1)
    reg.add(own, max_concurrency=1, blocking=False)

    async def main() -> None:
        task = asyncio.create_task(reg.acall("waits"))
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(ToolExecutionError):
            await reg.acall("own")

    asyncio.run(main())
    assert seen == ["ToolCancelled", "ToolExecutionError"]
    concurrency = reg.plugins.get("concurrency")
    assert concurrency.running("waits") == concurrency.running("own") == 0


@pytest.mark.parametrize("how", ["call", "try_call", "acall"])
def test_a_tool_that_calls_sys_exit_fails_and_releases_its_slot(how: str) -> None:
    """``SystemExit`` from the tool is its failure (``ToolExecutionError``), not the caller's exit."""
    reg, seen = watched()
    interrupt = [False, True]

    def work() -> str:
        if interrupt.pop():
            raise SystemExit(2)
        return "done"

    reg.add(work, max_concurrency=1, blocking=False)
    if how == "try_call":
        out = reg.try_call("work")
        assert isinstance(out.error, ToolExecutionError) and out.error.message == "Tool 'work' failed: SystemExit: 2"
    else:
        with pytest.raises(ToolExecutionError, match="SystemExit: 2"):
            asyncio.run(reg.acall("work")) if how == "acall" else reg.call("work")
    assert seen == ["ToolExecutionError"]
    assert reg.plugins.get("concurrency").running("work") == 0
    assert reg.call("work") == "done"


def test_slot_released_when_an_acall_coroutine_is_closed_mid_call() -> None:
    """A coroutine closed while its tool runs (never awaited again) cancels the call like a cancelled task."""
    reg = ToolRegistry(autoload=False)

    @types.coroutine
    def pause() -> Generator[None, None, None]:
        yield

    async def slow() -> str:
        await pause()
        return "late"

    reg.add(slow, max_concurrency=1)
    coroutine = reg.acall("slow")
    coroutine.send(None)  # suspended inside the tool, holding the slot
    assert reg.plugins.get("concurrency").running("slow") == 1
    coroutine.close()
    assert reg.plugins.get("concurrency").running("slow") == 0


@pytest.mark.parametrize("how", ["call", "try_call"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_tools_own_cancellation_under_call_is_its_failure(how: str, kind: str) -> None:
    """Nothing cancels a blocking caller, so a ``CancelledError`` out of the tool (its library
    cancelled its own request) is the tool's failure: a ``ToolExecutionError``, the slot freed."""
    reg, seen = watched()
    fail = [False, True]  # popped from the end: the first call fails

    def work() -> str:
        if fail.pop():
            raise asyncio.CancelledError
        return "done"

    async def fetch() -> str:
        if fail.pop():
            inner = asyncio.ensure_future(asyncio.sleep(10))
            asyncio.get_running_loop().call_soon(inner.cancel)
            await inner
        return "done"

    reg.add(work if kind == "sync" else fetch, name="work", max_concurrency=1)
    if how == "call":
        with pytest.raises(ToolExecutionError) as caught:
            reg.call("work")
        error: BaseException | None = caught.value
    else:
        error = reg.try_call("work").error
    assert isinstance(error, ToolExecutionError)
    assert "CancelledError" in error.message
    assert isinstance(error.__cause__, asyncio.CancelledError)
    assert seen == ["ToolExecutionError"]
    assert reg.plugins.get("concurrency").running("work") == 0
    assert reg.call("work") == "done"


# --------------------------------------------------------------------------- circuit breaker


def failing_registry(clock: ManualClock, **policy: Any) -> tuple[ToolRegistry, dict[str, bool]]:
    reg = ToolRegistry(clock=clock, autoload=False)
    health = {"ok": False}

    def backend(n: int = 0) -> str:
        if not health["ok"]:
            raise OSError("backend down")
        return "fine"

    reg.add(backend, circuit_breaker=policy or True)
    return reg, health


def test_opens_after_failure_ratio(clock: ManualClock) -> None:
    reg, _ = failing_registry(clock, min_calls=4, failure_ratio=0.5, open_for=10)
    for _ in range(4):
        assert "OSError" in reg.try_call("backend").for_model()
    with pytest.raises(CircuitOpen) as err:
        reg.call("backend")
    assert err.value.retry_after == pytest.approx(10)
    assert reg.stats()["tools"]["backend"]["circuit"]["state"] == "open"


def test_below_minimum_calls_stays_closed(clock: ManualClock) -> None:
    reg, health = failing_registry(clock, min_calls=10)
    for _ in range(9):
        reg.try_call("backend")
    health["ok"] = True
    assert reg.call("backend") == "fine"


def test_window_slides(clock: ManualClock) -> None:
    reg, health = failing_registry(clock, min_calls=4, window=10)
    for _ in range(3):
        reg.try_call("backend")
    clock.advance(11)  # those failures leave the window
    health["ok"] = True
    reg.call("backend")
    health["ok"] = False
    reg.try_call("backend")
    assert reg.plugins.get("circuit_breaker").state("backend") == "closed"


def test_half_open_probes_close_or_reopen(clock: ManualClock) -> None:
    reg, health = failing_registry(clock, min_calls=2, open_for=5, probes=2)
    reg.try_call("backend")
    reg.try_call("backend")
    breaker = reg.plugins.get("circuit_breaker")
    assert breaker.state("backend") == "open"
    clock.advance(5)
    assert not reg.try_call("backend").ok  # a failed probe opens it again
    assert breaker.state("backend") == "open"
    clock.advance(5)
    health["ok"] = True
    assert reg.call("backend") == "fine"
    assert breaker.state("backend") == "half_open"
    assert reg.call("backend") == "fine"
    assert breaker.state("backend") == "closed"


def test_argument_errors_do_not_count(clock: ManualClock) -> None:
    reg = ToolRegistry(clock=clock, autoload=False)
    reg.add(
        lambda n: n,
        name="f",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        circuit_breaker={"min_calls": 2},
    )
    for _ in range(5):
        with pytest.raises(ToolArgumentError):
            reg.call("f", {"n": "x"})
    assert reg.call("f", {"n": 1}) == 1


def test_a_probe_that_ends_neither_way_gives_its_place_back(clock: ManualClock) -> None:
    """A probe cancelled by its caller, whose arguments the tool refused, or whose tool answered with
    a ToolError of its own, does not close the circuit (nor open it again): the next call probes instead."""
    reg, health = failing_registry(clock, min_calls=2, open_for=5, probes=1)
    entered = threading.Event()

    async def hangs() -> str:
        entered.set()
        await asyncio.sleep(60)
        return "late"

    def picky(n: int = 0) -> str:
        raise ToolArgumentError("n must be even")

    def lookup() -> str:
        raise ToolError("no such user")  # a domain answer: neither a failure nor proof the backend works

    for tool in (hangs, picky, lookup):
        reg.add(tool, circuit_breaker={"key": "backend", "min_calls": 2, "open_for": 5, "probes": 1})
    reg.try_call("backend")
    reg.try_call("backend")
    breaker = reg.plugins.get("circuit_breaker")
    assert breaker.state("backend") == "open"
    clock.advance(5)

    asyncio.run(cancel_once_entered(reg, "hangs", entered))
    assert breaker.state("backend") == "half_open"
    assert isinstance(reg.try_call("picky", {"n": 1}).error, ToolArgumentError)  # the next probe
    assert breaker.state("backend") == "half_open"
    assert reg.try_call("lookup").for_model() == "Error: no such user"  # and the next (it closed the circuit)
    assert breaker.state("backend") == "half_open"
    assert "OSError" in reg.try_call("backend").for_model()  # and the next: the backend still fails
    assert breaker.state("backend") == "open"
    clock.advance(5)
    health["ok"] = True
    assert reg.call("backend") == "fine"
    assert breaker.state("backend") == "closed"


@pytest.mark.parametrize("backend", ["memory", "redis"])
@pytest.mark.parametrize("ends", ["returns", "fails", "answers"])
def test_a_cancelled_probe_whose_tool_runs_on_holds_its_place_until_the_tool_returns(
    clock: ManualClock, request: pytest.FixtureRequest, backend: str, ends: str
) -> None:
    """Half-open, one probe: ``acall`` of a blocking sync tool cancelled while its thread runs. The probe gave
    its place back at the cancel, so each cancelled call let one more tool run against the half-open backend
    (10 cancels: 6 at once). Its place is held until the tool returns: a success closes the circuit, a failure
    opens it again, a ToolError of its own gives the place back."""
    reg = ToolRegistry(clock=clock, autoload=False)
    if backend == "redis":
        from harness_one.state import RedisCircuits, RedisLink

        store = RedisCircuits(RedisLink(request.getfixturevalue("redis_url")), server_time=False)
        reg.plugins.replace("circuit_breaker", CircuitBreakerPlugin(store=store))
    health = {"ok": False}
    policy = {"key": "backend", "min_calls": 2, "open_for": 5, "probes": 1}

    def backend_call() -> str:
        if not health["ok"]:
            raise OSError("backend down")
        return "fine"

    gated = Gated()

    def probe() -> str:
        gated()
        if ends == "fails":
            raise OSError("still down")
        if ends == "answers":
            raise ToolError("no such user")
        return "done"

    reg.add(backend_call, name="backend", circuit_breaker=policy)
    reg.add(probe, circuit_breaker=policy)
    breaker = reg.plugins.get("circuit_breaker")
    reg.try_call("backend")
    reg.try_call("backend")
    clock.advance(5)
    health["ok"] = ends != "fails"

    async def cancelled_probe() -> None:
        await cancel_once_entered(reg, "probe", gated.entered)
        held = (await reg.atry_call("backend")).error  # the cancelled call's tool still runs: its probe holds
        assert isinstance(held, CircuitOpen) and held.retry_after == 1.0
        assert breaker.state("backend") == "half_open"
        gated.gate.set()  # asyncio.run returns once the tool's thread has (it waits for the loop's threads)

    asyncio.run(cancelled_probe())
    if ends == "returns":
        assert breaker.state("backend") == "closed"
    elif ends == "fails":
        reopened = reg.try_call("backend").error
        assert isinstance(reopened, CircuitOpen) and reopened.retry_after == pytest.approx(5)
    else:  # neither way: the place is back, the next call probes and closes it
        assert breaker.state("backend") == "half_open"
        assert reg.call("backend") == "fine" and breaker.state("backend") == "closed"
    assert gated.runs == [1]


@pytest.mark.parametrize("ends", ["returns", "answers"])
def test_a_cancelled_probe_whose_tool_returned_before_its_settling_is_settled_without_blocking_the_loop(
    clock: ManualClock, redis_url: str, ends: str
) -> None:
    """``acall`` of a probe cancelled while its sync tool runs, the tool returning before the circuit's
    ``on_error`` (an earlier plugin's hook took that long): the probe was settled at once, in the event
    loop's thread, by the Redis store's blocking ``record``/``unprobe`` (a round trip, up to the link's
    timeout, with every other task of the loop stopped), not by its awaitable twin."""
    from harness_one.state import RedisCircuits, RedisLink

    blocking: list[str] = []  # the store's blocking methods called in the loop's thread
    loop_thread: list[int] = []

    class Watched(RedisCircuits):
        def record(self, tool: str, policy: Any, *, now: float, failed: bool, probe: int) -> None:
            if threading.get_ident() in loop_thread:
                blocking.append("record")
            super().record(tool, policy, now=now, failed=failed, probe=probe)

        def unprobe(self, tool: str, policy: Any, *, probe: int) -> None:
            if threading.get_ident() in loop_thread:
                blocking.append("unprobe")
            super().unprobe(tool, policy, probe=probe)

    class Slow:
        """An on_error before the circuit's that lasts until the cancelled call's tool has returned."""

        name = "slow"

        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> None:
            if call.lingering is not None:
                returned = threading.Event()
                call.lingering.then(returned.set)
                gated.gate.set()
                assert returned.wait(10)

    reg = ToolRegistry(clock=clock, autoload=False)
    reg.plugins.replace("circuit_breaker", CircuitBreakerPlugin(store=Watched(RedisLink(redis_url), server_time=False)))
    reg.plugins.register(Slow())
    gated = Gated()

    def probe() -> str:
        gated()
        if ends == "answers":
            raise ToolError("no such user")
        return "done"

    policy = {"key": "backend", "min_calls": 1, "open_for": 5, "probes": 1}
    reg.add(lambda: 1 / 0, name="backend", circuit_breaker=policy)
    reg.add(probe, circuit_breaker=policy)
    breaker = reg.plugins.get("circuit_breaker")
    reg.try_call("backend")
    clock.advance(5)

    async def cancelled_probe() -> None:
        loop_thread.append(threading.get_ident())
        await cancel_once_entered(reg, "probe", gated.entered)

    asyncio.run(cancelled_probe())
    assert blocking == []
    if ends == "returns":  # settled all the same: its success closed the circuit
        assert breaker.state("backend") == "closed"
    else:  # its place is back: the next call probes (and fails: the circuit opens again)
        assert breaker.state("backend") == "half_open"
        assert isinstance(reg.try_call("backend").error, ToolExecutionError)
        assert breaker.state("backend") == "open"
    assert gated.runs == [1]


def test_registry_default_and_policy_checks(clock: ManualClock) -> None:
    reg = ToolRegistry(plugins={"circuit_breaker": CircuitBreakerPlugin(default={"min_calls": 1})}, clock=clock, autoload=False)
    reg.add(lambda: (_ for _ in ()).throw(RetryableError("x")), name="f")
    reg.try_call("f")
    assert isinstance(reg.try_call("f").error, CircuitOpen)
    with pytest.raises(ToolDefinitionError):
        CircuitBreakerPolicy.parse({"failure_ratio": 2}, tool="t")
    assert CircuitBreakerPolicy.parse(True, tool="t") == CircuitBreakerPolicy()


# --------------------------------------------------------------------------- cache


def test_cache_for_read_only_tools(clock: ManualClock) -> None:
    reg = ToolRegistry(clock=clock, autoload=False)
    runs: list[int] = []
    reg.add(lambda q: runs.append(1) or f"r:{q}", name="lookup", read_only=True, cache_ttl=60)
    assert reg.call("lookup", {"q": "a"}) == reg.call("lookup", {"q": "a"}) == "r:a"
    reg.call("lookup", {"q": "b"})
    assert len(runs) == 2
    clock.advance(60)
    reg.call("lookup", {"q": "a"})
    assert len(runs) == 3
    assert reg.stats()["cache"]["hits"] == 1
    hit = reg.try_call("lookup", {"q": "a"})  # answered from the cache: the tool did not run for it
    assert (hit.ok, hit.value, hit.ran, len(runs)) == (True, "r:a", False, 3)


def test_cached_results_are_private_and_keyed_by_what_the_tool_reads(clock: ManualClock) -> None:
    """A caller changing its result changes no later answer; a tool reading the context answers each caller."""
    reg = ToolRegistry(clock=clock, autoload=False)
    runs: list[str] = []

    def search(q: str) -> dict[str, Any]:
        runs.append(q)
        return {"q": q, "items": [1, 2]}

    def orders(call: Call) -> str:
        runs.append(call.context["user"])
        return f"orders of {call.context['user']}"

    reg.add(search, read_only=True, cache_ttl=60)
    reg.add(orders, read_only=True, cache_ttl=60)
    first = reg.call("search", {"q": "a"})
    first["items"].clear()
    second = reg.call("search", {"q": "a"})
    assert second == {"q": "a", "items": [1, 2]} and runs == ["a"]  # a hit, as the tool answered
    second["q"] = "tampered"
    assert reg.try_call("search", {"q": "a"}).for_model() == '{"q": "a", "items": [1, 2]}'
    assert reg.call("orders", context={"user": "alice"}) == "orders of alice"
    assert reg.call("orders", context={"user": "bob"}) == "orders of bob"  # was alice's, from the cache
    assert reg.call("orders", context={"user": "alice"}) == "orders of alice" and runs == ["a", "alice", "bob"]

    def lock() -> Any:
        return threading.Lock()

    reg.add(lock, read_only=True, cache_ttl=60)
    assert reg.call("lock") is not reg.call("lock")  # not copyable: not cached


def test_fingerprint_tells_values_that_are_not_json_from_their_repr() -> None:
    from datetime import date

    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})
    assert fingerprint({"x": {1, 2}}) != fingerprint({"x": "{1, 2}"})
    assert fingerprint({"x": date(2020, 1, 1)}) != fingerprint({"x": "datetime.date(2020, 1, 1)"})
    assert fingerprint({"x": date(2020, 1, 1)}) == fingerprint({"x": date(2020, 1, 1)})


def test_fingerprint_of_a_whole_number_does_not_depend_on_its_spelling() -> None:
    assert fingerprint({"n": [1, {"m": -0.0}], "big": 1e16}) == fingerprint({"n": [1.0, {"m": 0}], "big": 10**16})
    assert fingerprint({"n": (2.0,)}) == fingerprint({"n": [2]})
    assert fingerprint({"n": 1.5}) != fingerprint({"n": 1})
    assert fingerprint({"v": "1.0"}) != fingerprint({"v": "1"})  # strings are not numbers
    assert fingerprint({"n": float("inf")}) != fingerprint({"n": float("-inf")})


def test_cache_keys_tell_apart_the_numbers_the_tool_gets(clock: ManualClock) -> None:
    """The key compared JSON values (as idempotency does): ``2**60`` answered for ``float(2**60)``, ``0.0`` for ``-0.0``."""
    reg = ToolRegistry(clock=clock, autoload=False, plugin_options={"cache": {"ttl": 60}})

    def echo(x: Any) -> str:
        return f"{x!r} {math.copysign(1.0, x)}"

    reg.add(echo, parameters={"type": "object", "properties": {"x": {"type": "number"}}}, read_only=True)
    values: list[Any] = [2**60, float(2**60), 5, 5.0, 0.0, -0.0, 1e16, 10**16]
    answers = [reg.call("echo", {"x": x}) for x in values]
    assert answers == [echo(x) for x in values] and reg.stats()["cache"]["hits"] == 0
    assert [reg.call("echo", {"x": x}) for x in values] == answers and reg.stats()["cache"]["hits"] == len(values)


def test_cache_holds_at_most_max_chars_of_results(clock: ManualClock) -> None:
    """Bounded by entries only, 1024 results of up to 1,000,000 characters each (the output limit) held ~1 GB."""
    reg = ToolRegistry(plugins={"cache": CachePlugin(ttl=60, max_chars=25)}, clock=clock, autoload=False)
    runs: list[int] = []

    def blob(n: int) -> Any:
        runs.append(n)
        return {"n": "y" * (n - 9)} if n == 12 else "x" * n  # {"n": "yyy"}: 12 characters as the model reads it

    reg.add(blob, read_only=True)
    for n in (10, 12, 10, 9):  # 10 + 12 = 22 <= 25; 9 more: 31, the least recently used (12) goes
        reg.call("blob", {"n": n})
    assert reg.call("blob", {"n": 10}) == "x" * 10 and reg.call("blob", {"n": 9}) == "x" * 9  # hits
    assert reg.call("blob", {"n": 12}) == {"n": "yyy"} and runs == [10, 12, 9, 12]  # 10 goes for it (10 + 9 + 12 = 31)
    assert reg.call("blob", {"n": 26}) == reg.call("blob", {"n": 26}) and runs[-2:] == [26, 26]  # over max_chars alone
    assert reg.call("blob", {"n": 9}) == "x" * 9 and reg.call("blob", {"n": 12}) == {"n": "yyy"} and len(runs) == 6
    assert reg.stats()["cache"]["entries"] == 2


def test_a_clock_stepped_back_expires_cached_results(clock: ManualClock) -> None:
    """A result stored at t=1000 with a 10 s ttl was served for 1000 s more after a step back of 1000 s."""
    reg = ToolRegistry(clock=clock, autoload=False, plugin_options={"cache": {"ttl": 10}})
    ticks = iter(range(100))
    reg.add(lambda sku: next(ticks), name="price", read_only=True)
    assert reg.call("price", {"sku": "a"}) == reg.call("price", {"sku": "a"}) == 0
    clock.advance(-1000)
    assert reg.call("price", {"sku": "a"}) == 1  # stored "later" than now: expired, not kept 1000 s more
    clock.advance(5)
    assert reg.call("price", {"sku": "a"}) == 1  # the result stored after the step back holds its ttl
    clock.advance(10)
    assert reg.call("price", {"sku": "a"}) == 2


def test_a_clock_stepped_back_ages_the_circuits_window_out() -> None:
    """Failures counted at t=1000 (window 60 s) no longer count after the clock stepped back to 900:
    they are not younger than the window, and one success does not open the circuit."""
    clock = ManualClock(1000.0)
    reg = ToolRegistry(clock=clock, autoload=False)
    failing = [True]

    def api(x: int) -> int:
        if failing[0]:
            raise RuntimeError("down")
        return x

    reg.add(api, circuit_breaker={"min_calls": 10, "failure_ratio": 0.5, "window": 60})
    for i in range(9):  # below min_calls
        assert reg.try_call("api", {"x": i}).error is not None
    clock.advance(-100)
    failing[0] = False
    assert reg.call("api", {"x": 1}) == 1
    assert reg.plugins.get("circuit_breaker").state("api") == "closed"
    for i in range(9):  # the window counts from here: nine successes and the one before, no failure
        assert reg.call("api", {"x": i}) == i
    assert reg.plugins.get("circuit_breaker").state("api") == "closed"


def test_a_result_of_a_tool_removed_while_its_call_ran_is_not_kept(clock: ManualClock) -> None:
    """Its entries were dropped when it was removed: one stored after would never be served, yet hold characters."""
    reg = ToolRegistry(clock=clock, autoload=False, plugin_options={"cache": {"ttl": 10}})

    def price(sku: str) -> str:
        reg.remove("price")  # as another thread would, while the call runs
        return sku * 30

    reg.add(price, read_only=True)
    assert reg.call("price", {"sku": "a"}) == "a" * 30
    cache = reg.plugins.get("cache")
    assert reg.stats()["cache"]["entries"] == 0 and cache._chars == 0


def test_cache_off_by_default_and_only_for_safe_tools(clock: ManualClock) -> None:
    runs: list[int] = []
    reg = ToolRegistry(clock=clock, autoload=False)
    reg.add(lambda: runs.append(1), name="plain", idempotent=True)
    reg.call("plain")
    reg.call("plain")
    assert len(runs) == 2
    with pytest.raises(ToolDefinitionError, match="cache_ttl"):
        reg.add(lambda: 1, name="unsafe", cache_ttl=5)
    wide = ToolRegistry(plugins={"cache": CachePlugin(ttl=10, max_entries=2)}, clock=clock, autoload=False)
    wide.add(lambda x: runs.append(x) or x, name="idem", read_only=True)  # the plugin-wide ttl: read-only tools only
    wide.add(lambda x: runs.append(x) or x, name="writer")
    for x in (1, 1, 2, 3, 1):
        wide.call("idem", {"x": x})
    wide.call("writer", {"x": 9})
    wide.call("writer", {"x": 9})
    assert runs[2:] == [1, 2, 3, 1, 9, 9]  # 1 was evicted (max 2 entries); writer never cached


def test_a_tool_whose_answer_varies_opts_out_of_the_cache(clock: ManualClock) -> None:
    """``CachePlugin(ttl=...)`` cached every read-only tool: ``current_time`` answered the same time for a minute.
    Read-only says the tool changes nothing, not that its answer repeats: such a tool opts out."""
    import harness_one_current_time
    import harness_one_random_number

    reg = ToolRegistry(plugins={"cache": CachePlugin(ttl=60)}, clock=clock, autoload=False)
    ticks = iter(range(100))
    reg.add(lambda: next(ticks), name="lookup", read_only=True)  # cached by the plugin's ttl
    reg.add(lambda: next(ticks), name="pinned", read_only=True, cache_ttl=5)  # the author's own ttl
    reg.add(lambda: next(ticks), name="now", read_only=True, options={"cache": False})  # opts out
    reg.add(lambda: next(ticks), name="price", idempotent=True, cache_ttl=5, options={"cache": False})  # opting out wins
    with pytest.raises(ToolDefinitionError, match="'cache' option must be true or false, got 'no'"):
        reg.add(lambda: next(ticks), name="sticky", read_only=True, options={"cache": "no"})  # "no" is truthy
    assert "sticky" not in reg
    assert [reg.call(name) for name in ("lookup", "lookup", "pinned", "pinned")] == [0, 0, 1, 1]
    assert [reg.call(name) for name in ("now", "now", "price", "price")] == [2, 3, 4, 5]
    clock.advance(5)
    assert [reg.call("pinned"), reg.call("lookup")] == [6, 0]  # pinned expired after its own 5 s, lookup keeps 60 s
    assert reg.stats()["cache"]["hits"] == 3
    # The contrib tools whose answers vary are never cached, not even by a plugin-wide ttl.
    reg.add(harness_one_current_time.current_time)
    reg.add(harness_one_random_number.random_number)
    for tool in ("current_time", "random_number"):
        assert reg.plugins.get("cache").ttl_for(reg.get(tool)) is None
    draws = {reg.call("random_number", {"min": 0, "max": 10**9})["value"] for _ in range(5)}
    assert len(draws) > 1 and reg.stats()["cache"]["entries"] == 2  # lookup and pinned only


# --------------------------------------------------------------------------- order


def test_documented_order() -> None:
    reg = ToolRegistry(autoload=False)
    order = reg.plugins.plan.order
    assert order["pre_call"] == (
        "idempotency", "budget", "approval", "cache", "rate_limit", "timeout", "retry", "circuit_breaker", "concurrency", "otel"
    )  # fmt: skip
    deciders, observers = order["on_error"][:6], order["on_error"][6:]
    # the cap's on_error is tryfirst: it decides its own refusal (a wait for a slot up to max_wait) before a retry policy
    assert deciders == ("rate_limit", "concurrency", "timeout", "retry", "circuit_breaker", "idempotency")
    # trylast: they see the final decision (output_limit's after it is made: applies_to(after_decision=True))
    assert set(observers) == {"approval", "budget", "otel", "metrics", "logging", "output_limit"}


def test_order_survives_replacement() -> None:
    from harness_one_plugins import RateLimitPlugin

    reg = ToolRegistry(autoload=False)
    reg.plugins.replace("rate_limit", RateLimitPlugin(max_wait=1))
    pre_call = reg.plugins.plan.order["pre_call"]
    assert pre_call.index("rate_limit") < pre_call.index("retry")


class _Principal:
    """A per-request object with the default repr: two of them can share an address, one after the other."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return "<Principal>"  # what two requests' objects at one reused address look like


def test_a_call_whose_context_is_not_json_is_neither_served_nor_cached(clock: ManualClock) -> None:
    """Reprs that cannot tell callers apart (a reused address, a SecretStr's stars) make no shared key."""
    reg = ToolRegistry(clock=clock, autoload=False)

    def inbox(call: Call, folder: str) -> str:
        return f"{folder} of {call.context['who'].name}"

    reg.add(inbox, read_only=True, cache_ttl=60)
    assert reg.call("inbox", {"folder": "new"}, context={"who": _Principal("alice")}) == "new of alice"
    assert reg.call("inbox", {"folder": "new"}, context={"who": _Principal("bob")}) == "new of bob"
    assert reg.stats()["cache"] == {"hits": 0, "misses": 0, "uncached": 2, "entries": 0}
    jsonable = {"who": "carol", "tenant": [1, None]}
    with pytest.raises(ToolExecutionError):  # a JSON context is cached (the tool reads .name: it fails, uncached)
        reg.call("inbox", {"folder": "new"}, context=jsonable)
    assert reg.stats()["cache"] == {"hits": 0, "misses": 1, "uncached": 2, "entries": 0}
    assert fingerprint({"who": _Principal("a")}, json_only=True) is None
    assert fingerprint({"who": "a", "n": [1.0, None]}, json_only=True) == fingerprint({"n": [1, None], "who": "a"})


def test_a_result_is_served_only_to_the_tool_that_made_it(clock: ManualClock) -> None:
    """A call of a replaced tool that ends after the replacement stores nothing the new tool answers with."""
    reg = ToolRegistry(clock=clock, autoload=False)
    started, release = threading.Event(), threading.Event()

    def price_v1(item: str) -> str:
        started.set()
        release.wait(10)
        return "v1 price 100"

    reg.add(price_v1, name="price", read_only=True, cache_ttl=60)
    late = threading.Thread(target=reg.call, args=("price", {"item": "x"}))
    late.start()
    assert started.wait(10)
    reg.add(lambda item: "v2 price 80", name="price", read_only=True, cache_ttl=60, replace=True)
    release.set()
    late.join(10)
    assert reg.stats()["cache"]["entries"] == 0  # the old tool's late result is not kept ...
    assert reg.call("price", {"item": "x"}) == "v2 price 80"  # ... nor served to the new one
    assert reg.call("price", {"item": "x"}) == "v2 price 80" and reg.stats()["cache"]["hits"] == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ttl": "60"}, "cache ttl must be a positive number of seconds or None, not '60'"),
        ({"ttl": math.nan}, "cache ttl must be a positive number of seconds or None, not nan"),
        ({"max_entries": -1}, "cache max_entries must be a positive integer, not -1"),
        ({"max_entries": 0}, "cache max_entries must be a positive integer, not 0"),
        ({"max_chars": 0}, "cache max_chars must be a positive integer, not 0"),
    ],
)
def test_cache_options_are_checked_when_the_plugin_is_built(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        CachePlugin(**options)
    assert str(caught.value) == message


def recovered_with_a_gated_tool(clock: ManualClock, **definition: Any) -> tuple[ToolRegistry, threading.Event, threading.Event]:
    """The "backend" circuit opened, open_for passed and the backend well again; ``gated`` shares that circuit
    (one probe) and blocks until ``release`` is set, telling ``entered`` when it starts."""
    reg, health = failing_registry(clock, min_calls=2, open_for=5, probes=1)
    reg.try_call("backend")
    reg.try_call("backend")
    clock.advance(5)
    health["ok"] = True
    entered, release = threading.Event(), threading.Event()

    def gated() -> str:
        entered.set()
        release.wait(30)
        return "done"

    reg.add(gated, circuit_breaker={"key": "backend", "min_calls": 2, "open_for": 5, "probes": 1}, **definition)
    return reg, entered, release


def test_a_probe_in_flight_longer_than_open_for_gives_its_place_to_the_next_call(clock: ManualClock) -> None:
    """A hung probe (no timeout set, a black-holed connection) does not keep a recovered backend's circuit half-open for ever."""
    reg, entered, release = recovered_with_a_gated_tool(clock)
    breaker = reg.plugins.get("circuit_breaker")
    hung = threading.Thread(target=reg.try_call, args=("gated",))
    hung.start()
    assert entered.wait(10) and breaker.state("backend") == "half_open"
    assert reg.try_call("backend").error.kind == "circuit_open"  # type: ignore[union-attr]  # the probe holds its place ...
    clock.advance(5.5)
    assert reg.call("backend") == "fine"  # ... for open_for at most: this call probes, and closes it
    assert breaker.state("backend") == "closed"
    release.set()
    hung.join(10)
    assert breaker.state("backend") == "closed"  # the late probe's success changes nothing


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_process_forked_while_calls_run_holds_none_of_their_slots_probes_or_locks(clock: ManualClock) -> None:
    """The parent's calls in other threads do not run in a forked child: their slots and probes are not the
    child's, and a lock one of them held at the fork is not held there for ever."""
    from fork_support import in_child

    from harness_one.state import MemoryBuckets

    reg, entered, release = recovered_with_a_gated_tool(clock, max_concurrency=1)
    buckets = MemoryBuckets()
    running = threading.Thread(target=reg.call, args=("gated",))
    running.start()
    assert entered.wait(10)  # holds the slot and the circuit's one probe
    buckets._lock.acquire()  # another thread in the middle of a rate-limit decision
    try:

        def child() -> bytes:
            slots = reg.plugins.get("concurrency").running("gated")
            fine = reg.call("backend")  # probes (the parent's probe is not in flight here) and closes
            waited = buckets.acquire("t", 1.0, 1.0, 1.0, 0.0)  # would block for ever on the inherited lock
            return repr((slots, fine, reg.plugins.get("circuit_breaker").state("backend"), waited)).encode()

        assert in_child(child).decode() == "(0, 'fine', 'closed', 0.0)"
    finally:
        buckets._lock.release()
        release.set()
        running.join(10)
    assert reg.plugins.get("concurrency").running("gated") == 0 and reg.call("gated") == "done"


def test_a_probe_in_flight_when_the_clock_steps_back_gives_its_place_within_open_for(clock: ManualClock) -> None:
    """A clock stepping back while a probe hangs does not keep the circuit half-open for the step on top."""
    reg, entered, release = recovered_with_a_gated_tool(clock)
    hung = threading.Thread(target=reg.try_call, args=("gated",))
    hung.start()
    try:
        assert entered.wait(10)
        clock.advance(-600)
        assert reg.try_call("backend").error.kind == "circuit_open"  # type: ignore[union-attr]  # the probe holds its place ...
        clock.advance(5.5)
        assert reg.call("backend") == "fine"  # ... for open_for at most (was 600 s more)
    finally:
        release.set()
        hung.join(10)


def test_a_plugin_may_still_answer_the_caps_final_refusal() -> None:
    """The cap's on_error runs first; once max_wait is spent it decides nothing (it took the decision,
    an Outcome, for a while, and an application's fallback for a busy tool was ignored)."""

    class Fallback:
        name = "fallback"

        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> Outcome | None:
            return Outcome.success("from the fallback") if isinstance(error, ToolBusy) else None

    reg = ToolRegistry(autoload=False)
    reg.plugins.register(Fallback())
    inside, release = threading.Event(), threading.Event()

    def work() -> str:
        inside.set()
        release.wait(5)
        return "ran"

    reg.add(work, max_concurrency=1, retry=3)
    holder = threading.Thread(target=reg.call, args=("work",))
    holder.start()
    try:
        assert inside.wait(5)
        assert reg.call("work") == "from the fallback"
    finally:
        release.set()
        holder.join(5)


@pytest.mark.parametrize("how", ["call", "try_call", "acall"])
@pytest.mark.parametrize("where", ["pre_call", "post_call"])
def test_slot_released_when_a_hook_is_interrupted(how: str, where: str) -> None:
    """A ``KeyboardInterrupt`` raised in a pre-call hook after the slot was taken, or in a post-call
    hook, ends the call as a cancel: on_error sees ``ToolCancelled`` and the slot is free again."""
    interrupt = [False, True]  # popped from the end: the first call is interrupted
    seen: list[str] = []

    class Interrupts:
        @hookimpl(trylast=True)
        def harness_pre_call(self) -> None:
            if where == "pre_call" and interrupt.pop():
                raise KeyboardInterrupt

        @hookimpl
        def harness_post_call(self) -> None:
            if where == "post_call" and interrupt.pop():
                raise KeyboardInterrupt

        @hookimpl
        def harness_on_error(self, error: BaseException) -> None:
            seen.append(type(error).__name__)

    reg = ToolRegistry(plugins={"interrupts": Interrupts()}, autoload=False)
    reg.add(lambda: "done", name="work", max_concurrency=1, blocking=False)
    with pytest.raises(KeyboardInterrupt):
        if how == "acall":
            asyncio.run(reg.acall("work"))
        else:
            getattr(reg, how)("work")
    assert seen == ["ToolCancelled"]
    assert reg.plugins.get("concurrency").running("work") == 0
    assert reg.call("work") == "done"
