"""Ways past the conformance kit a review found: each test fails without the kit's fix for it."""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import types
from typing import Any, ClassVar

import pytest
from test_conformance import _fresh_entry_points, install, message, outcomes  # noqa: F401 - an autouse fixture

from harness_one import Call, ToolError, hookimpl, per_tool
from harness_one.testing import CircuitStoreContract, PluginTests, ToolPackageTests, footprint

pytest_plugins = ["pytester"]


def suite(kit: type, **attributes: Any) -> Any:
    """An instance of a subclass of ``kit`` with ``attributes`` (a suite as an author writes one)."""
    return type("TestSubject", (kit,), attributes)()


# ---------------------------------------------------------------------- has_side_effects

SIDE_EFFECTS = '''
import os

from harness_one import ToolRegistry, defineTool
from harness_one.testing import ToolPackageTests


@defineTool(
    registry=None,
    destructive=True,
    examples=[
        {"arguments": {"path": VICTIM}, "error": "ToolExecutionError"},  # only running the tool raises it
        {"arguments": {"path": 5}, "error": "ToolArgumentError"},  # refused before the tool runs
    ],
)
def delete_file(path: str) -> str:
    """Delete a file, then fail."""
    os.remove(path)
    raise RuntimeError("deleted, then failed")


class TestDestructive(ToolPackageTests):
    tools = [delete_file]
    has_side_effects = True


class TestDestructiveUnvalidated(ToolPackageTests):
    tools = [delete_file]
    has_side_effects = True

    def make_registry(self):
        return ToolRegistry(standard_plugins=False, autoload=False)
'''


def test_a_tool_with_side_effects_never_runs(pytester: pytest.Pytester) -> None:
    victim = pytester.path / "VICTIM"
    victim.write_text("precious")
    pytester.makepyfile(test_destructive=SIDE_EFFECTS.replace("VICTIM", repr(str(victim)), 1))
    inner = pytester.runpytest("-p", "no:cacheprovider", "-rs", "-k", "examples or argument_errors")
    assert victim.read_text() == "precious"
    got = outcomes(inner)
    assert got["TestDestructive::test_examples"] == "skipped"
    assert "of the 2 that expect an error, 1 ran with the tool replaced by a stand-in, 1 not run" in inner.stdout.str()
    assert got["TestDestructive::test_argument_errors_name_the_field"] == "passed"  # validation refuses first
    text = message(inner, "TestDestructiveUnvalidated::test_argument_errors_name_the_field")
    assert "tool 'delete_file', 'path' given 12345: accepted: the tool would have run" in text


# ---------------------------------------------------------------------- waits without end

FOREVER = """
import pytest
from harness_one import Retry, ToolError, hookimpl
from harness_one.testing import PluginTests


class RetryForever:
    name = "retry_forever"

    @hookimpl
    def harness_on_error(self, call, error):
        return Retry(0.01)


class TestRetryForever(PluginTests):
    plugin_factory = RetryForever


def test_a_sync_call_stops():
    kit = TestRetryForever()
    registry = kit.make_registry(kit.make_plugin())
    with pytest.raises(ToolError, match="the calls waited 100001 times: a plugin that retries or waits without end"):
        kit.call(registry, fail=True)
"""


def test_a_plugin_that_retries_forever_fails_instead_of_hanging(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_forever=FOREVER)
    inner = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-k", "async_calls or sync_call", timeout=60)
    text = inner.stdout.str()
    assert re.search(r"test_a_sync_call_stops PASSED", text) and re.search(r"test_async_calls FAILED", text)
    assert "the calls waited 100001 times: a plugin that retries or waits without end?" in text


# ---------------------------------------------------------------------- the override guard


def test_standard_is_only_for_the_kit() -> None:
    with pytest.raises(TypeError, match=r"passes standard=True, which only the conformance kit's own suites"):
        type("TestMine", (PluginTests,), {}, standard=True)


@pytest.mark.parametrize(
    ("kit", "helper"),
    [
        (ToolPackageTests, "run_example"),
        (ToolPackageTests, "loaded"),
        (PluginTests, "call"),
        (PluginTests, "assert_silent"),
        (PluginTests, "switched_off"),
        (CircuitStoreContract, "trip"),
    ],
)
def test_guard_refuses_an_overridden_helper(kit: type, helper: str) -> None:
    with pytest.raises(AssertionError, match=rf"{helper} is overridden, but the checks rely on it \(a {kit.__name__} subclass"):
        suite(kit, **{helper: lambda self, *args, **kwargs: None}).test_no_overrides_DO_NOT_OVERRIDE()
    # what an implementer provides stays open
    provided = {ToolPackageTests: ("make_registry",), PluginTests: ("make_plugin", "call_options", "make_registry")}
    suite(kit, **dict.fromkeys(provided.get(kit, ("circuits",)), lambda self: None)).test_no_overrides_DO_NOT_OVERRIDE()


# ---------------------------------------------------------------------- per-call state


def test_footprint_follows_class_state_closures_bound_methods_and_module_globals() -> None:
    class ClassLevel:
        seen: ClassVar[list[int]] = []

    rows: list[int] = []
    kept: list[int] = []

    def record(x: int) -> None:
        rows.append(x)

    holder = types.SimpleNamespace(record=record, add=kept.append)
    module = types.ModuleType("a_plugin_module")
    module.rows = []  # type: ignore[attr-defined]
    module.other = sys  # type: ignore[attr-defined]  # another module: not entered
    plugin = ClassLevel()
    before = [footprint(plugin), footprint(holder), footprint(module)]
    ClassLevel.seen += range(1000, 1100)
    rows += range(2000, 2100)
    kept += range(3000, 3100)
    module.rows += range(4000, 4100)  # type: ignore[attr-defined]
    assert [footprint(plugin), footprint(holder), footprint(module)] == [before[0] + 100, before[1] + 200, before[2] + 100]
    assert before[2] < 50  # sys was not entered


# ---------------------------------------------------------------------- the name


class Nameless:
    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        return None


def test_a_nameless_plugin_takes_the_name_it_is_shipped_under() -> None:
    suite(PluginTests, plugin_factory=Nameless, entry_point="audit").test_has_a_name()
    suite(PluginTests, plugin_factory=Nameless, plugin_name="audit").test_has_a_name()
    with pytest.raises(AssertionError, match=r"Nameless has no usable name \(None\)"):
        suite(PluginTests, plugin_factory=Nameless).test_has_a_name()
    named = type("Named", (Nameless,), {"name": "other"})
    with pytest.raises(AssertionError, match="the plugin calls itself 'other', but is registered as 'audit'"):
        suite(PluginTests, plugin_factory=named, entry_point="audit").test_has_a_name()


# ---------------------------------------------------------------------- what per_tool prepares


class PartialPerTool:
    name = "partial_per_tool"

    def check(self, limit: int, call: Call) -> None:
        if call.arguments.get("x", 0) > limit:
            raise ToolError("x too large")

    @hookimpl
    @per_tool(lambda plugin, tool: functools.partial(plugin.check, 10**9))
    def harness_pre_call(self, call: Call) -> None:
        self.check(10**9, call)


class Prepared:
    def __call__(self, call: Call) -> None:
        return None


class ObjectPerTool:
    name = "object_per_tool"

    @hookimpl
    @per_tool(lambda plugin, tool: Prepared())
    def harness_pre_call(self, call: Call) -> None:
        return None


def test_a_fault_reaches_what_per_tool_prepared() -> None:
    kit = suite(PluginTests, plugin_factory=PartialPerTool)
    assert PartialPerTool.check.__code__ in kit.hook_codes(kit.make_plugin())
    trace, _, _ = kit.inject("harness_pre_call", False)
    assert trace.entered and trace.fired  # raised inside the partial's function
    with pytest.raises(AssertionError, match=r"harness_pre_call: per_tool prepared .* which has no Python code to inject"):
        suite(PluginTests, plugin_factory=ObjectPerTool).test_raising_hook_is_a_plugin_error()


# ---------------------------------------------------------------------- faults swallowed without a try


class Suppressing:
    name = "suppressing"

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        with contextlib.suppress(Exception):
            call.state["suppressing.n"] = 1


def test_a_hook_that_swallows_with_suppress_fails() -> None:
    with pytest.raises(AssertionError, match=r"harness_post_call \(inside its with\): the fault was swallowed"):
        suite(PluginTests, plugin_factory=Suppressing).test_raising_hook_is_a_plugin_error()


# ---------------------------------------------------------------------- ValidationPluginContract

NOOP_VALIDATION = """
import pytest
from harness_one import hookimpl
from harness_one.testing import ValidationPluginContract


class Noop:
    name = "validation"

    @hookimpl(trylast=True)
    def harness_pre_validate(self, call):
        return None


class TestNoop(ValidationPluginContract):
    @pytest.fixture
    def make_plugin(self):
        return Noop
"""


def test_a_validation_plugin_that_validates_nothing_fails_every_check(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_noop=NOOP_VALIDATION)
    got = outcomes(pytester.runpytest("-p", "no:cacheprovider"))
    assert len(got) == 6 and {k: v for k, v in got.items() if v != "failed"} == {
        "TestNoop::test_no_overrides_DO_NOT_OVERRIDE": "passed"
    }


# ---------------------------------------------------------------------- tool packages

LOOKUP = '''
from harness_one import defineTool


@defineTool(registry=None)
def lookup(key: str) -> str:
    """Look a key up."""
    return key
'''


def test_a_tool_shadowed_by_another_package_is_a_conflict(pytester: pytest.Pytester) -> None:
    for dist in ("conformance-shadow-a", "conformance-shadow-b"):
        module = dist.replace("-", "_")
        install(pytester, dist, {module: LOOKUP}, {"lookup": module})
    pytester.makepyfile(
        test_shadow="from harness_one.testing import ToolPackageTests\n\n\n"
        "class TestA(ToolPackageTests):\n    distribution = 'conformance-shadow-a'\n\n\n"
        "class TestB(ToolPackageTests):\n    distribution = 'conformance-shadow-b'\n"
    )
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "entry_points_load")
    got = outcomes(inner)
    assert sorted(got.values()) == ["failed", "passed"], got
    loser, winner = ("a", "b") if got["TestA::test_entry_points_load"] == "failed" else ("b", "a")
    text = message(inner, f"Test{loser.upper()}::test_entry_points_load")
    assert (
        f"name conflict with another installed package: tool 'lookup': kept conformance-shadow-{winner}, "
        f"skipped conformance-shadow-{loser}"
    ) in text


NOISY = '''
import logging
import os
import sys

from harness_one import defineTool

sys.stderr.write("to sys.stderr\\n")
os.write(1, b"to fd 1\\n")
logging.getLogger("noisy").warning("a warning at import")


@defineTool(registry=None)
def quiet(x: int) -> int:
    """Return x."""
    return x
'''


def test_printing_to_stderr_a_file_descriptor_or_a_log_at_import_is_printing(pytester: pytest.Pytester) -> None:
    install(pytester, "conformance-noisy-tools", {"conformance_noisy_tools": NOISY}, {"quiet": "conformance_noisy_tools"})
    with pytest.raises(pytest.fail.Exception) as failed:
        suite(ToolPackageTests, distribution="conformance-noisy-tools").test_import_has_no_side_effects()
    assert "printed at import (to stdout): 'to fd 1\\n'" in str(failed.value)
    assert "printed at import (to stderr): 'to sys.stderr\\na warning at import\\n'" in str(failed.value)
