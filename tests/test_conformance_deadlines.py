"""The conformance kit bounds what it runs, and says why a check's calls failed: each test fails without the fix."""

from __future__ import annotations

import re
from typing import Any

import pytest
from test_conformance import DOCS, _block, _fresh_entry_points, message, outcomes  # noqa: F401 - an autouse fixture

import harness_one
from harness_one import Call, hookimpl
from harness_one.testing import PluginTests

pytest_plugins = ["pytester"]

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


# ---------------------------------------------------------------------- a call stuck in acall's worker thread

STUCK_IN_A_WORKER = """
import asyncio
import threading

from harness_one import Await, defineTool, hookimpl
from harness_one.testing import PluginTests, ToolPackageTests

TOOL_LOCK = threading.Lock()


@defineTool(registry=None, read_only=True, examples=[{"arguments": {"job": "j1"}, "result": "done"}])
def take_job(job: str) -> str:
    \"\"\"Take a job.\"\"\"
    TOOL_LOCK.acquire()  # never released: the second call, through acall in a worker thread, waits for ever
    return "done"


class TestTakeJob(ToolPackageTests):
    tools = [take_job]
    example_budget = 0.5


class WaitsInAWorker:
    name = "waits_in_a_worker"

    def __init__(self):
        self.never = threading.Event()

    @hookimpl
    def harness_pre_call(self, call):
        return Await(lambda: None, lambda: asyncio.to_thread(self.never.wait))  # acall's twin waits for ever


class TestWaitsInAWorker(PluginTests):
    plugin_factory = WaitsInAWorker
    check_deadline = 2.0
"""


def test_a_call_stuck_in_an_acall_worker_thread_does_not_keep_the_run_alive(pytester: pytest.Pytester) -> None:
    """Stuck in the event loop's default executor (``asyncio.to_thread``), a call kept the process alive after the
    report: interpreter exit joins a ``ThreadPoolExecutor``'s workers (the run ran into the 60 s timeout)."""
    pytester.makepyfile(test_stuck_worker=STUCK_IN_A_WORKER)
    inner = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "test_examples or test_async_calls", timeout=60)
    inner.assert_outcomes(failed=2)
    inner.stdout.fnmatch_lines(
        [
            "*tool 'take_job', example 0: through acall: did not return within 1.5 s*stuck in the tool 'take_job'*",
            "*test_async_calls did not end within check_deadline = 2 s*",
        ]
    )


# ---------------------------------------------------------------------- one stuck check, not one per check

SHARED_LOCK = """
import threading

from harness_one import hookimpl
from harness_one.testing import PluginTests

LOCK = threading.Lock()  # one for every instance of the plugin
RELEASE = threading.Event()  # set as the module's tests end: the stuck hook gives up then


def teardown_module():
    RELEASE.set()


class Serial:
    name = "serial"

    @hookimpl
    def harness_pre_call(self, call):
        with LOCK:
            RELEASE.wait(30)  # the first call holds the lock and waits for no one


class TestSerial(PluginTests):
    plugin_factory = Serial
    check_deadline = 2.0
"""


def test_the_checks_after_a_stuck_one_fail_at_once_naming_it(pytester: pytest.Pytester) -> None:
    """A check stuck holding what every instance shares (a module's lock) made each later check wait out its own
    deadline, failing as stuck too: one stuck hook made a failure per check, each ``check_deadline`` long."""
    pytester.makepyfile(test_shared=SHARED_LOCK)
    chosen = "test_registers_and_unregisters or test_arguments_stay_the_callers or test_sixteen_threads"
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", chosen)
    later = ("test_arguments_stay_the_callers", "test_sixteen_threads")
    assert outcomes(inner) == {f"TestSerial::{c}": "failed" for c in ("test_registers_and_unregisters", *later)}
    first = message(inner, "TestSerial::test_registers_and_unregisters")
    assert "test_registers_and_unregisters did not end within check_deadline = 2 s: stuck in the plugin's" in first
    for check in later:
        text = message(inner, f"TestSerial::{check}")
        assert re.fullmatch(
            r"not run: test_registers_and_unregisters, before it, is still stuck in the plugin's harness_pre_call "
            r"\(test_shared.py:\d+\), and this check would wait on what that hook holds \(a lock, a slot, a connection\) "
            r"until its own deadline: make that hook return \(see the failure of test_registers_and_unregisters\), "
            r"and every check runs again",
            text,
        ), text


# ---------------------------------------------------------------------- a cap on calls in flight

CAPPED = """
import threading

from harness_one import ToolError, hookimpl
from harness_one.testing import PluginTests


class TooBusy(ToolError):
    \"\"\"More calls in flight than the cap.\"\"\"


class Capped:
    name = "capped"

    def __init__(self, max_in_flight=12):
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self.lock = threading.Lock()

    @hookimpl
    def harness_pre_call(self, call):
        with self.lock:
            if self.in_flight >= self.max_in_flight:
                raise TooBusy(f"{self.in_flight} calls in flight, the cap is {self.max_in_flight}")
            self.in_flight += 1

    @hookimpl
    def harness_post_call(self, call):
        with self.lock:
            self.in_flight -= 1

    @hookimpl
    def harness_on_error(self, call, error):
        if not isinstance(error, TooBusy):
            with self.lock:
                self.in_flight -= 1


class TestCapped(PluginTests):
    plugin_factory = Capped  # 12 calls in flight: fewer than the checks make at once


class TestGenerous(PluginTests):
    plugin_factory = lambda: Capped(max_in_flight=64)  # noqa: E731
"""


def test_a_cap_on_calls_in_flight_is_told_to_let_the_concurrent_checks_through(pytester: pytest.Pytester) -> None:
    """A plugin that refused some (not most) of the thread check's calls got no advice, and under ``acall`` its
    refusal escaped as a bare traceback."""
    pytester.makepyfile(test_capped=CAPPED)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_sixteen_threads or test_async_calls")
    assert outcomes(inner) == {
        "TestCapped::test_sixteen_threads": "failed",
        "TestCapped::test_async_calls": "failed",
        "TestGenerous::test_sixteen_threads": "passed",
        "TestGenerous::test_async_calls": "passed",
    }
    threads = message(inner, "TestCapped::test_sixteen_threads")
    assert re.search(
        r"under 16 threads, \d+ of 1600 calls failed and 0 got another answer than the plugin alone gives one call at a time \(another call's\?\): TooBusy: 12 calls",
        threads,
    )
    assert re.search(
        r"\d+ of the 1600 calls were refused by the plugin itself \(TooBusy\): a plugin with limits .*; this check makes 16 "
        r"calls at once, so a cap on calls in flight must let 16 through \(plugin_factory = lambda: MyPlugin\(max_in_flight=64\)\)",
        threads,
    )
    acalls = message(inner, "TestCapped::test_async_calls")
    assert re.search(r"\d+ of 40 acalls made at once failed: TooBusy: 12 calls in flight, the cap is 12", acalls)
    assert "this check makes 40 calls at once, so a cap on calls in flight must let 40 through" in acalls


# ---------------------------------------------------------------------- an author's own pytester tests of a suite

AUTHORS_TESTS = r"""
import pytest

pytest_plugins = ["pytester"]

TOOL = '''
from harness_one import defineTool


@defineTool(registry=None, read_only=True, examples=[{"arguments": {"text": "a b"}, "result": 2}])
def NAME(text: str) -> int:
    "Count the words."
    return len(text.split())
'''


@pytest.mark.parametrize("dist, tool", [("wc-one", "count_one"), ("wc-two", "count_two")])
def test_my_suite(pytester, dist, tool):
    site = pytester.mkdir("site")
    (site / f"{tool}_tools.py").write_text(TOOL.replace("NAME", tool))
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[harness_one.tools]\n{tool} = {tool}_tools\n")
    pytester.syspathinsert(site)
    pytester.makepyfile(
        test_inner=f"from harness_one.testing import ToolPackageTests\n\n\n"
        f"class TestWords(ToolPackageTests):\n    distribution = {dist!r}\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "entry_points_load or examples")
    result.assert_outcomes(passed=2)
"""


def test_an_authors_pytester_tests_of_a_tool_package_see_each_installed_distribution(pytester: pytest.Pytester) -> None:
    """In a fresh interpreter, an author's two in-process inner runs, each with a distribution of its own on sys.path:
    the second failed. ``importlib_metadata``, first imported inside the first inner run, switched the standard
    library's metadata finder off and left with that run's ``sys.meta_path`` (the second run: ``PackageNotFoundError``
    for pluggy); and the entry points cached in the first run hid the second run's distribution."""
    pytester.makepyfile(test_authors=AUTHORS_TESTS)
    outer = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    outer.assert_outcomes(passed=2)


# ---------------------------------------------------------------------- a store or a tool package that never returns

STUCK_STORE = """
import threading

import pytest

from harness_one.state import MemoryBudgets
from harness_one.testing import BudgetStoreContract

RELEASE = threading.Event()  # set as the module's tests end: the stuck method gives up then


def teardown_module():
    RELEASE.set()


class WaitsForALock(MemoryBudgets):
    \"\"\"Its give_back waits for a lock no one releases (a Redis lock another worker holds).\"\"\"

    def give_back(self, run, scope, *, ticket=None):
        RELEASE.wait(30)
        super().give_back(run, scope, ticket=ticket)


class TestWaitsForALock(BudgetStoreContract):
    check_deadline = 2.0

    @pytest.fixture
    def store(self):
        return WaitsForALock()
"""


def test_a_store_method_that_never_returns_fails_its_contract_check_naming_it(pytester: pytest.Pytester) -> None:
    """A store contract's check had no deadline: a store method that never returned hung the whole run. It fails
    after ``check_deadline``, naming the store's method, and the suite's later checks fail at once."""
    pytester.makepyfile(test_stuck_store=STUCK_STORE)
    chosen = "test_counts_up_to_the_limit_per_scope_and_run or test_give_back_returns_one_unit or test_forget_one_run"
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", chosen)
    stuck, later = "test_give_back_returns_one_unit_never_below_zero", "test_forget_one_run_or_all"
    assert outcomes(inner) == {
        "TestWaitsForALock::test_counts_up_to_the_limit_per_scope_and_run": "passed",
        f"TestWaitsForALock::{stuck}": "failed",
        f"TestWaitsForALock::{later}": "failed",
    }
    first = message(inner, f"TestWaitsForALock::{stuck}")
    assert re.search(
        rf"{stuck} did not end within check_deadline = 2 s: stuck in the store's WaitsForALock.give_back "
        r"\(test_stuck_store.py:\d+\), which never returned \(a method that waits for what only another call gives",
        first,
    ), first
    assert "RELEASE.wait(30)" in first  # the stuck thread's stack
    assert re.fullmatch(
        rf"not run: {stuck}, before it, is still stuck in the store's WaitsForALock.give_back \(test_stuck_store.py:\d+\), "
        r"and this check would wait on what that method holds \(a lock, a slot, a connection\) until its own deadline: "
        rf"make that method return \(see the failure of {stuck}\), and every check runs again",
        message(inner, f"TestWaitsForALock::{later}"),
    )
    assert "TestWaitsForALock: tuned: check_deadline = 2.0 (the kit's: 30.0)" in inner.stdout.str()


def test_a_redis_store_whose_reply_never_comes_fails_naming_its_method(proxy: Any) -> None:
    """The standard Redis store, its reply held (a server that does not answer, a link with a long timeout): the
    check fails after ``check_deadline``, naming the store's method (harness-one's own code), called positionally."""
    from harness_one.state import RedisBudgets, RedisLink
    from harness_one.state._redis import _BUDGET_TAKE
    from harness_one.testing import BudgetStoreContract

    class TestHeld(BudgetStoreContract):
        check_deadline = 1.0

    store = RedisBudgets(RedisLink(proxy.url + "?timeout=30&prefix=held:"), server_time=False)
    proxy.hold(_BUDGET_TAKE)
    with pytest.raises(pytest.fail.Exception) as failed:
        TestHeld().test_zero_limit_refuses_at_once(store)
    assert re.match(
        r"test_zero_limit_refuses_at_once did not end within check_deadline = 1 s: stuck in the store's "
        r"RedisBudgets.take \(_redis.py:\d+\), which never returned",
        str(failed.value),
    ), str(failed.value)


STUCK_TOOL_PACKAGE = """
import threading

from harness_one import ToolRegistry, defineTool, hookimpl
from harness_one.testing import ToolPackageTests

RELEASE = threading.Event()


def teardown_module():
    RELEASE.set()


@defineTool(registry=None, read_only=True)
def count(n: int) -> int:
    \"\"\"Return n.\"\"\"
    return n


class AsksAServer:
    \"\"\"Checks each call with a server that never answers, without a timeout.\"\"\"

    name = "asks_a_server"

    @hookimpl
    def harness_pre_validate(self, call):
        RELEASE.wait(30)


class TestCount(ToolPackageTests):
    tools = [count]
    check_deadline = 2.0

    def make_registry(self):
        return ToolRegistry(plugins={"asks_a_server": AsksAServer()}, autoload=False)
"""


def test_a_tool_package_check_that_never_returns_fails_naming_where(pytester: pytest.Pytester) -> None:
    """A tool package's check that calls the registry without a bound (its argument errors) hung the run when a
    call never returned; it fails after ``check_deadline``, and the suite's later checks fail at once."""
    pytester.makepyfile(test_stuck_tools=STUCK_TOOL_PACKAGE)
    stuck, later = "test_argument_errors_name_the_field", "test_export_every_format"
    inner = pytester.runpytest("-p", "no:cacheprovider", *(f"test_stuck_tools.py::TestCount::{c}" for c in (stuck, later)))
    assert outcomes(inner) == {f"TestCount::{stuck}": "failed", f"TestCount::{later}": "failed"}
    first = message(inner, f"TestCount::{stuck}")
    assert re.search(
        rf"{stuck} did not end within check_deadline = 2 s: stuck in harness_pre_validate \(test_stuck_tools.py:\d+\), "
        r"which never returned \(a tool or plugin that waits",
        first,
    ), first
    assert "RELEASE.wait(30)" in first
    assert message(inner, f"TestCount::{later}").startswith(
        f"not run: {stuck}, before it, is still stuck in harness_pre_validate"
    )
