"""Idempotency keys: stores, replay, mismatch, conflict, expiry, and retries reusing the key."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from gate_support import Gated, cancel_once_entered

from harness_one import (
    IdempotencyConflict,
    IdempotencyKeyMismatch,
    ManualClock,
    PluginError,
    RetryableError,
    ToolArgumentError,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
)
from harness_one.testing import IdempotencyStoreContract
from harness_one_plugins import IdempotencyPlugin, MemoryStore, SQLiteStore
from harness_one_plugins.idempotency import IdempotencyScopeMissing, fingerprint
from harness_one_plugins.output import OutputTooLarge


class TestMemoryStore(IdempotencyStoreContract):
    @pytest.fixture
    def store(self) -> MemoryStore:
        return MemoryStore()


class TestSQLiteStore(IdempotencyStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> SQLiteStore:
        return SQLiteStore(tmp_path / "idem.sqlite3")


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        shared = MemoryStore()
        return lambda: shared
    return lambda: SQLiteStore(tmp_path / "idem.sqlite3")


def registry_with(store: Any, **options: Any) -> ToolRegistry:
    return ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store, **options)}, autoload=False)


class Counter:
    def __init__(self) -> None:
        self.runs = 0
        self.lock = threading.Lock()

    def __call__(self, amount: int) -> dict[str, int]:
        with self.lock:
            self.runs += 1
        time.sleep(0.05)
        return {"charged": amount, "run": self.runs}


def test_hundred_threads_one_run_same_outcome(make_store: Any) -> None:
    reg = registry_with(make_store(), wait=10.0, poll=0.005)
    charge = Counter()
    reg.add(charge, name="charge")
    results: list[Any] = []
    lock = threading.Lock()
    barrier = threading.Barrier(100)

    def client() -> None:
        barrier.wait()
        value = reg.call("charge", {"amount": 5}, idempotency_key="order-1")
        with lock:
            results.append(value)

    threads = [threading.Thread(target=client) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert charge.runs == 1
    assert len(results) == 100 and all(r == {"charged": 5, "run": 1} for r in results)


def test_replay_mismatch_and_validation(make_store: Any) -> None:
    reg = registry_with(make_store())
    charge = Counter()
    reg.add(
        charge,
        name="charge",
        parameters={"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
    )
    with pytest.raises(ToolArgumentError):
        reg.call("charge", {"amount": "five"}, idempotency_key="k")  # stores nothing
    first = reg.call("charge", {"amount": 5}, idempotency_key="k")
    assert reg.call("charge", {"amount": 5}, idempotency_key="k") == first
    assert reg.call("charge", '{"amount": 5}', idempotency_key="k") == first  # same arguments, other spelling
    with pytest.raises(IdempotencyKeyMismatch, match="different arguments"):
        reg.call("charge", {"amount": 6}, idempotency_key="k")
    assert charge.runs == 1
    assert reg.call("charge", {"amount": 6}, idempotency_key="k2")["run"] == 2
    assert reg.stats()["idempotency"] == {"replays": 2, "stored": 2}


def test_a_replay_says_its_tool_did_not_run(make_store: Any) -> None:
    """``CallResult.ran``: True for the call that ran the tool, False for each replay of its outcome (a success or a failure)."""
    reg = registry_with(make_store())
    charge = Counter()
    reg.add(charge, name="charge")

    def decline(amount: int) -> None:
        raise ValueError("card declined")

    reg.add(decline)
    first, again = (reg.try_call("charge", {"amount": 5}, idempotency_key="k") for _ in range(2))
    assert (first.ok, first.ran, again.ok, again.ran) == (True, True, True, False)
    assert again.value == first.value and charge.runs == 1
    failed, replayed = (reg.try_call("decline", {"amount": 5}, idempotency_key="d") for _ in range(2))
    assert (failed.ok, failed.ran, replayed.ok, replayed.ran) == (False, True, False, False)
    assert getattr(replayed.error, "replayed", False)
    assert not reg.try_call("charge", {"amunt": 5}, idempotency_key="x").ran  # refused before it started


def test_a_whole_number_replays_however_it_is_spelled(make_store: Any) -> None:
    # A model that retries {"amount": 5} as {"amount": 5.0} sends the same JSON number.
    reg = registry_with(make_store())
    charge = Counter()
    reg.add(charge, name="charge", parameters={"type": "object", "properties": {"amount": {"type": "number"}}})
    first = reg.call("charge", {"amount": 5}, idempotency_key="k")
    assert reg.call("charge", {"amount": 5.0}, idempotency_key="k") == first
    assert reg.call("charge", '{"amount": 5e0}', idempotency_key="k") == first
    with pytest.raises(IdempotencyKeyMismatch):
        reg.call("charge", {"amount": 5.5}, idempotency_key="k")
    assert charge.runs == 1


def test_tool_errors_are_stored_and_replayed(make_store: Any) -> None:
    reg = registry_with(make_store())
    runs = []

    def fail(amount: int) -> None:
        runs.append(amount)
        raise ValueError("card declined")

    reg.add(fail)
    first = reg.try_call("fail", {"amount": 1}, idempotency_key="k")
    second = reg.try_call("fail", {"amount": 1}, idempotency_key="k")
    assert runs == [1]
    assert isinstance(first.error, ToolExecutionError) and isinstance(second.error, ToolExecutionError)
    assert second.error.message == first.error.message == "Tool 'fail' failed: ValueError: card declined"
    assert second.to_dict()["error"]["cause"] == "ValueError"
    assert getattr(second.error, "replayed", False) and second.call_id != first.call_id


def test_a_plugins_error_replays_as_its_own_class(make_store: Any) -> None:
    """An output refused after the tool ran (a plugin's ToolError subclass) replays as that class, fields and all."""
    reg = registry_with(make_store())
    reg.add(lambda: "x" * 50, name="wordy", options={"max_output": {"limit": 10, "mode": "refuse"}})
    first = reg.try_call("wordy", idempotency_key="k")
    second = reg.try_call("wordy", idempotency_key="k")
    assert isinstance(first.error, OutputTooLarge) and isinstance(second.error, OutputTooLarge)
    assert (second.error.size, second.error.limit, second.error.unit) == (50, 10, "chars")
    assert second.error.message == first.error.message and second.error.replayed
    assert second.to_dict()["error"] == {**first.to_dict()["error"], "call_id": second.call_id}


def test_an_error_class_name_two_classes_share_comes_back_as_tool_error() -> None:
    class Twin(ToolError):
        kind = "first"

    assert type(ToolError.from_dict(Twin("one").to_dict())) is Twin

    class Twin(ToolError):  # type: ignore[no-redef]  # a second class of that name: which one is meant is unknown
        kind = "second"

    back = ToolError.from_dict(Twin("two").to_dict())
    assert type(back) is ToolError and (back.kind, back.message) == ("second", "two")


def test_conflict_while_running(make_store: Any) -> None:
    reg = registry_with(make_store())
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(5)
        return "done"

    reg.add(slow)
    worker = threading.Thread(target=lambda: reg.call("slow", idempotency_key="k"))
    worker.start()
    assert started.wait(5)
    with pytest.raises(IdempotencyConflict, match="still running"):
        reg.call("slow", idempotency_key="k")
    release.set()
    worker.join()
    assert reg.call("slow", idempotency_key="k") == "done"


def test_expiry_and_crashed_worker_lease(clock: ManualClock) -> None:
    defaults = IdempotencyPlugin()
    assert (defaults.ttl, defaults.lease, defaults.wait) == (24 * 3600, 300, 0)  # Stripe's 24 h; a 5 min lease
    store = MemoryStore()
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store, clock=clock, ttl=100, lease=10)}, autoload=False)
    counter = Counter()
    reg.add(counter, name="charge")
    reg.call("charge", {"amount": 1}, idempotency_key="k")
    clock.advance(99)
    assert reg.call("charge", {"amount": 1}, idempotency_key="k")["run"] == 1
    clock.advance(1)
    assert reg.call("charge", {"amount": 1}, idempotency_key="k")["run"] == 2  # expired: runs again
    store.begin("charge", "crashed", fingerprint({"amount": 1}), clock.now(), 10)  # a worker took the key and died
    with pytest.raises(IdempotencyConflict):
        reg.call("charge", {"amount": 1}, idempotency_key="crashed")
    clock.advance(10)
    assert reg.call("charge", {"amount": 1}, idempotency_key="crashed")["run"] == 3


def test_retries_reuse_the_key(make_store: Any, clock: ManualClock) -> None:
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=make_store())}, clock=clock, autoload=False)
    runs = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) == 1:
            raise RetryableError("blip")
        return "ok"

    reg.add(flaky, retry={"attempts": 3, "initial": 0, "rerun_non_idempotent": True})  # re-run allowed: one key for all
    result = reg.try_call("flaky", idempotency_key="k")
    assert result.ok and result.attempts == 2
    assert reg.call("flaky", idempotency_key="k") == "ok" and len(runs) == 2


def test_refusals_store_nothing(make_store: Any, clock: ManualClock) -> None:
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=make_store())}, clock=clock, autoload=False)
    reg.add(lambda: "ran", name="f", rate_limit={"rate": 1, "burst": 1})
    reg.call("f")
    assert not reg.try_call("f", idempotency_key="k").ok  # rate limited before running
    clock.advance(1)
    assert reg.call("f", idempotency_key="k") == "ran"


def test_a_refused_retry_after_the_tool_ran_is_the_outcome(make_store: Any, clock: ManualClock) -> None:
    """Attempt 1 ran and failed, attempt 2 was refused by the rate limit: the key was freed and the tool ran again."""
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=make_store())}, clock=clock, autoload=False)
    runs = []

    def flaky() -> str:
        runs.append(1)
        raise RetryableError("blip")

    reg.add(
        flaky,
        rate_limit={"rate": 0.001, "burst": 1},
        retry={"attempts": 3, "initial": 0, "total": 5, "rerun_non_idempotent": True},
    )
    first = reg.try_call("flaky", idempotency_key="k")
    assert type(first.error).__name__ == "RateLimitExceeded" and len(runs) == 1
    again = reg.try_call("flaky", idempotency_key="k")
    assert again.error is not None and again.error.replayed and len(runs) == 1  # replayed, not run again


def test_a_cancelled_acall_holds_the_key_until_its_tool_returns(make_store: Any) -> None:
    """A blocking tool runs on in its thread after its acall was cancelled: the same key ran it again meanwhile."""
    import asyncio

    reg = registry_with(make_store())
    charge = Gated("charged")
    reg.add(charge, name="charge")

    async def cancel_then_retry() -> type[BaseException] | None:
        await cancel_once_entered(reg, "charge", charge.entered, idempotency_key="pay-1")
        found = await reg.atry_call("charge", idempotency_key="pay-1")
        charge.gate.set()  # (before asyncio.run waits for its executor's threads)
        return type(found.error) if found.error is not None else None

    assert asyncio.run(cancel_then_retry()) is IdempotencyConflict and charge.runs == [1]
    assert _replayed(reg, "charge", "pay-1") == "charged"
    # The tool ran to its end: what it did is the key's outcome (the key was given back, and a
    # call with it charged again, before its thread's outcome was kept).
    assert charge.runs == [1]


def _replayed(reg: ToolRegistry, name: str, key: str) -> Any:
    """The key's outcome once its tool's thread has stored it (a conflict until then)."""
    for _ in range(2000):
        found = reg.try_call(name, idempotency_key=key)
        if not isinstance(found.error, IdempotencyConflict):
            assert found.error is None or found.error.replayed, found.error
            return found.value if found.ok else found.error
        time.sleep(0.005)
    raise AssertionError("the key was never finished")


@pytest.mark.parametrize("ends", ["returns", "raises"])
def test_a_call_abandoned_at_its_timeout_keeps_what_its_tool_did(make_store: Any, ends: str) -> None:
    """A thread-mode timeout abandons a tool that runs on: ToolTimeout was stored for the key, and
    replayed for 24 h, though the tool went on to charge."""
    reg = registry_with(make_store())
    charge = Gated("charged")
    if ends == "raises":
        charge.result = None  # type: ignore[assignment]

        def failing() -> str:
            charge()
            raise OSError("card declined")

        reg.add(failing, name="charge", timeout=0.05)
    else:
        reg.add(charge, name="charge", timeout=0.05)
    first = reg.try_call("charge", idempotency_key="pay-2")
    assert isinstance(first.error, ToolTimeout) and charge.runs == [1]
    assert isinstance(reg.try_call("charge", idempotency_key="pay-2").error, IdempotencyConflict)  # still running
    charge.gate.set()
    kept = _replayed(reg, "charge", "pay-2")
    if ends == "returns":
        assert kept == "charged"
    else:
        assert isinstance(kept, ToolExecutionError) and "card declined" in kept.message and kept.replayed
    assert charge.runs == [1]


def test_memory_replays_are_copies(clock: ManualClock) -> None:
    reg = registry_with(MemoryStore())
    reg.add(lambda: {"item": "book", "lines": [1]}, name="order")
    first = reg.call("order", idempotency_key="k")
    first["lines"].append(99)
    second = reg.call("order", idempotency_key="k")
    assert second == {"item": "book", "lines": [1]}
    second["item"] = "tampered"
    assert reg.call("order", idempotency_key="k") == {"item": "book", "lines": [1]}
    runs = []
    reg.add(lambda: runs.append(1) or threading.Lock(), name="locked")  # cannot be copied: kept as the model read it
    first_text = reg.try_call("locked", idempotency_key="k").for_model()
    replayed = reg.try_call("locked", idempotency_key="k")
    assert len(runs) == 1 and replayed.value == json.loads(first_text)  # its JSON form: the text the model read


def test_a_locked_sqlite_file_takes_the_fail_modes(tmp_path: Path) -> None:
    """Another connection holding the file: the result is returned (it was PluginError: database is locked)."""
    import sqlite3

    from harness_one.state import StateUnavailable

    path = tmp_path / "locked.sqlite3"
    store = SQLiteStore(path, timeout=0.05)
    reg = registry_with(store)
    runs = []
    other = sqlite3.connect(path, timeout=0.05, isolation_level=None)

    def work() -> str:
        runs.append(1)
        other.execute("BEGIN EXCLUSIVE")  # while the tool runs, another process locks the file
        return "done"

    reg.add(work)
    try:
        assert reg.call("work", idempotency_key="k") == "done"  # not stored: logged, still returned
        with pytest.raises(StateUnavailable):  # on_state_error="closed": a key never runs unprotected
            reg.call("work", idempotency_key="other")
        relaxed = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store, on_state_error="open")}, autoload=False)
        relaxed.add(lambda: "unprotected", name="g")
        assert relaxed.call("g", idempotency_key="k2") == "unprotected"
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert runs == [1]


@pytest.mark.parametrize("spoil", ["directory", "garbage"])
def test_a_state_file_that_cannot_be_opened_refuses_keyed_calls_until_it_can(tmp_path: Path, spoil: str) -> None:
    """A state file SQLite could not open made the idempotency plugin a load failure for good (whatever
    ``on_state_error`` said); it is opened at the first operation and again by the next one, so keyed
    calls are refused while it is unusable (a configuration error, no fail mode: it is no outage) and
    protected once it is fit."""
    path = tmp_path / "state.sqlite3"
    if spoil == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"not a database " * 100)
    reg = ToolRegistry(state=f"sqlite:///{path}", autoload=False)
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or len(runs), name="charge")
    assert "idempotency" in reg.plugins and reg.plugins.failures == []
    refused = reg.try_call("charge", idempotency_key="k")
    assert refused.error is not None and refused.error.kind == "plugin_error" and runs == []
    assert "configuration error, not an outage" in refused.error.message
    assert reg.call("charge") == 1  # calls without a key go on
    path.rmdir() if spoil == "directory" else path.unlink()
    assert reg.call("charge", idempotency_key="k") == 2
    assert reg.call("charge", idempotency_key="k") == 2 and runs == [1, 1]  # replayed


def test_new_registry_on_same_sqlite_file_replays(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    first = registry_with(SQLiteStore(path))
    first.add(Counter(), name="charge")
    value = first.call("charge", {"amount": 3}, idempotency_key="k")
    second = registry_with(SQLiteStore(path))
    fresh = Counter()
    second.add(fresh, name="charge")
    assert second.call("charge", {"amount": 3}, idempotency_key="k") == value
    assert fresh.runs == 0


def test_non_json_results_are_kept_in_sqlite_as_the_model_read_them(tmp_path: Path) -> None:
    reg = registry_with(SQLiteStore(tmp_path / "s.sqlite3"))
    runs = []
    reg.add(lambda: runs.append(1) or {1, 2}, name="setty")
    assert reg.call("setty", idempotency_key="k") == {1, 2}
    assert reg.call("setty", idempotency_key="k") == [1, 2]  # its JSON form, replayed: the tool ran once
    assert len(runs) == 1


def _race(path: str, barrier: Any, out: Any) -> None:
    try:
        store = SQLiteStore(path, timeout=60.0)  # the waits for the file of a loaded machine stay far within it
        barrier.wait()
        out.put(store.begin("tool", "k", "fp", 1000.0, 30.0) is None)  # one time for all: no claim lapses, however late
    except BaseException as exc:  # said, so that the test shows it (not a minute's wait for an answer)
        out.put(f"{type(exc).__name__}: {exc}")
        raise


def test_sqlite_store_one_owner_across_processes(tmp_path: Path) -> None:
    """Four processes open one new file and claim one key at once: exactly one owns it."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    path = str(tmp_path / "mp.sqlite3")
    procs = [ctx.Process(target=_race, args=(path, barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    owners = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert sorted(owners, key=repr) == [False, False, False, True], owners  # an error is shown, not compared


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("sqlite:///~/x.sqlite3", "home/x.sqlite3"),  # configuration.md's example, under a home of its own
        ("{tmp}/a#b.db", "a#b.db"),  # a plain path is a path: '#' and '?' are part of it
        ("{tmp}/a?b.db", "a?b.db"),
        ("sqlite://{tmp}/c%23d.db", "c#d.db"),  # a URL is percent-decoded
    ],
)
def test_sqlite_state_paths_name_the_file_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, where: str) -> None:
    from harness_one.state import State

    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert State(url.format(tmp=tmp_path)).path == tmp_path / where
    with pytest.raises(ValueError, match="has a host part"):
        State("sqlite://data/x.db")  # read as the host 'data' and the file /x.db


def test_a_default_state_under_an_odd_directory_is_that_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_one._config import default_state
    from harness_one.state import State

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg#1"))
    assert State(default_state()).path == tmp_path / "xdg#1" / "harness-one" / "state.sqlite3"


def test_sqlite_errors_take_the_fail_modes(tmp_path: Path) -> None:
    """A file corrupted after it was opened, a value SQLite cannot hold, a result nested past json's reach:
    StateUnavailable or 'not stored' (they escaped as PluginError, the key held until its lease ended)."""
    import sqlite3

    from harness_one.state import StateUnavailable

    path = tmp_path / "s.sqlite3"
    store = SQLiteStore(path)
    store.begin("t", "k", "f", 0.0, 60.0)
    store._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 64)  # a stand-in for SQLite's 1e9 limit
    from harness_one_plugins.idempotency import Record

    with pytest.raises(ValueError, match="cannot hold this value"):
        store.finish("t", "k", Record("f", "done", 100.0, True, "x" * 200, None))
    deep: Any = 0
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested too deeply"):
        store.finish("t", "k", Record("f", "done", 100.0, True, deep, None))
    store.close()
    path.write_bytes(path.read_bytes()[:100] + b"\xff" * 4000)  # corrupted under a fresh connection
    broken = SQLiteStore.__new__(SQLiteStore)
    broken.__dict__.update(store.__dict__)
    broken._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    with pytest.raises(StateUnavailable):
        broken.begin("t", "k2", "f", 0.0, 60.0)


def test_scope_makes_each_users_keys_their_own(make_store: Any) -> None:
    """scope="user_id": two users' same key is two keys (one registry each, on one store); each replays only its own."""
    regs = [registry_with(make_store(), scope="user_id") for _ in range(2)]
    charge = Counter()
    for reg in regs:
        reg.add(charge, name="charge")
    alice, bob = {"user_id": "alice"}, {"user_id": "bob"}
    first = regs[0].call("charge", {"amount": 5}, idempotency_key="order-7", context=alice)
    other = regs[1].call("charge", {"amount": 5}, idempotency_key="order-7", context=bob)
    assert (first["run"], other["run"]) == (1, 2)  # bob's order-7 is not alice's: not replayed to him
    assert regs[1].call("charge", {"amount": 5}, idempotency_key="order-7", context={**alice, "request_id": "r2"}) == first
    assert asyncio.run(regs[0].acall("charge", {"amount": 5}, idempotency_key="order-7", context=bob)) == other
    assert regs[0].call("charge", {"amount": 6}, idempotency_key="order-8", context=bob)["run"] == 3
    with pytest.raises(IdempotencyKeyMismatch, match="Idempotency key 'order-7' was already used"):  # the caller's key
        regs[1].call("charge", {"amount": 6}, idempotency_key="order-7", context=alice)
    # Ids a plain f"{user_id}:{key}" would make one key: "a:b" + "c" and "a" + "b:c"; an int id is its text.
    assert regs[0].call("charge", {"amount": 1}, idempotency_key="c", context={"user_id": "a:b"})["run"] == 4
    assert regs[0].call("charge", {"amount": 1}, idempotency_key="b:c", context={"user_id": "a"})["run"] == 5
    assert regs[0].call("charge", {"amount": 1}, idempotency_key="b:c", context={"user_id": 42})["run"] == 6
    assert charge.runs == 6


@pytest.mark.parametrize("context", [None, {"user_id": "alice"}, {"tenant": None, "user_id": "alice"}])
def test_a_scoped_key_without_its_context_field_is_refused(make_store: Any, context: dict[str, Any] | None) -> None:
    """Fail-closed: a keyed call that does not say whose key it is neither runs, nor claims or replays a key."""
    store = make_store()
    reg = registry_with(store, scope=["tenant", "user_id"])
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or len(runs), name="once")
    error = reg.try_call("once", idempotency_key="k", context=context).error
    assert isinstance(error, IdempotencyScopeMissing) and error.field == "tenant" and error.to_dict()["field"] == "tenant"
    assert "idempotency key 'k' but without the context field 'tenant'" in error.message
    assert runs == [] and reg.stats()["idempotency"] == {"replays": 0, "stored": 0}
    assert store.begin("once", "k", fingerprint({}), time.time(), 60.0) is None  # the bare key was not claimed either
    full = {"tenant": "t1", "user_id": "alice"}
    assert reg.call("once", idempotency_key="k2", context=full) == reg.call("once", idempotency_key="k2", context=full) == 1
    assert reg.call("once", context=context) == 2  # a call without a key is not the scope's business


class _User:
    """A context value whose text is its address (the default repr): another user's once the address is reused."""


@pytest.mark.parametrize("value", [_User(), 1.5, True, ["alice"], {"id": "alice"}])
def test_a_scope_field_that_is_no_string_nor_integer_is_refused(make_store: Any, value: Any) -> None:
    """Fail-closed as for a missing field: an object's text may be its address, another user's later."""
    reg = registry_with(make_store(), scope="user_id")
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or len(runs), name="once")
    error = reg.try_call("once", idempotency_key="k", context={"user_id": value}).error
    assert isinstance(error, IdempotencyScopeMissing) and error.field == "user_id"
    assert (
        f"the context field 'user_id' that idempotency keys are scoped by holds a {type(value).__name__}, not a string, an integer or a UUID"
        in error.message
    )
    assert runs == []
    assert reg.call("once", idempotency_key="k", context={"user_id": 7}) == 1
    user = uuid.UUID(int=7)  # text that says whose it is: a UUID, an enum of ints or strings
    assert reg.call("once", idempotency_key="k", context={"user_id": user}) == reg.call(
        "once", idempotency_key="k", context={"user_id": uuid.UUID(int=7)}
    )
    assert runs == [1, 1]  # one run for 7, one for the UUID: another user


@pytest.mark.parametrize(
    ("scope", "problem"),
    [
        (5, "idempotency scope must be a context field name or a non-empty list of them, not 5"),
        ("", "idempotency scope must be a context field name or a non-empty list of them, not ''"),
        (["user_id", 1], "idempotency scope must be a context field name or a non-empty list of them, not ['user_id', 1]"),
        (["user_id", "user_id"], "idempotency scope names a context field twice: ['user_id', 'user_id']"),
    ],
)
def test_scope_is_checked_when_the_plugin_is_built(scope: Any, problem: str) -> None:
    with pytest.raises(PluginError, match=re.escape(problem)):
        ToolRegistry(autoload=False, plugin_options={"idempotency": {"scope": scope}})


def test_scope_is_configured_like_any_option(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ToolRegistry(autoload=False).plugins.get("idempotency").scope == ()  # default: keys are not scoped
    reg = ToolRegistry(autoload=False, plugin_options={"idempotency": {"scope": "user_id"}})
    assert reg.plugins.get("idempotency").scope == ("user_id",)
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_IDEMPOTENCY", '{"scope": ["tenant", "user_id"]}')
    assert ToolRegistry(autoload=False).plugins.get("idempotency").scope == ("tenant", "user_id")


def test_scope_on_one_redis(redis_url: str) -> None:
    """Two registries on one Redis: the same key of two users runs twice, each user's replays across registries."""
    regs = [ToolRegistry(state=redis_url, autoload=False, plugin_options={"idempotency": {"scope": "user_id"}}) for _ in range(2)]
    runs: list[int] = []
    for reg in regs:
        reg.add(lambda n: runs.append(n) or len(runs), name="once")
    alice, bob = {"user_id": "alice"}, {"user_id": "bob"}
    assert regs[0].call("once", {"n": 1}, idempotency_key="k", context=alice) == 1
    assert regs[1].call("once", {"n": 1}, idempotency_key="k", context=bob) == 2
    assert regs[1].call("once", {"n": 1}, idempotency_key="k", context=alice) == 1
    assert regs[0].call("once", {"n": 1}, idempotency_key="k", context=bob) == 2
    assert runs == [1, 1]
    with pytest.raises(IdempotencyScopeMissing, match="'user_id'"):
        regs[0].call("once", {"n": 1}, idempotency_key="k")
