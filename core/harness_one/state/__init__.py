"""Where shared policy state lives: token buckets, idempotency records, concurrency slots, circuits and budgets.

Plugins hold the policy; these backends hold the state, behind small protocols, so a backend
shared by several processes (SQLite on one host, Redis across hosts) is a drop-in. A registry's
``state`` (``ToolRegistry(state="redis://host:6379/0")``, ``[state] url`` or ``redis_url`` in
the CLI configuration, ``HARNESS_ONE_STATE`` or ``HARNESS_ONE_REDIS_URL``) tells plugins that
were not given a backend of their own which to use:

====================  ===============  ===================  ======================
url                   rate limits      idempotency records  concurrency, circuits
====================  ===============  ===================  ======================
``None``/``memory:``  in this process  in this process      in this process
``sqlite:///PATH``    in this process  SQLite file at PATH  in this process
``redis://...``       Redis            Redis                Redis
====================  ===============  ===================  ======================

The Redis backends (:class:`RedisBuckets`, :class:`RedisStore`, :class:`RedisSlots`,
:class:`RedisCircuits`, :class:`RedisBudgets`, over a :class:`RedisLink`) need the ``harness-one[redis]`` extra and
are imported on first use. They raise :class:`StateUnavailable` when Redis does not answer;
see ``docs/scaling.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._clock import WallClock
from ._leases import FAIL_MODES, Accepts, AsyncTwins, FailMode, LeaseKeeper, new_token, round_trip
from ._memory import Breaker, MemoryBuckets, MemoryBudgets, MemoryCircuits, MemorySlots, MemoryStore, copied
from ._protocols import (
    AsyncBudgetStore,
    AsyncCircuitStore,
    AsyncConcurrencySlots,
    AsyncIdempotencyStore,
    AsyncRateLimitBackend,
    BudgetStore,
    CircuitStore,
    ConcurrencySlots,
    IdempotencyStore,
    RateLimitBackend,
    Record,
    StateUnavailable,
    key_text,
)
from ._select import REDIS_SCHEMES, State, open_state, redis_keys

if TYPE_CHECKING:
    from ._redis import RedisBuckets, RedisBudgets, RedisCircuits, RedisLink, RedisSlots, RedisStore
    from ._sqlite import SQLiteStore

__all__ = [
    "Accepts",
    "AsyncTwins",
    "AsyncBudgetStore",
    "AsyncCircuitStore",
    "AsyncConcurrencySlots",
    "AsyncIdempotencyStore",
    "AsyncRateLimitBackend",
    "Breaker",
    "BudgetStore",
    "CircuitStore",
    "ConcurrencySlots",
    "FAIL_MODES",
    "FailMode",
    "IdempotencyStore",
    "LeaseKeeper",
    "MemoryBudgets",
    "MemoryBuckets",
    "MemoryCircuits",
    "MemorySlots",
    "MemoryStore",
    "REDIS_SCHEMES",
    "RateLimitBackend",
    "Record",
    "RedisBudgets",
    "RedisBuckets",
    "RedisCircuits",
    "RedisLink",
    "RedisSlots",
    "RedisStore",
    "SQLiteStore",
    "State",
    "StateUnavailable",
    "WallClock",
    "copied",
    "key_text",
    "new_token",
    "open_state",
    "redis_keys",
    "round_trip",
]

_REDIS = {"RedisBudgets", "RedisBuckets", "RedisCircuits", "RedisLink", "RedisSlots", "RedisStore"}


def __getattr__(name: str) -> Any:
    if name == "SQLiteStore":  # sqlite3 (and asyncio, for its async twins) imported when a SQLite store is asked for
        from ._sqlite import SQLiteStore

        return SQLiteStore
    if name in _REDIS:  # the redis package is imported only when a Redis backend is asked for
        from . import _redis

        return getattr(_redis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
