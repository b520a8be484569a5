"""The 25th review of the conformance kit: each test fails without its fix."""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from harness_one import Call, Outcome, Retry, hookimpl, log_event
from harness_one.testing import PluginTests
from harness_one.testing import _plugins as kit_plugins
from harness_one.testing._suite import _HARNESS_ONE


def suite(kit: type, **attributes: Any) -> Any:
    """An instance of a subclass of ``kit`` with ``attributes`` (a suite as an author writes one)."""
    return type("TestSubject", (kit,), attributes)()


# ---------------------------------------------------------------------- 2. a refusal answered with a remembered value


class ServesStale:
    """Answers a refused call with the last good result ("serve stale on error")."""

    name = "serves_stale"

    def __init__(self) -> None:
        self.last: Any = None

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.last = call.result

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome | None:
        if not call.ran and self.last is not None:
            return Outcome.success(self.last)
        return None


def test_a_plugin_that_answers_a_refusal_with_a_remembered_result_fails_the_refusal_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=ServesStale).test_a_refusal_stands()
    text = str(failed.value)
    assert text.startswith("a call refused before the tool ran did not end in an error:\n")
    turns = iter(range(1, 11))
    for refusal in ("ToolError", "RateLimitExceeded", "CircuitOpen", "ToolBusy", "ApprovalUnavailable"):
        for way in ("call", "acall"):
            assert (
                f"  - {way}: the guard's refusal ({refusal}) became the value {{'x': 1, 'double': 2}}, refusal "
                f"{next(turns)} of 10 in a row after the same call was let through (recover with a value only what the "
                "tool raised" in text
            )


# ---------------------------------------------------------------------- 3. per-call state kept through a library


@pytest.fixture
def call_loggers() -> Iterator[None]:
    """Takes the loggers a test's plugin made away again."""
    before = set(logging.Logger.manager.loggerDict)
    yield
    for name in set(logging.Logger.manager.loggerDict) - before:
        del logging.Logger.manager.loggerDict[name]


class LoggerPerCall:
    """A logger per call, named by the call's id (the string is the core's: no allocation on this line)."""

    name = "logger_per_call"

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        logging.getLogger(call.call_id)


def test_state_kept_per_call_through_a_library_fails_the_growth_check(call_loggers: None) -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=LoggerPerCall).test_no_per_call_state()
    assert re.match(
        r"the plugin's own code \(or what it called\) allocated [\d,]+ bytes over calls 8751-10000 that are still alive "
        r"\(about \d+ per call: .* a logger named per call\?\): it keeps something per call or per key",
        str(failed.value),
    )


def test_an_allocation_is_the_plugin_s_when_its_innermost_own_or_harness_one_frame_is_the_plugin_s() -> None:
    plugin_file, library, core = "/srv/myplug/plugin.py", logging.__file__, _HARNESS_ONE + "_redact.py"

    def traceback(*innermost_first: str) -> tracemalloc.Traceback:
        return tracemalloc.Traceback(tuple((f, 1) for f in innermost_first))

    own = frozenset({plugin_file})
    assert kit_plugins._plugins_own(traceback(library, plugin_file, core), own)  # logging.getLogger, from the plugin
    assert not kit_plugins._plugins_own(traceback(core, plugin_file), own)  # harness-one's redactor keeps its cache
    assert not kit_plugins._plugins_own(traceback(library, core), own)  # the core's, not the plugin's


# ---------------------------------------------------------------------- 4. registry.stats() with the plugin


class StatsNotADict:
    name = "stats_not_a_dict"

    @hookimpl
    def harness_stats(self, registry: Any) -> Any:
        return ["not", "a", "dict"]


class StatsNotJson:
    name = "stats_not_json"

    @hookimpl
    def harness_stats(self, registry: Any) -> dict[str, Any]:
        return {"seen": {"a"}}


class StatsFine:
    name = "stats_fine"

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.calls += 1

    @hookimpl
    def harness_stats(self, registry: Any) -> dict[str, Any]:
        return {"calls": self.calls, "tools": {"conformance_probe": {"seen": self.calls}}}


def test_a_plugin_whose_stats_the_core_refuses_fails_the_stats_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=StatsNotADict).test_stats_after_calls()
    problem = (
        "registry.stats() raised its PluginError: Plugin 'stats_not_a_dict' returned a value of type list from "
        "harness_stats; it must return a dict (or None)."
    )
    text = str(failed.value)  # (pytest's assertion rewriting indents the lines after the first)
    assert text.startswith(
        "registry.stats() with the plugin 'stats_not_a_dict' (harness_stats returns a dict, or None, of what "
        "json.dumps(..., allow_nan=False) takes; its 'tools' a dict per tool name, beside the core's 'calls'):\n"
    )
    assert f"- before any call, {problem}\n" in text
    assert f"- after 6 calls (that succeed, fail in the tool, are refused before the plugin's pre_call), {problem}" in text


def test_a_plugin_whose_stats_are_not_json_fails_the_stats_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=StatsNotJson).test_stats_after_calls()
    assert (
        "  - before any call, registry.stats()['stats_not_json'] is not valid JSON (TypeError: Object of type set is not "
        "JSON serializable): {'seen': {'a'}}"
    ) in str(failed.value)


def test_a_plugin_with_json_stats_passes_the_stats_check() -> None:
    suite(PluginTests, plugin_factory=StatsFine).test_stats_after_calls()


# ---------------------------------------------------------------------- 6. misleading reports


class Slow:
    """No state, but 2 ms of blocking work in each pre_call: slow, never stuck."""

    name = "slow"

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        time.sleep(0.002)


def test_a_slow_plugin_past_the_deadline_is_reported_as_slow_and_the_later_checks_run() -> None:
    subject = suite(PluginTests, plugin_factory=Slow, supports_async=False, check_deadline=2.0)
    with pytest.raises(pytest.fail.Exception) as failed:
        subject.test_no_per_call_state()
    assert re.fullmatch(
        r"test_no_per_call_state did not end within check_deadline = 2 s, but it was not stuck: [\d,]+ of 10,000 calls "
        r"in [\d.]+ s \([\d.]+ ms per call, hooks included\): too slow for check_deadline \(raise check_deadline for "
        r"a plugin this slow, or make its hooks faster\)",
        str(failed.value),
    )
    subject.test_has_a_name()  # not "not run: test_no_per_call_state, before it, is still stuck"


class RetryRefusals:
    name = "retry_refusals"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        return Retry(0.0) if not call.ran else None


def test_the_growth_check_ends_once_the_kit_s_clock_stopped_the_calls(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="harness_one")
    with pytest.raises(pytest.fail.Exception) as failed:
        suite(PluginTests, plugin_factory=RetryRefusals, supports_async=False).test_no_per_call_state()
    assert str(failed.value) == (
        "the kit's clock stopped the calls: the calls waited 100001 times: a plugin that retries or waits without end? "
        "(the kit's clock makes each wait instant and stops after 100,000 waits)"
    )
    internal = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert len(internal) == 1, f"{len(internal)} internal errors logged"


# ====================================================================== the second round
# ---------------------------------------------------------------------- 1. the growth check's cost, loggers per call


def test_the_growth_check_traces_few_frames_and_calls() -> None:
    """3 frames: the library-state test above (``logging.getLogger`` in a hook) fails with 3 or more, passes with 1 or 2;
    16 made the traced calls 5 to 7 times dearer."""
    assert kit_plugins._TRACED_FRAMES == 3


class LoggerPerCallViaLogEvent:
    """A logger per call made through harness-one's own ``log_event`` (what it allocates is harness-one's frames')."""

    name = "logger_per_call_via_log_event"

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        log_event(logging.DEBUG, "seen", logger=call.call_id)


def test_a_logger_per_call_made_through_log_event_fails_the_growth_check(call_loggers: None) -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=LoggerPerCallViaLogEvent, supports_async=False).test_no_per_call_state()
    assert str(failed.value).startswith(
        "4,375 loggers were made over calls 5001-10000 (logging.getLogger, directly or through harness-one's "
        "log_event(logger=...)), and logging keeps every logger for the life of the process: a logger named per call or "
        "per key (by call.call_id, the arguments)? Name loggers by module or plugin, and put what varies in the record"
    )


class SlowWhenTraced:
    """Fast, but 500 ms in each pre_call while tracemalloc traces (the kit's traced phase): its last 20 of 80 calls take
    10 s, past the 6 s deadline there, while its first 60 end within it even on a loaded machine."""

    name = "slow_when_traced"

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if tracemalloc.is_tracing():
            time.sleep(0.5)


def test_a_check_slow_in_the_kit_s_traced_phase_says_the_tracing_is_included() -> None:
    subject = suite(PluginTests, plugin_factory=SlowWhenTraced, supports_async=False, check_deadline=6.0, growth_calls=80)
    with pytest.raises(pytest.fail.Exception) as failed:
        subject.test_no_per_call_state()
    assert re.fullmatch(
        r"test_no_per_call_state did not end within check_deadline = 6 s, but it was not stuck: [\d,]+ of 80 calls "
        r"in [\d.]+ s \([\d.]+ ms per call, hooks and the kit's tracing included\): too slow for check_deadline \(the "
        r"kit traces the last calls with tracemalloc, which makes them dearer: raise check_deadline for a plugin this "
        r"slow, or make its hooks faster\)",
        str(failed.value),
    )


# ---------------------------------------------------------------------- 2. stuck a moment before the deadline


class StuckLate:
    """A millisecond of work per call, then, from ``stuck_at`` (1.4 s after the test starts the check, so before its
    deadline however long the check takes to make its first call), a pre_call that waits for what never comes (until
    the test lets it go: the check's thread then ends)."""

    name = "stuck_late"

    def __init__(self) -> None:
        self.stuck_at = math.inf
        self.released = threading.Event()

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        time.sleep(0.001)
        if time.monotonic() > self.stuck_at:
            self.released.wait()
            raise SystemExit("let go by the test")


def test_a_plugin_stuck_a_moment_before_the_deadline_is_reported_stuck_not_slow() -> None:
    plugin = StuckLate()
    subject = suite(PluginTests, plugin_factory=lambda: plugin, supports_async=False, check_deadline=2.0)
    try:
        with pytest.raises(pytest.fail.Exception) as failed:
            plugin.stuck_at = time.monotonic() + 1.4
            subject.test_no_per_call_state()
        text = str(failed.value)
        assert text.startswith(
            "test_no_per_call_state did not end within check_deadline = 2 s: stuck in the plugin's harness_pre_call "
            "(test_kit_review25.py:"
        ), text[:300]
        with pytest.raises(pytest.fail.Exception) as later:
            subject.test_has_a_name()
        assert str(later.value).startswith("not run: test_no_per_call_state, before it, is still stuck in the plugin's ")
    finally:
        plugin.released.set()


# ---------------------------------------------------------------------- 3. a plugin that serves stale after a streak


class StaleAfterStreak:
    """Serves the last good result once the calls failed twice in a row (one error may be transient)."""

    name = "stale_after_streak"

    def __init__(self) -> None:
        self.last: Any = None
        self.streak = 0

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.last, self.streak = call.result, 0

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome | None:
        self.streak += 1
        return Outcome.success(self.last) if self.streak >= 2 and self.last is not None else None


def test_a_plugin_that_serves_a_remembered_result_after_a_streak_of_refusals_fails() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=StaleAfterStreak).test_a_refusal_stands()
    text = str(failed.value)
    assert "  - call: the guard's refusal (ToolError)" not in text  # the first refusal of the streak stands
    assert (
        "  - acall: the guard's refusal (ToolError) became the value {'x': 1, 'double': 2}, refusal 2 of 10 in a row after "
        "the same call was let through (recover with a value only what the tool raised" in text
    )
    assert "  - acall: the guard's refusal (ApprovalUnavailable) became the value {'x': 1, 'double': 2}, refusal 10 of 10" in text


# ---------------------------------------------------------------------- 4. stats: valid JSON, the core's count kept


class StatsNan:
    name = "stats_nan"

    @hookimpl
    def harness_stats(self, registry: Any) -> dict[str, Any]:
        return {"mean_ms": math.nan, "max_ms": -math.inf}


class StatsClobberCalls:
    name = "stats_clobber_calls"

    @hookimpl
    def harness_stats(self, registry: Any) -> dict[str, Any]:
        return {"tools": {"conformance_probe": {"calls": 0, "mine": 1}}}


def test_a_plugin_whose_stats_hold_nan_or_infinity_fails_the_stats_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=StatsNan).test_stats_after_calls()
    assert (
        "  - before any call, registry.stats()['stats_nan'] is not valid JSON (ValueError: Out of range float values are "
        "not JSON compliant): {'mean_ms': nan, 'max_ms': -inf}"
    ) in str(failed.value)


def test_a_plugin_whose_tool_stats_replace_the_core_s_call_count_fails_the_stats_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=StatsClobberCalls).test_stats_after_calls()
    text = str(failed.value)
    assert "before any call" not in text  # no call made then: the count is right
    assert (
        "  - after 6 calls (that succeed, fail in the tool, are refused before the plugin's pre_call), "
        "its harness_stats gives 0 as the 'calls' of tool 'conformance_probe', not the 6 calls made: registry.stats() "
        "keeps the core's count and leaves the plugin's out (name its own counters otherwise)"
    ) in text
