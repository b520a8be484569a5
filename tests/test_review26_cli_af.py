"""Review 26 of the command line's tools loading and of the Agent Framework adapter: a file of the current
directory does not replace a module a tools entry imports, two tools entries giving one tool name are a
name conflict (``doctor`` lists it, exit 1), and a direct call of an Agent Framework tool with a ``ctx``
parameter hands ``ctx`` to the tool."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_framework import FunctionInvocationContext
from click.testing import CliRunner

from harness_one import ToolRegistry, defineTool
from harness_one._cli import main
from harness_one.integrations.agent_framework import to_agent_framework

SCRIPT = Path(sys.executable).with_name("harness-one")

#: A file of the untrusted current directory named after a standard-library module no start-up imports.
HIJACK = """
import pathlib
pathlib.Path(__file__).with_name("hijacked").write_text("ran")
PW = 666.0
"""

#: The user's own tools file, which imports that standard-library module.
OWN_TOOLS = """
import tabnanny
from harness_one import define_tool


@define_tool(registry=None)
def hue(r: float) -> str:
    "Which tabnanny it got."
    return "stdlib" if hasattr(tabnanny, "check") and not hasattr(tabnanny, "PW") else "hijacked"
"""


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_ONE_", "PYTHON"))}
    env.update(HARNESS_ONE_STATE="memory:", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def untrusted(tmp_path: Path) -> Path:
    where = tmp_path / "untrusted"
    where.mkdir()
    (where / "tabnanny.py").write_text(HIJACK, encoding="utf-8")
    return where


@pytest.fixture
def own(tmp_path: Path) -> Path:
    where = tmp_path / "mine"
    where.mkdir()
    (where / "mytools.py").write_text(OWN_TOOLS, encoding="utf-8")
    (where / "own.toml").write_text('tools = ["mytools.py"]\n', encoding="utf-8")
    return where


@pytest.mark.parametrize("how", ["config", "tools"])
def test_a_file_of_the_current_directory_does_not_replace_a_module_a_tools_file_imports(
    untrusted: Path, own: Path, how: str
) -> None:
    given = ["--config", str(own / "own.toml")] if how == "config" else ["--tools", str(own / "mytools.py")]
    done = run_cli(untrusted, *given, "call", "hue", "--args", '{"r": 1}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "stdlib"
    assert not (untrusted / "hijacked").exists()


def test_a_module_entry_finds_its_package_in_the_current_directory_but_not_the_standard_library(
    untrusted: Path,
) -> None:
    package = untrusted / "review26pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "tools.py").write_text(OWN_TOOLS, encoding="utf-8")
    done = run_cli(untrusted, "--tools", "review26pkg.tools", "call", "hue", "--args", '{"r": 1}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "stdlib"
    assert not (untrusted / "hijacked").exists()


def test_a_tools_file_imports_a_module_of_its_own_directory(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "review26_helper.py").write_text("WORD = 'sibling'\n", encoding="utf-8")
    (sub / "tools.py").write_text(
        "import review26_helper\nfrom harness_one import define_tool\n\n\n"
        "@define_tool(registry=None)\ndef word() -> str:\n    'The word of the helper.'\n    return review26_helper.WORD\n",
        encoding="utf-8",
    )
    done = run_cli(tmp_path, "--tools", "sub/tools.py", "call", "word")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "sibling"


def test_a_tools_file_in_a_subdirectory_imports_the_projects_package_from_the_current_directory(tmp_path: Path) -> None:
    """The current directory is last on ``sys.path``, not gone: ``tools/mine.py`` imports ``./review26proj``."""
    (tmp_path / "review26proj").mkdir()
    (tmp_path / "review26proj" / "__init__.py").write_text("WORD = 'project'\n", encoding="utf-8")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "mine.py").write_text(
        "from review26proj import WORD\nfrom harness_one import define_tool\n\n\n"
        "@define_tool(registry=None)\ndef word() -> str:\n    'The word of the project.'\n    return WORD\n",
        encoding="utf-8",
    )
    done = run_cli(tmp_path, "--tools", "tools/mine.py", "call", "word")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "project"


def test_a_process_mode_worker_has_the_current_directory_last_as_its_parent_had(untrusted: Path) -> None:
    """A worker put the current directory first: its ``json.py`` stood in for the standard library's in the worker."""
    (untrusted / "json.py").write_text("raise SystemExit('the current directory json ran')\n", encoding="utf-8")
    package = untrusted / "review26wpkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "tools.py").write_text(
        "from harness_one import define_tool\n\n\n"
        "@define_tool(registry=None, timeout=30, timeout_mode='process')\ndef where() -> str:\n"
        "    'Which json the worker has.'\n    import json, os\n    return f'{os.getpid()} {json.__file__}'\n",
        encoding="utf-8",
    )
    done = run_cli(untrusted, "--tools", "review26wpkg.tools", "call", "where")
    assert done.returncode == 0, done.stderr
    found = Path(json.loads(done.stdout)["result"].split(" ", 1)[1])
    assert (found.parent.name, found.name) == ("json", "__init__.py")  # the standard library's, in the worker too


def test_a_process_mode_worker_of_a_tools_file_finds_the_projects_package(tmp_path: Path) -> None:
    """A tools file importing ``./review26wproj``: its workers get the current directory (last) too."""
    (tmp_path / "review26wproj").mkdir()
    (tmp_path / "review26wproj" / "__init__.py").write_text("ANSWER = 42\n", encoding="utf-8")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "mine.py").write_text(
        "from review26wproj import ANSWER\nfrom harness_one import define_tool\n\n\n"
        "@define_tool(registry=None, timeout=30, timeout_mode='process')\ndef proc() -> int:\n"
        "    'The answer, from a worker.'\n    return ANSWER\n",
        encoding="utf-8",
    )
    done = run_cli(tmp_path, "--tools", "tools/mine.py", "call", "proc")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == 42


def test_a_tools_file_that_blocks_an_import_in_sys_modules_still_loads(tmp_path: Path) -> None:
    """``sys.modules[name] = None`` (importlib's way to block an import) broke the check of the modules it imported."""
    (tmp_path / "t.py").write_text(
        "import sys\nsys.modules['review26_blocked'] = None\nfrom harness_one import define_tool\n\n\n"
        "@define_tool(registry=None)\ndef hi() -> str:\n    'Hi.'\n    return 'hi'\n",
        encoding="utf-8",
    )
    done = run_cli(tmp_path, "--tools", "t.py", "call", "hi")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "hi"


def test_a_local_file_named_as_a_built_in_module_gets_the_installed_hint(tmp_path: Path) -> None:
    """A built-in module's spec origin is ``built-in``, no path: it was taken for a module of the current directory."""
    (tmp_path / "time.py").write_text("", encoding="utf-8")
    done = run_cli(tmp_path, "--tools", "time.tools", "list")
    assert done.returncode != 0 and "(the current directory's time is passed over: the installed time comes first;" in (
        done.stderr
    )


def test_a_module_that_puts_its_own_directory_first_keeps_it_there(tmp_path: Path) -> None:
    (tmp_path / "review26self.py").write_text(
        "import os, sys\nHERE = os.path.dirname(os.path.abspath(__file__))\nsys.path.insert(0, HERE)\n"
        "from harness_one import define_tool\n\n\n"
        "@define_tool(registry=None)\ndef places() -> list:\n    'Where its directory is on sys.path.'\n"
        "    return [i for i, p in enumerate(sys.path) if p == HERE]\n",
        encoding="utf-8",
    )
    done = run_cli(tmp_path, "--tools", "review26self", "call", "places")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == [0]  # the entry's own is kept; the one added for the load is gone


def test_a_local_package_an_installed_one_passes_over_is_named_in_the_error(tmp_path: Path) -> None:
    (tmp_path / "click").mkdir()  # an installed package's name
    (tmp_path / "click" / "tools.py").write_text("", encoding="utf-8")
    done = run_cli(tmp_path, "--tools", "click.tools", "list")
    assert done.returncode != 0
    assert "No module named 'click.tools' (the current directory's click is passed over: the installed click comes first;" in (
        done.stderr
    )


def test_an_entry_named_twice_is_loaded_once_and_is_no_conflict(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(
        "from harness_one import define_tool\nimport pathlib\n"
        "with open(pathlib.Path(__file__).with_name('loads'), 'a') as f:\n    f.write('x')\n\n\n"
        "@define_tool(registry=None)\ndef lookup() -> str:\n    'A lookup.'\n    return 'ok'\n",
        encoding="utf-8",
    )
    (tmp_path / "h.toml").write_text(f'tools = ["{tmp_path / "t.py"}"]\n', encoding="utf-8")
    done = run_cli(tmp_path, "--config", str(tmp_path / "h.toml"), "--tools", "t.py", "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Name conflicts: none" in done.stdout and (tmp_path / "loads").read_text() == "x"


def test_an_entry_named_again_in_tools_overrides_the_files_later_entry(tmp_path: Path) -> None:
    """An entry named twice is loaded once, where it comes last: ``--tools a.py`` still wins over the file's ``b.py``."""
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(
            f"from harness_one import define_tool\n\n\n@define_tool(registry=None)\ndef lookup() -> str:\n"
            f"    'A lookup.'\n    return 'from {name}.py'\n",
            encoding="utf-8",
        )
    (tmp_path / "h.toml").write_text('tools = ["a.py", "b.py"]\n', encoding="utf-8")
    done = run_cli(tmp_path, "--config", str(tmp_path / "h.toml"), "--tools", "a.py", "call", "lookup")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "from a.py"


def test_a_missing_module_of_the_current_directorys_own_package_gets_no_installed_package_hint(tmp_path: Path) -> None:
    (tmp_path / "review26local").mkdir()
    (tmp_path / "review26local" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "review26local" / "tools.py").write_text("import review26local.helpr\n", encoding="utf-8")
    done = run_cli(tmp_path, "--tools", "review26local.tools", "list")
    assert done.returncode != 0 and "No module named 'review26local.helpr'" in done.stderr
    assert "passed over" not in done.stderr


DUP = """
from harness_one import defineTool


@defineTool
def review26_lookup(q: str) -> str:
    "{word} lookup"
    return "{word}:" + q
"""


@pytest.fixture
def dups(runner: CliRunner, tmp_path: Path, fresh_default: ToolRegistry) -> CliRunner:
    (tmp_path / "dupA.py").write_text(DUP.format(word="A"), encoding="utf-8")
    (tmp_path / "dupB.py").write_text(DUP.format(word="B"), encoding="utf-8")
    return runner


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(main, ["--log-format", "json", *args], catch_exceptions=False, prog_name="harness-one")


def test_two_tools_entries_of_one_tool_name_are_a_conflict_doctor_reports(dups: CliRunner) -> None:
    result = invoke(dups, "--tools", "dupA.py", "--tools", "dupB.py", "doctor")
    assert result.exit_code == 1, result.output
    assert "Name conflicts: 1\n  tool 'review26_lookup': kept local:dupB.py, skipped local:dupA.py\n" in result.stdout


def test_the_later_tools_entry_wins_and_the_warning_names_both_files(dups: CliRunner) -> None:
    result = invoke(dups, "--tools", "dupA.py", "--tools", "dupB.py", "call", "review26_lookup", "--args", '{"q": "x"}')
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["result"] == "B:x"
    warnings = [json.loads(line) for line in result.stderr.splitlines() if "tool name conflict" in line]
    assert [(w["tool"], w["kept"], w["skipped"]) for w in warnings] == [("review26_lookup", "local:dupB.py", "local:dupA.py")]


def test_one_tools_entry_is_no_conflict(dups: CliRunner) -> None:
    result = invoke(dups, "--tools", "dupA.py", "doctor")
    assert result.exit_code == 0, result.output
    assert "Name conflicts: none" in result.stdout


@pytest.fixture
def greet() -> Any:
    registry = ToolRegistry(autoload=False)

    @defineTool(registry=registry)
    def greet(ctx: str, name: str = "x") -> str:
        """Greets."""
        return f"{ctx}:{name}"

    return to_agent_framework("greet", registry)


def test_a_direct_call_hands_a_ctx_argument_to_the_tool(greet: Any) -> None:
    assert asyncio.run(greet(ctx="hello")) == "hello:x"
    assert asyncio.run(greet(name="bob", ctx="hi")) == "hi:bob"
    context = FunctionInvocationContext(function=greet, arguments={})
    assert asyncio.run(greet(context, ctx="hello", name="y")) == "hello:y"


def test_a_direct_call_with_a_positional_argument_that_is_no_context_is_refused(greet: Any) -> None:
    with pytest.raises(TypeError) as caught:
        asyncio.run(greet("hello"))
    assert str(caught.value) == (
        "tool 'greet' takes its arguments by keyword; the one positional argument it takes "
        "is a FunctionInvocationContext, not str"
    )


def test_the_framework_still_injects_its_invocation_context(greet: Any) -> None:
    assert greet._context_parameter_name == "ctx"
    result = asyncio.run(greet.invoke(arguments={"ctx": "hello"}, tool_call_id="c1"))
    assert result[0].text == "hello:x"
