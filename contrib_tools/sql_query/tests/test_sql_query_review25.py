"""Review 25, sql_query: parameters SQLite cannot store are named by index (a lone surrogate shown wherever it is); a
database SQLite cannot read without writing beside it (SQLITE_READONLY, a closed WAL database in a directory the tool's
user cannot write) is unavailable, not the query's fault; the tool opens the database only through SQLite."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import harness_one_sql_query as mod
import pytest

from harness_one import ArgumentProblem, ToolArgumentError, ToolRegistry


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.db"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (a); INSERT INTO t VALUES (1);")
    conn.close()
    return path


def _problems(db: Path, sql: str, params: list[object]) -> list[ArgumentProblem]:
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_sql_query(db))
    with pytest.raises(ToolArgumentError) as err:
        reg.call("sql_query", {"sql": sql, "params": params})
    return list(err.value.problems)


def test_an_integer_past_64_bits_is_named_by_its_index_and_shown(db: Path) -> None:
    top = "an integer from -9223372036854775808 to 9223372036854775807"
    message = "the integer does not fit SQLite's 64-bit integers"
    assert _problems(db, "SELECT ?, ?", [1, 2**64]) == [  # was $.params, got None
        ArgumentProblem("$.params[1]", message, "range", top, "18446744073709551616")
    ]
    assert _problems(db, "SELECT ?, ?", [-(2**63) - 1, 2**63]) == [
        ArgumentProblem("$.params[0]", message, "range", top, "-9223372036854775809"),
        ArgumentProblem("$.params[1]", message, "range", top, "9223372036854775808"),
    ]


def test_a_huge_integer_is_shown_by_its_digit_count() -> None:
    # str() refuses an int past 4,300 digits; the count is told without it
    (problem,) = mod._param_problems([10**5000])
    assert (problem.path, problem.got) == ("$.params[0]", "an integer of 5,001 digits")
    (problem,) = mod._param_problems([-(10**40) + 1])
    assert problem.got == "an integer of 40 digits"
    assert [mod._digits(v) for v in (0, 9, 10, 99, 100, 10**31 - 1, 10**31, -(10**31))] == [1, 1, 2, 2, 3, 31, 32, 32]


def test_a_lone_surrogate_in_a_parameter_is_named_by_its_index(db: Path) -> None:
    assert _problems(db, "SELECT ?, ?, ?", [1, "ok", "ab\ud800"]) == [
        ArgumentProblem(
            "$.params[2]",
            "text must be valid Unicode (a lone surrogate cannot be stored; U+D800 at position 2)",
            "type",
            "valid text",
            "'ab\\ud800'",
        )
    ]


def test_a_lone_surrogate_far_into_a_parameter_is_shown() -> None:
    # got was the first 80 characters: a surrogate past them was not in it
    value = "a" * 200 + "\ud800" + "b" * 100
    (problem,) = mod._param_problems([value])
    assert problem.message == "text must be valid Unicode (a lone surrogate cannot be stored; U+D800 at position 200)"
    assert problem.got == "from position 160: " + repr("a" * 40 + "\ud800" + "b" * 39)
    (problem,) = mod._param_problems(["a" * 39 + "\udfff" + "b" * 100])  # within the first 80: shown from the start
    assert problem.got == repr("a" * 39 + "\udfff" + "b" * 40)


def test_a_lone_surrogate_in_the_query_stays_on_sql(db: Path) -> None:
    with pytest.raises(ToolArgumentError) as err:
        mod.run_query(db, "SELECT 'a\ud800'")
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("$.sql", "text must be valid Unicode (a lone surrogate cannot be stored)")
    ]


def test_a_write_is_still_the_querys_refusal(db: Path) -> None:
    # SQLITE_READONLY is the database's failure now; a write never reaches it: the authorizer refuses it first
    with pytest.raises(ToolArgumentError) as err:
        mod.run_query(db, "INSERT INTO t VALUES (2)")
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("$.sql", "the query tried to insert t, which is not allowed: only read-only SELECT queries run here")
    ]


# --- WAL ------------------------------------------------------------------------------------------------------------


def _wal_db(directory: Path) -> Path:
    path = directory / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript("CREATE TABLE t (a); INSERT INTO t VALUES (1);")
    conn.close()  # the last connection: its -wal and -shm are removed
    return path


def test_reading_a_closed_wal_database_leaves_its_wal_and_shm_files(tmp_path: Path) -> None:
    # As documented (README "Read-only", docs/limits.md): even mode=ro creates them, and they stay after close
    wal = _wal_db(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["app.db"]
    assert mod.run_query(wal, "SELECT a FROM t")["rows"] == [[1]]
    assert sorted(os.listdir(tmp_path)) == ["app.db", "app.db-shm", "app.db-wal"]


IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_setpriv = pytest.mark.skipif(
    not hasattr(os, "geteuid") or (IS_ROOT and shutil.which("setpriv") is None),
    reason="needs file permissions (POSIX), and as root setpriv to read as another user",
)
HERE = str(Path(mod.__file__).parent)
OWNER = 1  # as root: the database's owner (daemon), whom the reader runs as

READER = """
import sys
sys.path.insert(0, sys.argv[2])
import harness_one_sql_query as mod
from harness_one import ToolError
try:
    print(mod.run_query(sys.argv[1], sys.argv[3])["rows"])
except ToolError as exc:
    print(type(exc).__name__ + ":", exc)
"""


def _as_owner(db: Path, sql: str) -> str:
    """The tool run as the database's owner: this user, or as root another one (root writes any directory)."""
    prefix = ["setpriv", f"--reuid={OWNER}", f"--regid={OWNER}", "--clear-groups"] if IS_ROOT else []
    run = subprocess.run(
        [*prefix, sys.executable, "-c", READER, str(db), HERE, sql],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


@pytest.fixture
def closed_wal_in_readonly_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="review25-"))  # in /tmp, which every user reaches (tmp_path: 0700)
    db = _wal_db(directory)
    if IS_ROOT:
        os.chown(db, OWNER, OWNER)  # the directory stays root's: the owner cannot create files in it
    directory.chmod(0o555)
    yield db
    directory.chmod(0o755)
    shutil.rmtree(directory)


@needs_setpriv
@pytest.mark.parametrize("sql", ["SELECT a FROM t", "INSERT INTO t VALUES (2)"])
def test_a_wal_database_sqlite_cannot_write_beside_is_unavailable(closed_wal_in_readonly_dir: Path, sql: str) -> None:
    # was ToolArgumentError on $.sql: "SQLite refused the query: attempt to write a readonly database"
    # (SQLITE_READONLY_DIRECTORY: the -wal and -shm files cannot be created); a write cannot even be prepared
    db = closed_wal_in_readonly_dir
    assert _as_owner(db, sql) == (
        f"ToolError: The database {str(db)!r} is unavailable: attempt to write a readonly database"
        " (SQLITE_READONLY_DIRECTORY). The query is not at fault; SQLite "
        "must write beside the database to read it (a database in WAL mode that no connection has open needs its -wal "
        "and -shm files) and this tool's user cannot. Its operator must let this tool's user write the database's "
        "directory and those files, keep a connection to it open, or switch it to PRAGMA journal_mode = DELETE."
    )
    assert sorted(os.listdir(db.parent)) == ["app.db"]


# --- the database is opened only through SQLite ----------------------------------------------------------------------

APP = """
import sqlite3, subprocess, sys
sys.path.insert(0, sys.argv[2])
import harness_one_sql_query as mod
from harness_one import RetryableError
db = sys.argv[1]
probe = (
    "import sqlite3, sys\\n"
    "c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)\\n"
    "try:\\n"
    "    c.execute('BEGIN EXCLUSIVE'); c.execute('INSERT INTO t VALUES (99)'); c.execute('COMMIT'); print('wrote')\\n"
    "except sqlite3.Error as e:\\n"
    "    print(e)\\n"
)
def other():
    return subprocess.run([sys.argv[3], "-c", probe, db], capture_output=True, text=True).stdout.strip()
app = sqlite3.connect(db, isolation_level=None)
app.execute("BEGIN EXCLUSIVE")
app.execute("INSERT INTO t VALUES (2)")
print(other())
try:
    mod.run_query(db, "SELECT count(*) FROM t", time_limit=0.2)
except RetryableError:
    print("busy")
print(other())
"""


#: Another Python for the probe, which only needs sqlite3 (the app's own may lie where the app's user cannot reach).
PROBE = "/usr/bin/python3"


@pytest.mark.skipif(
    not IS_ROOT or shutil.which("setpriv") is None or not os.path.exists(PROBE), reason="runs the app as another user"
)
def test_the_apps_lock_holds_while_the_tool_reads_beside_it() -> None:
    # A plain open and close of the database file (a header read, as a user not its owner) dropped every fcntl lock the
    # process held on it, SQLite's EXCLUSIVE lock included: another process then wrote under the app's lock.
    directory = Path(tempfile.mkdtemp(prefix="review25-"))
    try:
        db = directory / "app.db"
        conn = sqlite3.connect(db)
        conn.executescript("CREATE TABLE t (a); INSERT INTO t VALUES (1);")
        conn.close()
        os.chown(db, OWNER, OWNER)
        db.chmod(0o666)
        directory.chmod(0o777)
        run = subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", APP, str(db), HERE, PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.split("\n") == ["database is locked", "busy", "database is locked", ""]
    finally:
        shutil.rmtree(directory)
