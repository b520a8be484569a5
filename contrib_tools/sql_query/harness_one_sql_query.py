"""``sql_query``: read-only SELECT queries on a configured SQLite file.

Three locks keep it read-only: the file is opened with ``mode=ro``; an authorizer allows
only reading (no writes, no schema changes, no ``ATTACH``, no pragma that sets a value); and
only one statement runs per call. A row limit and a time limit bound the work.

The database is named by ``HARNESS_ONE_SQL_DB`` (read at call time), or build your own
tool with :func:`make_sql_query`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness_one import ArgumentProblem, Tool, ToolArgumentError, ToolError, ToolTimeout, defineTool

__all__ = ["DB_ENV", "make_sql_query", "run_query", "sql_query"]

DB_ENV = "HARNESS_ONE_SQL_DB"
MAX_ROWS = 200
TIME_LIMIT = 5.0

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
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


def _authorizer(denied: list[str]) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    def decide(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
        if action in _READ_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_ONLY_PRAGMAS:
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, f"action {action}")
        if arg1 == "sqlite_master" and action != sqlite3.SQLITE_READ:
            denied.append("change the database schema")
        else:
            denied.append(f"{what} {arg1}" if arg1 else what)
        return sqlite3.SQLITE_DENY

    return decide


def _refuse(message: str, got: str | None = None) -> ToolArgumentError:
    return ToolArgumentError([ArgumentProblem("$.sql", message, "sql", "one read-only SELECT statement", got)])


def run_query(
    path: str | Path, sql: str, params: list[Any] | None = None, *, max_rows: int = MAX_ROWS, time_limit: float = TIME_LIMIT
) -> dict[str, Any]:
    """Run one read-only query on the SQLite file at ``path``."""
    if not Path(path).is_file():
        raise ToolError(f"The database {str(path)!r} does not exist; set {DB_ENV} to a SQLite file.")
    conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, timeout=time_limit)
    denied: list[str] = []
    deadline = time.monotonic() + time_limit
    try:
        conn.set_authorizer(_authorizer(denied))
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
        try:
            cursor = conn.execute(sql, params or [])
            rows = cursor.fetchmany(max_rows + 1)
        except (sqlite3.ProgrammingError, sqlite3.Warning) as exc:  # Python 3.10 raises Warning for two statements
            raise _refuse(str(exc), repr(sql[:80])) from None
        except sqlite3.DatabaseError as exc:
            if denied:
                action = next(
                    (d for d in denied if d != "change the database schema"), denied[0]
                )  # the statement, not its bookkeeping
                raise _refuse(
                    f"the query tried to {action}, which is not allowed: only read-only SELECT queries run here", repr(sql[:80])
                ) from None
            if "interrupted" in str(exc):
                raise ToolTimeout(time_limit) from None
            raise _refuse(f"SQLite refused the query: {exc}", repr(sql[:80])) from None
        columns = [d[0] for d in cursor.description or ()]
        if cursor.description is None:
            raise _refuse("the statement returned no rows; only SELECT queries run here", repr(sql[:80]))
    finally:
        conn.close()
    return {
        "columns": columns,
        "rows": [list(r) for r in rows[:max_rows]],
        "row_count": min(len(rows), max_rows),
        "truncated": len(rows) > max_rows,
    }


def make_sql_query(
    path: str | Path | None = None, *, name: str = "sql_query", max_rows: int = MAX_ROWS, time_limit: float = TIME_LIMIT
) -> Tool:
    """A ``sql_query`` tool bound to ``path`` (default: ``$HARNESS_ONE_SQL_DB`` at call time)."""

    def sql_query(sql: str, params: list[str | int | float | None] | None = None) -> dict[str, Any]:
        """Run one read-only SELECT query on the configured SQLite database.

        Args:
            sql: A single SELECT (or WITH ... SELECT) statement; use ? placeholders for values.
            params: Values for the ? placeholders, in order.
        """
        target = path if path is not None else os.environ.get(DB_ENV)
        if not target:
            raise ToolError(f"No database configured: set {DB_ENV} to a SQLite file.")
        return run_query(target, sql, params, max_rows=max_rows, time_limit=time_limit)

    return defineTool(
        registry=None,
        name=name,
        idempotent=True,
        read_only=True,
        open_world=False,
        timeout=time_limit + 5,
        timeout_mode="none",
        rate_limit={"rate": 10, "burst": 20},
        tags=["database"],
    )(sql_query).tool


sql_query = make_sql_query()
