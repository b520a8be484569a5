"""The rate limit under review: late clock readings, per-caller keys, tiny rates in Redis."""

from __future__ import annotations

import enum
import sys
import threading
import time
import uuid
from typing import Any

import pytest

from harness_one import ManualClock, RateLimitExceeded, ToolError, ToolRegistry
from harness_one.state import MemoryBuckets
from harness_one_plugins.ratelimit import RateLimitKeyInvalid


def test_a_late_reading_does_not_refill_the_interval_again() -> None:
    """A thread read 9, then another took the token at 10: its 9 made the bucket refill 9..10 again
    for the next call (two calls at 10 at a rate of 1 a second, burst 1)."""
    buckets = MemoryBuckets()
    waits = [buckets.acquire("f", 1.0, 1.0, 1.0, now) for now in (0.0, 10.0, 10.0, 9.0, 10.0, 9.5, 10.0)]
    assert waits == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert buckets.acquire("f", 1.0, 1.0, 1.0, 11.0) == 0.0  # refills go on from 10


def test_a_step_back_of_more_than_step_back_refills_from_there() -> None:
    buckets = MemoryBuckets()
    assert buckets.acquire("f", 1.0, 1.0, 1.0, 10.0) == 0.0
    assert buckets.acquire("f", 1.0, 1.0, 1.0, 10.0 - MemoryBuckets.step_back - 0.5) == 1.0
    assert buckets.acquire("f", 1.0, 1.0, 1.0, 9.5) == 0.0  # a second after the step, not after 10


@pytest.mark.parametrize("keyed", [False, True])
def test_threads_reading_a_moving_clock_stay_within_the_limit(keyed: bool) -> None:
    """16 threads call while another moves a ManualClock on: a thread that read the clock, then lost
    the processor to one that took a token later, came back with an earlier time, which refilled that
    interval again (11 times the limit). Admitted calls stay within ``burst + rate * elapsed``."""
    clock = ManualClock(0.0)
    reg = ToolRegistry(clock=clock, autoload=False)
    limit: dict[str, Any] = {"rate": 3.0, "burst": 5.0, **({"key": "user"} if keyed else {})}
    reg.add(lambda: 1, name="f", rate_limit=limit)
    admitted, lock, stop = [0], threading.Lock(), threading.Event()

    def worker() -> None:
        while not stop.is_set():
            ok = reg.try_call("f", context={"user": "ann"}).ok
            with lock:
                admitted[0] += ok

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=worker) for _ in range(16)]
    try:
        for thread in threads:
            thread.start()
        for _ in range(600):
            clock.advance(0.25)
            time.sleep(0)  # let the workers run between steps
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(interval)
    assert 5 < admitted[0] <= 5 + 3.0 * clock.now()


class User:
    """A session object: its text (repr) is its address."""

    def __init__(self, name: str) -> None:
        self.name = name


class Tier(str, enum.Enum):
    GOLD = "gold"


def test_a_per_caller_key_takes_only_values_whose_text_names_them(clock: ManualClock) -> None:
    """A new User object per request was a new, full bucket each time (100 of 100 admitted at a rate
    of 1, burst 1); a later user's object at a freed address got an earlier one's bucket."""
    reg = ToolRegistry(clock=clock, autoload=False)
    runs: list[int] = []
    reg.add(lambda: runs.append(1), name="f", rate_limit={"rate": 1, "burst": 1, "key": "user"})
    for value in (User("ann"), 1.5, True, ("ann",), b"ann"):
        result = reg.try_call("f", context={"user": value})
        assert isinstance(result.error, RateLimitKeyInvalid), value
        assert result.error.field == "user" and result.error.kind == "rate_limit_key_invalid"
        assert f"holds a {type(value).__name__}" in str(result.error)
    assert runs == []
    for value in ("ann", 7, Tier.GOLD, uuid.UUID(int=5)):
        assert reg.try_call("f", context={"user": value}).ok, value  # the refusals took no token
        assert isinstance(reg.try_call("f", context={"user": value}).error, RateLimitExceeded)
    data = ToolError.from_dict(RateLimitKeyInvalid("user", "User", tool="f").to_dict())
    assert isinstance(data, RateLimitKeyInvalid) and data.field == "user"


def test_a_key_functions_value_is_checked_too(clock: ManualClock) -> None:
    reg = ToolRegistry(clock=clock, autoload=False)
    reg.add(lambda: 1, name="f", rate_limit={"rate": 1, "burst": 1, "key": lambda call: User("ann")})
    error = reg.try_call("f").error
    assert isinstance(error, RateLimitKeyInvalid) and error.field is None
    assert "key function, which returned a User" in str(error)


@pytest.mark.parametrize("rate", [1e-14, 1e-306])
def test_a_redis_bucket_of_a_tiny_rate_expires_at_most_in_10_to_the_15_ms(redis_url: str, rate: float) -> None:
    """``burst / rate`` of 1e14 s made PEXPIRE's argument "1e+17": every call failed, and the bucket
    was left without a TTL."""
    import redis

    from harness_one.state import RedisBuckets, RedisLink

    buckets = RedisBuckets(RedisLink(redis_url))
    assert buckets.acquire("f", rate=rate, burst=1.0, cost=1.0, now=0.0) == 0.0
    assert buckets.acquire("f", rate=rate, burst=1.0, cost=1.0, now=0.0) == pytest.approx(1 / rate)
    client = redis.Redis.from_url(redis_url)
    try:
        assert 10**15 - 60_000 < client.pttl(buckets._key("f")) <= 10**15
    finally:
        client.close()
    reg = ToolRegistry(state=redis_url, autoload=False)
    reg.add(lambda: 1, name="g", rate_limit={"rate": rate, "burst": 1})
    assert reg.call("g") == 1
    refused = reg.try_call("g").error
    assert isinstance(refused, RateLimitExceeded) and refused.retry_after == 1e12
