"""The conformance kit's own tests: broken packages and plugins fail exactly the checks they break."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness_one
from harness_one import ToolRegistry, defineTool
from harness_one.testing import GUARD, ToolPackageTests, footprint

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent
DOCS = HERE.parent / "docs"


def install(pytester: pytest.Pytester, dist: str, modules: dict[str, str], entry_points: dict[str, str]) -> None:
    """A distribution (modules plus dist-info with ``harness_one.tools`` entry points) on sys.path for the inner run."""
    site = pytester.mkdir(f"site-{dist}")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[harness_one.tools]\n{lines}\n")
    pytester.syspathinsert(site)
    harness_one.refresh_entry_points()


@pytest.fixture(autouse=True)
def _fresh_entry_points() -> Iterator[None]:
    yield
    harness_one.refresh_entry_points()


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """``{"Class::test": outcome}`` of the inner run's call phase (setup failures included)."""
    found: dict[str, str] = {}
    for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        short = report.nodeid.split("::", 1)[1]
        if report.when == "call" or report.outcome != "passed":
            found[short] = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    return found


def failed(result: pytest.RunResult, suite: str) -> set[str]:
    return {k.split("::")[1] for k, v in outcomes(result).items() if k.startswith(suite + "::") and v == "failed"}


def message(result: pytest.RunResult, test_id: str) -> str:
    for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        if report.nodeid.endswith(test_id) and report.failed:
            return str(report.longrepr)
    raise AssertionError(f"{test_id} did not fail")


INNER = '''
import pytest
from harness_one import ToolRegistry, defineTool
from harness_one.testing import PluginTests, ToolPackageTests
from conformance_broken_plugin import BrokenAudit


@defineTool(registry=None, examples=[{"arguments": {"x": 2}, "result": 4}])
def double(x: int) -> int:
    """Double x."""
    return 2 * x


class TestBrokenTools(ToolPackageTests):
    distribution = "conformance-broken-tools"


class TestBrokenPlugin(PluginTests):
    plugin_factory = BrokenAudit  # nameless, and neither plugin_name nor entry_point names it


class TestNoValidation(ToolPackageTests):
    tools = [double]

    def make_registry(self):
        return ToolRegistry(standard_plugins=False, autoload=False)


class TestOverridden(ToolPackageTests):
    tools = [double]

    def test_descriptions(self, loaded):
        pass

    test_examples = None

    @pytest.mark.xfail(reason="")
    def test_export_every_format(self, loaded):
        pass


class TestJustified(ToolPackageTests):
    tools = [double]

    @pytest.mark.xfail(reason="known: the description is being rewritten", strict=True)
    def test_descriptions(self, loaded):
        raise AssertionError("a known failure")
'''

GUARD_OVERRIDE = """
from harness_one.testing import PluginTests


class TestSneaky(PluginTests):
    def test_no_overrides_DO_NOT_OVERRIDE(self):
        pass
"""


def run_inner(pytester: pytest.Pytester) -> pytest.RunResult:
    install(
        pytester,
        "conformance-broken-tools",
        {
            "conformance_broken_tools": (HERE / "conformance_broken_tools.py").read_text(),
            "conformance_broken_plugin": (HERE / "conformance_broken_plugin.py").read_text(),
        },
        {"tools": "conformance_broken_tools", "missing": "conformance_missing_module:tool"},
    )
    pytester.makepyfile(test_inner=INNER, test_guard_override=GUARD_OVERRIDE)
    return pytester.runpytest("-p", "no:cacheprovider", "--continue-on-collection-errors", "-rs")


def test_the_kit_fails_what_is_broken(pytester: pytest.Pytester) -> None:
    """One inner run (a couple of seconds) holds every broken suite; each part is checked below."""
    inner = run_inner(pytester)
    broken_package_fails_exactly_its_checks(inner)
    broken_plugin_fails_exactly_its_checks(inner)
    argument_check_fails_without_validation(inner)
    override_guard(inner)


def broken_package_fails_exactly_its_checks(inner: pytest.RunResult) -> None:
    assert failed(inner, "TestBrokenTools") == {
        "test_entry_points_load",
        "test_import_has_no_side_effects",
        "test_names_valid_for_every_provider",
        "test_descriptions",
        "test_examples",
        "test_strict_openai_export",
        "test_annotations_consistent",
    }
    assert outcomes(inner)["TestBrokenTools::test_parameters_are_object_schemas"] == "passed"
    assert "conformance_missing_module" in message(inner, "TestBrokenTools::test_entry_points_load")
    side_effects = message(inner, "TestBrokenTools::test_import_has_no_side_effects")
    assert "tried the network at import: socket.getaddrinfo('192.0.2.1', 9)" in side_effects
    assert "left threads running after import: broken-tools-poller" in side_effects
    names = message(inner, "TestBrokenTools::test_names_valid_for_every_provider")
    assert "openai: 'look up' (tool 'look up') breaks the rule" in names and "gemini: '_look up'" in names
    assert "anthropic: parameter 'filter[key]' of tool 'look up' breaks the rule ^[a-zA-Z0-9_.-]{1,64}\\Z" in names
    assert "tool 'undocumented' has no description" in message(inner, "TestBrokenTools::test_descriptions")
    examples = message(inner, "TestBrokenTools::test_examples")
    assert (
        "tool 'bad_example', example 0: the arguments do not match the parameters: $.x: 'seven' is not of type 'integer'"
        in examples
    )
    assert "tool 'wrong_output', example 0: the result {'n': 'three'} does not match the output schema" in examples
    assert "tool 'ping', example 0: tried the network (socket.getaddrinfo('192.0.2.1', 9)): examples run offline" in examples
    assert "tool 'ping', example 1: returned '', the example expects ToolArgumentError" in examples
    assert "tool 'ping', example 2: unknown key 'expected' (an example holds arguments, result, error, description)" in examples
    assert "tool 'free_form': $.labels: a map of arbitrary keys" in message(inner, "TestBrokenTools::test_strict_openai_export")
    assert "tool 'wipe' is read_only and destructive" in message(inner, "TestBrokenTools::test_annotations_consistent")


def broken_plugin_fails_exactly_its_checks(inner: pytest.RunResult) -> None:
    assert failed(inner, "TestBrokenPlugin") == {
        "test_has_a_name",
        "test_hooks_match_specs",
        "test_raising_hook_is_a_plugin_error",
        "test_sixteen_threads",
        "test_no_per_call_state",
    }
    got = outcomes(inner)
    for check in ("test_registers_and_unregisters", "test_blocked_by_name", "test_replaced_by_name", "test_async_calls", GUARD):
        assert got[f"TestBrokenPlugin::{check}"] == "passed", check
    assert got["TestBrokenPlugin::test_entry_point"] == "skipped"
    assert "BrokenAudit has no usable name (None)" in message(inner, "TestBrokenPlugin::test_has_a_name")
    assert "harness_on_error is not marked with @hookimpl" in message(inner, "TestBrokenPlugin::test_hooks_match_specs")
    assert "harness_pre_call (inside its try at line 28): the fault was swallowed" in message(
        inner, "TestBrokenPlugin::test_raising_hook_is_a_plugin_error"
    )
    threads = message(inner, "TestBrokenPlugin::test_sixteen_threads")
    assert re.search(r"under 16 threads, \d+ of 1600 calls failed", threads) and "PluginError" in threads
    assert re.search(
        r"grew by \d+ objects over calls 5001-10000 \(about 0\.88 per call", message(inner, "test_no_per_call_state")
    )


def argument_check_fails_without_validation(inner: pytest.RunResult) -> None:
    assert failed(inner, "TestNoValidation") == {"test_argument_errors_name_the_field"}
    text = message(inner, "TestNoValidation::test_argument_errors_name_the_field")
    assert "tool 'double', 'x' given \"not a number\": accepted, and the tool ran" in text


def override_guard(inner: pytest.RunResult) -> None:
    # Its xfail override of test_export_every_format checks nothing, so it passes: an XPASS fails the run.
    assert failed(inner, "TestOverridden") == {GUARD, "test_export_every_format"}
    assert message(inner, "TestOverridden::test_export_every_format").startswith(
        "[XPASS] test_export_every_format is overridden under @pytest.mark.xfail(reason=''), and the override passed"
    )
    text = message(inner, f"TestOverridden::{GUARD}")
    for problem in (
        "test_descriptions is overridden without @pytest.mark.xfail(reason=...)",
        "test_examples is deleted (now None)",
        "test_export_every_format is overridden without @pytest.mark.xfail(reason=...)",
    ):
        assert problem in text
    assert failed(inner, "TestJustified") == set()
    assert outcomes(inner)["TestJustified::test_descriptions"] == "xfailed"
    assert "TestSneaky overrides test_no_overrides_DO_NOT_OVERRIDE" in inner.stdout.str()
    summary = inner.stdout.str().split("checks switched off, with nothing to check, or known to fail", 1)[1]
    assert "TestJustified: test_descriptions: known failure: known: the description is being rewritten" in summary


def test_guard_sees_a_test_deleted_from_the_kit(monkeypatch: pytest.MonkeyPatch) -> None:
    class TestFine(ToolPackageTests):
        tools = ()

    TestFine().test_no_overrides_DO_NOT_OVERRIDE()
    monkeypatch.delattr(ToolPackageTests, "test_descriptions")
    with pytest.raises(AssertionError, match="test_descriptions is deleted"):
        TestFine().test_no_overrides_DO_NOT_OVERRIDE()


LEAKY = """
from harness_one import defineTool


@defineTool(description="Return x.")  # no registry=None: the default registry, at import
def leaky(x: int) -> int:
    return x
"""


def test_the_kit_sees_a_tool_put_in_the_default_registry_at_import(pytester: pytest.Pytester) -> None:
    """Only the kit's fresh interpreter imports the package: this process's default registry is untouched."""
    install(pytester, "conformance-leaky-tools", {"conformance_leaky_tools": LEAKY}, {"leaky": "conformance_leaky_tools"})

    class TestLeaky(ToolPackageTests):
        distribution = "conformance-leaky-tools"

    with pytest.raises(pytest.fail.Exception, match=r"registered tools in the default registry at import \(.*\): leaky$"):
        TestLeaky().test_import_has_no_side_effects()
    assert "conformance_leaky_tools" not in sys.modules


def test_examples_are_checked_at_definition() -> None:
    with pytest.raises(harness_one.ToolDefinitionError, match="each example must be a mapping with an 'arguments' object"):
        defineTool(registry=None, name="f", examples=[{"x": 1}])(lambda x: x)
    tool = defineTool(registry=None, name="f", examples=[{"arguments": {"x": 1}}])(lambda x: x).tool
    assert tool.examples == ({"arguments": {"x": 1}},)


def test_footprint_counts_reachable_state() -> None:
    class Holder:
        def __init__(self) -> None:
            self.items: list[int] = []
            self.registry = ToolRegistry(autoload=False)

    holder = Holder()
    before = footprint(holder)
    holder.items += range(1000, 1100)
    assert footprint(holder) - before == 100  # the registry is not the holder's own state


def test_harness_one_never_imports_pytest(pytester: pytest.Pytester) -> None:
    done = pytester.run(sys.executable, "-c", "import sys, harness_one, harness_one.tools; print('pytest' in sys.modules)")
    assert done.stdout.str().strip() == "False"


def _block(markdown: str, after: str, language: str) -> str:
    """The first ``language`` code block after the text ``after``."""
    rest = markdown.split(after, 1)[1]
    found = re.search(rf"```{language}\n(.*?)```", rest, re.S)
    assert found is not None, f"no {language} block after {after!r}"
    return textwrap.dedent(found.group(1))


def test_a_package_written_from_the_docs_passes(pytester: pytest.Pytester) -> None:
    writing = (DOCS / "writing-tools.md").read_text()
    project = _block(writing, "## A tool package from scratch", "toml")
    module = _block(writing, "`harness_one_word_count.py`", "python")
    suite = _block((DOCS / "conformance.md").read_text(), "## A tool package in five lines", "python")
    dist = re.search(r'name = "([^"]+)"', project)
    entry = re.search(r'\[project.entry-points."harness_one.tools"\]\n(\w+) = "([^"]+)"', project)
    assert dist is not None and entry is not None
    install(pytester, dist.group(1), {"harness_one_word_count": module}, {entry.group(1): entry.group(2)})
    pytester.makepyfile(test_word_count_conformance=suite)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    got = outcomes(result)
    assert set(got.values()) == {"passed"}, got
    assert len(got) == 13


def test_the_docs_examples_pass(pytester: pytest.Pytester) -> None:
    """The tool of the examples section of ``writing-tools.md`` passes the kit, its examples run."""
    module = _block((DOCS / "writing-tools.md").read_text(), "## Examples", "python")
    pytester.makepyfile(doc_split_words=module)
    pytester.makepyfile(
        test_split_words="from doc_split_words import split_words\n"
        "from harness_one.testing import ToolPackageTests\n\n\n"
        "class TestSplit(ToolPackageTests):\n    tools = [split_words]\n"
    )
    pytester.syspathinsert()
    got = outcomes(pytester.runpytest("-p", "no:cacheprovider"))
    assert got.pop("TestSplit::test_import_has_no_side_effects") == "skipped"  # no entry points to import
    assert set(got.values()) == {"passed"} and "TestSplit::test_examples" in got, got
