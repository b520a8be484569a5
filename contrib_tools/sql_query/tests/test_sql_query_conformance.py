"""The conformance kit's checks for the harness-one-sql-query distribution."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import harness_one_sql_query as mod
import pytest

from harness_one.testing import ToolPackageTests


class TestSqlQueryConformance(ToolPackageTests):
    distribution = "harness-one-sql-query"

    @pytest.fixture(autouse=True)
    def database(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        """The database the examples query, named by ``HARNESS_ONE_SQL_DB`` as in a deployment."""
        path = tmp_path / "shop.sqlite3"
        with sqlite3.connect(path) as conn:
            conn.executescript("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL);")
        conn.close()
        monkeypatch.setenv(mod.DB_ENV, str(path))
        return path
