"""The standard harness-one plugins, registered by name through the ``harness_one.plugins`` entry points.

Each is an ordinary plugin in a module of its own that depends only on the public core API:
block it by name, replace it by registering another plugin under its name, configure it
with ``[plugins.<name>]``. Nothing is imported until used, so a missing or broken module
takes down only its own plugin. See ``docs/plugins.md`` for every option.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ApprovalPlugin",
    "BudgetPlugin",
    "CachePlugin",
    "CircuitBreakerPlugin",
    "ConcurrencyPlugin",
    "IdempotencyPlugin",
    "LoggingPlugin",
    "MetricsPlugin",
    "OTelPlugin",
    "OutputLimitPlugin",
    "RateLimitPlugin",
    "RetryPlugin",
    "TimeoutPlugin",
    "ValidationPlugin",
]

_WHERE = {
    "ApprovalPlugin": "approval",
    "BudgetPlugin": "budget",
    "CachePlugin": "cache",
    "CircuitBreakerPlugin": "circuit",
    "ConcurrencyPlugin": "concurrency",
    "IdempotencyPlugin": "idempotency",
    "LoggingPlugin": "log",
    "MetricsPlugin": "metrics",
    "OTelPlugin": "otel",
    "OutputLimitPlugin": "output",
    "RateLimitPlugin": "ratelimit",
    "RetryPlugin": "retry",
    "TimeoutPlugin": "timeout",
    "ValidationPlugin": "validation",
    # Backends and helpers, kept importable from here for existing code.
    "CompiledSchema": "validation",
    "compile_schema": "validation",
    "InMemoryBuckets": "ratelimit",
    "RateLimitBackend": "ratelimit",
    "IdempotencyStore": "idempotency",
    "MemoryStore": "idempotency",
    "SQLiteStore": "idempotency",
    "ApprovalRequired": "approval",
    "ApprovalDenied": "approval",
    "ApprovalNotFound": "approval",
    "ApprovalConflict": "approval",
    "BudgetExhausted": "budget",
    "OutputTooLarge": "output",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'harness_one_plugins' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
