"""The standard harness-one plugins, registered by name through the ``harness_one.plugins`` entry points.

Each is an ordinary plugin: block it by name, or register another plugin under its name to
replace it. See ``docs/plugins.md`` for every option.
"""

from .log import LoggingPlugin
from .metrics import MetricsPlugin
from .ratelimit import InMemoryBuckets, RateLimitBackend, RateLimitPlugin
from .validation import CompiledSchema, ValidationPlugin, compile_schema

__all__ = [
    "CompiledSchema",
    "InMemoryBuckets",
    "LoggingPlugin",
    "MetricsPlugin",
    "RateLimitBackend",
    "RateLimitPlugin",
    "ValidationPlugin",
    "compile_schema",
]
