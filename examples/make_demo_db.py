"""Create the small SQLite database the scripted session queries."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path


def main(path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(
        "DROP TABLE IF EXISTS items;"
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL);"
        "INSERT INTO items (name, price) VALUES ('tea', 3.5), ('coffee', 4.0), ('cake', 5.25);"
    )
    conn.commit()
    conn.close()


if __name__ == "__main__":
    main(sys.argv[1])
