from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness_one_sql_query as mod
import pytest

from harness_one import (
    CallResult,
    ManualClock,
    RetryableError,
    ToolArgumentError,
    ToolError,
    ToolRegistry,
    ToolTimeout,
    rendered_length,
)


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
    assert many["rows"] == [[1], [2]] and many["truncated"] is True and many["note"] == "stopped at the row limit (2 rows)"
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
        ("SELECT fts3_tokenizer('simple') AS p", "call fts3_tokenizer()"),  # a pointer into the library
        ("SELECT FTS3_TOKENIZER('simple', x'4141414141414141') AS p", "call fts3_tokenizer()"),  # one to call
        ("SELECT load_extension('/tmp/x.so')", "call load_extension()"),
        ("PRAGMA writable_schema = 1", "pragma writable_schema"),
        ("PRAGMA temp_store = FILE", "pragma temp_store"),  # the tool's own setting: sorts in memory, within max_memory
        ("SELECT * FROM pragma_temp_store", "pragma temp_store"),
        ("UPDATE sqlite_master SET sql = ''", "may not be modified"),  # the schema table's bookkeeping is allowed, not this
        ("VACUUM INTO 'copy.sqlite3'", "attach"),
        ("INSERT INTO items (name) SELECT value FROM json_each('[1]')", "insert items"),
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


class SteppingClock(ManualClock):
    """Moves one second every time it is read, so a deadline passes after a few progress checks."""

    def now(self) -> float:
        self.advance(1.0)
        return super().now()


ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "


def test_time_limit(db: Path) -> None:
    with pytest.raises(ToolTimeout, match="timed out after 5 s"):
        mod.run_query(db, ENDLESS + "SELECT count(*) FROM n", clock=SteppingClock())


def test_time_limit_holds_while_rows_are_fetched(db: Path) -> None:
    with pytest.raises(ToolTimeout):  # every row comes at once, but there is no end to them
        mod.run_query(db, ENDLESS + "SELECT i FROM n", max_rows=10**9, max_bytes=10**12, clock=SteppingClock())


def read(value: Any) -> str:
    """``value`` as the model reads it."""
    return CallResult(True, value, None, "", "", 0.0, 1).for_model()


def test_character_limit_while_fetching(db: Path) -> None:
    out = mod.run_query(db, ENDLESS + "SELECT i, printf('%300s', 'x') FROM n LIMIT 50", max_chars=1300)
    assert [row[0] for row in out["rows"]] == [1, 2, 3]  # about 310 characters a row, and 240 for the rest
    assert out["truncated"] is True and out["note"] == "stopped at the character limit (1300 characters of result)"
    assert len(read(out)) <= 1300 < len(read({**out, "rows": out["rows"] + [[4, "x" * 300]]}))


def test_the_room_kept_for_a_note_is_the_note_written(db: Path) -> None:
    """Room was kept for the longest note whatever the note: a result that fitted whole, with no note, was cut (to no
    row, with a note past the limit), and so was one that fitted with the row limit's shorter note."""
    wide = "SELECT id, name, price, name AS again FROM items ORDER BY id"
    whole = mod.run_query(db, wide)
    assert mod.run_query(db, wide, max_chars=len(read(whole))) == whole
    sql = ENDLESS + "SELECT i FROM n LIMIT 50"
    rows = [[i] for i in range(1, 11)]
    at_rows = {"columns": ["i"], "rows": rows, "row_count": 10, "truncated": True, "note": "stopped at the row limit (10 rows)"}
    limit = len(read(at_rows))
    assert mod.run_query(db, sql, max_rows=10, max_chars=limit) == at_rows
    less = limit - 1  # the row limit's note no longer fits: cut at the character limit, with its (longer) note

    def at_chars(n: int) -> dict[str, Any]:
        return {**at_rows, "rows": rows[:n], "row_count": n, "note": mod._notes(10, less)[1]}

    most = max(n for n in range(1, 11) if len(read(at_chars(n))) <= less)
    assert most < 10 and mod.run_query(db, sql, max_rows=10, max_chars=less) == at_chars(most)


MIXED_ROWS = ENDLESS + (  # escapes, non-ASCII, blobs in base64, NULL and the infinity JSON writes as text
    "SELECT i, printf('%.*c', i % 9, char(1)) || 'caf\u00e9 \"', CASE WHEN i % 7 = 0 THEN CAST(printf('%.*c', i % 5, 'a') AS BLOB) "
    "WHEN i % 5 = 0 THEN NULL ELSE i * 0.5 END, CASE WHEN i % 11 = 0 THEN 1e999 ELSE -i END FROM n "
)


def room_for(out: mod.QueryResult, rows: int, max_rows: int) -> int:
    """The least ``max_chars`` that holds the first ``rows`` of ``out`` cut at the character limit: their row count and
    the character limit's note (which names the limit, so the least is where the note's length and the limit agree)."""
    limit = 0
    while limit < (
        need := rendered_length(
            {
                "columns": out["columns"],
                "rows": out["rows"][:rows],
                "row_count": rows,
                "truncated": True,
                "note": mod._notes(max_rows, limit)[1],
            }
        )
    ):
        limit = need
    return limit


@pytest.mark.parametrize("fit", [1, 2, 255, 256, 257, 511, 512, 513, 700])
@pytest.mark.parametrize("less", [0, 1])
def test_the_character_cut_is_exact_across_chunks(db: Path, fit: int, less: int) -> None:
    every = mod.run_query(db, MIXED_ROWS + "LIMIT 800", max_rows=1_000)
    limit = room_for(every, fit, 1_000) - less  # where the first `fit` rows fill the room exactly, and one character less
    out = mod.run_query(db, MIXED_ROWS, max_rows=1_000, max_chars=limit)
    assert out["rows"] == every["rows"][: fit - less] and len(read(out)) <= limit
    assert less or len(read(out)) == limit  # the room the note written leaves, filled exactly
    at_chars, at_first = mod._notes(1_000, limit)[1:]
    first_fits = len(read({**out, "note": at_first})) <= limit  # with no row: the longer note where it fits
    assert out["note"] == (at_first if fit == less and first_fits else at_chars)


def test_rows_are_measured_in_chunks_not_one_by_one(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[object] = []

    def counted(value: object) -> int:
        writes.append(value)
        return rendered_length(value)

    monkeypatch.setattr(mod, "rendered_length", counted)
    out = mod.run_query(db, MIXED_ROWS + "LIMIT 700", max_rows=1_000)
    assert out["row_count"] == 700 and out["truncated"] is False
    assert len(writes) == 4  # the envelope and three chunks (not one write per row)


@pytest.mark.parametrize(
    "value", ["", "plain", '"\\', "\x00\x1f", "\U0001f600", 0, -7, 2**63 - 1, 1.5, -0.0, math.inf, None, b"", b"\x00", b"abcd"]
)
def test_a_row_that_fills_the_room_exactly_is_kept(db: Path, value: object) -> None:
    params = [value, value, "x" * 100]  # with room for the note when the row is cut
    whole = mod.run_query(db, "SELECT ?, ?, ?", params)
    limit = len(read(whole))  # the whole result, with no note
    assert mod.run_query(db, "SELECT ?, ?, ?", params, max_chars=limit) == whole
    assert mod.run_query(db, "SELECT ?, ?, ?", params, max_chars=limit - 1)["rows"] == []


def test_default_character_limit(db: Path) -> None:
    out = mod.run_query(
        db, ENDLESS + "SELECT zeroblob(10000) FROM n LIMIT 150"
    )  # blobs in base64: 1.5 MB of values, 2 MB of JSON
    assert out["row_count"] == 74 and out["truncated"] is True
    assert mod.MAX_CHARS - 13_400 < len(read(out)) <= mod.MAX_CHARS


@pytest.mark.parametrize(
    "value",
    ["", "plain", 'quote " and \\ slash', "\x00\x01\x1f\x7f", "\n\t", "caf\u00e9 \U0001f600", 0, -7, 2**63 - 1, 1.5,
     1e300, -0.0, math.inf, -math.inf, None, b"", b"\x00", b"ab", b"abc", b"\xff" * 10],
)  # fmt: skip
def test_a_row_is_counted_as_the_model_reads_it(db: Path, value: object) -> None:
    row = mod.run_query(db, "SELECT ?, ?", [value, value])["rows"][0]  # as the tool returns it: a blob in base64
    one, two = ({"columns": ["a", "b"], "rows": [row] * n} for n in (1, 2))
    assert len(read(two)) - len(read(one)) == rendered_length(row) + 2  # the row, and ", " before it
    assert rendered_length(value) == len(read(value)) and rendered_length("a\ud800b") == len(read("a\ud800b")) == 3


@pytest.mark.parametrize("sql", ["SELECT zeroblob(999999999)", "SELECT length(zeroblob(1000001))", "SELECT randomblob(1000001)"])
def test_no_value_past_the_byte_limit_is_built(db: Path, sql: str) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_sql_query(db))  # the default limits
    with pytest.raises(ToolArgumentError) as err:
        reg.call("sql_query", {"sql": sql})
    problem = err.value.problems[0]
    assert problem.path == "$.sql" and problem.keyword == "limits" and "longer than the limit of 1000000 bytes" in problem.message


def test_a_stored_value_past_the_limit_is_refused_but_its_length_is_not(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE docs (body BLOB)")
    conn.execute("INSERT INTO docs VALUES (zeroblob(5000))")
    conn.commit()
    conn.close()
    assert mod.run_query(db, "SELECT length(body) FROM docs", max_bytes=1000)["rows"] == [[5000]]
    with pytest.raises(ToolArgumentError, match="longer than the limit of 1000 bytes"):
        mod.run_query(db, "SELECT body FROM docs", max_bytes=1000)


def test_env_configured_default(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(mod.sql_query)
    monkeypatch.setenv(mod.DB_ENV, str(db))
    assert reg.call("sql_query", {"sql": "SELECT count(*) AS n FROM items"})["rows"] == [[3]]
    monkeypatch.delenv(mod.DB_ENV)
    assert "HARNESS_ONE_SQL_DB" in reg.try_call("sql_query", {"sql": "SELECT 1"}).for_model()
    tool = reg.get("sql_query")
    assert tool.idempotent and tool.read_only


def test_no_row_wider_than_the_column_limit_is_built(db: Path) -> None:
    wide = "SELECT " + ", ".join(["x"] * (mod.MAX_COLUMNS + 1)) + " FROM (SELECT zeroblob(999999) AS x)"  # 65 MB in one row
    with pytest.raises(ToolArgumentError) as err:
        mod.run_query(db, wide)
    problem = err.value.problems[0]
    assert (problem.path, problem.keyword, problem.expected) == ("$.sql", "limits", f"at most {mod.MAX_COLUMNS} columns")
    assert f"more than {mod.MAX_COLUMNS} columns" in problem.message
    out = mod.run_query(db, "SELECT " + ", ".join(["x"] * 3) + " FROM (SELECT 1 AS x)", max_columns=3)
    assert out["rows"] == [[1, 1, 1]]
    with pytest.raises(ToolArgumentError, match="more than 2 columns"):
        mod.run_query(db, "SELECT 1, 2, 3", max_columns=2)


def test_a_schema_wider_than_the_column_limit_leaves_the_rest_of_the_database_readable(tmp_path: Path) -> None:
    # Read under max_columns, a wide table made every query fail as "malformed database schema ... needs repair".
    path = tmp_path / "wide.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items(name, price)")
        conn.execute("INSERT INTO items VALUES ('tea', 3)")
        conn.execute("CREATE TABLE wide(" + ", ".join(f"c{i}" for i in range(100)) + ")")
        conn.execute("INSERT INTO wide(c0, c99) VALUES (1, 2)")
        conn.execute("CREATE INDEX wide_80 ON wide(" + ", ".join(f"c{i}" for i in range(80)) + ")")
        conn.execute("CREATE VIEW wide_view AS SELECT * FROM wide")
    conn.close()
    assert mod.run_query(path, "SELECT name, price FROM items")["rows"] == [["tea", 3]]
    assert mod.run_query(path, "SELECT c0, c99 FROM wide WHERE c5 IS NULL ORDER BY c1")["rows"] == [[1, 2]]
    for sql in ("SELECT * FROM wide", "SELECT c0 FROM wide_view"):
        with pytest.raises(ToolArgumentError, match=f"more than {mod.MAX_COLUMNS} columns") as err:
            mod.run_query(path, sql)
        assert err.value.problems[0].keyword == "limits"
    assert mod.run_query(path, "SELECT c0 FROM wide_view", max_columns=100)["rows"] == [[1]]


def test_a_schema_changed_meanwhile_is_a_retryable_error_not_a_broken_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read again under max_columns, the wide table was "malformed ... needs repair"; called again, the query answers.
    path = tmp_path / "wide.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items(name)")
        conn.execute("INSERT INTO items VALUES ('tea')")
        conn.execute("CREATE TABLE wide(" + ", ".join(f"c{i}" for i in range(100)) + ")")
    conn.close()
    bounded = mod._memory_bounded

    def another_connection_changes_the_schema() -> bool:  # runs after the schema was read, before the query
        writer = sqlite3.connect(path)
        writer.execute(f"CREATE TABLE later_{len(changed)}(x)")
        writer.commit()
        writer.close()
        changed.append(1)
        return bounded()

    changed: list[int] = []
    monkeypatch.setattr(mod, "_memory_bounded", another_connection_changes_the_schema)
    with pytest.raises(RetryableError, match="schema changed while the query was being prepared") as err:
        mod.run_query(path, "SELECT name FROM items")
    assert err.value.retry_after is not None and err.value.retry_after > 0
    monkeypatch.setattr(mod, "_memory_bounded", bounded)
    assert mod.run_query(path, "SELECT name FROM items")["rows"] == [["tea"]]


def test_a_stored_value_past_max_bytes_is_refused_saying_it_cannot_be_read(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE big(id, x)")
        conn.execute("INSERT INTO big VALUES (1, ?), (2, 'small')", ["a" * 2000])
    conn.close()
    assert mod.run_query(path, "SELECT id FROM big ORDER BY id", max_bytes=1000)["rows"] == [[1], [2]]
    for sql in ("SELECT length(x) FROM big", "SELECT substr(x, 1, 10) FROM big"):
        with pytest.raises(ToolArgumentError) as err:
            mod.run_query(path, sql, max_bytes=1000)
        message = err.value.problems[0].message
        assert "a stored value that long cannot be read here at all, not even by length() or substr()" in message


@pytest.mark.parametrize(
    ("sql", "params", "path"),
    [
        ("SELECT ?", [2**63], "$.params[0]"),  # past SQLite's 64-bit integers (was a ToolExecutionError: OverflowError)
        ("SELECT ?", ["a\ud800"], "$.params[0]"),  # lone surrogates (UnicodeEncodeError)
        ("SELECT 'a\ud800'", None, "$.sql"),
    ],
)
def test_values_sqlite_cannot_take_are_argument_errors_naming_the_field(
    db: Path, sql: str, params: list[object] | None, path: str
) -> None:
    with pytest.raises(ToolArgumentError) as err:
        mod.run_query(db, sql, params)
    assert [p.path for p in err.value.problems] == [path]


CONTROL_ROWS = ENDLESS + "SELECT printf('%.*c', 4900, char(1)) FROM n LIMIT 200"  # 1 MB of values, 6 characters each in JSON


def test_the_result_fits_the_registrys_default_output_limit(db: Path) -> None:
    reg = ToolRegistry(autoload=False)  # the standard plugins: output_limit's default is 1,000,000 characters
    reg.add(mod.make_sql_query(db))
    assert "max_output" not in reg.get("sql_query").options  # it would override the operator's limit
    got = reg.try_call("sql_query", {"sql": CONTROL_ROWS})
    assert got.ok and isinstance(got.value, dict)  # whole JSON, not the output limit's cut text (was 5.9 million characters)
    assert len(got.for_model()) <= 1_000_000 and got.value["row_count"] == 34 and got.value["truncated"] is True
    two = reg.call("sql_query", {"sql": "SELECT printf('%.*c', 600000, 'x') UNION ALL SELECT printf('%.*c', 600000, 'y')"})
    assert two["row_count"] == 1 and two["truncated"] is True
    one = reg.call("sql_query", {"sql": "SELECT printf('%.*c', 999990, 'x')"})
    assert one["rows"] == [] and one["note"].endswith("the first row alone is longer; select fewer or shorter values")


def test_an_operators_lower_output_limit_applies(db: Path) -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"output_limit": {"max_output": 50_000}})
    reg.add(mod.make_sql_query(db))
    refused = reg.try_call("sql_query", {"sql": CONTROL_ROWS})  # a structured result cannot be cut: refused
    assert refused.error is not None and refused.error.kind == "output_too_large"
    reg.add(mod.make_sql_query(db, name="small_query", max_chars=50_000))  # the tool's own limit within the operator's
    small = reg.call("small_query", {"sql": CONTROL_ROWS})
    assert small["truncated"] is True and small["row_count"] > 0 and len(read(small)) <= 50_000


@pytest.mark.parametrize(
    ("sql", "params", "rows"),
    [
        ("SELECT value FROM json_each(?)", ["[1, 2, 3]"], [[1], [2], [3]]),
        ("SELECT fullkey FROM json_tree('{\"a\": [1]}') WHERE atom IS NOT NULL", None, [["$.a[0]"]]),
        ("SELECT name FROM pragma_table_info('items')", None, [["id"], ["name"], ["price"]]),
        ('SELECT name FROM items, json_each(\'["tea", "cake"]\') AS j WHERE items.name = j.value', None, [["tea"], ["cake"]]),
    ],
)
def test_read_only_table_valued_functions_run(reg: ToolRegistry, sql: str, params: list[Any] | None, rows: list[Any]) -> None:
    # On a new connection SQLite sets these up with an update of its schema table, which was refused
    out = reg.call("sql_query", {"sql": sql, "params": params} if params else {"sql": sql})
    assert out["rows"] == rows[:2] and out["truncated"] is (len(rows) > 2)  # reg returns at most 2 rows


@pytest.fixture
def locked(db: Path) -> Iterator[Path]:
    """``db`` with another connection holding an exclusive lock on it."""
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    yield db
    writer.execute("ROLLBACK")
    writer.close()


def test_a_locked_database_is_a_retryable_error_not_the_querys(locked: Path) -> None:
    with pytest.raises(RetryableError) as err:  # was a ToolArgumentError on $.sql
        mod.run_query(locked, "SELECT name FROM items", time_limit=0.1)
    assert err.value.retry_after == 1.0 and "database is locked" in err.value.message and "not at fault" in err.value.message


def test_the_wait_for_a_lock_is_short_whatever_the_time_limit(locked: Path) -> None:
    start = time.monotonic()
    with pytest.raises(RetryableError) as err:
        mod.run_query(locked, "SELECT name FROM items", time_limit=60)  # SQLite waited all 60 s for the lock
    assert err.value.retry_after == 1.0
    assert time.monotonic() - start < 30  # a liveness bound, not a speed figure: the wait is 1 s


def test_retries_of_a_locked_database_wait_between_attempts_not_in_them(locked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mod, "_BUSY_WAIT", 0.05)  # in the caller's process (a clock of its own): seen by the tool
    clock = ManualClock()
    reg = ToolRegistry(autoload=False, clock=clock, plugin_options={"retry": {"default": {"attempts": 3}}})
    reg.add(mod.make_sql_query(locked, time_limit=60, clock=ManualClock()))
    start = time.monotonic()
    got = reg.try_call("sql_query", {"sql": "SELECT name FROM items"})
    assert isinstance(got.error, RetryableError) and got.error.retry_after == 1.0 and got.attempts == 3
    assert clock.now() >= 2.0  # two waits of retry_after, on the registry's clock: the retry plugin's, within its total
    assert time.monotonic() - start < 30  # a liveness bound: each attempt waited 60 s for the lock (3 minutes)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"not a database, some text " * 100, "file is not a database"),
        (b"SQLite format 3\x00\x10\x00\x01\x01\x00\x40\x20\x20" + b"\xff" * 5000, "database disk image is malformed"),
    ],
)
def test_a_broken_database_is_unavailable_not_a_bad_query(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "broken.sqlite3"
    path.write_bytes(content)
    with pytest.raises(ToolError) as err:
        mod.run_query(path, "SELECT name FROM sqlite_master")
    assert type(err.value) is ToolError  # was a ToolArgumentError on $.sql
    assert f"is unavailable: {reason}" in err.value.message and "not at fault" in err.value.message


def test_a_wrong_number_of_parameters_is_an_error_in_params(db: Path) -> None:
    with pytest.raises(ToolArgumentError) as err:
        mod.run_query(db, "SELECT ?, ?", [1])
    problem = err.value.problems[0]
    assert problem.path == "$.params" and "bindings" in problem.message and problem.got == "1"


@pytest.mark.parametrize("name", ["db#x.sqlite3", "db?x.sqlite3", "db%41.sqlite3"])
def test_a_path_with_uri_syntax_in_it_opens_that_file_read_only(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (n)")
        conn.execute("INSERT INTO items VALUES (7)")
    assert mod.run_query(path, "SELECT n FROM items")["rows"] == [[7]]  # not a new empty file "db"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    with pytest.raises(ToolArgumentError):
        mod.run_query(path, "INSERT INTO items VALUES (8)")


def _doubling_ctes(levels: int) -> str:
    """Each level reads the one before twice, inlined (NOT MATERIALIZED): preparing it takes about 2**levels of memory."""
    parts = ["a0(x) AS NOT MATERIALIZED (SELECT 1)"]
    parts += [f"a{i}(x) AS NOT MATERIALIZED (SELECT x FROM a{i - 1} UNION ALL SELECT x FROM a{i - 1})" for i in range(1, levels)]
    return "WITH " + ", ".join(parts) + f" SELECT count(*) FROM a{levels - 1}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the memory limit is RLIMIT_AS, enforced on Linux")
def test_a_query_that_needs_too_much_memory_is_refused(db: Path) -> None:
    # 20 levels take about 1.4 GB and 10 s to prepare in the caller's process, where the
    # progress handler never runs; in the tool's worker it stops at max_memory.
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_sql_query(db, max_memory=64 * 2**20))
    with pytest.raises(ToolArgumentError) as err:
        reg.call("sql_query", {"sql": _doubling_ctes(20)})
    problem = err.value.problems[0]
    assert (problem.path, problem.keyword) == ("$.sql", "limits") and "more memory than this tool may use" in problem.message
    # the worker lives on, its limit lifted after the call: a small query in it runs
    assert reg.call("sql_query", {"sql": _doubling_ctes(4)})["rows"] == [[8]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the memory limit is RLIMIT_AS, enforced on Linux")
def test_a_sort_past_the_memory_limit_is_refused_not_spilled_to_temporary_files(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite wrote sorts past its 2 MB cache to temporary files, outside max_memory: one query wrote 1.3 GB of them."""
    spill = tmp_path / "sqlite-tmp"
    spill.mkdir()
    os.utime(spill, (1, 1))  # a file created there, even one unlinked at once as SQLite's are, changes its mtime
    monkeypatch.setenv("SQLITE_TMPDIR", str(spill))  # read by SQLite in the tool's worker, started at the first call
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_sql_query(db, max_memory=16 * 2**20))
    sort = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {}) SELECT x FROM c ORDER BY randomblob(1000)"
    with pytest.raises(ToolArgumentError) as err:
        reg.call("sql_query", {"sql": sort.format(40_000)})  # 40 MB of sort keys: was written to disk, and returned rows
    problem = err.value.problems[0]
    assert (problem.path, problem.keyword) == ("$.sql", "limits") and "more memory than this tool may use" in problem.message
    assert reg.call("sql_query", {"sql": sort.format(2_000)})["row_count"] == 200  # a sort within the limit runs
    assert spill.stat().st_mtime == 1 and not any(spill.iterdir())


def test_in_the_callers_process_a_large_sort_spills_to_files_as_sqlite_does(db: Path, tmp_path: Path) -> None:
    """Without the process-mode worker nothing bounds memory: the tool leaves SQLite's default (sorts past its
    cache go to temporary files) rather than hold them in the caller's memory. (A process of its own: SQLite
    reads SQLITE_TMPDIR once.)"""
    spill = tmp_path / "sqlite-tmp"
    spill.mkdir()
    os.utime(spill, (1, 1))
    script = f"""
import harness_one_sql_query as mod
from harness_one import ToolRegistry
reg = ToolRegistry(autoload=False, block=["timeout"])  # the tool runs in this process
reg.add(mod.make_sql_query({str(db)!r}, max_memory=16 * 2**20))
sort = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 40000) SELECT x FROM c ORDER BY randomblob(1000)"
print(reg.call("sql_query", {{"sql": sort}})["row_count"])
"""
    env = {**os.environ, "SQLITE_TMPDIR": str(spill)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "200"
    assert spill.stat().st_mtime != 1  # it wrote (and at once unlinked) its temporary files there


def test_one_long_sqlite_step_is_killed_at_the_tool_timeout(db: Path) -> None:
    # instr() of two long strings is one step of about 4 s, which the progress handler cannot interrupt.
    reg = ToolRegistry(autoload=False)
    tool = mod.make_sql_query(db, time_limit=0.2)
    reg.add(tool)
    slow = "SELECT instr(a, b) FROM (SELECT printf('%.*c', 900000, 'a') || 'b' AS a, printf('%.*c', 400000, 'a') || 'c' AS b)"
    with pytest.raises(ToolTimeout, match=r"timed out after 1\.2 s"):
        reg.call("sql_query", {"sql": slow})
    assert reg.stats()["timeout"]["processes_killed"] == 1
    assert reg.call("sql_query", {"sql": "SELECT 1"})["rows"] == [[1]]  # a new worker


def test_the_database_is_the_callers_at_call_time(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker process started with the first call's environment and directory; each call
    # carries the caller's $HARNESS_ONE_SQL_DB as it is then, relative paths resolved here.
    other = tmp_path / "sub" / "other.sqlite3"
    other.parent.mkdir()
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (n)")
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_sql_query())
    monkeypatch.setenv(mod.DB_ENV, str(db))
    assert reg.call("sql_query", {"sql": "SELECT name FROM sqlite_master"})["rows"] == [["items"]]
    monkeypatch.chdir(other.parent)
    monkeypatch.setenv(mod.DB_ENV, other.name)
    assert reg.call("sql_query", {"sql": "SELECT name FROM sqlite_master"})["rows"] == [["t"]]
    monkeypatch.delenv(mod.DB_ENV)
    with pytest.raises(ToolError, match="No database configured"):
        reg.call("sql_query", {"sql": "SELECT 1"})


def test_a_clock_of_the_callers_keeps_the_tool_in_its_process(db: Path) -> None:
    clock = SteppingClock()  # holds a lock: it cannot cross to a worker, and must not be copied there
    tool = mod.make_sql_query(db, clock=clock)
    assert tool.timeout_mode == "none"
    reg = ToolRegistry(autoload=False)
    reg.add(tool)
    with pytest.raises(ToolTimeout):
        reg.call("sql_query", {"sql": ENDLESS + "SELECT count(*) FROM n"})
    assert clock.now() > 5  # the caller's clock was read


def test_where_process_mode_cannot_run_the_tool_runs_in_a_thread(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mod, "_PROCESSES", False)
    assert mod.make_sql_query(db).timeout_mode == "thread"


def test_a_blob_comes_back_whole_in_base64(db: Path) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_sql_query(db))
    out = reg.call("sql_query", {"sql": "SELECT x'00ff80', 'text', zeroblob(0)"})  # were UTF-8 with replacement characters
    assert out["rows"] == [[{"base64": "AP+A", "bytes": 3}, "text", {"base64": "", "bytes": 0}]]


def test_stored_text_that_is_not_utf8_is_read_not_blamed_on_the_query(db: Path) -> None:
    """SQLite stores text unchecked: 'Cafe' + a Latin-1 e-acute was "SQLite refused the query: Could not decode to UTF-8"
    on ``$.sql``."""
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO items (name, price) VALUES (CAST(x'43616665e9' AS TEXT), 2.0)")
    conn.commit()
    conn.close()
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_sql_query(db, clock=ManualClock()))
    out = reg.call("sql_query", {"sql": "SELECT name, hex(name) FROM items WHERE price = 2.0"})
    assert out["rows"] == [["Cafe\ufffd", "43616665E9"]]
    assert reg.call("sql_query", {"sql": "SELECT 'caf\u00e9'"})["rows"] == [["caf\u00e9"]]  # valid UTF-8 as before


def test_a_max_chars_no_result_can_keep_to_is_refused_naming_the_least(db: Path) -> None:
    """A ``max_chars`` below the envelope was taken, and the result ran past it (60 allowed, 138 returned)."""
    least = 133  # mod.MIN_CHARS
    for below in (60, least - 1):
        with pytest.raises(ValueError, match=f"max_chars must be at least {least}"):
            mod.make_sql_query(db, max_chars=below)
        with pytest.raises(ValueError, match=f"max_chars must be at least {least}"):
            mod.run_query(db, "SELECT 1", max_chars=below)
    for sql in ('SELECT 1 AS ""', "SELECT id AS i FROM items", 'SELECT name AS "", price AS "" FROM items'):
        assert len(read(mod.run_query(db, sql, max_chars=least))) <= least
    wide = "SELECT " + ", ".join(f"name AS column_{i}" for i in range(10)) + " FROM items"
    with pytest.raises(ToolArgumentError, match=r"even with no row, the column names and the note .* more than the 133 ") as err:
        mod.run_query(db, wide, max_chars=least)
    assert err.value.problems[0].keyword == "limits"
    note = mod._notes(0, least)[1]
    assert mod.MIN_CHARS == least == len(read({"columns": [""], "rows": [], "row_count": 0, "truncated": True, "note": note}))


def _with_schema_entry(db: Path, kind: str, name: str, sql: bytes) -> None:
    """Add ``sql`` (bytes: a legacy application's Latin-1, say) to the schema as ``kind`` ``name``, unchecked as SQLite
    stores it."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA writable_schema = ON")
    if kind == "table":
        conn.execute("UPDATE sqlite_master SET sql = CAST(? AS TEXT) WHERE name = ?", [sql, name])
    else:
        conn.execute("INSERT INTO sqlite_master VALUES (?, ?, ?, 0, CAST(? AS TEXT))", [kind, name, name, sql])
    conn.commit()
    conn.close()


def test_a_schema_name_that_is_not_utf8_is_the_databases_fault_not_an_untyped_error(db: Path) -> None:
    """A column named 'caf' + a Latin-1 e-acute: the authorizer could not be given the name, denied the read, and
    SQLite's message could not be decoded either: a raw UnicodeDecodeError (ToolExecutionError through the registry)."""
    _with_schema_entry(db, "table", "items", b"CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, caf\xe9 REAL)")
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_sql_query(db, clock=ManualClock()))
    with pytest.raises(ToolError) as err:
        reg.call("sql_query", {"sql": "SELECT * FROM items"})
    assert type(err.value) is ToolError
    assert err.value.message == (
        f"The database {str(db)!r} cannot be read by this query: its schema holds a name that is not valid UTF-8, which "
        "Python's sqlite3 cannot read (SQLite's text: 'access to items.caf\ufffd is prohibited', each invalid byte "
        "sequence shown as U+FFFD). The query is not at fault; the database's operator must rename it to valid UTF-8."
    )
    assert reg.call("sql_query", {"sql": "SELECT name FROM pragma_table_info('items')"})["rows"][2] == ["caf\ufffd"]


def test_an_error_message_quoting_a_schema_name_that_is_not_utf8_is_the_databases_fault(db: Path) -> None:
    """A view on a table whose name is not UTF-8: SQLite's "no such table" quotes it, undecodable (no authorizer
    denial): told by the bytes occurring in the schema."""
    _with_schema_entry(db, "view", "v", b"CREATE VIEW v AS SELECT * FROM gone\xe9")
    with pytest.raises(ToolError) as err:
        mod.run_query(db, "SELECT * FROM v")
    assert type(err.value) is ToolError
    assert "not valid UTF-8, which Python's sqlite3 cannot read (SQLite's text: 'no such table: main.gone\ufffd'" in (
        err.value.message
    )
    assert "The query is not at fault" in err.value.message


def test_an_error_message_the_querys_own_text_made_undecodable_is_the_querys(db: Path) -> None:
    """A JSON path of invalid UTF-8 that the query built: SQLite quotes it in its message; the query's fault."""
    with pytest.raises(ToolArgumentError) as err:
        mod.run_query(db, "SELECT json_extract('{}', CAST(x'24ff5b' AS TEXT))")
    problem = err.value.problems[0]
    assert problem.path == "$.sql" and problem.message == "SQLite refused the query: JSON path error near '\ufffd['"
