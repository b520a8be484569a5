"""Idempotency keys, carried over: the record of a thread-mode tool that fails after its caller stopped
waiting has the call's secret values masked, and one plugin is shared by registries whose ``State`` objects
are on one SQLite file (the records are rows of that file)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from harness_one import Call, IdempotencyConflict, PluginError, ToolExecutionError, ToolRegistry, ToolTimeout
from harness_one.state import MemoryStore, Record, SQLiteStore, State
from harness_one_plugins import ConcurrencyPlugin, IdempotencyPlugin

SECRET = "hunter2-Tr0ub4dor"
TOKEN = "sk-live-4242424242"


class Finished:
    """A store's ``finish`` noted by an event: the key of a tool that ran on was stored from its thread."""

    def __init__(self) -> None:
        self.stored = threading.Event()

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().finish(*args, **kwargs)  # type: ignore[misc]
        finally:
            self.stored.set()


class NotedMemory(Finished, MemoryStore):
    def __init__(self) -> None:
        Finished.__init__(self)
        MemoryStore.__init__(self)


class NotedSQLite(Finished, SQLiteStore):
    def __init__(self, path: Path) -> None:
        Finished.__init__(self)
        SQLiteStore.__init__(self, path)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return NotedMemory() if request.param == "memory" else NotedSQLite(tmp_path / "idem.sqlite3")


@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_thread_mode_tool_failing_after_its_timeout_keeps_its_secrets_masked(store: Any, how: str) -> None:
    """The record of a tool that failed after its caller's ToolTimeout was built from its exception alone:
    the replay, its to_dict() and the stored record showed the password its arguments held."""
    go = threading.Event()
    reg = ToolRegistry(autoload=False)
    reg.plugins.replace("idempotency", IdempotencyPlugin(store=store))

    def login(user: str, password: str) -> str:
        assert go.wait(10)
        raise ValueError(f"bad {password} for {user} with {TOKEN}")

    reg.add(login, timeout=0.05, timeout_mode="thread")
    arguments = {"user": "bob", "password": SECRET}
    context = {"api_key": TOKEN}

    def call() -> Any:
        if how == "call":
            return reg.try_call("login", arguments, context=context, idempotency_key="k1")
        return asyncio.run(asyncio.wait_for(reg.atry_call("login", arguments, context=context, idempotency_key="k1"), 10))

    first = call()
    assert isinstance(first.error, ToolTimeout)
    go.set()
    assert store.stored.wait(10)  # the tool failed, and its key was finished from its thread
    again = call()
    assert isinstance(again.error, ToolExecutionError) and again.error.replayed
    assert again.error.message == "Tool 'login' failed: ValueError: bad [REDACTED] for bob with [REDACTED]"
    assert SECRET not in str(again.error.to_dict()) and TOKEN not in str(again.error.to_dict())
    found = store.begin("login", "k1", "", 0.0, 1.0)
    assert isinstance(found, Record) and found.error is not None
    assert SECRET not in str(found.error) and TOKEN not in str(found.error) and "[REDACTED]" in found.error["message"]


def on(state: State, plugin: Any) -> ToolRegistry:
    reg = ToolRegistry(autoload=False, state=state)
    reg.plugins.replace(plugin.name, plugin)
    return reg


@pytest.mark.parametrize("spelling", ["url", "relative", "symlink"])
def test_registries_on_states_of_one_sqlite_file_share_one_idempotency_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """The second State on the file was refused (only the same State object was the same state), though
    the records are rows of the file: a key run in one registry is replayed in the other, and a key
    claimed in one is busy in the other."""
    file = tmp_path / "state.sqlite3"
    monkeypatch.chdir(tmp_path)
    if spelling == "symlink":
        os.symlink(tmp_path, tmp_path / "link")
    other = {"url": f"sqlite:///{file}", "relative": "state.sqlite3", "symlink": str(tmp_path / "link" / "state.sqlite3")}
    plugin = IdempotencyPlugin()
    first, second = on(State(str(file)), plugin), on(State(other[spelling]), plugin)
    runs: list[int] = []
    started, go = threading.Event(), threading.Event()

    def charge(amount: int) -> int:
        runs.append(amount)
        if amount == 2:
            started.set()
            assert go.wait(10)
        return amount

    for reg in (first, second):
        reg.add(charge)
    assert first.call("charge", {"amount": 1}, idempotency_key="pay-1") == 1
    assert second.call("charge", {"amount": 1}, idempotency_key="pay-1") == 1 and runs == [1]  # replayed

    running = threading.Thread(target=second.call, args=("charge", {"amount": 2}), kwargs={"idempotency_key": "pay-2"})
    running.start()
    try:
        assert started.wait(10)
        busy = first.try_call("charge", {"amount": 2}, idempotency_key="pay-2")  # claimed through the other registry
        assert isinstance(busy.error, IdempotencyConflict)
    finally:
        go.set()
        running.join(10)
    assert not running.is_alive()
    assert first.call("charge", {"amount": 2}, idempotency_key="pay-2") == 2 and runs == [1, 2]  # replayed


def test_states_of_two_sqlite_files_are_still_refused_saying_what_is_one_state(tmp_path: Path) -> None:
    plugin = IdempotencyPlugin()
    first = on(State(str(tmp_path / "a.sqlite3")), plugin)  # (kept: a registry collected lets its plugin go)
    with pytest.raises(PluginError, match="or SQLite at the same file, is the same state"):
        on(State(str(tmp_path / "b.sqlite3")), plugin)
    assert first.plugins.get("idempotency") is plugin
    apart = IdempotencyPlugin()
    held = on(State(":memory:"), apart)
    with pytest.raises(PluginError, match="SQLite at the same file"):  # an in-memory SQLite database is one per connection
        on(State(":memory:"), apart)
    assert held.plugins.get("idempotency") is apart


def test_another_plugin_on_states_of_one_sqlite_file_is_still_refused(tmp_path: Path) -> None:
    """A SQLite state keeps everything but the idempotency records in its State object: not shared."""
    plugin = ConcurrencyPlugin()
    first = on(State(str(tmp_path / "s.sqlite3")), plugin)  # (kept: a registry collected lets its plugin go)
    with pytest.raises(PluginError, match="only the same State object, or Redis at the same URL and key prefix, is"):
        on(State(str(tmp_path / "s.sqlite3")), plugin)
    assert first.plugins.get("concurrency") is plugin


def test_a_relative_sqlite_path_is_the_file_of_the_directory_the_state_was_made_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A State on a relative path keeps the file it named when it was made: a later chdir neither moves its
    records nor makes another directory's file of that name "the same file" for a shared plugin."""
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    monkeypatch.chdir(first_dir)
    plugin = IdempotencyPlugin()
    first = on(State("s.db"), plugin)
    monkeypatch.chdir(second_dir)
    first.add(lambda x: x, name="echo")
    assert first.call("echo", {"x": 1}, idempotency_key="k1") == 1
    assert (first_dir / "s.db").exists() and not (second_dir / "s.db").exists()
    with pytest.raises(PluginError, match="or SQLite at the same file, is the same state"):
        on(State(str(second_dir / "s.db")), plugin)
    assert first.plugins.get("idempotency") is plugin


def test_tool_execution_error_of_builds_its_own_class_with_the_held_secrets_masked() -> None:
    class Vendor(ToolExecutionError):
        pass

    reg = ToolRegistry(autoload=False)
    reg.add(lambda password: password, name="login")
    call = Call(reg, reg.get("login"), {"password": "hunter2secret"}, None, "c-1")
    error = Vendor.of(call, ValueError("bad hunter2secret"))
    assert type(error) is Vendor and error.tool == "login" and error.call_id == "c-1"
    assert "hunter2secret" not in error.message and "[REDACTED]" in error.message
