"""A tool package whose import failed, then succeeded on a retry: the tools its import registered itself in a helper
module that stayed imported (in a loop, inside a function) are still the package's, as on a first successful import."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from test_review33_discovery import IN_A_FUNCTION, LOOP

import harness_one
from harness_one import ToolRegistry
from harness_one._discovery import tool_index
from harness_one._entrypoints import EntryPoint, entry_points

#: The package's ``__init__``: imports its helper first, then fails while ``HX_CARRY_FAIL`` is set.
INIT = """
import os

from . import _helpers
from harness_one.tools import defineTool

@defineTool
def top(x: int) -> int:
    '''Top.'''
    return x

if os.environ.get("HX_CARRY_FAIL"):
    raise RuntimeError("cannot connect")
"""

#: The helper: registers its tools into the default registry in a loop and inside a function.
HELPERS = LOOP + IN_A_FUNCTION

TOOLS = ["top", "to_km", "to_mi", "dup"]


def _package(dists: Any) -> EntryPoint:
    """``hx-carry``: package ``hx_carry`` with a helper module ``hx_carry._helpers``."""
    site = dists.make("hx-carry", {}, {"harness_one.tools": {"carry": "hx_carry"}})
    (site / "hx_carry").mkdir()
    (site / "hx_carry" / "__init__.py").write_text(INIT)
    (site / "hx_carry" / "_helpers.py").write_text(HELPERS)
    dists.modules += ["hx_carry", "hx_carry._helpers"]
    harness_one.refresh_entry_points()
    return next(ep for ep in entry_points("harness_one.tools") if ep.distribution == "hx-carry")


def test_a_retried_package_keeps_the_tools_its_helper_registered(
    dists: Any, index_dir: Path, fresh_default: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = _package(dists)
    monkeypatch.setenv("HX_CARRY_FAIL", "1")
    reg = ToolRegistry(discover=True, autoload=False)
    reg.load_entry_points()
    assert [f.distribution for f in reg.discovery.failures] == ["hx-carry"]
    assert "hx_carry._helpers" in sys.modules and "hx_carry" not in sys.modules  # the helper stays imported

    monkeypatch.delenv("HX_CARRY_FAIL")
    reg.load_entry_points(refresh=True)  # the helper is not run again: its tools are the package's still
    assert reg.discovery.failures == [] and reg.discovery.loaded["hx-carry"] == TOOLS
    assert reg.call("to_km", {"value": 2}) == 4 and reg.call("dup", {"text": "a"}) == "aa:a"
    assert {reg.get(name).source for name in TOOLS} == {"hx-carry"}
    assert tool_index().tools(ep) == set(TOOLS)

    later = ToolRegistry(discover=True, autoload=False)
    later.load_entry_points()
    assert later.discovery.loaded["hx-carry"] == TOOLS and later.call("to_mi", {"value": 1}) == 2
    default = ToolRegistry.default()  # the registry the imports registered them into
    default.load_entry_points(refresh=True)
    assert default.discovery.loaded["hx-carry"] == TOOLS and default.discovery.conflicts == []
    assert tool_index().tools(ep) == set(TOOLS)


def test_a_package_retried_in_the_default_registry_keeps_them_too(
    dists: Any, index_dir: Path, fresh_default: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = _package(dists)
    monkeypatch.setenv("HX_CARRY_FAIL", "1")
    default = ToolRegistry.default()
    default.load_entry_points()
    assert [f.distribution for f in default.discovery.failures] == ["hx-carry"]
    assert default.call("to_km", {"value": 1}) == 2  # its helper's tools stay registered where they went

    monkeypatch.delenv("HX_CARRY_FAIL")
    default.load_entry_points(refresh=True)
    assert default.discovery.loaded["hx-carry"] == TOOLS and default.discovery.conflicts == []
    assert tool_index().tools(ep) == set(TOOLS)
    assert ToolRegistry(discover=True, autoload=False).load_entry_points().loaded["hx-carry"] == TOOLS
