"""Concurrent callers of one RedisLink share writes: calls made while a write is on the wire go
together in the next one. Each call is still one EVALSHA with its own reply, a cancelled async
call that was not sent yet is never sent, and a forked child, a server that went away or a Ctrl-C
wherever it lands in the sending thread leaves no caller waiting."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fork_support import Child
from redis_support import HoldingProxy, RedisServer

from harness_one.state import StateUnavailable


def buckets(url: str, **options: Any) -> Any:
    from harness_one.state import RedisBuckets, RedisLink

    return RedisBuckets(RedisLink(url, **options), server_time=False)


def count_writes(connection: Any) -> list[int]:
    """Wrap the connection's write: each write appends how many commands it carried."""
    writes: list[int] = []
    pack = connection.pack_commands

    def pack_commands(commands: Any) -> Any:
        writes.append(len(commands))
        return pack(commands)

    connection.pack_commands = pack_commands
    return writes


def test_threads_share_writes_and_each_gets_its_own_reply(redis_server: RedisServer, redis_url: str) -> None:
    shared = buckets(redis_url)
    shared.acquire("warm", rate=1, burst=1, cost=1, now=0)  # connects and loads the script
    writes = count_writes(shared.link._hot_connection())
    before = redis_server.commandstats()
    threads, calls = 8, 100
    got: dict[int, list[float]] = {}

    def work(i: int) -> None:
        # Thread i's bucket holds 10 + i tokens: a reply given to the wrong caller shows in the counts.
        got[i] = [shared.acquire(f"k{i}", rate=1, burst=10 + i, cost=1, now=0) for _ in range(calls)]

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(30)
    assert {i: sum(w == 0.0 for w in waits) for i, waits in got.items()} == {i: 10 + i for i in range(threads)}
    assert all(w == 1.0 for waits in got.values() for w in waits if w)
    after = redis_server.commandstats()
    assert after["evalsha"] - before["evalsha"] == threads * calls  # one command per decision
    assert sum(writes) == threads * calls and len(writes) < threads * calls  # fewer writes than calls

    # A write of ten calls that all meet NOSCRIPT (the server lost its scripts) goes again as one write of EVALs.
    from harness_one.state._redis import _BUCKET, _Pending

    redis_server.client().script_flush()
    del writes[:]
    batch = [
        _Pending(_BUCKET, ("EVALSHA", _BUCKET.sha, 1, f"{{n{i}}}", "0", "1", str(i), "1"), threading.Lock()) for i in range(10)
    ]
    for pending in batch:
        pending.done.acquire()
    shared.link._sending = True
    shared.link._lead(batch)
    assert writes == [10, 10] and not shared.link._sending
    assert [p.outcome for p in batch] == [b"1"] + [b"0"] * 9  # a bucket of 0 tokens waits 1 s, the others admit


async def test_tasks_share_one_write_and_a_reloaded_script(redis_server: RedisServer, redis_url: str) -> None:
    from harness_one.state._redis import _BUCKET, _Pending

    shared = buckets(redis_url)
    tasks = 50

    async def round_of_calls() -> list[float]:
        return await asyncio.gather(*(shared.aacquire(f"k{i % 5}", rate=1, burst=3, cost=1, now=0) for i in range(tasks)))

    first = await round_of_calls()  # the script cache is empty: the first call's EVAL loads it
    batcher = shared.link._batchers[asyncio.get_running_loop()]
    writes = count_writes(batcher.connection)
    second = await round_of_calls()
    assert sorted(first + second) == [0.0] * 15 + [1.0] * 85  # 5 buckets of 3 tokens
    assert writes == [1, tasks - 1]  # the first caller writes at once, the other 49 go in the next write
    assert redis_server.commandstats()["evalsha"] == 2 * tasks

    # A write of ten calls that all meet NOSCRIPT (the server lost its scripts) goes again as one write of EVALs.
    redis_server.client().script_flush()
    loop = asyncio.get_running_loop()
    batch = [
        _Pending(_BUCKET, ("EVALSHA", _BUCKET.sha, 1, f"{{n{i}}}", "0", "1", str(i), "1"), loop.create_future())
        for i in range(10)
    ]
    batcher.queue, batcher.sending = list(batch), True
    await shared.link._drain(batcher)
    assert writes[2:] == [10, 10]
    assert [p.outcome for p in batch] == [b"1"] + [b"0"] * 9  # a bucket of 0 tokens waits 1 s, the others admit
    await shared.link.aclose()


async def test_a_cancelled_call_not_yet_written_is_never_sent(redis_url: str) -> None:
    shared = buckets(redis_url)
    call = {"rate": 1e-9, "burst": 3, "cost": 1, "now": 0}
    a, b, c = (asyncio.create_task(shared.aacquire("k", **call)) for _ in range(3))
    await asyncio.sleep(0)  # all three are queued; the write has not started
    b.cancel()
    assert [await a, await c] == [0.0, 0.0]
    with pytest.raises(asyncio.CancelledError):
        await b
    assert await shared.aacquire("k", **call) == 0.0  # b's token is still there
    assert await shared.aacquire("k", **call) > 0
    await shared.link.aclose()


def test_a_forked_child_does_not_wait_for_the_parents_threads(redis_url: str) -> None:
    shared = buckets(redis_url)
    shared.acquire("k", rate=1, burst=5, cost=1, now=0)
    link = shared.link

    def in_the_child(say: Callable[[bytes], None]) -> None:
        assert shared.acquire("k", rate=1, burst=5, cost=1, now=0) == 0.0

    with link._send_lock, link._queue_lock:  # as if threads of the parent were writing and queueing at the fork
        link._sending = True
        child = Child(in_the_child)
    link._sending = False
    child.join()  # fails the test if the child hangs on the parent's queue
    assert shared.acquire("k", rate=1, burst=5, cost=1, now=0) == 0.0  # the parent goes on (3 of 5 used)


def test_every_waiting_thread_fails_when_redis_goes_away(redis_server: RedisServer, redis_url: str) -> None:
    shared = buckets(redis_url, timeout=0.5, down_for=0.2)
    shared.acquire("k", rate=1, burst=100, cost=1, now=0)
    redis_server.stop()
    outcomes: list[str] = []

    def work() -> None:
        try:
            shared.acquire("k", rate=1, burst=100, cost=1, now=0)
            outcomes.append("answered")
        except StateUnavailable:
            outcomes.append("unavailable")

    try:
        pool = [threading.Thread(target=work) for _ in range(8)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(10)
        assert outcomes == ["unavailable"] * 8  # nobody left waiting, nobody answered wrongly
    finally:
        redis_server.start()
    time.sleep(0.25)  # the fail-fast window ends
    assert shared.acquire("k", rate=1, burst=100, cost=1, now=0) == 0.0  # a fresh bucket on the restarted server


def test_a_waiting_thread_interrupted_by_ctrl_c_leaves_nobody_waiting(redis_server: RedisServer, redis_url: str) -> None:
    import signal

    shared = buckets(redis_url, timeout=5)
    call = {"rate": 1000, "burst": 1000, "cost": 1, "now": 0}
    shared.acquire("k", **call)
    admin = redis_server.client()
    admin.execute_command("CLIENT", "PAUSE", 600, "ALL")  # the first write waits on the pause
    answered: dict[str, Any] = {}

    def work(name: str, delay: float) -> None:
        time.sleep(delay)
        answered[name] = shared.acquire("k", **call)

    sender = threading.Thread(target=work, args=("sender", 0))
    sender.start()
    behind = threading.Thread(target=work, args=("behind", 0.2))
    behind.start()
    main = threading.main_thread().ident
    assert main is not None
    threading.Timer(0.35, lambda: signal.pthread_kill(main, signal.SIGINT)).start()
    time.sleep(0.1)
    with pytest.raises(KeyboardInterrupt):
        shared.acquire("k", **call)  # this thread queues first, so it would be the next sender
    sender.join(10)
    behind.join(10)
    assert answered == {"sender": 0.0, "behind": 0.0}  # the call queued behind it was still sent
    assert shared.acquire("k", **call) == 0.0 and not shared.link._sending
    admin.close()


def test_calls_queued_behind_a_failed_write_fail_at_once(redis_server: RedisServer, redis_url: str) -> None:
    shared = buckets(redis_url, timeout=0.3, down_for=5)
    call = {"rate": 1000, "burst": 1000, "cost": 1, "now": 0}
    shared.acquire("k", **call)
    writes = count_writes(shared.link._hot_connection())
    admin = redis_server.client()
    admin.execute_command("CLIENT", "PAUSE", 1500, "ALL")
    failed: list[str] = []

    def work(delay: float) -> None:
        time.sleep(delay)
        try:
            shared.acquire("k", **call)
        except StateUnavailable:
            failed.append("unavailable")

    pool = [threading.Thread(target=work, args=(0.1 if i else 0,)) for i in range(5)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(10)
    assert failed == ["unavailable"] * 5
    assert writes == [1]  # the first write timed out; the four queued behind it were not written at all
    admin.execute_command("CLIENT", "UNPAUSE")
    admin.close()


async def test_an_argument_that_cannot_be_sent_fails_only_its_own_call(redis_url: str) -> None:
    import redis

    from harness_one.state._redis import _BUCKET, _Pending

    shared = buckets(redis_url)
    link = shared.link
    keys, good = ["{d}"], ["0", "1", "5", "1"]
    got = await asyncio.gather(
        link.arun(_BUCKET, keys, good),
        link.arun(_BUCKET, keys, [True, "1", "5", "1"]),
        link.arun(_BUCKET, keys, good),
        return_exceptions=True,
    )
    assert got[0] == got[2] == b"0" and isinstance(got[1], redis.DataError)  # the bad one was in a write with a good one
    assert not link._down_until and link.failures == 0
    batch = [_Pending(_BUCKET, ("EVALSHA", _BUCKET.sha, 1, "{d}", *args), threading.Lock()) for args in (good, [object()], good)]
    for pending in batch:
        pending.done.acquire()
    link._sending = True
    link._lead(batch)
    assert [type(p.outcome) for p in batch] == [bytes, redis.DataError, bytes] and not link._down_until
    await link.aclose()


class Interrupt(BaseException):
    """What Ctrl-C raises in the thread it interrupts (a ``BaseException``, not an ``Exception``)."""


def until(condition: Callable[[], bool], what: str) -> None:
    """Until ``condition`` holds (bounded: a broken test fails with ``what``, never hangs)."""
    for _ in range(10_000):
        if condition():
            return
        time.sleep(0.001)
    pytest.fail(what)


def until_queued(link: Any, calls: int) -> None:
    """Until ``calls`` calls wait for the next write."""
    until(lambda: len(link._queue) >= calls, "the calls never queued")


#: A bucket of 2 tokens that never refills.
_TWO_TOKENS = {"rate": 1e-9, "burst": 2, "cost": 1, "now": 0}


def _wire_busy(redis_url: str) -> tuple[Any, dict[str, Any]]:
    """A connected link (marked down for a minute on a failure) whose write is on the wire (this
    thread holds the send lock), so the calls made now queue; and the arguments of a two-token
    bucket's call. :func:`_write_ends` ends that write."""
    shared = buckets(redis_url, timeout=5, down_for=60)
    shared.acquire("warm", **_TWO_TOKENS)
    shared.link._send_lock.acquire()
    with shared.link._queue_lock:
        shared.link._sending = True
    return shared, dict(_TWO_TOKENS)


def _write_ends(link: Any) -> None:
    """The write on the wire of :func:`_wire_busy` ends: its call is answered, and the first queued
    thread is woken for its turn to send the queue."""
    from harness_one.state._redis import _BUCKET, _Pending

    try:
        link._lead([_Pending(_BUCKET, ("EVALSHA", _BUCKET.sha, 1, "{w}", "0", "1", "5", "1"), None)])
    finally:
        link._send_lock.release()


def _m_sends_b_behind(shared: Any, call: dict[str, Any], fault: Callable[[int], BaseException | None]) -> dict[str, Any]:
    """Thread M's call, then thread B's three (``run_many``), queued behind :func:`_wire_busy`'s write;
    then M's turn to send them all, M's ``n``-th read of a reply raising ``fault(n)`` (None: it reads).
    What each thread got: its replies, or the name of what it raised."""
    from harness_one.state._redis import _BUCKET

    link = shared.link
    got: dict[str, Any] = {}
    calls = [shared._args(f"b{i}", call["rate"], call["burst"], call["cost"], 0) for i in range(3)]

    def catching(who: str, run: Callable[[], Any]) -> threading.Thread:
        def body() -> None:
            try:
                got[who] = run()
            except BaseException as exc:  # the interrupt too: the thread reports it
                got[who] = type(exc).__name__

        return threading.Thread(target=body)

    sender = catching("m", lambda: shared.acquire("m", **call))
    sender.start()
    until_queued(link, 1)
    behind = catching("b", lambda: [float(reply) for reply in link.run_many(_BUCKET, calls)])
    behind.start()
    until_queued(link, 4)
    connection = link._hot_connection()
    read_response, reads = connection.read_response, itertools.count()

    def faulty_read(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is sender:
            raised = fault(next(reads))
            if raised is not None:
                raise raised
        return read_response(*args, **kwargs)

    connection.read_response = faulty_read
    _write_ends(link)  # M's turn: it sends the queue (its call, then B's three)
    sender.join(10)
    behind.join(10)
    return got


@pytest.mark.parametrize("read", [0, 2], ids=["before any reply", "after two replies"])
def test_a_thread_interrupted_while_it_sends_other_threads_calls_fails_none_of_them(redis_url: str, read: int) -> None:
    """Thread M sends the write that carries its call and three calls thread B queued together
    (``run_many``), and is interrupted while it reads the replies: M alone gets the interrupt; B's
    calls left unanswered are sent again, by B, on a fresh connection, and B gets every reply; the
    link is not marked down. Before, B's calls failed with ``StateUnavailable`` and every call failed
    for ``down_for``. A reply read before the interrupt is kept (its call is not sent again); one
    Redis ran whose reply was not read counts twice, as after a dead connection."""
    shared, call = _wire_busy(redis_url)
    link = shared.link
    got = _m_sends_b_behind(shared, call, lambda n: Interrupt() if n == read else None)  # the interrupt at M's read
    assert got == {"m": "Interrupt", "b": [0.0, 0.0, 0.0]}
    assert not link._is_down() and link.failures == 0 and not link._sending and not link._queue
    left = [shared.acquire(f"b{i}", **call) == 0.0 for i in range(3)]  # a token left: its call ran once
    assert left == ([True, False, False] if read == 2 else [False, False, False])
    assert shared.acquire("m", **call) == 0.0  # M's own call ran once, and was not sent again


def test_a_waiting_thread_interrupted_as_it_is_woken_for_its_turn_passes_it_on_unsent(redis_url: str) -> None:
    """Ctrl-C reaches the main thread just as its turn to send the queue (its call and another
    thread's) comes: it sends nothing, the other thread gets the turn and sends its own call, and the
    interrupt goes on at once. Before, the interrupted thread sent the write first, its own call included."""
    import signal

    shared, call = _wire_busy(redis_url)
    call["burst"] = 1
    link = shared.link
    answered: dict[str, float] = {}
    main = threading.main_thread().ident
    assert main is not None

    def hand_over() -> None:  # the write on the wire ends, and Ctrl-C comes before the main thread wakes
        until_queued(link, 1)
        other = threading.Thread(target=lambda: answered.update(other=shared.acquire("other", **call)), daemon=True)
        other.start()
        until_queued(link, 2)
        in_its_wait(main)
        with link._queue_lock:
            link._nominate()  # the main thread's turn, not yet woken
        signal.pthread_kill(main, signal.SIGINT)
        until(lambda: len(link._queue) == 1, "the interrupted thread's call never left the queue")
        link._send_lock.release()
        other.join(10)

    helper = threading.Thread(target=hand_over, daemon=True)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        shared.acquire("mine", **call)
    helper.join(10)
    assert answered == {"other": 0.0} and not link._sending and not link._is_down()
    assert shared.acquire("mine", **call) == 0.0  # its token is still there: the call was never sent


def test_a_failure_that_is_no_interrupt_in_the_sending_thread_fails_the_write_without_a_resend(redis_url: str) -> None:
    """Thread M sends the write that carries its call and three calls of thread B, and its read
    raises a plain ``Exception`` (redis-py's ``InvalidResponse``: a garbled reply), not an
    interrupt: M and B get it, B's calls are not sent again. Before, it counted as M's interrupt: B
    sent its calls again (Redis ran each twice), with no limit on repeats. It is no "Redis cannot
    decide now", so it takes no fail mode and does not mark the link down (a service that is not
    Redis fails every call so: ``test_redis_failures2``); the next write goes on a new connection."""
    import redis

    shared, call = _wire_busy(redis_url)
    link = shared.link
    got = _m_sends_b_behind(shared, call, lambda n: redis.InvalidResponse("Protocol Error: garbled"))
    assert got == {"m": "InvalidResponse", "b": "InvalidResponse"}
    assert not link._is_down() and not link._sending and not link._queue
    # Redis ran each call once (the write went out, its replies were not read): one token left each.
    assert [shared.acquire(name, **call) for name in ("m", "b0", "b1", "b2")] == [0.0] * 4


def _dying(connection: Any, method: str, dies: int) -> None:
    """Make call number ``dies`` (from 1) of the connection's ``method`` raise ``ConnectionError`` after it ran."""
    import redis

    original, calls = getattr(connection, method), itertools.count(1)

    def dying(*args: Any, **kwargs: Any) -> Any:
        got = original(*args, **kwargs)
        if next(calls) == dies:
            raise redis.ConnectionError("connection lost (injected)")
        return got

    setattr(connection, method, dying)


@pytest.mark.parametrize("second", ["dead again", "interrupt in its handler"])
def test_replies_read_before_a_failed_resend_are_kept(redis_url: str, second: str) -> None:
    """The connection dies as the third of four replies is read; the resend of the other two then
    dies too, or an interrupt lands while the first death is handled: the two calls whose replies
    were read keep them, the others fail. Before, every call of the write failed (a call Redis ran
    and answered was told it was not answered)."""
    import redis

    from harness_one.state._redis import _BUCKET, _exchange, _Pending

    shared = buckets(redis_url, timeout=5)
    shared.acquire("warm", rate=1, burst=1, cost=1, now=0)
    connection = shared.link._hot_connection()
    batch = [_Pending(_BUCKET, ("EVALSHA", _BUCKET.sha, 1, f"{{r{i}}}", "0", "1", "5", "1"), None) for i in range(4)]
    _dying(connection, "read_response", 3)
    raised: type[BaseException] = redis.ConnectionError
    if second == "dead again":
        _dying(connection, "send_packed_command", 2)  # the resend goes out, and its connection dies
    else:
        disconnect, first = connection.disconnect, itertools.count()

        def interrupted_disconnect(*args: Any, **kwargs: Any) -> None:
            disconnect(*args, **kwargs)
            if not next(first):  # the first death's handler drops the connection: Ctrl-C lands
                raise Interrupt

        connection.disconnect = interrupted_disconnect
        raised = Interrupt
    with pytest.raises(raised):
        _exchange(connection, batch)
    assert [p.outcome for p in batch[:2]] == [b"0", b"0"]
    assert not any(isinstance(p.outcome, bytes) for p in batch[2:])


async def test_replies_read_before_a_failed_async_resend_are_kept(redis_url: str) -> None:
    """The asyncio write as the sync one: the connection dies as the third of four replies is
    read, and the resend dies too: the two calls whose replies were read keep them."""
    import asyncio

    import redis
    import redis.asyncio

    from harness_one.state._redis import _BUCKET, _aexchange, _Pending

    client = redis.asyncio.Redis.from_url(redis_url)
    connection = await client.connection_pool.get_connection()
    try:
        await connection.send_command("SCRIPT", "LOAD", _BUCKET.source)
        await connection.read_response()
        loop = asyncio.get_running_loop()
        batch = [
            _Pending(_BUCKET, ("EVALSHA", _BUCKET.sha, 1, f"{{a{i}}}", "0", "1", "5", "1"), loop.create_future())
            for i in range(4)
        ]
        read, send, reads, sends = (
            connection.read_response,
            connection.send_packed_command,
            itertools.count(1),
            itertools.count(1),
        )

        async def dying_read(*args: Any, **kwargs: Any) -> Any:
            got = await read(*args, **kwargs)
            if next(reads) == 3:
                raise redis.ConnectionError("connection lost (injected)")
            return got

        async def dying_send(*args: Any, **kwargs: Any) -> Any:
            await send(*args, **kwargs)
            if next(sends) == 2:
                raise redis.ConnectionError("connection lost again (injected)")

        connection.read_response, connection.send_packed_command = dying_read, dying_send
        with pytest.raises(redis.ConnectionError):
            await _aexchange(connection, batch)
        assert [p.outcome for p in batch[:2]] == [b"0", b"0"]
        assert not any(isinstance(p.outcome, bytes) for p in batch[2:])
    finally:
        await client.connection_pool.release(connection)
        await client.aclose()


def bounded(call: Callable[[], Any]) -> Any:
    """``call()``, in a thread of its own: a call that waits for ever fails the test, never hangs it
    (the wait for it is a guard, not a measure)."""
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(call()), daemon=True)
    worker.start()
    worker.join(30)
    if not got:
        pytest.fail("the call never completed")
    return got[0]


def in_its_wait(thread: int) -> None:
    """Until the thread ``thread`` (an ident) waits for its queued calls (in ``RedisLink._wait``)."""
    import sys

    until(lambda: sys._current_frames()[thread].f_code.co_name == "_wait", "the thread never waited")


def _interrupt(link: Any, name: str, victim: list[threading.Thread], *, after: bool = False) -> None:
    """Make the link's method ``name`` raise ``KeyboardInterrupt`` at its entry (``after``: as it
    returns), once, in the thread ``victim[0]``: Ctrl-C landing there (patched on this link alone)."""
    original, fired = getattr(link, name), []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        got = original(*args, **kwargs) if after else None
        if threading.current_thread() is victim[0] and not fired:
            fired.append(name)
            raise KeyboardInterrupt
        return got if after else original(*args, **kwargs)

    setattr(link, name, interrupted)


#: Where Ctrl-C lands in the thread V, whether V's call is queued behind a write on the wire (so
#: V sends it on its turn, with the other thread's call) or V finds none and sends its own call, and
#: whether V's clean-up hands the queue on at once ("prompt") or only the other thread's bounded
#: wait can (a second Ctrl-C in that clean-up).
_INTERRUPTS = {
    "writing, on its turn": ("queued", [("at", "_lead")], "prompt"),
    "after taking the queue": ("queued", [("after", "_claim")], "prompt"),
    "handing on, on its turn": ("queued", [("at", "_pass_on")], "prompt"),
    "as its wait returns": ("queued", [("after", "_wait")], "prompt"),
    "woken for its turn, and again in the clean-up": ("queued", [("at", "_claim"), ("at", "_leave")], "bounded"),
    "writing alone": ("alone", [("at", "_lead")], "prompt"),
    "handing on alone": ("alone", [("at", "_pass_on")], "prompt"),
}


@pytest.mark.parametrize("where", list(_INTERRUPTS))
def test_ctrl_c_in_the_sending_thread_leaves_no_other_thread_waiting_for_ever(redis_url: str, where: str) -> None:
    """Ctrl-C lands in thread V where it sends the calls, or is handed the queue, at a point
    :meth:`RedisLink._lead`'s clean-up does not cover (as it starts, or starts to hand on): V gets the
    interrupt, and hands the queue on before it lets go of the send lock, so the other thread's call
    completes at once (its bounded wait is set to an hour here). Only a second Ctrl-C in V's clean-up
    leaves the other thread to its bounded wait (it finds no thread writing and sends the queue
    itself). No reply goes to the wrong call, Redis runs the other call once, and the link is left
    idle and working. Before, the other thread waited its full bounded wait (0.1 s) each time; and
    before that, for ever."""
    place, interrupts, handed_on = _INTERRUPTS[where]
    if place == "queued":
        shared, call = _wire_busy(redis_url)
    else:
        shared, call = buckets(redis_url, timeout=5, down_for=60), dict(_TWO_TOKENS)
    link = shared.link
    if handed_on == "prompt":
        link._patience = 3600.0
    got: dict[str, Any] = {}
    finished = threading.Event()

    def v() -> None:
        try:
            got["v"] = shared.acquire("v", **call)
        except KeyboardInterrupt:
            got["v"] = "interrupted"

    def other() -> None:
        got["other"] = shared.acquire("other", **call)
        finished.set()

    victim = [threading.Thread(target=v, daemon=True)]
    for how, name in interrupts:
        _interrupt(link, name, victim, after=how == "after")
    helper = threading.Thread(target=other, daemon=True)
    if place == "queued":
        victim[0].start()
        until_queued(link, 1)
        helper.start()
        until_queued(link, 2)
        _write_ends(link)  # V's turn to send the queue: its call and the other thread's
    else:
        victim[0].start()
        victim[0].join(10)
        helper.start()
    assert finished.wait(30), "the other thread's call never completed"  # a guard, not a measure
    victim[0].join(10)
    assert got == {"v": "interrupted", "other": 0.0}
    assert bounded(lambda: shared.acquire("other", **call)) == 0.0  # a token left: Redis ran its call once
    assert bounded(lambda: shared.acquire("after", **call)) == 0.0
    assert not link._sending and not link._queue and not link._is_down() and link.failures == 0


def test_ctrl_c_twice_in_a_waiting_thread_leaves_no_other_thread_waiting_for_ever(redis_url: str) -> None:
    """Ctrl-C reaches the main thread while its call waits behind a write on the wire, and again as
    it starts to take its call out of the queue: its call stays queued, for a thread gone. The write
    on the wire ends and wakes it for its turn; the thread queued behind it finds no thread writing
    and sends the queue itself. Before, the queue went to the gone thread, and every call waited for ever."""
    import signal

    shared, call = _wire_busy(redis_url)
    link = shared.link
    victim = [threading.main_thread()]
    _interrupt(link, "_leave", victim)
    main = threading.main_thread().ident
    assert main is not None
    got: dict[str, Any] = {}
    finished = threading.Event()

    def other() -> None:
        got["other"] = shared.acquire("other", **call)
        finished.set()

    def interrupt() -> None:
        until_queued(link, 1)
        threading.Thread(target=other, daemon=True).start()
        until_queued(link, 2)
        in_its_wait(main)
        signal.pthread_kill(main, signal.SIGINT)

    helper = threading.Thread(target=interrupt, daemon=True)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        shared.acquire("mine", **call)
    helper.join(10)
    _write_ends(link)
    assert finished.wait(30), "the other thread's call never completed"  # a guard, not a measure
    assert got == {"other": 0.0}
    assert bounded(lambda: shared.acquire("other", **call)) == 0.0  # a token left: Redis ran its call once
    assert not link._sending and not link._queue and not link._is_down()


class _CheckedLock:
    """A lock that counts the calls of ``locked()``: how often a waiting thread checked on the sender."""

    def __init__(self, lock: Any) -> None:
        self.lock, self.checks = lock, 0

    def locked(self) -> bool:
        self.checks += 1
        return bool(self.lock.locked())

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        return bool(self.lock.acquire(*args, **kwargs))

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> bool:
        return bool(self.lock.__enter__())

    def __exit__(self, *exc: object) -> None:
        self.lock.__exit__(*exc)


def test_a_thread_waiting_past_its_patience_behind_a_write_on_the_wire_does_not_write(proxy: HoldingProxy) -> None:
    """While Redis holds the reply to a write, a call queued behind it waits past its patience again
    and again: each time it finds the sender writing (it holds the send lock), so it waits on and
    never writes on the connection the sender reads from. Its call goes in the next write, and each
    call gets its own reply."""
    from harness_one.state._redis import _BUCKET

    shared = buckets(proxy.url + "?timeout=5")
    link = shared.link
    call = {"rate": 1, "cost": 1, "now": 0}
    shared.acquire("warm", burst=1, **call)
    writes = count_writes(link._hot_connection())
    link._send_lock, link._patience = _CheckedLock(link._send_lock), 0.001
    got: dict[str, float] = {}
    hold = proxy.hold(_BUCKET)
    sender = threading.Thread(target=lambda: got.update(sender=shared.acquire("s", burst=0, **call)), daemon=True)
    sender.start()
    assert hold.reached.wait(10), "the held call never reached Redis"
    behind = threading.Thread(target=lambda: got.update(behind=shared.acquire("b", burst=1, **call)), daemon=True)
    behind.start()
    until_queued(link, 1)
    until(lambda: link._send_lock.checks >= 3, "the waiting thread never checked on the sender")
    assert writes == [1]  # the queued call was not written meanwhile
    hold.release()
    sender.join(10)
    behind.join(10)
    assert writes == [1, 1] and got == {"sender": 1.0, "behind": 0.0}  # an empty bucket waits; a full one admits


def test_a_write_cut_short_where_it_could_not_drop_the_connection_leaves_no_reply_for_the_next(redis_url: str) -> None:
    """Ctrl-C lands as a thread reads its reply, and again as it drops the connection: the reply is
    left in flight on the kept connection. The next write drops the connection first, so that reply
    is never read as another call's. Before, the next call got the interrupted call's reply."""
    from harness_one.state._redis import _BUCKET

    shared = buckets(redis_url, timeout=5)
    link = shared.link
    shared.acquire("warm", rate=1, burst=1, cost=1, now=0)
    connection = link._hot_connection()
    read, disconnect = connection.read_response, connection.disconnect

    def ctrl_c(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    connection.read_response = connection.disconnect = ctrl_c
    with pytest.raises(KeyboardInterrupt):
        link.run(_BUCKET, ["{empty}"], ["0", "1", "0", "1"])  # an empty bucket: its reply is 1 (s to wait)
    connection.read_response, connection.disconnect = read, disconnect
    assert link.run(_BUCKET, ["{full}"], ["0", "1", "5", "1"]) == b"0"  # a full bucket admits: its own reply
    assert link.run(_BUCKET, ["{full}"], ["0", "1", "5", "1"]) == b"0"


def in_frame(thread: threading.Thread, name: str) -> bool:
    """Whether ``thread`` runs the function ``name`` (a blocked lock acquire shows as its caller), or has ended."""
    import sys

    frame = sys._current_frames().get(thread.ident or 0)
    return frame is None or frame.f_code.co_name == name


def test_close_waits_for_the_write_on_the_wire(redis_server: RedisServer, proxy: HoldingProxy) -> None:
    """``close()`` comes while a thread's write of three calls is on the kept connection (Redis holds
    the replies): it waits for that write, so the writer reads its own replies and Redis runs each
    call once; then it closes the connection. Before, it closed the socket under the writer, whose
    read failed; the writer sent its calls again on a new connection, and Redis ran each twice."""
    from harness_one.state._redis import _BUCKET

    shared = buckets(proxy.url + "?timeout=5")
    link = shared.link
    shared.acquire("warm", rate=1, burst=1, cost=1, now=0)
    connection = link._hot_connection()
    before = redis_server.commandstats()["evalsha"]
    got: dict[str, Any] = {}
    calls = [shared._args(f"c{i}", 1, 5, 1, 0) for i in range(3)]
    hold = proxy.hold(_BUCKET)
    writer = threading.Thread(target=lambda: got.update(w=[float(r) for r in link.run_many(_BUCKET, calls)]), daemon=True)
    writer.start()
    assert hold.reached.wait(10), "the held write never reached Redis"
    closer = threading.Thread(target=link.close, daemon=True)
    closer.start()
    until(lambda: in_frame(closer, "close"), "close never started")
    hold.release()
    writer.join(10)
    closer.join(10)
    assert got == {"w": [0.0, 0.0, 0.0]} and link.failures == 0 and not link._is_down()
    assert redis_server.commandstats()["evalsha"] - before == 3  # one run each: no resend
    assert link._hot is None and not connection._sock  # closed after the write
    assert shared.acquire("c0", rate=1, burst=5, cost=1, now=0) == 0.0  # a later call opens a new one (4 of 5 tokens left)


def test_close_in_the_thread_that_holds_the_send_lock_does_not_wait_for_ever(redis_url: str) -> None:
    """A signal handler closing the link in the very thread writing on it (it holds the send lock):
    ``close()`` waits a bounded time for the write (twice the timeout and a second: 3 s), then closes the
    kept connection under it, instead of waiting on its own thread for ever. (A timeout of 1 s: the link's
    warm-up and last calls have it too, and a loaded machine took up to 46 ms for them.)"""
    shared = buckets(redis_url, timeout=1.0)
    link = shared.link
    shared.acquire("warm", rate=1, burst=1, cost=1, now=0)
    connection = link._hot_connection()
    closed = threading.Event()

    def inside_a_write() -> None:
        with link._send_lock:  # as _lead holds it while the handler runs
            link.close()
        closed.set()

    worker = threading.Thread(target=inside_a_write, daemon=True)
    worker.start()
    assert closed.wait(30), "close() waited for the lock its own thread holds"
    assert link._hot is None and not connection._sock
    assert not link._send_lock.locked()  # not released by close(): it did not take it
    assert shared.acquire("c0", rate=1, burst=5, cost=1, now=0) == 0.0  # a later call opens a new connection


def test_a_call_that_finds_no_write_flagged_while_the_send_lock_is_held_waits_for_the_lock(redis_url: str) -> None:
    """A caller reads ``_sending`` without the queue lock, and can find it False while a thread holds
    the send lock (it took the lock and has not set the flag yet, or it handed the queue on and has
    not let go of the lock yet). Such a caller does not queue: it waits for the send lock and sends
    its call alone. That is a write it does not share, never a lost wake-up: with the bounded wait set
    to an hour, both such callers complete as soon as the lock is let go, each with its own reply."""
    shared = buckets(redis_url, timeout=5)
    link = shared.link
    call = {"rate": 1, "cost": 1, "now": 0}
    shared.acquire("warm", burst=1, **call)
    link._patience = 3600.0
    writes = count_writes(link._hot_connection())
    got: dict[str, float] = {}
    link._send_lock.acquire()  # the window: the send lock held, _sending False
    pool = [threading.Thread(target=lambda b=b: got.update({f"b{b}": shared.acquire(f"b{b}", burst=b, **call)})) for b in (0, 1)]
    try:
        for t in pool:
            t.start()
            until(lambda t=t: in_frame(t, "_send"), "the caller never waited for the send lock")
        assert not link._queue and not link._sending  # neither queued
    finally:
        link._send_lock.release()
    for t in pool:
        t.join(30)
    assert got == {"b0": 1.0, "b1": 0.0}  # an empty bucket waits 1 s, a full one admits: each its own reply
    assert writes == [1, 1] and not link._sending and not link._queue
