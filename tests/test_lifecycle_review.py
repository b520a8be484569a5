"""Plugin and tool changes are all or nothing: a refused replacement leaves what it would replace as it was."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import (
    Call,
    PluginError,
    RateLimitExceeded,
    Tool,
    ToolArgumentError,
    ToolDefinitionError,
    ToolNotFound,
    ToolRegistry,
    hookimpl,
)


class Tracker:
    """Records what it is told about tools; ``order`` places it before or after the others."""

    def __init__(self, order: int = 0) -> None:
        self.order = order
        self.tools: set[Tool] = set()
        self.removed: list[str] = []

    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        self.tools.add(tool)

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        self.tools.discard(tool)
        self.removed.append(tool.name)


class BrokenRemoval:
    order = -100  # told before the others

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        raise RuntimeError("removal broke")


class FailsToConfigure:
    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        raise ConnectionError("redis down")

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        return None


class Wrapper:
    @hookimpl(wrapper=True)
    def harness_pre_call(self, call: Call) -> Any:
        return (yield)


class Coroutine:
    @hookimpl
    async def harness_pre_call(self, call: Call) -> None:
        return None


class Misspelt:
    @hookimpl
    def harness_pre_cal(self, call: Call) -> None:
        return None


class RefusesTools:
    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        raise RuntimeError("no tools here")


BROKEN = [FailsToConfigure, Wrapper, Coroutine, Misspelt, RefusesTools]


def div(a: int, b: int) -> float:
    return a / b


@pytest.mark.parametrize("broken", BROKEN, ids=lambda c: c.__name__)
def test_a_refused_replacement_keeps_the_plugin_it_would_replace(broken: type) -> None:
    old = Tracker()
    registry = ToolRegistry(plugins={"tracker": old})
    registry.add(div, name="div")
    for replace in (registry.plugins.replace, lambda name, plugin: registry.plugins.register(plugin, name)):
        with pytest.raises(PluginError) as raised:
            replace("tracker", broken())
        assert raised.value.plugin == "tracker"
        assert registry.plugins.get("tracker") is old
        assert old.removed == [] and old.tools == {registry.get("div")}  # never told it left
        assert "tracker" in registry.plugins.plan.active
    registry.plugins.unregister("logging")  # a later change: the old plugin is still there
    assert registry.plugins.get("tracker") is old
    registry.remove("div")
    assert old.removed == ["div"]


@pytest.mark.parametrize("broken", BROKEN, ids=lambda c: c.__name__)
def test_a_refused_replacement_of_a_standard_guard_leaves_calls_guarded(broken: type) -> None:
    registry = ToolRegistry()
    registry.add(div, name="div", rate_limit={"rate": 0.001, "burst": 1})
    limiter, validator = registry.plugins.get("rate_limit"), registry.plugins.get("validation")
    with pytest.raises(PluginError):
        registry.plugins.replace("rate_limit", broken())
    with pytest.raises(PluginError):
        registry.plugins.replace("validation", broken())
    registry.plugins.block("logging")  # any later plugin change re-compiles the plan
    assert registry.plugins.get("rate_limit") is limiter and registry.plugins.get("validation") is validator
    assert registry.plugins.failures == []
    with pytest.raises(ToolArgumentError):
        registry.call("div", {"a": "1; DROP", "b": []})
    assert registry.call("div", {"a": 1, "b": 2}) == 0.5
    with pytest.raises(RateLimitExceeded):
        registry.call("div", {"a": 1, "b": 2})


def test_a_refused_replacement_of_a_blocked_name_stays_blocked() -> None:
    registry = ToolRegistry(block=["rate_limit"])
    with pytest.raises(PluginError):
        registry.plugins.replace("rate_limit", FailsToConfigure())
    assert registry.plugins.is_blocked("rate_limit") and "rate_limit" not in registry.plugins


@pytest.mark.parametrize("way", ["unregister", "block"])
def test_a_plugin_whose_tool_removed_raises_can_still_be_taken_out(way: str) -> None:
    registry = ToolRegistry(plugins={"broken": BrokenRemoval()})
    registry.add(div, name="div")
    getattr(registry.plugins, way)("broken")
    assert "broken" not in registry.plugins
    assert "broken" not in registry.plugins.plan.active
    assert registry.plugins.is_blocked("broken") is (way == "block")


def test_every_plugin_is_told_of_a_removal_before_one_error_is_raised() -> None:
    after = Tracker(order=100)
    registry = ToolRegistry(plugins={"broken": BrokenRemoval(), "after": after})
    registry.add(div, name="div")
    with pytest.raises(PluginError, match="removal broke") as raised:
        registry.remove("div")
    assert raised.value.plugin == "broken"
    assert "div" not in registry and after.removed == ["div"]


def test_a_tool_replacement_tells_every_plugin_even_if_a_removal_raises() -> None:
    after = Tracker(order=100)
    registry = ToolRegistry(plugins={"broken": BrokenRemoval(), "after": after})
    old = registry.add(div, name="div")
    with pytest.raises(PluginError, match="removal broke"):
        registry.add(lambda a, b: a * b, name="div", replace=True)
    new = registry.get("div")
    assert new is not old and after.tools == {new} and after.removed == ["div"]


def test_a_refused_tool_replacement_leaves_the_plugins_with_the_old_tool() -> None:
    before, after = Tracker(order=-100), Tracker(order=100)
    registry = ToolRegistry(plugins={"before": before, "after": after})
    old = registry.add(div, name="div")
    with pytest.raises(ToolDefinitionError, match="'cache' option"):  # the standard cache plugin refuses it
        registry.add(lambda a, b: a * b, name="div", replace=True, options={"cache": "no"})
    assert registry.get("div") is old
    assert before.tools == {old} and after.tools == {old}
    with pytest.raises(ToolArgumentError):  # validation still knows the old tool's schema
        registry.call("div", {"a": "x", "b": 1})
    assert registry.call("div", {"a": 1, "b": 4}) == 0.25


def test_a_refused_new_tool_is_forgotten_by_the_plugins_told_of_it() -> None:
    before = Tracker(order=-100)
    registry = ToolRegistry(plugins={"before": before})
    with pytest.raises(ToolDefinitionError):
        registry.add(div, name="div", options={"cache": "no"})
    assert "div" not in registry and before.tools == set()


def test_a_tool_package_that_failed_to_load_is_tried_again_on_refresh(dists: Any) -> None:
    site = dists.make(
        "hx-late",
        {
            "hx_late": "import hx_late_dep\nfrom harness_one import defineTool\n\n@defineTool(registry=None)\ndef late() -> str:\n    return hx_late_dep.VALUE\n"
        },
        {"harness_one.tools": {"late": "hx_late"}},
    )
    registry = ToolRegistry(discover=True, standard_plugins=False)
    assert "late" not in registry
    assert [f.name for f in registry.discovery.failures] == ["late"]
    (site / "hx_late_dep.py").write_text("VALUE = 'installed'\n")  # the missing dependency installed
    dists.modules.append("hx_late_dep")
    assert [f.name for f in registry.discovery.failures] == ["late"]  # recorded until tried again
    registry.load_entry_points(refresh=True)
    assert registry.call("late") == "installed"
    assert registry.discovery.failures == []


class Stats:
    def __init__(self, value: Any) -> None:
        self.value = value

    @hookimpl
    def harness_stats(self) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


@pytest.mark.parametrize("value", ["abc", ["x"], 7, {"tools": ["x"]}, {"tools": {"div": 5}}, RuntimeError("stats broke")])
def test_a_broken_stats_hook_is_a_plugin_error_naming_it(value: Any) -> None:
    registry = ToolRegistry(plugins={"odd": Stats(value)})
    registry.add(div, name="div")
    with pytest.raises(PluginError, match="Plugin 'odd'") as raised:
        registry.stats()
    assert raised.value.plugin == "odd"
    registry.plugins.unregister("odd")
    assert registry.stats()["tools"]["div"]["calls"] == 0


def test_removing_an_unhashable_name_is_not_found() -> None:
    registry = ToolRegistry()
    with pytest.raises(ToolNotFound):
        registry.remove([])  # type: ignore[arg-type]


def test_slots_keep_nothing_for_tools_made_and_removed_per_session() -> None:
    """The in-memory slots kept an empty set for every tool name that ever held one: 2,000 per-session tools, 2,000 entries."""
    registry = ToolRegistry(autoload=False)
    slots = registry.plugins.get("concurrency").slots
    for n in range(200):
        registry.add(lambda: "ran", name=f"session_{n}", max_concurrency=2)
        assert registry.call(f"session_{n}") == "ran"
        registry.remove(f"session_{n}")
    assert slots._held == {} and slots.running(None, now=0.0) == 0
