"""In-process backends: token buckets, idempotency records, slots and circuits in dicts, thread-safe."""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Any

from .._render import rendered_length
from ._protocols import EXPIRES, KEPT_TICKETS, LEASE, TTL, Record, seconds

__all__ = [
    "Breaker",
    "MemoryBudgets",
    "MemoryBuckets",
    "MemoryCircuits",
    "MemorySlots",
    "MemoryStore",
    "copied",
    "known_moment",
    "moment",
]

_INF = math.inf

#: Every in-process backend, made fit for a forked child (see :func:`_forked`).
_BACKENDS: weakref.WeakSet[Any] = weakref.WeakSet()


def _forked() -> None:
    """In a forked child only the forking thread goes on: each backend gets a new lock (another
    thread may have held the old one, for ever now), and the slots and half-open probes held by
    the parent's other calls, which do not run here, are let go."""
    for backend in list(_BACKENDS):
        backend._lock = threading.Lock()
        forget = getattr(backend, "_forget_calls", None)
        if forget is not None:
            forget()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forked)


def moment(now: float) -> float:
    """``now`` (a clock's reading a backend was given) as ``float()`` reads it, unless that is NaN or infinite:
    then ``ValueError`` (``TypeError`` for a type ``float()`` does not take). A broken clock fails the call
    (closed), as a NaN lease does (:func:`~harness_one.state._protocols.seconds`): a NaN time never compares
    as passed and an infinite one passes every deadline, so a bucket would never refill or refill at once, a
    record or a budget's run would never expire or expire at once, and SQLite and Redis would be sent a number
    JSON and their scripts do not take."""
    try:
        found = float(now)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"the clock's time is a number of seconds, not {now!r}") from None
    if not math.isfinite(found):
        raise ValueError(f"the clock's time is a finite number of seconds, not {found!r}: the clock is broken")
    return found


def known_moment(now: float | None) -> float | None:
    """A ``finish``'s ``now``: None (unknown) when not given or not finite, so another owner's record is kept
    (a NaN time would find it expired and write over it) and Redis measures the TTL on wall time."""
    return None if now is None or not math.isfinite(now) else float(now)


def _tool_of(key: Hashable) -> Hashable:
    """The tool a bucket's key belongs to: the key itself, or a per-caller key's first part."""
    return key[0] if type(key) is tuple and key else key


class MemoryBuckets:
    """Token buckets in a dict. Idle buckets (full again) are evicted.

    A bucket untouched for ``burst / rate`` seconds is full, which is what a missing bucket
    means, so dropping it changes nothing; a sweep every ``sweep_every`` new buckets does
    that, and ``max_keys`` caps memory even under a flood of distinct keys. When the buckets
    still busy fill ``max_keys``, the tool with the most keyed buckets (per-caller ones)
    drops the oldest tenth of its own at once, so the next sweeps are far apart: a flood of
    keys through one tool resets none of another tool's limits, and a tool's own bucket (no
    ``key``) is never dropped.

    A ``now`` earlier than the bucket's last reading by up to :attr:`step_back` seconds is a late
    reading (a thread that read the clock, then waited for the lock): it refills nothing and
    moves nothing, so no interval is paid out twice, and the tokens taken from ``t0`` to ``t``
    never exceed ``burst + rate * (t - t0)``. One earlier by more is the clock stepping back:
    refills run from there (they do not stop until the clock catches up). :meth:`acquire_on`
    reads the clock under the lock, so no reading is late at all.
    """

    #: Seconds a reading may lag behind the bucket's last one as a late reading, not a step back.
    step_back = 1.0

    def __init__(self, *, max_keys: int = 100_000, sweep_every: int = 4096) -> None:
        self._buckets: dict[Hashable, list[float]] = {}
        self._lock = threading.Lock()
        _BACKENDS.add(self)
        self._max_keys = max_keys
        self._sweep_every = sweep_every
        self._ops = 0
        self._refills: dict[Hashable, float] = {}  # per tool with per-caller buckets: the longest refill it was given

    def acquire(self, key: Hashable, rate: float, burst: float, cost: float, now: float) -> float:
        """The protocol's ``acquire`` (positional too): :meth:`acquire_on` at ``now``."""
        return self.acquire_on(key, rate, burst, cost, lambda: now)

    def acquire_on(self, key: Hashable, rate: float, burst: float, cost: float, clock: Callable[[], float]) -> float:
        """``acquire`` at ``clock()``, read under the lock: calls are decided in the order of their
        readings, so threads that read one clock before the lock cannot pay out an interval twice.
        The rate-limit plugin's per-call path."""
        lock = self._lock
        lock.acquire()  # not `with`: half the cost on the per-call path
        try:
            now = clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._new(key, rate, burst, now)
            tokens, last, _ = bucket
            if now > last:
                tokens += (now - last) * rate
                if tokens > burst:  # (not min(): no call on the per-call path)
                    if now == _INF:  # (checked only here: +inf fills any bucket, and stays its last reading)
                        moment(now)
                    tokens = burst
                bucket[1] = now
            elif last - now > self.step_back:  # the clock stepped back: nothing refilled, and refills run from here
                if now == -_INF:  # (a bucket last read at -inf would fill at the next reading)
                    moment(now)
                bucket[1] = now
            elif math.isnan(now):  # (only on a late reading) a bucket last read at NaN would never refill
                moment(now)
            # (earlier by less: a late reading, after another thread's; it refills nothing)
            if tokens >= cost:
                bucket[0] = tokens - cost
                return 0.0
            short = cost - tokens
            if short <= cost * 1e-9:  # float rounding: at exactly the rate (1/3 s at 3/s sums to 0.99999...) it is due
                bucket[0] = tokens - cost
                return 0.0
            bucket[0] = tokens
            return short / rate
        finally:
            lock.release()

    def give_back(self, key: Hashable, *, burst: float, cost: float) -> None:
        """Return the ``cost`` tokens a call took and did not use (refused afterwards, before it ran)."""
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is not None:
                bucket[0] = min(burst, bucket[0] + cost)

    def retune(self, tool: Hashable, *, rate: float, burst: float, keyed: bool = False) -> None:
        """``tool``'s limit is (again) ``rate`` and ``burst``: a bucket's ``burst / rate`` is fixed when it is
        made, and a sweep takes a bucket idle that long for full. From now on ``tool``'s bucket, and with
        ``keyed`` its per-caller buckets ``(tool, ...)``, count as full only after the longest refill it was
        given, so no sweep drops one that a slower limit has not refilled yet (which would admit a burst)."""
        refill = burst / rate
        with self._lock:
            bucket = self._buckets.get(tool)
            if bucket is not None and bucket[2] < refill:
                bucket[2] = refill
            if keyed or tool in self._refills:
                self._refills[tool] = max(self._refills.get(tool, 0.0), refill)

    def _new(self, key: Hashable, rate: float, burst: float, now: float) -> list[float]:
        """A full bucket for ``key`` (under the lock), after a sweep when one is due."""
        moment(now)
        self._ops += 1
        if self._ops >= self._sweep_every or len(self._buckets) >= self._max_keys:
            self._sweep(now)
        bucket = self._buckets[key] = [burst, now, burst / rate]
        return bucket

    def _sweep(self, now: float) -> None:
        self._ops = 0
        refills = self._refills
        idle = [
            k
            for k, (_, last, full_after) in self._buckets.items()
            if now - last >= full_after and (not refills or now - last >= refills.get(_tool_of(k), 0.0))
        ]
        for key in idle:
            del self._buckets[key]
        if len(self._buckets) >= self._max_keys:  # still full of busy keys: the tool with the most drops its oldest tenth
            keyed: dict[Hashable, list[Hashable]] = {}
            for k in self._buckets:
                if type(k) is not str:
                    keyed.setdefault(_tool_of(k), []).append(k)
            for mine in sorted(keyed.values(), key=len, reverse=True):
                for key in mine[: max(len(mine) // 10, len(self._buckets) - self._max_keys + 1)]:
                    del self._buckets[key]
                if len(self._buckets) < self._max_keys:
                    break

    def __len__(self) -> int:
        return len(self._buckets)


def copied(value: Any) -> Any:
    """A copy of ``value`` no caller holds (immutable scalars as they are); ``TypeError`` if it cannot be copied.

    What an in-process store keeps and hands out (an idempotency record's value, a cached
    result), so that no caller changes what the next one gets.
    """
    if value is None or type(value) in (str, int, float, bool, bytes):
        return value
    try:
        return copy.deepcopy(value)
    except Exception as exc:  # copy.Error, RecursionError, and whatever a value's __deepcopy__ or __getattr__ raises
        raise TypeError(f"the value cannot be copied: {type(exc).__name__}: {exc}") from exc


def _copy_of(record: Record) -> Record:
    """``record`` with a copy of its value and of its error's description (``TypeError`` if one cannot be copied)."""
    if record.error is None:
        return dataclasses.replace(record, value=copied(record.value))
    return dataclasses.replace(record, value=copied(record.value), error=copied(record.error))


def _bound(value: Any, what: str) -> int:
    """``value`` as a positive integer, else a ``ValueError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer, not {value!r}")
    return value


def _chars_of(record: Record) -> int:
    """The characters of a record's outcome, as the model reads it (as the cache plugin measures a result)."""
    value = 0 if record.value is None else rendered_length(record.value)
    return value + (0 if record.error is None else rendered_length(record.error))


class MemoryStore:
    """Idempotency records in a dict, for one process.

    A value, or an error's description, is kept as a copy, and each replay gets its own copy,
    so no caller changes what the next one is replayed; ``finish`` raises ``TypeError`` for an
    outcome that cannot be copied (a lock, a socket), as the SQLite and Redis stores do for one
    that is not JSON.
    A claim's ``owner`` is kept with its record (None: a claim made without one).

    Memory is bounded: at most ``max_records`` finished records are kept, holding at most
    ``max_chars`` characters of outcomes together (each measured as the model reads it,
    :func:`~harness_one.rendered_length`); past either, the oldest finished records are dropped
    first (their keys run again), never the claim of a call that runs, nor the record just
    finished. ``finish`` raises ``ValueError`` for a value larger than ``max_chars`` alone, as the
    Redis store does for one over its ``max_value`` (the idempotency plugin then keeps its
    ``OutcomeNotReplayable`` error instead); an error's description is always kept.
    """

    def __init__(self, *, max_records: int = 100_000, max_chars: int = 100_000_000) -> None:
        self._records: dict[tuple[str, str], tuple[Record, str | None]] = {}
        #: The finished records, oldest first, with their characters: the order they are dropped in.
        self._done: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._chars = 0  # of all finished records
        self.max_records = _bound(max_records, "MemoryStore max_records")
        self.max_chars = _bound(max_chars, "MemoryStore max_chars")
        #: Finished records dropped to keep within the bounds (their keys run again).
        self.evicted = 0
        self._lock = threading.Lock()
        _BACKENDS.add(self)
        self._ops = 0

    def bound(self, *, max_records: int | None = None, max_chars: int | None = None) -> None:
        """Change the bounds (None: keep that one); records past a lowered bound are dropped now, oldest first."""
        records = self.max_records if max_records is None else _bound(max_records, "MemoryStore max_records")
        chars = self.max_chars if max_chars is None else _bound(max_chars, "MemoryStore max_chars")
        with self._lock:
            self.max_records, self.max_chars = records, chars
            self._trim()

    def _forget(self, at: tuple[str, str]) -> None:
        """Drop the record ``at`` (if any), and its characters (under the lock)."""
        self._records.pop(at, None)
        size = self._done.pop(at, None)
        if size is not None:
            self._chars -= size

    def _trim(self, newest: tuple[str, str] | None = None) -> None:
        """Drop the oldest finished records while the bounds are exceeded, never ``newest`` (under the lock)."""
        while self._done and (len(self._done) > self.max_records or self._chars > self.max_chars):
            if next(iter(self._done)) == newest:
                return
            at, size = self._done.popitem(last=False)
            self._chars -= size
            del self._records[at]
            self.evicted += 1

    def begin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, *, owner: str | None = None
    ) -> Record | None:
        lease, now = seconds(lease, LEASE), moment(now)
        with self._lock:
            self._ops += 1
            if self._ops % 1024 == 0:
                for k in [k for k, (r, _) in self._records.items() if r.expires <= now]:
                    self._forget(k)
            held = self._records.get((scope, key))
            if held is None or held[0].expires <= now:
                self._forget((scope, key))
                self._records[(scope, key)] = (Record(fingerprint, "running", now + lease), owner)
                return None
            found = held[0]
        if found.state == "done":
            return _copy_of(found)
        return found

    def renew(self, scope: str, key: str, now: float, lease: float, *, owner: str | None = None) -> bool:
        lease, now = seconds(lease, LEASE), moment(now)
        with self._lock:
            held = self._records.get((scope, key))
            if held is None or (owner is not None and held[1] != owner):
                return False
            found = held[0]
            if found.state != "running" or found.expires <= now:
                return False
            found.expires = now + lease
            return True

    def finish(self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None) -> bool:
        seconds(record.expires, EXPIRES)
        now = known_moment(now)
        size = _chars_of(record)
        if size > self.max_chars and record.value is not None:  # alone it would push out every other record (an
            # error's description is kept: OutcomeNotReplayable, what the plugin keeps instead, must fit)
            raise ValueError(f"the outcome is {size:,} characters, over the {self.max_chars:,} the store holds")
        kept = _copy_of(record)
        at = (scope, key)
        with self._lock:
            held = self._records.get(at)
            if owner is not None and held is not None and held[1] != owner and (now is None or held[0].expires > now):
                return False  # another caller's live claim or outcome: kept
            self._forget(at)
            self._records[at] = (kept, owner)
            if kept.state == "done":
                self._done[at] = size
                self._chars += size
                self._trim(at)
            return True

    def release(self, scope: str, key: str, *, owner: str | None = None) -> None:
        with self._lock:
            held = self._records.get((scope, key))
            if held is not None and (owner is None or held[1] == owner):
                self._forget((scope, key))

    def __len__(self) -> int:
        return len(self._records)


class MemorySlots:
    """Concurrency slots of one process. A slot lasts until released (``lease`` is not needed:
    the process that holds it is the only one that could lose it)."""

    def __init__(self) -> None:
        self._held: dict[str, set[str]] = {}
        self._all = 0
        self._lock = threading.Lock()
        _BACKENDS.add(self)

    def acquire(
        self, tool: str, holder: str, *, cap: int | None, total: int | None, now: float, lease: float
    ) -> tuple[bool, int, int]:
        with self._lock:
            held = self._held.setdefault(tool, set())
            running, overall = len(held), self._all
            if (cap is not None and running >= cap) or (total is not None and overall >= total):
                return False, running, overall
            held.add(holder)
            self._all += 1
            return True, running, overall

    def renew(self, tool: str, holder: str, *, now: float, lease: float) -> bool:
        with self._lock:
            return holder in self._held.get(tool, ())

    def release(self, tool: str, holder: str) -> None:
        with self._lock:
            held = self._held.get(tool)
            if held is not None and holder in held:
                held.discard(holder)
                self._all -= 1
                if not held:  # none running: nothing kept for the tool (tools made and removed per session)
                    del self._held[tool]

    def running(self, tool: str | None, *, now: float) -> int:
        with self._lock:
            return self._all if tool is None else len(self._held.get(tool, ()))

    def _forget_calls(self) -> None:
        self._held.clear()
        self._all = 0


class Breaker:
    """One circuit: closed, open or half-open, with a sliding window of per-second counts.

    Each method judges with the ``policy`` it is given (the calling tool's: tools sharing a
    key may differ in settings), else with the one the breaker was made with. The window's
    seconds are kept in order with running totals, so a call costs the same however long the
    window (a day's window held 86,400 seconds, each summed on every call).
    """

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.state = "closed"
        self.opened_at = 0.0
        self.buckets: deque[list[int]] = deque()  # [second, calls, failures], oldest first
        self.calls = 0  # the totals of ``buckets``
        self.failures = 0
        self.counted = -math.inf  # when it last counted a call
        self.longest: float = policy.window  # the longest window it counted for: a sweep drops it only past that
        self.longest_open: float = policy.open_for  # likewise the longest open period it was judged with
        self.swept = False  # dropped from its store as idle (see MemoryCircuits): it counts nothing more
        self.probing = 0
        self.period = 0  # the half-open period a probe belongs to: new at each opening and each reclaim
        self.probe_started = 0.0  # when the last probe was let through
        self.probe_successes = 0
        self.lock = threading.Lock()
        self.opened = 0

    def _drop_younger(self, now: float) -> None:
        """Drop the seconds after ``now`` (the clock stepped back: they are not younger)."""
        buckets = self.buckets
        while buckets and buckets[-1][0] > now:
            _, calls, failures = buckets.pop()
            self.calls -= calls
            self.failures -= failures

    def _trim(self, now: float, policy: Any) -> None:
        """Drop the seconds out of the window: before it, and after ``now``."""
        self._drop_younger(now)
        oldest = math.floor(now - policy.window)
        buckets = self.buckets
        while buckets and buckets[0][0] <= oldest:
            _, calls, failures = buckets.popleft()
            self.calls -= calls
            self.failures -= failures

    def totals(self, now: float, policy: Any = None) -> tuple[int, int]:
        self._trim(now, policy or self.policy)
        return self.calls, self.failures

    def _clear(self) -> None:
        self.buckets.clear()
        self.calls = self.failures = 0

    def idle(self, now: float) -> bool:
        """Closed, no probe in flight, and no second left that any window it counted for still holds:
        the same as no breaker at all; or open or half-open and untouched (not opened, no probe let
        through) for twice the longest of its windows and open periods, as a Redis circuit's hash
        expires (call under ``lock``)."""
        if self.state != "closed":
            return now - max(self.opened_at, self.probe_started) >= 2 * max(self.longest, self.longest_open)
        if self.probing:
            return False
        return not self.buckets or self.buckets[-1][0] <= math.floor(now - self.longest)

    def _open(self, now: float) -> None:
        self.state = "open"
        self.opened_at = now
        self.probing = self.probe_successes = 0
        self._clear()
        self.opened += 1
        self.period += 1

    def admit(self, now: float, policy: Any = None) -> tuple[float, int]:
        """(0, probe) to let the call through (probe: the half-open period, ``period``; 0: none),
        or (seconds to wait, 0) to refuse."""
        policy = policy or self.policy
        with self.lock:
            if self.state == "open":
                self.longest_open = max(self.longest_open, policy.open_for)
                self.opened_at = min(self.opened_at, now)  # a clock stepped back: the open period runs from now
                wait = self.opened_at + policy.open_for - now
                if wait > 0:
                    return wait, 0
                self.state = "half_open"
            if self.state == "half_open":
                self.probe_started = min(self.probe_started, now)  # a clock stepped back: a probe's time runs from now
                if self.probing and now - self.probe_started > policy.open_for:
                    # Hung (or lost with a forked process): their places go to new probes, as in Redis,
                    # and their late ends count for nothing (a new period: they would free a new probe's place).
                    self.probing = 0
                    self.period += 1
                if self.probing + self.probe_successes >= policy.probes:
                    return min(1.0, policy.open_for), 0
                self.probing += 1
                self.probe_started = now
                return 0.0, self.period
            return 0.0, 0

    def record(self, now: float, failed: bool, probe: int, policy: Any = None) -> bool:
        """Count a call's end; False when the breaker was swept from its store first (count it in
        the circuit's breaker now, a new one)."""
        policy = policy or self.policy
        with self.lock:
            if self.swept:
                return False
            if probe:
                if probe != self.period:  # it probed an earlier period, already decided or reclaimed: nothing now
                    return True
                self.probing = max(self.probing - 1, 0)
                if self.state != "half_open":
                    return True
                if failed:
                    self._open(now)
                    return True
                self.probe_successes += 1
                if self.probe_successes >= policy.probes:
                    self.state = "closed"
                    self._clear()
                return True
            if self.state != "closed":
                return True
            self._drop_younger(now)
            second = math.floor(now)
            buckets = self.buckets
            if buckets and buckets[-1][0] == second:
                buckets[-1][1] += 1
                buckets[-1][2] += failed
            else:
                buckets.append([second, 1, int(failed)])
            self.calls += 1
            self.failures += failed
            self.counted = now
            self.longest = max(self.longest, policy.window)
            calls, failures = self.totals(now, policy)
            if calls >= policy.min_calls and failures / calls >= policy.failure_ratio:
                self._open(now)
            return True

    def unprobe(self, probe: int) -> None:
        with self.lock:
            if probe == self.period:
                self.probing = max(self.probing - 1, 0)

    def snapshot(self, now: float, policy: Any = None) -> dict[str, Any]:
        with self.lock:
            calls, failures = self.totals(now, policy)
            return {"state": self.state, "calls": calls, "failures": failures, "opened": self.opened}


class MemoryCircuits:
    """Circuits of one process: a :class:`Breaker` per circuit (a tool's name or a shared ``key``).

    As in Redis, a circuit keeps its state when the policy changes, and each call is judged
    with the policy it brings (tools sharing a key may differ in settings). As an idle Redis
    circuit's hash expires, an idle breaker (closed, no probe in flight, none of its window's
    calls left: the same as none) is dropped, in a sweep every ``sweep_every`` new breakers,
    so circuits of tools made and removed per session do not pile up. When breakers still
    counting fill ``max_keys``, the closed ones without a probe in flight that counted a call
    longest ago go, a tenth at once (their windows start empty again); an open or half-open
    circuit is never dropped. When open circuits leave a sweep without a tenth of ``max_keys``
    free, new breakers are made past ``max_keys`` and the next sweep waits for ``sweep_every``
    of them (each counts until then: at most ``sweep_every`` circuits past what the open ones hold). A breaker made after a sweep numbers its half-open periods after
    every swept one's, so a late probe of a dropped breaker decides nothing in its successor.
    """

    def __init__(self, *, max_keys: int = 100_000, sweep_every: int = 4096) -> None:
        for what, value in (("max_keys", max_keys), ("sweep_every", sweep_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"circuit {what} must be a positive integer, got {value!r}")
        self._breakers: dict[str, Breaker] = {}
        self._lock = threading.Lock()
        _BACKENDS.add(self)
        self._max_keys = max_keys
        self._sweep_every = sweep_every
        self._made = 0  # breakers made since the last sweep
        self._full = False  # the last sweep could not free a tenth of max_keys (open circuits): the next waits
        self._retired = 0  # above every period of a swept breaker: where a new breaker's periods start

    def breaker(self, tool: str, policy: Any) -> Breaker:
        found = self._breakers.get(tool)
        if found is None:
            with self._lock:
                found = self._breakers.get(tool)
                if found is None:
                    found = self._breakers[tool] = Breaker(policy)
                    found.period = self._retired
                    self._made += 1
                    if len(self._breakers) >= self._max_keys and not self._full:
                        self._made = max(self._made, self._sweep_every)  # the next admit sweeps
        return found

    def _sweep(self, now: float) -> None:
        """Drop the idle breakers (those whose lock is free: one in use is not idle for long)."""
        with self._lock:
            if self._made < self._sweep_every:
                return  # another thread swept
            self._made = 0
            self._drop(lambda breaker: breaker.idle(now))
            if len(self._breakers) >= self._max_keys:  # still full of counting ones: the closed ones idle longest go
                closed = sorted((b.counted, name) for name, b in self._breakers.items() if b.state == "closed" and not b.probing)
                count = max(len(self._breakers) // 10, len(self._breakers) - self._max_keys + 1)
                self._drop(
                    lambda breaker: breaker.state == "closed" and not breaker.probing, [name for _, name in closed[:count]]
                )
            # Not a tenth of room (open circuits, never dropped, fill it): a sweep on each new breaker would
            # cost a scan of the store per call, and drop the breaker of the last new circuit before it counts
            # anything. The next sweep waits for sweep_every new breakers instead; the store holds more
            # than max_keys meanwhile.
            self._full = len(self._breakers) > self._max_keys - max(self._max_keys // 10, 1)

    def _drop(self, drop: Callable[[Breaker], bool], names: list[str] | None = None) -> None:
        """Drop the breakers (of ``names``, else all) that ``drop`` picks, under their locks (one in use is kept)."""
        for name in list(self._breakers if names is None else names):
            breaker = self._breakers[name]
            if not breaker.lock.acquire(blocking=False):
                continue
            try:
                if drop(breaker):
                    breaker.swept = True  # a record that found it before it went counts in its successor
                    del self._breakers[name]
                    self._retired = max(self._retired, breaker.period + 1)
            finally:
                breaker.lock.release()

    def __len__(self) -> int:
        return len(self._breakers)

    def admit(self, tool: str, policy: Any, *, now: float) -> tuple[float, int]:
        now = moment(now)  # a NaN time would end an open period at once (and let a probe through)
        if self._made >= self._sweep_every:
            self._sweep(now)
        return self.breaker(tool, policy).admit(now, policy)

    def record(self, tool: str, policy: Any, *, now: float, failed: bool, probe: int) -> None:
        now = moment(now)
        while not self.breaker(tool, policy).record(now, failed, probe, policy):
            pass  # swept meanwhile: the next breaker() is its successor

    def unprobe(self, tool: str, policy: Any, *, probe: int) -> None:
        self.breaker(tool, policy).unprobe(probe)

    def snapshot(self, tool: str, policy: Any, *, now: float) -> dict[str, Any]:
        now = moment(now)
        return self.breaker(tool, policy).snapshot(now, policy)

    def _forget_calls(self) -> None:
        for breaker in self._breakers.values():
            breaker.lock = threading.Lock()
            breaker.probing = 0


def _mark(ticket: str) -> bytes:
    """A ticket as 8 bytes: its hash (this process's, which is all the memory store needs)."""
    return hash(ticket).to_bytes(8, "little", signed=True)


def _held_at(held: bytearray, mark: bytes) -> int:
    """Where ``mark`` is among the 8-byte marks of ``held`` (-1: not there)."""
    at = held.find(mark)
    while at > 0 and at % 8:  # straddling two marks: not one of them
        at = held.find(mark, at + 1)
    return at


class MemoryBudgets:
    """Per-run call counters of one process: ``{scope: count}`` per run, ``"*"`` for all scopes.

    Runs are kept in order of activity: a run idle for its ``ttl`` is forgotten (its counts
    start again at zero), and beyond ``max_runs`` the least recently active go first, so
    memory stays bounded. A run also holds the tickets of its last 64 give-backs, as 8-byte
    hashes (at most 512 bytes a run), and a run whose calls were all given back keeps them.
    """

    def __init__(self, *, max_runs: int = 100_000) -> None:
        if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
            raise ValueError(f"budget max_runs must be a positive integer, got {max_runs!r}")
        self.max_runs = max_runs
        # run -> counts, [expires], the 8-byte hashes of the tickets of its last KEPT_TICKETS give-backs
        self._runs: OrderedDict[str, tuple[dict[str, int], list[float], bytearray]] = OrderedDict()
        self._lock = threading.Lock()
        _BACKENDS.add(self)

    def _live(self, run: str, now: float) -> dict[str, int] | None:
        found = self._runs.get(run)
        if found is None:
            return None
        if found[1][0] <= now:
            del self._runs[run]
            return None
        return found[0]

    def take(self, run: str, scope: str, *, limit: int | None, total: int | None, now: float, ttl: float) -> int:
        ttl, now = seconds(ttl, TTL), moment(now)  # a NaN time would drop every run's counts (all expired)
        with self._lock:
            runs = self._runs
            while runs:  # the least recently active first: drop the expired ones
                oldest = next(iter(runs))
                if runs[oldest][1][0] > now:
                    break
                del runs[oldest]
            found = runs.get(run)
            if found is None:
                found = runs[run] = ({}, [now + ttl], bytearray())
                while len(runs) > self.max_runs:
                    runs.popitem(last=False)
            else:
                runs.move_to_end(run)
                found[1][0] = now + ttl
            counts = found[0]
            if limit is not None and counts.get(scope, 0) >= limit:
                return 1
            if total is not None and counts.get("*", 0) >= total:
                return 2
            counts[scope] = counts.get(scope, 0) + 1
            counts["*"] = counts.get("*", 0) + 1
            return 0

    def give_back(self, run: str, scope: str, *, ticket: str | None = None) -> None:
        with self._lock:
            found = self._runs.get(run)
            if found is not None:
                if ticket is not None:
                    done, mark = found[2], _mark(ticket)
                    if _held_at(done, mark) >= 0:
                        return  # given back already: this is the same give-back, sent again
                    done += mark
                    if len(done) > 8 * KEPT_TICKETS:
                        del done[:8]
                counts = found[0]
                for name in (scope, "*"):
                    if counts.get(name, 0) > 0:
                        counts[name] -= 1

    def used(self, run: str, scope: str, *, now: float) -> int:
        now = moment(now)
        with self._lock:
            counts = self._live(run, now)
            return 0 if counts is None else counts.get(scope, 0)

    def forget(self, run: str | None) -> None:
        with self._lock:
            if run is None:
                self._runs.clear()
            else:
                self._runs.pop(run, None)

    def __len__(self) -> int:
        return len(self._runs)
