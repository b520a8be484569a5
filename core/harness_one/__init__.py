"""harness-one: the tool system LLM agents call through.

Define tools with :func:`defineTool`, call them through a :class:`ToolRegistry`, extend the
call path with pluggy plugins (:mod:`harness_one.hookspecs`).
"""

from ._arguments import ArgumentLimits
from ._call import Call, CallResult, Outcome, Retry
from ._clock import Clock, ManualClock, SystemClock
from ._discovery import Conflict, DiscoveryReport
from ._entrypoints import PLUGIN_GROUP, TOOL_GROUP, LoadFailure, refresh_entry_points
from ._errors import (
    ArgumentProblem,
    PluginError,
    RateLimitExceeded,
    ToolArgumentError,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
    ToolTimeout,
)
from ._plugins import PluginSet
from ._registry import ToolRegistry
from ._tool import RateLimit, Tool, ToolFunction, define_tool, defineTool
from .hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = [
    "PLUGIN_GROUP",
    "TOOL_GROUP",
    "ArgumentLimits",
    "ArgumentProblem",
    "Call",
    "CallResult",
    "Clock",
    "Conflict",
    "DiscoveryReport",
    "LoadFailure",
    "ManualClock",
    "Outcome",
    "PluginError",
    "PluginSet",
    "RateLimit",
    "RateLimitExceeded",
    "Retry",
    "SystemClock",
    "Tool",
    "ToolArgumentError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolFunction",
    "ToolNotFound",
    "ToolRegistry",
    "ToolTimeout",
    "__version__",
    "defineTool",
    "define_tool",
    "hookimpl",
    "refresh_entry_points",
]
