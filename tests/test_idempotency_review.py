"""Idempotency keys after review: a tool that ran keeps its key (an outcome not storable as it is, a plugin
failing after it returned), a key is matched by the context of a tool that reads it, and in-memory
replayed errors are copies."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from harness_one import (
    Call,
    PluginError,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    hookimpl,
)
from harness_one_plugins import IdempotencyPlugin, MemoryStore, SQLiteStore
from harness_one_plugins.idempotency import OutcomeNotReplayable, Record


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "idem.sqlite3")


def registry_with(store: Any, *extra: Any) -> ToolRegistry:
    plugins: dict[str, Any] = {"idempotency": IdempotencyPlugin(store=store)}
    plugins.update({plugin.name: plugin for plugin in extra})
    return ToolRegistry(plugins=plugins, autoload=False)


@dataclasses.dataclass
class Order:
    id: int
    total: decimal.Decimal


def test_a_result_the_store_cannot_hold_as_it_is_runs_once_and_replays_as_the_model_read_it(store: Any) -> None:
    """A datetime, a dataclass with a Decimal, a lock: SQLite's json.dumps refused them (MemoryStore the lock)
    and the key was released, so every retry with the key ran the tool (a payment charged each time)."""
    reg = registry_with(store)
    runs: list[str] = []

    def placed(sku: str) -> dict[str, Any]:
        runs.append(sku)
        return {"order": len(runs), "created": datetime.datetime(2026, 12, 5, 17, 0), "lock": threading.Lock()}

    def typed(sku: str) -> Order:
        runs.append(sku)
        return Order(len(runs), decimal.Decimal("9.99"))

    reg.add(placed, name="placed")
    reg.add(typed, name="typed")
    for tool in ("placed", "typed"):
        runs.clear()
        first = reg.try_call(tool, {"sku": "A"}, idempotency_key="order-42")
        replays = [reg.try_call(tool, {"sku": "A"}, idempotency_key="order-42") for _ in range(2)]
        assert runs == ["A"], tool
        copyable = isinstance(store, MemoryStore) and tool == "typed"  # kept in memory as it is (a copy)
        for replay in replays:
            assert replay.ok and replay.for_model() == first.for_model()  # the text the model read, each time
            assert replay.value == (first.value if copyable else json.loads(first.for_model()))  # else as JSON data
    assert reg.stats()["idempotency"]["stored"] == 2


def test_an_error_with_fields_that_are_not_json_is_kept_as_its_json_form(store: Any) -> None:
    class Refused(ToolError):
        kind = "refused"

        def __init__(self, message: str = "", *, when: Any = None, **kwargs: Any) -> None:
            super().__init__(message, **kwargs)
            self.when = when

        def to_dict(self) -> dict[str, Any]:
            return {**super().to_dict(), "when": self.when}

    reg = registry_with(store)
    runs: list[int] = []

    def refuse() -> None:
        runs.append(1)
        raise Refused("closed today", when=datetime.date(2026, 12, 5))

    reg.add(refuse)
    assert isinstance(reg.try_call("refuse", idempotency_key="k").error, Refused)
    replayed = reg.try_call("refuse", idempotency_key="k").error
    assert replayed is not None and replayed.replayed and replayed.message == "closed today" and runs == [1]


class _Refusing(MemoryStore):
    """A store that holds no value at all, as Redis refuses one over ``max_value``."""

    def finish(self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None) -> bool:
        if record.value is not None:
            raise ValueError("over the size a record holds")
        return super().finish(scope, key, record, owner=owner, now=now)


def test_an_outcome_no_store_holds_keeps_the_key_as_not_replayable() -> None:
    """Not storable even as JSON: the key keeps OutcomeNotReplayable instead of being freed to run again."""
    reg = registry_with(_Refusing())
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or {"receipt": "r-1"}, name="charge")
    assert reg.call("charge", idempotency_key="k") == {"receipt": "r-1"}  # the caller gets what the tool did
    for _ in range(2):
        again = reg.try_call("charge", idempotency_key="k").error
        assert isinstance(again, OutcomeNotReplayable) and again.replayed and again.kind == "idempotency_not_replayable"
        assert "already ran" in again.message
    assert runs == [1]
    assert reg.stats()["idempotency"]["not_replayable"] == 1


def test_a_scoped_keys_not_replayable_outcome_names_the_callers_key() -> None:
    """With ``scope``, the key stored is the user's and the caller's key together; the message names the caller's."""
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=_Refusing(), scope="user_id")}, autoload=False)
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or {"receipt": "r-1"}, name="charge")
    alice = {"user_id": "alice"}
    assert reg.call("charge", idempotency_key="k", context=alice) == {"receipt": "r-1"}
    again = reg.try_call("charge", idempotency_key="k", context=alice).error
    assert isinstance(again, OutcomeNotReplayable) and "already ran for idempotency key 'k'," in again.message
    assert reg.call("charge", idempotency_key="k", context={"user_id": "bob"}) == {"receipt": "r-1"}  # bob's own k
    assert runs == [1, 1]


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_sqlite_not_replayable_through_either_path(tmp_path: Path, mode: str) -> None:
    """A value SQLite cannot hold (past its length limit, here 64) through ``finish`` and ``afinish``."""
    store = SQLiteStore(tmp_path / "s.sqlite3")
    store.open()
    assert store._conn is not None
    store._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 400)
    reg = registry_with(store)
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or "x" * 1000, name="big")

    def call() -> Any:
        if mode == "call":
            return reg.try_call("big", idempotency_key="k")
        return asyncio.run(reg.atry_call("big", idempotency_key="k"))

    assert call().value == "x" * 1000
    assert isinstance(call().error, OutcomeNotReplayable) and runs == [1]


def test_a_retry_whose_context_changed_replays(store: Any) -> None:
    """A key is matched by the arguments alone: a retry carries a new request id in its context
    (or a ``SecretStr`` whose repr tells nothing), and it must replay, not run the tool again."""
    reg = registry_with(store)
    runs: list[str] = []

    class Secret:
        def __repr__(self) -> str:
            return "Secret('**********')"

    def charge(call: Call, amount: int) -> dict[str, Any]:
        runs.append(call.context["request_id"])
        return {"charged": amount}

    reg.add(charge)
    first = reg.call("charge", {"amount": 5}, context={"request_id": "r1", "token": Secret()}, idempotency_key="k1")
    again = reg.call("charge", {"amount": 5}, context={"request_id": "r2", "token": Secret()}, idempotency_key="k1")
    assert first == again == {"charged": 5} and runs == ["r1"]


def test_memory_replayed_errors_are_copies() -> None:
    """One caller's change to a replayed error's field changed what every later replay got."""

    class QuotaError(ToolError):
        kind = "quota"

        def __init__(self, message: str = "", *, offending: Any = None, **kwargs: Any) -> None:
            super().__init__(message, **kwargs)
            self.offending = offending if offending is not None else []

        def to_dict(self) -> dict[str, Any]:
            return {**super().to_dict(), "offending": self.offending}

    def quota() -> None:
        raise QuotaError("over quota", offending=["a"])

    reg = registry_with(MemoryStore())
    reg.add(quota)
    first = reg.try_call("quota", idempotency_key="q").error
    assert isinstance(first, QuotaError)
    first.offending.append("first caller")  # the caller's own error, whose to_dict() the store was given
    replayed = reg.try_call("quota", idempotency_key="q").error
    assert isinstance(replayed, QuotaError) and replayed.offending == ["a"]
    replayed.offending.append("poison")
    again = reg.try_call("quota", idempotency_key="q").error
    assert isinstance(again, QuotaError) and again.offending == ["a"]


class Audit:
    """A plugin whose post_call (before idempotency's) trips on a passing problem."""

    name = "audit"
    order = 50
    down = True

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        if self.down:
            raise ConnectionError("audit db down")


def test_a_plugin_failing_after_the_tool_returned_leaves_the_key_its_value(store: Any) -> None:
    """The PluginError was stored as the key's outcome for its ttl: the charge was made, its receipt never replayed."""
    audit = Audit()
    reg = registry_with(store, audit)
    charges: list[int] = []

    def charge(amount: int) -> dict[str, Any]:
        charges.append(amount)
        return {"charged": amount, "receipt": "r-1"}

    reg.add(charge)
    first = reg.try_call("charge", {"amount": 5}, idempotency_key="order-8")
    assert isinstance(first.error, PluginError)  # this call fails, as before
    audit.down = False
    again = reg.try_call("charge", {"amount": 5}, idempotency_key="order-8")
    assert again.ok and again.value == {"charged": 5, "receipt": "r-1"} and charges == [5]


def test_a_tool_failure_is_still_the_keys_outcome(store: Any) -> None:
    reg = registry_with(store, Audit())
    runs: list[int] = []

    def failing() -> None:
        runs.append(1)
        raise OSError("card declined")

    reg.add(failing)
    reg.try_call("failing", idempotency_key="k")
    replayed = reg.try_call("failing", idempotency_key="k").error
    assert isinstance(replayed, ToolExecutionError) and replayed.replayed and runs == [1]
