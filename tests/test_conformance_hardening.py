"""Ways past the conformance kit a review found: each test fails without the kit's fix for it."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import conformance_review as review
import pytest
from test_conformance import _fresh_entry_points, install, message, outcomes  # noqa: F401 - an autouse fixture

from harness_one import Call, ToolError, ToolRegistry, hookimpl, per_tool
from harness_one.testing import (
    BudgetStoreContract,
    CircuitStoreContract,
    IdempotencyStoreContract,
    PluginTests,
    RateLimitBackendContract,
    ToolPackageTests,
    footprint,
)
from harness_one.testing._suite import tuning_changes

pytest_plugins = ["pytester"]


def suite(kit: type, **attributes: Any) -> Any:
    """An instance of a subclass of ``kit`` with ``attributes`` (a suite as an author writes one)."""
    return type("TestSubject", (kit,), attributes)()


# ---------------------------------------------------------------------- has_side_effects

SIDE_EFFECTS = '''
import os

from harness_one import ToolError, ToolRegistry, defineTool
from harness_one.testing import ToolPackageTests


class Protected(ToolError):
    """The file was deleted, then found protected."""


@defineTool(
    registry=None,
    destructive=True,
    examples=[
        {"arguments": {"path": VICTIM}, "error": "Protected"},  # only running the tool raises it
        {"arguments": {"path": 5}, "error": "ToolArgumentError"},  # refused before the tool runs
    ],
)
def delete_file(path: str) -> str:
    """Delete a file, then refuse."""
    os.remove(path)
    raise Protected("deleted, then refused")


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
    inner = pytester.runpytest("-p", "no:cacheprovider", "-rs", "-k", "examples or argument_errors or built")
    assert victim.read_text() == "precious"
    got = outcomes(inner)
    assert got["TestDestructive::test_examples"] == "skipped"
    assert got["TestDestructive::test_a_call_built_from_the_schema_runs"] == "passed"  # it reached the stand-in
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
    inner = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-k", "async_calls or sync_call", timeout=300)
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
    trace, _, _ = kit.inject("harness_pre_call")
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
    with pytest.raises(AssertionError, match=r"harness_post_call \(inside its with at line \d+\): the fault was swallowed"):
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


# ---------------------------------------------------------------------- beside the standard plugins (a guard's place)

DOCS = Path(__file__).parent.parent / "docs"
UNMARKED = "@hookimpl\n    def harness_pre_call"


def docs_audit(pre_call_mark: str = "@hookimpl(tryfirst=True)\n    def harness_pre_call") -> type:
    """The ``Audit`` plugin of ``writing-plugins.md`` (its ``pre_call`` marked ``pre_call_mark``)."""
    text = (DOCS / "writing-plugins.md").read_text().split("## An audit plugin", 1)[1]
    block = text.split("```python\n", 1)[1].split("\nregistry = ", 1)[0]
    assert "@hookimpl(tryfirst=True)\n    def harness_pre_call" in block, "the docs' guard is not tryfirst"
    space: dict[str, Any] = {}
    exec(block.replace("@hookimpl(tryfirst=True)\n    def harness_pre_call", pre_call_mark), space)  # the docs' own code
    return space["Audit"]  # type: ignore[no-any-return]


def salary_registry(audit: type) -> ToolRegistry:
    registry = ToolRegistry(plugins={"audit": audit}, autoload=False)
    registry.add(lambda name: f"salary of {name}: 9000", name="salary", tags=["admin"], read_only=True, cache_ttl=60)
    return registry


def test_the_docs_guard_refuses_a_call_the_cache_could_answer() -> None:
    registry = salary_registry(docs_audit())
    assert not registry.try_call("salary", {"name": "bob"}).ok
    assert registry.call("salary", {"name": "bob"}, context={"role": "admin"}) == "salary of bob: 9000"
    assert not registry.try_call("salary", {"name": "bob"}).ok  # not the cached answer
    bypassed = salary_registry(docs_audit(UNMARKED))  # the docs' guard as it was: unmarked
    bypassed.call("salary", {"name": "bob"}, context={"role": "admin"})
    assert bypassed.try_call("salary", {"name": "bob"}).ok  # what the check below catches


def test_a_guard_that_runs_after_the_standard_pre_calls_fails_beside_them() -> None:
    recorded: list[tuple[str, object]] = []
    suite(PluginTests, plugin_factory=docs_audit(), plugin_name="audit", guards_calls=True).test_beside_the_standard_plugins(
        lambda key, value: recorded.append((key, value))
    )
    assert recorded[0][0] == "harness_one_plan"
    assert str(recorded[0][1]).startswith("pre_call: [audit] idempotency budget approval cache rate_limit")
    late = suite(PluginTests, plugin_factory=docs_audit(UNMARKED), plugin_name="audit", guards_calls=True)
    with pytest.raises(AssertionError, match=r"the pre_call of idempotency, budget, approval, cache runs before the plugin's"):
        late.test_beside_the_standard_plugins(lambda key, value: None)
    suite(PluginTests, plugin_factory=docs_audit(UNMARKED)).test_beside_the_standard_plugins(lambda key, value: None)


BESIDE = '''
from conformance_review import TranslateErrors
from harness_one import hookimpl
from harness_one.testing import PluginTests


class OnlyAlone:
    """In the place of the standard budget plugin: fine alone, it fails every call beside the others."""

    name = "budget"

    @hookimpl
    def harness_pre_call(self, call):
        if call.registry.plugins.get("rate_limit") is not None:
            raise RuntimeError("not alone")


class TestTranslate(PluginTests):
    plugin_factory = TranslateErrors


class TestOnlyAlone(PluginTests):
    plugin_factory = OnlyAlone
'''


def test_the_summary_shows_where_the_plugin_runs_beside_the_standard_plugins(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_beside=BESIDE)
    pytester.syspathinsert(Path(__file__).parent)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_beside_the_standard_plugins")
    got = outcomes(inner)
    assert got == {
        "TestTranslate::test_beside_the_standard_plugins": "passed",
        "TestOnlyAlone::test_beside_the_standard_plugins": "failed",
    }
    assert "call with {'x': 1}: alone it gave {'x': 1, 'double': 2}, beside them PluginError" in message(
        inner, "TestOnlyAlone::test_beside_the_standard_plugins"
    )
    summary = inner.stdout.str().split("where each plugin runs beside the standard plugins", 1)[1]
    assert "TestTranslate: on_error: rate_limit concurrency [translate_errors] timeout retry" in summary
    assert "TestOnlyAlone: pre_call: idempotency approval cache [budget] rate_limit" in summary


# ---------------------------------------------------------------------- calls in flight together; failures through acall


def test_state_shared_between_calls_in_flight_fails_the_thread_check() -> None:
    with pytest.raises(AssertionError, match=r"got another answer than the plugin alone gives one call at a time"):
        suite(PluginTests, plugin_factory=review.SharedSlot, supports_async=False).test_sixteen_threads()


def test_a_failure_ends_through_acall_as_through_call() -> None:
    for documented in (review.TranslateErrors, review.Fallback):  # translate the error; recover with a value
        suite(PluginTests, plugin_factory=documented).test_async_calls()
    with pytest.raises(AssertionError, match=r"conformance_probe: call gave \{'x': 0, 'double': 0\}, acall ToolExecutionError"):
        suite(PluginTests, plugin_factory=review.RecoversOnlySync).test_async_calls()


SWALLOW = """
from conformance_review import Fallback, RecoversOnlySync
from harness_one import Outcome, hookimpl
from harness_one.testing import PluginTests


class SwallowSync:
    \"\"\"Answers every error with a value: a crash of the tool, and a refusal too (the review's, sync calls only).\"\"\"

    name = "swallow_sync"

    @hookimpl
    def harness_on_error(self, call, error):
        return Outcome.success({"x": 0, "double": 0})


class TestSwallowSync(PluginTests):
    plugin_factory = SwallowSync
    supports_async = False


class TestFallback(PluginTests):
    plugin_factory = Fallback
    supports_async = False


class TestRecoversOnlySync(PluginTests):
    plugin_factory = RecoversOnlySync
    supports_async = False
"""


def test_a_plugin_that_answers_a_refusal_with_a_value_is_told_from_one_that_recovers_a_crash(
    pytester: pytest.Pytester,
) -> None:
    """Sync calls only, a plugin that answers every error with a value passed every check the documented
    ``Fallback`` (which recovers only the tool's crash) passes; now it fails the one about another plugin's refusal."""
    pytester.makepyfile(test_swallow=SWALLOW)
    pytester.syspathinsert(Path(__file__).parent)
    inner = pytester.runpytest("-p", "no:cacheprovider")
    failures = {k for k, v in outcomes(inner).items() if v == "failed"}
    assert failures == {"TestSwallowSync::test_a_refusal_stands", "TestRecoversOnlySync::test_a_refusal_stands"}
    for each in ("TestSwallowSync", "TestRecoversOnlySync"):
        assert (
            "call: the guard's refusal (ToolError) became the value {'x': 0, 'double': 0}, refusal 1 of 5 in a row after "
            "the same call was let through (recover with a value only what the tool raised"
            in message(inner, f"{each}::test_a_refusal_stands")
        )


def test_a_plugin_whose_on_error_fails_on_a_call_its_pre_call_never_saw_fails() -> None:
    class Unready:
        name = "unready"

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            call.state["unready.took"] = True

        @hookimpl
        def harness_on_error(self, call: Call, error: ToolError) -> None:
            del call.state["unready.took"]  # a KeyError when an earlier pre_call refused the call

    with pytest.raises(
        AssertionError, match=r"call: the guard's refusal \(ToolError\) became the plugin's own PluginError: .*KeyError"
    ):
        suite(PluginTests, plugin_factory=Unready).test_a_refusal_stands()
    suite(PluginTests, plugin_factory=review.ReleasingSlots).test_a_refusal_stands()  # pop(key, False): fine


# ---------------------------------------------------------------------- faults in helpers, later tries, specname hooks


@pytest.mark.parametrize(
    ("plugin", "where"),
    [
        (review.HelperSwallows, r"harness_post_call \(inside the try of HelperSwallows._record, which it calls, at line \d+\)"),
        (review.SecondTrySwallows, r"harness_post_call \(inside its try at line \d+\)"),
        (review.HidesASwallower, r"audit_early \(inside its try at line \d+\)"),
    ],
)
def test_a_fault_swallowed_in_a_helper_a_later_try_or_a_specname_hook_fails(plugin: type, where: str) -> None:
    with pytest.raises(AssertionError, match=where + ": the fault was swallowed"):
        suite(PluginTests, plugin_factory=plugin).test_raising_hook_is_a_plugin_error()


def test_two_implementations_of_a_hook_through_specname_pass() -> None:
    kit = suite(PluginTests, plugin_factory=review.TwoPreCalls)
    kit.test_hooks_match_specs()
    kit.test_hooks_are_plain_functions()
    kit.test_raising_hook_is_a_plugin_error()


# ---------------------------------------------------------------------- atomicity of the state stores


def test_stores_that_read_then_write_fail_the_races() -> None:
    with pytest.raises(AssertionError, match="not atomic"):
        suite(RateLimitBackendContract).test_exact_under_threads(review.RacyBuckets())
    shared: dict[Any, Any] = {}
    with pytest.raises(AssertionError, match="not atomic"):
        suite(IdempotencyStoreContract).test_exactly_one_owner_under_threads(
            review.HandleLockedStore(shared), review.HandleLockedStore(shared)
        )
    with pytest.raises(AssertionError, match="not atomic"):
        suite(CircuitStoreContract).test_probes_under_threads(review.RacyCircuits())
    racy = review.RacyGiveBacks()
    with pytest.raises(AssertionError, match="not atomic"):
        suite(BudgetStoreContract).test_give_backs_under_threads(racy, racy)


# ---------------------------------------------------------------------- other installed tool packages


NEIGHBOURS = """
import os

from harness_one.testing import ToolPackageTests


class TestFine(ToolPackageTests):
    distribution = "conformance-fine-tools"
    load_budget = 2.0  # the kit's: the check is about the neighbour, not how fast a loaded machine imports


class TestHangs(ToolPackageTests):
    distribution = "conformance-hangs-tools"
    load_budget = 0.05


def test_the_environment_is_untouched():
    assert "HARNESS_ONE_BLOCK_PLUGINS" not in os.environ
"""


def test_a_package_that_hangs_or_meddles_at_import_breaks_no_other_suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HARNESS_ONE_BLOCK_PLUGINS", raising=False)
    for dist, source, tool in (
        ("hangs", review.HANGS, "never"),
        ("sneaky", review.SNEAKY, "upper"),
        ("fine", review.FINE, "square"),
    ):
        install(pytester, f"conformance-{dist}-tools", {f"conformance_{dist}_tools": source}, {tool: f"conformance_{dist}_tools"})
    pytester.makepyfile(test_neighbours=NEIGHBOURS)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "Fine or entry_points_load or environment")
    got = outcomes(inner)
    assert {k for k, v in got.items() if v != "passed"} == {"TestHangs::test_entry_points_load"}, got
    assert "importing the entry points of 'conformance-hangs-tools' did not end within 4 s" in message(
        inner, "TestHangs::test_entry_points_load"
    )
    assert "HARNESS_ONE_BLOCK_PLUGINS" not in os.environ and "conformance_hangs_tools" not in sys.modules


# ---------------------------------------------------------------------- arguments the plugin did not expect


def test_a_plugin_that_crashes_on_bad_arguments_or_changes_the_callers_fails() -> None:
    suite(PluginTests, plugin_factory=review.GoodNormaliser).test_arguments_stay_the_callers()
    with pytest.raises(AssertionError) as failed:
        suite(PluginTests, plugin_factory=review.BadNormaliser).test_arguments_stay_the_callers()
    text = str(failed.value)
    assert "{}: Internal error in plugin 'bad_normaliser'" in text and "KeyError" in text
    assert "{'x': 'seven'}: Internal error in plugin 'bad_normaliser'" in text and "ValueError" in text
    assert "{'x': '7'}: the call changed the caller's arguments to {'x': 7}" in text


# ---------------------------------------------------------------------- tuning attributes


def test_tuning_may_only_strengthen_the_plugin_checks_and_is_reported() -> None:
    for weaker in ({"threads": 1}, {"calls_per_thread": 10}, {"growth_calls": 60}):
        with pytest.raises(AssertionError, match=rf"{next(iter(weaker))} = \d+ is below the kit's \d+, which it may only raise"):
            suite(PluginTests, plugin_factory=review.Fallback, **weaker).test_no_overrides_DO_NOT_OVERRIDE()
    stronger = suite(PluginTests, plugin_factory=review.Fallback, threads=32)
    stronger.test_no_overrides_DO_NOT_OVERRIDE()
    assert tuning_changes(type(stronger)) == ["threads = 32 (the kit's: 16)"]
    assert tuning_changes(type(suite(ToolPackageTests, load_budget=0.5, tools=[]))) == ["load_budget = 0.5 (the kit's: 2.0)"]


# ---------------------------------------------------------------------- tools that lie about themselves

LIARS = """
from conformance_review import count_items, divide, fetch_async, fetch_sync, greet, increment, tagged
from harness_one.testing import ToolPackageTests


class TestLiars(ToolPackageTests):
    tools = [increment, greet, count_items, divide]


class TestTruthful(ToolPackageTests):
    tools = [tagged]


class TestBlocking(ToolPackageTests):
    tools = [fetch_sync, fetch_async]
"""


def test_a_tool_whose_schema_lies_about_its_function_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_liars=LIARS)
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "examples or the_function or built")
    assert outcomes(inner) == {
        "TestLiars::test_examples": "failed",
        "TestLiars::test_schema_matches_the_function": "failed",
        "TestLiars::test_a_call_built_from_the_schema_runs": "failed",
        "TestTruthful::test_examples": "skipped",
        "TestTruthful::test_schema_matches_the_function": "passed",
        "TestTruthful::test_a_call_built_from_the_schema_runs": "passed",
        "TestBlocking::test_examples": "failed",
        "TestBlocking::test_schema_matches_the_function": "passed",
        "TestBlocking::test_a_call_built_from_the_schema_runs": "passed",
    }
    text = message(inner, "TestLiars::test_schema_matches_the_function")
    assert "tool 'increment': the schema says 'n' is string, the function's annotation integer" in text
    assert "tool 'greet': the schema offers 'shout', which the function does not take" in text
    text = message(inner, "TestLiars::test_a_call_built_from_the_schema_runs")
    assert "tool 'increment' called with {'n': 'a'}: the tool crashed" in text
    assert "tool 'count_items' called with {'items': []}: the result {'count': '0'} does not match the output schema" in text
    assert "tool 'divide', example 0: 'error' is 'Exception', which a crash of the tool matches too" in message(
        inner, "TestLiars::test_examples"
    )
    summary = inner.stdout.str().split("checks switched off, with nothing to check, or known to fail", 1)[1]
    assert "TestTruthful: test_examples: nothing to check: no tool declares examples" in summary
    text = message(inner, "TestBlocking::test_examples")
    for tool in ("fetch_sync", "fetch_async"):  # run through acall, in the event loop's thread
        assert f"tool {tool!r}, example 0: through acall: blocked the event loop under acall (time.sleep(0.001))" in text


def test_a_plugin_that_keeps_what_failed_or_cancelled_calls_took_ignores_a_cancel_or_blocks_the_loop_fails() -> None:
    suite(PluginTests, plugin_factory=review.ReleasingSlots).test_releases_after_failures_and_cancellations()
    with pytest.raises(AssertionError, match=r"after 100 failed and 100 cancelled calls, a call ended ToolError: too many calls"):
        suite(PluginTests, plugin_factory=review.LeakySlots).test_releases_after_failures_and_cancellations()
    with pytest.raises(AssertionError, match=r"cancelled acalls did not end in CancelledError: an acall cancelled after 1 steps"):
        suite(PluginTests, plugin_factory=review.IgnoresCancel).test_releases_after_failures_and_cancellations()
    with pytest.raises(AssertionError, match=r"a hook blocked the event loop under acall: time.sleep\(0.0005\)"):
        suite(PluginTests, plugin_factory=review.Blocks).test_async_calls()


# ---------------------------------------------------------------------- per-call state in module globals, bytes, lru_cache


@pytest.mark.parametrize(
    ("plugin", "found"),
    [
        (review.GlobalLeak, r"the state reachable from the plugin grew by 3750 objects"),  # 6 calls in 8 succeed
        (review.LruLeak, r"the state reachable from the plugin grew by 3750 objects"),
        (
            review.StringLeak,
            r"the plugin's own code \(or what it called\) allocated [\d,]+ bytes over calls 8751-10000 that are still alive",
        ),
    ],
)
def test_state_kept_in_module_globals_a_growing_string_or_an_lru_cache_fails(plugin: type, found: str) -> None:
    with pytest.raises(AssertionError, match=found):
        suite(PluginTests, plugin_factory=plugin).test_no_per_call_state()
