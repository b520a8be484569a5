"""Shared state across real processes on one redis-server: exact rate limits, one run per
idempotency key, a cap never exceeded, and the leases of a process killed with -9."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable

import pytest
from fork_support import Child
from redis_support import RedisServer, capped_worker, holding_worker, idempotent_worker, rate_worker

from harness_one import IdempotencyConflict, ToolBusy, ToolRegistry
from harness_one_plugins import ConcurrencyPlugin, IdempotencyPlugin

SPAWN = multiprocessing.get_context("spawn")
PROCESSES = 4


#: How long a spawned child may take to start, import everything and answer: only how long a real failure takes
#: to show (imports slowed by a loaded disk took 6 s of wall time for 0.2 s of CPU).
SPAWN_LIMIT = 120.0


def _run(target: object, args_of: list[tuple[object, ...]], timeout: float = SPAWN_LIMIT) -> list[object]:
    out = SPAWN.Queue()
    procs = [SPAWN.Process(target=target, args=(*args, out)) for args in args_of]  # type: ignore[arg-type]
    for p in procs:
        p.start()
    results = [out.get(timeout=timeout) for _ in procs]
    for p in procs:
        p.join(timeout)
        assert p.exitcode == 0
    return results


def test_four_processes_share_one_rate_limit(redis_url: str) -> None:
    """Exactly ``burst`` calls in all, however slowly the processes start: one bucket for the four
    (a bucket per process would admit 4 * burst). It refills one token an hour, never within the test."""
    rate, burst, threads, calls = 1 / 3600, 20, 4, 5  # 4 + 4 * 4 * 5 = 84 calls for 20 tokens
    ready = SPAWN.Barrier(PROCESSES)  # every first call is made (4 <= burst: each admitted) before any other
    reports = _run(rate_worker, [(redis_url, rate, burst, threads, calls, ready)] * PROCESSES)
    assert all(first for first, _, _ in reports), reports  # type: ignore[misc]
    assert sum(1 + admitted for _, admitted, _ in reports) == burst, reports  # type: ignore[misc]
    assert {kind for _, _, kinds in reports for kind in kinds} == {"RateLimitExceeded"}, reports  # type: ignore[misc]


def test_one_idempotency_key_runs_once_across_processes(redis_server: RedisServer, redis_url: str) -> None:
    start = time.time() + 2.5
    answers = _run(idempotent_worker, [(redis_url, "order-1", start)] * PROCESSES)
    assert int(redis_server.client().get("test:charge-runs")) == 1
    assert all(a["result"] == answers[0]["result"] for a in answers), answers  # type: ignore[index]
    assert answers[0]["ok"] and answers[0]["result"]["run"] == 1  # type: ignore[index]


def test_concurrency_cap_never_exceeded_across_processes(redis_server: RedisServer, redis_url: str) -> None:
    ok = _run(capped_worker, [(redis_url, 3, 4, 6)] * PROCESSES)
    assert sum(ok) == PROCESSES * 4 * 6  # type: ignore[arg-type]
    assert int(redis_server.client().get("test:max")) == 3  # measured by the tool: reached, never exceeded


def test_kill_9_frees_slot_and_key_after_the_lease(redis_server: RedisServer, redis_url: str) -> None:
    lease = 2.0
    child = SPAWN.Process(target=holding_worker, args=(redis_url, lease))
    child.start()
    flag = redis_server.client()
    deadline = time.monotonic() + SPAWN_LIMIT
    while flag.get("test:holding") is None:
        assert time.monotonic() < deadline and child.is_alive()
        time.sleep(0.01)
    reg = ToolRegistry(
        state=redis_url,
        autoload=False,
        plugins={"concurrency": ConcurrencyPlugin(lease=lease), "idempotency": IdempotencyPlugin(lease=lease)},
    )
    reg.add(lambda: "mine", name="hang", max_concurrency=1)
    time.sleep(lease * 1.2)  # the live child renews its leases every lease / 3
    with pytest.raises(IdempotencyConflict):
        reg.call("hang", idempotency_key="held")
    with pytest.raises(ToolBusy):
        reg.call("hang")
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join(10)
    killed = time.monotonic()
    # What the dead child holds lapses within a lease of now: each key's time to live (the database is this test's)
    # says so at once, on any machine, and a lease longer than set (2.5 times: 5,000 ms) fails here whenever it is.
    held = {key.decode(): flag.pttl(key) for key in flag.scan_iter("harness-one:*")}
    assert held and all(0 < ttl <= lease * 1000 for ttl in held.values()), f"lease {lease} s; milliseconds to live: {held}"
    # The slot and the key lapse each a lease after the dead child's last renewal of it (renewals a loaded machine
    # spreads apart): each is waited for. The bound, two leases and a second (5 s), leaves a loaded machine room; a
    # slot or a key the dead child holds for good (a lease never applied) still fails it.
    for key in (None, "held"):
        while True:
            result = reg.try_call("hang", idempotency_key=key)
            if result.ok:
                break
            assert time.monotonic() - killed < 2 * lease + 1, result.error
            time.sleep(0.02)
        assert result.value == "mine"


def test_a_forked_child_takes_slots_of_its_own(redis_url: str) -> None:
    """A registry built before a fork (a pre-fork server): the parent and the child never share a
    holder id, which Redis would count as one slot (both admitted under a cap of 1, and either's
    release freeing the other's)."""
    wait, go = os.pipe()  # the parent: the child's call may end
    says: list[Callable[[bytes], None]] = []  # the child's line to the parent

    def hold() -> str:
        if not says:  # the parent
            return "parent"
        says[0](b"h")
        os.read(wait, 1)
        return "child"

    reg = ToolRegistry(state=redis_url, autoload=False, plugins={"concurrency": ConcurrencyPlugin()})
    reg.add(hold, name="hold", max_concurrency=1)
    assert reg.call("hold") == "parent"  # the plugin has drawn holder ids before the fork

    def in_the_child(say: Callable[[bytes], None]) -> None:
        says.append(say)
        assert reg.call("hold") == "child"

    child = Child(in_the_child)
    try:
        assert child.read(1) == b"h"  # the child's call holds the slot
        refused = reg.try_call("hold")
        assert not refused.ok and type(refused.error) is ToolBusy, refused
    finally:
        os.write(go, b"g")
        child.join()
    assert reg.call("hold") == "parent"  # the child's slot is free again
