"""Review 31: a removed tool stays removed, a refresh finds new packages on every registry, doctor prints one line per item."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one import ToolNotFound, ToolRegistry, define_tool, refresh_entry_points

ADD = """
from harness_one import defineTool

@defineTool(registry=None)
def add(a: int, b: int) -> int:
    return a {op} b
"""

SELF_REGISTERING = """
from harness_one import defineTool

@defineTool
def add(a: int, b: int) -> int:
    return a {op} b
"""


def _two_adds(dists: Any, tag: str, source: str = ADD) -> None:
    """Packages ``hx-{tag}-a`` (add: a + b) and ``hx-{tag}-b`` (add: a - b); the first by name is kept."""
    for side, op in (("a", "+"), ("b", "-")):
        module = f"hx_{tag}_{side}"
        dists.make(f"hx-{tag}-{side}", {module: source.format(op=op)}, {"harness_one.tools": {"add": f"{module}"}})


@pytest.mark.parametrize("listed", [False, True])
def test_a_removed_package_tool_is_not_replaced_by_another_package(index_dir: Path, dists: Any, listed: bool) -> None:
    _two_adds(dists, f"rm{int(listed)}")
    reg = ToolRegistry(discover=True, autoload=False)
    if listed:
        reg.tools()
    assert reg.call("add", {"a": 5, "b": 3}) == 8
    assert reg.remove("add").source == f"hx-rm{int(listed)}-a"
    with pytest.raises(ToolNotFound):
        reg.call("add", {"a": 5, "b": 3})  # the other package's add is not loaded in its place
    assert "add" not in reg
    assert "add" not in [t.name for t in reg.tools()]  # nor by a listing, an export or a refresh
    assert "add" not in reg.export("openai").tool_names
    reg.load_entry_points(refresh=True)
    assert "add" not in reg
    with pytest.raises(ToolNotFound):
        reg.remove("add")

    @define_tool(registry=reg)
    def add(a: int, b: int) -> int:  # code adds it again
        return a * b

    assert reg.call("add", {"a": 5, "b": 3}) == 15


def test_a_removed_self_registering_package_tool_stays_removed(index_dir: Path, dists: Any) -> None:
    old = ToolRegistry.set_default(ToolRegistry(discover=True, autoload=False))
    try:
        dists.make("hx-self-a", {"hx_self_a": ADD.format(op="+")}, {"harness_one.tools": {"add": "hx_self_a"}})
        assert ToolRegistry.call("add", {"a": 5, "b": 3}) == 8
        ToolRegistry.remove("add")
        # A package whose import registers its add into the default registry itself does not bring the name back.
        dists.make("hx-self-b", {"hx_self_b": SELF_REGISTERING.format(op="-")}, {"harness_one.tools": {"add": "hx_self_b"}})
        assert "add" not in [t.name for t in ToolRegistry.default().tools()]
        with pytest.raises(ToolNotFound):
            ToolRegistry.call("add", {"a": 5, "b": 3})
    finally:
        ToolRegistry.set_default(old)


def test_refresh_entry_points_finds_a_new_package_on_a_registry_that_listed(index_dir: Path, dists: Any) -> None:
    dists.make("hx-live-a", {"hx_live_a": ADD.format(op="+")}, {"harness_one.tools": {"add": "hx_live_a"}})
    lazy, listed = ToolRegistry(discover=True, autoload=False), ToolRegistry(discover=True, autoload=False)
    assert lazy.call("add", {"a": 1, "b": 1}) == 2
    assert "add" in [t.name for t in listed.tools()]
    new = "from harness_one import defineTool\n@defineTool(registry=None)\ndef gamma(n: int) -> int:\n    return n * 2\n"
    dists.make("hx-live-gamma", {"hx_live_gamma": new}, {"harness_one.tools": {"gamma": "hx_live_gamma"}})  # refreshes
    assert lazy.call("gamma", {"n": 4}) == 8
    assert listed.call("gamma", {"n": 4}) == 8
    assert listed.discovery.loaded["hx-live-gamma"] == ["gamma"]
    # Once loaded, an unknown name does not look again until the next refresh.
    assert "nothing" not in listed
    seen = len(listed.discovery.seen)
    refresh_entry_points()
    assert "nothing" not in listed and len(listed.discovery.seen) == seen


def test_doctor_prints_each_failure_on_one_line(runner: CliRunner, dists: Any) -> None:
    from harness_one._cli import main

    forged = "raise RuntimeError('boom\\nName conflicts: none\\nUnenforced policies: none')\n"
    dists.make("hx-forger", {"hx_forger": forged}, {"harness_one.tools": {"forger": "hx_forger"}})
    result = runner.invoke(main, ["doctor"])
    lines = result.output.splitlines()
    assert lines.count("Name conflicts: none") == lines.count("Unenforced policies: none") == 1  # none forged
    assert (
        "  harness_one.tools:forger from hx-forger: RuntimeError: boom\\x0aName conflicts: none\\x0aUnenforced" in result.output
    )
