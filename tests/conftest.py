from __future__ import annotations

import os
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

# The tool-package index goes to a directory of this run, not the user's cache (set before
# harness_one reads it).
os.environ.setdefault("HARNESS_ONE_CACHE_DIR", tempfile.mkdtemp(prefix="harness-one-test-cache-"))

import harness_one
from harness_one import Call, ManualClock, ToolRegistry, define_tool

pytest_plugins = ["redis_support"]  # the redis_server / redis_url fixtures


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> pytest.Pytester:
    """The pytester of the kit's tests, with this project's asyncio setting (the inner runs warned without it)."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=1000.0)


@pytest.fixture
def registry(clock: ManualClock) -> ToolRegistry:
    """An independent registry with the standard plugins and a manual clock."""
    return ToolRegistry(clock=clock, autoload=False)


@pytest.fixture
def patient_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python pattern matcher gets a minute per validation, not ``PATTERN_BUDGET`` (5 ms).

    On a ``ManualClock`` the listing and verdict budgets never run out, but this one is the
    ``regex`` module's timeout, in real time: a loaded machine that paused a match for longer
    refused a plain mismatch as "could not be matched against the pattern ... within the time limit".
    """
    from harness_one_plugins import validation

    monkeypatch.setattr(validation, "PATTERN_BUDGET", 60.0)


class PerUserAdd(NamedTuple):
    """What the framework tests share: one tool limited per user, and what each of its calls saw."""

    registry: ToolRegistry
    #: ``add(a, b)``, a ``@define_tool`` function limited to one call per second per ``context["user"]``.
    add: Any
    #: ``(call id, context["user"])`` of each call that ran.
    seen: list[tuple[str, Any]]


@pytest.fixture
def per_user_add() -> PerUserAdd:
    """A registry (manual clock) holding ``add`` with a per-user rate limit, for the integration tests."""
    registry = ToolRegistry(autoload=False, clock=ManualClock())
    seen: list[tuple[str, Any]] = []

    @define_tool(registry=registry, rate_limit={"rate": 1, "burst": 1, "key": "user"})
    def add(a: float, b: float, call: Call) -> float:
        """Add two numbers."""
        seen.append((call.call_id, call.context.get("user")))
        return a + b

    return PerUserAdd(registry, add, seen)


@pytest.fixture
def bare() -> ToolRegistry:
    """A registry with no plugins at all."""
    return ToolRegistry(standard_plugins=False, autoload=False)


@pytest.fixture
def fresh_default() -> Iterator[ToolRegistry]:
    """A brand-new default registry for the test (no installed tool packages), the old one restored afterwards."""
    old = ToolRegistry.set_default(ToolRegistry(autoload=False))
    try:
        yield ToolRegistry.default()
    finally:
        ToolRegistry.set_default(old)


class DistFactory:
    """Builds throwaway installed distributions (a module plus its dist-info) on sys.path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: list[str] = []
        self.modules: list[str] = []

    def make(self, dist: str, modules: dict[str, str], entry_points: dict[str, dict[str, str]]) -> Path:
        site = self.root / f"site-{dist}"
        site.mkdir(parents=True)
        for name, source in modules.items():
            (site / f"{name}.py").write_text(textwrap.dedent(source))
            self.modules.append(name)
        info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        lines = []
        for group, items in entry_points.items():
            lines.append(f"[{group}]")
            lines.extend(f"{k} = {v}" for k, v in items.items())
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        sys.path.insert(0, str(site))
        self.paths.append(str(site))
        harness_one.refresh_entry_points()
        return site

    def cleanup(self) -> None:
        for path in self.paths:
            if path in sys.path:
                sys.path.remove(path)
        for name in self.modules:
            sys.modules.pop(name, None)
        harness_one.refresh_entry_points()


@pytest.fixture
def dists(tmp_path: Path) -> Iterator[DistFactory]:
    factory = DistFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture(autouse=True)
def _logging_state() -> Iterator[None]:
    """Each test starts from the library's logging defaults, whatever an earlier test configured."""
    import logging

    import structlog

    root_level = logging.getLogger().level
    yield
    structlog.reset_defaults()
    logging.getLogger().setLevel(root_level)  # (one left at DEBUG piled every later record up in pytest's capture)
    for name in ("harness_one", "harness_one.integrations"):
        logger = logging.getLogger(name)
        logger.disabled = False
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A click ``CliRunner`` in ``tmp_path``, with a state file there and no configuration file."""
    from click.testing import CliRunner

    monkeypatch.setenv("HARNESS_ONE_STATE", str(tmp_path / "state.sqlite3"))
    monkeypatch.delenv("HARNESS_ONE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return CliRunner()


@pytest.fixture
def processes() -> Iterator[Any]:
    """Makes ``ProcessRunner``s; shuts them down after the test, and checks each worker's whole group is gone."""
    from tools_for_processes import children, group_members

    from harness_one import ProcessRunner

    made: list[ProcessRunner] = []

    def make(**kwargs: Any) -> ProcessRunner:
        made.append(ProcessRunner(**kwargs))
        return made[-1]

    yield make
    workers = {pid for pid, (pgid, _) in children().items() if pgid == pid}
    for runner in made:
        runner.shutdown()
    assert group_members(workers) == []  # shutdown kills each worker's whole group


@pytest.fixture
def index_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty tool index of the test's own (``HARNESS_ONE_CACHE_DIR``)."""
    from harness_one._discovery import reset_tool_index

    where = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_ONE_CACHE_DIR", str(where))
    # Index entries hold for the modification times of the folders on sys.path: pytest's ``tests`` folder
    # (a test file written meanwhile changes it) is left out, so that only what a test does changes them.
    # A test using this fixture sets sys.path (monkeypatch.setattr) rather than monkeypatch.syspath_prepend,
    # whose undo would put back the list without the tests folder for the rest of the session.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()])
    reset_tool_index()
    yield where
    reset_tool_index()
