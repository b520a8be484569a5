"""A cancelled ``acall`` and the state its plugins hold: a cancellation landing in a round trip
leaves no claim or slot to its lease, and once the tool returned it loses nothing the tool did.

Against a real redis-server behind :class:`HoldingProxy` (it holds the reply to one script's call:
Redis ran it, the caller has not heard), the in-memory backend (where a plugin's own ``Await``
opens the same windows) and a SQLite file another connection keeps locked.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from redis_support import HoldingProxy, RedisServer

from harness_one import Await, Call, RetryableError, ToolRegistry, hookimpl
from harness_one.state import StateUnavailable, round_trip
from harness_one.state._redis import _BEGIN, _CIRCUIT_RECORD, _FINISH, _SLOT_ACQUIRE, _SLOT_RELEASE, _Script
from harness_one_plugins import ConcurrencyPlugin, IdempotencyPlugin, MemoryStore, SQLiteStore


class Charges:
    """An async tool that counts its runs; with ``gate``, it waits for it before returning."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.runs = 0
        self.gate = gate

    async def charge(self, order: int) -> dict[str, int]:
        self.runs += 1
        if self.gate is not None:
            await self.gate.wait()
        return {"charged": order, "run": self.runs}


async def cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def redis_registry(proxy: HoldingProxy) -> tuple[ToolRegistry, Charges, Charges]:
    """A registry on Redis through ``proxy``, with the tools ``charge`` and ``other``."""
    reg = ToolRegistry(state=proxy.url + "?timeout=5&prefix=cs:", autoload=False)
    charge, other = Charges(), Charges()
    reg.add(charge.charge, name="charge", max_concurrency=1, circuit_breaker=True)
    reg.add(other.charge, name="other", max_concurrency=1, circuit_breaker=True)
    return reg, charge, other


def queued(reg: ToolRegistry) -> list[Any]:
    """The script calls waiting for the next write on the running loop's kept connection."""
    return list(reg.state.link()._batchers[asyncio.get_running_loop()].queue)


async def until(ready: Callable[[], bool], pause: float = 0.0) -> None:
    """Let the loop run until ``ready()``, for a bounded number of turns (a broken test fails, never hangs)."""
    for _ in range(10_000):
        if ready():
            return
        await asyncio.sleep(pause)
    pytest.fail("the awaited moment never came")


async def until_queued(reg: ToolRegistry, script: _Script | None = None) -> None:
    """Until a call of ``script`` (of any script) waits for the next write."""
    await until(lambda: any(script in (None, pending.script) for pending in queued(reg)))


async def reading(task: asyncio.Task[Any]) -> None:
    """Until ``task`` waits for Redis's reply. (Its write is done: redis-py writes inside
    ``asyncio.wait_for``, which on Python 3.11 drops a cancel that lands as the write completes.)"""
    await until(lambda: "read_response" in awaited(task), 0.001)


def awaited(task: asyncio.Task[Any]) -> list[str]:
    """The names of the coroutines ``task`` is suspended in, outermost first."""
    names, step = [], task.get_coro()
    while step is not None:
        frame = getattr(step, "cr_frame", None) or getattr(step, "gi_frame", None)
        if frame is not None:
            names.append(frame.f_code.co_name)
        step = getattr(step, "cr_await", None) or getattr(step, "gi_yieldfrom", None)
    return names


def record(redis_server: RedisServer, tool: str, key: str) -> Any:
    """The idempotency record of (tool, key) in Redis: its state, or None."""
    client = redis_server.client()
    try:
        return client.hget(f"cs:idem:{len(tool)}:{tool}:{key}", "st")
    finally:
        client.close()


# --------------------------------------------------------------------------- cut short before the tool ran


@pytest.mark.parametrize("sender", ["itself", "another task"])
@pytest.mark.parametrize("taken", ["claim", "slot"])
def test_a_claim_or_slot_a_cancel_cut_short_is_released(
    redis_server: RedisServer, proxy: HoldingProxy, taken: str, sender: str
) -> None:
    """Redis made the claim (took the slot), the caller was cancelled before its reply: the owner's
    release is sent before the cancellation propagates, so the same key runs at once (the next call
    gets the slot) instead of meeting ``IdempotencyConflict`` (``ToolBusy``) until the lease ends.
    The cancelled call sent its write itself (its connection is dropped: the release goes on a new
    one), or another task sent it (the release follows on the same connection)."""
    reg, charge, _ = redis_registry(proxy)
    reg.add(charge.charge, name="charge", max_concurrency=1, replace=True)  # its first round trip: the claim, or the slot
    script = _BEGIN if taken == "claim" else _SLOT_ACQUIRE
    keyed = {"idempotency_key": "k"} if taken == "claim" else {}

    async def scenario() -> None:
        await reg.acall("other", {"order": 0}, idempotency_key="warm")  # the scripts are loaded
        first = None
        if sender == "another task":  # its write is on the wire: the cancelled call's goes in the next
            on_the_wire = proxy.hold(script)
            first = asyncio.create_task(reg.acall("other", {"order": 1}, idempotency_key="first"))
            await on_the_wire.wait()
        task = asyncio.create_task(reg.acall("charge", {"order": 2}, **keyed))
        if first is None:
            hold = proxy.hold(script)
            await hold.wait()
            await reading(task)
        else:
            await until_queued(reg)
            hold = proxy.hold(script)
            on_the_wire.release()  # the next write carries the call
            await hold.wait()
            assert "_aexchange" not in awaited(task)  # another task sent it
        task.cancel()
        hold.release()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert record(redis_server, "charge", "k") is None
        assert reg.plugins.get("concurrency").running("charge") == 0
        assert await reg.acall("charge", {"order": 2}, **keyed) == {"charged": 2, "run": 1}
        if first is not None:
            await first

    asyncio.run(scenario())


# --------------------------------------------------------------------------- cut short after the tool returned


@pytest.mark.parametrize("script", [_CIRCUIT_RECORD, _SLOT_RELEASE], ids=["circuit record", "slot release"])
def test_a_call_cancelled_after_its_tool_returned_keeps_its_outcome(
    redis_server: RedisServer, proxy: HoldingProxy, script: _Script
) -> None:
    """The tool returned (its charge made); the caller is cancelled while a post-call round trip of an
    earlier plugin is on the wire: the later post-call hooks still run, so the outcome is stored and
    the slot freed, then the caller gets the cancellation. A retry with the key replays the charge
    (before, idempotency freed the key on ``ToolCancelled`` and the retry charged again)."""
    reg, charge, _ = redis_registry(proxy)

    async def scenario() -> None:
        await reg.acall("other", {"order": 0}, idempotency_key="warm")
        hold = proxy.hold(script)
        task = asyncio.create_task(reg.acall("charge", {"order": 7}, idempotency_key="order-7"))
        await hold.wait()
        await reading(task)
        task.cancel()
        hold.release()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert charge.runs == 1
        assert record(redis_server, "charge", "order-7") == b"done"
        assert reg.plugins.get("concurrency").running("charge") == 0
        replayed = await reg.atry_call("charge", {"order": 7}, idempotency_key="order-7")
        assert replayed.ok and replayed.value == {"charged": 7, "run": 1} and charge.runs == 1

    asyncio.run(scenario())


@pytest.mark.parametrize("sent", ["finish", "slot release"])
def test_a_post_call_round_trip_a_cancel_kept_from_its_write_is_sent_again(
    redis_server: RedisServer, proxy: HoldingProxy, sent: str
) -> None:
    """The tool returned and its post-call round trip (idempotency's finish, the slot's release) waits
    behind another task's write when the caller is cancelled: a call cancelled before its write is
    not sent, so the plugin sends it again (both are safe to repeat) before the cancellation
    propagates. Before, the key stayed ``running`` (the retry met ``IdempotencyConflict``) and the slot
    stayed taken, each until its lease ended."""
    reg, _, _ = redis_registry(proxy)
    gate = asyncio.Event()
    charge = Charges(gate)
    keyed = {"idempotency_key": "k"} if sent == "finish" else {}
    capped = {} if sent == "finish" else {"max_concurrency": 1}  # one post-call round trip: the one cut short
    reg.add(charge.charge, name="charge", replace=True, **capped)

    async def scenario() -> None:
        await reg.acall("other", {"order": 0}, idempotency_key="warm")
        task = asyncio.create_task(reg.acall("charge", {"order": 1}, **keyed))
        await until(lambda: charge.runs == 1)  # claimed, admitted: the tool runs
        on_the_wire = proxy.hold(_SLOT_ACQUIRE)
        first = asyncio.create_task(reg.acall("other", {"order": 2}))
        await on_the_wire.wait()
        gate.set()  # the tool returns; its post-call round trip waits for the next write
        await until_queued(reg, _FINISH if sent == "finish" else _SLOT_RELEASE)
        task.cancel()
        on_the_wire.release()
        with pytest.raises(asyncio.CancelledError):
            await task
        await first
        assert reg.plugins.get("concurrency").running("charge") == 0
        if sent == "finish":
            assert record(redis_server, "charge", "k") == b"done"
            assert await reg.acall("charge", {"order": 1}, **keyed) == {"charged": 1, "run": 1}
        else:
            assert await reg.acall("charge", {"order": 3}) == {"charged": 3, "run": 2}

    asyncio.run(scenario())


# --------------------------------------------------------------------------- in memory: a plugin's own Await


class Stalls:
    """A plugin whose ``hook`` (``post_call`` or ``on_error``) answers with an ``Await`` that waits for ``gate``."""

    order = 45  # after retry (30) and circuit_breaker (40), before concurrency (50) and idempotency (60)

    def __init__(self, hook: str) -> None:
        self.hook = hook
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    def _stall(self) -> Await:
        async def wait() -> None:
            self.entered.set()
            await self.gate.wait()

        return Await(lambda: None, wait)

    @hookimpl
    def harness_post_call(self, call: Call) -> Await | None:
        return self._stall() if self.hook == "post_call" else None

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Await | None:
        return self._stall() if self.hook == "on_error" and not call.cancelled else None


def memory_registry(stalls: Stalls) -> tuple[ToolRegistry, IdempotencyPlugin, ConcurrencyPlugin]:
    idempotency, concurrency = IdempotencyPlugin(store=MemoryStore()), ConcurrencyPlugin()
    reg = ToolRegistry(plugins={"idempotency": idempotency, "concurrency": concurrency}, autoload=False)
    reg.plugins.register(stalls, name="stalls")
    return reg, idempotency, concurrency


def test_in_memory_a_call_cancelled_in_an_earlier_post_call_hook_keeps_its_outcome() -> None:
    """In memory no plugin waits, but another plugin's post-call ``Await`` opens the same window: the
    caller cancelled there, idempotency (later) still stores the value and the slot is freed."""
    stalls = Stalls("post_call")
    reg, idempotency, concurrency = memory_registry(stalls)
    charge = Charges()
    reg.add(charge.charge, name="charge", max_concurrency=1)

    async def scenario() -> None:
        task = asyncio.create_task(reg.acall("charge", {"order": 7}, idempotency_key="order-7"))
        await stalls.entered.wait()
        await cancelled(task)
        assert (charge.runs, concurrency.running("charge"), idempotency.stored) == (1, 0, 1)
        stalls.gate.set()
        assert await reg.acall("charge", {"order": 7}, idempotency_key="order-7") == {"charged": 7, "run": 1}

    asyncio.run(scenario())


def test_a_cancel_in_an_on_error_round_that_chose_a_retry_keeps_what_the_tool_did() -> None:
    """The tool failed, the retry plugin chose to run it again, and the caller is cancelled while a
    later on_error hook's ``Await`` is in flight: the wait before the retry is not taken, the call is
    cancelled there, and idempotency (which kept the key for the retry) settles it with what the tool
    did, its error, and drops its lease. Before the steps were cancelled there, the key stayed
    claimed, its lease renewed for as long as the process lived, and every call with it met
    ``IdempotencyConflict``; then, for a while, the key was freed and the tool ran again."""
    stalls = Stalls("on_error")
    reg, idempotency, _ = memory_registry(stalls)
    runs = []

    async def flaky() -> str:
        runs.append(1)
        if len(runs) == 1:
            raise RetryableError("blip")
        return "ok"

    reg.add(flaky, retry={"attempts": 3, "initial": 0, "rerun_non_idempotent": True})

    async def scenario() -> None:
        task = asyncio.create_task(reg.acall("flaky", idempotency_key="k"))
        await stalls.entered.wait()
        await cancelled(task)
        assert not idempotency._leases._held
        stalls.gate.set()  # the replay's own on_error round passes
        result = await reg.atry_call("flaky", idempotency_key="k")
        assert isinstance(result.error, RetryableError) and "blip" in result.error.message
        assert len(runs) == 1  # replayed, not run again

    asyncio.run(scenario())


# --------------------------------------------------------------------------- SQLite: a claim waiting for the file


def test_sqlite_a_claim_cancelled_while_it_waits_for_the_file_is_released(tmp_path: Path) -> None:
    """Another connection holds the file's write lock: the claim waits in a thread, and the caller is
    cancelled. The claim is made once the lock is free; the release, queued behind it on the store's
    connection, frees it, so the same key runs again instead of meeting ``IdempotencyConflict``."""
    path = tmp_path / "idem.sqlite3"
    store = SQLiteStore(path)
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store)}, autoload=False)
    charge = Charges()
    reg.add(charge.charge, name="charge")
    reg.call("charge", {"order": 0}, idempotency_key="warm")  # the file is made
    locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    async def scenario() -> None:
        locker.execute("BEGIN IMMEDIATE")
        task = asyncio.create_task(reg.acall("charge", {"order": 1}, idempotency_key="k"))
        await until(store._lock.locked, 0.001)  # the claim's thread holds the connection, waiting for the file
        task.cancel()
        await asyncio.sleep(0)  # the release is on its way: it waits for the connection
        locker.execute("COMMIT")
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await reg.acall("charge", {"order": 1}, idempotency_key="k") == {"charged": 1, "run": 2}

    try:
        asyncio.run(scenario())
    finally:
        locker.close()


def test_sqlite_a_release_that_overtakes_its_claim_still_frees_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim waits in a thread, queued for the store's connection behind other threads, when its
    caller is cancelled; the release, sent at once, gets the connection first (a lock is not first
    come, first served) and finds no claim. It marks the claim's owner, so the claim, when its turn
    comes, is not made: the same key runs at once. Before, the claim was made then and held the key
    until its lease ended (``IdempotencyConflict`` meanwhile)."""
    from harness_one.state._sqlite import _AT_ONCE

    store = SQLiteStore(tmp_path / "idem.sqlite3")
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store)}, autoload=False)
    charge = Charges()
    reg.add(charge.charge, name="charge")
    reg.call("charge", {"order": 0}, idempotency_key="warm")  # the file is made
    queued, turn, claimed, releasing = (threading.Event() for _ in range(4))
    begin, release = store._begin, store._release

    def late_begin(*args: Any) -> Any:
        if args[-1] == _AT_ONCE:
            return begin(*args)
        queued.set()
        turn.wait(10)  # the threads ahead of it use the connection
        try:
            return begin(*args)
        finally:
            claimed.set()

    def watched_release(*args: Any) -> Any:
        if args[-1] != _AT_ONCE:
            releasing.set()
        return release(*args)

    monkeypatch.setattr(store, "_begin", late_begin)
    monkeypatch.setattr(store, "_release", watched_release)

    async def scenario() -> None:
        store._lock.acquire()  # another thread uses the connection: the claim, then the release, wait in threads
        task = asyncio.create_task(reg.acall("charge", {"order": 1}, idempotency_key="k"))
        await until(queued.is_set, 0.001)
        task.cancel()
        await until(releasing.is_set, 0.001)
        store._lock.release()  # the release's thread gets the connection: no claim of its owner yet
        with pytest.raises(asyncio.CancelledError):
            await task
        turn.set()  # now the claim's turn
        assert await asyncio.to_thread(claimed.wait, 10)
        assert await reg.acall("charge", {"order": 1}, idempotency_key="k") == {"charged": 1, "run": 2}

    asyncio.run(scenario())


def test_sqlite_a_release_that_finds_no_claim_stops_only_one_waiting_in_a_thread(tmp_path: Path) -> None:
    """Only a claim followed while it waits in a thread is not made after a release of its owner
    (an owner released with no claim on its way may claim later); the store follows the last 1,024."""
    store = SQLiteStore(tmp_path / "idem.sqlite3")
    for i in range(1025):
        store._on_its_way(f"o{i}")  # 1,025 claims wait in threads: o0 is followed no longer
    for owner in ("o0", "o1", "later"):
        store.release("t", owner, owner=owner)  # none finds its claim
    assert store.begin("t", "o1", "fp", 0.0, 60.0, owner="o1") is None  # released while it waited: not made
    assert store.begin("t", "o1", "fp", 0.0, 60.0, owner="x") is None  # so the key is free
    for owner in ("o0", "later"):
        assert store.begin("t", owner, "fp", 0.0, 60.0, owner=owner) is None  # made
        assert store.begin("t", owner, "fp", 0.0, 60.0, owner="x").state == "running"  # type: ignore[union-attr]
    assert len(store._waiting) == 1023
    store.close()


# --------------------------------------------------------------------------- round_trip's cleanup


@pytest.mark.parametrize("then", ["awaited", "cancelled again", "failing"])
def test_round_trip_carries_out_its_cleanup_before_the_cancellation_goes_on(then: str, caplog: pytest.LogCaptureFixture) -> None:
    """A round trip cut short by its caller's cancellation: the cleanup ``cancelled()`` gives is
    awaited; cancelled again meanwhile (a closing loop), its ``sync()`` does it; one that fails is
    logged. Each time the caller gets its ``CancelledError``."""
    done: list[str] = []
    entered = asyncio.Event()

    async def cleanup() -> None:
        entered.set()
        if then == "failing":
            raise StateUnavailable("down")
        if then == "cancelled again":
            await asyncio.Event().wait()
        done.append("awaited")

    async def never() -> None:
        await asyncio.Event().wait()

    trip = round_trip(lambda: None, never, lambda _: None, lambda _: None, lambda: Await(lambda: done.append("sync"), cleanup))

    async def scenario() -> None:
        task = asyncio.create_task(trip.aio())
        await asyncio.sleep(0)
        task.cancel()
        await entered.wait()
        if then == "cancelled again":
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert done == {"awaited": ["awaited"], "cancelled again": ["sync"], "failing": []}[then]
    assert ("cleanup of a cancelled call failed" in caplog.text) == (then == "failing")


def test_a_sync_tool_cancelled_while_queued_for_a_thread_never_runs_and_holds_nothing() -> None:
    """``acall`` of a blocking sync tool cancelled while its job waits for a worker thread (each one
    busy): the tool never starts, and its concurrency slot and idempotency key are given back at
    once (no thread will ever run it to give them back later)."""
    reg = ToolRegistry(plugin_options={"concurrency": {"max_wait": 0}}, autoload=False)
    started: list[int] = []

    def slow(x: int) -> int:
        started.append(x)
        return x

    reg.add(slow, max_concurrency=1)
    block = threading.Event()

    async def main() -> tuple[Any, Any]:
        from concurrent.futures import ThreadPoolExecutor

        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        hog = loop.run_in_executor(None, block.wait)  # the only worker thread, busy
        task = asyncio.create_task(reg.acall("slow", {"x": 1}, idempotency_key="k1"))
        for _ in range(50):  # until the call waits for the thread
            await asyncio.sleep(0)
        assert reg.plugins.get("concurrency").running("slow") == 1
        await cancelled(task)
        slots = reg.plugins.get("concurrency").running("slow")
        block.set()
        await hog
        again = await reg.atry_call("slow", {"x": 2}, idempotency_key="k1")
        return slots, again

    slots, again = asyncio.run(main())
    assert slots == 0  # released when cancelled, not left to a thread that never comes
    assert again.ok and again.value == 2, again.error  # the key was freed (not held: idempotency_conflict)
    assert started == [2]  # the cancelled call's tool never ran
