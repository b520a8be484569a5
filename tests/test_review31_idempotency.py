"""Review 31, idempotency: a replay from a store that keeps JSON (SQLite, Redis) shows the model the text it read the
first time for a result whose JSON is a string (a date, a Decimal, a UUID, bytes): it showed it without its quotes
(and bytes' NUL as a raw control character), where the in-memory store showed the same text."""

from __future__ import annotations

import datetime
import decimal
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness_one import ToolRegistry

VALUES: dict[str, Any] = {
    "date": datetime.datetime(2024, 1, 2, 3, 4, 5),
    "decimal": decimal.Decimal("1.10"),
    "uuid": uuid.UUID(int=1),
    "bytes": b"\x00ab",
    "text": "plain",
    "list": [1, "a"],
}


@pytest.mark.parametrize("which", sorted(VALUES))
@pytest.mark.parametrize("state", ["memory:", "sqlite"])
def test_a_replay_shows_the_model_the_text_of_the_first_answer(which: str, state: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}" if state == "sqlite" else state
    registry = ToolRegistry(state=url, autoload=False)
    registry.add(lambda which: VALUES[which], name="f", idempotent=True)
    first = registry.try_call("f", {"which": which}, idempotency_key="k1")
    replay = registry.try_call("f", {"which": which}, idempotency_key="k1")
    assert first.ok and replay.ok and not replay.ran
    assert replay.for_model() == first.for_model()
