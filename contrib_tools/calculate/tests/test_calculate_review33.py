"""Review 33, calculate: a non-finite result (``1e999`` is inf, ``inf - inf`` NaN) is refused on ``$.expression`` by the
tool itself, so every entry point agrees (MCP refused it against the output schema as a fault of the tool, while
``harness-one call`` printed "NaN" as ok); an infinite intermediate that ends finite is kept."""

from __future__ import annotations

import json
import math
from pathlib import Path

import harness_one_calculate as mod
import pytest
from click.testing import CliRunner

from harness_one import ToolArgumentError, ToolRegistry
from harness_one._cli import EXIT_CODES, main

_SAID = "the result is not a finite number (infinity or NaN), which JSON cannot carry"


@pytest.mark.parametrize(
    ("expression", "shown"),
    [("1e999", "inf"), ("-1e999", "-inf"), ("inf", "inf"), ("1e308 * 10", "inf"), ("inf - inf", "nan"), ("0 * inf", "nan")],
)
@pytest.mark.parametrize("validation", [False, True])
def test_a_result_that_is_not_finite_is_refused(expression: str, shown: str, validation: bool) -> None:
    reg = ToolRegistry(autoload=False) if validation else ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(mod.calculate)
    outcome = reg.try_call("calculate", {"expression": expression})
    assert isinstance(outcome.error, ToolArgumentError), outcome
    [problem] = outcome.error.problems
    assert problem.path == "$.expression" and problem.message.startswith(_SAID) and f"it is {shown} " in problem.message


@pytest.mark.parametrize(
    ("expression", "value"), [("1 / 1e999", 0.0), ("1 / (10**999) ** inf", 0.0), ("-1 / inf", -0.0), ("atan(inf)", math.pi / 2)]
)
def test_an_infinite_intermediate_that_ends_finite_is_kept(expression: str, value: float) -> None:
    result = mod.evaluate(expression)
    assert result == value and math.copysign(1, result) == math.copysign(1, value)
    json.dumps(result, allow_nan=False)  # what JSON (MCP's structured content) carries


def test_the_command_line_refuses_it_as_an_argument_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ONE_STATE", str(tmp_path / "state.sqlite3"))
    monkeypatch.delenv("HARNESS_ONE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["call", "calculate", "--args", '{"expression": "inf - inf"}'])
    assert result.exit_code == EXIT_CODES["invalid_arguments"], result.output  # was 0, printing "NaN" as the result
    answer = json.loads(result.stdout)
    assert not answer["ok"] and answer["error"]["type"] == "ToolArgumentError" and _SAID in answer["error"]["message"]
