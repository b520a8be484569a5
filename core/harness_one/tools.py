"""The seed's import path: ``from harness_one.tools import defineTool, ToolRegistry``."""

from ._errors import (
    PluginError,
    RateLimitExceeded,
    ToolArgumentError,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
    ToolTimeout,
)
from ._registry import ToolRegistry
from ._tool import RateLimit, Tool, define_tool, defineTool

__all__ = [
    "PluginError",
    "RateLimit",
    "RateLimitExceeded",
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
