"""One stateful plugin object given to two registries (rate_limit, concurrency, idempotency, budget,
circuit_breaker): it keeps the state of the first, a second registry on the same state shares it, one on
other state is refused (``PluginError``) rather than the plugin moving there, and a plugin given its own
store is shared by any registries."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness_one import CircuitOpen, ManualClock, PluginError, RateLimitExceeded, ToolBusy, ToolError, ToolRegistry, hookimpl
from harness_one.state import State
from harness_one_plugins import BudgetPlugin, CircuitBreakerPlugin, ConcurrencyPlugin, IdempotencyPlugin, RateLimitPlugin
from harness_one_plugins.budget import BudgetExhausted


def _rate_limit(first: ToolRegistry, second: ToolRegistry) -> bool:
    for registry in (first, second):
        registry.add(lambda: 1, name="f", rate_limit={"rate": 0.001, "burst": 1}, replace=True)
    assert first.try_call("f").ok
    return isinstance(second.try_call("f").error, RateLimitExceeded)  # the one token was taken from the same bucket


def _concurrency(first: ToolRegistry, second: ToolRegistry) -> bool:
    inner: list[ToolError | None] = []
    second.add(lambda: 1, name="f", max_concurrency=1, replace=True)
    first.add(lambda: inner.append(second.try_call("f").error), name="f", max_concurrency=1, replace=True)
    assert first.try_call("f").ok
    return len(inner) == 1 and isinstance(inner[0], ToolBusy)  # the one slot is held by the call running in the first registry


def _idempotency(first: ToolRegistry, second: ToolRegistry) -> bool:
    ran: list[int] = []
    for registry in (first, second):
        registry.add(lambda: ran.append(1), name="f", replace=True)
    first.call("f", idempotency_key="k")
    second.call("f", idempotency_key="k")
    return ran == [1]  # the second call replayed the first's outcome


def _budget(first: ToolRegistry, second: ToolRegistry) -> bool:
    for registry in (first, second):
        registry.add(lambda: 1, name="f", replace=True)
    assert first.try_call("f", context={"run_id": "R"}).ok
    return isinstance(second.try_call("f", context={"run_id": "R"}).error, BudgetExhausted)  # the run's one call is spent


def _circuit(first: ToolRegistry, second: ToolRegistry) -> bool:
    def down() -> None:
        raise OSError("backend down")

    policy = {"min_calls": 1, "failure_ratio": 0.5, "open_for": 30}
    for registry in (first, second):
        registry.add(down, name="f", circuit_breaker=policy, replace=True)
    assert first.try_call("f").ran  # it ran, failed, and opened the circuit
    return isinstance(second.try_call("f").error, CircuitOpen)


@dataclass
class Case:
    make: Callable[..., Any]  # the plugin, given its own store by ``own=``
    store: str  # the attribute holding its store
    fetch: str  # the State method making it
    own: str  # the argument giving it its own store
    shared: Callable[[ToolRegistry, ToolRegistry], bool]  # a call in each: whether the second saw the first's

    @property
    def name(self) -> str:
        return str(self.make().name)


CASES = [
    Case(lambda **own: RateLimitPlugin(clock=ManualClock(), **own), "backend", "rate_limits", "backend", _rate_limit),
    Case(ConcurrencyPlugin, "slots", "concurrency", "slots", _concurrency),
    Case(IdempotencyPlugin, "store", "idempotency", "store", _idempotency),
    Case(lambda **own: BudgetPlugin(max_calls=1, **own), "store", "budgets", "store", _budget),
    Case(lambda **own: CircuitBreakerPlugin(clock=ManualClock(), **own), "store", "circuits", "store", _circuit),
]
IDS = [case.name for case in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_second_registry_on_other_state_is_refused_and_the_first_keeps_its_own(case: Case, tmp_path: Path) -> None:
    """Before, the second registry's ``harness_configure`` moved the plugin to its own state: the first
    registry's buckets, slots or records were left where none of its calls looked."""
    plugin = case.make()
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    store = getattr(first.state, case.fetch)()
    assert getattr(plugin, case.store) is store
    for state in (None, str(tmp_path / "state.sqlite3")):
        with pytest.raises(PluginError, match=f"The {plugin.name} plugin keeps its .* first added to") as raised:
            ToolRegistry(autoload=False, state=state, plugins={plugin.name: plugin})
        assert raised.value.plugin == plugin.name
        assert f"({type(plugin).__name__}({case.own}=...)" in str(raised.value)
        assert getattr(plugin, case.store) is store  # still the first registry's
    assert case.shared(first, first)  # and the first registry works on it
    first.plugins.replace(plugin.name, plugin)  # registered again in its own registry: fine
    assert getattr(plugin, case.store) is store


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_two_registries_on_one_state_share_the_plugins_state(case: Case) -> None:
    plugin = case.make()
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    second = ToolRegistry(autoload=False, state=first.state, plugins={plugin.name: plugin})
    assert second.plugins.get(plugin.name) is plugin
    assert getattr(plugin, case.store) is getattr(first.state, case.fetch)()
    assert case.shared(first, second)  # counted once, in the one state


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_plugin_with_its_own_store_is_shared_by_registries_on_any_state(case: Case, tmp_path: Path) -> None:
    store = getattr(State(), case.fetch)()
    plugin = case.make(**{case.own: store})
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    second = ToolRegistry(autoload=False, state=str(tmp_path / "state.sqlite3"), plugins={plugin.name: plugin})
    assert getattr(plugin, case.store) is store
    assert case.shared(first, second)


def test_an_idempotency_plugin_with_its_own_file_is_shared_by_registries_on_any_state(tmp_path: Path) -> None:
    plugin = IdempotencyPlugin(path=tmp_path / "records.sqlite3")
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    second = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    assert _idempotency(first, second)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_registries_on_one_redis_url_and_prefix_share_the_plugin_and_the_refusal_masks_the_password(
    case: Case,
) -> None:
    """No server is contacted: the plugins' Redis stores connect on their first call."""
    url = "redis://:hunter2@127.0.0.1:1/0"
    plugin = case.make()
    first = ToolRegistry(autoload=False, state=url, plugins={plugin.name: plugin})
    store = getattr(plugin, case.store)
    assert type(store).__name__.startswith("Redis")
    ToolRegistry(autoload=False, state=url, plugins={plugin.name: plugin})  # another State, the same Redis: fine
    ToolRegistry(autoload=False, state=State(url, prefix=None), plugins={plugin.name: plugin})
    assert getattr(plugin, case.store) is store
    for other in (State(url, prefix="b:"), State(url + "?prefix=b:"), State("redis://:hunter2@127.0.0.1:1/1"), None):
        with pytest.raises(PluginError, match=f"The {plugin.name} plugin") as raised:
            ToolRegistry(autoload=False, state=other, plugins={plugin.name: plugin})
        message = str(raised.value)
        assert "hunter2" not in message and repr(first.state) in message and repr(other or State()) in message
        assert ("with prefix 'b:'" in message) is (other is not None and other.prefix == "b:")
    assert getattr(plugin, case.store) is store


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_registries_on_one_redis_share_the_plugins_state(case: Case, redis_url: str) -> None:
    plugin = case.make()
    first = ToolRegistry(autoload=False, state=redis_url, plugins={plugin.name: plugin})
    second = ToolRegistry(autoload=False, state=redis_url, plugins={plugin.name: plugin})  # another State object
    try:
        assert case.shared(first, second)  # counted once, in the one Redis
    finally:
        first.state.close()
        second.state.close()


# ------------------------------------------------------------------ an entry point naming a plugin object


def test_an_entry_point_naming_a_stateful_plugin_object_fails_the_second_registry_naming_the_entry_point(
    dists: Any,
) -> None:
    """Before, the second registry's refusal was a load failure (a warning): that registry ran without the
    budget, and every call went through."""
    source = """
        from harness_one_plugins import BudgetPlugin

        class TeamBudget(BudgetPlugin):
            name = "team_budget"

        BUDGET = TeamBudget(max_calls=1)
        """
    dists.make("shared-budget", {"shared_budget": source}, {"harness_one.plugins": {"team_budget": "shared_budget:BUDGET"}})
    first = ToolRegistry(autoload=True)
    assert "team_budget" in first.plugins and not first.plugins.failures
    with pytest.raises(PluginError, match="The team_budget plugin keeps its counters") as raised:
        ToolRegistry(autoload=True)
    assert raised.value.plugin == "team_budget"
    message = str(raised.value)
    assert "entry point 'shared_budget:BUDGET'" in message and "from shared-budget" in message
    assert "Name the plugin's class (or a factory building a new one) in the entry point" in message


def test_an_entry_point_naming_a_stateful_plugin_class_gives_each_registry_its_own(dists: Any) -> None:
    source = """
        from harness_one_plugins import BudgetPlugin

        class TeamBudget(BudgetPlugin):
            name = "team_budget"
        """
    dists.make("class-budget", {"class_budget": source}, {"harness_one.plugins": {"team_budget": "class_budget:TeamBudget"}})
    first, second = ToolRegistry(autoload=True), ToolRegistry(autoload=True)
    assert first.plugins.get("team_budget") is not second.plugins.get("team_budget")
    assert not first.plugins.failures and not second.plugins.failures


# ------------------------------------------------------------------ a plugin whose registries let it go


class _FailsSetUp:
    name = "fails"

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        raise ValueError("boom")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_plugin_in_a_registry_whose_creation_failed_joins_a_registry_on_other_state(case: Case) -> None:
    """Before, it kept the state of the registry that was never made: every other registry was refused."""
    plugin = case.make()
    with pytest.raises(PluginError, match="boom") as raised:
        ToolRegistry(autoload=False, plugins={plugin.name: plugin, "fails": _FailsSetUp()})
    second = ToolRegistry(autoload=False, plugins={plugin.name: plugin})  # (raised keeps the first alive)
    assert raised.value is not None and second.plugins.get(plugin.name) is plugin
    assert getattr(plugin, case.store) is getattr(second.state, case.fetch)()
    assert case.shared(second, second)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_plugin_every_registry_of_its_state_unregistered_joins_a_registry_on_other_state(case: Case) -> None:
    plugin = case.make()
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    same = ToolRegistry(autoload=False, state=first.state, plugins={plugin.name: plugin})
    first.plugins.unregister(plugin.name)
    with pytest.raises(PluginError, match="first added to"):  # the registry sharing its state still holds it
        ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    same.plugins.unregister(plugin.name)
    moved = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    assert getattr(plugin, case.store) is getattr(moved.state, case.fetch)()
    assert case.shared(moved, moved)


def test_a_plugin_whose_registry_is_gone_joins_a_registry_on_other_state() -> None:
    """(A rate limit holds its registry weakly; a budget or circuit breaker keeps its last one alive.)"""
    plugin = RateLimitPlugin(clock=ManualClock())
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    del first
    gc.collect()
    last = ToolRegistry(autoload=False)
    last.plugins.register(plugin, plugin.name)
    assert plugin.backend is last.state.rate_limits()


# ------------------------------------------------------------------ one Redis, however the URL spells it


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_redis_states_with_the_same_keys_share_the_plugin_however_the_url_spells_them(case: Case) -> None:
    """Before, the raw URLs and prefixes were compared: these were refused, though they share every key."""
    url = "redis://127.0.0.1:1/0"
    for first_state, other in (
        (State(url), State(url + "?timeout=1")),
        (State(url), State(url + "?socket_timeout=5")),
        (State(url), State(url, prefix="harness-one:")),
        (State(url, prefix="a:"), State(url + "?prefix=a:")),
    ):
        plugin = case.make()
        first = ToolRegistry(autoload=False, state=first_state, plugins={plugin.name: plugin})
        store = getattr(plugin, case.store)
        second = ToolRegistry(autoload=False, state=other, plugins={plugin.name: plugin})
        assert getattr(plugin, case.store) is store
        assert first.plugins.get(plugin.name) is second.plugins.get(plugin.name) is plugin
    from harness_one.state import redis_keys

    assert redis_keys(State(url + "?prefix=a:&timeout=1")) == redis_keys(State(url, prefix="a:")) and redis_keys(State()) is None
    assert redis_keys(State("redis://LOCALHOST")) == redis_keys(State("redis://localhost:6379/0"))
    assert redis_keys(State("redis://localhost/1")) != redis_keys(State("redis://localhost/0"))
