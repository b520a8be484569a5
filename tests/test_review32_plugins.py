"""The plugin set: a plugin whose set-up raises a ToolError at load is a load failure, the Python API's
settings are type-checked, a budget or circuit breaker shared by two registries keeps the first one's state,
environment options reach a class registered later, and the same plugin registered again changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness_one import PluginError, ToolRegistry, hookimpl
from harness_one.state import StateUnavailable
from harness_one_plugins import BudgetPlugin, CachePlugin, CircuitBreakerPlugin

# ------------------------------------------------------------------ finding 1: a set-up's ToolError at load

_FAILING = """
import os
from harness_one import ToolDefinitionError, hookimpl
from harness_one.state import StateUnavailable

class Failing:
    @hookimpl
    def harness_configure(self, registry):
        kind = os.environ.get("REVIEW32_FAIL", "state")
        raise StateUnavailable("redis down") if kind == "state" else ToolDefinitionError("configure refused")
"""


def _failing(dists: Any) -> None:
    dists.make(
        "review32-failing", {"review32_failing": _FAILING}, {"harness_one.plugins": {"failing": "review32_failing:Failing"}}
    )


@pytest.mark.parametrize(("kind", "error"), [("state", "StateUnavailable: redis down"), ("def", "ToolDefinitionError")])
def test_a_tool_error_from_an_entry_point_plugins_configure_is_a_load_failure(
    dists: Any, monkeypatch: pytest.MonkeyPatch, kind: str, error: str
) -> None:
    """Before, the ToolError propagated out of ``ToolRegistry()`` (a RuntimeError there was a load failure)."""
    monkeypatch.setenv("REVIEW32_FAIL", kind)
    _failing(dists)
    registry = ToolRegistry()
    assert "failing" not in registry.plugins
    [failure] = [f for f in registry.plugins.failures if f.name == "failing"]
    assert failure.distribution == "review32-failing"
    assert error in failure.error
    assert "validation" in registry.plugins  # the others loaded
    with pytest.raises(PluginError, match="Plugin 'failing' from review32-failing failed to load") as raised:
        ToolRegistry(strict=True)
    assert raised.value.plugin == "failing"


def test_doctor_reports_a_plugin_whose_configure_raises_a_tool_error(runner: Any, dists: Any) -> None:
    from harness_one._cli import main

    _failing(dists)
    result = runner.invoke(main, ["doctor"])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "harness_one.plugins:failing from review32-failing: StateUnavailable: redis down" in result.output


def test_registering_such_a_plugin_by_hand_still_raises_its_error(dists: Any) -> None:
    """``register()`` by the caller raises a set-up's ToolError as it is (hooks.md), and changes nothing."""
    _failing(dists)
    registry = ToolRegistry(block=["failing"])
    registry.plugins.unblock("failing")
    from review32_failing import Failing  # type: ignore[import-not-found]

    with pytest.raises(StateUnavailable, match="redis down"):
        registry.plugins.register(Failing(), "failing")
    assert "failing" not in registry.plugins


# ------------------------------------------------------------------ finding 2: the settings' types


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block": "cache"}, "block must be a list of plugin names, not 'cache'"),
        ({"block": b"cache"}, "block must be a list of plugin names, not b'cache'"),
        ({"block": None}, "block must be a list of plugin names, not None"),
        ({"block": ["cache", 1]}, "block must be a list of plugin names, and it holds 1"),
        ({"allow": "validation"}, "allow must be a list of plugin names, or None for every installed one, not 'validation'"),
        ({"allow": 3}, "allow must be a list of plugin names, or None for every installed one, not 3"),
        ({"autoload": "false"}, "autoload must be True, False or None (the environment's setting), not 'false'"),
        ({"strict": "false"}, "strict must be True, False or None (the environment's setting), not 'false'"),
        ({"strict": 0}, "strict must be True, False or None"),
        ({"standard_plugins": "no"}, "standard_plugins must be True or False, not 'no'"),
        ({"standard_plugins": None}, "standard_plugins must be True or False, not None"),
    ],
)
def test_settings_of_the_wrong_type_are_refused_naming_the_keyword(kwargs: dict[str, Any], message: str) -> None:
    """Before, ``block="cache"`` blocked c, a, c, h, e and kept the cache, ``autoload="false"`` turned autoload
    on, ``strict="false"`` was strict, and ``block=None`` was an untyped TypeError."""
    with pytest.raises(PluginError) as raised:
        ToolRegistry(**kwargs)
    assert message in str(raised.value)


def test_settings_of_the_right_types_still_work() -> None:
    assert "cache" not in ToolRegistry(block=iter(["cache"]), autoload=None, strict=None).plugins
    assert "cache" not in ToolRegistry(block=("cache",), autoload=False, strict=False).plugins
    assert ToolRegistry(allow={"validation"}, standard_plugins=True).plugins.names() == ["validation"]


# ------------------------------------------------------------------ finding 3: one plugin, two registries


@pytest.mark.parametrize(("make", "fetch"), [(BudgetPlugin, "budgets"), (CircuitBreakerPlugin, "circuits")])
def test_a_plugin_shared_with_a_registry_on_other_state_is_refused(tmp_path: Path, make: Any, fetch: str) -> None:
    """Before, the second registry's ``harness_configure`` moved the plugin's store to its own state: the
    first registry's counts (or circuits) were left behind unseen."""
    plugin = make()
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    store = getattr(first.state, fetch)()
    assert plugin.store is store
    for state in (None, str(tmp_path / "state.sqlite3")):
        with pytest.raises(PluginError, match=f"The {plugin.name} plugin .* state of the registry it was first added to"):
            ToolRegistry(autoload=False, state=state, plugins={plugin.name: plugin})
        assert plugin.store is store  # still the first registry's
    second = ToolRegistry(autoload=False, state=first.state, plugins={plugin.name: plugin})  # one state: fine
    assert plugin.store is store and second.plugins.get(plugin.name) is plugin
    first.plugins.replace(plugin.name, plugin)  # registered again in its own registry: fine
    own = make(store=store)
    for state in (None, str(tmp_path / "other.sqlite3")):  # a store of its own: shared by any registries
        ToolRegistry(autoload=False, state=state, plugins={own.name: own})
        assert own.store is store


def test_a_shared_budget_counts_runs_once_for_both_registries_on_one_state() -> None:
    budget = BudgetPlugin(max_calls=1)
    first = ToolRegistry(autoload=False, plugins={"budget": budget})
    second = ToolRegistry(autoload=False, state=first.state, plugins={"budget": budget})
    for registry in (first, second):
        registry.add(lambda: 1, name="f")
    assert first.try_call("f", context={"run_id": "R"}).ok
    assert not second.try_call("f", context={"run_id": "R"}).ok  # the same run's budget, in the one state


@pytest.mark.parametrize("make", [BudgetPlugin, CircuitBreakerPlugin])
def test_two_registries_on_one_redis_share_a_plugin_and_memory_is_refused(redis_url: str, make: Any) -> None:
    plugin = make()
    first = ToolRegistry(autoload=False, state=redis_url, plugins={plugin.name: plugin})
    store = plugin.store
    assert type(store).__name__.startswith("Redis")
    second = ToolRegistry(autoload=False, state=redis_url, plugins={plugin.name: plugin})  # the same Redis: fine
    assert plugin.store is store
    with pytest.raises(PluginError, match=f"The {plugin.name} plugin"):
        ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    with pytest.raises(PluginError, match=f"The {plugin.name} plugin"):
        ToolRegistry(autoload=False, state=redis_url + "?prefix=other:", plugins={plugin.name: plugin})
    assert plugin.store is store
    first.state.close()
    second.state.close()


# ------------------------------------------------------------------ finding 4: environment options, later


def test_environment_options_apply_to_a_class_registered_after_a_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a plugin blocked at start-up and registered later by class lost its HARNESS_ONE_PLUGIN_<NAME>."""
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_CACHE", '{"ttl": 5, "max_entries": 9}')
    registry = ToolRegistry(autoload=False, block=["cache"])
    registry.plugins.unblock("cache")
    registry.plugins.register(CachePlugin)
    assert (registry.plugins.get("cache").ttl, registry.plugins.get("cache").max_entries) == (5, 9)
    assert registry.plugins.options["cache"] == {"ttl": 5, "max_entries": 9}
    registry = ToolRegistry(autoload=False, block=["cache"], plugin_options={"cache": {"ttl": 7}})
    registry.plugins.unblock("cache")
    registry.plugins.register(CachePlugin)  # the argument's options win over the environment's, as at start-up
    assert (registry.plugins.get("cache").ttl, registry.plugins.get("cache").max_entries) == (7, 9)


def test_a_malformed_environment_option_of_a_blocked_plugin_is_refused_when_it_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_CACHE", "not json")
    registry = ToolRegistry(autoload=False, block=["cache"])  # not read while the plugin is kept out
    registry.plugins.unblock("cache")
    with pytest.raises(PluginError, match="HARNESS_ONE_PLUGIN_CACHE must be a JSON object"):
        registry.plugins.register(CachePlugin)
    assert "cache" not in registry.plugins


# ------------------------------------------------------------------ finding 5: the same plugin again


class _Counter:
    name = "counter"

    def __init__(self) -> None:
        self.configured = 0
        self.added: list[str] = []
        self.removed: list[str] = []

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        self.configured += 1

    @hookimpl
    def harness_tool_added(self, tool: Any) -> None:
        self.added.append(tool.name)

    @hookimpl
    def harness_tool_removed(self, tool: Any) -> None:
        self.removed.append(tool.name)


def test_registering_the_same_object_again_changes_nothing() -> None:
    """Before, it was configured again and told each tool a second time, never told it left."""
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: 1, name="f")
    counter = _Counter()
    assert registry.plugins.register(counter) == "counter"
    assert registry.plugins.register(counter) == "counter"
    assert registry.plugins.replace("counter", counter) == "counter"
    assert (counter.configured, counter.added, counter.removed) == (1, ["f"], [])
    assert registry.plugins.get("counter") is counter
    registry.plugins.unregister("counter")
    assert counter.removed == ["f"]


def test_two_plugins_of_one_name_in_a_list_are_refused() -> None:
    """Before, ``plugins=[CachePlugin(ttl=1), CachePlugin(ttl=2)]`` silently kept the second."""
    with pytest.raises(PluginError, match="plugins= holds two plugins named 'cache'") as raised:
        ToolRegistry(autoload=False, plugins=[CachePlugin(ttl=1), CachePlugin(ttl=2)])
    assert raised.value.plugin == "cache"
    with pytest.raises(PluginError, match="two plugins named 'counter'"):
        ToolRegistry(autoload=False, plugins=[_Counter, _Counter()])
    registry = ToolRegistry(autoload=False, plugins={"cache": CachePlugin(ttl=1), "cache_b": CachePlugin(ttl=2)})
    assert registry.plugins.get("cache").ttl == 1 and registry.plugins.get("cache_b").ttl == 2
