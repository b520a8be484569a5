"""Where shared policy state lives: token buckets and idempotency records, in memory or on disk.

Plugins hold the policy; these backends hold the state, behind small protocols, so a backend
shared by several processes (SQLite on one host, Redis across hosts) is a drop-in. A registry's
``state`` (``ToolRegistry(state="sqlite:///path")``, ``[state] url`` in the CLI configuration,
``HARNESS_ONE_STATE``) tells plugins that were not given a backend of their own which to use:

====================  ==========================================  ===================
url                   rate limits                                 idempotency records
====================  ==========================================  ===================
``None``/``memory:``  in this process                             in this process
``sqlite:///PATH``    in this process                             SQLite file at PATH
====================  ==========================================  ===================
"""

from __future__ import annotations

from ._memory import MemoryBuckets, MemoryStore
from ._protocols import IdempotencyStore, RateLimitBackend, Record
from ._select import State, open_state
from ._sqlite import SQLiteStore, WallClock

__all__ = [
    "IdempotencyStore",
    "MemoryBuckets",
    "MemoryStore",
    "RateLimitBackend",
    "Record",
    "SQLiteStore",
    "State",
    "WallClock",
    "open_state",
]
