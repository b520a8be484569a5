"""The conformance kit bounds what it runs, and says why a check's calls failed: each test fails without the fix."""

from __future__ import annotations

import re
from typing import Any

import importlib_metadata  # noqa: F401 - imported here, not first inside an inner run (see below)
import pytest
from test_conformance import DOCS, _block, _fresh_entry_points, message, outcomes  # noqa: F401 - an autouse fixture

import harness_one
from harness_one import Call, hookimpl
from harness_one.testing import PluginTests

pytest_plugins = ["pytester"]

# importlib_metadata, once imported, takes the place of the standard library's metadata finder in sys.meta_path;
# imported first inside an in-process inner run, its finder would leave with the inner run's sys.meta_path, and the
# standard library's would stay switched off for the runs after it.

# ---------------------------------------------------------------------- a hook that never returns

STUCK = """
import threading

from harness_one import hookimpl
from harness_one.testing import PluginTests

RELEASE = threading.Event()  # set as the module's tests end: the stuck hooks give up then


def teardown_module():
    RELEASE.set()


class WaitsForNoOne:
    name = "waits_for_no_one"

    @hookimpl
    def harness_pre_call(self, call):
        RELEASE.wait(30)  # no one sets it while the check runs


class HoldsTheLock:
    name = "holds_the_lock"

    def __init__(self):
        self.lock = threading.Lock()

    @hookimpl
    def harness_pre_call(self, call):
        while not self.lock.acquire(timeout=0.05):  # released only in post_call: two calls at once wait for each other
            if RELEASE.is_set():
                return

    @hookimpl
    def harness_post_call(self, call):
        try:
            self.lock.release()
        except RuntimeError:  # a call let go at the module's end
            pass


class TestWaits(PluginTests):
    plugin_factory = WaitsForNoOne
    check_deadline = 2.0


class TestLock(PluginTests):
    plugin_factory = HoldsTheLock
    check_deadline = 2.0
"""


def test_a_hook_that_never_returns_fails_its_check_instead_of_hanging_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stuck=STUCK)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "TestWaits and registers or TestLock and async_calls")
    assert outcomes(inner) == {"TestWaits::test_registers_and_unregisters": "failed", "TestLock::test_async_calls": "failed"}
    waits = message(inner, "TestWaits::test_registers_and_unregisters")
    assert re.search(
        r"test_registers_and_unregisters did not end within check_deadline = 2 s: stuck in the plugin's "
        r"harness_pre_call \(test_stuck.py:\d+\), which never returned",
        waits,
    )
    assert "RELEASE.wait(30)" in waits  # the stuck thread's stack
    lock = message(inner, "TestLock::test_async_calls")
    assert "test_async_calls did not end within check_deadline = 2 s: stuck in the plugin's harness_pre_call" in lock
    assert "self.lock.acquire(timeout=0.05)" in lock
    assert "TestLock: tuned: check_deadline = 2.0 (the kit's: 30.0)" in inner.stdout.str()


# ---------------------------------------------------------------------- an example that never returns

HANGING_EXAMPLE = """
import threading

from harness_one import defineTool
from harness_one.testing import ToolPackageTests

RELEASE = threading.Event()


def teardown_module():
    RELEASE.set()


@defineTool(registry=None, read_only=True, examples=[{"arguments": {"job": "j1"}, "result": "done"}])
def wait_job(job: str) -> str:
    \"\"\"Wait for a job.\"\"\"
    RELEASE.wait(30)  # no one sets it while the check runs
    return "done"


class TestWaitJob(ToolPackageTests):
    tools = [wait_job]
    example_budget = 0.5
"""


def test_an_example_that_never_returns_fails_after_a_few_example_budgets(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hanging_example=HANGING_EXAMPLE)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_examples")
    assert outcomes(inner) == {"TestWaitJob::test_examples": "failed"}
    text = message(inner, "TestWaitJob::test_examples")
    assert re.search(
        r"tool 'wait_job', example 0: did not return within 1.5 s \(3 x example_budget = 0.5 s\): "
        r"stuck in the tool 'wait_job', wait_job \(test_hanging_example.py:\d+\)",
        text,
    )
    assert "RELEASE.wait(30)" in text
    assert "through acall" not in text  # given up on once, not run again


# ---------------------------------------------------------------------- state kept on the error path only


class KeepsFailedCalls:
    """Notes when each call started in pre_call and forgets it in post_call only: failed calls stay."""

    name = "keeps_failed_calls"

    def __init__(self) -> None:
        self.started: dict[str, float] = {}

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.started[call.call_id] = call.registry.clock.now()

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.started.pop(call.call_id, None)


class KeepsRefusedCalls:
    """Forgets each call on every path its own pre_call saw, and keeps those refused before it."""

    name = "keeps_refused_calls"

    def __init__(self) -> None:
        self.started: set[str] = set()
        self.unseen: list[str] = []

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.started.add(call.call_id)

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.started.discard(call.call_id)

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        if call.call_id in self.started:
            self.started.discard(call.call_id)
        else:
            self.unseen.append(call.call_id)


@pytest.mark.parametrize("plugin", [KeepsFailedCalls, KeepsRefusedCalls])
def test_state_kept_only_for_failed_or_refused_calls_fails_the_growth_check(plugin: type) -> None:
    kit: Any = type("TestSubject", (PluginTests,), {"plugin_factory": plugin, "growth_calls": 1600})()
    with pytest.raises(AssertionError, match=r"the state reachable from the plugin grew by \d+ objects over calls 801-1600"):
        kit.test_no_per_call_state()


# ---------------------------------------------------------------------- limits the checks' calls reach


def test_the_docs_quota_passes_with_the_generous_limits_the_docs_give_it(pytester: pytest.Pytester) -> None:
    writing = (DOCS / "writing-plugins.md").read_text()
    quota = _block(writing, "across many:", "python").split("\nquota = ToolRegistry(")[0]
    suite = _block(writing, "configures generous limits through `plugin_factory`", "python")
    pytester.makepyfile(
        doc_quota=quota,
        test_quota="from doc_quota import PerUserQuota\n" + suite + "\n\nclass TestSmallQuota(TestPerUserQuota):\n"
        "    plugin_factory = PerUserQuota  # 60 a minute\n",
    )
    pytester.syspathinsert()
    checks = ("has_a_name", "sixteen_threads", "no_per_call_state", "releases_after_failures_and_cancellations")
    small = (checks[0], *checks[2:])  # not the thread check: refused calls never meet at its probe, which waits 2 s
    chosen = f"TestPerUserQuota and ({' or '.join(checks)}) or TestSmallQuota and ({' or '.join(small)})"
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", chosen)
    assert outcomes(inner) == {f"TestPerUserQuota::test_{c}": "passed" for c in checks} | {
        f"TestSmallQuota::test_{c}": "passed" if c == "has_a_name" else "failed" for c in small
    }
    advice = "were refused by the plugin itself (RateLimitExceeded): a plugin with limits (a quota, a rate, a budget) is "
    advice += "checked with generous ones, passed through plugin_factory"
    growth = message(inner, "TestSmallQuota::test_no_per_call_state")
    assert re.search(r"\d+ of the first 3750 calls meant to succeed ended in an error: RateLimitExceeded: User anonymous", growth)
    assert advice in growth and "raise RateLimitExceeded" not in growth  # an assertion, not the quota's traceback
    assert advice in message(inner, "TestSmallQuota::test_releases_after_failures_and_cancellations")


# ---------------------------------------------------------------------- what failed to load, said plainly

BROKEN_LOADS = """
from harness_one.testing import PluginTests, ToolPackageTests


class Audit:
    name = "broken_ep"


class TestAudit(PluginTests):
    plugin_factory = Audit
    entry_point = "broken_ep"


class TestTools(ToolPackageTests):
    distribution = "conformance-unimportable"
"""


def test_a_plugin_or_tool_module_that_fails_to_import_is_reported_as_an_import_failure(pytester: pytest.Pytester) -> None:
    site = pytester.mkdir("site-unimportable")
    (site / "unimportable_tools.py").write_text("import conformance_module_not_installed\n")
    info = site / "conformance_unimportable-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: conformance-unimportable\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[harness_one.tools]\nunimportable = unimportable_tools\n\n"
        "[harness_one.plugins]\nbroken_ep = conformance_plugin_module_not_installed:Audit\n"
    )
    pytester.syspathinsert(site)
    harness_one.refresh_entry_points()
    pytester.makepyfile(test_broken_loads=BROKEN_LOADS)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_entry_point or test_import_has_no_side_effects")
    got = outcomes(inner)
    assert got["TestAudit::test_entry_point"] == got["TestTools::test_import_has_no_side_effects"] == "failed", got
    plugin = message(inner, "TestAudit::test_entry_point")
    assert plugin.startswith(
        "the entry point failed to load:\n  - broken_ep (conformance-unimportable): ModuleNotFoundError: No module named "
        "'conformance_plugin_module_not_installed'\nTraceback (most recent call last):\n"
    )
    assert "LoadFailure(" not in plugin and plugin.count("No module named") == 2  # the error, then the traceback's last line
    tools = message(inner, "TestTools::test_import_has_no_side_effects")
    assert tools.startswith("import failed:\n  - failed to load: harness_one.tools:unimportable from conformance-unimportable")
    assert "side effects" not in tools


# ---------------------------------------------------------------------- the deadline's edges


def test_an_infinite_deadline_waits_without_one() -> None:
    """``check_deadline = math.inf`` raised ``OverflowError`` (a thread's join refuses it)."""
    import math

    from harness_one.testing._suite import bounded

    assert bounded(math.inf, lambda: 5) == 5


def test_a_sleep_patched_while_a_check_watched_it_stays_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check left behind past its deadline puts its sleep watcher away later: it restored the standard
    ``time.sleep`` over one a test had patched meanwhile."""
    import time

    from harness_one.testing._audit import blocking_calls

    def mine(seconds: float) -> None:
        return None

    with blocking_calls():
        monkeypatch.setattr(time, "sleep", mine)
    assert time.sleep is mine
