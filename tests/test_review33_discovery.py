"""Review 33: the tools a package's import registers into the default registry itself, made where they are not module
globals (in a loop, inside a function), are that package's for every registry that loads it, and in the tool index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import harness_one
from harness_one import ToolRegistry
from harness_one._discovery import Conflict, reset_tool_index, tool_index
from harness_one._entrypoints import EntryPoint, entry_points

#: Writes its mark to ``$HX_IMPORTS`` each time it is imported.
MARK = """
import os
with open(os.environ["HX_IMPORTS"], "a") as f:
    f.write({mark!r})
"""

LOOP = """
from harness_one.tools import defineTool

def _make(unit):
    def convert(value: float) -> float:
        '''Convert.'''
        return value * 2
    return convert

for _u in ("to_km", "to_mi"):
    defineTool(name=_u)(_make(_u))
"""

IN_A_FUNCTION = """
from harness_one.tools import defineTool

def _setup():
    @defineTool(name="dup")
    def dup(text: str) -> str:
        '''Dup from aa.'''
        return "aa:" + text

_setup()
"""

GLOBAL_DUP = """
from harness_one.tools import defineTool

@defineTool(registry=None)
def dup(text: str) -> str:
    '''Dup from zz.'''
    return "zz:" + text
"""


@pytest.fixture
def imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the packages' imports write their marks to."""
    path = tmp_path / "imports"
    path.write_text("")
    monkeypatch.setenv("HX_IMPORTS", str(path))
    return path


@pytest.fixture
def fresh_default() -> Iterator[None]:
    """A default registry of the test's own (the packages' imports register into it)."""
    old = ToolRegistry.set_default(None)
    try:
        yield
    finally:
        ToolRegistry.set_default(old)


def _new_process() -> None:
    """As a new process would start: no package imported, a new default registry, the index read again."""
    for name in [m for m in sys.modules if m.startswith("hx_")]:
        del sys.modules[name]
    harness_one.refresh_entry_points()
    reset_tool_index()
    ToolRegistry.set_default(None)


def _registry(default: bool) -> ToolRegistry:
    return ToolRegistry.default() if default else ToolRegistry(discover=True, autoload=False)


def _ep(distribution: str) -> EntryPoint:
    return next(ep for ep in entry_points("harness_one.tools") if ep.distribution == distribution)


def _loop_package(dists: Any, dist: str = "hx-loop") -> Path:
    module = dist.replace("-", "_")
    return dists.make(dist, {module: MARK.format(mark="loop") + LOOP}, {"harness_one.tools": {"loop": module}})


def _conflicting_packages(dists: Any) -> list[Path]:
    """``hx-aa-hid`` (its import registers ``dup`` inside a function) and ``hx-zz-dup`` (``dup = hx_zz_dup:dup``)."""
    return [
        dists.make(
            "hx-aa-hid", {"hx_aa_hid": MARK.format(mark="aa") + IN_A_FUNCTION}, {"harness_one.tools": {"hid": "hx_aa_hid"}}
        ),
        dists.make(
            "hx-zz-dup", {"hx_zz_dup": MARK.format(mark="zz") + GLOBAL_DUP}, {"harness_one.tools": {"dup": "hx_zz_dup:dup"}}
        ),
    ]


def test_a_discovering_registry_gets_the_tools_a_package_registered_in_a_loop(
    dists: Any, index_dir: Path, imports: Path, fresh_default: None
) -> None:
    _loop_package(dists)
    reg = ToolRegistry(discover=True, autoload=False)
    assert {"to_km", "to_mi"} <= set(reg.names())
    assert reg.call("to_km", {"value": 2}) == 4 and reg.get("to_mi").source == "hx-loop"
    assert reg.discovery.loaded["hx-loop"] == ["to_km", "to_mi"] and reg.discovery.conflicts == []
    assert tool_index().tools(_ep("hx-loop")) == {"to_km", "to_mi"}

    later = ToolRegistry(discover=True, autoload=False)  # the module is not run again: its tools still count
    assert later.call("to_mi", {"value": 1}) == 2 and later.discovery.loaded["hx-loop"] == ["to_km", "to_mi"]
    default = ToolRegistry.default()  # the registry the import registered them into
    assert default.call("to_km", {"value": 1}) == 2
    default.names()
    assert default.discovery.loaded["hx-loop"] == ["to_km", "to_mi"] and default.discovery.conflicts == []
    assert imports.read_text() == "loop"


def test_a_call_with_a_warm_index_imports_only_the_package_that_registered_the_tool(
    dists: Any, index_dir: Path, imports: Path, fresh_default: None
) -> None:
    dists.make(
        "hx-aa-other",
        {"hx_aa_other": MARK.format(mark="aa") + GLOBAL_DUP.replace("dup", "other")},
        {"harness_one.tools": {"other": "hx_aa_other"}},
    )
    _loop_package(dists, "hx-bb-loop")
    ToolRegistry(discover=True, autoload=False).load_entry_points()  # a listing fills the index
    for default in (True, False):
        _new_process()
        imports.write_text("")
        assert tool_index().tools(_ep("hx-bb-loop")) == {"to_km", "to_mi"}
        assert _registry(default).call("to_km", {"value": 2}) == 4
        assert imports.read_text() == "loop"  # hx-aa-other, sorted first, is not imported


def test_a_call_and_a_listing_keep_the_same_package_s_tool(
    dists: Any, index_dir: Path, imports: Path, fresh_default: None
) -> None:
    """The first package by distribution name keeps ``dup``, though its import registered it inside a function."""
    _conflicting_packages(dists)
    reg = ToolRegistry(discover=True, autoload=False)
    reg.load_entry_points()
    assert reg.call("dup", {"text": "a"}) == "aa:a"
    assert reg.discovery.conflicts == [Conflict("dup", kept="hx-aa-hid", skipped="hx-zz-dup")]
    assert ToolRegistry.call("dup", {"text": "a"}) == "aa:a"
    for default in (True, False):
        _new_process()  # the index knows hx-aa-hid provides dup
        imports.write_text("")
        assert _registry(default).call("dup", {"text": "a"}) == "aa:a"
        assert imports.read_text() == "aa"


def _cli(*args: str, sites: list[Path], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*map(str, sites), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "HARNESS_ONE_CACHE_DIR": str(cache),
        "HARNESS_ONE_STATE": "memory:",
        "HX_IMPORTS": os.devnull,
    }
    command = [sys.executable, "-m", "harness_one", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_the_command_line_lists_and_calls_them(dists: Any, tmp_path: Path) -> None:
    sites = [_loop_package(dists), *_conflicting_packages(dists)]
    for _ in range(2):  # with a fresh index, then with the one the first round filled
        for name, args, answer in (("to_km", {"value": 2}, 4), ("dup", {"text": "a"}, "aa:a")):
            called = _cli("call", name, "--args", json.dumps(args), sites=sites, cache=tmp_path / "cache")
            assert called.returncode == 0, called.stdout + called.stderr
            assert json.loads(called.stdout)["result"] == answer
        listed = _cli("list", sites=sites, cache=tmp_path / "cache")
        assert listed.returncode == 0, listed.stderr
        rows = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()[1:] if line[:1].strip()}
        assert rows["to_km"] == rows["to_mi"] == "hx-loop" and rows["dup"] == "hx-aa-hid"
