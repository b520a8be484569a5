"""Review 33, plugin state: an idempotent replay from SQLite or Redis of a value whose JSON is a string (a date, a
Decimal, a UUID, bytes) reads to the model as the first answer did, quoted, while its value stays that string; the
budget and circuit_breaker plugins keep no registry alive; a plugin joined by registries on two states built at once
in two threads ends on one of them, the other refused."""

from __future__ import annotations

import contextlib
import datetime
import decimal
import gc
import sqlite3
import threading
import types
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness_one import PluginError, ToolRegistry, hookimpl
from harness_one._render import json_data
from harness_one.state import Record, SQLiteStore
from harness_one_plugins import BudgetPlugin, CircuitBreakerPlugin, IdempotencyPlugin

# ---------------------------------------------------------------- a replay reads as the first answer, value and text

VALUES: dict[str, Any] = {
    "date": datetime.date(2026, 12, 7),
    "decimal": decimal.Decimal("1.10"),
    "uuid": uuid.UUID(int=1),
    "bytes": b"\x00ab",
    "text": "plain",
    "quoted text": '"plain"',
    "list": [1, "a"],
}


def _url(state: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if state == "redis":
        return str(request.getfixturevalue("redis_url"))
    return f"sqlite:///{tmp_path / 'state.sqlite3'}" if state == "sqlite" else state


@pytest.mark.parametrize("which", sorted(VALUES))
@pytest.mark.parametrize("state", ["memory:", "sqlite", "redis"])
def test_a_replay_agrees_with_the_first_answer_on_text_and_value(
    which: str, state: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Before, a date from SQLite or Redis was replayed as its JSON string, shown to the model without its quotes.
    registry = ToolRegistry(state=_url(state, tmp_path, request), autoload=False)
    registry.add(lambda which: VALUES[which], name="f", description="A value.", idempotent=True)
    first = registry.try_call("f", {"which": which}, idempotency_key="k")
    replay = registry.try_call("f", {"which": which}, idempotency_key="k")
    assert first.ok and replay.ok and first.ran and not replay.ran
    assert replay.for_model() == first.for_model()
    assert replay.to_dict()["result"] == first.to_dict()["result"]  # the answer's data, MCP's structuredContent
    assert json_data(replay.value) == json_data(first.value)
    assert registry.call("f", {"which": which}, idempotency_key="k") == replay.value


@pytest.mark.parametrize("state", ["sqlite", "redis"])
def test_a_replayed_json_string_equals_the_string(state: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    registry = ToolRegistry(state=_url(state, tmp_path, request), autoload=False)
    registry.add(lambda: datetime.date(2026, 12, 7), name="day", description="A date.", idempotent=True)
    from harness_one_plugins.idempotency import QuotedString

    registry.call("day", idempotency_key="k")
    replayed = registry.call("day", idempotency_key="k")
    assert isinstance(replayed, QuotedString) and replayed == "2026-12-07" and str(replayed) == "2026-12-07"


def test_an_older_record_without_the_flag_replays_as_before(tmp_path: Path) -> None:
    """A file made before ``quoted`` gets the column; its records read as text, as they did."""
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE harness_one_idempotency (scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
            " state TEXT NOT NULL, expires REAL NOT NULL, ok INTEGER NOT NULL DEFAULT 0, value TEXT, error TEXT,"
            " PRIMARY KEY (scope, key))"
        )
        conn.execute(
            "INSERT INTO harness_one_idempotency (scope, key, fingerprint, state, expires, ok, value)"
            " VALUES ('t', 'k', 'fp', 'done', 100, 1, '\"2026-12-07\"')"
        )
    conn.close()
    store = SQLiteStore(path)
    try:
        found = store.begin("t", "k", "fp", 50.0, 10.0)
        assert found == Record("fp", "done", 100.0, True, "2026-12-07", None, False)
        assert store.begin("t", "q", "fp", 50.0, 10.0) is None
        store.finish("t", "q", Record("fp", "done", 100.0, True, "2026-12-07", None, True))
        assert store.begin("t", "q", "fp", 50.0, 10.0) == Record("fp", "done", 100.0, True, "2026-12-07", None, True)
    finally:
        store.close()


def test_an_older_redis_record_without_the_flag_replays_as_before(redis_url: str) -> None:
    redis = pytest.importorskip("redis")
    registry = ToolRegistry(state=redis_url, autoload=False)
    registry.add(lambda: datetime.date(2026, 12, 7), name="day", description="A date.", idempotent=True)
    registry.call("day", idempotency_key="k")
    client = redis.Redis.from_url(redis_url)
    [key] = client.keys("*idem:*")
    client.hdel(key, "q")  # as a version before the flag wrote it
    client.close()
    assert registry.try_call("day", idempotency_key="k").for_model() == "2026-12-07"


# ---------------------------------------------------------------- budget and circuit_breaker keep no registry alive


@pytest.mark.parametrize("make", [lambda: BudgetPlugin(max_calls=1), CircuitBreakerPlugin], ids=["budget", "circuit"])
def test_a_plugin_keeps_no_dropped_registry_alive(make: Callable[[], Any]) -> None:
    plugin = make()
    registry = ToolRegistry(autoload=False, plugins={plugin.name: plugin})
    gone = weakref.ref(registry)
    del registry
    gc.collect()
    assert gone() is None
    assert plugin.used("R") == 0 if isinstance(plugin, BudgetPlugin) else plugin.state("f") == "closed"


# ---------------------------------------------------------------- two registries built at once on two states


@pytest.mark.parametrize(
    "make", [lambda: BudgetPlugin(max_calls=1), CircuitBreakerPlugin, IdempotencyPlugin], ids=["budget", "circuit", "idem"]
)
def test_a_registry_built_while_another_thread_builds_one_on_other_state_is_refused(
    make: Callable[[], Any], tmp_path: Path
) -> None:
    """Before, the registry still being built did not count: the plugin moved to the second registry's state."""
    plugin = make()
    entered, go = threading.Event(), threading.Event()

    class Hold:
        """Holds the first registry's building after the plugin took its state."""

        @hookimpl
        def harness_configure(self, registry: ToolRegistry) -> None:
            entered.set()
            assert go.wait(10)

    built: list[ToolRegistry] = []
    first = threading.Thread(
        target=lambda: built.append(ToolRegistry(autoload=False, plugins={plugin.name: plugin, "hold": Hold()}))
    )
    first.start()
    try:
        assert entered.wait(10)
        taken = plugin.store
        with pytest.raises(PluginError, match="keeps its"):
            ToolRegistry(autoload=False, state=f"sqlite:///{tmp_path / 's.sqlite3'}", plugins={plugin.name: plugin})
        assert plugin.store is taken  # still the first registry's
    finally:
        go.set()
        first.join(10)
    assert not first.is_alive() and len(built) == 1 and plugin.store is taken
    assert built[0].plugins.get(plugin.name) is plugin


def test_the_check_and_take_are_one_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads joining registries on two states at once, each meeting the other between its check and its take
    if it can: one takes, the other is refused (both took before)."""
    from harness_one_plugins import _options

    plugin = BudgetPlugin(max_calls=1)
    states = [ToolRegistry(autoload=False).state, ToolRegistry(autoload=False, state=f"sqlite:///{tmp_path / 's.db'}").state]
    meet, done = threading.Barrier(2, timeout=2), threading.Barrier(2, timeout=10)

    def ref(obj: Any) -> Any:  # the take: wait for the other thread to check too, if it can (not under the lock)
        if isinstance(obj, _Building):
            with contextlib.suppress(threading.BrokenBarrierError):
                meet.wait()
        return weakref.ref(obj)

    class _Building:
        """A registry being built (no ``plugins`` yet), on ``state``."""

        def __init__(self, state: Any) -> None:
            self.state = state

    monkeypatch.setattr(_options, "weakref", types.SimpleNamespace(ref=ref))
    answers: list[object] = []

    def join(state: Any) -> None:
        building = _Building(state)  # alive until both checked
        try:
            answers.append(_options.takes_state(plugin, building, "counters", "store"))  # type: ignore[arg-type]
        except PluginError as exc:
            answers.append(exc)
        done.wait()  # each builder alive until both checked

    threads = [threading.Thread(target=join, args=(state,)) for state in states]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(type(answer).__name__ for answer in answers) == ["StateRefused", "bool"], answers
