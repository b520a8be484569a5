"""What the framework adapters share: resolving the registry and the tools to adapt."""

from __future__ import annotations

from collections.abc import Iterable

from .._registry import ToolRegistry
from .._tool import Tool

__all__ = ["pick"]


def pick(registry: ToolRegistry | None, names: Iterable[str] | None) -> tuple[ToolRegistry, list[Tool]]:
    """The registry (default: the default registry) and the named tools (default: all)."""
    reg = registry if registry is not None else ToolRegistry.default()
    tools = reg.tools() if names is None else [reg.get(n) for n in names]
    return reg, tools
