"""The standard harness-one plugins, registered by name through the ``harness_one.plugins`` entry points.

Each is an ordinary plugin: block it by name, or register another plugin under its name to
replace it. See ``docs/plugins.md`` for every option.
"""

from .cache import CachePlugin
from .circuit import CircuitBreakerPlugin
from .concurrency import ConcurrencyPlugin
from .idempotency import IdempotencyPlugin, IdempotencyStore, MemoryStore, SQLiteStore
from .log import LoggingPlugin
from .metrics import MetricsPlugin
from .ratelimit import InMemoryBuckets, RateLimitBackend, RateLimitPlugin
from .retry import RetryPlugin
from .timeout import TimeoutPlugin
from .validation import CompiledSchema, ValidationPlugin, compile_schema

__all__ = [
    "CachePlugin",
    "CircuitBreakerPlugin",
    "CompiledSchema",
    "ConcurrencyPlugin",
    "IdempotencyPlugin",
    "IdempotencyStore",
    "InMemoryBuckets",
    "LoggingPlugin",
    "MemoryStore",
    "MetricsPlugin",
    "RateLimitBackend",
    "RateLimitPlugin",
    "RetryPlugin",
    "SQLiteStore",
    "TimeoutPlugin",
    "ValidationPlugin",
    "compile_schema",
]
