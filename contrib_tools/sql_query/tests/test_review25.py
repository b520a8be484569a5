"""Review 25, both contrib tools in one file (a second ``test_review25.py`` in fetch_url/tests clashed: the same module
name for pytest's default import mode and for mypy).

sql_query: parameters SQLite cannot store are named by index; a WAL database is not given files its owner cannot write.
fetch_url: a lone surrogate in the URL, a port outside 1-65535, IPv6 documentation space, declared dependencies."""

from __future__ import annotations

import ipaddress
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import harness_one_fetch_url as fetch_mod
import harness_one_sql_query as mod
import httpx
import pytest

from harness_one import ArgumentProblem, ToolArgumentError, ToolError, ToolRegistry


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


def test_a_lone_surrogate_in_the_query_stays_on_sql(db: Path) -> None:
    with pytest.raises(ToolArgumentError) as err:
        mod.run_query(db, "SELECT 'a\ud800'")
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("$.sql", "text must be valid Unicode (a lone surrogate cannot be stored)")
    ]


# --- WAL: -wal/-shm created by another user than the database's owner ---------------------------------------------


def _wal_db(directory: Path) -> Path:
    path = directory / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript("CREATE TABLE t (a); INSERT INTO t VALUES (1);")
    conn.close()  # the last connection: its -wal and -shm are removed
    return path


def test_same_user_or_not_wal_needs_no_check(db: Path, tmp_path: Path) -> None:
    assert mod._foreign_wal_files(db.resolve()) is None  # owned by this user
    wal = _wal_db(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["app.db", "t.db"]
    assert mod.run_query(wal, "SELECT a FROM t")["rows"] == [[1]]  # as the owner (or root, which SQLite chowns for)


needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="runs the tool as another user (root and setpriv)",
)

READER = """
import sys
sys.path.insert(0, {here!r})
import harness_one_sql_query as mod
from harness_one import ToolError
try:
    print(mod.run_query(sys.argv[1], "SELECT a FROM t")["rows"])
except ToolError as exc:
    print("ToolError:", exc)
"""


def _as_nobody(db: Path) -> str:
    script = READER.format(here=str(Path(mod.__file__).parent))
    run = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", script, str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


@pytest.fixture
def shared() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="review25-"))  # in /tmp, which every user reaches (pytest's tmp_path: 0700)
    directory.chmod(0o777)  # the tool's user could create files there
    db = _wal_db(directory)
    os.chown(db, 1, 1)  # the app's user (daemon), not the tool's (nobody)
    yield db
    shutil.rmtree(directory)


@needs_root
def test_a_closed_wal_database_of_another_user_is_refused_and_left_alone(shared: Path) -> None:
    out = _as_nobody(shared)
    owner = 1
    assert out == (
        f"ToolError: The database {str(shared.resolve())!r} is unavailable to this tool: it is in WAL mode and no "
        "connection has it open (its -wal and -shm files are missing), so reading it would create its -wal and -shm "
        f"files owned by this tool's user (uid 65534), not the database's owner (uid {owner}), and the owner's next "
        "write would fail ('attempt to write a readonly database'). The query is not at fault; the database's operator "
        "must keep a connection to it open while the tool reads it, run the tool as the database's owner, or switch the "
        "database to PRAGMA journal_mode = DELETE."
    )
    assert sorted(os.listdir(shared.parent)) == ["app.db"]  # was: app.db-shm and app.db-wal, owned by nobody


@needs_root
def test_a_wal_file_alone_is_refused_too(shared: Path) -> None:
    # -shm missing: SQLite would create it (and -wal when only -shm is there)
    wal = Path(f"{shared}-wal")
    wal.touch()
    os.chown(wal, 1, 1)
    assert "(its -shm file is missing)" in _as_nobody(shared)
    assert sorted(os.listdir(shared.parent)) == ["app.db", "app.db-wal"]


@needs_root
def test_an_open_wal_database_of_another_user_is_read(shared: Path) -> None:
    app = subprocess.Popen(  # the app, as the owner, holding the database open (its -wal and -shm exist)
        [
            "setpriv", "--reuid=1", "--regid=1", "--clear-groups", sys.executable, "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT * FROM t').fetchall(); "
            "print('open', flush=True); sys.stdin.readline(); "
            "c.execute('INSERT INTO t VALUES (2)'); c.commit(); print('wrote', flush=True)",
            str(shared),
        ],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert app.stdout is not None and app.stdin is not None
        assert app.stdout.readline() == "open\n"
        assert _as_nobody(shared) == "[[1]]"
        app.stdin.write("\n")
        app.stdin.flush()
        assert app.stdout.readline() == "wrote\n"  # the app still writes
    finally:
        app.kill()
        app.wait()
    assert {Path(shared.parent, f).stat().st_uid for f in os.listdir(shared.parent)} == {1}


# --- fetch_url ------------------------------------------------------------------------------------------------------


REACHED: list[str] = []


def _handler(request: httpx.Request) -> httpx.Response:
    REACHED.append(str(request.url))
    if request.url.path == "/to-big-port":
        return httpx.Response(302, headers={"location": "http://127.0.0.1:70000/"})
    if request.url.path == "/to-cesu":  # a surrogate's UTF-8-like bytes: httpx reads the header as Latin-1, never one
        return httpx.Response(302, headers=[(b"location", b"/\xed\xa0\x80")])
    return httpx.Response(200, headers={"content-type": "text/plain"}, stream=httpx.ByteStream(b"REACHED"))


def _policy(*allow: str) -> fetch_mod.FetchPolicy:
    return fetch_mod.FetchPolicy(allow=allow, transport=httpx.MockTransport(_handler))


def _url_problem(url: str, policy: fetch_mod.FetchPolicy) -> ArgumentProblem:
    REACHED.clear()
    with pytest.raises(ToolArgumentError) as err:
        fetch_mod.fetch(url, policy)
    assert REACHED == []  # nothing sent
    (problem,) = err.value.problems
    return problem


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1/\ud800", "not a valid URL: it holds a lone surrogate (U+D800) at position 17"),
        ("http://127.0.0.1/?q=\udfff", "not a valid URL: it holds a lone surrogate (U+DFFF) at position 20"),
        ("http://127.0.0.1/#\ud83d", "not a valid URL: it holds a lone surrogate (U+D83D) at position 18"),
    ],
)
def test_a_lone_surrogate_in_the_url_is_an_argument_error(url: str, message: str) -> None:
    # was ToolExecutionError: UnicodeEncodeError (httpx percent-encoding the path, query or fragment)
    problem = _url_problem(url, _policy("127.0.0.1"))
    shown = repr(url.encode("utf-8", "backslashreplace").decode())  # the echo (redact's) writes the surrogate escaped
    assert (problem.path, problem.message, problem.got) == ("$.url", message, shown)


def test_a_lone_surrogate_reaches_the_model_as_an_argument_error() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(fetch_mod.make_fetch_url(_policy("127.0.0.1")))
    got = reg.try_call("fetch_url", {"url": "http://127.0.0.1/a\ud800"})
    assert isinstance(got.error, ToolArgumentError)
    assert [(p.path, p.message) for p in got.error.problems] == [
        ("$.url", "not a valid URL: it holds a lone surrogate (U+D800) at position 18")
    ]


def test_a_redirect_cannot_carry_a_lone_surrogate() -> None:
    # httpx decodes header bytes as ASCII, UTF-8 (strict) or Latin-1: none yields a surrogate, so the hop is followed
    out = fetch_mod.fetch("http://127.0.0.1/to-cesu", _policy("127.0.0.1"))
    assert (out["final_url"], out["redirects"], out.get("text")) == ("http://127.0.0.1/%C3%AD%C2%A0%C2%80", 1, "REACHED")


@pytest.mark.parametrize("port", [0, -1, 65536, 70000, 108831])
def test_a_port_outside_1_65535_is_refused(port: int) -> None:
    # 108831 reached port 43295 (getaddrinfo wraps it), while url, final_url and Host said 108831
    problem = _url_problem(f"http://127.0.0.1:{port}/", _policy("127.0.0.1"))
    assert (problem.path, problem.message) == ("$.url", f"the port must be 1-65535, not {port}")


def test_the_ports_at_the_ends_of_the_range_are_fetched() -> None:
    for port in (1, 65535):
        REACHED.clear()
        assert fetch_mod.fetch(f"http://127.0.0.1:{port}/", _policy("127.0.0.1")).get("text") == "REACHED"
        assert [f"http://127.0.0.1:{port}/"] == REACHED


def test_a_redirect_to_a_port_outside_the_range_is_the_servers_error() -> None:
    REACHED.clear()
    with pytest.raises(ToolError) as err:
        fetch_mod.fetch("http://127.0.0.1/to-big-port", _policy("127.0.0.1"))
    assert not isinstance(err.value, ToolArgumentError)
    assert str(err.value) == (
        "The server redirected to 'http://127.0.0.1:70000/', which cannot be fetched: the port must be 1-65535, "
        "not 70000. Try another URL."
    )
    assert REACHED == ["http://127.0.0.1/to-big-port"]  # not followed


@pytest.mark.parametrize("address", ["3fff::1", "3fff:fff:ffff::1", "2001:db8::1"])
def test_ipv6_documentation_space_is_refused_on_every_python(address: str) -> None:
    # 3fff::/20 (RFC 9637) is not in Python 3.11's ipaddress tables: it was fetched
    assert fetch_mod.why_refused(ipaddress.IPv6Address(address)) == "is a documentation address"
    problem = _url_problem(f"http://[{address}]/", _policy())
    assert problem.message == f"refused: {address} is a documentation address; only public addresses can be fetched"


def test_next_to_the_documentation_prefix_is_public() -> None:
    assert fetch_mod.why_refused(ipaddress.IPv6Address("3fff:1000::1")) is None  # just past 3fff::/20
    assert fetch_mod.why_refused(ipaddress.IPv6Address("2606:4700::1")) is None


def test_httpcore_is_declared_and_both_are_bounded() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((Path(fetch_mod.__file__).parent / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["harness-one>=0.1", "httpx>=0.27,<1", "httpcore>=1.0,<2"]
    assert httpx.__version__.split(".")[0] == "0"  # the installed ones are within those ranges
    import httpcore

    assert httpcore.__version__.split(".")[0] == "1"
