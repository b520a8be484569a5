"""The 25th review of the conformance kit: each test fails without its fix."""

from __future__ import annotations

import logging
import re
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from harness_one import Call, Outcome, Retry, hookimpl
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
    for way in ("call", "acall"):
        for refusal in ("ToolError", "RateLimitExceeded", "CircuitOpen", "ToolBusy", "ApprovalUnavailable"):
            assert (
                f"  - {way}: the guard's refusal ({refusal}) became the value {{'x': 1, 'double': 2}}, the same call "
                "having been let through just before (recover with a value only what the tool raised" in text
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
        "registry.stats() with the plugin 'stats_not_a_dict' (harness_stats returns a dict, or None, of what json.dumps "
        "takes; its 'tools' a dict per tool name):\n"
    )
    assert f"- before any call, {problem}\n" in text
    assert f"- after 6 calls (that succeed, fail in the tool, are refused before the plugin's pre_call), {problem}" in text


def test_a_plugin_whose_stats_are_not_json_fails_the_stats_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=StatsNotJson).test_stats_after_calls()
    assert (
        "  - before any call, registry.stats()['stats_not_json'] is not JSON (TypeError: Object of type set is not "
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
