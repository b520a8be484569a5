"""More ways past the conformance kit a review found: each test fails without the kit's fix for it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_conformance import _fresh_entry_points, install, message, outcomes  # noqa: F401 - an autouse fixture

from harness_one import Call, Outcome, ToolError, ToolRegistry, defineTool, hookimpl
from harness_one._errors import ApprovalUnavailable, CircuitOpen, RateLimitExceeded
from harness_one.testing import PluginTests, ToolPackageTests
from harness_one.testing._suite import BoundedClock
from harness_one.testing._tools import _signature_problems

pytest_plugins = ["pytester"]


def suite(kit: type, **attributes: Any) -> Any:
    """An instance of a subclass of ``kit`` with ``attributes`` (a suite as an author writes one)."""
    return type("TestSubject", (kit,), attributes)()


# ---------------------------------------------------------------------- a mark put on the kit's own function

LEAK = """
import pytest
from harness_one import defineTool
from harness_one.testing import ToolPackageTests


@defineTool(registry=None, examples=[{"arguments": {"x": 2}, "result": 5}])
def a_tool(x: int) -> int:
    \"\"\"A's tool (its example is knowingly wrong).\"\"\"
    return 2 * x


@defineTool(registry=None, examples=[{"arguments": {"x": 2}, "result": 99}])
def b_tool(x: int) -> int:
    \"\"\"B's tool: its example is wrong, and nobody said so.\"\"\"
    return 2 * x


class TestA(ToolPackageTests):
    tools = [a_tool]
    test_examples = pytest.mark.MARK(reason="known")(ToolPackageTests.test_examples)


class TestB(ToolPackageTests):
    tools = [b_tool]
"""


@pytest.mark.parametrize("mark", ["xfail", "skip"])
def test_a_mark_on_the_kit_s_own_function_switches_no_other_suite(pytester: pytest.Pytester, mark: str) -> None:
    pytester.makepyfile(test_leak=LEAK.replace("MARK", mark))
    inner = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "examples or DO_NOT", timeout=120)
    got = inner.parseoutcomes()
    text = inner.stdout.str()
    assert "FAILED test_leak.py::TestB::test_examples" in text, text
    assert "FAILED test_leak.py::TestA::test_no_overrides_DO_NOT_OVERRIDE" in text
    assert f"test_examples is the kit's own function with @pytest.mark.{mark} put on it" in text
    assert "FAILED test_leak.py::TestB::test_no_overrides_DO_NOT_OVERRIDE" not in text
    assert "xfailed" not in got and "skipped" not in got


def test_an_override_skipped_instead_of_marked_as_a_known_failure_is_refused() -> None:
    def test_examples(self: Any, loaded: Any) -> None:
        return None

    with pytest.raises(AssertionError, match=r"test_examples is overridden with @pytest.mark.skip, which hides"):
        suite(
            ToolPackageTests, tools=[], test_examples=pytest.mark.skip(reason="slow")(test_examples)
        ).test_no_overrides_DO_NOT_OVERRIDE()
    suite(ToolPackageTests, tools=[]).test_no_overrides_DO_NOT_OVERRIDE()


# ---------------------------------------------------------------------- refusals the standard plugins raise


class StaleOnThrottle:
    """Answers a rate limit, an open circuit or an approval refusal with a made-up value."""

    name = "stale"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome | None:
        if isinstance(error, (RateLimitExceeded, CircuitOpen, ApprovalUnavailable)):
            return Outcome.success({"x": 0, "double": 0, "stale": True})
        return None


def test_a_plugin_that_answers_a_standard_refusal_with_a_value_fails() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=StaleOnThrottle).test_a_refusal_stands()
    text = str(failed.value)
    for refusal in ("RateLimitExceeded", "CircuitOpen", "ApprovalUnavailable"):
        assert f"call: the guard's refusal ({refusal}) became the value" in text
        assert f"acall: the guard's refusal ({refusal}) became the value" in text
    assert "(ToolError)" not in text and "(ToolBusy)" not in text


# ---------------------------------------------------------------------- a plugin that transforms results


class Envelope:
    """Wraps each result in a new object (post_call may assign call.result)."""

    name = "envelope"

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        call.result = {"data": call.result, "via": "envelope"}


@pytest.mark.parametrize(
    "check",
    [
        "test_registers_and_unregisters",
        "test_sixteen_threads",
        "test_async_calls",
        "test_releases_after_failures_and_cancellations",
    ],
)
def test_a_plugin_that_transforms_results_passes(check: str) -> None:
    getattr(suite(PluginTests, plugin_factory=Envelope), check)()


class Racy:
    """Labels a result with the ``x`` of whichever call started last: shared state between calls in flight."""

    name = "racy"

    def __init__(self) -> None:
        self.current: Any = None

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.current = call.arguments.get("x")

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        call.result = {"data": call.result, "for": self.current}


def test_a_transforming_plugin_that_mixes_calls_up_still_fails() -> None:
    with pytest.raises(AssertionError, match=r"than the plugin alone gives one call at a time"):
        suite(PluginTests, plugin_factory=Racy).test_sixteen_threads()


# ---------------------------------------------------------------------- examples compared as the model reads them


@defineTool(registry=None, read_only=True, examples=[{"arguments": {"a": 1, "b": 2}, "result": [1, 2]}])
def pair(a: int, b: int) -> tuple[int, int]:
    """Return the pair (a, b)."""
    return (a, b)


@dataclass
class Point:
    x: int
    y: int


@defineTool(registry=None, read_only=True, examples=[{"arguments": {"x": 1}, "result": {"x": 1, "y": 0}}])
def point(x: int) -> Point:
    """A point on the x axis."""
    return Point(x, 0)


@defineTool(registry=None, read_only=True, examples=[{"arguments": {"x": 1}, "result": True}])
def one(x: int) -> int:
    """Return 1."""
    return 1


JSON_EXAMPLES = """
from test_kit_more import one, pair, point
from harness_one.testing import ToolPackageTests


class TestJson(ToolPackageTests):
    tools = [pair, point]


class TestBool(ToolPackageTests):
    tools = [one]
"""


def test_examples_are_compared_as_the_json_the_model_reads(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_json=JSON_EXAMPLES)
    pytester.syspathinsert(Path(__file__).parent)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_examples")
    assert outcomes(inner) == {"TestJson::test_examples": "passed", "TestBool::test_examples": "failed"}
    assert "returned 1 (the model reads 1), the example says True" in message(inner, "TestBool::test_examples")


# ---------------------------------------------------------------------- an import that leaves a process running

HELPER = """
import subprocess, sys
from harness_one import defineTool

_helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"])
with open(PIDS, "a") as out:
    out.write(f"{_helper.pid}\\n")


@defineTool(registry=None, read_only=True)
def dbl(x: int) -> int:
    \"\"\"Double x.\"\"\"
    return 2 * x
"""

SPAWNS = """
from harness_one.testing import ToolPackageTests


class TestSpawns(ToolPackageTests):
    distribution = "conformance-spawns"
"""


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_an_import_that_leaves_a_process_running_fails_at_once(pytester: pytest.Pytester) -> None:
    pids = pytester.path / "pids"
    install(
        pytester,
        "conformance-spawns",
        {"conformance_spawns": HELPER.replace("PIDS", repr(str(pids)))},
        {"dbl": "conformance_spawns:dbl"},
    )
    pytester.makepyfile(test_spawns=SPAWNS)
    try:
        inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "import_has_no_side_effects")
        text = message(inner, "TestSpawns::test_import_has_no_side_effects")
        assert "left processes running after import (the kit killed them): pid " in text and "time.sleep(20)" in text
        assert pids.exists()
        # SIGKILL cannot be caught, but a loaded machine takes a moment to end a process: the helper sleeps 20 s
        left = [pid for pid in map(int, pids.read_text().split()) if _running(pid)]
        for _ in range(100):
            if not left:
                break
            time.sleep(0.1)
            left = [pid for pid in left if _running(pid)]
        assert not left
    finally:
        for pid in map(int, pids.read_text().split() if pids.exists() else ()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (killed but not yet reaped, it does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


# ---------------------------------------------------------------------- per-key state and time windows


class Memo:
    """Caches every result forever, keyed by the arguments."""

    name = "memo"

    def __init__(self) -> None:
        self.seen: dict[Any, Any] = {}

    @hookimpl
    def harness_pre_call(self, call: Call) -> Outcome | None:
        key = (call.tool.name, repr(sorted(call.arguments.items())))
        return Outcome.success(self.seen[key]) if key in self.seen else None

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.seen[(call.tool.name, repr(sorted(call.arguments.items())))] = call.result


class SlidingWindow:
    """A correct sliding-window limiter: keeps the call times of the last second only."""

    name = "sliding"

    def __init__(self) -> None:
        self.times: deque[float] = deque()
        self.lock = threading.Lock()

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        now = call.registry.clock.now()
        with self.lock:
            while self.times and self.times[0] <= now - 1.0:
                self.times.popleft()
            if len(self.times) >= 10**9:
                raise ToolError("too many calls")
            self.times.append(now)


def test_a_plugin_that_keeps_state_per_key_fails_and_a_time_window_passes() -> None:
    patient = 120.0  # (a growth check took up to 30 s, the kit's deadline, on a loaded machine)
    with pytest.raises(AssertionError, match=r"the state reachable from the plugin grew by \d+ objects.*each call had its own x"):
        suite(PluginTests, plugin_factory=Memo, check_deadline=patient).test_no_per_call_state()
    suite(PluginTests, plugin_factory=SlidingWindow, check_deadline=patient).test_no_per_call_state()
    suite(PluginTests, plugin_factory=Memo, distinct_arguments=False, check_deadline=patient).test_no_per_call_state()


# ---------------------------------------------------------------------- a schema wider than the annotation


def test_a_schema_that_says_number_for_an_int_parameter_fails() -> None:
    @defineTool(registry=None, parameters={"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]})
    def increment(n: int) -> int:
        """Add one to n."""
        return n + 1

    @defineTool(registry=None, parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    def halve(n: float) -> float:
        """Halve n."""
        return n / 2

    assert _signature_problems(increment.tool) == [
        "tool 'increment': the schema says 'n' is number, the function's annotation integer (a call with a number "
        "passes validation, and the function gets what it does not take)"
    ]
    assert _signature_problems(halve.tool) == []


# ---------------------------------------------------------------------- nested arguments changed in place


class Redact:
    """Redacts a token in nested arguments, in place: the caller's nested dict changes."""

    name = "redact"

    @hookimpl
    def harness_pre_validate(self, call: Call) -> None:
        for value in (call.arguments or {}).values():
            if isinstance(value, dict) and "token" in value:
                value["token"] = "***"


def test_a_plugin_that_changes_nested_arguments_in_place_fails() -> None:
    with pytest.raises(AssertionError, match=r"the call changed the caller's arguments to .*'token': '\*\*\*'"):
        suite(PluginTests, plugin_factory=Redact).test_arguments_stay_the_callers()


# ---------------------------------------------------------------------- a misspelled optional hook, an awaitable answer


class TypoHook:
    name = "typo"

    @hookimpl(optionalhook=True)
    def harness_post_cal(self, call: Call) -> None:
        raise RuntimeError("never runs")


class ReturnsCoroutine:
    name = "retcoro"

    async def _audit(self, call: Call) -> None:
        return None

    @hookimpl
    def harness_post_call(self, call: Call) -> Any:
        return self._audit(call)


def test_a_misspelled_optional_hook_and_a_hook_that_returns_a_coroutine_fail() -> None:
    with pytest.raises(
        AssertionError,
        match=r"harness_post_cal implements harness_post_cal, which no hook spec names, .*: a misspelling of harness_post_call",
    ):
        suite(PluginTests, plugin_factory=TypoHook).test_hooks_match_specs()
    with pytest.raises(AssertionError, match=r"harness_post_call returned a coroutine, which nothing awaits"):
        suite(PluginTests, plugin_factory=ReturnsCoroutine).test_hooks_are_plain_functions()
    suite(PluginTests, plugin_factory=Envelope).test_hooks_are_plain_functions()


# ---------------------------------------------------------------------- an optional hook of a newer harness-one


class Forward:
    """Implements a hook a newer harness-one defines, marked optional so that it loads on this one too."""

    name = "forward"

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        return None

    @hookimpl(optionalhook=True)
    def harness_tool_retired(self, tool: Any) -> None:
        return None


FORWARD = """
from harness_one.testing import PluginTests
from test_kit_more import Forward


class TestForward(PluginTests):
    plugin_factory = Forward
"""


def test_an_optional_hook_of_a_newer_harness_one_passes_and_is_listed(pytester: pytest.Pytester) -> None:
    suite(PluginTests, plugin_factory=Forward).test_hooks_match_specs()  # run outside pytest: no summary, no failure
    pytester.makepyfile(test_forward=FORWARD)
    pytester.syspathinsert(Path(__file__).parent)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_hooks_match_specs")
    inner.assert_outcomes(passed=1)
    inner.stdout.fnmatch_lines(
        [
            "test_forward.py::TestForward: test_hooks_match_specs: harness_tool_retired implements harness_tool_retired "
            "(optionalhook=True), which no hook spec of this harness-one names: a newer harness-one's hook, never called here"
        ]
    )


# ---------------------------------------------------------------------- a registry without the plugin


def _forgetful(self: Any, plugin: Any) -> ToolRegistry:
    registry = ToolRegistry(standard_plugins=False, autoload=False, clock=BoundedClock())  # the plugin forgotten
    registry.add(self.probe_tool())
    return registry


@pytest.mark.parametrize("check", ["test_sixteen_threads", "test_a_refusal_stands", "test_no_per_call_state"])
def test_a_make_registry_that_forgets_the_plugin_fails_every_check(check: str) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"make_registry gave a registry without the plugin it was given"):
        getattr(suite(PluginTests, plugin_factory=Racy, make_registry=_forgetful), check)()


# ---------------------------------------------------------------------- the summary, per suite

SWITCHED = """
from harness_one.testing import PluginTests
from test_kit_more import Envelope


class TestPlugin(PluginTests):
    plugin_factory = Envelope
"""


def test_the_summary_tells_two_suites_of_one_name_apart(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one=SWITCHED, test_two=SWITCHED)
    pytester.syspathinsert(Path(__file__).parent)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_entry_point")
    summary = inner.stdout.str().split("checks switched off, with nothing to check, or known to fail", 1)[1]
    for module in ("test_one.py", "test_two.py"):
        assert f"{module}::TestPlugin: test_entry_point: TestPlugin.entry_point = None" in summary
