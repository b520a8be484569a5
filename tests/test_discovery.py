"""Tool packages found through the ``harness_one.tools`` entry points."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import ToolNotFound, ToolRegistry, define_tool

TOOLS_MODULE = """
from harness_one import defineTool

@defineTool(registry=None, rate_limit={"rate": 2, "burst": 2})
def shout(text: str) -> str:
    '''Upper-case a text.'''
    return text.upper()

@defineTool(registry=None)
def whisper(text: str) -> str:
    return text.lower()
"""

HOOK_MODULE = """
from harness_one import hookimpl

def reverse(text: str) -> str:
    return text[::-1]

@hookimpl
def harness_register_tools(register):
    register(reverse, description="Reverse a text.")
"""

SINGLE = """
from harness_one import defineTool

@defineTool(registry=None, name="shout")
def other_shout(text: str) -> str:
    return text + "!"

def plain(n: int) -> int:
    return n + 1
"""


def test_tool_package_is_discovered(dists: Any) -> None:
    dists.make(
        "hx-text-tools",
        {"hx_text": TOOLS_MODULE, "hx_hook": HOOK_MODULE},
        {"harness_one.tools": {"text": "hx_text", "hook": "hx_hook"}},
    )
    reg = ToolRegistry(discover=True, autoload=False)
    assert [t.name for t in reg.tools() if t.source == "hx-text-tools"] == ["reverse", "shout", "whisper"]
    assert reg.call("shout", {"text": "hi"}) == "HI"
    assert reg.call("reverse", {"text": "abc"}) == "cba"
    assert reg.get("reverse").description == "Reverse a text."
    assert reg.discovery.loaded["hx-text-tools"] == ["reverse", "shout", "whisper"]


def test_default_registry_discovers_lazily(dists: Any) -> None:
    dists.make("hx-lazy", {"hx_lazy": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_lazy"}})
    old = ToolRegistry.set_default(None)
    try:
        assert ToolRegistry.call("whisper", {"text": "HI"}) == "hi"  # first unknown name triggers discovery
        assert "current_time" in ToolRegistry.names()  # and the contrib packages installed by the set-up command
    finally:
        ToolRegistry.set_default(old)


def test_broken_package_is_reported_and_others_work(dists: Any) -> None:
    dists.make("hx-good", {"hx_good_tools": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_good_tools"}})
    dists.make("hx-broken", {"hx_broken": "import not_a_real_module\n"}, {"harness_one.tools": {"broken": "hx_broken"}})
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.call("shout", {"text": "ok"}) == "OK"
    assert [(f.name, f.distribution) for f in reg.discovery.failures] == [("broken", "hx-broken")]
    assert "not_a_real_module" in reg.discovery.failures[0].error


def test_conflicts_resolve_the_same_way(dists: Any) -> None:
    dists.make(
        "hx-b-second",
        {"hx_second": SINGLE},
        {"harness_one.tools": {"shout": "hx_second:other_shout", "plain": "hx_second:plain"}},
    )
    dists.make("hx-a-first", {"hx_first": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_first"}})
    for _ in range(2):
        reg = ToolRegistry(discover=True, autoload=False)
        assert reg.get("shout").source == "hx-a-first"  # distributions load in name order
        assert reg.call("shout", {"text": "x"}) == "X"
        reg.tools()  # a listing loads every package, so the conflict is known
        assert [(c.name, c.kept, c.skipped) for c in reg.discovery.conflicts] == [("shout", "hx-a-first", "hx-b-second")]
        assert reg.call("plain", {"n": 1}) == 2  # a plain function becomes a tool


def test_code_tools_win_over_packages(dists: Any) -> None:
    dists.make("hx-pkg", {"hx_pkg": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_pkg"}})
    reg = ToolRegistry(autoload=False)

    @define_tool(registry=reg)
    def shout(text: str) -> str:
        return "mine"

    reg.load_entry_points()
    assert reg.call("shout", {"text": "x"}) == "mine"
    assert reg.discovery.conflicts[0].kept == "code in this process"


def test_instances_do_not_discover_unless_asked(dists: Any) -> None:
    dists.make("hx-quiet", {"hx_quiet": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_quiet"}})
    reg = ToolRegistry(autoload=False)
    with pytest.raises(ToolNotFound):
        reg.call("shout", {"text": "x"})
