"""Review 31, sql_query: arguments of the wrong type are a ToolArgumentError worded as the validation plugin words it,
also without that plugin (``sql`` 5 was a TypeError, ``params`` "abc" bound its characters one by one); a limit of the
wrong type or below its least is a ValueError naming it (``max_rows=-1`` meant no row limit at all)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import harness_one_sql_query as mod
import pytest

from harness_one import ArgumentProblem, ManualClock, ToolArgumentError, ToolRegistry

_PARAM = "string or integer or number or null"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.db"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (a); INSERT INTO t VALUES (1), (2), (3);")
    conn.close()
    return path


def _problems(db: Path, arguments: dict[str, Any]) -> list[ArgumentProblem]:
    reg = ToolRegistry(standard_plugins=False, autoload=False)  # no validation plugin: the tool's own checks
    reg.add(mod.make_sql_query(db))
    with pytest.raises(ToolArgumentError) as err:
        reg.call("sql_query", arguments)
    return list(err.value.problems)


def test_a_query_that_is_not_text_is_refused_as_the_validation_plugin_words_it(db: Path) -> None:
    expected = [ArgumentProblem("$.sql", "expected string, got integer 5", "type", "string", "5")]
    assert _problems(db, {"sql": 5}) == expected  # was ToolExecutionError: TypeError 'int' object is not subscriptable
    validated = ToolRegistry(autoload=False, clock=ManualClock())  # (the listing's time budget never runs out)
    validated.add(mod.make_sql_query(db))
    with pytest.raises(ToolArgumentError) as err:
        validated.call("sql_query", {"sql": 5})
    assert list(err.value.problems) == expected
    assert _problems(db, {"sql": None}) == [ArgumentProblem("$.sql", "expected string, got null", "type", "string", "null")]


def test_params_that_are_not_an_array_are_refused_not_bound_character_by_character(db: Path) -> None:
    assert _problems(db, {"sql": "SELECT ?, ?, ?", "params": "abc"}) == [  # was bound as "a", "b", "c"
        ArgumentProblem("$.params", 'expected array or null, got string "abc"', "type", "array or null", '"abc"')
    ]
    assert _problems(db, {"sql": "SELECT ?", "params": {"a": 1}})[0].message == 'expected array or null, got object {"a": 1}'


def test_each_parameter_of_the_wrong_type_is_named_by_its_index(db: Path) -> None:
    assert _problems(db, {"sql": "SELECT ?, ?, ?, ?, ?", "params": [True, 1, [1], None, {}]}) == [
        ArgumentProblem("$.params[0]", f"expected {_PARAM}, got boolean true", "type", _PARAM, "true"),
        ArgumentProblem("$.params[2]", f"expected {_PARAM}, got array [1]", "type", _PARAM, "[1]"),
        ArgumentProblem("$.params[4]", f"expected {_PARAM}, got object {{}}", "type", _PARAM, "{}"),
    ]
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(mod.make_sql_query(db))
    assert reg.call("sql_query", {"sql": "SELECT ?, ?, ?, ?", "params": ["x", 1, 2.5, None]})["rows"] == [["x", 1, 2.5, None]]


def test_run_query_checks_the_types_too(db: Path) -> None:
    with pytest.raises(ToolArgumentError) as err:
        mod.run_query(db, 5)  # type: ignore[arg-type]
    assert [p.path for p in err.value.problems] == ["$.sql"]


@pytest.mark.parametrize(
    ("limit", "value", "shown"),
    [
        ("max_rows", -1, "-1"),
        ("max_rows", 0, "0"),
        ("max_rows", 2.5, "2.5"),
        ("max_rows", "10", "'10'"),
        ("max_rows", True, "True"),
        ("max_bytes", 0, "0"),
        ("max_columns", None, "None"),
        ("max_memory", -5, "-5"),
        ("max_memory", 1.5, "1.5"),
    ],
)
def test_a_limit_that_is_not_a_positive_integer_is_refused_when_the_tool_is_built(
    db: Path, limit: str, value: object, shown: str
) -> None:
    kwargs: dict[str, Any] = {limit: value}
    with pytest.raises(ValueError, match=rf"^{limit} must be an integer of at least 1, not {shown}$"):
        mod.make_sql_query(db, **kwargs)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0"),
        (-1.0, "-1.0"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        ("5", "'5'"),
        pytest.param(10**400, "an integer of 1,329 bits", id="past-floats"),
    ],
)
def test_a_time_limit_that_is_not_a_positive_finite_number_is_refused(db: Path, value: object, shown: str) -> None:
    with pytest.raises(ValueError, match=rf"^time_limit must be a positive finite number of seconds, not {shown}$"):
        mod.make_sql_query(db, time_limit=value)  # type: ignore[arg-type]


def test_run_query_refuses_a_bad_limit_too(db: Path) -> None:
    with pytest.raises(ValueError, match=r"^max_rows must be an integer of at least 1, not -1$"):
        mod.run_query(db, "SELECT a FROM t", max_rows=-1)  # returned every row
    with pytest.raises(ValueError, match=r"^max_chars must be an integer of at least 1, not '10'$"):
        mod.run_query(db, "SELECT a FROM t", max_chars="10")  # type: ignore[arg-type]
    result = mod.run_query(db, "SELECT a FROM t", max_rows=1)
    assert (result["rows"], result["truncated"]) == ([[1]], True)
