"""Lease renewal: one round trip per pass for all the held items of a store, the next wait
shortened by a slow pass, and a lease that lapsed while its call ran reported (and retaken)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from harness_one import ToolRegistry
from harness_one.state import LeaseKeeper

pytest.importorskip("redis")

from harness_one.state import _redis  # (needs the redis package)

N = 12


class Passes(threading.Condition):
    """A keeper's condition whose waits return at once: records each timeout, and empties the
    keeper's held items at the wait after ``passes`` passes, so ``_run`` returns in the test's thread."""

    def __init__(self, keeper: LeaseKeeper, passes: int) -> None:
        super().__init__()
        self.keeper, self.passes = keeper, passes
        self.waits: list[float] = []
        self.owner = threading.current_thread()

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        if threading.current_thread() is not self.owner:
            # The keeper's own thread, started late on a loaded machine (after this condition took the place of its
            # own): it waits as it would, and neither counts a pass nor empties the held items under the test's pass
            return super().wait(timeout)
        self.waits.append(timeout)
        if len(self.waits) > self.passes:
            self.keeper._held.clear()
        return False


def run_passes(keeper: LeaseKeeper, passes: int) -> list[float]:
    """Run ``passes`` passes of ``keeper`` in this thread; the waits before each (and the last)."""
    condition = Passes(keeper, passes)
    keeper._wake = condition
    keeper._run()
    return condition.waits


@contextmanager
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The writes sent to Redis from this thread (each one round trip), counted; not the one more that
    loads a script Redis does not have yet (the first use of a script after a ``SCRIPT FLUSH``)."""
    sent = [0]
    exchange, me = _redis._exchange, threading.get_ident()

    def counted(connection: Any, batch: Any, **options: Any) -> Any:
        if threading.get_ident() == me and not options.get("reload"):
            sent[0] += 1
        return exchange(connection, batch, **options)

    monkeypatch.setattr(_redis, "_exchange", counted)
    yield sent


@contextmanager
def running(reg: ToolRegistry, calls: Callable[[int], Any], n: int, started: threading.Semaphore) -> Iterator[None]:
    """``n`` calls running in threads (each releases ``started`` once inside its tool) until the block ends."""
    threads = [threading.Thread(target=calls, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(n):
            assert started.acquire(timeout=10)
        yield
    finally:
        for thread in threads:
            thread.join(10)


def blocking_tool(reg: ToolRegistry, **options: Any) -> tuple[threading.Semaphore, threading.Event]:
    started, done = threading.Semaphore(0), threading.Event()

    def work(x: int) -> int:
        started.release()
        done.wait(10)
        return x

    reg.add(work, name="work", **options)
    return started, done


# --------------------------------------------------------------------------- one round trip per pass


def test_redis_slots_of_one_plugin_are_renewed_in_one_round_trip_per_pass(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = ToolRegistry(state=redis_url, plugin_options={"concurrency": {"lease": 3600.0}})
    started, done = blocking_tool(reg, max_concurrency=N)
    plugin = reg.plugins.get("concurrency")
    with running(reg, lambda i: reg.call("work", {"x": i}), N, started):
        slots = plugin.slots
        before = dict(slots.link.client.zrange(slots._keys("work")[0], 0, -1, withscores=True))
        with round_trips(monkeypatch) as sent:
            run_passes(plugin._leases, 2)
        after = dict(slots.link.client.zrange(slots._keys("work")[0], 0, -1, withscores=True))
        done.set()
    assert sent[0] == 2  # N slots, two passes: one round trip each
    assert len(after) == N and all(after[m] > before[m] for m in before)  # each slot's lease was extended


def test_redis_idempotency_claims_are_renewed_in_one_round_trip_per_pass(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = ToolRegistry(state=redis_url, plugin_options={"idempotency": {"lease": 3600.0}})
    started, done = blocking_tool(reg)
    plugin = reg.plugins.get("idempotency")
    with running(reg, lambda i: reg.call("work", {"x": i}, idempotency_key=f"key-{i}"), N, started):
        store = plugin.store
        with round_trips(monkeypatch) as sent:
            renewed = plugin._renew(list(plugin._leases._held.values()))
            run_passes(plugin._leases, 1)
        done.set()
    assert renewed == [True] * N and sent[0] == 2
    assert store.renew_many([("work", "key-0", "not the owner")], 0.0, 1.0) == [False]  # only the owner's claim


# --------------------------------------------------------------------------- the period runs from a pass's start


def test_the_wait_after_a_slow_pass_is_shortened_by_the_time_the_pass_took() -> None:
    now = [100.0]

    def slow(items: list[Any]) -> list[bool]:
        now[0] += 7.0  # a pass that took 7 of the 10 seconds' period
        return [True] * len(items)

    keeper = LeaseKeeper("test", lambda: 10.0, slow, clock=lambda: now[0])
    keeper._held["h"] = ("tool", "h")
    assert run_passes(keeper, 2) == [10.0, 3.0, 3.0]


def test_a_pass_longer_than_the_period_is_followed_at_once() -> None:
    now = [0.0]

    def slower(items: list[Any]) -> list[bool]:
        now[0] += 25.0
        return [True] * len(items)

    keeper = LeaseKeeper("test", lambda: 10.0, slower, clock=lambda: now[0])
    keeper._held["h"] = ("tool", "h")
    assert run_passes(keeper, 1) == [10.0, 0.0]


def test_a_period_longer_than_the_platform_can_wait_is_waited_at_most_timeout_max() -> None:
    """A lease of 1e15 s: its renewal wait is cut to ``threading.TIMEOUT_MAX`` (the platform refused the wait
    with OverflowError, ending the renewal thread)."""
    keeper = LeaseKeeper("test", lambda: 1e15, lambda items: [True] * len(items), clock=lambda: 0.0)
    keeper._held["h"] = ("tool", "h")
    assert run_passes(keeper, 1) == [threading.TIMEOUT_MAX] * 2


# --------------------------------------------------------------------------- a lapsed lease


def test_a_lapsed_lease_is_counted_logged_and_retaken_or_dropped(caplog: pytest.LogCaptureFixture) -> None:
    retaken: list[Any] = []
    keeper = LeaseKeeper(
        "test", lambda: 1.0, lambda items: [item[1] != "gone" for item in items], retake=lambda i: not retaken.append(i)
    )
    keeper._held.update({"a": ("tool-a", "kept"), "b": ("tool-b", "gone")})
    with caplog.at_level(logging.WARNING, logger="harness_one"):
        run_passes(keeper, 1)
    assert retaken == [("tool-b", "gone")] and keeper.stats() == {"leases_lapsed": 1, "leases_retaken": 1}
    assert "test: leases lapsed while their calls ran" in caplog.text and "tool-b" in caplog.text

    dropped = LeaseKeeper("test", lambda: 1.0, lambda items: [False] * len(items), retake=lambda i: False)
    dropped._held["a"] = ("tool-a", "x")
    waits = run_passes(dropped, 5)
    assert len(waits) == 2 and dropped.stats() == {"leases_lapsed": 1}  # dropped: not renewed again


def test_a_call_that_ends_during_the_pass_is_not_retaken() -> None:
    retaken: list[Any] = []
    keeper = LeaseKeeper("test", lambda: 1.0, lambda items: [keeper.drop("a")] * len(items), retake=retaken.append)
    keeper._held["a"] = ("tool", "a")
    run_passes(keeper, 1)
    assert retaken == [] and keeper.stats() == {}


def test_retakes_run_outside_the_lock_and_a_call_ending_meanwhile_waits_only_for_its_own() -> None:
    """The retakes ran one round trip each under the keeper's lock, so every capped call's start and
    end (hold, drop: on the event loop under acall) waited for all of them (100 lapsed at 25 ms: 2.5 s).
    Now a hold or a drop of another item goes on at once; a call whose item is being retaken waits
    for that one round trip (then it gives the item back); one whose turn has not come is skipped."""
    in_flight, release = threading.Event(), threading.Event()
    retaken: list[str] = []

    def retake(item: Any) -> bool:
        if item[1] == "a":
            in_flight.set()
            release.wait(10)
        retaken.append(item[1])
        return True

    keeper = LeaseKeeper("test", lambda: 1.0, lambda items: [False] * len(items), retake=retake)
    keeper._held.update({"a": ("tool", "a"), "b": ("tool", "b"), "c": ("tool", "c")})
    keeper._thread = threading.current_thread()  # alive: a hold starts no keeper thread of its own here
    passing = threading.Thread(target=keeper._pass, args=(list(keeper._held.items()),))  # one pass
    passing.start()
    assert in_flight.wait(10)  # a's round trip is on its way
    keeper.hold("d", ("tool", "d"))  # neither waits for it
    keeper.drop("c")  # its turn had not come: not retaken
    dropping = threading.Thread(target=keeper.drop, args=("a",))
    dropping.start()
    dropping.join(0.05)
    assert dropping.is_alive()  # a's call waits for a's retake, so it gives back what was retaken
    release.set()
    dropping.join(10)
    passing.join(10)
    assert not dropping.is_alive() and not passing.is_alive()
    assert retaken == ["a", "b"] and keeper.stats() == {"leases_lapsed": 2, "leases_retaken": 2}


def test_a_lapsed_redis_slot_is_retaken_and_shown_in_stats(redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry(state=redis_url, plugin_options={"concurrency": {"lease": 3600.0}})
    started, done = blocking_tool(reg, max_concurrency=N)
    plugin = reg.plugins.get("concurrency")
    slots = plugin.slots
    with running(reg, lambda i: reg.call("work", {"x": i}), N, started):
        slots.link.client.delete(*slots._keys("work"))  # every lease lapsed (as after renewals too slow)
        assert plugin.running("work") == 0
        with caplog.at_level(logging.WARNING, logger="harness_one"):
            run_passes(plugin._leases, 1)
        assert plugin.running("work") == N  # counted again: a new call is refused
        stats = reg.stats()["concurrency"]
        done.set()
    assert stats["leases_lapsed"] == N and stats["leases_retaken"] == N
    assert "concurrency: leases lapsed while their calls ran" in caplog.text


def test_a_lapsed_idempotency_claim_is_retaken_and_its_key_never_logged(redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry(state=redis_url, plugin_options={"idempotency": {"lease": 3600.0}})
    started, done = blocking_tool(reg)
    plugin = reg.plugins.get("idempotency")
    store = plugin.store
    with running(reg, lambda i: reg.call("work", {"x": i}, idempotency_key="sk-secret-key-text"), 1, started):
        store.link.client.delete(store._key("work", "sk-secret-key-text"))  # the claim lapsed
        with caplog.at_level(logging.WARNING, logger="harness_one"):
            run_passes(plugin._leases, 1)
        again = reg.try_call("work", {"x": 0}, idempotency_key="sk-secret-key-text")
        done.set()
    assert type(again.error).__name__ == "IdempotencyConflict"  # retaken: a second call does not run
    assert plugin._leases.stats() == {"leases_lapsed": 1, "leases_retaken": 1}
    assert "idempotency: leases lapsed" in caplog.text and "sk-secret-key-text" not in caplog.text
