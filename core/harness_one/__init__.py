"""harness-one: the tool system LLM agents call through.

Define tools with :func:`defineTool`, call them through a :class:`ToolRegistry`, extend the
call path with pluggy plugins (:mod:`harness_one.hookspecs`).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._arguments import ArgumentLimits
    from ._call import Await, Call, CallResult, Lingering, Outcome, ProgressCallback, Retry
    from ._clock import Clock, ManualClock, SystemClock
    from ._discovery import Conflict, DiscoveryReport
    from ._entrypoints import PLUGIN_GROUP, TOOL_GROUP, LoadFailure, refresh_entry_points
    from ._errors import (
        ApprovalUnavailable,
        ArgumentProblem,
        CircuitOpen,
        IdempotencyConflict,
        IdempotencyKeyMismatch,
        PluginError,
        RateLimitExceeded,
        RetryableError,
        ToolArgumentError,
        ToolBusy,
        ToolCancelled,
        ToolDefinitionError,
        ToolError,
        ToolExecutionError,
        ToolNotFound,
        ToolTimeout,
    )
    from ._log import log_enabled, log_enabled_for, log_event, log_gated
    from ._plugins import PluginSet
    from ._policies import CircuitBreakerPolicy, RateLimit, RetryPolicy
    from ._redact import MODEL_QUERY_SECRET_KEYS, MODEL_SECRET_KEYS, REDACTED, SECRET_KEYS, Redactor, redact
    from ._registry import ToolRegistry
    from ._render import fingerprint, preview, rendered_length
    from ._runners import ProcessRunner, Runner, ThreadRunner
    from ._schema import (
        ecma_classes,
        json_path,
        json_pointer,
        json_type,
        listed_names,
        rust_pattern,
        rust_schema,
        schema_objects,
        subschemas,
    )
    from ._tool import Tool, ToolFunction, define_tool, defineTool
    from .hookspecs import applies_to, hookimpl, per_tool

_LAZY: dict[str, str] = {  # name -> module: imported on first use, so start-up stays cheap
    "ArgumentLimits": "._arguments",
    "Await": "._call",
    "Call": "._call",
    "CallResult": "._call",
    "Lingering": "._call",
    "Outcome": "._call",
    "ProgressCallback": "._call",
    "Retry": "._call",
    "Clock": "._clock",
    "ManualClock": "._clock",
    "SystemClock": "._clock",
    "Conflict": "._discovery",
    "DiscoveryReport": "._discovery",
    "PLUGIN_GROUP": "._entrypoints",
    "TOOL_GROUP": "._entrypoints",
    "LoadFailure": "._entrypoints",
    "refresh_entry_points": "._entrypoints",
    "ApprovalUnavailable": "._errors",
    "ArgumentProblem": "._errors",
    "CircuitOpen": "._errors",
    "IdempotencyConflict": "._errors",
    "IdempotencyKeyMismatch": "._errors",
    "PluginError": "._errors",
    "RateLimitExceeded": "._errors",
    "RetryableError": "._errors",
    "ToolArgumentError": "._errors",
    "ToolBusy": "._errors",
    "ToolCancelled": "._errors",
    "ToolDefinitionError": "._errors",
    "ToolError": "._errors",
    "ToolExecutionError": "._errors",
    "ToolNotFound": "._errors",
    "ToolTimeout": "._errors",
    "log_enabled": "._log",
    "log_enabled_for": "._log",
    "log_event": "._log",
    "log_gated": "._log",
    "PluginSet": "._plugins",
    "CircuitBreakerPolicy": "._policies",
    "RateLimit": "._policies",
    "RetryPolicy": "._policies",
    "REDACTED": "._redact",
    "SECRET_KEYS": "._redact",
    "MODEL_SECRET_KEYS": "._redact",
    "MODEL_QUERY_SECRET_KEYS": "._redact",
    "Redactor": "._redact",
    "redact": "._redact",
    "ToolRegistry": "._registry",
    "fingerprint": "._render",
    "preview": "._render",
    "rendered_length": "._render",
    "ProcessRunner": "._runners",
    "Runner": "._runners",
    "ThreadRunner": "._runners",
    "ecma_classes": "._schema",
    "json_path": "._schema",
    "json_pointer": "._schema",
    "json_type": "._schema",
    "listed_names": "._schema",
    "rust_pattern": "._schema",
    "rust_schema": "._schema",
    "schema_objects": "._schema",
    "subschemas": "._schema",
    "Tool": "._tool",
    "ToolFunction": "._tool",
    "define_tool": "._tool",
    "defineTool": "._tool",
    "applies_to": ".hookspecs",
    "per_tool": ".hookspecs",
    "hookimpl": ".hookspecs",
}

__version__ = "0.1.0"

__all__ = [
    "PLUGIN_GROUP",
    "TOOL_GROUP",
    "ApprovalUnavailable",
    "ArgumentLimits",
    "ArgumentProblem",
    "Await",
    "Call",
    "CallResult",
    "CircuitBreakerPolicy",
    "CircuitOpen",
    "Clock",
    "Conflict",
    "DiscoveryReport",
    "IdempotencyConflict",
    "IdempotencyKeyMismatch",
    "Lingering",
    "LoadFailure",
    "ManualClock",
    "Outcome",
    "PluginError",
    "REDACTED",
    "SECRET_KEYS",
    "MODEL_SECRET_KEYS",
    "MODEL_QUERY_SECRET_KEYS",
    "PluginSet",
    "ProgressCallback",
    "ProcessRunner",
    "RateLimit",
    "RateLimitExceeded",
    "Redactor",
    "Retry",
    "RetryPolicy",
    "RetryableError",
    "Runner",
    "SystemClock",
    "ThreadRunner",
    "Tool",
    "ToolArgumentError",
    "ToolBusy",
    "ToolCancelled",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolFunction",
    "ToolNotFound",
    "ToolRegistry",
    "ToolTimeout",
    "__version__",
    "applies_to",
    "defineTool",
    "define_tool",
    "ecma_classes",
    "fingerprint",
    "hookimpl",
    "json_path",
    "json_pointer",
    "json_type",
    "listed_names",
    "log_enabled",
    "log_enabled_for",
    "log_event",
    "log_gated",
    "per_tool",
    "preview",
    "redact",
    "refresh_entry_points",
    "rendered_length",
    "rust_pattern",
    "rust_schema",
    "schema_objects",
    "subschemas",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness_one' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
