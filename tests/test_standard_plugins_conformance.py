"""The fourteen standard plugins against the conformance kit's ``PluginTests``, and the state backends against their contracts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from harness_one import fingerprint
from harness_one.state._memory import MemoryCircuits, MemorySlots
from harness_one.testing import CircuitStoreContract, ConcurrencySlotsContract, PluginTests
from harness_one_plugins import (
    ApprovalPlugin,
    BudgetPlugin,
    CachePlugin,
    CircuitBreakerPlugin,
    ConcurrencyPlugin,
    IdempotencyPlugin,
    LoggingPlugin,
    MetricsPlugin,
    OTelPlugin,
    OutputLimitPlugin,
    RateLimitPlugin,
    RetryPlugin,
    TimeoutPlugin,
    ValidationPlugin,
)


class TestValidation(PluginTests):
    plugin_factory = ValidationPlugin
    entry_point = "validation"


class TestRateLimit(PluginTests):
    plugin_factory = RateLimitPlugin
    entry_point = "rate_limit"
    # max_wait: the on_error hook (waiting for tokens) applies only to tools that may wait
    tool_options: ClassVar[Mapping[str, Any]] = {"rate_limit": {"rate": 1e9, "burst": 1e9, "max_wait": 1.0}}


class TestLogging(PluginTests):
    plugin_factory = LoggingPlugin
    entry_point = "logging"


class TestMetrics(PluginTests):
    plugin_factory = MetricsPlugin
    entry_point = "metrics"


class TestTimeout(PluginTests):
    plugin_factory = TimeoutPlugin
    entry_point = "timeout"
    # "none": the deadline is set and checked without a worker thread per call.
    tool_options: ClassVar[Mapping[str, Any]] = {"timeout": 30, "total_timeout": 60, "timeout_mode": "none"}


class TestRetry(PluginTests):
    plugin_factory = RetryPlugin
    entry_point = "retry"
    tool_options: ClassVar[Mapping[str, Any]] = {"retry": {"attempts": 3}}


class TestIdempotency(PluginTests):
    plugin_factory = IdempotencyPlugin
    entry_point = "idempotency"
    distinct_arguments = False  # a record per key for its ttl (24 h, on the wall clock): bounded in time only
    check_deadline = 120.0  # its growth check took 15-30 s of the kit's 30 on a loaded machine

    def call_options(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return {"idempotency_key": "k-" + fingerprint(dict(arguments))}


class TestConcurrency(PluginTests):
    plugin_factory = ConcurrencyPlugin
    entry_point = "concurrency"
    tool_options: ClassVar[Mapping[str, Any]] = {"max_concurrency": 64}


class TestCircuitBreaker(PluginTests):
    plugin_factory = CircuitBreakerPlugin
    entry_point = "circuit_breaker"
    tool_options: ClassVar[Mapping[str, Any]] = {"circuit_breaker": True}


class TestCache(PluginTests):
    plugin_factory = CachePlugin
    entry_point = "cache"
    tool_options: ClassVar[Mapping[str, Any]] = {"read_only": True, "cache_ttl": 60}
    check_deadline = 120.0  # its growth check took up to 24 s of the kit's 30 on a loaded machine


class TestOutputLimit(PluginTests):
    plugin_factory = OutputLimitPlugin
    entry_point = "output_limit"
    tool_options: ClassVar[Mapping[str, Any]] = {"options": {"max_output": 1000}}


class TestBudget(PluginTests):
    plugin_factory = BudgetPlugin
    entry_point = "budget"
    tool_options: ClassVar[Mapping[str, Any]] = {"options": {"max_calls": 10**9}}

    def call_options(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return {"context": {"run_id": "run-1"}}


class TestApproval(PluginTests):
    plugin_factory = ApprovalPlugin
    entry_point = "approval"
    # A rule that runs for every call and approves all but large amounts.
    tool_options: ClassVar[Mapping[str, Any]] = {"options": {"requires_approval": lambda call: call.arguments["x"] > 10**6}}


class TestOTel(PluginTests):
    """On, with SDK providers that record nothing: a span and metrics per call, none kept."""

    entry_point = "otel"
    check_deadline = 120.0  # its growth check took up to 30 s of the kit's 30 on a loaded machine

    @staticmethod
    def plugin_factory() -> OTelPlugin:
        return OTelPlugin(
            enabled=True,
            tracer_provider=TracerProvider(shutdown_on_exit=False),
            meter_provider=MeterProvider(shutdown_on_exit=False),
        )


class TestMemorySlots(ConcurrencySlotsContract):
    @pytest.fixture
    def slots(self) -> MemorySlots:
        return MemorySlots()


class TestMemoryCircuits(CircuitStoreContract):
    @pytest.fixture
    def circuits(self) -> MemoryCircuits:
        return MemoryCircuits()
