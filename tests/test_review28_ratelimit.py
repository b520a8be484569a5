"""Review 28: the rate limit gives back the token of every attempt it admitted whose tool did not run
(the total timeout, a cancel, a later guard), and no token it did not take; object options of the
rate_limit and idempotency plugins are checked when the plugin is built; an empty idempotency scope
is refused."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Hashable
from typing import Any

import pytest

from harness_one import (
    Call,
    CircuitOpen,
    ManualClock,
    PluginError,
    RateLimitExceeded,
    ToolCancelled,
    ToolDefinitionError,
    ToolError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)
from harness_one.state import MemoryBuckets, MemoryStore, StateUnavailable
from harness_one_plugins import IdempotencyPlugin, RateLimitPlugin


class Later:
    """A plugin whose pre_call runs after the rate limit took its token: it spends the call's total
    timeout (``"slow"``), cancels the call (``"cancel"``) or refuses it as busy (``"busy"``)."""

    order = 45

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.mode: str | None = None

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if self.mode == "slow":
            self.clock.advance(2.0)
        elif self.mode == "cancel":
            call.cancel()
        elif self.mode == "limited":
            raise RateLimitExceeded(retry_after=0.5, tool=call.tool.name)


def _registry(max_wait: float | None = None, **tool: Any) -> tuple[ToolRegistry, Later]:
    clock = ManualClock()
    later = Later(clock)
    reg = ToolRegistry(clock=clock, plugins={"later": later}, autoload=False)
    reg.add(lambda x: x, name="f", rate_limit={"rate": 1e-6, "burst": 2, "max_wait": max_wait}, **tool)
    return reg, later


@pytest.mark.parametrize(
    ("mode", "tool", "error"),
    [
        ("slow", {"total_timeout": 1}, ToolTimeout),  # refused by the core: the total spent as the tool would start
        ("cancel", {"total_timeout": 1}, ToolCancelled),
        ("cancel", {}, ToolCancelled),  # no standard policy after the rate limit: a later plugin's hook still may
    ],
)
def test_an_attempt_admitted_whose_tool_did_not_run_gives_its_token_back_under_call(
    mode: str, tool: dict[str, Any], error: type[Exception]
) -> None:
    """The token went back only for a ToolTimeout/CircuitOpen/ToolBusy raised in a later standard
    plugin's module: the core's total-timeout refusal and a cancel kept it ([True, False, False])."""
    reg, later = _registry(**tool)
    later.mode = mode
    refused = reg.try_call("f", {"x": 1})
    assert type(refused.error) is error and not refused.ran
    later.mode = None
    assert [reg.try_call("f", {"x": 1}).ok for _ in range(3)] == [True, True, False]
    assert reg.stats()["rate_limit"]["refused"] == 1


@pytest.mark.parametrize(("mode", "error"), [("slow", ToolTimeout), ("cancel", ToolCancelled)])
def test_an_attempt_admitted_whose_tool_did_not_run_gives_its_token_back_under_acall(mode: str, error: type[Exception]) -> None:
    reg, later = _registry(total_timeout=1)

    async def main() -> list[bool]:
        later.mode = mode
        refused = await reg.atry_call("f", {"x": 1})
        assert type(refused.error) is error and not refused.ran
        later.mode = None
        return [(await reg.atry_call("f", {"x": 1})).ok for _ in range(3)]

    assert asyncio.run(main()) == [True, True, False]


def test_a_later_plugins_rate_limit_refusal_gives_the_token_back_and_is_not_waited_out() -> None:
    """A RateLimitExceeded raised after this plugin admitted the attempt is another limit's: its token
    goes back, and max_wait (a wait for this bucket's tokens) does not retry it."""
    reg, later = _registry(max_wait=10.0)
    later.mode = "limited"
    refused = reg.try_call("f", {"x": 1})
    assert type(refused.error) is RateLimitExceeded and refused.error.retry_after == 0.5
    assert later.clock.sleeps == []  # not waited out
    later.mode = None
    assert [reg.try_call("f", {"x": 1}).ok for _ in range(3)] == [True, True, False]


class FlakyBuckets:
    """In-process buckets whose ``acquire`` does not answer while ``down`` (a Redis outage), counting give-backs."""

    def __init__(self) -> None:
        self.inner = MemoryBuckets()
        self.down = False
        self.given: list[Hashable] = []

    def acquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float:
        if self.down:
            raise StateUnavailable("buckets down")
        return self.inner.acquire(key, rate=rate, burst=burst, cost=cost, now=now)

    def give_back(self, key: Hashable, *, burst: float, cost: float) -> None:
        self.given.append(key)
        self.inner.give_back(key, burst=burst, cost=cost)


def test_an_attempt_admitted_open_takes_no_token_and_gives_none_back() -> None:
    """Admitted without a token (the backend did not answer, on_state_error open), an attempt the open
    circuit refused gave one back all the same: a token minted per refusal."""
    backend = FlakyBuckets()
    reg = ToolRegistry(clock=ManualClock(), plugins={"rate_limit": RateLimitPlugin(backend=backend)}, autoload=False)

    def fails() -> None:
        raise RuntimeError("down")

    reg.add(fails, name="f", rate_limit={"rate": 1e-6, "burst": 5}, circuit_breaker={"min_calls": 1})
    assert reg.try_call("f").error.kind == "tool_failed"  # type: ignore[union-attr]  # opens the circuit
    backend.down = True
    refused = [reg.try_call("f").error for _ in range(3)]
    assert all(type(error) is CircuitOpen for error in refused) and backend.given == []
    assert reg.stats()["rate_limit"]["state_failed_open"] == 3
    backend.down = False
    assert type(reg.try_call("f").error) is CircuitOpen and backend.given == ["f"]  # one it took goes back


def test_the_give_back_hook_is_prepared_for_a_custom_plugins_later_pre_call_only() -> None:
    """A later pre_call hook of a plugin not known never to refuse (a custom guard) may refuse or cancel
    the attempt after its token: the hook is prepared; the standard retry and otel hooks never do."""
    from harness_one_plugins import RetryPlugin

    def on_error_of(reg: ToolRegistry) -> list[str]:
        return list(reg.plugins.plan.for_tool(reg.get("f")).on_error_names)

    reg, _ = _registry()
    assert "rate_limit" in on_error_of(reg)
    quiet = ToolRegistry(plugins={"retry": RetryPlugin(default=3)}, autoload=False)
    quiet.add(lambda x: x, name="f", rate_limit={"rate": 1, "burst": 1})
    assert "rate_limit" not in on_error_of(quiet)


@pytest.mark.parametrize(
    ("plugin", "options", "message"),
    [
        ("rate_limit", {"backend": 3}, "rate_limit backend must be a rate limit backend (an object with acquire()), not 3"),
        ("rate_limit", {"clock": "x"}, "rate_limit clock must be a clock (an object with now()), not 'x'"),
        (
            "idempotency",
            {"store": 3},
            "idempotency store must be an idempotency store (an object with begin(), renew(), finish(), release()), not 3",
        ),
        ("idempotency", {"clock": "x"}, "idempotency clock must be a clock (an object with now()), not 'x'"),
    ],
)
def test_an_object_option_of_the_wrong_type_fails_the_plugin_at_load(plugin: str, options: dict[str, Any], message: str) -> None:
    """Accepted, they failed every call with an internal AttributeError ('str' object has no attribute 'now')."""
    with pytest.raises(PluginError) as raised:
        ToolRegistry(plugin_options={plugin: options}, autoload=False)
    assert f"Plugin '{plugin}' cannot be built with its options {sorted(options)}" in str(raised.value)
    assert f"ValueError: {message}" in str(raised.value)


def test_object_options_of_the_right_kind_are_kept() -> None:
    clock, backend, store = ManualClock(), MemoryBuckets(), MemoryStore()
    limit = RateLimitPlugin(backend=backend, clock=clock)
    assert limit.backend is backend and limit.clock is clock
    keys = IdempotencyPlugin(store=store, clock=clock)
    assert keys.store is store and keys.clock is clock


@pytest.mark.parametrize("scope", [[], (), "", "  ", ["user_id", " "], ["user_id", ""]])
def test_an_empty_idempotency_scope_is_refused(scope: Any) -> None:
    """``scope=[]`` was taken as unscoped: every user's keys one."""
    with pytest.raises(ValueError) as raised:
        IdempotencyPlugin(scope=scope)
    assert str(raised.value) == f"idempotency scope must be a context field name or a non-empty list of them, not {scope!r}"
    with pytest.raises(PluginError, match="non-empty list of them"):
        ToolRegistry(plugin_options={"idempotency": {"scope": scope}}, autoload=False)


def test_idempotency_scope_none_and_names_are_taken() -> None:
    assert IdempotencyPlugin().scope == ()
    assert IdempotencyPlugin(scope=["tenant", "user_id"]).scope == ("tenant", "user_id")


@pytest.mark.parametrize("key", ["", "  ", "\t"])
def test_an_empty_rate_limit_key_is_refused(key: str) -> None:
    """An empty or blank field name put every caller in one bucket."""
    reg = ToolRegistry(autoload=False)
    with pytest.raises(ToolDefinitionError) as err:
        reg.add(lambda: "ok", name="t", rate_limit={"rate": 1, "key": key})
    assert str(err.value) == (f"Tool 't': rate_limit key must be a context field name or a function of the call, got {key!r}.")


# ---------------------------------------------------------------------- review of the give-back (two instances, names)


class _Guard:
    """Refuses every attempt in its pre_call while ``on`` (after the rate limit: order 15)."""

    order = 15

    def __init__(self, name: str = "guard") -> None:
        self.name = name
        self.on = False

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if self.on:
            raise ToolError("guard says no", tool=call.tool.name)


def test_two_rate_limits_each_give_back_their_own_token() -> None:
    """A global limit and one per user: one note key for both gave one bucket's token to the other."""
    guard = _Guard()
    everyone = RateLimitPlugin(default={"rate": 1e-6, "burst": 3})
    per_user = RateLimitPlugin(default={"rate": 1e-6, "burst": 1, "key": "user"})
    reg = ToolRegistry(autoload=False, plugins={"rate_limit": everyone, "per_user": per_user, "guard": guard})
    reg.add(lambda x: x, name="f", parameters={"type": "object", "properties": {"x": {"type": "integer"}}})
    guard.on = True
    assert reg.try_call("f", {"x": 1}, context={"user": "a"}).error.kind == "tool_error"  # type: ignore[union-attr]
    guard.on = False
    buckets = reg.state.rate_limits()._buckets  # type: ignore[attr-defined]
    assert {k: round(v[0], 3) for k, v in buckets.items()} == {"f": 3.0, ("f", "a"): 1.0}
    assert [reg.try_call("f", {"x": 1}, context={"user": "a"}).ok for _ in range(2)] == [True, False]


@pytest.mark.parametrize("name", ["guard", "otel", "retry"])
def test_a_guard_in_a_standard_plugins_place_gets_the_token_back(name: str) -> None:
    """The quiet standard plugins were known by name: a guard registered as 'otel' drained the bucket."""
    reg = ToolRegistry(autoload=False)
    reg.add(
        lambda x: x,
        name="f",
        parameters={"type": "object", "properties": {"x": {"type": "integer"}}},
        rate_limit={"rate": 1e-4, "burst": 3},
    )
    assert reg.try_call("f", {"x": 1}).ok
    guard = _Guard(name)
    guard.on = True
    if name in reg.plugins:
        reg.plugins.replace(name, guard)
    else:
        reg.plugins.register(guard, name)
    assert [reg.try_call("f", {"x": 1}).error.kind for _ in range(3)] == ["tool_error"] * 3  # type: ignore[union-attr]
    guard.on = False
    assert [reg.try_call("f", {"x": 1}).ok for _ in range(3)] == [True, True, False]


def test_the_note_is_made_only_where_a_later_policy_applies_by_its_own_rule() -> None:
    """timeout=math.inf is no limit and circuit_breaker=False declines the default: no note, no extra round."""
    seen: dict[str, bool] = {}

    class Spy:
        name = "spy"

        @hookimpl(trylast=True)
        def harness_post_call(self, call: Call) -> None:
            state = call._state or {}  # type: ignore[attr-defined]
            seen[call.tool.name] = any(str(k).startswith("rate_limit.took") for k in state)

    reg = ToolRegistry(autoload=False, plugins={"spy": Spy()}, plugin_options={"circuit_breaker": {"default": {"min_calls": 5}}})
    limit = {"rate": 1e9, "burst": 1e9}
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    reg.add(lambda x: x, name="plain_declined", parameters=schema, rate_limit=limit, circuit_breaker=False)
    reg.add(lambda x: x, name="unlimited", parameters=schema, rate_limit=limit, timeout=math.inf, circuit_breaker=False)
    reg.add(lambda x: x, name="guarded", parameters=schema, rate_limit=limit)
    reg.add(lambda x: x, name="capped", parameters=schema, rate_limit=limit, max_concurrency=10, circuit_breaker=False)
    for name in ("plain_declined", "unlimited", "guarded", "capped"):
        reg.call(name, {"x": 1})
    assert seen == {"plain_declined": False, "unlimited": False, "guarded": True, "capped": True}


def test_a_rate_limit_registered_under_another_name_finds_its_own_place_in_the_plan() -> None:
    """Its place was looked up by its class's name ('rate_limit'): a per-user limit registered as 'per_user',
    running before the global one, kept the token of a call the global one then refused."""
    everyone = RateLimitPlugin(default={"rate": 1e-6, "burst": 1})
    per_user = RateLimitPlugin(default={"rate": 1e-6, "burst": 2, "key": "user"})
    reg = ToolRegistry(autoload=False, plugins={"rate_limit": everyone, "per_user": per_user})
    reg.add(lambda x: x, name="f", parameters={"type": "object", "properties": {"x": {"type": "integer"}}})
    assert reg.plugins.plan.order["pre_call"].index("per_user") < reg.plugins.plan.order["pre_call"].index("rate_limit")
    assert reg.try_call("f", {"x": 1}, context={"user": "a"}).ok
    assert reg.try_call("f", {"x": 1}, context={"user": "a"}).error.kind == "rate_limited"  # type: ignore[union-attr]
    buckets = reg.state.rate_limits()._buckets  # type: ignore[attr-defined]
    assert {k: round(v[0], 3) for k, v in buckets.items()} == {"f": 0.0, ("f", "a"): 1.0}


def test_a_later_plugin_that_does_not_apply_to_the_tool_costs_it_nothing() -> None:
    """A custom pre_call hook whose applies_to leaves the tool out was counted as one that may refuse it."""
    from harness_one import applies_to

    class OnlyTagged:
        name = "only_tagged"
        order = 45

        @hookimpl
        @applies_to(lambda plugin, tool: "payments" in tool.tags)
        def harness_pre_call(self, call: Call) -> None:
            raise ToolError("never reached for untagged tools")

    seen: dict[str, bool] = {}

    class Spy:
        name = "spy"

        @hookimpl(trylast=True)
        def harness_post_call(self, call: Call) -> None:
            seen[call.tool.name] = any(str(k).startswith("rate_limit.took") for k in call._state or {})  # type: ignore[attr-defined]

    reg = ToolRegistry(autoload=False, plugins={"only_tagged": OnlyTagged(), "spy": Spy()})
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    reg.add(lambda x: x, name="search", parameters=schema, rate_limit={"rate": 1e9, "burst": 1e9})
    reg.add(lambda x: x, name="pay", parameters=schema, rate_limit={"rate": 1e9, "burst": 1e9}, tags=["payments"])
    reg.call("search", {"x": 1})
    assert reg.try_call("pay", {"x": 1}).error is not None
    assert seen == {"search": False}
    assert "rate_limit" not in reg.plugins.plan.for_tool(reg.get("search")).on_error_names
