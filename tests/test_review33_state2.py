"""Review 33, plugin state (second pass): a registry whose building failed in another thread holds none of its plugins,
not even while that thread runs on and the registry waits for the garbage collector; budget and circuit_breaker whose
last registry is gone use the newest registry still holding them (its clock, its tools' policies); the kit's release
check compares with a new plugin's first call made before any failed call; the idempotency store contract checks that
a record keeps its ``quoted`` flag."""

from __future__ import annotations

import dataclasses
import gc
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness_one import ManualClock, ToolError, ToolRegistry, hookimpl
from harness_one.state import MemoryStore, Record
from harness_one.testing import IdempotencyStoreContract, PluginTests
from harness_one_plugins import BudgetPlugin, CircuitBreakerPlugin, IdempotencyPlugin

PLUGINS = [lambda: BudgetPlugin(max_calls=1), CircuitBreakerPlugin, IdempotencyPlugin]
IDS = ["budget", "circuit", "idem"]

# ---------------------------------------------------------------- a registry that failed to build holds no plugin


@pytest.mark.parametrize("make", PLUGINS, ids=IDS)
def test_a_registry_that_failed_to_build_in_a_live_thread_holds_no_plugin(make: Callable[[], Any], tmp_path: Path) -> None:
    """Before, the failed registry (kept alive here, as a reference cycle keeps it until collected) held the plugin
    while the thread that failed to build it ran on: a registry on another state was refused."""
    plugin, failed = make(), []

    class Bad:
        @hookimpl
        def harness_configure(self, registry: ToolRegistry) -> None:
            failed.append(registry)  # alive after its building failed
            raise RuntimeError("misconfigured")

    with pytest.raises(Exception, match="misconfigured"):
        ToolRegistry(autoload=False, plugins={plugin.name: plugin, "bad": Bad()})  # in this thread, which runs on
    built: list[object] = []

    def build() -> None:
        try:
            built.append(ToolRegistry(autoload=False, state=f"sqlite:///{tmp_path / 's.db'}", plugins={plugin.name: plugin}))
        except Exception as exc:
            built.append(exc)

    worker = threading.Thread(target=build)
    worker.start()
    worker.join(10)
    assert len(failed) == 1 and len(built) == 1 and isinstance(built[0], ToolRegistry), built
    assert built[0].plugins.get(plugin.name) is plugin


# ---------------------------------------------------------------- the last registry gone, the newest holding one serves


def test_a_budget_whose_last_registry_is_gone_keeps_the_clock_of_one_still_using_it() -> None:
    """Before, its clock fell back to 0.0: a run's counts never expired."""
    clock, plugin = ManualClock(1000.0), BudgetPlugin(max_calls=5, ttl=60.0)
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin}, clock=clock)
    first.add(lambda: 1, name="f")
    second = ToolRegistry(autoload=False, state=first.state, plugins={plugin.name: plugin}, clock=clock)
    del second
    gc.collect()
    first.call("f", context={"run_id": "R"})
    assert plugin.used("R") == 1
    clock.advance(1000.0)  # past the ttl
    assert plugin.used("R") == 0


def test_a_budget_with_its_own_store_keeps_the_clock_of_a_registry_still_using_it() -> None:
    from harness_one.state import MemoryBudgets

    clock, plugin = ManualClock(1000.0), BudgetPlugin(max_calls=5, ttl=60.0, store=MemoryBudgets())
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin}, clock=clock)
    first.add(lambda: 1, name="f")
    second = ToolRegistry(autoload=False, plugins={plugin.name: plugin}, clock=clock)
    del second
    gc.collect()
    first.call("f", context={"run_id": "R"})
    clock.advance(1000.0)
    assert plugin.used("R") == 0


def test_a_circuit_whose_last_registry_is_gone_reads_the_tools_of_one_still_using_it() -> None:
    """Before, ``state`` found no policy for a tool not called yet (its circuit shared with an open one): closed."""

    def down() -> None:
        raise OSError("backend down")

    clock, plugin = ManualClock(1000.0), CircuitBreakerPlugin()
    first = ToolRegistry(autoload=False, plugins={plugin.name: plugin}, clock=clock)
    policy = {"min_calls": 1, "failure_ratio": 0.5, "open_for": 30, "key": "backend"}
    first.add(down, name="f", circuit_breaker=policy)
    first.add(down, name="g", circuit_breaker=policy)
    second = ToolRegistry(autoload=False, state=first.state, plugins={plugin.name: plugin}, clock=clock)
    del second
    gc.collect()
    assert first.try_call("f").ran  # failed: the shared circuit opens
    assert plugin.state("g") == "open"  # g's policy, found among the registry's tools


def test_a_plugin_with_every_registry_gone_falls_back_as_before() -> None:
    plugin = BudgetPlugin(max_calls=1)
    ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    gc.collect()
    assert plugin.used("R") == 0


# ---------------------------------------------------------------- the kit's release check: a first call before failures


def test_the_release_check_compares_with_a_first_call_made_before_the_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module plugin's (or a shared factory's) state is every plugin's: before, the "new plugin's first call" came
    after the failed calls had spent its slots, so the hint to give back what pre_call took was dropped and the message
    said a new plugin's first call fails too."""
    leaky = types.ModuleType("leaky_review33")
    leaky.name = "leaky"  # type: ignore[attr-defined]
    leaky.busy = 0  # type: ignore[attr-defined]

    @hookimpl
    def harness_pre_call(call: Any) -> None:
        if leaky.busy >= 50:  # type: ignore[attr-defined]
            raise ToolError("no slot free")
        leaky.busy += 1  # type: ignore[attr-defined]

    @hookimpl
    def harness_post_call(call: Any) -> None:
        leaky.busy -= 1  # type: ignore[attr-defined]

    leaky.harness_pre_call = harness_pre_call  # type: ignore[attr-defined]
    leaky.harness_post_call = harness_post_call  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, leaky.__name__, leaky)
    suite = type("TestLeaky", (PluginTests,), {"plugin_factory": staticmethod(lambda: leaky), "supports_async": False})
    with pytest.raises(AssertionError) as failed:
        suite().test_releases_after_failures_and_cancellations()
    message = str(failed.value)
    assert "where a new plugin's first call gives" in message and "give back what pre_call took" in message, message
    assert "as a new plugin's first one does" not in message


# ---------------------------------------------------------------- the idempotency store contract checks quoted


class _Unquoting(MemoryStore):
    """A store written before ``Record.quoted``: it keeps every field but that one."""

    def finish(self, scope: str, key: str, record: Record, **kwargs: Any) -> bool:
        return bool(super().finish(scope, key, dataclasses.replace(record, quoted=False), **kwargs))


def _check(store: Callable[[], Any], **flags: Any) -> Callable[[], None]:
    suite = type("TestStore", (IdempotencyStoreContract,), dict(flags))()

    def run() -> None:
        made = store()
        suite.test_a_finished_quoted_value_begins_again_quoted(made, made)

    return run


def test_the_contract_refuses_a_store_that_drops_quoted() -> None:
    with pytest.raises(AssertionError, match="quoted"):
        _check(_Unquoting)()


def test_the_contract_passes_the_standard_memory_store_and_a_switched_off_one() -> None:
    _check(MemoryStore)()
    with pytest.raises(pytest.skip.Exception, match="keeps_quoted"):
        _check(_Unquoting, keeps_quoted=False)()


@pytest.mark.parametrize("own", [False, True], ids=["from-state", "own-store"])
def test_a_plugin_registered_again_in_one_registry_notes_it_once(own: bool) -> None:
    """Each registration noted the registry again: 1,000 registrations kept 1,001 references."""
    from harness_one.state import MemoryBudgets

    plugin = BudgetPlugin(max_calls=5, store=MemoryBudgets() if own else None)
    reg = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    for _ in range(50):
        reg.plugins.unregister(plugin.name)
        reg.plugins.register(plugin, name=plugin.name)
    users = vars(plugin)["_harness_state_users"]
    assert [ref() for ref in users] == [reg]
