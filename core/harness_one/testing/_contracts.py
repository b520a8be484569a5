"""Contracts of the backends and of plugins registered under a standard name.

Subclass a contract in your own test suite and provide its fixture; every standard
implementation (in memory, SQLite, Redis) passes the same tests. Example::

    from harness_one.testing import RateLimitBackendContract

    class TestMyBackend(RateLimitBackendContract):
        @pytest.fixture
        def backend(self):
            return MyRedisBuckets(...)

A contract's tests are the behaviour harness-one relies on: do not override them to pass.
"""

from __future__ import annotations

import asyncio
import math
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from .._clock import ManualClock
from .._errors import RateLimitExceeded, ToolArgumentError
from .._policies import CircuitBreakerPolicy
from .._registry import ToolRegistry
from ..state import Accepts, Record
from ..state._protocols import KEPT_TICKETS
from ._suite import BoundedClock, Suite
from ._tools import _names_field

__all__ = [
    "BudgetStoreContract",
    "CircuitStoreContract",
    "ConcurrencySlotsContract",
    "IdempotencyStoreContract",
    "RateLimitBackendContract",
    "RateLimitPluginContract",
    "ValidationPluginContract",
]

PluginFactory = Callable[..., Any]

#: The methods the standard plugins pass ``owner=`` / ``ticket=`` to, when all that a store has take it.
_OWNER_METHODS = ("begin", "renew", "finish", "release", "abegin", "arenew", "afinish", "arelease")
_TICKET_METHODS = ("give_back", "agive_back")
#: The awaitable twins the standard plugins await of a store that has the first (``acall``'s path).
_IDEMPOTENCY_TWINS = ("abegin", "afinish", "arelease")
_BUDGET_TWINS = ("atake", "agive_back")
#: What the budget plugin calls of a store that has the first: take tickets, and untakes of takes cut short.
_UNTAKES = ("auntake", "untake", "atake")


def _keyword_flag(suite: Suite, flag: str, keyword: str, methods: tuple[str, ...], store: Any, meaning: str) -> None:
    """Check that ``suite``'s capability ``flag`` says what the plugin sees (whether every method of
    ``methods`` that ``store`` has takes ``keyword``), and switch the running check off when it is off."""
    lacking = [m for m in methods if hasattr(store, m) and not Accepts(keyword, m)(store)]
    kind = type(store).__name__
    if getattr(suite, flag):
        assert not lacking, (
            f"{kind} has {', '.join(lacking)} without {keyword}=, so the plugin calls the store without it: "
            f"add {keyword}= to each of {', '.join(methods)} the store has, or set {flag} = False"
        )
        return
    assert lacking, (
        f"{kind}'s methods take {keyword}=, so the plugin passes it and relies on this check: {flag} = False cannot switch it off"
    )
    suite.switched_off(flag, meaning)


def _needs_twins(store: Any, twins: tuple[str, ...]) -> None:
    """Go on only if ``store`` has the awaitable ``twins``: skip the running check for a store without
    the first (the plugins then call its blocking methods), fail one that has it but not the others."""
    kind = type(store).__name__
    if not hasattr(store, twins[0]):
        pytest.skip(f"switched off: {kind} has no {twins[0]} (no async twins: the plugins call its blocking methods)")
    missing = [name for name in twins[1:] if not callable(getattr(store, name, None))]
    assert not missing, f"{kind} has {twins[0]} but not {', '.join(missing)}: the plugins await all of {', '.join(twins)}"


def _race(threads: int, fn: Callable[[int], Any], *, rounds: int = 1) -> list[list[Any]]:
    """Run ``fn(i)`` in ``threads`` threads, ``rounds`` times, each round started at once (a barrier) and with
    the interpreter switching threads as often as it can: what a round answers, per round, in thread order.
    A read, a round trip and a write that are not one atomic step then interleave."""
    barrier = threading.Barrier(threads)
    answers: list[list[Any]] = [[None] * threads for _ in range(rounds)]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        for r in range(rounds):
            barrier.wait()
            try:
                answers[r][i] = fn(r * threads + i)
            except BaseException as exc:  # reported in the checking thread
                errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    if errors:
        raise errors[0]
    return answers


def _done(value: Any) -> Record:
    """A successful outcome, kept until 1000."""
    return Record("fp", "done", 1000.0, True, value)


#: The rate-limit checks run ``_SLOW`` times slower than they read: a rate divided, every time and wait multiplied.
#: A shared backend's buckets expire in real time (Redis: ``burst / rate`` seconds and one more), so at the rates
#: written, a stall of a second or two between two calls of a loaded machine refilled a bucket a check had emptied;
#: slowed, a bucket lasts 17 s or more. A power of two keeps the checks' binary steps exact. The two clock checks
#: are about steps of the backend's own seconds (a late reading up to a second behind, a clock stepped back by more),
#: which slowing would stretch too: they keep their steps as written and their buckets' lives long otherwise.
_SLOW = 64.0


def _slowed(backend: Any, key: str, *, rate: float, burst: float, cost: float, now: float) -> float:
    """``backend.acquire`` with time ``_SLOW`` times slower, its wait read back at the checks' rate."""
    return float(backend.acquire(key, rate=rate / _SLOW, burst=burst, cost=cost, now=now * _SLOW)) / _SLOW


class RateLimitBackendContract(Suite, standard=True, provided=("backend",)):
    """What a rate-limit backend (``acquire(key, rate, burst, cost, now) -> wait``) must do.

    The checks run ``_SLOW`` (64) times slower than they read (rates divided, times multiplied): a backend whose
    buckets expire in real time keeps them through any stall of the machine between two calls. The two clock checks
    (late readings, a clock stepped back) keep the backend's own seconds and give their buckets 17 s or more otherwise."""

    @pytest.fixture
    def backend(self) -> Any:  # pragma: no cover - provided by the implementer
        raise NotImplementedError

    def test_new_bucket_is_full(self, backend: Any) -> None:
        waits = [_slowed(backend, "k", rate=10, burst=20, cost=1, now=100.0) for _ in range(21)]
        assert waits[:20] == [0.0] * 20
        assert waits[20] == pytest.approx(0.1)

    def test_refill_over_time(self, backend: Any) -> None:
        for _ in range(5):
            _slowed(backend, "k", rate=2, burst=5, cost=1, now=0.0)
        assert _slowed(backend, "k", rate=2, burst=5, cost=1, now=0.0) == pytest.approx(0.5)
        assert _slowed(backend, "k", rate=2, burst=5, cost=1, now=0.5) == 0.0
        assert _slowed(backend, "k", rate=2, burst=5, cost=1, now=0.5) == pytest.approx(0.5)

    def test_refill_caps_at_burst(self, backend: Any) -> None:
        _slowed(backend, "k", rate=1, burst=3, cost=3, now=0.0)
        passed = sum(_slowed(backend, "k", rate=1, burst=3, cost=1, now=1000.0) == 0.0 for _ in range(5))
        assert passed == 3

    def test_cost_and_refused_calls_take_nothing(self, backend: Any) -> None:
        assert _slowed(backend, "k", rate=1, burst=4, cost=3, now=0.0) == 0.0
        assert _slowed(backend, "k", rate=1, burst=4, cost=3, now=0.0) == pytest.approx(2.0)
        assert _slowed(backend, "k", rate=1, burst=4, cost=1, now=0.0) == 0.0  # the refusal took nothing

    def test_keys_are_independent(self, backend: Any) -> None:
        assert _slowed(backend, "a", rate=1, burst=1, cost=1, now=0.0) == 0.0
        assert _slowed(backend, "a", rate=1, burst=1, cost=1, now=0.0) > 0
        assert _slowed(backend, "b", rate=1, burst=1, cost=1, now=0.0) == 0.0

    def test_exact_under_threads(self, backend: Any) -> None:
        """16 threads take from a new bucket of 5 at once, in 10 rounds (one bucket each): 5 pass per round."""
        rounds = _race(16, lambda n: _slowed(backend, f"race-{n // 16}", rate=1, burst=5, cost=1, now=0.0), rounds=10)
        admitted = [sum(wait == 0.0 for wait in answers) for answers in rounds]
        assert admitted == [5] * 10, f"16 calls at once on a bucket of 5 took {admitted} tokens per round: not atomic"

    def test_late_readings_pay_no_interval_twice(self, backend: Any) -> None:
        """A thread reads the clock, then waits its turn while another takes a token at a later time:
        its ``now``, up to a second before the bucket's last, refills nothing (taken as the clock
        stepping back, it let the next call refill the same interval again). 64 steps of 1/64 s at
        8 a second, each followed by a reading 1/128 s late (the backend's own seconds, not slowed):
        2 + 8 * 63/64 tokens, 9 calls. The bucket holds 130 (128 taken at once first), so it lasts
        17 s of real time (``burst / rate`` and one more) without slowing the steps."""
        assert backend.acquire("k", rate=8, burst=130, cost=128, now=0.0) == 0.0
        admitted = 0
        for step in range(64):
            for now in (step / 64, step / 64 - 1 / 128):
                admitted += float(backend.acquire("k", rate=8, burst=130, cost=1, now=now)) == 0.0
        assert admitted == 9, f"readings 1/128 s late among on-time ones admitted {admitted} calls, not 9 (2 + 8 * 63/64 tokens)"

    def test_a_clock_stepped_back_far_refills_from_there(self, backend: Any) -> None:
        """A clock stepped back a minute (a wall clock, as Redis ``TIME``), or two seconds (past the
        one second a late reading may lag), refills from the new time on: refills do not stop until
        it catches up. The steps are the backend's own seconds; the rate (2/64 a second: a token
        each 32 s, a bucket that lasts 33 s of real time) is slowed."""
        rate = 2 / _SLOW

        def wait(now: float) -> float:
            return float(backend.acquire("k", rate=rate, burst=1, cost=1, now=now))

        assert wait(6400.0) == 0.0
        back = wait(6340.0)  # a minute back: nothing refilled for the step, refills from 6340 on
        assert back == pytest.approx(32.0), f"a token taken, then the clock stepped back 60 s: the wait is {back} s, not 32 s"
        caught = wait(6372.0)
        assert caught == 0.0, f"32 s after the clock stepped back a minute (a token's time) the wait is {caught} s, not 0"
        assert wait(6370.0) == pytest.approx(32.0)  # two seconds back: a step back too, not a late reading
        caught = wait(6402.0)
        assert caught == 0.0, f"32 s after the clock stepped back 2 s (a token's time) the wait is {caught} s, not 0"


class RateLimitPluginContract(Suite, standard=True, provided=("make_plugin",)):
    """What a plugin registered as ``rate_limit`` must do, driven through a real registry.

    ``make_plugin(**options)`` builds the plugin; the contract uses two options,
    ``default`` (a limit for tools that declare none) and ``max_wait`` (seconds a call may
    wait for a token before it is refused). The checks run ``_SLOW`` (64) times slower than the
    limits they are about (rates divided, times, waits and ``retry_after`` multiplied): a shared
    backend's buckets expire in real time.
    """

    @pytest.fixture
    def make_plugin(self) -> PluginFactory:  # pragma: no cover - provided by the implementer
        raise NotImplementedError

    @pytest.fixture
    def clock(self) -> ManualClock:
        return BoundedClock(start=50.0)

    def registry(self, make_plugin: PluginFactory, clock: ManualClock, **options: Any) -> ToolRegistry:
        return ToolRegistry(plugins={"rate_limit": make_plugin(**options)}, clock=clock, autoload=False)

    def test_seed_example(self, make_plugin: PluginFactory, clock: ManualClock) -> None:
        """``rate=10, burst=20``: twenty calls pass at once, the 21st is refused with ``retry_after`` 0.1 s (slowed)."""
        reg = self.registry(make_plugin, clock)
        reg.add(lambda a, b: a + b, name="add", rate_limit={"rate": 10 / _SLOW, "burst": 20})
        assert [reg.call("add", {"a": 1, "b": 1}) for _ in range(20)] == [2] * 20
        with pytest.raises(RateLimitExceeded) as refused:
            reg.call("add", {"a": 1, "b": 1})
        assert refused.value.retry_after == pytest.approx(0.1 * _SLOW)
        assert refused.value.tool == "add"

    def test_tokens_come_back_at_rate(self, make_plugin: PluginFactory, clock: ManualClock) -> None:
        reg = self.registry(make_plugin, clock)
        reg.add(lambda: 1, name="f", rate_limit={"rate": 4 / _SLOW, "burst": 2})
        reg.call("f")
        reg.call("f")
        clock.advance(0.5 * _SLOW)  # 2 tokens
        reg.call("f")
        reg.call("f")
        with pytest.raises(RateLimitExceeded):
            reg.call("f")

    def test_exact_under_threads(self, make_plugin: PluginFactory, clock: ManualClock) -> None:
        """16 threads hammer one tool; time moves in exact binary steps between rounds."""
        rate, burst, rounds, step = 32.0, 20, 41, 1 / 64
        reg = self.registry(make_plugin, clock)
        reg.add(lambda: 1, name="hot", rate_limit={"rate": rate / _SLOW, "burst": burst})
        passed = [0]
        lock = threading.Lock()
        barrier = threading.Barrier(16, action=lambda: clock.advance(step * _SLOW))

        def worker() -> None:
            for _ in range(rounds):
                ok = sum(reg.try_call("hot").ok for _ in range(4))
                with lock:
                    passed[0] += ok
                barrier.wait()

        threads = [threading.Thread(target=worker) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        window = (rounds - 1) * step  # the last round runs at this simulated time
        assert passed[0] == burst + math.floor(rate * window)

    def test_keyed_buckets(self, make_plugin: PluginFactory, clock: ManualClock) -> None:
        reg = self.registry(make_plugin, clock)
        reg.add(lambda: 1, name="f", rate_limit={"rate": 1 / _SLOW, "burst": 1, "key": "user_id"})
        reg.call("f", context={"user_id": "ann"})
        reg.call("f", context={"user_id": "bob"})
        with pytest.raises(RateLimitExceeded):
            reg.call("f", context={"user_id": "ann"})

    def test_unlimited_tools_and_registry_default(self, make_plugin: PluginFactory, clock: ManualClock) -> None:
        reg = self.registry(make_plugin, clock)
        reg.add(lambda: 1, name="free")
        assert sum(reg.call("free") for _ in range(500)) == 500
        limited = self.registry(make_plugin, clock, default={"rate": 1 / _SLOW, "burst": 2})
        limited.add(lambda: 1, name="free")
        limited.call("free")
        limited.call("free")
        with pytest.raises(RateLimitExceeded):
            limited.call("free")

    def test_wait_mode_sync(self, make_plugin: PluginFactory, clock: ManualClock) -> None:
        reg = self.registry(make_plugin, clock, max_wait=1.0 * _SLOW)
        reg.add(lambda: 1, name="f", rate_limit={"rate": 2 / _SLOW, "burst": 1})
        start = clock.now()
        assert [reg.call("f") for _ in range(3)] == [1, 1, 1]
        assert clock.now() - start == pytest.approx(1.0 * _SLOW)  # waited 0.5 s (slowed) twice
        result = reg.try_call("f")
        assert result.ok and result.attempts == 1
        tight = self.registry(make_plugin, clock)
        tight.add(lambda: 1, name="g", rate_limit={"rate": 1 / _SLOW, "burst": 1, "max_wait": 0.5 * _SLOW})
        tight.call("g")
        with pytest.raises(RateLimitExceeded):
            tight.call("g")  # needs 1 s, may wait 0.5 s

    def test_wait_mode_async(self, make_plugin: PluginFactory, clock: ManualClock) -> None:
        reg = self.registry(make_plugin, clock, max_wait=5.0 * _SLOW)

        async def f() -> int:
            return 1

        reg.add(f, name="f", rate_limit={"rate": 1 / _SLOW, "burst": 1})

        async def main() -> list[int]:
            return [await reg.acall("f") for _ in range(3)]

        assert asyncio.run(main()) == [1, 1, 1]
        assert clock.sleeps == [1.0 * _SLOW, 1.0 * _SLOW]


class ValidationPluginContract(Suite, standard=True, provided=("make_plugin",)):
    """What a plugin registered as ``validation`` must do: refuse a wrong type, a value out of range and a missing field as a
    ``ToolArgumentError`` naming the field, fill in defaults, and accept arguments as a JSON string.

    The contract's tool gives every parameter a Python default of its own, so the core (which refuses a missing
    argument only when the function has no default) never does the plugin's work: each check passes only through it.
    """

    @pytest.fixture
    def make_plugin(self) -> PluginFactory:  # pragma: no cover - provided by the implementer
        raise NotImplementedError

    @pytest.fixture
    def registry(self, make_plugin: PluginFactory) -> ToolRegistry:
        reg = ToolRegistry(plugins={"validation": make_plugin()}, autoload=False)
        schema = {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "num_results": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            },
            "required": ["query"],
        }

        def web_search(query: Any = None, num_results: int = 0) -> list[Any]:
            return [query] * num_results  # 0, not the schema's 5, unless the plugin fills the default in

        reg.add(web_search, parameters=schema)
        return reg

    @pytest.mark.parametrize(
        ("args", "field"),
        [({"query": 1}, "query"), ({"query": "q", "num_results": 11}, "num_results"), ({}, "query")],
        ids=["wrong-type", "out-of-range", "missing"],
    )
    def test_refusals_name_the_field(self, registry: ToolRegistry, args: dict[str, Any], field: str) -> None:
        with pytest.raises(ToolArgumentError) as err:
            registry.call("web_search", args)
        assert _names_field(err.value, field), f"the refusal does not name {field!r}: {err.value}"

    def test_valid_call_gets_defaults(self, registry: ToolRegistry) -> None:
        assert registry.call("web_search", {"query": "q"}) == ["q"] * 5

    def test_json_string_arguments(self, registry: ToolRegistry) -> None:
        """JSON text is validated like an object: its defaults filled in, a wrong type in it refused naming the field."""
        assert registry.call("web_search", '{"query": "q", "num_results": 2}') == ["q", "q"]
        assert registry.call("web_search", '{"query": "q"}') == ["q"] * 5
        with pytest.raises(ToolArgumentError) as err:
            registry.call("web_search", '{"query": 1}')
        assert _names_field(err.value, "query"), f"the refusal does not name 'query': {err.value}"


class IdempotencyStoreContract(Suite, standard=True, provided=("store", "peer")):
    """What an idempotency store (``begin``/``renew``/``finish``/``release``) must do.

    Capability: ``has_owners`` (default True): the four methods take ``owner=`` (``finish`` also
    ``now=``) and, given it, act only on that owner's claim. A store written before owners sets
    it False: the plugin calls it without them, and the owner checks are switched off.
    ``peer`` is a second handle on the same records, as another worker holds (the file opened
    again, a second connection); by default ``store`` itself. The owner checks claim with one
    handle and act with the other.

    ``keeps_quoted`` (default True): a finished ``Record`` begins again with its ``quoted`` flag
    (a value whose JSON is a string, a date or a ``Decimal``, is then replayed as the model first
    read it, quoted); a store written before the flag sets it False (such a value replays as text).

    A store with awaitable twins (``abegin``, ``afinish``, ``arelease``; ``arenew`` optional)
    is checked through them too; for a store without ``abegin`` those checks are skipped.
    """

    has_owners: bool = True
    keeps_quoted: bool = True

    @pytest.fixture
    def store(self) -> Any:  # pragma: no cover - provided by the implementer
        raise NotImplementedError

    @pytest.fixture
    def peer(self, store: Any) -> Any:
        return store

    def needs_owners(self, store: Any) -> None:
        """Go on only if the store keeps owners (``has_owners``, which must say what the plugin sees)."""
        _keyword_flag(self, "has_owners", "owner", _OWNER_METHODS, store, "written before owners: called without owner=")

    def needs_twins(self, store: Any) -> None:
        """Go on only if the store has awaitable twins (``abegin``, ``afinish``, ``arelease``)."""
        _needs_twins(store, _IDEMPOTENCY_TWINS)

    def test_first_begin_owns_the_key(self, store: Any) -> None:
        assert store.begin("tool", "k", "fp1", 100.0, 30.0) is None
        running = store.begin("tool", "k", "fp1", 101.0, 30.0)
        assert running is not None and running.state == "running" and running.fingerprint == "fp1"

    def test_finished_outcome_is_returned(self, store: Any) -> None:
        store.begin("tool", "k", "fp", 0.0, 30.0)
        store.finish("tool", "k", Record("fp", "done", 1000.0, True, {"answer": [1, 2]}))
        done = store.begin("tool", "k", "fp", 10.0, 30.0)
        assert (done.state, done.ok, done.value) == ("done", True, {"answer": [1, 2]})
        store.begin("tool", "e", "fp", 0.0, 30.0)
        store.finish("tool", "e", Record("fp", "done", 1000.0, False, None, {"class": "ToolError", "state": {"message": "m"}}))
        failed = store.begin("tool", "e", "fp", 10.0, 30.0)
        assert failed.ok is False and failed.error == {"class": "ToolError", "state": {"message": "m"}}

    def test_a_finished_quoted_value_begins_again_quoted(self, store: Any, peer: Any) -> None:
        if not self.keeps_quoted:
            self.switched_off("keeps_quoted", "written before Record.quoted: a value whose JSON is a string replays as text")
        for key, quoted in (("q", True), ("t", False)):
            store.begin("tool", key, "fp", 0.0, 30.0)
            store.finish("tool", key, Record("fp", "done", 1000.0, True, "2026-12-07", quoted=quoted))
            for handle in (store, peer):
                done = handle.begin("tool", key, "fp", 10.0, 30.0)
                assert (done.value, done.quoted) == ("2026-12-07", quoted), (
                    f"{type(store).__name__} finished a Record with quoted={quoted}, and it began again with quoted="
                    f"{done.quoted!r}: keep the flag with the value, or set keeps_quoted = False"
                )

    def test_records_expire(self, store: Any) -> None:
        store.begin("tool", "k", "fp", 0.0, 30.0)
        store.finish("tool", "k", Record("fp", "done", 50.0, True, 1))
        assert store.begin("tool", "k", "fp2", 49.0, 30.0).value == 1
        assert store.begin("tool", "k", "fp2", 50.0, 30.0) is None  # expired: a new owner

    def test_lease_frees_a_crashed_owner(self, store: Any) -> None:
        store.begin("tool", "k", "fp", 0.0, 5.0)
        assert store.begin("tool", "k", "fp", 4.9, 5.0) is not None
        assert store.begin("tool", "k", "fp", 5.0, 5.0) is None

    def test_renewal_extends_a_running_lease(self, store: Any) -> None:
        store.begin("tool", "k", "fp", 0.0, 5.0)
        assert store.renew("tool", "k", 4.0, 5.0) is True
        assert store.begin("tool", "k", "fp", 8.9, 5.0).state == "running"  # held until 9.0 now
        assert store.begin("tool", "k", "fp", 9.0, 5.0) is None  # lapsed: a new owner
        store.finish("tool", "k", Record("fp", "done", 100.0, True, 1))
        assert store.renew("tool", "k", 10.0, 5.0) is False  # a finished record is not a lease
        assert store.renew("tool", "missing", 10.0, 5.0) is False

    def test_release_and_scopes(self, store: Any) -> None:
        store.begin("a", "k", "fp", 0.0, 30.0)
        assert store.begin("b", "k", "fp", 0.0, 30.0) is None  # keys are per tool
        store.release("a", "k")
        assert store.begin("a", "k", "fp", 0.0, 30.0) is None

    def test_exactly_one_owner_under_threads(self, store: Any, peer: Any) -> None:
        """16 callers claim one key at once, half through ``store`` and half through ``peer``, in 10 rounds
        (one key each): exactly one owns it per round."""
        rounds = _race(16, lambda n: (store, peer)[n % 2].begin("tool", f"race-{n // 16}", "fp", 0.0, 30.0), rounds=10)
        owners = [sum(answer is None for answer in answers) for answers in rounds]
        assert owners == [1] * 10, f"16 claims at once of one key made {owners} owners per round: not atomic"

    def test_a_lapsed_owners_release_frees_nothing_another_claimed(self, store: Any, peer: Any) -> None:
        self.needs_owners(store)
        runs = 0
        runs += store.begin("tool", "k", "fp", 0.0, 10.0, owner="A") is None
        runs += peer.begin("tool", "k", "fp", 10.0, 10.0, owner="B") is None  # A's lease lapsed: B claims
        store.release("tool", "k", owner="A")  # A's call failed late: B's claim stays
        held = peer.begin("tool", "k", "fp", 11.0, 10.0, owner="C")
        assert held is not None and held.state == "running"  # C meets B's claim
        assert runs == 2
        peer.release("tool", "k", owner="B")  # the owner's own release frees the key
        assert store.begin("tool", "k", "fp", 12.0, 10.0, owner="D") is None

    def test_a_lapsed_owners_finish_keeps_another_callers_claim(self, store: Any, peer: Any) -> None:
        self.needs_owners(store)
        assert store.begin("tool", "k", "fp", 0.0, 10.0, owner="A") is None
        assert peer.begin("tool", "k", "fp", 10.0, 10.0, owner="B") is None
        assert store.finish("tool", "k", _done("from A"), owner="A", now=12.0) is False  # B's live claim is kept
        assert peer.begin("tool", "k", "fp", 13.0, 10.0, owner="C").state == "running"
        assert peer.finish("tool", "k", _done("from B"), owner="B", now=14.0) is True
        assert store.finish("tool", "k", _done("from A"), owner="A", now=15.0) is False  # nor is B's outcome overwritten
        assert store.begin("tool", "k", "fp", 16.0, 10.0, owner="E").value == "from B"

    def test_finish_stores_when_no_one_else_holds_a_live_claim(self, store: Any, peer: Any) -> None:
        self.needs_owners(store)
        assert store.begin("tool", "k", "fp", 0.0, 10.0, owner="A") is None
        assert store.finish("tool", "k", _done("late"), owner="A", now=20.0) is True  # lapsed, but still A's claim
        assert peer.begin("tool", "k", "fp", 21.0, 10.0, owner="B").value == "late"
        # Another caller claimed meanwhile and died: its lapsed claim does not cost A its outcome.
        assert store.begin("tool", "k2", "fp", 0.0, 10.0, owner="A") is None
        assert peer.begin("tool", "k2", "fp", 10.0, 10.0, owner="B") is None
        assert store.finish("tool", "k2", _done("A ran"), owner="A", now=25.0) is True
        assert peer.begin("tool", "k2", "fp", 26.0, 10.0, owner="C").value == "A ran"
        # The key is gone (released by a caller without owners): the outcome is stored.
        assert store.begin("tool", "k3", "fp", 0.0, 10.0, owner="A") is None
        peer.release("tool", "k3")
        assert store.finish("tool", "k3", _done("kept"), owner="A", now=1.0) is True
        assert peer.begin("tool", "k3", "fp", 2.0, 10.0, owner="B").value == "kept"

    def test_only_the_owner_renews_its_claim(self, store: Any, peer: Any) -> None:
        self.needs_owners(store)
        assert store.begin("tool", "k", "fp", 0.0, 10.0, owner="A") is None
        assert store.renew("tool", "k", 5.0, 10.0, owner="A") is True
        assert peer.begin("tool", "k", "fp", 15.0, 10.0, owner="B") is None  # A's renewals stopped: B claims
        assert store.renew("tool", "k", 16.0, 10.0, owner="A") is False  # A learns it lost the claim
        assert peer.begin("tool", "k", "fp", 25.0, 10.0, owner="C") is None  # and did not extend B's lease

    def test_async_twins_claim_replay_and_release(self, store: Any) -> None:
        """``abegin``, ``afinish`` and ``arelease`` do what their blocking methods do, on the same records."""
        self.needs_twins(store)

        async def scenario() -> None:
            assert await store.abegin("tool", "k", "fp", 0.0, 5.0) is None
            running = await store.abegin("tool", "k", "fp", 1.0, 5.0)
            assert running is not None and running.state == "running" and running.fingerprint == "fp"
            assert store.begin("tool", "k", "fp", 1.0, 5.0).state == "running"  # one record for both kinds of call
            await store.afinish("tool", "k", _done({"answer": [1, 2]}))
            done = await store.abegin("tool", "k", "fp2", 10.0, 5.0)
            assert done is not None and (done.state, done.ok, done.value) == ("done", True, {"answer": [1, 2]})
            assert await store.abegin("tool", "lapsed", "fp", 0.0, 5.0) is None
            assert await store.abegin("tool", "lapsed", "fp", 5.0, 5.0) is None  # its lease ran out: a new claim
            assert store.begin("tool", "gone", "fp", 0.0, 30.0) is None
            await store.arelease("tool", "gone")
            assert await store.abegin("tool", "gone", "fp", 1.0, 30.0) is None

        asyncio.run(scenario())

    def test_async_twins_act_only_for_the_owner(self, store: Any, peer: Any) -> None:
        """Through ``abegin``, ``afinish`` and ``arelease``: a lapsed owner frees and overwrites nothing another
        caller claimed since, and its outcome is stored when no one else holds a live claim."""
        self.needs_twins(store)
        self.needs_owners(store)

        async def scenario() -> None:
            assert await store.abegin("tool", "k", "fp", 0.0, 10.0, owner="A") is None
            assert await peer.abegin("tool", "k", "fp", 10.0, 10.0, owner="B") is None  # A's lease lapsed: B claims
            await store.arelease("tool", "k", owner="A")  # A's call failed late: B's claim stays
            held = await peer.abegin("tool", "k", "fp", 11.0, 10.0, owner="C")
            assert held is not None and held.state == "running"
            assert await store.afinish("tool", "k", _done("from A"), owner="A", now=12.0) is False  # B's live claim is kept
            assert await peer.afinish("tool", "k", _done("from B"), owner="B", now=13.0) is True
            assert await store.afinish("tool", "k", _done("from A"), owner="A", now=14.0) is False  # nor B's outcome
            replayed = await store.abegin("tool", "k", "fp", 15.0, 10.0, owner="D")
            assert replayed is not None and replayed.value == "from B"
            assert await store.abegin("tool", "k2", "fp", 0.0, 10.0, owner="A") is None
            assert await store.afinish("tool", "k2", _done("late"), owner="A", now=20.0) is True  # lapsed, but still A's
            assert (await peer.abegin("tool", "k2", "fp", 21.0, 10.0, owner="B")).value == "late"
            assert await store.abegin("tool", "k3", "fp", 0.0, 10.0, owner="A") is None
            await peer.arelease("tool", "k3", owner="A")  # the owner's release frees the key, through any handle
            assert await peer.abegin("tool", "k3", "fp", 1.0, 10.0, owner="B") is None

        asyncio.run(scenario())

    def test_async_renewal_only_by_the_owner(self, store: Any, peer: Any) -> None:
        """``arenew``, for a store that has it (optional: the plugins renew with ``renew`` on their lease thread)."""
        self.needs_twins(store)
        self.needs_owners(store)
        if not hasattr(store, "arenew"):
            pytest.skip(f"switched off: {type(store).__name__} has no arenew (optional: the plugins renew with renew)")

        async def scenario() -> None:
            assert await store.abegin("tool", "k", "fp", 0.0, 10.0, owner="A") is None
            assert await store.arenew("tool", "k", 5.0, 10.0, owner="A") is True
            assert (await peer.abegin("tool", "k", "fp", 14.0, 10.0, owner="B")).state == "running"  # held until 15
            assert await peer.abegin("tool", "k", "fp", 15.0, 10.0, owner="B") is None  # A's renewals stopped: B claims
            assert await store.arenew("tool", "k", 16.0, 10.0, owner="A") is False  # A learns it lost the claim
            assert await peer.abegin("tool", "k", "fp", 25.0, 10.0, owner="C") is None  # and did not extend B's lease
            assert await store.arenew("tool", "missing", 25.0, 10.0, owner="A") is False

        asyncio.run(scenario())

    def test_a_claim_without_owner_is_no_owners(self, store: Any, peer: Any) -> None:
        """A claim made without ``owner`` (an older harness-one) is another caller's claim, and acts as before."""
        self.needs_owners(store)
        assert store.begin("tool", "k", "fp", 0.0, 10.0) is None
        peer.release("tool", "k", owner="X")
        assert peer.renew("tool", "k", 1.0, 10.0, owner="X") is False
        assert peer.finish("tool", "k", _done("X"), owner="X", now=2.0) is False
        assert peer.begin("tool", "k", "fp", 3.0, 10.0, owner="Y").state == "running"
        assert store.renew("tool", "k", 4.0, 10.0) is True  # without owner: as before
        store.release("tool", "k")
        assert peer.begin("tool", "k", "fp", 5.0, 10.0, owner="Y") is None


class ConcurrencySlotsContract(Suite, standard=True, provided=("slots",)):
    """What a concurrency-slot backend (``acquire``/``renew``/``release``/``running``) must do.

    Capability: ``expires_leases`` (default False): slots of a holder that stopped renewing
    are freed after their lease (shared backends do this; the memory backend frees a slot
    when its call ends, so it never needs to).
    """

    expires_leases: bool = False

    @pytest.fixture
    def slots(self) -> Any:  # pragma: no cover - provided by the implementer
        raise NotImplementedError

    def test_cap_per_tool(self, slots: Any) -> None:
        taken = [slots.acquire("t", f"h{i}", cap=2, total=None, now=0.0, lease=30.0) for i in range(3)]
        assert taken == [(True, 0, 0), (True, 1, 1), (False, 2, 2)]
        assert slots.acquire("other", "h9", cap=2, total=None, now=0.0, lease=30.0)[0] is True  # caps are per tool
        slots.release("t", "h0")
        assert slots.acquire("t", "h3", cap=2, total=None, now=0.0, lease=30.0)[0] is True

    def test_total_cap_across_tools(self, slots: Any) -> None:
        assert slots.acquire("a", "h1", cap=None, total=2, now=0.0, lease=30.0)[0] is True
        assert slots.acquire("b", "h2", cap=None, total=2, now=0.0, lease=30.0)[0] is True
        assert slots.acquire("c", "h3", cap=None, total=2, now=0.0, lease=30.0) == (False, 0, 2)

    def test_running_and_release(self, slots: Any) -> None:
        slots.acquire("a", "h1", cap=None, total=None, now=0.0, lease=30.0)
        slots.acquire("a", "h2", cap=None, total=None, now=0.0, lease=30.0)
        slots.acquire("b", "h3", cap=None, total=None, now=0.0, lease=30.0)
        assert (slots.running("a", now=1.0), slots.running("b", now=1.0), slots.running(None, now=1.0)) == (2, 1, 3)
        slots.release("a", "h1")
        slots.release("a", "h1")  # twice: nothing more happens
        slots.release("a", "nobody")
        assert (slots.running("a", now=1.0), slots.running(None, now=1.0)) == (1, 2)

    def test_renew_only_held_slots(self, slots: Any) -> None:
        slots.acquire("a", "h1", cap=1, total=None, now=0.0, lease=30.0)
        assert slots.renew("a", "h1", now=10.0, lease=30.0) is True
        slots.release("a", "h1")
        assert slots.renew("a", "h1", now=11.0, lease=30.0) is False

    def test_lapsed_lease_frees_the_slot(self, slots: Any) -> None:
        if not self.expires_leases:
            self.switched_off("expires_leases", "slots are freed when their call ends, not by lease")
        slots.acquire("a", "h1", cap=1, total=None, now=0.0, lease=5.0)
        assert slots.acquire("a", "h2", cap=1, total=None, now=4.0, lease=5.0)[0] is False
        assert slots.acquire("a", "h3", cap=1, total=None, now=6.0, lease=5.0)[0] is True

    def test_exact_cap_under_threads(self, slots: Any) -> None:
        answers = _race(16, lambda i: slots.acquire("hot", f"h{i}", cap=5, total=None, now=0.0, lease=30.0)[0])[0]
        assert sum(answers) == 5 and slots.running("hot", now=0.0) == 5


class CircuitStoreContract(Suite, standard=True, provided=("circuits",)):
    """What a circuit-state backend (``admit``/``record``/``unprobe``/``snapshot``) must do.

    ``admit`` answers ``(0, 0)`` for a call of a closed circuit and ``(0, period)`` for a probe,
    ``period`` a positive number that changes each time the circuit opens; ``record`` and
    ``unprobe`` get it back, and a probe of an earlier period decides nothing.
    """

    policy = CircuitBreakerPolicy(failure_ratio=0.5, min_calls=4, window=60.0, open_for=10.0, probes=2)

    @pytest.fixture
    def circuits(self) -> Any:  # pragma: no cover - provided by the implementer
        raise NotImplementedError

    def trip(self, circuits: Any, tool: str = "t", now: float = 0.0) -> None:
        for failed in (True, True, False, True):
            circuits.record(tool, self.policy, now=now, failed=failed, probe=0)

    def test_closed_admits_and_counts(self, circuits: Any) -> None:
        assert circuits.admit("t", self.policy, now=0.0) == (0.0, 0)
        circuits.record("t", self.policy, now=0.0, failed=False, probe=0)
        circuits.record("t", self.policy, now=0.5, failed=True, probe=0)
        snap = circuits.snapshot("t", self.policy, now=1.0)
        assert (snap["state"], snap["calls"], snap["failures"], snap["opened"]) == ("closed", 2, 1, 0)

    def test_opens_at_the_failure_ratio(self, circuits: Any) -> None:
        self.trip(circuits)
        wait, probe = circuits.admit("t", self.policy, now=1.0)
        assert wait == pytest.approx(9.0) and probe == 0
        assert circuits.snapshot("t", self.policy, now=1.0)["state"] == "open"
        assert circuits.admit("other", self.policy, now=1.0) == (0.0, 0)  # circuits are per tool

    def test_min_calls_before_opening(self, circuits: Any) -> None:
        for _ in range(3):
            circuits.record("t", self.policy, now=0.0, failed=True, probe=0)
        assert circuits.admit("t", self.policy, now=0.0) == (0.0, 0)

    def test_old_failures_leave_the_window(self, circuits: Any) -> None:
        for _ in range(3):
            circuits.record("t", self.policy, now=0.0, failed=True, probe=0)
        circuits.record("t", self.policy, now=100.0, failed=True, probe=0)  # the first three are 100 s old
        assert circuits.admit("t", self.policy, now=100.0) == (0.0, 0)

    def test_probes_close_the_circuit(self, circuits: Any) -> None:
        self.trip(circuits)
        (wait, first), (again, second) = circuits.admit("t", self.policy, now=10.0), circuits.admit("t", self.policy, now=10.0)
        assert wait == again == 0.0 and first == second and first > 0
        assert circuits.admit("t", self.policy, now=10.0)[0] > 0  # two probes at most
        circuits.record("t", self.policy, now=10.5, failed=False, probe=first)
        circuits.record("t", self.policy, now=10.5, failed=False, probe=second)
        assert circuits.snapshot("t", self.policy, now=11.0)["state"] == "closed"
        assert circuits.admit("t", self.policy, now=11.0) == (0.0, 0)

    def test_a_failed_probe_reopens(self, circuits: Any) -> None:
        self.trip(circuits)
        wait, probe = circuits.admit("t", self.policy, now=10.0)
        assert wait == 0.0 and probe > 0
        circuits.record("t", self.policy, now=10.5, failed=True, probe=probe)
        snap = circuits.snapshot("t", self.policy, now=11.0)
        assert snap["state"] == "open" and snap["opened"] == 2
        assert circuits.admit("t", self.policy, now=11.0)[0] == pytest.approx(9.5)

    def test_a_probe_of_an_earlier_period_decides_nothing(self, circuits: Any) -> None:
        """A probe that ends after its period's verdict neither closes the next period nor takes its place."""
        self.trip(circuits)
        _, late = circuits.admit("t", self.policy, now=10.0)
        _, failing = circuits.admit("t", self.policy, now=10.0)
        circuits.record("t", self.policy, now=10.5, failed=True, probe=failing)  # reopened
        circuits.record("t", self.policy, now=11.0, failed=False, probe=late)  # too late: nothing
        circuits.unprobe("t", self.policy, probe=late)  # nor this
        _, first = circuits.admit("t", self.policy, now=20.5)
        _, second = circuits.admit("t", self.policy, now=20.5)
        assert first == second and first not in (0, late)
        assert circuits.admit("t", self.policy, now=20.5)[0] > 0  # still two probes at most
        circuits.record("t", self.policy, now=21.0, failed=False, probe=late)  # an old success closes nothing
        circuits.record("t", self.policy, now=21.0, failed=False, probe=first)
        assert circuits.snapshot("t", self.policy, now=21.0)["state"] == "half_open"
        circuits.record("t", self.policy, now=21.5, failed=False, probe=second)
        assert circuits.snapshot("t", self.policy, now=21.5)["state"] == "closed"

    def test_probes_under_threads(self, circuits: Any) -> None:
        """16 calls reach a half-open circuit at once, in 10 rounds (one tool each): ``probes`` (2) are admitted."""
        for r in range(10):
            self.trip(circuits, f"race-{r}")
        rounds = _race(16, lambda n: circuits.admit(f"race-{n // 16}", self.policy, now=10.0), rounds=10)
        admitted = [sum(wait == 0.0 for wait, _ in answers) for answers in rounds]
        assert admitted == [self.policy.probes] * 10, (
            f"16 calls at once on a half-open circuit of {self.policy.probes} probes admitted {admitted} per round: not atomic"
        )

    def test_unprobe_gives_the_place_back(self, circuits: Any) -> None:
        self.trip(circuits)
        _, probe = circuits.admit("t", self.policy, now=10.0)
        circuits.admit("t", self.policy, now=10.0)
        circuits.unprobe("t", self.policy, probe=probe)
        assert circuits.admit("t", self.policy, now=10.0) == (0.0, probe)


class BudgetStoreContract(Suite, standard=True, provided=("store", "peer")):
    """What a per-run budget store (``take``/``give_back``/``used``/``forget``) must do.

    Capabilities: ``has_tickets`` (default True): ``give_back`` (and ``agive_back``) take
    ``ticket=``, a give-back sent again is ignored, also once its run has nothing counted, and
    any other give-back applies, however many takes of the run came since; a store written
    before tickets sets it False (the plugin calls it without them). ``kept_tickets`` (default
    64, the standard stores'): how many of a run's latest give-backs the store remembers; a
    give-back sent again after that many others applies again. None switches that check off.
    A store with awaitable twins (``atake``, ``agive_back``) is checked through them too; for a
    store without ``atake`` those checks are skipped. A store with ``auntake`` (and ``untake``)
    is checked for take tickets: a take sent again counts once, ``untake`` returns a counted
    take's unit once and makes a take that comes after it count nothing; for a store without
    ``auntake`` those checks are skipped.
    """

    has_tickets: bool = True
    kept_tickets: int | None = KEPT_TICKETS

    @pytest.fixture
    def store(self) -> Any:  # pragma: no cover - provided by the implementer
        raise NotImplementedError

    @pytest.fixture
    def peer(self, store: Any) -> Any:
        return store

    def take(self, store: Any, scope: str = "t", run: str = "r", **limits: Any) -> int:
        limits.setdefault("limit", None)
        limits.setdefault("total", None)
        limits.setdefault("now", 0.0)
        limits.setdefault("ttl", 60.0)
        return int(store.take(run, scope, **limits))

    def needs_tickets(self, store: Any) -> None:
        """Go on only if the store keeps tickets (``has_tickets``, which must say what the plugin sees)."""
        _keyword_flag(self, "has_tickets", "ticket", _TICKET_METHODS, store, "written before tickets: called without ticket=")

    def needs_twins(self, store: Any) -> None:
        """Go on only if the store has awaitable twins (``atake``, ``agive_back``)."""
        _needs_twins(store, _BUDGET_TWINS)

    def needs_untake(self, store: Any) -> None:
        """Go on only if the store has ``auntake``: the plugin then passes ``ticket=`` to its ``take`` and ``atake``,
        and sends ``untake`` (or ``auntake``) for a take a cancelled ``acall`` cut short."""
        kind = type(store).__name__
        if not hasattr(store, _UNTAKES[0]):
            pytest.skip(f"switched off: {kind} has no auntake (takes without tickets: the plugin never untakes)")
        missing = [name for name in _UNTAKES[1:] if not callable(getattr(store, name, None))]
        assert not missing, f"{kind} has auntake but not {', '.join(missing)}: the plugin calls all of {', '.join(_UNTAKES)}"
        lacking = [name for name in ("take", *_UNTAKES[1:]) if not Accepts("ticket", name)(store)]
        assert not lacking, f"{kind} has auntake, so the plugin passes ticket= to {', '.join(lacking)}, which does not take it"

    def take_ticket(self, store: Any, ticket: str, run: str = "r", limit: int | None = None) -> int:
        """A take of scope ``t`` with ``ticket``."""
        return int(store.take(run, "t", limit=limit, total=None, now=0.0, ttl=60.0, ticket=ticket))

    def used_both(self, store: Any, run: str = "r") -> tuple[int, int]:
        """What ``run`` counts of scope ``t`` and of all scopes."""
        return store.used(run, "t", now=0.0), store.used(run, "*", now=0.0)

    def test_counts_up_to_the_limit_per_scope_and_run(self, store: Any) -> None:
        assert [self.take(store, limit=2) for _ in range(3)] == [0, 0, 1]
        assert self.take(store, "other", limit=2) == 0  # limits are per scope
        assert self.take(store, run="r2", limit=2) == 0  # and per run
        assert (store.used("r", "t", now=0.0), store.used("r", "other", now=0.0), store.used("r", "*", now=0.0)) == (2, 1, 3)

    def test_total_over_all_scopes(self, store: Any) -> None:
        answers = [self.take(store, scope, total=3) for scope in ("a", "a", "b", "b")]
        assert answers == [0, 0, 0, 2]
        assert self.take(store, "c", limit=5, total=3) == 2
        assert self.take(store, "a", limit=2, total=3) == 1  # the scope's own limit is named first
        assert store.used("r", "*", now=0.0) == 3 and store.used("r", "b", now=0.0) == 1  # refusals count nothing

    def test_zero_limit_refuses_at_once(self, store: Any) -> None:
        assert self.take(store, limit=0) == 1 and self.take(store, total=0) == 2
        assert store.used("r", "*", now=0.0) == 0

    def test_give_back_returns_one_unit_never_below_zero(self, store: Any) -> None:
        self.take(store, limit=1)
        store.give_back("r", "t")
        assert store.used("r", "t", now=0.0) == 0 and store.used("r", "*", now=0.0) == 0
        store.give_back("r", "t")  # nothing left to give back
        store.give_back("never", "t")
        assert self.take(store, limit=1) == 0 and self.take(store, limit=1) == 1
        assert store.used("never", "*", now=0.0) == 0

    def test_counters_expire_after_the_ttl(self, store: Any) -> None:
        assert self.take(store, limit=1, now=0.0, ttl=60.0) == 0
        assert self.take(store, limit=1, now=59.0, ttl=60.0) == 1  # a refusal is activity too: kept 60 s more
        assert store.used("r", "t", now=118.0) == 1
        assert store.used("r", "t", now=119.0) == 0  # idle for the ttl: forgotten
        assert self.take(store, limit=1, now=119.0, ttl=60.0) == 0

    def test_forget_one_run_or_all(self, store: Any) -> None:
        for run in ("a", "b", "c"):
            self.take(store, run=run)
        store.forget("a")
        assert [store.used(run, "*", now=0.0) for run in ("a", "b", "c")] == [0, 1, 1]
        store.forget(None)
        assert [store.used(run, "*", now=0.0) for run in ("a", "b", "c")] == [0, 0, 0]

    def test_exact_under_threads(self, store: Any, peer: Any) -> None:
        """16 calls take at once, half through ``store`` and half through ``peer``, in 10 rounds (one scope
        each): 5 pass per round, and 5 are counted."""
        rounds = _race(16, lambda n: self.take((store, peer)[n % 2], f"hot-{n // 16}", limit=5), rounds=10)
        admitted = [sum(answer == 0 for answer in answers) for answers in rounds]
        counted = [store.used("r", f"hot-{r}", now=0.0) for r in range(10)]
        assert admitted == counted == [5] * 10, f"16 takes at once of a limit of 5: {admitted} passed, {counted} counted"

    def test_give_backs_under_threads(self, store: Any, peer: Any) -> None:
        """16 calls give back at once (half through ``peer``), each its own unit: all 16 come back; with tickets,
        16 sends of one give-back at once return one unit."""
        tickets = self.has_tickets and all(Accepts("ticket", m)(store) for m in _TICKET_METHODS if hasattr(store, m))

        def give_back(n: int, ticket: str) -> None:
            handle = (store, peer)[n % 2]
            if tickets:
                handle.give_back("r", "t", ticket=ticket)
            else:
                handle.give_back("r", "t")

        assert [self.take(store) for _ in range(17)] == [0] * 17
        _race(16, lambda n: give_back(n, f"g{n}"))
        assert store.used("r", "t", now=0.0) == 1, "16 give-backs at once did not all come back: not atomic"
        if tickets:
            assert [self.take(store) for _ in range(2)] == [0, 0]
            _race(16, lambda n: give_back(n, "same"))
            assert store.used("r", "t", now=0.0) == 2, "one give-back sent 16 times at once returned more than one unit"

    def test_a_give_back_sent_twice_returns_the_unit_once(self, store: Any) -> None:
        self.needs_tickets(store)
        assert [self.take(store, limit=3) for _ in range(3)] == [0, 0, 0]
        store.give_back("r", "t", ticket="t2")  # the third call never ran
        store.give_back("r", "t", ticket="t2")  # the same give-back, sent again after its reply was lost
        assert store.used("r", "t", now=0.0) == 2 and store.used("r", "*", now=0.0) == 2
        assert [self.take(store, limit=3) for _ in range(2)] == [0, 1]  # one more call, not two
        store.give_back("r", "t", ticket="t2")  # sent again once more, after a take of the run: still nothing
        assert store.used("r", "t", now=0.0) == 3
        store.give_back("r", "t", ticket="t0")  # another take's give-back applies
        assert store.used("r", "t", now=0.0) == 2

    def test_a_give_back_after_many_takes_returns_its_unit(self, store: Any) -> None:
        """Takes in flight are never forgotten: 100 calls held (by approval, a cache) all give back."""
        self.needs_tickets(store)
        assert self.take(store) == 0  # the first call's take
        assert [self.take(store) for _ in range(100)] == [0] * 100
        store.give_back("r", "t", ticket="first")  # 100 other takes of the run came since: still returned
        assert store.used("r", "t", now=0.0) == 100
        for i in range(100):
            store.give_back("r", "t", ticket=f"t{i}")
        assert store.used("r", "t", now=0.0) == 0 and store.used("r", "*", now=0.0) == 0

    def test_a_run_keeps_the_tickets_of_its_latest_give_backs(self, store: Any) -> None:
        self.needs_tickets(store)
        kept = self.kept_tickets
        if kept is None:
            self.switched_off("kept_tickets", "which of a run's older give-backs the store forgets is not checked")
        takes = kept + 2
        assert [self.take(store) for _ in range(takes)] == [0] * takes
        for i in range(kept + 1):  # t0 is then older than the `kept` give-backs remembered
            store.give_back("r", "t", ticket=f"t{i}")
        assert store.used("r", "t", now=0.0) == 1
        store.give_back("r", "t", ticket="t1")  # the oldest remembered, sent again: nothing
        assert store.used("r", "t", now=0.0) == 1
        store.give_back("r", "t", ticket="t0")  # forgotten: sent again this late, it applies again
        assert store.used("r", "t", now=0.0) == 0

    def test_a_give_back_that_emptied_its_run_sent_again_returns_nothing(self, store: Any) -> None:
        """A run whose calls were all given back still holds their tickets: the give-back sent again after a
        new take of the run (its reply was lost meanwhile) does not return that take's unit."""
        self.needs_tickets(store)
        assert self.take(store, limit=1) == 0
        store.give_back("r", "t", ticket="g1")  # the run has nothing counted now
        assert self.take(store, limit=1) == 0  # a new call of the run
        store.give_back("r", "t", ticket="g1")  # the first give-back, sent again
        assert store.used("r", "t", now=0.0) == 1 and store.used("r", "*", now=0.0) == 1
        assert self.take(store, limit=1) == 1

    def test_async_twins_count_and_give_back(self, store: Any) -> None:
        """``atake`` and ``agive_back`` do what ``take`` and ``give_back`` do, on the same counters."""
        self.needs_twins(store)

        async def scenario() -> list[int]:
            answers = [await store.atake("r", "t", limit=2, total=3, now=0.0, ttl=60.0) for _ in range(3)]
            answers.append(await store.atake("r", "u", limit=None, total=3, now=0.0, ttl=60.0))
            answers.append(await store.atake("r", "v", limit=None, total=3, now=0.0, ttl=60.0))
            await store.agive_back("r", "t")
            answers.append(self.take(store, limit=2, total=3))  # the blocking take sees the unit given back
            await store.agive_back("never", "t")
            return answers

        assert asyncio.run(scenario()) == [0, 0, 1, 0, 2, 0]
        assert (store.used("r", "t", now=0.0), store.used("r", "*", now=0.0), store.used("never", "*", now=0.0)) == (2, 3, 0)

    def test_async_give_back_sent_twice_returns_the_unit_once(self, store: Any) -> None:
        """``agive_back`` with a ticket: sent again, also after a take of its run or once the run had nothing
        counted, it returns nothing more; another give-back applies."""
        self.needs_twins(store)
        self.needs_tickets(store)

        async def take(run: str = "r") -> int:
            return int(await store.atake(run, "t", limit=3, total=None, now=0.0, ttl=60.0))

        async def scenario() -> None:
            assert [await take() for _ in range(3)] == [0, 0, 0]
            await store.agive_back("r", "t", ticket="t2")
            await store.agive_back("r", "t", ticket="t2")  # sent again after its reply was lost
            assert store.used("r", "t", now=0.0) == 2
            assert [await take(), await take()] == [0, 1]  # one more call, not two
            await store.agive_back("r", "t", ticket="t2")  # sent again once more, after a take of the run
            assert store.used("r", "t", now=0.0) == 3
            await store.agive_back("r", "t", ticket="t0")  # another give-back applies
            assert store.used("r", "t", now=0.0) == 2
            assert await take("e") == 0
            await store.agive_back("e", "t", ticket="e1")  # run "e" has nothing counted now
            assert await take("e") == 0
            await store.agive_back("e", "t", ticket="e1")
            assert store.used("e", "t", now=0.0) == 1

        asyncio.run(scenario())

    def test_a_take_sent_twice_counts_once(self, store: Any) -> None:
        """A take with a ticket, sent again (its reply was lost), counts nothing more and answers 0, also once the
        limit is reached; a take of another ticket counts, or is refused."""
        self.needs_untake(store)
        assert [self.take_ticket(store, "a", limit=2), self.take_ticket(store, "a", limit=2)] == [0, 0]
        assert self.used_both(store) == (1, 1)
        assert self.take_ticket(store, "b", limit=2) == 0 and self.used_both(store) == (2, 2)
        assert self.take_ticket(store, "b", limit=2) == 0  # counted already: not refused, nothing more counted
        assert self.take_ticket(store, "c", limit=2) == 1 and self.used_both(store) == (2, 2)

    def test_untake_gives_back_a_counted_take_once(self, store: Any) -> None:
        """``untake`` of a counted take returns its unit; sent again, nothing more; the take sent again after it
        counts nothing; a take without a ticket and another call's take keep their units."""
        self.needs_untake(store)
        assert [self.take_ticket(store, "a"), self.take_ticket(store, "b"), self.take(store)] == [0, 0, 0]
        store.untake("r", "t", ticket="a")
        assert self.used_both(store) == (2, 2)
        store.untake("r", "t", ticket="a")  # sent again after its reply was lost
        assert self.used_both(store) == (2, 2)
        assert self.take_ticket(store, "a") == 0 and self.used_both(store) == (2, 2)  # the take, sent again: nothing
        store.untake("r", "t", ticket="b")
        assert self.used_both(store) == (1, 1)

    def test_an_untake_of_a_take_not_counted_returns_nothing(self, store: Any) -> None:
        """``untake`` of a take the store never counted (cut short before it was sent, or refused) returns no unit
        another call holds, and the take, should it come after all, counts nothing."""
        self.needs_untake(store)
        assert self.take_ticket(store, "a") == 0
        store.untake("r", "t", ticket="late")  # its take never came
        assert self.used_both(store) == (1, 1)
        assert self.take_ticket(store, "late") == 0 and self.used_both(store) == (1, 1)  # it comes late: nothing
        assert self.take_ticket(store, "refused", limit=1) == 1
        store.untake("r", "t", ticket="refused")  # refused: nothing counted, nothing to give back
        assert self.used_both(store) == (1, 1)
        store.untake("empty", "t", ticket="lost")  # a run with nothing counted
        assert self.take_ticket(store, "lost", run="empty") == 0 and self.used_both(store, "empty") == (0, 0)
        assert self.take_ticket(store, "next", run="empty") == 0 and self.used_both(store, "empty") == (1, 1)

    def test_take_tickets_under_threads(self, store: Any, peer: Any) -> None:
        """16 sends of one take at once (half through ``peer``) count one unit; 16 sends of its untake at once
        return it once, never another call's unit."""
        self.needs_untake(store)
        _race(16, lambda n: self.take_ticket((store, peer)[n % 2], "same"))
        assert self.used_both(store) == (1, 1), "one take sent 16 times at once counted more than one unit"
        assert self.take(store) == 0
        _race(16, lambda n: (store, peer)[n % 2].untake("r", "t", ticket="same"))
        assert self.used_both(store) == (1, 1), "one untake sent 16 times at once returned more than one unit"

    def test_async_untake(self, store: Any) -> None:
        """``atake`` with a ticket and ``auntake`` do what ``take`` and ``untake`` do, on the same counters."""
        self.needs_untake(store)

        async def take(ticket: str, limit: int | None = None) -> int:
            return int(await store.atake("r", "t", limit=limit, total=None, now=0.0, ttl=60.0, ticket=ticket))

        async def scenario() -> None:
            assert [await take("a"), await take("a"), await take("b")] == [0, 0, 0]
            assert self.used_both(store) == (2, 2)
            await store.auntake("r", "t", ticket="a")
            await store.auntake("r", "t", ticket="a")
            assert self.used_both(store) == (1, 1)
            assert self.take_ticket(store, "a") == 0 and self.used_both(store) == (1, 1)  # blocking, same counters
            store.untake("r", "t", ticket="late")
            assert await take("late") == 0 and self.used_both(store) == (1, 1)
            await store.auntake("r", "t", ticket="gone")
            assert self.take_ticket(store, "gone") == 0 and self.used_both(store) == (1, 1)

        asyncio.run(scenario())
