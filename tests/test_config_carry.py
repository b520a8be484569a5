"""Configuration and loading: ``--tools`` modules of the current directory from the script, relative
``tools`` paths of the configuration file, refusals and ``doctor`` naming the allow-list, and the
example configuration of docs/configuration.md."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one import ToolRegistry
from harness_one._cli import main
from harness_one._config import load_settings

ROOT = Path(__file__).resolve().parents[1]

TOOLS = """\
from harness_one import defineTool


@defineTool(registry=None)
def hello_carry() -> str:
    \"\"\"Say hi.\"\"\"
    return "hi"
"""

POLICIED = """\
from harness_one import defineTool


@defineTool(registry=None, retry={"attempts": 3}, max_concurrency=1, circuit_breaker=True)
def capped_carry() -> str:
    \"\"\"Capped.\"\"\"
    return "ran"


@defineTool(registry=None, options={"requires_approval": True, "max_calls": 0})
def guarded_carry() -> str:
    \"\"\"Guarded.\"\"\"
    return "ran"
"""


@pytest.fixture(autouse=True)
def _logging_reset() -> Any:
    import structlog

    yield
    structlog.reset_defaults()  # the CLI configures structlog; later tests expect a library default


@pytest.fixture
def script_path(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sys.path`` as the ``harness-one`` script has it: without the current directory."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])


def test_a_tools_module_of_the_current_directory_loads_from_the_script(
    runner: CliRunner, tmp_path: Path, script_path: None
) -> None:
    (tmp_path / "carry_pkg").mkdir()
    (tmp_path / "carry_pkg" / "__init__.py").write_text("")
    (tmp_path / "carry_pkg" / "tools.py").write_text(TOOLS)
    try:
        done = runner.invoke(main, ["--tools", "carry_pkg.tools", "call", "hello_carry", "--args", "{}"])
    finally:
        for name in [n for n in sys.modules if n == "carry_pkg" or n.startswith("carry_pkg.")]:
            del sys.modules[name]
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["result"] == "hi"
    assert str(tmp_path) not in sys.path  # only while it loads: a local file shadows nothing imported later


def test_a_tools_file_imports_a_module_beside_it_in_the_current_directory(
    runner: CliRunner, tmp_path: Path, script_path: None
) -> None:
    (tmp_path / "carry_helper.py").write_text("GREETING = 'hello'\n")
    (tmp_path / "carry_tools.py").write_text(
        TOOLS.replace("import defineTool\n", "import defineTool\nfrom carry_helper import GREETING\n").replace(
            'return "hi"', "return GREETING"
        )
    )
    try:
        done = runner.invoke(main, ["--tools", "carry_tools.py", "call", "hello_carry", "--args", "{}"])
    finally:
        sys.modules.pop("carry_helper", None)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["result"] == "hello"


def test_relative_tools_paths_of_the_file_start_at_its_directory(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "conf"
    (conf / "examples").mkdir(parents=True)
    (conf / "examples" / "mine.py").write_text(TOOLS)
    config = conf / "harness-one.toml"
    config.write_text('tools = ["examples/mine.py", "some.module", "/abs/x.py"]\n')
    monkeypatch.setenv("HARNESS_ONE_TOOLS", "env/rel.py")
    settings = load_settings(str(config))
    assert settings.tools == [str(conf / "examples" / "mine.py"), "some.module", "/abs/x.py", "env/rel.py"]
    monkeypatch.delenv("HARNESS_ONE_TOOLS")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    config.write_text('tools = ["examples/mine.py"]\n')
    done = runner.invoke(main, ["--config", os.path.relpath(config), "list", "--json"])
    assert done.exit_code == 0, done.output
    assert "hello_carry" in [t["name"] for t in json.loads(done.stdout)]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_refusals_name_the_allow_list(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "environment":
        monkeypatch.setenv("HARNESS_ONE_PLUGINS", "validation")
        reg = ToolRegistry(autoload=False)
    else:
        reg = ToolRegistry(autoload=False, allow=["validation"])
    reg.add(lambda: "sent", name="wire", options={"requires_approval": True})
    reg.add(lambda: 4, name="roll")
    out = reg.try_call("wire", {})
    assert out.error is not None and out.error.message == (
        "Tool 'wire' cannot be called: its 'requires_approval' option needs the 'approval' plugin, which is not "
        "active in this registry (not in the allow-list, allow or HARNESS_ONE_PLUGINS)."
    )
    keyed = reg.try_call("roll", {}, idempotency_key="once-1")
    assert keyed.error is not None and keyed.error.message == (
        "Tool 'roll' cannot be called with an idempotency key: no plugin in this registry honours one (the "
        "'idempotency' plugin is not in the allow-list, allow or HARNESS_ONE_PLUGINS), so the key could run twice."
    )


def test_a_plugin_the_allow_list_keeps_but_a_block_removes_is_not_blamed_on_the_allow_list() -> None:
    reg = ToolRegistry(autoload=False, allow=["validation", "idempotency"], block=["idempotency"])
    reg.add(lambda: 4, name="roll")
    keyed = reg.try_call("roll", {}, idempotency_key="once-1")
    assert keyed.error is not None and "(the 'idempotency' plugin is blocked, removed or failed to load)" in keyed.error.message


def test_doctor_reports_policies_no_active_plugin_enforces(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "policied.py").write_text(POLICIED)
    (tmp_path / "harness-one.toml").write_text('[plugins]\nallow = ["validation"]\n')
    done = runner.invoke(main, ["--tools", "policied.py", "doctor"])
    assert done.exit_code == 1, done.output
    allow = "not in the allow-list, allow or HARNESS_ONE_PLUGINS"
    for line in [
        f"capped_carry: retry needs the 'retry' plugin, which is not active ({allow})",
        f"capped_carry: max_concurrency needs the 'concurrency' plugin, which is not active ({allow})",
        f"capped_carry: circuit_breaker needs the 'circuit_breaker' plugin, which is not active ({allow})",
        f"guarded_carry: requires_approval needs the 'approval' plugin, which is not active ({allow})",
        f"guarded_carry: max_calls needs the 'budget' plugin, which is not active ({allow})",  # max_calls=0 too
    ]:
        assert line in done.output
    (tmp_path / "harness-one.toml").unlink()
    report = json.loads(runner.invoke(main, ["--tools", "policied.py", "doctor", "--json"]).stdout)
    assert report["unenforced"] == []  # every standard plugin active
    done = runner.invoke(main, ["--tools", "policied.py", "doctor", "--json"], env={"HARNESS_ONE_BLOCK_PLUGINS": "retry"})
    assert json.loads(done.stdout)["unenforced"] == [
        "capped_carry: retry needs the 'retry' plugin, which is not active (blocked, removed or failed to load)"
    ]
    assert done.exit_code == 1


def _example() -> str:
    text = (ROOT / "docs" / "configuration.md").read_text()
    found = re.search(r"## The file\n\n```toml\n(.*?)```", text, re.S)
    assert found is not None
    return found.group(1)


def test_the_example_configuration_keeps_the_plugins_it_configures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Options for a plugin the example's own allow- or block-list keeps out would be ignored."""
    monkeypatch.delenv("HARNESS_ONE_PLUGINS", raising=False)
    monkeypatch.delenv("HARNESS_ONE_BLOCK_PLUGINS", raising=False)
    config = tmp_path / "harness-one.toml"
    config.write_text(_example())
    settings = load_settings(str(config))
    reg = ToolRegistry(block=settings.block, allow=settings.allow, autoload=False, state="memory:")
    kept_out = [name for name in settings.plugin_options if name not in reg.plugins]
    assert kept_out == [], f"the example configures plugins it keeps out: {kept_out}"
