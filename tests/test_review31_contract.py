"""Review 31: the plugin contract at registration (hooks that would never run) and the core's fields in ``stats()``."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import Call, PluginError, ToolRegistry, hookimpl
from harness_one.testing import PluginTests


def suite(kit: type, **attributes: Any) -> Any:
    """An instance of a subclass of ``kit`` with ``attributes`` (a suite as an author writes one)."""
    return type("TestSubject", (kit,), attributes)()


def bare(*plugins: Any) -> ToolRegistry:
    return ToolRegistry(standard_plugins=False, autoload=False, plugins=list(plugins))


def echo(x: int) -> int:
    """Return x."""
    return x


# ---------------------------------------------------------------------- 1. hooks that would never run


class Unmarked:
    """Marks its pre_call, forgets the mark on its post_call."""

    name = "unmarked"

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.seen.append("pre_call")

    def harness_post_call(self, call: Call) -> None:
        self.seen.append("post_call")


class UnmarkedTypo:
    name = "unmarked_typo"

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        return None

    def harness_on_eror(self, call: Call, error: Any) -> None:
        return None


class OptionalTypo:
    name = "optional_typo"

    @hookimpl(optionalhook=True)
    def harness_post_cal(self, call: Call) -> None:
        raise RuntimeError("never runs")


class NewerHook:
    """Implements a hook a newer harness-one might have: no misspelling of any hook here."""

    name = "newer_hook"

    @hookimpl(optionalhook=True)
    def harness_batch_started(self, registry: Any) -> None:
        return None


class NoMarks:
    """No ``@hookimpl`` at all: pluggy registers no hook of it, and so does the registry (the rule kept)."""

    name = "no_marks"

    def harness_post_call(self, call: Call) -> None:
        raise RuntimeError("never runs")


class SwitchedOff(Unmarked):
    """Switches off the post_call it would inherit (marked, here) by setting it to None."""

    name = "switched_off"

    @hookimpl
    def harness_post_call(self, call: Call) -> None:  # (marked, unlike the parent's: replaced below)
        self.seen.append("post_call")


class SwitchedOffChild(SwitchedOff):
    name = "switched_off_child"
    harness_post_call = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("plugin", "method", "hook"),
    [
        (Unmarked, "harness_post_call", "harness_post_call"),
        (UnmarkedTypo, "harness_on_eror", "harness_on_error"),
        (OptionalTypo, "harness_post_cal", "harness_post_call"),
    ],
)
def test_a_hook_that_would_never_run_is_refused_at_registration(plugin: type, method: str, hook: str) -> None:
    with pytest.raises(PluginError) as refused:
        bare(plugin())
    assert refused.value.plugin == plugin.name
    assert method in refused.value.message and f"'{hook}'" in refused.value.message
    registry = bare()
    with pytest.raises(PluginError) as again:
        registry.plugins.register(plugin(), "mine")
    assert again.value.plugin == "mine" and method in again.value.message
    assert "mine" not in registry.plugins and registry.plugins.names() == []


def test_a_refused_replacement_keeps_the_plugin_it_would_replace() -> None:
    registry = bare(SwitchedOff())
    registry.add(echo)
    with pytest.raises(PluginError, match="harness_post_call is not marked @hookimpl"):
        registry.plugins.register(Unmarked(), "switched_off")
    kept = registry.plugins.get("switched_off")
    assert isinstance(kept, SwitchedOff)
    assert registry.call("echo", {"x": 1}) == 1 and kept.seen == ["pre_call", "post_call"]


def test_legitimate_plugins_still_register() -> None:
    newer, no_marks, child = NewerHook(), NoMarks(), SwitchedOffChild()
    registry = bare(newer, no_marks, child)
    assert registry.plugins.names() == ["newer_hook", "no_marks", "switched_off_child"]
    registry.add(echo)
    assert registry.call("echo", {"x": 2}) == 2  # NoMarks' post_call never runs (it would raise)
    assert child.seen == ["pre_call"]  # the inherited post_call is switched off


def test_the_kit_still_reports_the_unmarked_hook_and_runs_its_other_checks() -> None:
    kit = suite(PluginTests, plugin_factory=Unmarked)
    with pytest.raises(AssertionError, match="harness_post_call is not marked with @hookimpl, so it is never called"):
        kit.test_hooks_match_specs()
    kit.test_registers_and_unregisters()  # registered although the registry outside the kit refuses it
    with pytest.raises(PluginError):
        bare(Unmarked())  # the kit's leniency does not outlive its checks


# ---------------------------------------------------------------------- 2. the core's fields in stats()


class StatsClobber:
    name = "stats_clobber"

    @hookimpl
    def harness_stats(self, registry: Any) -> dict[str, Any]:
        return {"total": 1, "tools": {"echo": {"calls": 0, "mine": 1}, "ghost": {"calls": 9, "mine": 2}}}


def test_stats_keep_the_core_s_count_and_invent_no_tool() -> None:
    registry = bare(StatsClobber())
    registry.add(echo)
    for x in (1, 2):
        registry.call("echo", {"x": x})
    assert registry.stats() == {"tools": {"echo": {"calls": 2, "mine": 1}}, "stats_clobber": {"total": 1}}


class KitStatsClobber:
    name = "kit_stats_clobber"

    @hookimpl
    def harness_stats(self, registry: Any) -> dict[str, Any]:
        return {"tools": {"conformance_probe": {"calls": 0, "mine": 1}}}


class StatsInvents:
    name = "stats_invents"

    @hookimpl
    def harness_stats(self, registry: Any) -> dict[str, Any]:
        return {"tools": {"ghost": {"mine": 1}}}


def test_the_kit_fails_a_plugin_whose_tool_stats_are_left_out() -> None:
    with pytest.raises(AssertionError) as clobber:
        suite(PluginTests, plugin_factory=KitStatsClobber).test_stats_after_calls()
    text = str(clobber.value)
    assert "before any call, its harness_stats gives 0 as the 'calls' of tool 'conformance_probe'" not in text
    assert (
        "its harness_stats gives 0 as the 'calls' of tool 'conformance_probe', not the 6 calls made: registry.stats() "
        "keeps the core's count and leaves the plugin's out (name its own counters otherwise)"
    ) in text
    with pytest.raises(AssertionError, match="statistics for tool 'ghost', which the registry does not have"):
        suite(PluginTests, plugin_factory=StatsInvents).test_stats_after_calls()
