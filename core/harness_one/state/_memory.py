"""In-process backends: token buckets and idempotency records in dicts, thread-safe."""

from __future__ import annotations

import threading
from collections.abc import Hashable

from ._protocols import Record

__all__ = ["MemoryBuckets", "MemoryStore"]


class MemoryBuckets:
    """Token buckets in a dict. Idle buckets (full again) are evicted.

    A bucket untouched for ``burst / rate`` seconds is full, which is what a missing bucket
    means, so dropping it changes nothing; a sweep every ``sweep_every`` new buckets does
    that, and ``max_keys`` caps memory even under a flood of distinct keys.
    """

    def __init__(self, *, max_keys: int = 100_000, sweep_every: int = 4096) -> None:
        self._buckets: dict[Hashable, list[float]] = {}
        self._lock = threading.Lock()
        self._max_keys = max_keys
        self._sweep_every = sweep_every
        self._ops = 0

    def acquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float:
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                self._ops += 1
                if self._ops >= self._sweep_every or len(self._buckets) >= self._max_keys:
                    self._sweep(now)
                bucket = self._buckets[key] = [burst, now, burst / rate]
            else:
                elapsed = now - bucket[1]
                if elapsed > 0:
                    tokens = bucket[0] + elapsed * rate
                    bucket[0] = burst if tokens > burst else tokens
                    bucket[1] = now
            if bucket[0] >= cost:
                bucket[0] -= cost
                return 0.0
            return (cost - bucket[0]) / rate

    def _sweep(self, now: float) -> None:
        self._ops = 0
        idle = [k for k, (_, last, full_after) in self._buckets.items() if now - last >= full_after]
        for key in idle:
            del self._buckets[key]
        while len(self._buckets) >= self._max_keys:  # still full of busy keys: drop the oldest
            del self._buckets[next(iter(self._buckets))]

    def __len__(self) -> int:
        return len(self._buckets)


class MemoryStore:
    """Idempotency records in a dict, for one process. Values are kept as they are (not copied)."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], Record] = {}
        self._lock = threading.Lock()
        self._ops = 0

    def begin(self, scope: str, key: str, fingerprint: str, now: float, lease: float) -> Record | None:
        with self._lock:
            self._ops += 1
            if self._ops % 1024 == 0:
                for k in [k for k, r in self._records.items() if r.expires <= now]:
                    del self._records[k]
            found = self._records.get((scope, key))
            if found is not None and found.expires > now:
                return found
            self._records[(scope, key)] = Record(fingerprint, "running", now + lease)
            return None

    def renew(self, scope: str, key: str, now: float, lease: float) -> bool:
        with self._lock:
            found = self._records.get((scope, key))
            if found is None or found.state != "running" or found.expires <= now:
                return False
            found.expires = now + lease
            return True

    def finish(self, scope: str, key: str, record: Record) -> None:
        with self._lock:
            self._records[(scope, key)] = record

    def release(self, scope: str, key: str) -> None:
        with self._lock:
            self._records.pop((scope, key), None)

    def __len__(self) -> int:
        return len(self._records)
