"""The kit's pytest plugin (``pytest11`` entry point ``harness_one``), loaded by every pytest run.

Kit tests get the ``conformance`` marker (``pytest -m conformance`` runs only them), and the terminal summary
lists, per suite, the checks switched off by a capability flag or with nothing to check, and the known failures.
Each run reads the entry points afresh, and with ``pytester`` the metadata finder is set up before any inner run:
a suite run in-process by ``pytester`` finds the distributions on its own ``sys.path``.
"""

from __future__ import annotations

from typing import Any

import pytest

from .._entrypoints import refresh_entry_points

__all__ = [
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_plugin_registered",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_terminal_summary",
]

_KEY = pytest.StashKey[dict[str, list[str]]]()
_PLANS = pytest.StashKey[dict[str, str]]()
#: The user property a check records the plugin's place in the call plan under (``_plugins.PLAN_PROPERTY``).
_PLAN = "harness_one_plan"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a check of the harness-one conformance kit")
    config.stash[_KEY] = {}
    config.stash[_PLANS] = {}


def pytest_plugin_registered(plugin: object) -> None:
    """With ``pytester``, import ``importlib_metadata`` in this run, before any inner one: imported first inside an
    in-process inner run (the kit reads entry points through it), it switches the standard library's metadata finder
    off and installs its own in ``sys.meta_path``, which the inner run's end takes away again, so that every later
    inner run fails to find any distribution (``PackageNotFoundError`` for pluggy)."""
    if getattr(plugin, "__name__", None) == "_pytest.pytester":
        import importlib_metadata  # noqa: F401 - imported for its finder


def pytest_sessionstart(session: pytest.Session) -> None:
    """Read the entry points afresh: an in-process inner run (``pytester.runpytest``) sees the distributions on its
    own ``sys.path``, not those harness-one cached before it."""
    refresh_entry_points()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Forget the entry points read in this run: after an inner run, the outer one reads its own again."""
    refresh_entry_points()


def _suite_of(item: pytest.Item) -> str:
    """The suite ``item`` belongs to, by node id (two classes of one name in two modules are two suites)."""
    return item.nodeid.rsplit("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suites: dict[type, list[pytest.Item]] = {}
    for item in items:
        cls = getattr(item, "cls", None)
        if cls is not None and getattr(cls, "__harness_one_suite__", False):
            suites.setdefault(cls, []).append(item)
    if not suites:
        return
    from ._suite import GUARD, added_marks, kit_functions  # the kit, which the test modules that use it import

    notes = config.stash.get(_KEY, {})
    refused: dict[str, None] = {}  # (ordered: a mark on a class or module is named once, not once per check)
    for cls, members in suites.items():
        kit = kit_functions(cls)
        # A skip that skips every member, the guard included, skips the whole suite (a conftest hook's, as pytest's
        # --runslow example adds one to each item, each with its own reason or not): allowed, as on the class or module.
        whole = any(getattr(i, "originalname", i.name) == GUARD for i in members) and all(map(_skipped, members))
        for item in members:
            found = kit.get(id(getattr(item, "function", None)))
            added = added_marks(found[1]) if found is not None else []
            if added:
                # The kit's own function carries marks: a suite put them on the function every suite shares
                # (``test_x = pytest.mark.skip(...)(Kit.test_x)``). They are dropped, so no suite's check is switched
                # by another's mark; the guard of the suite that did it fails, naming it.
                dropped = ", ".join(sorted({m.name for m in added}))
                item.own_markers[:] = [m for m in item.own_markers if m not in added]
                notes.setdefault(_suite_of(item), []).append(
                    f"{item.name}: ignored the marks ({dropped}) put on the kit's own function, which every suite shares"
                )
            item.add_marker(pytest.mark.conformance)
            refused.update(dict.fromkeys(_refused_marks(item, kit, whole)))
    if refused:
        # Refused here, not by the guard (a test): a mark on the class or module would skip or xfail the guard too.
        raise pytest.UsageError(
            "harness-one conformance: marks that hide whether a check passes:\n  "
            + "\n  ".join(refused)
            + "\nMark a known failure on an override of that one check, run under @pytest.mark.xfail(reason=...): "
            "def test_x(self, ...): super().test_x(...); switch a check off with its capability flag."
        )


def _skipped(item: pytest.Item) -> bool:
    """Whether ``item``'s skip marks skip it (a ``skipif`` whose condition holds), as pytest decides it."""
    from _pytest.skipping import evaluate_skip_marks

    try:
        return evaluate_skip_marks(item) is not None
    except Exception:  # a condition that fails to evaluate: pytest reports it when the item runs; not a skip here
        return False


def _refused_marks(item: pytest.Item, kit: dict[int, tuple[str, Any]], whole: bool = False) -> list[str]:
    """The marks on the kit's check or guard ``item`` (its own, its class's, its module's) that hide whether it passes:
    skip or skipif but on the class or module (which skips the whole suite, the guard included: a suite that needs
    what is missing here, listed in the summary); an xfail with ``run=False`` (never run) or not on an override of this
    one check (on the class or module it marks the guard too); a parametrize the kit did not give the check, on an
    override (an empty one runs nothing: on the class too, as it skips each check with a mark of its own). With
    ``whole`` (every member of the suite, its guard included, is skipped by its marks: the whole suite skipped), no
    skip is. An override's parametrize
    must be the kit's own, written as the kit writes it (``kit_marks``)."""
    from ._suite import kit_marks

    name = getattr(item, "originalname", item.name)
    kit_fns = [fn for n, fn in kit.values() if n == name]
    if not kit_fns:
        return []  # the suite's own extra test, not a check of the kit
    overridden = id(getattr(item, "function", None)) not in kit
    given = [(m.args, m.kwargs) for fn in kit_fns for m in kit_marks(fn) if m.name == "parametrize"]
    problems = []
    for node, mark in item.iter_markers_with_node():
        if node is item:
            where = f"{item.nodeid}: " + ("on the override" if overridden else "added to the kit's check")
        else:  # on the class or module: every check of the suite, the guard included
            where = f"{node.nodeid}: on the {type(node).__name__.lower()}"
        if mark.name in ("skip", "skipif") and node is item and not whole:
            problems.append(f"{where}, @pytest.mark.{mark.name}")
        elif mark.name == "xfail" and not mark.kwargs.get("run", True):
            problems.append(f"{where}, @pytest.mark.xfail(run=False), which never runs the check")
        elif mark.name == "xfail" and not (node is item and overridden):
            problems.append(f"{where}, @pytest.mark.xfail, not on an override of the one check known to fail")
        elif mark.name == "parametrize" and node is item and (mark.args, mark.kwargs) not in given:
            problems.append(f"{where}, @pytest.mark.parametrize, which the kit did not give the check")
    return problems


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note each suite's tuning, for the suites that run: those whose checks ``-k`` or ``-m`` deselected are not
    listed (``session.items`` is what remains after deselection)."""
    suites: dict[type, pytest.Item] = {}
    for item in session.items:
        cls = getattr(item, "cls", None)
        if cls is not None and getattr(cls, "__harness_one_suite__", False):
            suites.setdefault(cls, item)
    if not suites:
        return
    from ._suite import tuning_changes

    notes = session.config.stash.get(_KEY, {})
    for cls, first in suites.items():
        for change in tuning_changes(cls):
            notes.setdefault(_suite_of(first), []).append(f"tuned: {change}")


def _overrides_a_check(item: pytest.Item) -> bool:
    """Whether ``item`` runs a suite's own function in the place of one of the kit's checks."""
    from ._suite import kit_functions

    cls = getattr(item, "cls", None)
    name = getattr(item, "originalname", item.name)
    function = getattr(item, "function", None)
    kit = kit_functions(cls) if cls is not None else {}
    return id(function) not in kit and any(n == name for n, _ in kit.values())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if item.get_closest_marker("conformance") is None or report.when == "teardown":
        return report
    if report.when == "call" and _xpassed(report) and _overrides_a_check(item):
        # An override under @pytest.mark.xfail that passes: the check no longer fails, or the override checks nothing
        # (a body of ``pass``); either way the known failure is not one, so the run says so, failing.
        marker = item.get_closest_marker("xfail")
        reason = marker.kwargs.get("reason", "") if marker is not None else ""
        report.outcome = "failed"
        report.longrepr = (
            f"[XPASS] {item.name} is overridden under @pytest.mark.xfail(reason={reason!r}), and the override passed: the "
            "check no longer fails (or the override checks nothing): remove the override, and the kit's check runs"
        )
        if hasattr(report, "wasxfail"):
            del report.wasxfail
    notes = item.config.stash.get(_KEY, {})
    suite = _suite_of(item)
    for key, value in report.user_properties:
        if key == _PLAN:
            item.config.stash.get(_PLANS, {})[suite] = str(value)
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr) if report.skipped else ""
    from ._suite import GUARD

    if reason and not hasattr(report, "wasxfail") and getattr(item, "originalname", item.name) == GUARD:
        notes.setdefault(suite, []).append(f"the whole suite skipped: {reason.removeprefix('Skipped: ')}")
    elif "switched off: " in reason:
        notes.setdefault(suite, []).append(f"{item.name}: {reason.split('switched off: ', 1)[1]}")
    elif "nothing to check: " in reason:
        notes.setdefault(suite, []).append(f"{item.name}: nothing to check: {reason.split('nothing to check: ', 1)[1]}")
    elif report.skipped and hasattr(report, "wasxfail"):  # failed under xfail (not an xfail that passed)
        at = " (at setup)" if report.when == "setup" else ""
        notes.setdefault(suite, []).append(f"{item.name}: known failure{at}: {report.wasxfail}")
    return report


def _xpassed(report: pytest.TestReport) -> bool:
    """Whether ``report`` is an xfail-marked test that passed (``strict=True``: pytest fails it as ``[XPASS(strict)]``)."""
    if report.passed and hasattr(report, "wasxfail"):
        return True
    return report.failed and isinstance(report.longrepr, str) and report.longrepr.startswith("[XPASS(strict)]")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    notes = config.stash.get(_KEY, {})
    if notes:
        terminalreporter.section("harness-one conformance: checks switched off, with nothing to check, or known to fail")
        for suite, lines in sorted(notes.items()):
            for line in lines:
                terminalreporter.write_line(f"{suite}: {line}")
    plans = config.stash.get(_PLANS, {})
    if plans:
        terminalreporter.section("harness-one conformance: where each plugin runs beside the standard plugins")
        for suite, plan in sorted(plans.items()):
            terminalreporter.write_line(f"{suite}: {plan}")
