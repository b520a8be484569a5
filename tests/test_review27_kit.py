"""The conformance kit on a loaded machine: the rate-limit contracts and the import probe's budget.

A shared rate-limit backend's buckets expire in real time whatever ``now`` it is given (Redis: ``burst / rate``
seconds after the last call, and one more): at the rates the checks are written in, a stall of a second or two
between two calls refilled a bucket a check had emptied. The import probe's ``load_budget`` was wall time, which
I/O load stretched 30 times (httpx: 6 to 10 s for 0.2 s of CPU).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

import pytest

from harness_one.state import MemoryBuckets
from harness_one.testing import RateLimitBackendContract, RateLimitPluginContract, ToolPackageTests, _tools
from harness_one_plugins import RateLimitPlugin

#: Real seconds that pass between two calls of a loaded machine, as the backend below counts them: longer than the
#: real-time life of every bucket the checks use at the rates they are written in (1.25 s to 3 s).
STALL = 3.5


class ExpiringBuckets:
    """A shared backend as Redis is one (``acquire`` only, a round trip the plugin makes through ``now``) whose
    buckets expire in real time, ``burst / rate + 1`` s after their last call, on a real clock of its own that moves
    ``STALL`` s before each call (a machine stalling between every two calls)."""

    def __init__(self) -> None:
        self.real = 0.0
        self.expires: dict[Hashable, float] = {}
        self.buckets = MemoryBuckets()
        self.lock = threading.Lock()
        self.expired = 0

    def acquire(self, key: Hashable, rate: float, burst: float, cost: float, now: float) -> float:
        with self.lock:
            self.real += STALL
            if self.expires.get(key, float("inf")) <= self.real:
                self.buckets = MemoryBuckets()  # the key is gone (the other keys too, as a flush would: none is used)
                self.expired += 1
            wait = self.buckets.acquire(key, rate, burst, cost, now)
            self.expires[key] = self.real + burst / rate + 1
            return wait


class TestExpiringBuckets(RateLimitBackendContract):
    """Every backend check holds through a stall of ``STALL`` s between every two calls: no bucket expires."""

    @pytest.fixture
    def backend(self) -> Any:
        return ExpiringBuckets()


class TestExpiringBucketsInThePlugin(RateLimitPluginContract):
    """Every plugin check too."""

    @pytest.fixture
    def make_plugin(self) -> Any:
        return lambda **options: RateLimitPlugin(backend=ExpiringBuckets(), **options)


def test_the_stalling_backend_expires_a_bucket_at_the_rates_as_written() -> None:
    """The backend above is the failure the slowed checks avoid: at a check's rate as written (2/s, a bucket of 1)
    the stall lets the bucket expire, and the refused call is admitted."""
    backend = ExpiringBuckets()
    assert backend.acquire("k", rate=2, burst=1, cost=1, now=100.0) == 0.0
    assert backend.acquire("k", rate=2, burst=1, cost=1, now=100.0) == 0.0  # was 0.5 s: a new, full bucket
    assert backend.expired == 1


# --------------------------------------------------------------------------- the import probe's budget


def probed(monkeypatch: pytest.MonkeyPatch, seconds: float, cpu: float) -> None:
    """The import probe's answer for a clean import that took ``seconds`` in all, ``cpu`` of them CPU."""
    found = {
        "seconds": seconds,
        "cpu": cpu,
        "network": [],
        "threads": [],
        "default_registry": [],
        "failures": [],
        "printed": {"stdout": "", "stderr": ""},
        "processes": [],
    }
    monkeypatch.setattr(_tools, "_import_probe", lambda dist, budget: found)


def import_check(budget: float) -> None:
    kit = type("TestSubject", (ToolPackageTests,), {"distribution": "some-tools", "load_budget": budget})()
    kit.test_import_has_no_side_effects()


def test_an_import_slowed_by_load_is_within_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx on a machine loaded with I/O: 9.6 s in all, 0.17 s of CPU; the budget is the CPU's (the wall-time
    budget failed it)."""
    probed(monkeypatch, seconds=9.6, cpu=0.17)
    import_check(2.0)


def test_work_at_import_fails_on_its_cpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    probed(monkeypatch, seconds=2.6, cpu=2.5)
    with pytest.raises(pytest.fail.Exception) as failed:
        import_check(2.0)
    assert "took 2.50 s of CPU (2.60 s in all) to import (load_budget = 2.0 s)" in str(failed.value)


def test_waiting_at_import_fails_past_ten_times_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """An import that sleeps or waits uses no CPU: past ten times ``load_budget`` in all it fails."""
    probed(monkeypatch, seconds=21.0, cpu=0.1)
    with pytest.raises(pytest.fail.Exception) as failed:
        import_check(2.0)
    assert "took 21.00 s (0.10 s of CPU) to import (load_budget = 2.0 s of CPU, 20 s in all)" in str(failed.value)


def test_the_probe_reports_the_import_cpu_time() -> None:
    """The real probe, on an installed package: its CPU time is measured, and within the import's time in all
    (the import runs in one thread; the probe's main thread only waits for it)."""
    _tools._PROBED.clear()
    found = _tools._import_probe("harness-one-calculate", 2.0)
    assert isinstance(found["cpu"], float) and 0.0 <= found["cpu"] <= found["seconds"] + 0.05, found
