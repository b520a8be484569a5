"""Closing one of several ``State`` objects that share a backend: an idempotency plugin shared by registries
on States of one SQLite file (or of one Redis URL and prefix) keeps the first State's store, and closing that
State closed the store under the others (its file opened again at their next call, then held by no State:
closing the last one left that connection open)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from harness_one import IdempotencyConflict, ToolRegistry
from harness_one.state import State, StateUnavailable
from harness_one_plugins import IdempotencyPlugin


def on(state: State, plugin: Any) -> ToolRegistry:
    reg = ToolRegistry(autoload=False, state=state)
    reg.plugins.replace(plugin.name, plugin)
    reg.add(lambda x: x, name="echo")
    return reg


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[sqlite3.Connection]:
    """Every connection a SQLite store opens, in order."""
    conns: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def noted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conns.append(connect(*args, **kwargs))
        return conns[-1]

    monkeypatch.setattr("harness_one.state._sqlite.sqlite3.connect", noted)
    return conns


def is_open(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:  # closed
        return False
    return True


@pytest.mark.parametrize("first_closed", [True, False])
def test_closing_one_state_on_a_file_leaves_the_shared_store_to_the_other(
    tmp_path: Path, opened: list[sqlite3.Connection], first_closed: bool
) -> None:
    file = str(tmp_path / "state.sqlite3")
    plugin = IdempotencyPlugin()
    first, second = on(State(file), plugin), on(State(f"sqlite:///{file}"), plugin)
    assert second.call("echo", {"x": 1}, idempotency_key="k1") == 1
    assert len(opened) == 1
    closed, other = (first, second) if first_closed else (second, first)
    closed.state.close()
    assert is_open(opened[0])  # the other State still holds it
    assert other.call("echo", {"x": 1}, idempotency_key="k1") == 1 and plugin.replays == 1
    assert len(opened) == 1  # the same connection: the file was not opened again
    other.state.close()  # the last State holding the store closes it
    assert not is_open(opened[0])


def test_a_claim_made_through_the_second_state_outlives_closing_the_first(
    tmp_path: Path, opened: list[sqlite3.Connection]
) -> None:
    file = str(tmp_path / "state.sqlite3")
    plugin = IdempotencyPlugin()
    first, second = on(State(file), plugin), on(State(file), plugin)
    started, go = threading.Event(), threading.Event()

    def pay(amount: int) -> int:
        started.set()
        assert go.wait(10)
        return amount

    first.add(pay)
    second.add(pay)
    running = threading.Thread(target=second.call, args=("pay", {"amount": 5}), kwargs={"idempotency_key": "p"})
    running.start()
    try:
        assert started.wait(10)
        first.state.close()
        assert isinstance(second.try_call("pay", {"amount": 5}, idempotency_key="p").error, IdempotencyConflict)
    finally:
        go.set()
        running.join(10)
    assert not running.is_alive()
    assert second.call("pay", {"amount": 5}, idempotency_key="p") == 5 and plugin.replays == 1
    assert len(opened) == 1 and is_open(opened[0])
    second.state.close()
    assert not is_open(opened[0])


def test_states_on_redis_keys_close_the_shared_link_with_the_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin keeps the first State's Redis store, on its link: the link is closed by the last State (no
    server needed: nothing is sent)."""
    pytest.importorskip("redis")
    plugin = IdempotencyPlugin()
    url = "redis://127.0.0.1:1/0"
    first, second = on(State(url), plugin), on(State(url + "?timeout=1"), plugin)
    link = plugin.store.link  # type: ignore[attr-defined]
    closes: list[object] = []
    monkeypatch.setattr(link, "close", lambda: closes.append(link))
    first.state.close()
    assert closes == []
    second.state.close()
    assert closes == [link]


def test_two_in_memory_sqlite_states_never_share_a_store(tmp_path: Path) -> None:
    """``:memory:`` is a database per connection: a plugin is not shared by two States on it (refused), so each
    registry's store is its own, and closing one State leaves the other's keys as they were."""
    first, second = ToolRegistry(autoload=False, state=State(":memory:")), ToolRegistry(autoload=False, state=State(":memory:"))
    for reg in (first, second):
        reg.add(lambda x: x, name="echo")
        assert reg.call("echo", {"x": 1}, idempotency_key="k") == 1
    assert first.plugins.get("idempotency").store is not second.plugins.get("idempotency").store  # type: ignore[union-attr]
    first.state.close()
    assert second.call("echo", {"x": 1}, idempotency_key="k") == 1  # replayed from its own store
    with pytest.raises(StateUnavailable):  # the closed one's in-memory database is gone: its store stays closed
        first.plugins.get("idempotency").store.begin("echo", "k", "", 0.0, 1.0)  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["rate_limit", "concurrency", "circuit_breaker", "budget"])
def test_every_plugin_kept_on_the_first_states_redis_link_is_held_by_the_later_state(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Not only idempotency: any plugin that keeps the first State's Redis store (its link) when it joins a registry
    on another State at the same keys makes that State hold the link (takes_state), so the last one closes it."""
    pytest.importorskip("redis")
    first_state, second_state = State("redis://127.0.0.1:1/0"), State("redis://127.0.0.1:1/0?timeout=1")
    first = ToolRegistry(autoload=False, state=first_state)
    plugin = first.plugins.get(name)
    assert plugin is not None
    second = ToolRegistry(autoload=False, state=second_state, plugins={name: plugin})
    assert second.plugins.get(name) is plugin
    link = first_state.link()
    closes: list[object] = []
    monkeypatch.setattr(link, "close", lambda: closes.append(link))
    first_state.close()
    assert closes == []
    second_state.close()
    assert closes == [link]


def test_a_state_joining_after_the_first_closed_holds_the_store_too(tmp_path: Path, opened: list[sqlite3.Connection]) -> None:
    """The joining State holds the store the plugin keeps (not what the first State holds now: nothing, once closed),
    so the last State to close closes it, and the store is never closed under a State still using it."""
    file = str(tmp_path / "state.sqlite3")
    plugin = IdempotencyPlugin()
    first, second = on(State(file), plugin), on(State(file), plugin)
    assert second.call("echo", {"x": 1}, idempotency_key="k1") == 1
    first.state.close()
    third = on(State(file), plugin)
    assert third.call("echo", {"x": 1}, idempotency_key="k1") == 1
    second.state.close()
    assert is_open(opened[0])  # the third State holds it
    assert third.call("echo", {"x": 1}, idempotency_key="k1") == 1 and len(opened) == 1
    third.state.close()
    assert [is_open(conn) for conn in opened] == [False]


def test_holds_takes_a_store_not_a_state(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="takes a store"):
        State(str(tmp_path / "a.sqlite3")).holds(State(str(tmp_path / "b.sqlite3")))
