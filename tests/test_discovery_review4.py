"""The tool index after the environment or a module outside a package's own files changed: a lazy call
of a tool goes to the package a listing would choose, never to a later package's tool of that name."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import harness_one
from harness_one import ToolRegistry
from harness_one._discovery import ToolIndex, _well_formed, reset_tool_index, tool_index
from harness_one._entrypoints import EntryPoint, entry_points


def _new_process(prefix: str = "hx_") -> None:
    """As a new process would start: the packages not imported, the entry points and the index read again."""
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]
    harness_one.refresh_entry_points()
    reset_tool_index()


def _later(path: Path) -> None:
    """``path``'s modification time a second later, however coarse the file system's clock."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _ep(distribution: str) -> EntryPoint:
    return next(ep for ep in entry_points("harness_one.tools") if ep.distribution == distribution)


def _tool(name: str, says: str) -> str:
    return f"\n@defineTool(registry=None)\ndef {name}(text: str = '') -> str:\n    return {says!r}\n"


HEAD = "from harness_one import defineTool\n"


def _later_package(dists: Any) -> Path:
    """``hx-zz-later``: its entry point is named after its tool ``shout``, which answers ``zz``."""
    return dists.make(
        "hx-zz-later", {"hx_zz_later": HEAD + _tool("shout", "zz")}, {"harness_one.tools": {"shout": "hx_zz_later:shout"}}
    )


def _listing_answer() -> Any:
    reg = ToolRegistry(discover=True, autoload=False)
    reg.load_entry_points()
    return reg.call("shout", {})


def _lazy_answer() -> Any:
    return ToolRegistry(discover=True, autoload=False).call("shout", {})


# ------------------------------------------------------------------ finding 4: a failure knows no tools


def test_a_failed_entry_point_is_imported_again_by_a_lazy_call_once_its_dependency_is_installed(
    dists: Any, index_dir: Path
) -> None:
    site = dists.make(
        "hx-aa-needs",
        {"hx_aa_needs": "import hx_aa_missing_dependency\n" + HEAD + _tool("shout", "aa")},
        {"harness_one.tools": {"text": "hx_aa_needs"}},
    )
    _later_package(dists)
    assert _listing_answer() == "zz"  # hx-aa-needs failed: recorded in the index as failed
    _new_process()
    ours = _ep("hx-aa-needs")
    assert tool_index().failure(ours) == "ModuleNotFoundError: No module named 'hx_aa_missing_dependency'"
    assert tool_index().tools(ours) is None  # a failure does not say which tools the package provides

    (site / "hx_aa_missing_dependency.py").write_text("")  # installed
    _later(site)
    _new_process()
    assert tool_index().failure(ours) is None and tool_index().tools(ours) is None
    assert _lazy_answer() == "aa"  # as a listing chooses now
    _new_process()
    assert _listing_answer() == "aa"


# ------------------------------------------------------------------ finding 5: what the stamp covers


def test_a_sibling_module_of_an_editable_project_is_part_of_the_entry(dists: Any, index_dir: Path) -> None:
    """``hx_aa_sib`` re-exports the tools of ``hx_aa_impl``, another top-level module of the project."""
    site = dists.make(
        "hx-aa-sib",
        {"hx_aa_sib": "from hx_aa_impl import *\n", "hx_aa_impl": HEAD + _tool("whisper", "aa")},
        {"harness_one.tools": {"text": "hx_aa_sib"}},
    )
    (site / "hx_aa_sib-1.0.dist-info" / "direct_url.json").write_text('{"url": "file:///src", "dir_info": {"editable": true}}')
    _later_package(dists)
    assert _listing_answer() == "zz"
    _new_process()
    ours = _ep("hx-aa-sib")
    assert tool_index().tools(ours) == {"whisper"}
    env = tool_index()._environment()

    impl = site / "hx_aa_impl.py"
    impl.write_text(impl.read_text() + _tool("shout", "aa (edited)"))  # an edit: no folder changes
    _later(impl)
    _new_process()
    assert tool_index()._environment() == env  # the module's own stamp says it
    assert tool_index().tools(ours) is None
    assert _lazy_answer() == "aa (edited)"
    _new_process()
    assert tool_index().tools(ours) == {"shout", "whisper"}


def test_an_entry_point_into_a_dependency_s_module_is_stamped_by_that_module(dists: Any, index_dir: Path) -> None:
    """``text = "hx_libdep.tools"``: the module is another distribution's (installed with a RECORD, so the
    entry point's own distribution is stamped by its RECORD, which the dependency's change leaves alone)."""
    own = dists.make("hx-aa-dep", {}, {"harness_one.tools": {"text": "hx_libdep.tools"}})
    (own / "hx_aa_dep-1.0.dist-info" / "RECORD").write_text("hx_aa_dep-1.0.dist-info/RECORD,,\n")
    lib = dists.make("hx-libdep", {}, {})
    (lib / "hx_libdep").mkdir()
    (lib / "hx_libdep" / "__init__.py").write_text("")
    tools = lib / "hx_libdep" / "tools.py"
    tools.write_text(HEAD + _tool("whisper", "libdep 1"))
    _later_package(dists)
    assert _listing_answer() == "zz"
    _new_process()
    ours = _ep("hx-aa-dep")
    assert tool_index().tools(ours) == {"whisper"}
    env = tool_index()._environment()

    tools.write_text(HEAD + _tool("whisper", "libdep 2") + _tool("shout", "libdep 2"))
    _later(tools)
    _new_process()
    assert tool_index()._environment() == env
    assert tool_index().tools(ours) is None
    assert _lazy_answer() == "libdep 2"


OPTIONAL = (
    HEAD
    + _tool("whisper", "aa")
    + "\ntry:\n    import hx_aa_optional\nexcept ImportError:\n    pass\nelse:\n"
    + "\n".join("    " + line for line in _tool("shout", "aa with its option").splitlines())
    + "\n"
)


def test_installing_an_optional_dependency_renews_the_entry(dists: Any, index_dir: Path) -> None:
    """Tools defined only when an optional import succeeds: installing it changes none of the package's files."""
    site = dists.make("hx-aa-opt", {"hx_aa_opt": OPTIONAL}, {"harness_one.tools": {"text": "hx_aa_opt"}})
    (site / "hx_aa_opt-1.0.dist-info" / "RECORD").write_text("hx_aa_opt.py,,\n")
    other = _later_package(dists)
    assert _listing_answer() == "zz"
    _new_process()
    ours = _ep("hx-aa-opt")
    assert tool_index().tools(ours) == {"whisper"}

    (other / "hx_aa_optional.py").write_text("")  # installed into another folder on sys.path
    _later(other)
    _new_process()
    assert tool_index().tools(ours) is None
    assert _lazy_answer() == "aa with its option"


# ------------------------------------------------------------------ the environment's bounds


def test_the_script_s_folder_is_not_part_of_the_environment(
    dists: Any, index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that writes files next to itself (the current directory, with ``-c`` and ``-m``) keeps its index."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))
    monkeypatch.syspath_prepend("")
    site = dists.make("hx-aa-cwd", {"hx_aa_cwd": HEAD + _tool("whisper", "aa")}, {"harness_one.tools": {"text": "hx_aa_cwd"}})
    ToolRegistry(discover=True, autoload=False).load_entry_points()
    _new_process()
    ours = _ep("hx-aa-cwd")
    assert tool_index().tools(ours) == {"whisper"}

    (work / "output.log").write_text("a run's output")
    _later(work)
    _new_process()
    assert tool_index().tools(ours) == {"whisper"}

    (site / "hx_unrelated.py").write_text("")  # an install into a folder on sys.path
    _later(site)
    _new_process()
    assert tool_index().tools(ours) is None


def test_each_virtual_environment_keeps_its_own_entries(dists: Any, index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two environments sharing the cache do not overwrite each other's entries at each turn."""
    dists.make("hx-aa-venv", {"hx_aa_venv": HEAD + _tool("whisper", "aa")}, {"harness_one.tools": {"text": "hx_aa_venv"}})
    ToolRegistry(discover=True, autoload=False).load_entry_points()
    _new_process()
    ours = _ep("hx-aa-venv")
    assert tool_index().tools(ours) == {"whisper"}
    here = sys.prefix

    monkeypatch.setattr(sys, "prefix", here + "-other")
    _new_process()
    assert tool_index().tools(ours) is None  # not this environment's
    ToolRegistry(discover=True, autoload=False).load_entry_points()
    _new_process()
    assert tool_index().tools(ours) == {"whisper"}

    monkeypatch.setattr(sys, "prefix", here)
    _new_process()
    assert tool_index().tools(ours) == {"whisper"}  # still there
    entries = json.loads((index_dir / "tool-index.json").read_text())["entries"]
    assert {ToolIndex.key(ours), ToolIndex.key(ours).replace(here, here + "-other", 1)} <= set(entries)


# ------------------------------------------------------------------ the index file's shape


@pytest.mark.parametrize(
    "files",
    [[["a.py", "1", 2]], [["a.py", 1]], ["a.py"], {"a.py": [1, 2]}, [[1, 1, 2]], [["a.py", 1, 2.5]]],
)
def test_an_entry_with_malformed_file_stamps_is_dropped(files: Any) -> None:
    entry = {"stamp": [1, 2, 3], "tools": ["shout"], "env": 7, "files": files}
    assert not _well_formed(entry)
    assert _well_formed({**entry, "files": [["a.py", 1, 2]]})


def test_an_entry_without_the_environment_is_not_trusted(dists: Any, index_dir: Path) -> None:
    """An entry written before tool entries held the environment (its file version unchanged) is read again."""
    dists.make("hx-aa-old", {"hx_aa_old": HEAD + _tool("whisper", "aa")}, {"harness_one.tools": {"text": "hx_aa_old"}})
    ToolRegistry(discover=True, autoload=False).load_entry_points()
    _new_process()
    ours = _ep("hx-aa-old")
    path = index_dir / "tool-index.json"
    data = json.loads(path.read_text())
    entry = data["entries"][ToolIndex.key(ours)]
    assert set(entry) == {"stamp", "tools", "env", "files"}
    del entry["env"], entry["files"]
    path.write_text(json.dumps(data))
    reset_tool_index()
    assert tool_index().tools(ours) is None


PROXY_MODULE = """
import sys
from harness_one import defineTool

class Proxy:  # an object a package puts in sys.modules, whose attributes raise
    def __getattr__(self, name):
        raise RuntimeError("Working outside of application context.")

def whisper(text: str = "") -> str:
    return "aa"

whisper.__module__ = "hx_aa_proxied"  # as if defined there
whisper = defineTool(registry=None)(whisper)
sys.modules["hx_aa_proxied"] = Proxy()
"""


def test_a_module_whose_attributes_raise_adds_no_file_and_the_package_loads(dists: Any, index_dir: Path) -> None:
    site = dists.make("hx-aa-proxy", {"hx_aa_proxy": PROXY_MODULE}, {"harness_one.tools": {"text": "hx_aa_proxy"}})
    try:
        reg = ToolRegistry(discover=True, autoload=False)
        assert reg.call("whisper", {}) == "aa" and reg.discovery.failures == []
        entry = tool_index()._entries[ToolIndex.key(_ep("hx-aa-proxy"))]
        assert entry["files"] == [[str(site / "hx_aa_proxy.py"), *_size_and_time(site / "hx_aa_proxy.py")]]
    finally:
        sys.modules.pop("hx_aa_proxied", None)


def _size_and_time(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]
