"""The conformance kit on a loaded machine: the rate-limit contracts and the import probe's budget.

A shared rate-limit backend's buckets expire in real time whatever ``now`` it is given (Redis: ``burst / rate``
seconds after the last call, and one more): at the rates the checks are written in, a stall of a second or two
between two calls refilled a bucket a check had emptied. The import probe's ``load_budget`` was wall time, which
I/O load stretched 30 times (httpx: 6 to 10 s for 0.2 s of CPU).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness_one import ToolRegistry, refresh_entry_points
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


# --------------------------------------------------------------------------- round 2: the clock checks keep real seconds


class StepBack(MemoryBuckets):
    """MemoryBuckets with a late-reading window of ``step_back`` seconds (the documented one is 1 s)."""

    def __init__(self, step_back: float) -> None:
        super().__init__()
        self.step_back = step_back


def backend_check(name: str, backend: Any) -> None:
    kit: Any = type("TestSubject", (RateLimitBackendContract,), {})()
    getattr(kit, name)(backend)


@pytest.mark.parametrize("window", [120.0, 3600.0])
def test_a_backend_that_stops_refills_after_a_minute_back_fails(window: float) -> None:
    """A clock stepped back a minute, taken as a late reading (a window of two minutes or an hour): refills stop until
    the clock catches up. Slowed 64 times, the minute was 3,840 s and these backends passed."""
    with pytest.raises(AssertionError) as failed:
        backend_check("test_a_clock_stepped_back_far_refills_from_there", StepBack(window))
    assert "32 s after the clock stepped back a minute (a token's time) the wait is 32.0 s, not 0" in str(failed.value)


def test_a_backend_whose_window_takes_two_seconds_back_as_late_fails() -> None:
    """The window is bounded from above: a clock stepped back 2 s (past the documented second) refills from there."""
    with pytest.raises(AssertionError) as failed:
        backend_check("test_a_clock_stepped_back_far_refills_from_there", StepBack(3.0))
    assert "32 s after the clock stepped back 2 s (a token's time) the wait is 2.0 s, not 0" in str(failed.value)


def test_a_backend_without_a_late_reading_window_fails() -> None:
    """A reading 1/128 s late taken as the clock stepping back (no window) pays the interval twice."""
    with pytest.raises(AssertionError) as failed:
        backend_check("test_late_readings_pay_no_interval_twice", StepBack(0.0))
    assert "readings 1/128 s late among on-time ones admitted 13 calls, not 9" in str(failed.value)


@pytest.mark.parametrize("window", [0.25, 1.0, 1.5])
@pytest.mark.parametrize(
    "check", ["test_late_readings_pay_no_interval_twice", "test_a_clock_stepped_back_far_refills_from_there"]
)
def test_windows_from_a_late_reading_to_two_seconds_pass(check: str, window: float) -> None:
    """A window of 0.25 s passed as the checks were written before they were slowed (slowed, the late reading was 0.5 s
    and it failed), and passes again; the documented 1 s too."""
    backend_check(check, StepBack(window))


# --------------------------------------------------------------------------- round 2: the import probe


def dist_info(site: Path, dist: str, module: str, source: str, tool: str) -> None:
    (site / f"{module}.py").write_text(source, encoding="utf-8")
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[harness_one.tools]\n{tool} = {module}:{tool}\n", encoding="utf-8")


def a_tool(name: str, before: str = "") -> str:
    return (
        f"{before}\nfrom harness_one import defineTool\n\n"
        f"@defineTool(registry=None)\ndef {name}(text: str) -> str:\n    '''Echo.'''\n    return text\n"
    )


@pytest.fixture
def probe_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Installed: kit-own, whose import runs 0.5 s of CPU in a child process it waits for; kit-slow, whose import
    waits 2.5 s and provides a tool named as kit-own's; kit-hung, whose import does not end."""
    child = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.5: pass"
    dist_info(
        tmp_path,
        "kit-own",
        "kit_own",
        a_tool("calc", f'import subprocess, sys\nsubprocess.run([sys.executable, "-c", "{child}"], check=True)'),
        "calc",
    )
    dist_info(tmp_path, "kit-slow", "kit_slow", a_tool("calc", "import time\ntime.sleep(2.5)"), "calc")
    dist_info(tmp_path, "kit-hung", "kit_hung", a_tool("hung", "import threading\nthreading.Event().wait()"), "hung")
    monkeypatch.syspath_prepend(str(tmp_path))
    refresh_entry_points()
    yield tmp_path
    monkeypatch.undo()
    refresh_entry_points()


def test_the_probe_counts_cpu_of_children_and_waits_for_slow_neighbours(probe_site: Path) -> None:
    """load_budget 0.3: the import's child's 0.5 s of CPU is counted (the probe's own process did almost none of it);
    kit-slow's import, 2.5 s, is within the scan's 1 + 10 x 0.3 = 4 s (it was given 1.6 s, and its conflict was lost);
    kit-hung is passed over and listed."""
    found = _tools._import_probe("kit-own", 0.3)
    assert found["cpu"] >= 0.5, found
    assert ["tool 'calc': kept kit-own, skipped kit-slow", "kit-own", "kit-slow"] in found["conflicts"] or [
        "tool 'calc': kept kit-slow, skipped kit-own",
        "kit-slow",
        "kit-own",
    ] in found["conflicts"], found["conflicts"]
    assert found["unchecked"] == ["kit-hung"]
    kit = type("TestSubject", (ToolPackageTests,), {"distribution": "kit-own", "load_budget": 0.3})()
    with pytest.raises(pytest.fail.Exception) as failed:
        kit.test_import_has_no_side_effects()
    assert "to import (load_budget = 0.3 s)" in str(failed.value) and "s of CPU (" in str(failed.value)


def test_a_neighbour_passed_over_is_named_in_a_warning() -> None:
    loaded = _tools._Loaded(ToolRegistry(autoload=False), unchecked=["kit-hung"])
    loaded.tools.append(loaded.registry.add(lambda text: text, name="echo"))
    kit = type("TestSubject", (ToolPackageTests,), {"distribution": "kit-own", "load_budget": 0.3})()
    with pytest.warns(pytest.PytestWarning) as warned:
        kit.test_entry_points_load(loaded)
    assert [str(w.message) for w in warned] == ["not checked for conflicts: kit-hung (its import did not end within 4 s)"]
