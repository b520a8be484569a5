"""The 36th review of the conformance kit: each test fails without its fix."""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

import harness_one._call
from harness_one import Call, ToolError, hookimpl
from harness_one.testing import PluginTests


def suite(kit: type, **attributes: Any) -> Any:
    """An instance of a subclass of ``kit`` with ``attributes`` (a suite as an author writes one)."""
    return type("TestSubject", (kit,), attributes)()


# ---------------------------------------------------------------------- 1. harness_call_refused, never called by the kit


class KeepsRefusedNames:
    """Keeps every name a model asked for that was refused: unbounded under a model that makes names up."""

    name = "keeps_refused_names"

    def __init__(self) -> None:
        self.names: list[str] = []

    @hookimpl
    def harness_call_refused(self, name: str, error: ToolError) -> None:
        self.names.append(name)


class CountsRefusedKinds:
    """Counts refused requests by their error's type: bounded."""

    name = "counts_refused_kinds"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.kinds: dict[str, int] = {}

    @hookimpl
    def harness_call_refused(self, error: ToolError) -> None:
        with self.lock:
            kind = type(error).__name__
            self.kinds[kind] = self.kinds.get(kind, 0) + 1


class FailsOnRefused:
    """Raises on every refused request: the registry logs it, and what the plugin observes is lost."""

    name = "fails_on_refused"

    @hookimpl
    def harness_call_refused(self, name: str, error: ToolError) -> None:
        raise RuntimeError("fails on every refused request")


class SwallowsOnRefused:
    """Swallows whatever fails inside its ``suppress``: a fault the kit injects there is never reported."""

    name = "swallows_on_refused"

    def __init__(self) -> None:
        self.refused = 0

    @hookimpl
    def harness_call_refused(self, name: str, error: ToolError) -> None:
        with contextlib.suppress(Exception):
            self.refused += 1


def test_a_plugin_keeping_each_refused_name_fails_the_growth_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=KeepsRefusedNames).test_no_per_call_state()
    assert re.match(
        r"the state reachable from the plugin grew by 625 objects over calls 5001-10000 \(about 0\.12 per call; of every "
        r"8 calls, one failed in the tool and one was refused before the plugin's pre_call, then followed by a call of "
        r"a tool the registry does not have, each its own name, which harness_call_refused sees;",
        str(failed.value),
    )


def test_a_bounded_harness_call_refused_passes_the_growth_and_fault_checks() -> None:
    subject = suite(PluginTests, plugin_factory=CountsRefusedKinds)
    subject.test_no_per_call_state()
    subject.test_raising_hook_is_a_plugin_error()


def test_a_harness_call_refused_that_raises_fails_the_fault_check_but_not_the_growth_check() -> None:
    subject = suite(PluginTests, plugin_factory=FailsOnRefused)
    with pytest.raises(AssertionError) as failed:
        subject.test_raising_hook_is_a_plugin_error()
    assert (
        "  - harness_call_refused failed on a call of a tool the registry does not have, with no fault injected (logged, "
        "never raised: what it observes of every refused request is lost): Plugin 'fails_on_refused' failed in "
        "harness_call_refused: RuntimeError: fails on every refused request"
    ) in str(failed.value)
    subject.test_no_per_call_state()  # its logged failures (kept by pytest's log capture) are not its state


def test_a_harness_call_refused_that_swallows_the_injected_fault_fails_the_fault_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=SwallowsOnRefused).test_raising_hook_is_a_plugin_error()
    text = str(failed.value)
    assert re.search(
        r"  - harness_call_refused \(inside its with at line \d+\): the fault was swallowed: no failure of "
        r"'swallows_on_refused' in harness_call_refused was logged",
        text,
    )
    assert "at its first line" not in text  # raised there, it is logged


@pytest.fixture
def structlog_configured() -> Iterator[None]:
    """structlog configured by the application: harness-one's events go there, not to the stdlib's logger."""
    structlog.configure(processors=[structlog.processors.KeyValueRenderer()], logger_factory=structlog.ReturnLoggerFactory())
    yield
    structlog.reset_defaults()


def test_the_fault_check_reads_the_logged_failures_through_structlog_too(structlog_configured: None) -> None:
    suite(PluginTests, plugin_factory=CountsRefusedKinds).test_raising_hook_is_a_plugin_error()
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=FailsOnRefused).test_raising_hook_is_a_plugin_error()
    assert "harness_call_refused failed on a call of a tool the registry does not have" in str(failed.value)


# ---------------------------------------------------------------------- 2. a string that grows a character per call


class OneCharPerCall:
    """Keeps one character per call: an unbounded string, one object however long."""

    name = "one_char_per_call"

    def __init__(self) -> None:
        self.trail = ""

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.trail += "o"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self.trail += "e"


class OneBytePerCall:
    """Keeps one byte per call in a bytearray."""

    name = "one_byte_per_call"

    def __init__(self) -> None:
        self.trail = bytearray()

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.trail.append(1)


class KeepsTheLastCall:
    """Keeps the last call's id and arguments, as text: bounded, though its length varies."""

    name = "keeps_the_last_call"

    def __init__(self) -> None:
        self.last = ""

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.last = f"{call.call_id} {call.arguments!r}"


@pytest.mark.parametrize(("plugin", "grown"), [(OneCharPerCall, "5,000"), (OneBytePerCall, "3,750")])
def test_text_that_grows_per_call_fails_the_growth_check(plugin: type, grown: str) -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=plugin).test_no_per_call_state()
    assert str(failed.value).startswith(
        f"the strings, bytes and bytearrays reachable from the plugin grew by {grown} characters (or bytes) in all over "
        "calls 5001-10000"
    )


def test_text_that_is_replaced_per_call_passes_the_growth_check() -> None:
    suite(PluginTests, plugin_factory=KeepsTheLastCall).test_no_per_call_state()


# ---------------------------------------------------------------------- 3. after review: what a correct plugin passes

_log = logging.getLogger(__name__)


class KeepsTheLastCallIds:
    """Keeps the ids of the last 1,000 calls: bounded."""

    name = "keeps_the_last_call_ids"

    def __init__(self) -> None:
        self.recent: deque[str] = deque(maxlen=1000)

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.recent.append(call.call_id)

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self.recent.append(call.call_id)


def test_call_ids_a_character_longer_once_the_counter_passes_a_power_of_ten_pass_the_text_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The growth check makes about 1.125 calls per step: the counter passes 1,000,000 near step 7,000, so every id
    # kept at its end is a character longer than every one kept at step 5,000.
    monkeypatch.setattr(harness_one._call, "_ids", itertools.count(10**6 - 7_875))
    suite(PluginTests, plugin_factory=KeepsTheLastCallIds).test_no_per_call_state()
    assert next(harness_one._call._ids) > 10**6 + 1_000


class LogsRefusedRequests:
    """Logs every refused request, through a module-level logger: what the root's handlers keep is not its state."""

    name = "logs_refused_requests"

    @hookimpl
    def harness_call_refused(self, name: str, error: ToolError) -> None:
        _log.warning("refused request for %s: %s", name, type(error).__name__)


class LogsFailedCalls:
    """Logs every failed call, through a logger it asks for each time."""

    name = "logs_failed_calls"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        logging.getLogger(__name__).warning("call failed: %s", type(error).__name__)


@pytest.mark.parametrize("plugin", [LogsRefusedRequests, LogsFailedCalls])
def test_a_plugin_logging_per_call_passes_the_growth_check_under_pytests_log_capture(
    plugin: type, caplog: pytest.LogCaptureFixture
) -> None:
    root = logging.getLogger()
    handlers = root.handlers[:]
    assert any(isinstance(h, type(caplog.handler)) for h in handlers)  # pytest keeps every record it is handed
    suite(PluginTests, plugin_factory=plugin).test_no_per_call_state()
    assert root.handlers == handlers
    assert caplog.records  # kept by pytest's capture (but for the calls whose allocations the kit traced)


@pytest.fixture
def logging_disabled() -> Iterator[None]:
    """``logging.disable(logging.CRITICAL)``, as a conftest may set for a whole session."""
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


def test_the_fault_check_reads_the_logged_failures_with_logging_disabled(logging_disabled: None) -> None:
    suite(PluginTests, plugin_factory=CountsRefusedKinds).test_raising_hook_is_a_plugin_error()
    assert logging.root.manager.disable == logging.CRITICAL  # given back
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=SwallowsOnRefused).test_raising_hook_is_a_plugin_error()
    assert "the fault was swallowed" in str(failed.value)


@pytest.fixture
def structlog_errors_dropped() -> Iterator[None]:
    """structlog configured to drop every event below ``CRITICAL``: harness-one's logged failures never reach the kit."""
    structlog.configure(
        processors=[structlog.processors.KeyValueRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.ReturnLoggerFactory(),
    )
    yield
    structlog.reset_defaults()


def test_failures_the_kit_cannot_observe_are_not_called_swallowed(structlog_errors_dropped: None) -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=CountsRefusedKinds).test_raising_hook_is_a_plugin_error()
    text = str(failed.value)
    assert "harness_call_refused (at its first line)" in text
    assert "the kit could not observe the failures harness-one logs" in text
    assert "swallowed:" not in text


class OneCharPerCallBesideWords(OneCharPerCall):
    """Keeps one character per call beside 5,000 constant words, which bought it as many characters of allowance."""

    name = "one_char_per_call_beside_words"
    words = frozenset(f"word{i}" for i in range(5000))


def test_a_string_growing_per_call_beside_many_constant_strings_fails_the_growth_check() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=OneCharPerCallBesideWords).test_no_per_call_state()
    assert str(failed.value).startswith(
        "the longest string, bytes or bytearray reachable from the plugin grew by 5,000 characters (or bytes) over calls "
        "5001-10000"
    )
