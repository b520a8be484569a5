"""Start-up, lazy tool packages and registration at scale: asserted on modules imported and counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness_one import Tool, ToolNotFound, ToolRegistry, define_tool, refresh_entry_points
from harness_one._discovery import ToolIndex, reset_tool_index, tool_index
from harness_one._entrypoints import entry_points
from harness_one._suggest import NameIndex

HEAVY = (
    "asyncio",
    "concurrent.futures",
    "importlib_metadata",
    "jsonschema",
    "referencing",
    "structlog",
    "pluggy",
    "difflib",
    "sqlite3",
    "subprocess",
    "hashlib",  # (with harness_one._render, which the words of a tool need only when they are not ASCII)
)


def _imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_importing_the_seed_path_imports_nothing_heavy() -> None:
    found = _imported_after("from harness_one.tools import defineTool, ToolRegistry")
    assert "harness_one._registry" in found
    assert [name for name in HEAVY if name in found] == []


def test_cli_help_imports_neither_the_loop_nor_asyncio() -> None:
    found = _imported_after("from harness_one._cli import main\nmain(['--help'], standalone_mode=False)")
    assert [
        name for name in ("asyncio", "harness_one._cli.loop", "harness_one.mcp", "harness_one._schema") if name in found
    ] == []


def test_a_sync_call_through_the_standard_plugins_imports_neither_asyncio_nor_sqlite3() -> None:
    found = _imported_after(
        "from harness_one.tools import ToolRegistry\n"
        "reg = ToolRegistry(autoload=False)\n"
        "reg.add(lambda a: a, name='echo', timeout=5)\n"
        "assert reg.call('echo', {'a': 1}) == 1\n"
        "import harness_one_plugins.idempotency, harness_one.state as state\n"
        "assert state.WallClock is harness_one_plugins.idempotency.WallClock"
    )
    assert {"harness_one_plugins.timeout", "harness_one.state"} <= found
    assert [name for name in ("asyncio", "sqlite3", "harness_one.state._sqlite") if name in found] == []
    # ... and the SQLite store stays importable from every place it was
    found = _imported_after(
        "from harness_one_plugins.idempotency import SQLiteStore\nfrom harness_one_plugins import SQLiteStore"
    )
    assert "sqlite3" in found


def test_the_first_async_use_imports_asyncio() -> None:
    found = _imported_after(
        "import sys\n"
        "import harness_one.tools as t\n"
        "async def ping() -> str:\n    return 'pong'\n"
        "reg = t.ToolRegistry(standard_plugins=False, autoload=False)\n"
        "reg.add(ping)\n"
        "assert reg.call('ping') == 'pong'\n"
        "from harness_one import _registry\n"
        "assert _registry.asyncio is sys.modules['asyncio']  # the stand-in replaced itself"
    )
    assert "asyncio" in found


def test_lazy_commands_are_listed_with_their_own_help() -> None:
    from harness_one._cli import LAZY_COMMANDS, main

    for name, (_, _, line) in LAZY_COMMANDS.items():
        command = main.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and command.help is not None
        assert " ".join(command.help.split("\n\n")[0].split()) == line


# --------------------------------------------------------------------------- lazy tool packages

PACKAGES = 50


def _module(i: int, extra: str = "") -> str:
    return f"""
from harness_one import defineTool

@defineTool(registry=None)
def tool_{i}(n: int) -> int:
    return n + {i}
{extra}"""


def _ours(prefix: str) -> set[str]:
    return {m for m in sys.modules if m.startswith(prefix)}


def _new_process(prefix: str) -> None:
    """As a new process would start: the packages not imported, the index read from its file."""
    for name in _ours(prefix):
        del sys.modules[name]
    refresh_entry_points()
    reset_tool_index()


def test_named_entry_points_import_only_the_provider(dists: Any, index_dir: Path) -> None:
    for i in range(PACKAGES):
        dists.make(
            f"hx-named-{i:02d}",
            {f"hx_named_{i:02d}": _module(i)},
            {"harness_one.tools": {f"tool_{i}": f"hx_named_{i:02d}:tool_{i}"}},
        )
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.call("tool_30", {"n": 1}) == 31
    assert _ours("hx_named_") == {"hx_named_30"}
    assert len([t for t in reg.names() if t.startswith("tool_")]) == PACKAGES  # a listing loads every package
    assert len(_ours("hx_named_")) == PACKAGES


def test_module_entry_points_are_indexed_then_imported_alone(dists: Any, index_dir: Path) -> None:
    for i in range(PACKAGES):
        dists.make(f"hx-mod-{i:02d}", {f"hx_mod_{i:02d}": _module(i)}, {"harness_one.tools": {"tools": f"hx_mod_{i:02d}"}})
    first = ToolRegistry(discover=True, autoload=False)
    assert first.call("tool_49", {"n": 1}) == 50  # nothing known yet: every module entry point before it loads
    assert len(_ours("hx_mod_")) == PACKAGES
    assert (index_dir / "tool-index.json").is_file()

    _new_process("hx_mod_")
    second = ToolRegistry(discover=True, autoload=False)
    assert second.call("tool_25", {"n": 0}) == 25
    assert _ours("hx_mod_") == {"hx_mod_25"}
    assert second.get("tool_25").source == "hx-mod-25"

    # An editable install changed: its stamp no longer matches, so it is loaded again (and only it).
    source = dists.root / "site-hx-mod-03" / "hx_mod_03.py"
    assert source.is_file()
    source.write_text(_module(3, "\n@defineTool(registry=None)\ndef fresh(n: int) -> int:\n    return -n\n"))
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    _new_process("hx_mod_")
    third = ToolRegistry(discover=True, autoload=False)
    assert third.call("fresh", {"n": 2}) == -2
    assert _ours("hx_mod_") == {"hx_mod_03"}
    assert tool_index().tools(_entry(3)) == {"fresh", "tool_3"}


BUNDLE = """
from harness_one import defineTool

@defineTool(registry=None)
def shout(text: str) -> str:
    return "first"

TOOLS = [shout]
"""


def test_an_attribute_entry_point_named_otherwise_wins_once_indexed(
    dists: Any, index_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # ``bundle = "hx_first:TOOLS"`` provides ``shout`` under another name; a later package names its own.
    dists.make("hx-a-first", {"hx_first": BUNDLE}, {"harness_one.tools": {"bundle": "hx_first:TOOLS"}})
    dists.make(
        "hx-b-second", {"hx_second": _module(0).replace("tool_0", "shout")}, {"harness_one.tools": {"shout": "hx_second:shout"}}
    )
    cold = ToolRegistry(discover=True, autoload=False)
    assert cold.get("shout").source == "hx-b-second"  # an empty index: taken to provide "bundle"
    with caplog.at_level("WARNING", logger="harness_one"):
        listing = ToolRegistry(discover=True, autoload=False)
        listing.names()
    assert listing.get("shout").source == "hx-a-first"
    assert any(getattr(r, "harness_one", {}).get("entry_point") == "bundle" for r in caplog.records)

    _new_process("hx_")
    warm = ToolRegistry(discover=True, autoload=False)
    assert warm.call("shout", {"text": "x"}) == "first"  # as the listing chose: the index knows "bundle"
    assert warm.get("shout").source == "hx-a-first"
    assert _ours("hx_") == {"hx_first"}


def _entry(i: int) -> Any:
    from harness_one._entrypoints import TOOL_GROUP, entry_points

    return next(ep for ep in entry_points(TOOL_GROUP) if ep.distribution == f"hx-mod-{i:02d}")


def test_code_tools_still_win_with_a_warm_index(dists: Any, index_dir: Path) -> None:
    dists.make("hx-warm", {"hx_warm": _module(7)}, {"harness_one.tools": {"tools": "hx_warm"}})
    ToolRegistry(discover=True, autoload=False).load_entry_points()  # warms the index
    _new_process("hx_warm")
    reg = ToolRegistry(discover=True, autoload=False)

    @define_tool(registry=reg)
    def tool_7(n: int) -> int:
        return 0

    assert reg.call("tool_7", {"n": 5}) == 0
    reg.load_entry_points()
    assert reg.call("tool_7", {"n": 5}) == 0
    assert [(c.name, c.kept) for c in reg.discovery.conflicts] == [("tool_7", "code in this process")]


def test_an_unwritable_cache_is_skipped(dists: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("HARNESS_ONE_CACHE_DIR", str(blocker / "below-a-file"))
    reset_tool_index()
    try:
        dists.make("hx-nocache", {"hx_nocache": _module(8)}, {"harness_one.tools": {"tools": "hx_nocache"}})
        assert ToolRegistry(discover=True, autoload=False).call("tool_8", {"n": 0}) == 8
    finally:
        reset_tool_index()


def _index_file(entries: Any) -> str:
    """An index file of the current format (``ToolIndex.VERSION``) holding ``entries``."""
    return json.dumps({"version": ToolIndex.VERSION, "environments": {}, "entries": entries})


@pytest.mark.parametrize(
    "content",
    [
        lambda key: _index_file([1]),
        lambda key: _index_file({key: "x"}),
        lambda key: _index_file({key: {"stamp": None, "tools": 5}}),
        lambda key: json.dumps({"version": ToolIndex.VERSION, "environments": [], "entries": {key: "x"}}),
        lambda key: "[" * 100_000 + "]" * 100_000,
        lambda key: "",
    ],
)
def test_a_malformed_index_is_ignored(
    dists: Any, index_dir: Path, monkeypatch: pytest.MonkeyPatch, content: Callable[[str], str]
) -> None:
    """The index is a cache: a file of another shape is read as empty (calls, listings and doctor worked on none)."""
    dists.make("hx-badidx", {"hx_badidx": _module(9)}, {"harness_one.tools": {"tools": "hx_badidx"}})
    ours = next(ep for ep in entry_points("harness_one.tools") if ep.distribution == "hx-badidx")
    index_dir.mkdir()
    (index_dir / "tool-index.json").write_text(content(ToolIndex.key(ours)))
    reset_tool_index()
    assert ToolRegistry(discover=True, autoload=False).call("tool_9", {"n": 1}) == 10
    assert "tool_9" in ToolRegistry(discover=True, autoload=False).names()
    _new_process("hx_badidx")
    stamp = tool_index()._stamp(ours)  # the right stamp with tools of the wrong type: dropped too
    forged = {ToolIndex.key(ours): {"stamp": stamp, "tools": 5, "env": tool_index()._environment()}}
    (index_dir / "tool-index.json").write_text(_index_file(forged))
    reset_tool_index()
    assert ToolRegistry(discover=True, autoload=False).call("tool_9", {"n": 2}) == 11


def test_a_package_s_data_files_are_part_of_its_stamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tools built from a data file (an API spec): the index entry goes stale when that file changes."""
    from harness_one._discovery import _source_stamp

    package = tmp_path / "hx_spec_tools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "spec.json").write_text('{"tools": ["a"]}')
    monkeypatch.syspath_prepend(str(tmp_path))
    before = _source_stamp("hx_spec_tools")
    (package / "spec.json").write_text('{"tools": ["a", "translate"]}')
    assert before is not None and _source_stamp("hx_spec_tools") != before


def test_the_cache_dir_expands_the_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from harness_one._discovery import _index_path

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HARNESS_ONE_CACHE_DIR", "~/hx-cache")
    assert _index_path() == tmp_path / "hx-cache" / "tool-index.json"
    monkeypatch.setenv("HARNESS_ONE_CACHE_DIR", "  ")
    assert _index_path() is None


# --------------------------------------------------------------------------- registration at scale


def _plain(n: int) -> int:
    return n


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_suggestions_look_at_a_few_names_in_a_large_catalogue() -> None:
    index = NameIndex()
    for i in range(5000):
        index.add(f"search_item_{i}")
    assert index.suggest("search_itme_4321")[0] == "search_item_4321"
    assert index.compared <= 64
    index.remove("search_item_4321")
    assert "search_item_4321" not in index.suggest("search_itme_4321")
    assert index.suggest("zzzz") == [] and index.compared == 0
    assert len(index) == 4999


def test_small_catalogues_compare_every_name() -> None:
    index = NameIndex()
    for name in ("web_search", "web_fetch", "calculate"):
        index.add(name)
    assert index.suggest("web_serch") == ["web_search", "web_fetch"]
    assert index.compared == 3


@pytest.mark.parametrize("size", [3, 5000], ids=["every name", "the index"])
def test_suggestions_ignore_letter_case(size: int) -> None:
    """``ECHO`` and ``GET_WEATHER`` found no suggestion (difflib compares case-sensitively); ``Echo`` did."""
    index = NameIndex()
    for name in ["echo", "get_weather", "Get_Weather", *(f"search_item_{i}" for i in range(size - 3))][:size]:
        index.add(name)
    assert index.suggest("ECHO") == ["echo"]
    assert index.suggest("GET_WEATHER") == ["get_weather", "Get_Weather"]  # both, in catalogue order
    assert index.suggest("get_wether", n=1) == ["get_weather"]


def test_registry_suggests_from_the_index(bare: ToolRegistry) -> None:
    for i in range(2500):
        bare.add(Tool.create(_plain, name=f"lookup_{i}", parameters=SCHEMA))
    with pytest.raises(ToolNotFound) as err:
        bare.call("lokup_1234", {"n": 1})
    assert err.value.suggestions[0] == "lookup_1234"
    assert bare._index.compared <= 64
