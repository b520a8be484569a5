"""Create the small SQLite database the scripted session queries: ``python examples/make_demo_db.py PATH``."""

from __future__ import annotations

import argparse
import sqlite3
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
    parser = argparse.ArgumentParser(description="Create the small SQLite database the scripted session queries.")
    parser.add_argument("path", metavar="PATH", help="the database file to create (its directory is created too)")
    main(parser.parse_args().path)  # no PATH: the usage and exit 2
