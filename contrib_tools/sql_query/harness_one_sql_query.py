"""``sql_query``: read-only SELECT queries on a configured SQLite file.

Three locks keep it read-only: the file is opened with ``mode=ro``; an authorizer allows
only reading (no writes, no schema changes, no ``ATTACH``, no pragma that sets a value); and
only one statement runs per call.

Five limits bound the work: at most ``max_rows`` rows are returned, in a result the model
reads (harness-one's JSON) as at most ``max_chars`` characters, by default the
``output_limit`` plugin's default (the tool sets no ``max_output`` of its own, so an
operator's lower output limit applies to it as to any tool); ``truncated`` and ``note`` say
when the result was cut, and the rows stop where the next would not fit beside the note written
(none for a result that fits whole). A ``max_chars`` below :data:`MIN_CHARS` (133: a result cut at it with one
column named ``""`` and no row) is a ``ValueError`` naming it; a query whose column names leave no room for that
note within ``max_chars`` is refused. A progress handler interrupts a query still running after
``time_limit`` seconds, fetching included, and what it cannot interrupt (one long step, a
costly preparation) is killed with the tool's worker process a second later (``process``
timeout mode), where a query may add at most ``max_memory`` bytes of address space (Linux),
its sorts and temporary tables included (``temp_store = MEMORY`` where memory is bounded: none spills to a file);
and SQLite itself refuses any single string or blob longer than ``max_bytes``
(``SQLITE_LIMIT_LENGTH``) and any result wider than ``max_columns`` columns
(``SQLITE_LIMIT_COLUMN``), so ``zeroblob(999999999)`` fails before it is allocated and one
row in memory holds at most ``max_columns * max_bytes`` bytes before the character cap drops it.
(A table wider than ``max_columns`` is read a few columns at a time; a view that wide cannot be read,
as SQLite expands it whole; a stored value longer than ``max_bytes`` cannot be read at all, its length
included.)

A failure of the database itself is no fault of the query: busy or locked by another
connection is a :class:`~harness_one.RetryableError` once SQLite has waited at most a second for
the lock (within ``time_limit``), so retries wait between attempts, not in them; a file that is
not a database, is corrupt or cannot be opened or read is a :class:`~harness_one.ToolError`
saying the database is unavailable, and so is one SQLite must write beside to read (``SQLITE_READONLY`` and its extended
codes: a WAL database no connection has open, whose ``-wal`` and ``-shm`` files this tool's user cannot create or
write). Stored text that is not valid UTF-8 is read with each invalid
byte sequence as U+FFFD (``hex(column)`` gives its bytes), not refused as the query's fault. A name in the
schema that is not valid UTF-8, which Python's sqlite3 cannot read, is a :class:`~harness_one.ToolError` saying
so (its operator must rename it); an error message the query's own text made invalid is the query's refusal.

The database is named by ``HARNESS_ONE_SQL_DB`` (read at call time), or build your own
tool with :func:`make_sql_query`.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import sqlite3
import sys
from collections.abc import Callable
from operator import length_hint
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import quote

from harness_one import (
    ArgumentProblem,
    Clock,
    RetryableError,
    SystemClock,
    Tool,
    ToolArgumentError,
    ToolError,
    ToolTimeout,
    defineTool,
    rendered_length,
)

__all__ = [
    "DB_ENV",
    "MAX_BYTES",
    "MAX_CHARS",
    "MAX_COLUMNS",
    "MAX_MEMORY",
    "MAX_ROWS",
    "MIN_CHARS",
    "TIME_LIMIT",
    "QueryResult",
    "make_sql_query",
    "run_query",
    "sql_query",
]

DB_ENV = "HARNESS_ONE_SQL_DB"
MAX_ROWS = 200
MAX_BYTES = 1_000_000
#: Characters of a result as the model reads it: the ``output_limit`` plugin's default, so the tool's own cut decides there.
MAX_CHARS = 1_000_000
MAX_COLUMNS = 64
MAX_MEMORY = 256 * 2**20
TIME_LIMIT = 5.0
_PROCESSES = os.name == "posix"  # process timeout mode runs here (it needs process groups)
_PROGRESS_STEPS = 1000  # SQLite virtual-machine steps between two looks at the clock
_CHUNK = 256  # rows written at once to measure them (a write per row: 21,804 small rows took 68 ms, not 37)
# Not in every typeshed: the values are SQLite's own (sqlite3.h) and never change.
_LIMIT_LENGTH: int = getattr(sqlite3, "SQLITE_LIMIT_LENGTH", 0)
_LIMIT_COLUMN: int = getattr(sqlite3, "SQLITE_LIMIT_COLUMN", 2)

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
#: Functions that reach past the query: ``fts3_tokenizer`` tells a pointer into the library and
#: takes one to call (when SQLite is built with it), ``load_extension`` loads code.
_UNSAFE_FUNCTIONS = {"fts3_tokenizer", "load_extension"}
#: Setting up a table-valued function (``json_each``, ``pragma_table_info``) on a new connection,
#: SQLite asks to update its schema table. No statement of the caller's gets that far: SQLite
#: refuses to change the schema table unless ``writable_schema`` is set, a pragma denied here,
#: and the file is opened read-only.
_SCHEMA_TABLES = {"sqlite_master", "sqlite_schema"}
_READ_ONLY_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "foreign_key_list", "database_list"}
_ACTIONS = (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW",
    "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX", "DROP_TEMP_TABLE",
    "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA", "READ", "SELECT",
    "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE", "DROP_VTABLE",
    "FUNCTION", "SAVEPOINT", "RECURSIVE",
)  # fmt: skip
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{name}"): name.lower().replace("_", " ") for name in _ACTIONS if hasattr(sqlite3, f"SQLITE_{name}")
}


class _Rows(TypedDict):
    columns: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool


class QueryResult(_Rows, total=False):
    """What ``sql_query`` returns: the column names, the rows, and ``note`` saying which limit cut them."""

    note: str


_EXAMPLES: list[dict[str, Any]] = [
    {"description": "the tables of the database", "arguments": {"sql": "SELECT name FROM sqlite_master WHERE type = 'table'"}},
    {
        "description": "values go in ? placeholders",
        "arguments": {"sql": "SELECT ? + 1 AS next, upper(?) AS loud", "params": [41, "hi"]},
    },
    {"description": "anything but reading is refused", "arguments": {"sql": "DROP TABLE items"}, "error": "ToolArgumentError"},
]


def _authorizer(denied: list[str]) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    def decide(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _UNSAFE_FUNCTIONS:
            denied.append(f"call {arg2}()")
            return sqlite3.SQLITE_DENY
        if action in _READ_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_ONLY_PRAGMAS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_UPDATE and arg1 in _SCHEMA_TABLES:
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, f"action {action}")
        if arg1 == "sqlite_master" and action != sqlite3.SQLITE_READ:
            denied.append("change the database schema")
        else:
            denied.append(f"{what} {arg1}" if arg1 else what)
        return sqlite3.SQLITE_DENY

    return decide


def _refuse(
    message: str, got: str | None = None, *, keyword: str = "sql", expected: str = "one read-only SELECT statement"
) -> ToolArgumentError:
    return ToolArgumentError([ArgumentProblem("$.sql", message, keyword, expected, got)])


def _out_of_memory(got: str) -> ToolArgumentError:
    return _refuse(
        "the query needs more memory than this tool may use; select fewer or smaller values, or a simpler query",
        got,
        keyword="limits",
        expected="a query within the tool's memory limit",
    )


def _unencodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_SURROGATE = "text must be valid Unicode (a lone surrogate cannot be stored)"
_INT64 = range(-(2**63), 2**63)
_SHOWN_DIGITS = 30  # an integer parameter past this many digits is told by its digit count
_SHOWN_CHARS = 80  # a text parameter's characters shown, around its lone surrogate


def _digits(value: int) -> int:
    """How many decimal digits ``value`` has, told without ``str`` (which refuses past 4,300 digits)."""
    n = max(1, int(abs(value).bit_length() * 0.30103))  # log10(2): within one of the count
    while 10**n <= abs(value):
        n += 1
    while n > 1 and 10 ** (n - 1) > abs(value):
        n -= 1
    return n


def _param_problems(params: list[Any] | None) -> list[ArgumentProblem]:
    """A problem on ``$.params[i]`` for each parameter SQLite cannot store: an integer past 64 bits, text holding a lone
    surrogate (which UTF-8 cannot hold); ``got`` shows the value (a long integer as its digit count, long text the 80
    characters around its first surrogate)."""
    problems = []
    for i, value in enumerate(params or []):
        if isinstance(value, int) and value not in _INT64:
            digits = _digits(value)
            shown = str(value) if digits <= _SHOWN_DIGITS else f"an integer of {digits:,} digits"
            message = "the integer does not fit SQLite's 64-bit integers"
            problems.append(
                ArgumentProblem(f"$.params[{i}]", message, "range", f"an integer from {-(2**63)} to {2**63 - 1}", shown)
            )
        elif isinstance(value, str) and _unencodable(value):
            at = next(j for j, c in enumerate(value) if "\ud800" <= c <= "\udfff")
            message = f"{_SURROGATE[:-1]}; U+{ord(value[at]):04X} at position {at})"
            start = max(0, at - _SHOWN_CHARS // 2)  # the surrogate shown, however far in
            shown = repr(value[start : start + _SHOWN_CHARS])
            got = shown if start == 0 else f"from position {start}: {shown}"
            problems.append(ArgumentProblem(f"$.params[{i}]", message, "type", "valid text", got))
    return problems


def _blob(value: bytes) -> dict[str, Any]:
    """A BLOB as JSON can carry it whole: its bytes in base64 (as UTF-8 text they were garbled)."""
    return {"base64": base64.b64encode(value).decode("ascii"), "bytes": len(value)}


def _least_chars(row: tuple[Any, ...]) -> int:
    """Fewer characters than ``row``'s JSON has, told without writing it: a value takes at least one more than its text
    or blob has (quotes, base64; a number, ``null``), the brackets and each ``", "`` between values two."""
    return sum(map(length_hint, row)) + 3 * len(row)


def _take(rows: list[list[Any]], pending: list[list[Any]], room: int) -> tuple[int, bool]:
    """Move ``pending``'s rows, from the first, to ``rows`` while they fit in ``room`` characters: the room left, and
    whether one did not fit. Written once, as the model reads them (a row in a list as it is alone, ``", "`` before all
    but the result's first); row by row only when they do not all fit."""
    whole = rendered_length(pending) - 2 + (2 if rows else 0) if pending else 0
    if whole <= room:
        rows += pending
        pending.clear()
        return room - whole, False
    for row in pending:
        cost = rendered_length(row) + (2 if rows else 0)
        if cost > room:
            break
        rows.append(row)
        room -= cost
    pending.clear()
    return room, True


def _notes(max_rows: int, max_chars: int) -> tuple[str, str, str]:
    """The notes of a cut result: at the row limit, at the character limit, and there before the first row."""
    chars = f"stopped at the character limit ({max_chars} characters of result)"
    return (
        f"stopped at the row limit ({max_rows} rows)",
        chars,
        f"{chars}: the first row alone is longer; select fewer or shorter values",
    )


def _envelope(bare: int, note: str | None, row_count: int) -> int:
    """The characters of a result's envelope (all but its rows' own) measured ``bare`` (no note, ``truncated`` false,
    ``row_count`` 0), with ``note`` (and ``truncated`` true) and ``row_count``."""
    digits = len(str(row_count)) - 1
    if note is None:
        return bare + digits
    return bare + digits - 1 + len(', "note": ') + len(json.dumps(note))  # "true" is one shorter than "false"


def _min_chars() -> int:
    """:data:`MIN_CHARS`: the least ``max_chars`` that holds a result cut at it (the note names it)."""
    bare = rendered_length({"columns": [""], "rows": [], "row_count": 0, "truncated": False})
    least = 0
    while least < (need := _envelope(bare, _notes(0, least)[1], 0)):
        least = need
    return least


#: The least ``max_chars``: what a result cut at it takes at its least (one column named "", no row, the note that
#: the character limit cut it). A lower one is refused (``ValueError``).
MIN_CHARS = _min_chars()


_MAX_FLOAT = sys.float_info.max  # an integer time_limit past it cannot be added to a clock's time
_PARAM = "string or integer or number or null"  # the schema's type of a parameter, as the validation plugin words it


def _shown_limit(value: object) -> str:
    """A limit as a refusal shows it: its ``repr`` cut to 60 characters, a long integer (``str`` refuses past 4,300
    digits) as its bit count."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length():,} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_limits(**limits: object) -> None:
    """A ``ValueError`` naming the first limit that is not an integer (``bool`` is not one) of at least 1, a
    ``max_chars`` below :data:`MIN_CHARS`, or a ``time_limit`` that is not a positive finite number of seconds: a
    ``max_rows`` of -1, 2.5 or "10" meant no row limit at all."""
    for name, value in limits.items():
        if name == "time_limit":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= _MAX_FLOAT:
                raise ValueError(f"time_limit must be a positive finite number of seconds, not {_shown_limit(value)}")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer of at least 1, not {_shown_limit(value)}")
        elif name == "max_chars" and value < MIN_CHARS:
            raise ValueError(
                f"max_chars must be at least {MIN_CHARS:,} (what a result cut at it takes at its least: one column "
                f"named '', no row, the note that the character limit cut it), not {value:,}"
            )


def _type_problems(sql: object, params: object) -> list[ArgumentProblem]:
    """The arguments' types checked as the schema states them, also without the validation plugin (``sql`` 5 failed
    as a ``TypeError``; ``params`` "abc" bound its characters one by one). Of a parameter, the JSON values the schema
    does not take (``true``, an array, an object); a caller in the process may bind ``bytes`` as a blob."""
    problems = [] if isinstance(sql, str) else [ArgumentProblem.mismatch("$.sql", "string", sql)]
    if params is not None and not isinstance(params, (list, tuple)):
        problems.append(ArgumentProblem.mismatch("$.params", "array or null", params))
    elif params is not None:
        problems += [
            ArgumentProblem.mismatch(f"$.params[{i}]", _PARAM, value)
            for i, value in enumerate(params)
            if isinstance(value, (bool, list, tuple, dict))
        ]
    return problems


#: Stored text as ``str``, each invalid UTF-8 byte sequence as U+FFFD: SQLite does not check that text is UTF-8, and
#: Python's default (strict) failed the query, a failure of the data blamed on the query.
_TEXT = functools.partial(str, encoding="utf-8", errors="replace")


def _cut_to_note(
    rows: list[list[Any]], used: int, bare: int, max_chars: int, max_rows: int, *, cut: bool, more: bool
) -> str | None:
    """The note of a result of ``rows`` (taking ``used`` characters as written in it) within ``max_chars``, after
    ``rows`` is cut (from its end) to what fits beside that very note: none when they are all the query's and fit,
    the row limit's when ``max_rows`` of them fit with it and the query has ``more``, else the character limit's, and
    with no row left, the longer one saying the first row alone is longer, where that fits."""
    at_rows, at_chars, at_first = _notes(max_rows, max_chars)
    if not cut and not more and used <= max_chars - _envelope(bare, None, len(rows)):
        return None
    if not cut and more and used <= max_chars - _envelope(bare, at_rows, len(rows)):
        return at_rows
    while rows and used > max_chars - _envelope(bare, at_chars, len(rows)):
        used -= rendered_length(rows.pop()) + (2 if rows else 0)
    return at_chars if rows or _envelope(bare, at_first, 0) > max_chars else at_first


#: SQLite's result codes (sqlite3.h; the low byte of an extended code) of a failure of the database, not of the query.
_BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED: another connection holds a lock
_BROKEN = {3, 10, 11, 14, 15, 26}  # PERM, IOERR, CORRUPT, CANTOPEN, PROTOCOL, NOTADB
#: SQLITE_READONLY (and READONLY_DIRECTORY, _CANTINIT, _CANTLOCK, _RECOVERY, _ROLLBACK, _DBMOVED): SQLite had to write
#: beside the database to read it and could not. Never the query's: the authorizer refuses a write first.
_READONLY = 8
_RETRY_AFTER = 1.0
#: Seconds SQLite waits for another connection's lock (at most ``time_limit``, and within it): then the
#: attempt ends busy, and a retry policy's waits between attempts are the retry plugin's, within its ``total``.
_BUSY_WAIT = 1.0


def _unavailable(path: str | Path, exc: sqlite3.Error) -> ToolError:
    return ToolError(
        f"The database {str(path)!r} is unavailable: {exc}. The query is not at fault; the database needs repair or "
        "configuration by its operator."
    )


def _database_failure(path: str | Path, exc: sqlite3.Error) -> ToolError | None:
    """The error for a failure of the database itself (busy, locked, unreadable), or None when the query may be at fault."""
    code: int | None = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _BUSY:
        return RetryableError(
            f"The database is busy: {exc} (another connection holds a lock on it). The query is not at fault; "
            f"try again in {_RETRY_AFTER:g} s or later.",
            retry_after=_RETRY_AFTER,
        )
    if code is not None and code & 0xFF in _BROKEN:
        return _unavailable(path, exc)
    if code is not None and code & 0xFF == _READONLY:
        name = getattr(exc, "sqlite_errorname", None)  # READONLY_DIRECTORY, READONLY_CANTINIT, ...
        return ToolError(
            f"The database {str(path)!r} is unavailable: {exc}{f' ({name})' if name else ''}. The query is not at "
            "fault; SQLite must write beside the database to read it (a database in WAL mode that no connection has "
            "open needs its -wal and -shm files) and this tool's user cannot. Its operator must let this tool's user "
            "write the database's directory and those files, keep a connection to it open, or switch it to "
            "PRAGMA journal_mode = DELETE."
        )
    return None


#: SQLite's message when the authorizer's callback failed: Python could not decode the names it was given.
_AUTH_FAILED = re.compile(r"access to .* is prohibited", re.DOTALL)


def _undecodable(conn: sqlite3.Connection, path: str | Path, exc: UnicodeDecodeError, got: str) -> ToolError:
    """The error for text SQLite passed to Python that is not valid UTF-8 (SQLite checks none), which Python's sqlite3
    cannot decode: a name in the schema (a table, a column, a view's) is the database's fault, and no query can read
    past it; an error message the query's own values made (``JSON path error near '\xff'``) is the query's.

    A name is told by SQLite's message when the authorizer, given names it could not decode, denied the read (it
    denies no read otherwise), or by the invalid bytes occurring in a schema entry that is not valid UTF-8.
    """
    raw = bytes(exc.object)
    text = raw.decode("utf-8", errors="replace")
    if _AUTH_FAILED.fullmatch(text) or _in_schema(conn, raw[exc.start : exc.end]):
        return ToolError(
            f"The database {str(path)!r} cannot be read by this query: its schema holds a name that is not valid UTF-8, "
            f"which Python's sqlite3 cannot read (SQLite's text: {text[:200]!r}, each invalid byte sequence shown as "
            "U+FFFD). The query is not at fault; the database's operator must rename it to valid UTF-8."
        )
    return _refuse(f"SQLite refused the query: {text}", got)


def _in_schema(conn: sqlite3.Connection, invalid: bytes) -> bool:
    """Whether the byte sequence ``invalid`` occurs in a schema entry (a name or statement) that is not valid UTF-8."""
    try:
        entries = conn.execute(
            "SELECT name, sql FROM (SELECT CAST(name AS BLOB) AS name, CAST(sql AS BLOB) AS sql FROM sqlite_master) "
            "WHERE instr(name, ?1) OR instr(sql, ?1)",
            [invalid],
        ).fetchall()
    except (sqlite3.Error, UnicodeDecodeError):  # the deadline passed, the file went away: not told
        return False
    for entry in (e for row in entries for e in row if isinstance(e, bytes) and invalid in e):
        try:
            entry.decode("utf-8")
        except UnicodeDecodeError:
            return True
    return False


def _memory_bounded() -> bool:
    """Whether this process's address space is limited (the timeout plugin's process-mode worker, Linux)."""
    try:
        import resource
    except ImportError:  # Windows
        return False
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return soft != resource.RLIM_INFINITY


def run_query(
    path: str | Path,
    sql: str,
    params: list[Any] | None = None,
    *,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
    max_chars: int = MAX_CHARS,
    max_columns: int = MAX_COLUMNS,
    time_limit: float = TIME_LIMIT,
    clock: Clock | None = None,
) -> QueryResult:
    """Run one read-only query on the SQLite file at ``path``, within the row, size, column and time limits.

    A limit of the wrong type or below its least is a ``ValueError`` naming it; ``sql`` or ``params`` of the wrong type
    a :class:`ToolArgumentError` on ``$.sql``, ``$.params`` or ``$.params[i]``.
    """
    _check_limits(max_rows=max_rows, max_bytes=max_bytes, max_chars=max_chars, max_columns=max_columns, time_limit=time_limit)
    if problems := _type_problems(sql, params):
        raise ToolArgumentError(problems)
    if not Path(path).is_file():
        raise ToolError(f"The database {str(path)!r} does not exist; set {DB_ENV} to a SQLite file.")
    now = (clock or SystemClock()).now
    got = repr(sql[:80])
    deadline = now() + time_limit  # the wait for a lock included
    try:
        # Quoted: a "#", "?" or "%" in the path would end it or be read as URI syntax, dropping mode=ro.
        uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=min(_BUSY_WAIT, time_limit))
    except sqlite3.Error as exc:
        raise _database_failure(path, exc) or _unavailable(path, exc) from None
    denied: list[str] = []
    rows: list[list[Any]] = []
    note = None
    try:
        conn.text_factory = _TEXT
        # No value past max_bytes, no row past max_columns is built.
        conn.setlimit(_LIMIT_LENGTH, min(max(1, max_bytes), 2**31 - 1))  # SQLite caps both at its own maximum
        # The schema read first, under SQLite's own column limit: read under max_columns, a table, index or
        # view wider than that made the whole database "malformed", whatever the query read of it.
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 0").fetchall()
        except sqlite3.Error as exc:
            raise _database_failure(path, exc) or _unavailable(path, exc) from None
        conn.setlimit(_LIMIT_COLUMN, min(max(1, max_columns), 2**31 - 1))
        if _memory_bounded():
            # Sorts, DISTINCT and temporary tables in memory, not in temporary files: within max_memory, which bounds
            # memory, not disk (a query wrote 1.3 GB of them in its 5 s). Set before the authorizer, which refuses it to
            # the query. Where nothing bounds memory (the caller's process), SQLite's default stands: they spill to files.
            conn.execute("PRAGMA temp_store = MEMORY")
        conn.set_authorizer(_authorizer(denied))
        conn.set_progress_handler(lambda: int(now() > deadline), _PROGRESS_STEPS)
        try:
            cursor = conn.execute(sql, params or [])
            if cursor.description is None:
                raise _refuse("the statement returned no rows; only SELECT queries run here", got)
            columns = [d[0] for d in cursor.description]
            # The least envelope a result has (no note, no row count's further digits): the rows are taken within what
            # it leaves, then cut to the room the envelope actually written leaves (its note, its row count).
            bare = rendered_length({"columns": columns, "rows": [], "row_count": 0, "truncated": False})
            room = max_chars - bare
            pending: list[list[Any]] = []  # rows taken, measured _CHUNK at a time
            least = 0  # fewer characters than the pending rows take
            cut = more = False
            for row in cursor:  # each step runs under the progress handler, so the deadline holds here too
                if len(rows) + len(pending) >= max_rows:
                    more = True
                    break
                least += _least_chars(row) + (2 if rows or pending else 0)
                if least > room:  # surely past the room: not converted or written (up to max_columns * max_bytes)
                    cut = True
                    break
                pending.append([_blob(v) if type(v) is bytes else v for v in row])
                if len(pending) == _CHUNK:
                    room, cut = _take(rows, pending, room)
                    least = 0
                    if cut:
                        break
            room, over = _take(rows, pending, room)
            note = _cut_to_note(rows, max_chars - bare - room, bare, max_chars, max_rows, cut=cut or over, more=more)
            if _envelope(bare, note, len(rows)) > max_chars:  # no row left, and the column names still too long
                raise _refuse(
                    f"even with no row, the column names and the note that the result was cut take more than the "
                    f"{max_chars:,} characters this tool may return; select fewer columns or name them shorter (AS)",
                    got,
                    keyword="limits",
                    expected=f"a result within {max_chars:,} characters",
                )
        except sqlite3.ProgrammingError as exc:
            if "binding" in str(exc).lower():  # "Incorrect number of bindings supplied"
                raise ToolArgumentError(
                    [ArgumentProblem("$.params", str(exc), "params", "one value for each ? placeholder", str(len(params or [])))]
                ) from None
            raise _refuse(str(exc), got) from None
        except OverflowError as exc:  # a parameter past SQLite's 64-bit integers
            problems = _param_problems(params) or [
                ArgumentProblem("$.params", f"a parameter does not fit SQLite: {exc}", "range", "integers within 64 bits")
            ]
            raise ToolArgumentError(problems) from None
        except UnicodeEncodeError:  # a lone surrogate in the query or a parameter
            problems = _param_problems(params)
            if _unencodable(sql) or not problems:
                problems.insert(0, ArgumentProblem("$.sql", _SURROGATE, "type", "valid text", got))
            raise ToolArgumentError(problems) from None
        except UnicodeDecodeError as exc:  # SQLite's text (a name, an error message) that is not UTF-8
            raise _undecodable(conn, path, exc, got) from None
        except sqlite3.DataError as exc:
            if "too big" not in str(exc):
                raise _refuse(f"SQLite refused the query: {exc}", got) from None
            raise _refuse(
                f"a value the query reads or computes is longer than the limit of {max_bytes} bytes: a stored value "
                "that long cannot be read here at all, not even by length() or substr() (leave its column out, or "
                "its rows by a condition on another column); a computed one, compute less",
                got,
                keyword="limits",
                expected=f"values of at most {max_bytes} bytes",
            ) from None
        except MemoryError:  # past the tool's memory_limit (process mode) or the machine's memory
            raise _out_of_memory(got) from None
        except sqlite3.DatabaseError as exc:
            if "malformed database schema" in str(exc) and "too many columns" in str(exc):
                # Read again under max_columns: another connection changed the schema after it was read
                raise RetryableError(
                    "The database's schema changed while the query was being prepared; the query is not at fault: "
                    f"try again in {_RETRY_AFTER:g} s.",
                    retry_after=_RETRY_AFTER,
                ) from None
            if (failure := _database_failure(path, exc)) is not None:
                raise failure from None
            if "out of memory" in str(exc):
                raise _out_of_memory(got) from None
            if "too many columns" in str(exc):
                raise _refuse(
                    f"the query returns more than {max_columns} columns (a view read expands to all of its own); "
                    "select fewer columns",
                    got,
                    keyword="limits",
                    expected=f"at most {max_columns} columns",
                ) from None
            if denied:
                action = next(
                    (d for d in denied if d != "change the database schema"), denied[0]
                )  # the statement, not its bookkeeping
                raise _refuse(
                    f"the query tried to {action}, which is not allowed: only read-only SELECT queries run here", got
                ) from None
            if "interrupted" in str(exc):
                raise ToolTimeout(time_limit) from None
            raise _refuse(f"SQLite refused the query: {exc}", got) from None
    finally:
        conn.close()
    result: QueryResult = {"columns": columns, "rows": rows, "row_count": len(rows), "truncated": note is not None}
    if note is not None:
        result["note"] = note
    return result


class _Query:
    """Run one read-only SELECT query on the configured SQLite database.

    Args:
        sql: A single SELECT (or WITH ... SELECT) statement; use ? placeholders for values.
        params: Values for the ? placeholders, in order.
    """

    # A callable object, not a closure: process mode pickles it to its worker. Pickled, it
    # carries the database as the caller sees it then (``$HARNESS_ONE_SQL_DB``, the cwd).

    def __init__(self, path: str | Path | None, limits: dict[str, Any], clock: Clock | None) -> None:
        self.path, self.limits, self.clock = path, limits, clock

    def _target(self) -> str | Path | None:
        return self.path if self.path is not None else os.environ.get(DB_ENV)

    def __reduce__(self) -> tuple[type[_Query], tuple[str, dict[str, Any], Clock | None]]:
        target = self._target()
        return (_Query, (os.path.abspath(target) if target else "", self.limits, self.clock))

    def __call__(self, sql: str, params: list[str | int | float | None] | None = None) -> QueryResult:
        target = self._target()
        if not target:
            raise ToolError(f"No database configured: set {DB_ENV} to a SQLite file.")
        return run_query(target, sql, params, clock=self.clock, **self.limits)


def make_sql_query(
    path: str | Path | None = None,
    *,
    name: str = "sql_query",
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
    max_chars: int = MAX_CHARS,
    max_columns: int = MAX_COLUMNS,
    max_memory: int = MAX_MEMORY,
    time_limit: float = TIME_LIMIT,
    clock: Clock | None = None,
) -> Tool:
    """A ``sql_query`` tool bound to ``path`` (default: ``$HARNESS_ONE_SQL_DB`` at call time) and its limits.

    The tool runs in ``process`` timeout mode: a query still running a second after
    ``time_limit`` (one long SQLite step, a costly preparation, which the progress handler
    cannot interrupt) is killed with its worker, and a query may add at most ``max_memory``
    bytes of address space there (Linux). Where process mode cannot run (not POSIX), and with a
    ``clock`` of the caller's (tests), it runs in the caller's process instead: ``thread``
    mode (abandoned a second past ``time_limit``), or ``none`` with a clock.

    A limit of the wrong type or below its least is a ``ValueError`` naming it: each is an integer (not ``bool``) of at
    least 1, ``max_chars`` at least :data:`MIN_CHARS`, ``time_limit`` a positive finite number of seconds.
    """
    _check_limits(
        max_rows=max_rows,
        max_bytes=max_bytes,
        max_chars=max_chars,
        max_columns=max_columns,
        max_memory=max_memory,
        time_limit=time_limit,
    )
    limits = {
        "max_rows": max_rows,
        "max_bytes": max_bytes,
        "max_chars": max_chars,
        "max_columns": max_columns,
        "time_limit": time_limit,
    }
    return defineTool(
        registry=None,
        name=name,
        idempotent=True,
        read_only=True,
        open_world=False,
        timeout=time_limit + 1,
        timeout_mode="none" if clock is not None else "process" if _PROCESSES else "thread",
        rate_limit={"rate": 10, "burst": 20},
        tags=["database"],
        examples=_EXAMPLES,
        options={"memory_limit": max_memory},
    )(_Query(path, limits, clock)).tool


sql_query = make_sql_query()
