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
    # (sys.path set, not prepended to: monkeypatch.syspath_prepend would restore the copy index_dir made,
    # without pytest's tests folder, for the rest of the session)
    monkeypatch.setattr(sys, "path", ["", str(work), *sys.path])
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


# ------------------------------------------------------------------ environments side by side, and the file's bounds


def _file_entries(index_dir: Path) -> dict[str, Any]:
    entries: dict[str, Any] = json.loads((index_dir / "tool-index.json").read_text())["entries"]
    return entries


def _two_packages(dists: Any) -> None:
    """``hx-aa-first`` (``whisper``) is sorted before ``hx-bb-second``, whose module entry point provides ``shout``."""
    dists.make("hx-aa-first", {"hx_aa_first": HEAD + _tool("whisper", "aa")}, {"harness_one.tools": {"text": "hx_aa_first"}})
    dists.make("hx-bb-second", {"hx_bb_second": HEAD + _tool("shout", "bb")}, {"harness_one.tools": {"more": "hx_bb_second"}})


def test_programs_of_one_environment_with_other_sys_path_folders_keep_their_entries(
    dists: Any, index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app and its tests (pytest puts the tests folder on sys.path), or two PYTHONPATHs, in one virtual
    environment: after the first run of each, a call imports only the package that provides the tool."""
    _two_packages(dists)
    extra = tmp_path / "tests"
    extra.mkdir()
    app, tests = list(sys.path), [str(extra), *sys.path]
    for path in (app, tests):  # each one's first run fills its entries
        monkeypatch.setattr(sys, "path", path)
        _new_process()
        assert _lazy_answer() == "bb" and "hx_aa_first" in sys.modules
    for path in (app, tests, app, tests):
        monkeypatch.setattr(sys, "path", path)
        _new_process()
        before = (index_dir / "tool-index.json").read_bytes()
        assert _lazy_answer() == "bb"
        assert "hx_aa_first" not in sys.modules  # the index knew it provides no ``shout``
        assert (index_dir / "tool-index.json").read_bytes() == before  # nothing new to write


def test_processes_of_other_environments_keep_what_the_other_wrote(
    dists: Any, index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both read the file before either wrote it: the second to write keeps the first's entries."""
    _two_packages(dists)
    ours = _ep("hx-aa-first")
    extra = tmp_path / "extra"
    extra.mkdir()
    path = index_dir / "tool-index.json"
    first, second = ToolIndex(path), ToolIndex(path)
    first.record(ours, ["whisper"], files=[])
    first.save()
    key_first = ToolIndex.key(ours)
    monkeypatch.setattr(sys, "path", [str(extra), *sys.path])
    second.record(ours, ["whisper"], files=[])
    second.save()
    assert {key_first, ToolIndex.key(ours)} <= set(_file_entries(index_dir)) and key_first != ToolIndex.key(ours)


def test_the_entries_of_a_removed_virtual_environment_are_dropped(
    dists: Any, index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _two_packages(dists)
    venvs = []
    for n in range(3):  # throwaway virtual environments (tox, CI, pipx) sharing the cache
        venv = tmp_path / f"venv{n}"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").write_text("")
        venvs.append(str(venv))
        with monkeypatch.context() as m:
            m.setattr(sys, "prefix", str(venv))
            m.setattr(sys, "executable", str(venv / "bin" / "python"))
            _new_process()
            assert _lazy_answer() == "bb"
    import shutil

    shutil.rmtree(venvs[0])
    shutil.rmtree(venvs[1])
    _new_process()
    assert _lazy_answer() == "bb"
    entries = _file_entries(index_dir)
    assert {p for p in [sys.prefix, *venvs] if any(key.startswith(p + "|") for key in entries)} == {sys.prefix, venvs[2]}


def test_an_older_state_of_the_same_folders_is_dropped(dists: Any, index_dir: Path) -> None:
    """Something was installed: the entries of the environment as it was before cannot hold again."""
    dists.make("hx-aa-grow", {"hx_aa_grow": HEAD + _tool("whisper", "aa")}, {"harness_one.tools": {"text": "hx_aa_grow"}})
    site = _later_package(dists)
    assert _listing_answer() == "zz"
    _new_process()
    ours = _ep("hx-aa-grow")
    before = ToolIndex.key(ours)
    (site / "hx_unrelated.py").write_text("")  # an install
    _later(site)
    _new_process()
    assert _lazy_answer() == "zz"
    entries = _file_entries(index_dir)
    assert ToolIndex.key(ours) in entries and before != ToolIndex.key(ours) and before not in entries


def test_past_the_most_recently_used_environments_of_a_prefix_the_least_recently_used_is_dropped(
    dists: Any, index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness_one import _discovery

    monkeypatch.setattr(ToolIndex, "PER_PREFIX", 3)
    _two_packages(dists)
    ours = _ep("hx-aa-first")
    base = list(sys.path)
    keys = []

    def run(n: int, seconds: float) -> None:
        """A process at ``seconds`` with folder ``n`` on sys.path: a call of ``shout``."""
        folder = tmp_path / f"folder{n}"
        folder.mkdir(exist_ok=True)
        monkeypatch.setattr(sys, "path", [str(folder), *base])
        _new_process()
        monkeypatch.setattr(_discovery, "_index", ToolIndex(index_dir / "tool-index.json", clock=lambda: seconds))
        assert _lazy_answer() == "bb"
        if len(keys) == n:
            keys.append(ToolIndex.key(ours))

    for n in range(3):
        run(n, 1_000_000 + 10 * n)
    before = (index_dir / "tool-index.json").read_bytes()
    run(0, 1_000_000 + ToolIndex.USED_GRAIN - 1)
    assert (index_dir / "tool-index.json").read_bytes() == before  # used again within the hour: not written
    run(0, 1_000_000 + ToolIndex.USED_GRAIN)  # its last-used mark is renewed
    assert (index_dir / "tool-index.json").read_bytes() != before
    run(3, 1_000_000 + ToolIndex.USED_GRAIN + 1)
    entries = _file_entries(index_dir)
    assert [key in entries for key in keys] == [True, False, True, True]
    environments = json.loads((index_dir / "tool-index.json").read_text())["environments"]
    assert len(environments) == 3


def test_past_the_most_recently_used_environments_in_all_the_least_recently_used_is_dropped(
    dists: Any, index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ToolIndex, "ENVIRONMENTS", 2)
    _two_packages(dists)
    for n in range(3):
        venv = tmp_path / f"venv{n}"
        venv.mkdir()
        monkeypatch.setattr(sys, "prefix", str(venv))  # the interpreter exists: only the bound drops it
        _new_process()
        assert _lazy_answer() == "bb"
    prefixes = {meta["prefix"] for meta in json.loads((index_dir / "tool-index.json").read_text())["environments"].values()}
    assert prefixes == {str(tmp_path / "venv1"), str(tmp_path / "venv2")}
    assert not any(key.startswith(str(tmp_path / "venv0") + "|") for key in _file_entries(index_dir))


def test_a_file_of_the_former_format_is_replaced(dists: Any, index_dir: Path) -> None:
    """Its entries (one per prefix, of removed environments too) are dropped, not carried on."""
    _two_packages(dists)
    ours = _ep("hx-bb-second")
    stale = {"stamp": [1, 2, 3], "tools": ["shout"], "env": 7, "files": []}
    old = {f"{sys.prefix}|hx-bb-second|more|hx_bb_second": stale, "/gone/venv|hx-bb-second|more|hx_bb_second": stale}
    index_dir.mkdir()
    (index_dir / "tool-index.json").write_text(json.dumps({"version": 1, "entries": old}))
    reset_tool_index()
    assert _lazy_answer() == "bb"
    data = json.loads((index_dir / "tool-index.json").read_text())
    assert data["version"] == ToolIndex.VERSION == 2
    assert set(data["entries"]) == {ToolIndex.key(_ep("hx-aa-first")), ToolIndex.key(ours)}
