"""A lazy lookup never lets a later package take a tool an earlier one provides (harness-one's own first):
whatever name is looked up first, each tool is kept from the package a listing keeps it from."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import harness_one
from harness_one import ToolNotFound, ToolRegistry
from harness_one._discovery import Conflict, reset_tool_index, tool_index
from harness_one._entrypoints import entry_points

HEAD = "from harness_one import defineTool\n"


def _tool(name: str, says: str) -> str:
    return f"\n@defineTool(registry=None)\ndef {name}(text: str = '') -> str:\n    return {says!r}\n"


def _new_process(prefix: str = "hx_") -> None:
    """As a new process would start: the packages not imported, the entry points and the index read again."""
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]
    harness_one.refresh_entry_points()
    reset_tool_index()


def _shadow(dists: Any) -> None:
    """``hx-aa-shadow``: a module entry point (any tools) with its own ``current_time`` and ``fetch_url``."""
    dists.make(
        "hx-aa-shadow",
        {"hx_aa_shadow": HEAD + _tool("current_time", "SHADOW") + _tool("fetch_url", "SHADOW") + _tool("hx_echo", "echo")},
        {"harness_one.tools": {"shadow": "hx_aa_shadow"}},
    )


def _own_kept(reg: ToolRegistry) -> None:
    assert reg.get("current_time").source == "harness-one-current-time"
    assert reg.get("fetch_url").source == "harness-one-fetch-url"
    assert Conflict("current_time", kept="harness-one-current-time", skipped="hx-aa-shadow") in reg.discovery.conflicts
    assert Conflict("fetch_url", kept="harness-one-fetch-url", skipped="hx-aa-shadow") in reg.discovery.conflicts
    assert all(c.kept == "harness-one-" + c.name.replace("_", "-") for c in reg.discovery.conflicts)


@pytest.fixture
def memory_index(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``HARNESS_ONE_CACHE_DIR=""``: the index in memory only, empty in each process."""
    monkeypatch.setenv("HARNESS_ONE_CACHE_DIR", "")
    reset_tool_index()
    yield
    reset_tool_index()


def test_a_missing_name_looked_up_first_does_not_let_a_package_take_harness_one_s_own_tools(
    dists: Any, memory_index: None
) -> None:
    _shadow(dists)
    reg = ToolRegistry(discover=True, autoload=False)
    with pytest.raises(ToolNotFound) as caught:
        reg.call("no_such_tool", {})
    assert "Unknown tool 'no_such_tool'" in str(caught.value)
    assert reg.call("current_time", {"timezone": "UTC"}) != "SHADOW"
    _own_kept(reg)


def test_another_package_s_tool_called_first_in_a_fresh_index(dists: Any, index_dir: Path) -> None:
    _shadow(dists)
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.call("hx_echo", {}) == "echo"  # the first call in an empty index file
    assert reg.get("hx_echo").source == "hx-aa-shadow"
    _own_kept(reg)


def test_a_known_module_entry_point_loads_the_earlier_packages_of_its_other_tools_first(dists: Any, index_dir: Path) -> None:
    """The index knows ``hx-aa-shadow`` provides ``hx_echo`` and ``current_time``: a call of ``hx_echo``
    in a later process loads harness-one-current-time first."""
    _shadow(dists)
    ToolRegistry(discover=True, autoload=False).load_entry_points()
    _new_process()
    shadow = next(ep for ep in entry_points("harness_one.tools") if ep.distribution == "hx-aa-shadow")
    assert tool_index().tools(shadow) == {"current_time", "fetch_url", "hx_echo"}
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.call("hx_echo", {}) == "echo"
    _own_kept(reg)


def _chain(dists: Any) -> None:
    """``u`` from hx-aa-first; ``t`` (and ``u``) from hx-bb-bundle; ``t2`` (and ``t``) from hx-cc-more."""
    dists.make("hx-aa-first", {"hx_aa_first": HEAD + _tool("u", "aa")}, {"harness_one.tools": {"u": "hx_aa_first:u"}})
    dists.make(
        "hx-bb-bundle",
        {"hx_bb_bundle": HEAD + _tool("t", "bb") + _tool("u", "bb")},
        {"harness_one.tools": {"bundle": "hx_bb_bundle"}},
    )
    dists.make(
        "hx-cc-more",
        {"hx_cc_more": HEAD + _tool("t2", "cc") + _tool("t", "cc")},
        {"harness_one.tools": {"more": "hx_cc_more"}},
    )


def _answers(reg: ToolRegistry) -> dict[str, Any]:
    return {name: (reg.call(name, {}), reg.get(name).source) for name in ("u", "t", "t2")}


LISTED = {"u": ("aa", "hx-aa-first"), "t": ("bb", "hx-bb-bundle"), "t2": ("cc", "hx-cc-more")}


def test_the_earlier_packages_loaded_first_include_those_of_their_own_other_tools(dists: Any, index_dir: Path) -> None:
    """Calling ``t2`` loads hx-bb-bundle (``t``) first, and so hx-aa-first (``u``) before that."""
    _chain(dists)
    listing = ToolRegistry(discover=True, autoload=False)
    listing.load_entry_points()
    assert _answers(listing) == LISTED
    _new_process()
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.call("t2", {}) == "cc"
    assert _answers(reg) == LISTED
    assert (
        reg.discovery.conflicts
        == listing.discovery.conflicts
        == [
            Conflict("u", kept="hx-aa-first", skipped="hx-bb-bundle"),
            Conflict("t", kept="hx-bb-bundle", skipped="hx-cc-more"),
        ]
    )


def test_a_known_name_imports_only_what_may_provide_its_tools(dists: Any, index_dir: Path) -> None:
    """With the index known, a call of ``u`` imports hx-aa-first alone; of ``t``, hx-aa-first and hx-bb-bundle."""
    _chain(dists)
    ToolRegistry(discover=True, autoload=False).load_entry_points()
    _new_process()
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.call("u", {}) == "aa"
    assert [m for m in sys.modules if m.startswith("hx_")] == ["hx_aa_first"]
    assert reg.call("t", {}) == "bb"
    assert sorted(m for m in sys.modules if m.startswith("hx_")) == ["hx_aa_first", "hx_bb_bundle"]
    assert reg.discovery.conflicts == [Conflict("u", kept="hx-aa-first", skipped="hx-bb-bundle")]
