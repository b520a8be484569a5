"""Tool packages found through the ``harness_one.tools`` entry points."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import harness_one
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


def _run(code: str, site: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter that sees the distributions under ``site``."""
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "HARNESS_ONE_CACHE_DIR": str(tmp_path / "cache"),
        "HARNESS_ONE_STATE": "memory:",
    }
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False)


DESIGN_CARD = """
from harness_one.tools import defineTool, ToolRegistry

@defineTool(name="add", description="Adds two numbers")
def add(a: int, b: int) -> int:
    return a + b

print(ToolRegistry.call("add", {"a": 5, "b": 3}))
print([str(f) for f in ToolRegistry.default().plugins.failures])
"""


def test_a_plugin_that_uses_the_default_registry_while_it_loads_is_refused(dists: Any, tmp_path: Path) -> None:
    """A plugin module defining a tool on the default registry, loaded while that registry is built: refused, not a deadlock."""
    plugin = (
        "from harness_one import defineTool, hookimpl\n\n"
        "@defineTool\ndef audit_trail(limit: int = 10) -> list:\n    '''The last entries.'''\n    return []\n\n"
        "class AuditPlugin:\n    @hookimpl\n    def harness_pre_call(self, call):\n        return None\n"
    )
    site = dists.make("acme-audit", {"acme_audit": plugin}, {"harness_one.plugins": {"audit": "acme_audit:AuditPlugin"}})
    ran = _run(DESIGN_CARD, site, tmp_path)  # without the fix: waits for ever on the default registry's lock
    assert ran.returncode == 0, ran.stderr
    result, failures = ran.stdout.splitlines()
    assert result == "8" and "audit" in failures and "a plugin cannot use it while it loads" in failures


@pytest.mark.parametrize("metadata", ["", "Metadata-Version: 2.1\nVersion: 1.0\n"])
def test_a_distribution_with_broken_metadata_is_named_by_its_folder(dists: Any, tmp_path: Path, metadata: str) -> None:
    """No METADATA text, or no Name in it (a half-removed install): its tools load, the others' too, the card works."""
    site = dists.make("hx-noname", {"hx_noname": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_noname"}})
    (site / "hx_noname-1.0.dist-info" / "METADATA").write_text(metadata)
    plugin = dists.make("hx-noname-plugin", {"hx_np": "class P:\n    pass\n"}, {"harness_one.plugins": {"np": "hx_np:P"}})
    (plugin / "hx_noname_plugin-1.0.dist-info" / "METADATA").write_text(metadata)
    harness_one.refresh_entry_points()
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.call("shout", {"text": "ok"}) == "OK" and reg.get("shout").source == "hx_noname"
    assert "calculate" in reg.names()
    ran = _run(DESIGN_CARD, site, tmp_path)
    assert ran.returncode == 0 and ran.stdout.splitlines()[0] == "8", ran.stderr


def test_an_interrupted_discovery_is_taken_up_again(dists: Any) -> None:
    """Ctrl-C in a package's import: the next lookup loads that package and the rest (they were skipped for good)."""
    dists.make(
        "hx-aa-slow",
        {"hx_aa_slow": "import os\nif os.environ.get('HX_INTERRUPT'):\n    raise KeyboardInterrupt\n"},
        {"harness_one.tools": {"slow": "hx_aa_slow"}},
    )
    dists.make("hx-zz-text", {"hx_zz_text": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_zz_text"}})
    reg = ToolRegistry(discover=True, autoload=False)
    os.environ["HX_INTERRUPT"] = "1"
    try:
        with pytest.raises(KeyboardInterrupt):
            reg.names()
    finally:
        del os.environ["HX_INTERRUPT"]
    assert reg.call("shout", {"text": "ok"}) == "OK"
    assert "hx-aa-slow" not in {f.distribution for f in reg.discovery.failures}


def test_removing_a_package_tool_loads_it_first(dists: Any) -> None:
    """``remove`` of a tool a package provides removes it (it raised ToolNotFound, then the tool appeared)."""
    dists.make("hx-rm", {"hx_rm": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_rm"}})
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.remove("shout").name == "shout"
    assert "shout" not in reg.names() and "whisper" in reg.names()
    with pytest.raises(ToolNotFound):
        reg.remove("no_such_tool")


@pytest.mark.parametrize(("owner", "importer"), [("hx-aaa-own", "hx-bbb-extras"), ("hx-zzz-own", "hx-aaa-extras")])
def test_a_tool_another_package_imports_is_credited_once(dists: Any, owner: str, importer: str) -> None:
    """A module entry point that imports a tool of another package does not claim it (nor list it twice),
    whichever of the two loads first."""
    dists.make(owner, {"hx_own": TOOLS_MODULE}, {"harness_one.tools": {"text": "hx_own"}})
    extras = "from harness_one import defineTool\nfrom hx_own import shout\n\n@defineTool(registry=None)\ndef plain(n: int) -> int:\n    return n\n"
    dists.make(importer, {"hx_extras": extras}, {"harness_one.tools": {"extras": "hx_extras"}})
    reg = ToolRegistry(discover=True, autoload=False)
    reg.load_entry_points()
    assert reg.get("shout").source == owner and reg.discovery.conflicts == []
    assert reg.discovery.loaded[importer] == ["plain"] and "shout" in reg.discovery.loaded[owner]
