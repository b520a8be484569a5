"""Kit checks the broken package and plugin of test_conformance do not reach: each fails (or is
switched off) for a subject that breaks exactly it."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

INNER = '''
from harness_one import Tool, defineTool, hookimpl
from harness_one.testing import PluginTests, ToolPackageTests


class AsyncHook:
    name = "async_hook"

    @hookimpl
    async def harness_pre_call(self, call):
        return None


class Lingering:
    """Leaves a twin behind: unregistered, blocked or replaced, its hooks still run."""

    name = "lingering"

    def __init__(self, twin=True):
        self.twin = twin

    @hookimpl
    def harness_tool_added(self, tool, registry):
        if self.twin and "lingering-twin" not in registry.plugins:
            registry.plugins.register(Lingering(twin=False), "lingering-twin")

    @hookimpl
    def harness_pre_call(self, call):
        return None


class Quiet:
    name = "quiet"

    @hookimpl
    def harness_pre_call(self, call):
        return None


@defineTool(registry=None)
def shaped(x: int) -> int:
    """Return x."""
    return x


@defineTool(registry=None)
def labelled(labels: dict[str, int]) -> int:
    """Count the labels."""
    return len(labels)


def hand_built(parameters):
    made = Tool.create(lambda x: x, name="hand_built", description="Return x.")
    made.parameters = parameters  # what the kit checks again: a tool changed after it was defined
    return made


class TestAsyncHook(PluginTests):
    plugin_factory = AsyncHook


class TestLingering(PluginTests):
    plugin_factory = Lingering


class TestNotShipped(PluginTests):
    plugin_factory = Quiet
    entry_point = "quiet"  # no distribution ships it


class TestSyncOnly(PluginTests):
    plugin_factory = Quiet
    supports_async = False


class TestNotAnObject(ToolPackageTests):
    tools = [hand_built({"type": "string"})]


class TestNotJson(ToolPackageTests):
    tools = [hand_built({"type": "object", "properties": {"x": {"enum": [{1, 2}]}}})]


class TestTooSlow(ToolPackageTests):
    distribution = "harness-one-calculate"
    load_budget = 0.0  # no import is that fast: the bound is checked


class TestNotStrict(ToolPackageTests):
    tools = [shaped, labelled]
    supports_strict = False
'''


def test_the_checks_the_broken_suites_do_not_reach_can_fail(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_kit_checks_inner=INNER)
    inner = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")  # its own process: nothing it loads stays
    text = inner.stdout.str()
    got = dict(re.findall(r"::(\w+::\w+) (PASSED|FAILED|SKIPPED)", text))
    assert got["TestAsyncHook::test_hooks_are_plain_functions"] == "FAILED"
    assert "harness_pre_call is a coroutine or generator" in text
    for check in ("test_registers_and_unregisters", "test_blocked_by_name", "test_replaced_by_name"):
        assert got[f"TestLingering::{check}"] == "FAILED"
    assert "the plugin's hooks still ran" in text
    assert got["TestSyncOnly::test_async_calls"] == "SKIPPED" and got["TestSyncOnly::test_hooks_are_plain_functions"] == "PASSED"
    assert got["TestNotAnObject::test_parameters_are_object_schemas"] == "FAILED"
    assert "the root is not 'type': 'object'" in text
    assert got["TestNotJson::test_export_every_format"] == "FAILED"
    assert "to import (load_budget = 0.0 s)" in text
    assert got["TestNotShipped::test_entry_point"] == "FAILED"
    assert got["TestNotStrict::test_strict_openai_export"] == "PASSED"  # labelled cannot be strict: allowed, and named
