"""The rate-limit plugin and its in-memory backend, through the reusable contracts."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import Call, ManualClock, RateLimitExceeded, ToolRegistry, hookimpl
from harness_one.testing import RateLimitBackendContract, RateLimitPluginContract
from harness_one_plugins import InMemoryBuckets, RateLimitPlugin


class TestInMemoryBuckets(RateLimitBackendContract):
    @pytest.fixture
    def backend(self) -> InMemoryBuckets:
        return InMemoryBuckets()


class TestStandardRateLimit(RateLimitPluginContract):
    @pytest.fixture
    def make_plugin(self) -> Any:
        return RateLimitPlugin


class CountingLimiter:
    """A minimal third-party replacement: a fixed budget of calls per tool, no refill."""

    def __init__(self, default: Any = None, max_wait: float = 0.0) -> None:
        self.used: dict[str, int] = {}

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        limit = call.tool.rate_limit
        if limit is None:
            return
        used = self.used.get(call.tool.name, 0)
        if used >= limit.burst:
            raise RateLimitExceeded(retry_after=limit.cost / limit.rate, tool=call.tool.name)
        self.used[call.tool.name] = used + 1


def test_replacement_passes_the_seed_contract(clock: ManualClock) -> None:
    contract = RateLimitPluginContract()
    contract.test_seed_example(CountingLimiter, clock)
    with pytest.raises(RateLimitExceeded):  # and the contract tells it apart: it never refills
        contract.test_tokens_come_back_at_rate(CountingLimiter, clock)


def test_idle_buckets_are_evicted() -> None:
    buckets = InMemoryBuckets(max_keys=1000, sweep_every=100)
    for i in range(5000):
        buckets.acquire(("t", i), rate=10, burst=1, cost=1, now=float(i))  # each idle after 0.1 s
    assert len(buckets) < 200
    flood = InMemoryBuckets(max_keys=50, sweep_every=10_000)
    for i in range(500):
        flood.acquire(i, rate=0.001, burst=5, cost=1, now=0.0)  # never idle: the cap still holds
    assert len(flood) <= 50


def test_key_function(registry: ToolRegistry) -> None:
    registry.add(lambda: 1, name="f", rate_limit={"rate": 1, "burst": 1, "key": lambda call: call.context["org"]})
    registry.call("f", context={"org": "a", "user": 1})
    registry.call("f", context={"org": "b", "user": 1})
    with pytest.raises(RateLimitExceeded):
        registry.call("f", context={"org": "a", "user": 2})


def test_cost(registry: ToolRegistry) -> None:
    registry.add(lambda: 1, name="heavy", rate_limit={"rate": 1, "burst": 10, "cost": 4})
    registry.call("heavy")
    registry.call("heavy")
    with pytest.raises(RateLimitExceeded) as err:
        registry.call("heavy")
    assert err.value.retry_after == pytest.approx(2.0)


def test_refused_call_does_not_run_tool(registry: ToolRegistry) -> None:
    ran: list[int] = []
    registry.add(lambda: ran.append(1), name="f", rate_limit={"rate": 1, "burst": 1})
    registry.call("f")
    assert not registry.try_call("f").ok
    assert ran == [1]
    assert registry.stats()["tools"]["f"]["rate_limited"] == 1


def test_invalid_arguments_take_no_token(registry: ToolRegistry) -> None:
    registry.add(
        lambda n: n,
        name="f",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        rate_limit={"rate": 1, "burst": 1},
    )
    for _ in range(3):
        assert not registry.try_call("f", {"n": "x"}).ok
    assert registry.call("f", {"n": 1}) == 1


def test_error_payload_carries_retry_after(registry: ToolRegistry) -> None:
    registry.add(lambda: 1, name="f", rate_limit={"rate": 10, "burst": 1})
    registry.call("f")
    result = registry.try_call("f")
    assert result.to_dict()["error"]["retry_after"] == pytest.approx(0.1)
    assert result.for_model() == "Error: Tool 'f' is rate limited. Retry after 0.1 s or use another tool."
