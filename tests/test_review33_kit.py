"""Ways past the conformance kit review 33 found: each test fails without the kit's fix for it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

import pytest
from test_conformance import _fresh_entry_points, install, outcomes  # noqa: F401 - an autouse fixture

from harness_one import Call, Outcome, ToolError, hookimpl
from harness_one.testing import PluginTests

pytest_plugins = ["pytester"]


def suite(kit: type, **attributes: Any) -> Any:
    """An instance of a subclass of ``kit`` with ``attributes`` (a suite as an author writes one)."""
    return type("TestSubject", (kit,), attributes)()


# ---------------------------------------------------------------------- a process another package's import starts

QUIET = """
from harness_one import defineTool


@defineTool(registry=None, read_only=True)
def halve(x: int) -> int:
    \"\"\"Halve x.\"\"\"
    return x // 2
"""

NEIGHBOUR = """
import subprocess, sys
from harness_one import defineTool

_helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"])
with open(PIDS, "a") as out:
    out.write(f"{_helper.pid}\\n")


@defineTool(registry=None)
def neighbour_tool(x: int) -> int:
    \"\"\"A neighbour's tool.\"\"\"
    return x
"""

QUIET_SUITE = """
from harness_one.testing import ToolPackageTests


class TestQuiet(ToolPackageTests):
    distribution = "conformance-quiet"
"""


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (killed but not yet reaped, it does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="the probe tells whose process it is through /proc")
def test_a_process_another_package_s_import_starts_is_not_the_package_s(pytester: pytest.Pytester) -> None:
    pids = pytester.path / "pids"
    install(pytester, "conformance-quiet", {"conformance_quiet": QUIET}, {"halve": "conformance_quiet:halve"})
    install(
        pytester,
        "conformance-neighbour",
        {"conformance_neighbour": NEIGHBOUR.replace("PIDS", repr(str(pids)))},
        {"neighbour_tool": "conformance_neighbour:neighbour_tool"},
    )
    pytester.makepyfile(test_quiet=QUIET_SUITE)
    try:
        inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "import_has_no_side_effects or entry_points_load")
        assert outcomes(inner) == {
            "TestQuiet::test_import_has_no_side_effects": "passed",
            "TestQuiet::test_entry_points_load": "passed",
        }, inner.stdout.str()
        assert pids.exists()  # the name-conflict scan imported the neighbour, which started its helper
        left = [pid for pid in map(int, pids.read_text().split()) if _running(pid)]
        for _ in range(100):  # still killed with the probe: a loaded machine takes a moment to end it
            if not left:
                break
            time.sleep(0.1)
            left = [pid for pid in left if _running(pid)]
        assert not left
    finally:
        for pid in map(int, pids.read_text().split() if pids.exists() else ()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------- a successful call that differs under acall


def _in_loop() -> bool:
    return asyncio._get_running_loop() is not None


class DiffersUnderAcall:
    """Gives another result to a successful acall than to the same call."""

    name = "differs"

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        if _in_loop():
            call.result = "different under acall"


def test_a_successful_call_ends_through_acall_as_through_call() -> None:
    with pytest.raises(
        AssertionError,
        match=r"conformance_probe: call gave \{'x': 1, 'double': 2\}, acall 'different under acall' \(with \{'x': 1\}\)",
    ):
        suite(PluginTests, plugin_factory=DiffersUnderAcall).test_async_calls()


# ---------------------------------------------------------------------- a write into the caller's context


class WritesContext:
    """Writes a key of its own into the caller's context."""

    name = "writes_context"

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if isinstance(call.context, dict):
            call.context["seen_by_writes_context"] = True


class AppendsToContext:
    """Appends to a list inside the caller's context."""

    name = "appends_to_context"

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        trail = call.context.get("trail")
        if isinstance(trail, list):
            trail.append(call.call_id)


def test_a_plugin_that_writes_the_caller_s_context_fails() -> None:
    with pytest.raises(AssertionError, match=r"the call changed the caller's context \{'conformance'.*'seen_by_writes_context'"):
        suite(PluginTests, plugin_factory=WritesContext).test_arguments_stay_the_callers()


def test_the_context_call_options_gives_is_compared_nested_too() -> None:
    def call_options(self: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return {"context": {"run_id": "run-1", "trail": []}}

    with pytest.raises(AssertionError, match=r"changed the caller's context \{'run_id': 'run-1', 'trail': \[\]\} to"):
        suite(PluginTests, plugin_factory=AppendsToContext, call_options=call_options).test_arguments_stay_the_callers()


# ---------------------------------------------------------------------- the release hint, only where it helps


class FailsEveryAcall:
    """Answers a post_call under acall with an Outcome (a PluginError): every acall fails, fresh plugin or not."""

    name = "fails_every_acall"

    @hookimpl
    def harness_post_call(self, call: Call) -> Any:
        return Outcome.success("different") if _in_loop() else None


class KeepsSlots:
    """Takes a slot in pre_call and gives it back in post_call only: failed calls keep theirs."""

    name = "keeps_slots"

    def __init__(self) -> None:
        self.busy = 0

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if self.busy >= 50:
            raise ToolError("no slot free")
        self.busy += 1

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.busy -= 1


def test_the_release_hint_only_where_a_new_plugin_s_first_call_succeeds() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=FailsEveryAcall).test_releases_after_failures_and_cancellations()
    text = str(failed.value)
    assert "an acall ended PluginError: The post_call hook of plugin 'fails_every_acall' returned an Outcome" in text
    assert "(as a new plugin's first one does)" in text
    assert "give back what pre_call took" not in text
    with pytest.raises(AssertionError) as kept:
        suite(PluginTests, plugin_factory=KeepsSlots, supports_async=False).test_releases_after_failures_and_cancellations()
    assert (
        "after 100 failed calls, a call ended ToolError: no slot free, where a new plugin's first call gives "
        "{'x': 1, 'double': 2}: give back what pre_call took in on_error too"
    ) in str(kept.value)
