from __future__ import annotations

import sqlite3
from pathlib import Path

import harness_one_sql_query as mod
import pytest

from harness_one import ToolArgumentError, ToolRegistry, ToolTimeout


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL);"
        "INSERT INTO items (name, price) VALUES ('tea', 3.5), ('coffee', 4.0), ('cake', 5.25);"
        "PRAGMA user_version = 7;"
    )
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def reg(db: Path) -> ToolRegistry:
    registry = ToolRegistry(autoload=False)
    registry.add(mod.make_sql_query(db, max_rows=2, time_limit=0.5))
    return registry


def test_select(reg: ToolRegistry) -> None:
    out = reg.call("sql_query", {"sql": "SELECT name, price FROM items WHERE price > ? ORDER BY price", "params": [3.6]})
    assert out == {"columns": ["name", "price"], "rows": [["coffee", 4.0], ["cake", 5.25]], "row_count": 2, "truncated": False}
    many = reg.call("sql_query", {"sql": "SELECT id FROM items ORDER BY id"})
    assert many["rows"] == [[1], [2]] and many["truncated"] is True
    tables = reg.call("sql_query", {"sql": "SELECT name FROM sqlite_master WHERE type = 'table'"})
    assert tables["rows"] == [["items"]]
    info = reg.call("sql_query", {"sql": "PRAGMA table_info(items)"})
    assert [row[1] for row in info["rows"]] == ["id", "name"]


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("INSERT INTO items (name, price) VALUES ('x', 1)", "insert items"),
        ("UPDATE items SET price = 0", "update items"),
        ("DELETE FROM items", "delete items"),
        ("DROP TABLE items", "change the database schema"),
        ("CREATE TABLE evil (x)", "change the database schema"),
        ("ATTACH DATABASE ':memory:' AS other", "attach"),
        ("PRAGMA user_version = 1", "pragma user_version"),
        ("PRAGMA journal_mode = DELETE", "pragma journal_mode"),
        ("SELECT 1; DROP TABLE items", "one statement"),
    ],
)
def test_cannot_write_attach_or_change_pragmas(reg: ToolRegistry, db: Path, sql: str, fragment: str) -> None:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("sql_query", {"sql": sql})
    assert fragment in str(err.value).lower(), str(err.value)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM items").fetchone() == (3,)
    assert conn.execute("PRAGMA user_version").fetchone() == (7,)
    conn.close()


def test_time_limit(reg: ToolRegistry) -> None:
    slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    with pytest.raises(ToolTimeout):
        reg.call("sql_query", {"sql": slow})


def test_env_configured_default(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(mod.sql_query)
    monkeypatch.setenv(mod.DB_ENV, str(db))
    assert reg.call("sql_query", {"sql": "SELECT count(*) AS n FROM items"})["rows"] == [[3]]
    monkeypatch.delenv(mod.DB_ENV)
    assert "HARNESS_ONE_SQL_DB" in reg.try_call("sql_query", {"sql": "SELECT 1"}).for_model()
    tool = reg.get("sql_query")
    assert tool.idempotent and tool.read_only
