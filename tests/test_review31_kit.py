"""A review of the conformance kit's guards and of the boolean plugin variables: each test fails without its fix."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_conformance import _fresh_entry_points  # noqa: F401 - an autouse fixture

from harness_one import Call, Retry, ToolError, ToolRegistry, hookimpl
from harness_one._cli import main
from harness_one._config import ConfigError, load_settings
from harness_one._errors import PluginError
from harness_one.testing import PluginTests

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _logging_reset() -> Iterator[None]:
    import structlog

    yield
    structlog.reset_defaults()  # the CLI configures structlog; later tests expect a library default


# ---------------------------------------------------------------------- 1. boolean environment variables

STRICT = "[plugins]\nstrict = true\n[plugins.rate_limt]\nmax_wait = 1\n"


@pytest.mark.parametrize("var", ["HARNESS_ONE_STRICT_PLUGINS", "HARNESS_ONE_DISABLE_PLUGIN_AUTOLOAD"])
@pytest.mark.parametrize("value", ["Y", "enabled", "2"])
def test_a_boolean_variable_that_is_no_boolean_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(PluginError, match=rf"{var}='{value}' is not a boolean: use 1, true, yes or on, or 0, false"):
        ToolRegistry()
    config = tmp_path / "s.toml"
    config.write_text(STRICT)
    with pytest.raises(ConfigError, match=rf"{var}='{value}' is not a boolean"):
        load_settings(str(config))
    done = CliRunner().invoke(main, ["--config", str(config), "list"])
    assert done.exit_code == 2, done.output
    assert f"{var}='{value}' is not a boolean" in done.output


@pytest.mark.parametrize(("value", "code"), [("", 2), ("1", 2), (" TRUE ", 2), ("On", 2), ("0", 0), (" off ", 0), ("No", 0)])
def test_boolean_values_in_any_case_are_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, code: int) -> None:
    """Unset-or-empty leaves the file's ``strict = true`` (its unknown plugin's options fail: exit 2), a false one
    turns it off."""
    monkeypatch.setenv("HARNESS_ONE_STRICT_PLUGINS", value)
    config = tmp_path / "s.toml"
    config.write_text(STRICT)
    done = CliRunner().invoke(main, ["--config", str(config), "list"])
    assert done.exit_code == code, done.output


# ---------------------------------------------------------------------- 2. marks that hide whether a check passes

HEAD = """
import pytest
from harness_one import defineTool
from harness_one.testing import ToolPackageTests

@defineTool(registry=None, read_only=True, examples=[{"arguments": {"a": 1}, "result": 999}])
def inc(a: int) -> int:
    \"\"\"Inc.\"\"\"
    return a + 1
"""

BYPASSES = {
    "run-false": """
class TestRunFalse(ToolPackageTests):
    tools = [inc]
    @pytest.mark.xfail(reason="tracked in #12", run=False)
    def test_examples(self, loaded):
        pass
""",
    "class-xfail": """
@pytest.mark.xfail(reason="whole suite known flaky")
class TestClassXfail(ToolPackageTests):
    tools = [inc]
""",
    "class-xfail-run-false": """
@pytest.mark.xfail(reason="whole suite known flaky", run=False)
class TestClassXfail(ToolPackageTests):
    tools = [inc]
""",
    "module-xfail": """
pytestmark = pytest.mark.xfail(reason="later")

class TestModuleXfail(ToolPackageTests):
    tools = [inc]
""",
    "empty-parametrize": """
class TestEmpty(ToolPackageTests):
    tools = [inc]
    @pytest.mark.xfail(reason="r")
    @pytest.mark.parametrize("dummy", [])
    def test_examples(self, loaded, dummy):
        super().test_examples(loaded)
""",
    "foreign-parametrize": """
class TestForeign(ToolPackageTests):
    tools = [inc]
    @pytest.mark.xfail(reason="r")
    @pytest.mark.parametrize("dummy", [1])
    def test_examples(self, loaded, dummy):
        super().test_examples(loaded)
""",
    "skipif-override": """
class TestSkipped(ToolPackageTests):
    tools = [inc]
    @pytest.mark.skipif(True, reason="later")
    def test_examples(self, loaded):
        super().test_examples(loaded)
""",
}


@pytest.mark.parametrize("case", sorted(BYPASSES))
def test_a_mark_that_hides_a_failing_check_is_a_usage_error(pytester: pytest.Pytester, case: str) -> None:
    pytester.makepyfile(test_bypass=HEAD + BYPASSES[case])
    inner = pytester.runpytest("-p", "no:cacheprovider")
    assert inner.ret == pytest.ExitCode.USAGE_ERROR, inner.stdout.str()
    assert "harness-one conformance: marks that hide whether a check passes" in inner.stderr.str()


def test_a_known_failure_at_setup_is_listed_and_an_xpass_is_not(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_setup=HEAD
        + """
class TestSetup(ToolPackageTests):
    tools = [inc]
    @pytest.mark.xfail(reason="needs a fixture")
    @pytest.mark.usefixtures("nonexistent_fixture_xyz")
    def test_descriptions(self, loaded):
        super().test_descriptions(loaded)
"""
    )
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "descriptions")
    inner.assert_outcomes(xfailed=1)
    assert "TestSetup: test_descriptions: known failure (at setup): needs a fixture" in inner.stdout.str()


def test_a_suite_skipped_whole_is_listed(pytester: pytest.Pytester) -> None:
    """A skip on the class skips the guard with every check (a suite that needs what is missing here): the summary
    says so."""
    pytester.makepyfile(
        test_whole=HEAD
        + """
@pytest.mark.skipif(True, reason="needs jsonschema-rs")
class TestWhole(ToolPackageTests):
    tools = [inc]
"""
    )
    inner = pytester.runpytest("-p", "no:cacheprovider")
    assert inner.ret == pytest.ExitCode.OK
    assert "TestWhole: the whole suite skipped: needs jsonschema-rs" in inner.stdout.str()


# ---------------------------------------------------------------------- 3. and 4. the release check


class HeldSlots:
    """Caps calls in flight, keeping the ids of those it holds; forgets to give one back when a call is cancelled."""

    name = "held_slots"

    def __init__(self, cap: int = 1000) -> None:
        self.cap, self.held, self.lock = cap, set[str](), threading.Lock()

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        with self.lock:
            if len(self.held) >= self.cap:
                raise ToolError("busy")
            self.held.add(call.call_id)

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        with self.lock:
            self.held.discard(call.call_id)

    @hookimpl
    def harness_on_error(self, call: Call, error: ToolError) -> None:
        if error.kind != "cancelled":
            with self.lock:
                self.held.discard(call.call_id)


def run_check(kit: type, check: str) -> BaseException | None:
    """What the check ``check`` of suite ``kit`` ends in (None: it passed)."""
    try:
        getattr(kit(), check)()
    except BaseException as ended:  # a pytest failure is an OutcomeException, no Exception
        return ended
    return None


def test_a_slot_kept_per_cancelled_call_fails_below_the_cap() -> None:
    class TestHeld(PluginTests):
        plugin_factory = HeldSlots  # cap 1000: the 100 cancelled calls never reach it

    ended = run_check(TestHeld, "test_releases_after_failures_and_cancellations")
    assert ended is not None and "objects over 100 cancelled acalls" in str(ended), ended


class RetriesForever:
    name = "retries_forever"

    @hookimpl
    def harness_on_error(self, call: Call, error: ToolError) -> Retry:
        return Retry(0.5)


def test_the_release_check_ends_its_loop_once_the_clock_stopped_the_calls(caplog: pytest.LogCaptureFixture) -> None:
    class TestForever(PluginTests):
        plugin_factory = RetriesForever

    with caplog.at_level("ERROR", logger="harness_one"):
        ended = run_check(TestForever, "test_releases_after_failures_and_cancellations")
    assert ended is not None and "the kit's clock stopped the calls" in str(ended), ended
    internal = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert len(internal) == 1, [r.getMessage()[:120] for r in internal]


def test_a_suite_a_conftest_hook_skips_whole_is_not_refused(pytester: pytest.Pytester) -> None:
    """pytest's own --runslow example adds a skip to each item: the kit stopped the session with a usage error."""
    pytester.makeconftest(
        """
import pytest

def pytest_collection_modifyitems(config, items):
    skip_slow = pytest.mark.skip(reason="need --runslow option to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
"""
    )
    pytester.makepyfile(
        test_whole=HEAD
        + """
@pytest.mark.slow
class TestSlow(ToolPackageTests):
    tools = [inc]

def test_other():
    pass
"""
    )
    inner = pytester.runpytest("-p", "no:cacheprovider")
    assert inner.ret == pytest.ExitCode.OK, inner.stdout.str()
    assert "1 passed" in inner.stdout.str()
    assert "UsageError" not in inner.stdout.str() + inner.stderr.str()


@pytest.mark.parametrize("names", ["examples or DO_NOT", ""], ids=["some-checks-and-the-guard", "every-item-its-own-reason"])
def test_a_conftest_skip_is_a_whole_suite_skip_only_on_every_item(pytester: pytest.Pytester, names: str) -> None:
    """A hook skipping the guard and one failing check hid that check (the run passed): it is refused; a hook
    skipping every item, each with a reason of its own, is a whole-suite skip (it was refused)."""
    pytester.makeconftest(
        f"""
import pytest

def pytest_collection_modifyitems(config, items):
    for item in items:
        if {names!r} == "" or any(word in item.name for word in ("examples", "DO_NOT")):
            item.add_marker(pytest.mark.skip(reason="skipped: " + item.name))
"""
    )
    pytester.makepyfile(
        test_some=HEAD
        + """
class TestSome(ToolPackageTests):
    tools = [inc]
"""
    )
    inner = pytester.runpytest("-p", "no:cacheprovider")
    if names:
        assert inner.ret == pytest.ExitCode.USAGE_ERROR, inner.stdout.str()
        assert "test_examples" in inner.stderr.str() + inner.stdout.str()
    else:
        assert inner.ret == pytest.ExitCode.OK, inner.stdout.str()


def test_a_skipif_that_does_not_skip_the_guard_is_no_whole_suite_skip(pytester: pytest.Pytester) -> None:
    """The guard marked skipif(False) runs: the checks' skips hid a failing one, and the run passed."""
    pytester.makeconftest(
        """
import pytest

def pytest_collection_modifyitems(config, items):
    for item in items:
        mark = pytest.mark.skipif(False, reason="never") if "DO_NOT" in item.name else pytest.mark.skip(reason="x")
        item.add_marker(mark)
"""
    )
    pytester.makepyfile(
        test_some=HEAD
        + """
class TestSome(ToolPackageTests):
    tools = [inc]
"""
    )
    assert pytester.runpytest("-p", "no:cacheprovider").ret == pytest.ExitCode.USAGE_ERROR
