"""harness-one: the tool system LLM agents call through.

Define tools with :func:`defineTool`, call them through a :class:`ToolRegistry`, extend the
call path with pluggy plugins (:mod:`harness_one.hookspecs`).
"""

from ._arguments import ArgumentLimits
from ._call import Await, Call, CallResult, Outcome, ProgressCallback, Retry
from ._clock import Clock, ManualClock, SystemClock
from ._discovery import Conflict, DiscoveryReport
from ._entrypoints import PLUGIN_GROUP, TOOL_GROUP, LoadFailure, refresh_entry_points
from ._errors import (
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
from ._log import log_enabled, log_event
from ._plugins import PluginSet
from ._policies import CircuitBreakerPolicy, RateLimit, RetryPolicy
from ._redact import REDACTED, SECRET_KEYS, Redactor, redact
from ._registry import ToolRegistry
from ._render import fingerprint
from ._runners import ProcessRunner, Runner, ThreadRunner
from ._schema import json_type
from ._tool import Tool, ToolFunction, define_tool, defineTool
from .hookspecs import applies_to, hookimpl

__version__ = "0.1.0"

__all__ = [
    "PLUGIN_GROUP",
    "TOOL_GROUP",
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
    "LoadFailure",
    "ManualClock",
    "Outcome",
    "PluginError",
    "REDACTED",
    "SECRET_KEYS",
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
    "fingerprint",
    "hookimpl",
    "json_type",
    "log_enabled",
    "log_event",
    "redact",
    "refresh_entry_points",
]
