"""Tools whose results MCP cannot carry, served by ``tests/test_mcp_server_review2.py`` (not a test module)."""

from __future__ import annotations

from typing import Any

from harness_one import ToolError, defineTool


@defineTool(registry=None)
def nest(depth: int) -> dict[str, Any]:
    """Objects ``depth`` levels inside one another (an object output schema: a structured result)."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@defineTool(registry=None)
def power(base: int, exp: int) -> int:
    """``base ** exp`` (an int: structured as ``{"result": n}``)."""
    return int(base**exp)


class DeepError(ToolError):
    """A plugin's kind of error whose own field JSON readers refuse (nested 300 levels)."""

    kind = "deep"

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["detail"] = _nested(300)
        return data


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@defineTool(registry=None)
def fail_deep() -> str:
    """Raise a :class:`DeepError`."""
    raise DeepError("deep failure")
