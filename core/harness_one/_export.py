"""Tool definitions in the shapes providers expect (see ``docs/cli.md``; more formats come later)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._tool import Tool

__all__ = ["FORMATS", "export_tools"]


def _openai(tool: Tool) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters}}


def _anthropic(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


FORMATS: dict[str, Callable[[Tool], dict[str, Any]]] = {"openai": _openai, "anthropic": _anthropic}


def export_tools(tools: Iterable[Tool], format: str) -> list[dict[str, Any]]:
    """Each tool in ``format`` (``openai`` chat completions, ``anthropic``)."""
    try:
        convert = FORMATS[format]
    except KeyError:
        raise ValueError(f"unknown export format {format!r}; known: {', '.join(FORMATS)}") from None
    return [convert(t) for t in tools]
