"""A fourth review of the conformance kit (and the core's answers to misbehaving hooks): each test fails without
its fix."""

from __future__ import annotations

import re
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_conformance import _fresh_entry_points, install  # noqa: F401 - an autouse fixture

from harness_one import Await, Call, Outcome, Retry, ToolError, ToolRegistry, defineTool, hookimpl
from harness_one._discovery import as_tool
from harness_one._errors import PluginError, ToolExecutionError
from harness_one.testing import PluginTests, ToolPackageTests, footprint
from harness_one.testing import _plugins as kit_plugins
from harness_one.testing._suite import BoundedClock

pytest_plugins = ["pytester"]


def suite(kit: type, **attributes: Any) -> Any:
    """An instance of a subclass of ``kit`` with ``attributes`` (a suite as an author writes one)."""
    return type("TestSubject", (kit,), attributes)()


def probe(x: int = 0, fail: bool = False) -> dict[str, int]:
    """Return x; fail=True raises."""
    if fail:
        raise ValueError("the probe failed")
    return {"x": x}


def registry_with(*plugins: Any) -> ToolRegistry:
    registry = ToolRegistry(standard_plugins=False, autoload=False, plugins={p.name: p for p in plugins})
    registry.add(probe, name="probe")
    return registry


# ---------------------------------------------------------------------- 1. a plugin that retries every error forever


class RetryForever:
    name = "retry_forever"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Retry:
        return Retry(0.0)


def test_a_plugin_that_retries_every_error_forever_fails_the_check_whatever_the_calls_ended_in() -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        suite(PluginTests, plugin_factory=RetryForever, supports_async=False).test_a_refusal_stands()
    assert str(failed.value).startswith(
        "the kit's clock stopped the calls: the calls waited 100001 times: a plugin that retries or waits without end?"
    )


def test_the_kit_s_clock_records_that_it_stopped_the_calls() -> None:
    clock = BoundedClock()
    clock.max_waits = 2  # type: ignore[misc]
    clock.sleep(0)
    clock.sleep(0)
    assert clock.exceeded is None
    with pytest.raises(AssertionError, match="the calls waited 3 times"):
        clock.sleep(0)
    assert clock.exceeded is not None and clock.exceeded.startswith("the calls waited 3 times")


# ---------------------------------------------------------------------- 2. an answer the core does not take


class BadOnError:
    name = "bad_on_error"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Any:
        return 42


class BadAwaitedOnError:
    name = "bad_awaited"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Any:
        async def aio() -> int:
            return 42

        return Await(lambda: 42, aio)


class BadPreCall:
    name = "bad_pre_call"

    @hookimpl
    def harness_pre_call(self, call: Call) -> Any:
        return 42


class NonToolErrorOutcome:
    name = "non_tool_error"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome:
        return Outcome(error=ValueError("nope"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("plugin", "hook", "shown"),
    [
        (BadOnError, "on_error", "42"),
        (BadAwaitedOnError, "on_error", "42"),
        (BadPreCall, "pre_call", "42"),
        (NonToolErrorOutcome, "on_error", "Outcome(value=None, error=ValueError('nope'))"),
    ],
)
def test_an_answer_the_core_does_not_take_is_a_plugin_error_naming_the_plugin(plugin: type, hook: str, shown: str) -> None:
    registry = registry_with(plugin())
    for arguments in ({"x": 1, "fail": True}, {"y": 1}) if hook == "on_error" else ({"x": 1},):  # {"y": 1}: refused
        with pytest.raises(PluginError) as raised:
            registry.call("probe", dict(arguments))
        assert raised.value.plugin == plugin.name
        assert raised.value.message.startswith(
            f"The {hook} hook of plugin '{plugin.name}' returned {shown} while calling 'probe'"
        )


def test_outcome_failure_refuses_what_is_not_a_tool_error() -> None:
    with pytest.raises(TypeError, match=r"^Outcome.failure takes a ToolError, not ValueError"):
        Outcome.failure(ValueError("nope"))  # type: ignore[arg-type]
    assert Outcome.failure(ToolError("refused")).error is not None


class FailsOnlyTheTool:
    """Answers 42 only to the tool's own failure: the refusal check alone passes it."""

    name = "fails_only_the_tool"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Any:
        return 42 if isinstance(error, ToolExecutionError) else None


def test_a_plugin_whose_on_error_answers_what_the_core_does_not_take_fails_the_kit() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=BadOnError).test_a_refusal_stands()
    assert "call: the guard's refusal (ToolError) became the plugin's own PluginError: The on_error hook of plugin" in str(
        failed.value
    )
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=FailsOnlyTheTool).test_a_refusal_stands()
    text = str(failed.value)
    assert text.startswith("a call whose tool failed ended in a PluginError:")
    assert "call with {'x': 1, 'fail': True}, the plugin alone: the tool's failure became PluginError: The on_error hook" in text


class RaisingCall(ToolRegistry):
    def call(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("escaped")


def test_a_non_tool_error_escaping_a_call_is_named() -> None:
    def make_registry(self: Any, plugin: Any) -> ToolRegistry:
        registry = RaisingCall(standard_plugins=False, autoload=False, clock=BoundedClock(), plugins={"env": plugin})
        registry.add(self.probe_tool())
        return registry

    class Plain:
        name = "env"

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            return None

    with pytest.raises(AssertionError, match=r"^a non-ToolError escaped call with \{'x': 1\}: ValueError: escaped"):
        suite(PluginTests, plugin_factory=Plain, make_registry=make_registry, supports_async=False).test_a_refusal_stands()


# ---------------------------------------------------------------------- 13. telemetry sees what the caller gets


class Raises:
    name = "raises"

    @hookimpl(tryfirst=True)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        raise RuntimeError("on_error broke")


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @hookimpl(trylast=True)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self.seen.append(call.decision)


def test_the_hooks_after_a_raising_on_error_see_the_failure_the_caller_gets() -> None:
    recorder = Recorder()
    registry = registry_with(Raises(), recorder)
    with pytest.raises(PluginError) as raised:
        registry.call("probe", {"x": 1, "fail": True})
    assert raised.value.plugin == "raises"
    assert "Internal error in plugin 'raises' while handling an error of 'probe': RuntimeError: on_error broke" in str(
        raised.value
    )
    [decision] = recorder.seen
    assert type(decision) is Outcome and decision.error is raised.value


# ---------------------------------------------------------------------- 3. the caller's arguments


class Mutates:
    name = "mutates"

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if "x" in call.arguments:
            call.arguments["x"] = 99


def test_a_plugin_that_writes_into_the_caller_s_arguments_fails() -> None:
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=Mutates).test_arguments_stay_the_callers()
    text = str(failed.value)
    assert "{'x': 1, 'fail': False}: the call changed the caller's arguments to {'x': 99" in text
    assert "{'x': 1} (the plugin alone): the call changed the caller's arguments to {'x': 99}" in text


# ---------------------------------------------------------------------- 4. state in a sibling module


@pytest.fixture
def sibling_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    package = tmp_path / "review4_plug"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "store.py").write_text("_seen = {}\n\n\ndef remember(call_id, x):\n    _seen[call_id] = x\n")
    (package / "plugin.py").write_text(
        textwrap.dedent(
            """
            from harness_one import hookimpl
            from . import store


            class Remember:
                name = "remember"

                @hookimpl
                def harness_post_call(self, call):
                    store.remember(call.call_id, call.arguments.get("x"))
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    module = importlib.import_module("review4_plug.plugin")
    yield module
    for name in [n for n in sys.modules if n.split(".")[0] == "review4_plug"]:
        del sys.modules[name]


def test_state_kept_in_a_sibling_module_of_the_plugin_s_package_counts(sibling_package: Any) -> None:
    import sys

    plugin = sibling_package.Remember()
    before = footprint(plugin)
    sys.modules["review4_plug.store"]._seen.update({f"key{i}": f"value{i}" for i in range(100)})
    assert footprint(plugin) == before + 200
    with pytest.raises(AssertionError, match=r"^the state reachable from the plugin grew by \d+ objects over calls 5001-10000"):
        suite(PluginTests, plugin_factory=sibling_package.Remember).test_no_per_call_state()


# ---------------------------------------------------------------------- 5. a plugin that serializes every call


class Serializes:
    name = "serializes"

    def __init__(self) -> None:
        self.lock = threading.Lock()

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.lock.acquire()
        call.state["serializes.held"] = True

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        if call.state.pop("serializes.held", False):
            self.lock.release()

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        if call.state.pop("serializes.held", False):
            self.lock.release()


def test_a_plugin_that_serializes_calls_fails_the_thread_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kit_plugins, "_MEET_TIMEOUT", 0.5)
    with pytest.raises(AssertionError, match=r"^only 1 of 16 calls were in flight at once .*: the plugin serializes calls"):
        suite(PluginTests, plugin_factory=Serializes, supports_async=False).test_sixteen_threads()


# ---------------------------------------------------------------------- 7., 9., 11. tool packages

SORTS = """
from harness_one import defineTool
from harness_one.testing import ToolPackageTests


@defineTool(registry=None, examples=[{"arguments": {"items": [3, 1, 2]}, "result": [1, 2, 3]}])
def sort_in_place(items: list[int]) -> list[int]:
    \"\"\"Sort the items.\"\"\"
    items.sort()
    return items


class TestSorts(ToolPackageTests):
    tools = [sort_in_place]
"""


def test_a_tool_that_changes_its_arguments_in_place_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sorts=SORTS)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_examples or import_has")
    text = inner.stdout.str()
    inner.assert_outcomes(failed=1, skipped=1)
    assert (
        "the tool changed its arguments in place ({'items': [3, 1, 2]} became {'items': [1, 2, 3]}): they are the caller's"
        in text
    )
    assert "TestSorts: test_import_has_no_side_effects: nothing to check: tools = [...] given" in text


@defineTool(registry=None, examples=[{"arguments": {"items": [3, 1, 2]}, "result": [1, 2, 3]}])
def review4_sort_in_place(items: list[int]) -> list[int]:
    """Sort the items."""
    items.sort()
    return items


def test_each_run_of_an_example_gets_its_own_copy_of_the_arguments() -> None:
    kit = suite(ToolPackageTests, tools=[review4_sort_in_place])
    registry = kit.make_registry()
    tool = as_tool(review4_sort_in_place)
    registry.add(tool)
    example = tool.examples[0]
    problems = kit.run_example(registry, tool, example)
    assert example["arguments"] == {"items": [3, 1, 2]}  # the acall run had the example's own input too
    assert problems == [
        "the tool changed its arguments in place ({'items': [3, 1, 2]} became {'items': [1, 2, 3]}): they are the "
        "caller's (the model's request, kept in its conversation): copy what the tool changes (sorted(items), not "
        "items.sort())"
    ]


MISNAMED = """
from harness_one import defineTool


@defineTool(registry=None)
def review4_ident(x: int) -> int:
    \"\"\"Return x.\"\"\"
    return x
"""


def test_an_entry_point_not_named_after_its_tool_fails(pytester: pytest.Pytester) -> None:
    install(pytester, "review4-misnamed", {"review4_misnamed": MISNAMED}, {"identity": "review4_misnamed:review4_ident"})
    pytester.makepyfile(
        test_mis="from harness_one.testing import ToolPackageTests\n\n\n"
        "class TestMis(ToolPackageTests):\n    distribution = 'review4-misnamed'\n"
    )
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "entry_points_load")
    inner.assert_outcomes(failed=1)
    assert (
        "entry point 'identity' (review4_misnamed:review4_ident) provides 'review4_ident', not the one tool it is named after"
        in inner.stdout.str()
    )


def test_an_entry_point_named_after_its_tool_passes(pytester: pytest.Pytester) -> None:
    install(pytester, "review4-named", {"review4_named": MISNAMED}, {"review4_ident": "review4_named:review4_ident"})
    pytester.makepyfile(
        test_named="from harness_one.testing import ToolPackageTests\n\n\n"
        "class TestNamed(ToolPackageTests):\n    distribution = 'review4-named'\n"
    )
    pytester.runpytest("-p", "no:cacheprovider", "-k", "entry_points_load").assert_outcomes(passed=1)


TUNED = """
from harness_one.testing import PluginTests
from harness_one import hookimpl


class Quiet:
    name = "quiet"

    @hookimpl
    def harness_pre_call(self, call):
        return None


class TestRuns(PluginTests):
    plugin_factory = Quiet
    threads = 17


class TestDeselected(PluginTests):
    plugin_factory = Quiet
    threads = 18
"""


def test_the_summary_lists_the_tuning_of_the_suites_that_run_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tuned=TUNED)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "TestRuns and has_a_name")
    inner.assert_outcomes(passed=1)
    text = inner.stdout.str()
    assert "test_tuned.py::TestRuns: tuned: threads = 17 (the kit's: 16)" in text
    assert "TestDeselected" not in text


# ---------------------------------------------------------------------- 8. an override that passes under xfail

XFAIL = """
import pytest
from harness_one import defineTool
from harness_one.testing import ToolPackageTests


@defineTool(registry=None)
def review4_echo(x: int) -> int:
    \"\"\"Return x.\"\"\"
    return x


class TestNoop(ToolPackageTests):
    tools = [review4_echo]

    @pytest.mark.xfail(reason="drops the pattern", strict=STRICT)
    def test_export_every_format(self, loaded):
        pass


class TestKnown(ToolPackageTests):
    tools = [review4_echo]

    @pytest.mark.xfail(reason="known to fail")
    def test_descriptions(self, loaded):
        raise AssertionError("still failing")
"""


@pytest.mark.parametrize("strict", [False, True])
def test_an_override_that_passes_under_xfail_fails(pytester: pytest.Pytester, strict: bool) -> None:
    pytester.makepyfile(test_xfail=XFAIL.replace("STRICT", str(strict)))
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "export_every_format or descriptions")
    inner.assert_outcomes(failed=1, xfailed=1, passed=2)
    text = inner.stdout.str()
    assert (
        "[XPASS] test_export_every_format is overridden under @pytest.mark.xfail(reason='drops the pattern'), and the "
        "override passed: the check no longer fails (or the override checks nothing): remove the override" in text
    )
    assert "TestKnown: test_descriptions: known failure: known to fail" in text
    assert "TestNoop: test_export_every_format: known failure" not in text


# ---------------------------------------------------------------------- 10. a plugin that needs options

NEEDS = """
from harness_one import hookimpl


class NeedsLimit:
    name = "review4_needs"

    def __init__(self, *, limit):
        self.limit = limit

    @hookimpl
    def harness_pre_call(self, call):
        return None
"""

NEEDS_SUITE = """
from harness_one.testing import PluginTests
import review4_needs


class TestNeeds(PluginTests):
    plugin_factory = lambda: review4_needs.NeedsLimit(limit=10**9)
    entry_point = "review4_needs"
    OPTIONS
"""


@pytest.mark.parametrize("options", ["", "plugin_options = {'limit': 10**9}"])
def test_a_plugin_that_needs_options_loads_from_its_entry_point_with_plugin_options(
    pytester: pytest.Pytester, options: str
) -> None:
    site = pytester.mkdir("site-review4-needs")
    (site / "review4_needs.py").write_text(NEEDS)
    info = site / "review4_needs-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: review4-needs\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[harness_one.plugins]\nreview4_needs = review4_needs:NeedsLimit\n")
    pytester.syspathinsert(site)
    pytester.makepyfile(test_needs=NEEDS_SUITE.replace("OPTIONS", options))
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_entry_point")
    if options:
        inner.assert_outcomes(passed=1)
    else:
        inner.assert_outcomes(failed=1)
        text = inner.stdout.str()
        assert "the entry point failed to load:\n" in text
        assert "(loaded with no options: a plugin that needs some gets them from the suite's plugin_options" in text
        assert re.search(r"missing 1 required keyword-only argument: 'limit'", text)


# ---------------------------------------------------------------------- 12. the Await example of writing-plugins.md


def test_the_await_example_of_writing_plugins_passes_the_growth_check(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).parent.parent / "docs" / "writing-plugins.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "class AuditTrail" in b]
    namespace: dict[str, Any] = {"__name__": "review4_docs_trail"}
    exec(compile(block, "writing-plugins.md", "exec"), namespace)
    assert capsys.readouterr().out == "[('ping', 'sync'), ('ping', 'async')]\n"
    suite(PluginTests, plugin_factory=namespace["AuditTrail"], plugin_name="trail").test_no_per_call_state()
