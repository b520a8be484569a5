"""The seed's import path: ``from harness_one.tools import defineTool, ToolRegistry``."""

from ._errors import (
    PluginError,
    RateLimitExceeded,
    RetryableError,
    ToolArgumentError,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
    ToolTimeout,
)
from ._policies import RateLimit, RetryPolicy
from ._registry import ToolRegistry
from ._tool import Tool, define_tool, defineTool

__all__ = [
    "PluginError",
    "RateLimit",
    "RateLimitExceeded",
    "RetryPolicy",
    "RetryableError",
    "Tool",
    "ToolArgumentError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFound",
    "ToolRegistry",
    "ToolTimeout",
    "defineTool",
    "define_tool",
]
