"""Review 28: object-valued plugin options checked when the plugin is built; ``retry=False`` and
``circuit_breaker=False`` decline the plugin's ``default``."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Iterator
from typing import Any

import pytest

from harness_one import Call, ManualClock, PluginError, RetryableError, RetryPolicy, ToolRegistry, defineTool, hookimpl
from harness_one.state import MemoryBudgets, MemoryCircuits, MemorySlots
from harness_one_plugins import retry as retry_plugin
from harness_one_plugins._options import provides

# ---------------------------------------------------------------- finding 3: object options


class OnlyTake:
    """A budget store with ``take`` but no ``give_back``, ``used`` or ``forget``."""

    def take(self, *args: Any, **kwargs: Any) -> int:
        return 0


class NowNotCallable:
    now = 5.0


BUDGET = "an object with take(), give_back(), used(), forget()"
SLOTS = "an object with acquire(), renew(), release(), running()"
CIRCUIT = "an object with admit(), record(), unprobe(), snapshot()"


@pytest.mark.parametrize(
    ("plugin", "option", "value", "message"),
    [
        ("budget", "store", "redis", f"budget store must be a budget store ({BUDGET}), not 'redis'"),
        ("budget", "store", OnlyTake(), f"budget store must be a budget store ({BUDGET}), not <"),
        ("concurrency", "slots", 3, f"concurrency slots must be a slot store ({SLOTS}), not 3"),
        ("concurrency", "clock", "x", "concurrency clock must be a clock (an object with now()), not 'x'"),
        ("circuit_breaker", "store", 3, f"circuit_breaker store must be a circuit store ({CIRCUIT}), not 3"),
        ("circuit_breaker", "clock", "x", "circuit_breaker clock must be a clock (an object with now()), not 'x'"),
        ("retry", "rng", 5, "retry rng must be a random number generator (an object with uniform()), not 5"),
        ("retry", "clock", "x", "retry clock must be a clock (an object with now()), not 'x'"),
        ("timeout", "clock", "x", "timeout clock must be a clock (an object with now()), not 'x'"),
        ("cache", "clock", NowNotCallable(), "cache clock must be a clock (an object with now()), not <"),
    ],
)
def test_an_object_option_without_the_methods_is_refused_when_the_plugin_is_built(
    plugin: str, option: str, value: Any, message: str
) -> None:
    with pytest.raises(PluginError) as raised:
        ToolRegistry(autoload=False, plugin_options={plugin: {option: value}})
    text = str(raised.value)
    assert text.startswith(f"Plugin '{plugin}' cannot be built with its options ['{option}']: ValueError: ")
    assert message in text


def test_object_options_with_the_methods_are_kept() -> None:
    clock, rng = ManualClock(), random.Random(7)
    budgets, slots, circuits = MemoryBudgets(), MemorySlots(), MemoryCircuits()
    reg = ToolRegistry(
        autoload=False,
        plugin_options={
            "retry": {"clock": clock, "rng": rng},
            "timeout": {"clock": clock},
            "cache": {"clock": clock},
            "circuit_breaker": {"clock": clock, "store": circuits},
            "concurrency": {"clock": clock, "slots": slots},
            "budget": {"store": budgets},
        },
    )
    plugins = reg.plugins
    assert plugins.get("retry").clock is clock and plugins.get("retry").rng is rng
    assert plugins.get("timeout").clock is clock and plugins.get("cache").clock is clock
    assert plugins.get("circuit_breaker").store is circuits and plugins.get("concurrency").slots is slots
    assert plugins.get("budget").store is budgets


def test_provides() -> None:
    assert provides(None, "x clock", "a clock", ("now",), optional=True) is None
    clock = ManualClock()
    assert provides(clock, "x clock", "a clock", ("now",)) is clock
    with pytest.raises(ValueError, match=r"^x clock must be a clock \(an object with now\(\)\), not None$"):
        provides(None, "x clock", "a clock", ("now",))
    with pytest.raises(ValueError, match=r"^s must be a store \(an object with take\(\), give_back\(\)\), not 3$"):
        provides(3, "s", "a store", ("take", "give_back"))


@pytest.mark.parametrize(
    ("plugin", "option", "cls"),
    [
        ("budget", "store", "MemoryBudgets"),
        ("concurrency", "slots", "MemorySlots"),
        ("circuit_breaker", "store", "MemoryCircuits"),
        ("idempotency", "store", "MemoryStore"),
        ("rate_limit", "backend", "MemoryBuckets"),
    ],
)
def test_a_class_given_for_an_instance_is_refused_when_the_plugin_is_built(plugin: str, option: str, cls: str) -> None:
    """Its methods are there, unbound: the class got past the check and every call then failed with a TypeError."""
    from harness_one import PluginError, ToolRegistry, state

    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugin_options={plugin: {option: getattr(state, cls)}})
    assert f"an instance ({cls}()), not the class {cls}" in str(err.value)


def test_a_store_given_as_a_url_is_refused_with_its_password_masked_also_in_the_cause() -> None:
    from harness_one import PluginError, ToolRegistry

    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugin_options={"budget": {"store": "redis://:hunter2@cache.internal:6379/0"}})
    assert "not 'redis://[REDACTED]@cache.internal:6379/0'" in str(err.value)
    assert "hunter2" not in str(err.value) and "hunter2" not in str(err.value.__cause__)


# ---------------------------------------------------------------- finding 2: False declines the default


@pytest.fixture
def no_backoff() -> Iterator[None]:
    retry_plugin.set_testing(True)
    try:
        yield
    finally:
        retry_plugin.set_testing(False)


def flaky_counter() -> tuple[list[int], Any, Any]:
    runs = [0]

    def flaky(x: int) -> int:
        runs[0] += 1
        raise RetryableError("backend down")

    async def aflaky(x: int) -> int:
        runs[0] += 1
        raise RetryableError("backend down")

    return runs, flaky, aflaky


@pytest.mark.usefixtures("no_backoff")
@pytest.mark.parametrize("asynchronous", [False, True])
def test_retry_false_declines_the_plugin_default(asynchronous: bool) -> None:
    runs, flaky, aflaky = flaky_counter()
    reg = ToolRegistry(autoload=False, plugin_options={"retry": {"default": 3}})
    reg.add(aflaky if asynchronous else flaky, name="off", idempotent=True, retry=False)
    reg.add(aflaky if asynchronous else flaky, name="on", idempotent=True)
    assert reg.get("off").declined == frozenset({"retry"}) and reg.get("off").retry is None
    assert reg.get("on").declined == frozenset()

    def call(name: str) -> Any:
        if asynchronous:
            return asyncio.run(reg.atry_call(name, {"x": 1}))
        return reg.try_call(name, {"x": 1})

    result = call("off")
    assert runs == [1] and result.attempts == 1 and result.error.kind == "retryable"
    runs[0] = 0
    result = call("on")  # the default still applies to a tool that declares nothing
    assert runs == [3] and result.attempts == 3
    assert reg.stats()["retry"] == {"retries": 2, "gave_up": 1}


class Refuser:
    """Refuses the first attempt before the tool runs, saying when to try again."""

    name, order = "refuser", 45

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RetryableError("not yet", tool=call.tool.name, call_id=call.call_id, retry_after=0.5)


def test_retry_false_is_no_policy_not_one_attempt() -> None:
    """``retry=1`` still waits out a refusal that says when it ends; ``retry=False`` has no policy at all."""
    clock = ManualClock()
    reg = ToolRegistry(autoload=False, clock=clock, plugin_options={"retry": {"default": 3}})
    refuser = Refuser()
    reg.plugins.register(refuser)
    reg.add(lambda: "ran", name="off", retry=False)
    result = reg.try_call("off")
    assert not result.ok and result.error.kind == "retryable" and not result.ran and refuser.calls == 1
    assert clock.now() == 0.0
    refuser.calls = 0
    reg.add(lambda: "ran", name="one", retry=1)
    assert reg.call("one") == "ran" and refuser.calls == 2


@pytest.mark.usefixtures("no_backoff")
def test_retry_false_is_kept_through_copies_and_a_policy_of_its_own_wins() -> None:
    runs, flaky, _ = flaky_counter()
    declined = defineTool(name="flaky", idempotent=True, retry=False, registry=None)(flaky).tool
    assert declined.declined == frozenset({"retry"})
    reg = ToolRegistry(autoload=False, plugin_options={"retry": {"default": 3}})
    reg.add(dataclasses.replace(declined, name="copy"))
    assert reg.try_call("copy", {"x": 1}).attempts == 1 and runs == [1]
    runs[0] = 0
    reg.add(dataclasses.replace(declined, name="own", retry=RetryPolicy(attempts=2)))
    assert reg.try_call("own", {"x": 1}).attempts == 2 and runs == [2]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_circuit_breaker_false_declines_the_plugin_default(asynchronous: bool) -> None:
    _, flaky, aflaky = flaky_counter()
    reg = ToolRegistry(autoload=False, plugin_options={"circuit_breaker": {"default": {"min_calls": 1}}})
    reg.add(aflaky if asynchronous else flaky, name="off", circuit_breaker=False)
    reg.add(aflaky if asynchronous else flaky, name="on")
    assert reg.get("off").declined == frozenset({"circuit_breaker"}) and reg.get("off").circuit_breaker is None

    def kinds(name: str) -> list[str]:
        if asynchronous:
            return [asyncio.run(reg.atry_call(name, {"x": 1})).error.kind for _ in range(3)]
        return [reg.try_call(name, {"x": 1}).error.kind for _ in range(3)]

    assert kinds("off") == ["retryable", "retryable", "retryable"]
    assert kinds("on") == ["retryable", "circuit_open", "circuit_open"]
    plugin = reg.plugins.get("circuit_breaker")
    assert plugin.state("off") == "closed" and plugin.state("on") == "open"
    tools = reg.stats()["tools"]
    assert tools["on"]["circuit"]["state"] == "open" and "circuit" not in tools["off"]


def test_a_clock_class_with_a_static_now_is_taken() -> None:
    """Refusing every class refused a clock class whose now() is static, which the core and the plugins take."""
    import time

    from harness_one import ToolRegistry

    class MonoClock:
        @staticmethod
        def now() -> float:
            return time.monotonic()

    for plugin in ("rate_limit", "timeout", "retry", "cache", "concurrency", "circuit_breaker", "idempotency", "approval"):
        reg = ToolRegistry(autoload=False, plugin_options={plugin: {"clock": MonoClock}})
        assert reg.plugins.get(plugin).clock is MonoClock


def test_a_clock_class_whose_now_needs_no_instance_is_taken_and_one_whose_now_does_is_refused() -> None:
    import functools
    import time

    from harness_one_plugins import CircuitBreakerPlugin

    class Builtin:
        now = time.monotonic

    class Partial:
        now = functools.partial(time.monotonic)

    class NeedsAnInstance:
        def now(self) -> float:
            return 0.0

    for cls in (Builtin, Partial):
        assert CircuitBreakerPlugin(clock=cls).clock is cls
    with pytest.raises(ValueError, match=r"an instance \(NeedsAnInstance\(\)\), not the class NeedsAnInstance"):
        CircuitBreakerPlugin(clock=NeedsAnInstance)
