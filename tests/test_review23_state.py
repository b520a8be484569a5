"""Review 23, shared state: a forked child renews none of its parent's leases and can use a SQLite
store another thread was using at the fork; an asyncio connect a busy event loop made late does
not mark the Redis link down."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fork_support import in_child

from harness_one import ToolRegistry
from harness_one.state import FailMode, LeaseKeeper, SQLiteStore, StateUnavailable
from harness_one_plugins import BudgetPlugin, ConcurrencyPlugin

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def test_a_forked_childs_lease_keeper_renews_none_of_its_parents_items() -> None:
    """The parent's held items are its calls' (they do not run in the child): the child's keeper renews
    only what the child holds, and a drop waiting for a retake that was in flight at the fork returns."""
    renewed: list[list[Any]] = []
    passed = threading.Event()
    retaking = threading.Event()
    never = threading.Event()

    def renew(items: list[Any]) -> list[bool]:
        renewed.append(list(items))
        passed.set()
        return [item[0] != "lapsed" for item in items]

    def retake(item: Any) -> bool:
        retaking.set()
        never.wait(30)  # the parent's round trip, cut off by the fork in the child
        return False

    keeper = LeaseKeeper("review23", lambda: 0.01, renew, retake=retake)
    keeper.hold("parent-call", ("parent-tool", "p"))
    keeper.hold("lapsing-call", ("lapsed", "l"))
    assert retaking.wait(10)  # the keeper thread is taking "lapsing-call" again as the process forks
    try:

        def child() -> bytes:
            keeper.drop("lapsing-call")  # waited for ever for the parent's retake to end
            renewed.clear()
            passed.clear()
            keeper.hold("child-call", ("child-tool", "c"))
            assert passed.wait(10)
            keeper.drop("child-call")
            return repr(sorted({str(item) for items in renewed for item in items})).encode()

        assert in_child(child, timeout=10).decode() == "[\"('child-tool', 'c')\"]"
    finally:
        never.set()
        keeper.drop("parent-call")
        keeper.drop("lapsing-call")


def test_a_forked_childs_fail_mode_gets_a_lock_of_its_own() -> None:
    """A fail mode's lock another thread held at the fork would be held in the child for ever."""
    fail = FailMode("review23", "open")
    fail._lock.acquire()  # another thread counting a failure as the process forks
    try:

        def child() -> bytes:
            fail.handle(StateUnavailable("Redis is down."), "tool", None, "checking")
            return repr(fail.stats()).encode()

        assert in_child(child, timeout=10).decode() == "{'state_failed_open': 1}"
    finally:
        fail._lock.release()


def test_a_forked_child_never_holds_its_parents_redis_slot(redis_url: str) -> None:
    """The reviewer's case: the parent holds a tool's only slot in another thread as it forks, and the
    child's first capped call starts its keeper. Once the parent's call ended, the slot is free: the
    child neither renews it nor takes it again as "lapsed" (it did, holding it while it lived)."""
    lease = 0.3
    entered, release = threading.Event(), threading.Event()
    said_r, said_w = os.pipe()
    go_r, go_w = os.pipe()

    def slow() -> str:
        entered.set()
        release.wait(30)
        return "done"

    reg = ToolRegistry(state=redis_url, autoload=False, plugins={"concurrency": ConcurrencyPlugin(lease=lease)})
    reg.add(slow, name="slow", max_concurrency=1)
    reg.add(lambda: 1, name="quick", max_concurrency=5)
    running = threading.Thread(target=reg.call, args=("slow",))
    running.start()
    assert entered.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: a quick call starts its lease keeper, then it lives on idle
        code = 1
        try:
            reg.call("quick")
            os.write(said_w, b"q")
            os.read(go_r, 1)
            code = 0
        finally:
            os._exit(code)
    try:
        assert os.read(said_r, 1) == b"q"
        release.set()
        running.join(10)
        ended = time.monotonic()
        held = reg.plugins.get("concurrency")
        while time.monotonic() - ended < 4 * lease:  # the child's keeper passes every lease / 3
            result = reg.try_call("slow")
            assert result.ok, result.error
            assert held.running("slow") == 0
            time.sleep(lease / 3)
    finally:
        os.write(go_w, b"g")
        _, status = os.waitpid(pid, 0)
        for fd in (said_r, said_w, go_r, go_w):
            os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_sqlite_store_a_thread_waits_on_is_usable_in_a_forked_child(tmp_path: Path) -> None:
    """The reviewer's case: another thread waits for the file (another connection writes it) as the
    process forks. The child gets its own locks and connection: its keyed calls work (each waited
    its whole timeout, then failed, for ever)."""
    path = tmp_path / "state.db"
    store = SQLiteStore(path, timeout=5)
    assert store.begin("s", "warm", "f", time.time(), 60) is None
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")  # someone else writing the file for a moment
    outcome: list[object] = []
    waiter = threading.Thread(target=lambda: outcome.append(store.begin("s", "a", "f", time.time(), 60)))
    waiter.start()
    deadline = time.monotonic() + 10
    while not store._lock.locked():  # the thread holds the store's connection, waiting for the file
        assert time.monotonic() < deadline
        time.sleep(0.001)
    ends = threading.Timer(0.2, lambda: (blocker.execute("COMMIT"), blocker.close()))
    ends.start()  # the file is free again soon: the fork waits for the operation under way

    def child() -> bytes:
        return repr([store.begin("s", f"c{i}", "f", time.time(), 60) for i in range(3)]).encode()

    assert in_child(child, timeout=20).decode() == "[None, None, None]"
    ends.join()
    waiter.join(10)
    assert outcome == [None]
    assert store.begin("s", "p", "f", time.time(), 60) is None


def test_a_forked_child_inherits_no_transaction_of_a_sqlite_store(tmp_path: Path) -> None:
    """A fork while another thread is inside a write transaction waits for it: the child's connection
    would find the file locked for ever by the parent's (SQLite keeps a process's locks together)."""
    path = tmp_path / "state.db"
    store = SQLiteStore(path, timeout=5)
    assert store.begin("s", "warm", "f", time.time(), 60) is None
    inside = threading.Event()

    def writing() -> None:
        with store._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            inside.set()
            time.sleep(0.2)
            conn.execute("COMMIT")

    writer = threading.Thread(target=writing)
    writer.start()
    assert inside.wait(10)

    def child() -> bytes:
        try:
            return repr(store.begin("s", "c", "f", time.time(), 60)).encode()
        except StateUnavailable as exc:
            return str(exc).encode()

    assert in_child(child, timeout=20).decode() == "None"
    writer.join(10)


def test_a_forked_child_does_not_wait_for_a_store_lock_held_past_the_fork(tmp_path: Path) -> None:
    """A store's connection held past its timeout at the fork (the fork goes on without it): the child's
    store has locks of its own and a connection of its own."""
    store = SQLiteStore(tmp_path / "state.db", timeout=0.2)
    assert store.begin("s", "warm", "f", time.time(), 60) is None
    store._lock.acquire()  # held by a thread that is not in the child
    try:

        def child() -> bytes:
            return repr(store.begin("s", "c", "f", time.time(), 60)).encode()

        assert in_child(child, timeout=20).decode() == "None"
    finally:
        store._lock.release()
    assert store.begin("s", "p", "f", time.time(), 60) is None


async def _hog(seconds: float, times: int = 1) -> None:
    for _ in range(times):
        await asyncio.sleep(0)
        time.sleep(seconds)  # other work holding the event loop


def test_a_busy_event_loop_while_connecting_does_not_mark_redis_down(redis_url: str) -> None:
    """The first ``acall`` of a fresh registry while another task holds the loop past the connect
    timeout: the connect is tried again on a fresh socket and the call succeeds; the link is not
    marked down, so a sync call of another tool right after succeeds too."""
    reg = ToolRegistry(state=redis_url + "?timeout=0.1", autoload=False)

    async def g(n: int) -> int:
        return n

    reg.add(g, name="g", max_concurrency=10)
    reg.add(lambda n: n, name="s", max_concurrency=10)

    async def main() -> tuple[Any, Any, Any]:
        first, _ = await asyncio.gather(reg.atry_call("g", {"n": 1}, idempotency_key="k1"), _hog(0.3))
        again = await reg.atry_call("g", {"n": 2}, idempotency_key="k2")
        other = await asyncio.to_thread(reg.try_call, "s", {"n": 3})
        return first, again, other

    first, again, other = asyncio.run(main())
    assert (first.ok, again.ok, other.ok) == (True, True, True), (first.error, again.error, other.error)
    assert (first.value, again.value, other.value) == (1, 2, 3)
    assert reg.state.link()._down_until == 0.0


def test_a_connect_timing_out_twice_in_a_row_still_marks_redis_down(redis_url: str) -> None:
    """Each attempt made late by the loop: the second timeout is the fail mode's (closed:
    ``StateUnavailable`` naming the timeout), and the link is marked down."""
    reg = ToolRegistry(state=redis_url + "?timeout=0.1", autoload=False)

    async def g(n: int) -> int:
        return n

    reg.add(g, name="g", max_concurrency=10)

    async def main() -> Any:
        first, _ = await asyncio.gather(reg.atry_call("g", {"n": 1}), _hog(0.3, times=4))
        return first

    first = asyncio.run(main())
    assert not first.ok and type(first.error) is StateUnavailable
    assert str(first.error) == "The shared state (Redis) is unavailable (TimeoutError). Retry shortly."
    assert reg.state.link()._down_until > 0.0


def test_an_acall_connects_on_redis_py_5_which_has_no_connect_check_health(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py 5.x (``redis>=5.1`` is allowed) has no ``connect_check_health``: its ``connect()``
    is that step, its handshake health-checked when the URL sets ``health_check_interval``. The
    asyncio path connects with it, the handshake not health-checked (as with redis-py 6), and
    the connection keeps its interval afterwards."""
    from redis.asyncio.connection import AbstractConnection

    check = AbstractConnection.connect_check_health
    seen: list[tuple[Any, ...]] = []
    connections: list[Any] = []

    async def connect(self: Any) -> None:  # redis-py 5.x's connect(): the handshake checked by the interval
        seen.append(("connect", self.health_check_interval))
        connections.append(self)
        await check(self, check_health=bool(self.health_check_interval))

    monkeypatch.delattr(AbstractConnection, "connect_check_health")
    monkeypatch.setattr(AbstractConnection, "connect", connect)
    reg = ToolRegistry(state=redis_url + "?health_check_interval=30", autoload=False)

    async def g(n: int) -> int:
        return n

    reg.add(g, name="g", rate_limit={"rate": 10, "burst": 10})

    result = asyncio.run(reg.atry_call("g", {"n": 1}))
    seen.extend(("after", connection.health_check_interval) for connection in connections)
    assert (result.ok, result.value, result.error) == (True, 1, None)
    assert seen == [("connect", 0), ("after", 30)]


@pytest.mark.parametrize("make", [ConcurrencyPlugin, BudgetPlugin], ids=["concurrency", "budget"])
def test_a_forked_child_gets_a_plugin_lock_of_its_own(make: Any) -> None:
    """A plugin's brief lock held by another thread of the parent at the fork is not the child's: it
    would be held for ever there (that thread is not in the child), and the child's next call hangs."""
    plugin = make()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with plugin._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        said = in_child(lambda: b"free" if plugin._lock.acquire(timeout=2) else b"held")
    finally:
        release.set()
        holder.join()
    assert said == b"free"
