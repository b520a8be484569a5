"""The registry while it changes: plans, discovery, suggestions, exports and counts stay right.

Each race is made deterministic with events at the point where another thread's change lands.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from harness_one import Call, PluginError, ToolError, ToolNotFound, ToolRegistry, applies_to, hookimpl


@contextlib.contextmanager
def _churning(reg: ToolRegistry, names: list[str], *, remove_first: bool) -> Iterator[None]:
    """Another thread adds and removes the tools ``names`` in a loop, switching threads as often as it can."""
    stop = threading.Event()

    def churn() -> None:
        for name in itertools.cycle(names):
            if stop.is_set():
                return
            if remove_first:
                reg.remove(name)
            reg.add(lambda: 1, name=name)
            if not remove_first:
                reg.remove(name)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    other = threading.Thread(target=churn)
    other.start()
    try:
        yield
    finally:
        stop.set()
        other.join(5)
        sys.setswitchinterval(interval)


def _blocking_predicate(inside: threading.Event, go: threading.Event) -> Any:
    """An ``applies_to`` predicate that, the first time, waits while another thread changes things."""
    first = [True]

    def predicate(plugin: Any, tool: Any) -> bool:
        if first[0]:
            first[0] = False
            inside.set()
            assert go.wait(5)
        return True

    return predicate


def test_a_plan_built_across_a_plugin_change_is_not_kept() -> None:
    """A call was building the tool's plan when its plugin was unregistered: the old plan was
    stored, and the unregistered plugin ran on every later call."""
    inside, go = threading.Event(), threading.Event()
    seen: list[str] = []

    class Audit:
        @hookimpl
        @applies_to(_blocking_predicate(inside, go))
        def harness_pre_call(self, call: Call) -> None:
            seen.append(call.tool.name)

    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(lambda: "ok", name="t")
    reg.plugins.register(Audit(), "audit")
    first = threading.Thread(target=reg.call, args=("t",))
    first.start()
    assert inside.wait(5)
    reg.plugins.unregister("audit")
    go.set()
    first.join(5)
    seen.clear()  # the call in flight kept the plan it started with
    assert [reg.call("t") for _ in range(3)] == ["ok"] * 3 and seen == []


def test_plugins_registered_at_once_are_both_in_the_plan() -> None:
    """Two registrations compiled at once: the later publication could be the earlier compile."""
    inside, go = threading.Event(), threading.Event()
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(lambda: "ok", name="t")
    compile_ = reg.plugins._compile

    def slow_compile() -> Any:
        plan = compile_()
        if not inside.is_set():
            inside.set()
            go.wait(0.5)  # the other registration happens here (it waits for the lock now)
        return plan

    reg.plugins._compile = slow_compile  # type: ignore[method-assign]

    class Guard:
        def __init__(self, name: str) -> None:
            self.name = name

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            return None

    first = threading.Thread(target=reg.plugins.register, args=(Guard("a"), "a"))
    first.start()
    assert inside.wait(5)
    second = threading.Thread(target=reg.plugins.register, args=(Guard("b"), "b"))
    second.start()
    go.set()
    first.join(5)
    second.join(5)
    assert sorted(reg.plugins.plan.order["pre_call"]) == ["a", "b"]


def test_an_error_preparing_a_plan_is_a_plugin_error_under_call() -> None:
    class Flaky:
        @hookimpl
        @applies_to(lambda plugin, tool: tool.options["tier"] > 1)  # KeyError for a tool without a tier
        def harness_pre_call(self, call: Call) -> None:
            return None

    reg = ToolRegistry(standard_plugins=False, autoload=False, plugins={"flaky": Flaky()})
    reg.add(lambda: 1, name="t")
    with pytest.raises(PluginError, match=r"plugin 'flaky' while preparing the calls of 't': KeyError: 'tier'"):
        reg.call("t")  # was the KeyError itself (try_call and acall wrapped it)


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the interleaving is set with CPython's switch interval")
@pytest.mark.parametrize("tools", [10, 3000])  # the plain list and the trigram index of the suggestions
def test_an_unknown_name_while_tools_change_is_tool_not_found(tools: int) -> None:
    """Suggestions iterated the name index while another thread added and removed tools:
    ``RuntimeError: dictionary changed size during iteration`` from ``call`` (7 in 3,000)."""
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    for i in range(tools):
        reg.add(lambda: 1, name=f"tool_{i}")
    with _churning(reg, [f"tool_{i}" for i in range(tools, tools + 1000)], remove_first=False):
        for _ in range(3000 if tools == 10 else 300):
            with pytest.raises(ToolNotFound):
                reg.call("tool_99x")


def test_a_tool_that_cannot_extend_a_cached_export_is_still_added_whole() -> None:
    """A strict export cached, then a tool it cannot take: add raised after registering the tool,
    and every cached export kept its old list."""
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(lambda a: a, name="ok", parameters={"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    assert [t["function"]["name"] for t in reg.export("openai", strict=True).tools] == ["ok"]
    assert [t["name"] for t in reg.export("anthropic").tools] == ["ok"]
    reg.add(lambda data: data, name="loose", parameters={"type": "object", "properties": {"data": {"type": "object"}}})
    assert [t["name"] for t in reg.export("anthropic").tools] == ["ok", "loose"]
    with pytest.raises(ToolError, match="cannot be exported in strict mode"):
        reg.export("openai", strict=True)  # rebuilt, and says why


def test_calls_counted_on_a_replaced_tool_are_kept() -> None:
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(lambda: 1, name="t")
    old = reg._tools["t"]
    reg.call("t")
    reg.add(lambda: 2, name="t", replace=True)
    next(old.counter)  # a call that had fetched the old entry counts after the replacement
    reg.call("t")
    assert reg.call_count("t") == 3


def test_a_replaced_tools_plan_is_not_cached_by_a_late_call() -> None:
    """A call holding the old entry built its plan after the replacement forgot it: one tool's
    plan (and validator) more in the caches with every replacement."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="t")
    old = reg._tools["t"]
    reg.add(lambda: 2, name="t", replace=True)
    assert reg._plan(old) is not None  # what the late call does
    validation = reg.plugins.get("validation")
    assert old.tool not in reg.plugins.plan._per_tool and old.tool not in validation._compiled
    stats = reg.stats()  # the validation plugin's figures, read while tools change
    assert stats["validation"]["compiled"] == 1


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the interleaving is set with CPython's switch interval")
def test_stats_while_tools_are_added_never_fails() -> None:
    """The validation plugin's figures iterated its per-tool dict while tools were added."""
    reg = ToolRegistry(autoload=False)
    for i in range(3000):
        reg.add(lambda: 1, name=f"t{i}")
    with _churning(reg, [f"t{i}" for i in range(3000)], remove_first=True):
        for _ in range(300):
            assert reg.stats()["validation"]["backend"]


def test_a_tool_added_while_a_plugin_registers_is_told_to_it_once() -> None:
    """The add ran while the plugin was being configured: told by the add, then again by the
    registration's own round of the tools."""
    inside, go = threading.Event(), threading.Event()

    class Counting:
        def __init__(self) -> None:
            self.added: list[str] = []

        @hookimpl
        def harness_configure(self, registry: ToolRegistry) -> None:
            inside.set()
            go.wait(0.5)

        @hookimpl
        def harness_tool_added(self, tool: Any) -> None:
            self.added.append(tool.name)

    reg = ToolRegistry(standard_plugins=False, autoload=False)
    plugin = Counting()
    registering = threading.Thread(target=reg.plugins.register, args=(plugin, "counting"))
    registering.start()
    assert inside.wait(5)
    adder = threading.Thread(target=reg.add, args=(lambda: 1,), kwargs={"name": "x"})
    adder.start()
    adder.join(0.2)  # it waits for the registration to finish
    go.set()
    registering.join(5)
    adder.join(5)
    assert plugin.added == ["x"]


def test_a_set_up_hook_waiting_for_a_call_in_another_thread_does_not_deadlock() -> None:
    """Set-up hooks run under the registry's lock; a call never takes it, not even to prepare a plan
    (the first call after a plugin change; an event loop waiting on the hook froze for good)."""
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(lambda: "ok", name="t")
    answers: list[str] = []

    class Waits:
        @hookimpl
        def harness_configure(self, registry: ToolRegistry) -> None:
            other = threading.Thread(target=lambda: answers.append(registry.call("t")))
            other.start()
            other.join(5)
            assert not other.is_alive(), "a call waited for the lock held by a plugin's set-up"

    class First:
        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            return None

    reg.plugins.register(First(), "first")  # the tool's plan is cleared: the next call prepares it
    reg.plugins.register(Waits(), "waits")
    assert answers == ["ok"]
