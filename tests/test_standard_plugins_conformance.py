"""The ten standard plugins against the conformance kit's ``PluginTests``, and the state backends against their contracts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from harness_one import fingerprint
from harness_one.state._memory import MemoryCircuits, MemorySlots
from harness_one.testing import CircuitStoreContract, ConcurrencySlotsContract, PluginTests
from harness_one_plugins import (
    CachePlugin,
    CircuitBreakerPlugin,
    ConcurrencyPlugin,
    IdempotencyPlugin,
    LoggingPlugin,
    MetricsPlugin,
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
    tool_options: ClassVar[Mapping[str, Any]] = {"rate_limit": {"rate": 1e9, "burst": 1e9}}


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
    tool_options: ClassVar[Mapping[str, Any]] = {"timeout": 30, "timeout_mode": "none"}


class TestRetry(PluginTests):
    plugin_factory = RetryPlugin
    entry_point = "retry"
    tool_options: ClassVar[Mapping[str, Any]] = {"retry": {"attempts": 3}}


class TestIdempotency(PluginTests):
    plugin_factory = IdempotencyPlugin
    entry_point = "idempotency"

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


class TestMemorySlots(ConcurrencySlotsContract):
    @pytest.fixture
    def slots(self) -> MemorySlots:
        return MemorySlots()


class TestMemoryCircuits(CircuitStoreContract):
    @pytest.fixture
    def circuits(self) -> MemoryCircuits:
        return MemoryCircuits()
