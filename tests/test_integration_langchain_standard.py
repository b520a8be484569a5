"""langchain-tests' standard ``ToolsUnitTests`` and ``ToolsIntegrationTests`` on the LangChain adapter.

Three harness tools, each through ``to_langchain``: a contrib tool (``calculate``), an async
tool, and a tool that takes its ``Call`` and runs under a rate limit.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from harness_one_calculate import calculate
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from harness_one import Call, ManualClock, ToolRegistry, define_tool
from harness_one.integrations.langchain import to_langchain

REGISTRY = ToolRegistry(autoload=False, clock=ManualClock())
REGISTRY.add(calculate)


@define_tool(registry=REGISTRY)
async def lookup(key: str, default: str = "") -> str:
    """Look a key up in the settings store.

    Args:
        key: The setting's name.
        default: What to return when the setting is missing.
    """
    await asyncio.sleep(0)
    return {"colour": "blue", "size": "large"}.get(key, default)


@define_tool(registry=REGISTRY, rate_limit={"rate": 1e9, "burst": 1e9})
def add(a: float, b: float, call: Call) -> str:
    """Add two numbers and say which call did it."""
    return f"{a + b} ({call.tool.name})"


class _Harness:
    """A harness tool of ``REGISTRY`` through ``to_langchain``, and the arguments of an example call."""

    harness_tool: ClassVar[Any]
    example: ClassVar[dict[str, Any]]

    @property
    def tool_constructor(self) -> BaseTool:
        return to_langchain(self.harness_tool, REGISTRY)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return self.example


class _Calculate(_Harness):
    harness_tool = "calculate"
    example: ClassVar[dict[str, Any]] = {"expression": "2 * (3 + 4) ** 2"}


class _Lookup(_Harness):
    harness_tool = lookup
    example: ClassVar[dict[str, Any]] = {"key": "colour"}


class _Add(_Harness):
    harness_tool = add.tool
    example: ClassVar[dict[str, Any]] = {"a": 2, "b": 3}


class TestCalculateUnit(_Calculate, ToolsUnitTests):
    pass


class TestCalculateIntegration(_Calculate, ToolsIntegrationTests):
    pass


class TestLookupUnit(_Lookup, ToolsUnitTests):
    pass


class TestLookupIntegration(_Lookup, ToolsIntegrationTests):
    pass


class TestAddUnit(_Add, ToolsUnitTests):
    pass


class TestAddIntegration(_Add, ToolsIntegrationTests):
    pass
