"""The state backends at their edges: a misconfigured Redis (a refused password, an ACL user
without ``EVALSHA``) is a configuration error, not an outage that fail-open plugins wave through;
a SQLite file unusable at start-up takes ``on_state_error`` and is opened again by the next call;
a lost half-open probe gives its place within ``open_for`` of a clock stepping back."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_support import RedisServer, _free_port, _spawn

from harness_one import CircuitBreakerPolicy, ManualClock, ToolRegistry
from harness_one.state import MemoryCircuits, SQLiteStore

PASSWORD = "secret"  # the guarded server's; its ACL user 'app' (password 'apppw') may not run EVALSHA or EVAL
REFUSED = "refused the user or password of the state URL"
DENIED = "denied the state's user a command or key it needs"


@pytest.fixture(scope="module")
def guarded(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A redis-server of its own started with ``--requirepass`` (``redis_server`` skips when there is
    none to start); its port."""
    import redis

    port = _free_port()
    process = _spawn(port, tmp_path_factory.mktemp("guarded"), ["--requirepass", PASSWORD])
    admin = redis.Redis(port=port, password=PASSWORD, socket_timeout=2)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                admin.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.02)
        admin.execute_command("ACL", "SETUSER", "app", "on", ">apppw", "~*", "+@all", "-evalsha", "-eval")
        yield port
    finally:
        admin.close()
        process.kill()
        process.wait(10)


def misconfigured(reg: ToolRegistry) -> ToolRegistry:
    """``t`` under the fail-open plugins (rate limit, circuit breaker, budget) and idempotency."""
    reg.add(lambda x: x, name="t", rate_limit={"rate": 1, "burst": 1}, circuit_breaker=True)
    return reg


@pytest.mark.parametrize(
    ("user", "problem"),
    [(f":wrong{PASSWORD}@", REFUSED), ("", REFUSED), ("app:apppw@", DENIED)],
    ids=["wrong password", "no password", "ACL user without EVALSHA"],
)
async def test_a_misconfigured_redis_fails_every_call_instead_of_failing_open(guarded: int, user: str, problem: str) -> None:
    """Each call, sync and async, keyed or not, is refused with the problem named (it was admitted with
    only a warning, 'Retry shortly', while rate limits and budgets went unchecked); no fail mode runs."""
    reg = misconfigured(
        ToolRegistry(
            state=f"redis://{user}127.0.0.1:{guarded}/0?prefix=carry:", autoload=False, plugin_options={"budget": {"total": 2}}
        )
    )
    found = [reg.try_call("t", {"x": i}, context={"run_id": "R"}) for i in range(3)]
    found += [await reg.atry_call("t", {"x": i}, context={"run_id": "R"}) for i in range(3)]
    found += [reg.try_call("t", {"x": 9}, idempotency_key="k"), await reg.atry_call("t", {"x": 9}, idempotency_key="k")]
    for result in found:  # every one: a misconfiguration never marks the link down ("it failed moments ago")
        assert result.error is not None and result.error.kind == "plugin_error", result
        assert problem in result.error.message and "not an outage: no fail mode applies" in result.error.message
    stats: dict[str, Any] = reg.stats()
    assert not any("state_failed_open" in stats.get(name, {}) for name in ("rate_limit", "budget", "circuit_breaker"))


@pytest.fixture(params=["memory", "redis"])
def circuits(request: pytest.FixtureRequest) -> Any:
    """A circuit store on the caller's clock: in memory, or in Redis with ``server_time=False``."""
    if request.param == "memory":
        return MemoryCircuits()
    from harness_one.state import RedisCircuits, RedisLink

    return RedisCircuits(RedisLink(request.getfixturevalue("redis_url")), server_time=False)


def test_a_lost_probe_gives_its_place_within_open_for_of_a_clock_stepping_back(circuits: Any) -> None:
    """The probe's start is moved back with the clock, as the opening time is: its place was held for the
    whole step (600 s here) on top of ``open_for``."""
    policy = CircuitBreakerPolicy.parse({"min_calls": 1, "open_for": 5, "probes": 1}, tool="t")
    clock = ManualClock(start=10_000.0)
    circuits.record("t", policy, now=clock.now(), failed=True, probe=0)
    clock.advance(6)
    wait, lost = circuits.admit("t", policy, now=clock.now())
    assert wait == 0 and lost  # the probe, never to end
    clock.advance(-600)
    assert circuits.admit("t", policy, now=clock.now())[0] > 0  # its place is held ...
    clock.advance(5.5)
    wait, probe = circuits.admit("t", policy, now=clock.now())
    assert wait == 0 and probe not in (0, lost)  # ... for open_for at most: a new probe, of a new period


def sqlite_registry(path: Path, **idempotency: Any) -> tuple[ToolRegistry, list[int]]:
    """A registry on ``sqlite:///path`` whose ``charge`` counts its runs."""
    reg = ToolRegistry(state=f"sqlite:///{path}", autoload=False, plugin_options={"idempotency": idempotency})
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or len(runs), name="charge")
    return reg, runs


async def test_a_sqlite_file_unusable_at_start_is_refused_whatever_the_fail_mode_and_is_opened_again(tmp_path: Path) -> None:
    """Not a database when the registry starts: the plugin stays (it was refused for good, the plugin failed in
    setup), keyed calls are refused as a configuration error whatever ``on_state_error`` says (no outage: "open"
    would run them unprotected for as long as the path stays wrong), and once the file is fit the next call opens it."""
    path = tmp_path / "state.sqlite3"
    path.write_bytes(b"not a database " * 100)
    closed, runs = sqlite_registry(path)
    relaxed, relaxed_runs = sqlite_registry(path, on_state_error="open")
    assert "idempotency" in closed.plugins and not closed.plugins.failures
    for reg in (closed, relaxed):
        for result in (reg.try_call("charge", idempotency_key="k"), await reg.atry_call("charge", idempotency_key="k")):
            assert result.error is not None and result.error.kind == "plugin_error"
            assert "not a database" in result.error.message and "no fail mode applies" in result.error.message
    assert runs == [] and relaxed_runs == []
    path.unlink()  # the file made fit: the next operation opens (and makes) it
    assert closed.call("charge", idempotency_key="k") == 1 and runs == [1]
    assert await closed.acall("charge", idempotency_key="k") == 1 and runs == [1]  # replayed
    assert relaxed.call("charge", idempotency_key="k") == 1 and relaxed_runs == []  # from the file


async def test_a_sqlite_store_opens_its_file_at_its_first_operation(tmp_path: Path) -> None:
    """The constructor touches nothing (a file that cannot be opened escaped it as sqlite3.OperationalError); an
    operation on a file that cannot be opened is that error, its message naming the problem as a configuration
    error, and a later one opens it; after close() the next operation opens it again."""
    path = tmp_path / "later" / "state.sqlite3"
    store = SQLiteStore(path, timeout=0.5)
    assert not path.parent.exists()
    with pytest.raises(sqlite3.OperationalError, match="cannot open its file: unable to open database file"):
        store.begin("t", "k", "fp", 0.0, 60.0)
    with pytest.raises(sqlite3.OperationalError, match="cannot open its file: unable to open database file"):
        await store.abegin("t", "k", "fp", 0.0, 60.0)
    path.parent.mkdir()
    assert await store.abegin("t", "k", "fp", 0.0, 60.0, owner="A") is None
    assert store.renew("t", "k", 1.0, 60.0, owner="A") is True
    store.close()
    assert store.begin("t", "k2", "fp", 0.0, 60.0, owner="B") is None  # opened again
    assert store.renew("t", "k", 1.0, 60.0, owner="A") is True  # the claim made before close() is in the file
