from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness_one
from harness_one import ManualClock, ToolRegistry

pytest_plugins = ["redis_support"]  # the redis_server / redis_url fixtures


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=1000.0)


@pytest.fixture
def registry(clock: ManualClock) -> ToolRegistry:
    """An independent registry with the standard plugins and a manual clock."""
    return ToolRegistry(clock=clock, autoload=False)


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

    yield
    structlog.reset_defaults()
    for name in ("harness_one", "harness_one.integrations"):
        logger = logging.getLogger(name)
        logger.disabled = False
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
