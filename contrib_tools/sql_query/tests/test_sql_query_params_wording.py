"""How a wrong argument is worded with the validation plugin and without it (the tool's own check): ``params`` that
are no array are refused on ``$.params`` by both, each naming the types expected (the plugin reads the schema's
``anyOf``, the tool says ``array or null``); a query or a parameter of the wrong type is worded alike by both."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import harness_one_sql_query as mod
import pytest

from harness_one import ArgumentProblem, ManualClock, ToolArgumentError, ToolRegistry

_WITH = {"autoload": False, "block": ["rate_limit"], "clock": ManualClock()}  # the validation plugin checks the arguments first
_WITHOUT = {"autoload": False, "standard_plugins": False}  # the tool's own checks


def _problems(tool: Any, options: dict[str, Any], arguments: dict[str, Any]) -> list[ArgumentProblem]:
    reg = ToolRegistry(**options)
    reg.add(tool)
    with pytest.raises(ToolArgumentError) as err:
        reg.call("sql_query", arguments)
    return list(err.value.problems)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.db"
    sqlite3.connect(path).close()
    return path


@pytest.mark.parametrize(("value", "got"), [("abc", 'string "abc"'), ({"a": 1}, 'object {"a": 1}')])
def test_params_that_are_no_array_name_the_field_and_the_types_expected_on_both_sides(db: Path, value: Any, got: str) -> None:
    arguments = {"sql": "SELECT ?", "params": value}
    [plugin] = _problems(mod.make_sql_query(db), _WITH, arguments)
    [own] = _problems(mod.make_sql_query(db), _WITHOUT, arguments)
    assert plugin.path == own.path == "$.params"
    assert (plugin.keyword, plugin.message) == (
        "anyOf",
        f"must match at least one of the alternatives; option 1: expected array, got {got}; option 2: expected null, got {got}",
    )
    assert (own.keyword, own.message) == ("type", f"expected array or null, got {got}")


def test_a_query_and_a_parameter_of_the_wrong_type_are_worded_alike_on_both_sides(db: Path) -> None:
    for arguments in ({"sql": 5}, {"sql": "SELECT ?, ?", "params": [True, {}]}):
        assert _problems(mod.make_sql_query(db), _WITH, arguments) == _problems(mod.make_sql_query(db), _WITHOUT, arguments)
