"""An audit plugin that breaks the conformance kit's checks, one defect per check.

The kit's own tests (``tests/test_conformance.py``) expect exactly these checks to fail:
the name (it has none), the hook specs (an ``on_error`` hook not marked ``@hookimpl``),
faults in hooks (``pre_call`` swallows its own), threads (a SQLite connection usable only
by the thread that opened it) and per-call state (every call id, kept forever).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from harness_one import Call, hookimpl


class BrokenAudit:
    """Records every call in SQLite, and every call id in memory."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("create table audit (tool text, call_id text)")
        self.seen: list[str] = []

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        try:
            self.seen.append(call.call_id)
        except Exception:
            return None
        return None

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.db.execute("insert into audit values (?, ?)", (call.tool.name, call.call_id))

    def harness_on_error(self, call: Call, error: Any) -> None:
        self.db.execute("insert into audit values (?, ?)", (call.tool.name, "error"))
