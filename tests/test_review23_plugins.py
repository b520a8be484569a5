"""Review 23: keys compared as text, circuits of removed tools, the circuit window's cost,
``output_limit``'s plugin default, and plugin options that are not mappings."""

from __future__ import annotations

import enum
import math
import random
import threading
import uuid
from typing import Any

import pytest

from harness_one import Call, CircuitBreakerPolicy, ManualClock, PluginError, ToolDefinitionError, ToolRegistry
from harness_one.state import Breaker, MemoryCircuits, key_text
from harness_one_plugins import CachePlugin, CircuitBreakerPlugin, TimeoutPlugin
from harness_one_plugins.output import OutputLimitPlugin


class Tier(enum.IntEnum):
    GOLD = 7


class Who(str, enum.Enum):
    ALICE = "alice"


USER = uuid.UUID(int=7)
HUGE = 10**5000  # past Python's 4,300-digit int-to-text limit


# ---------------------------------------------------------------- 1. keys compared as text


@pytest.mark.parametrize(
    ("value", "text"),
    [(USER, str(USER)), (Tier.GOLD, "7"), (Who.ALICE, "alice"), (7, "7"), (-7, "-7")],
)
def test_a_key_is_the_text_its_value_says(value: Any, text: str) -> None:
    for strict in (False, True):
        found = key_text(value, strict=strict)
        assert found == text and type(found) is str


def test_a_bool_and_other_values_keep_their_repr_when_not_strict() -> None:
    assert key_text(True) == "True" and key_text(("t", "u")) == "('t', 'u')" and key_text(1.5) == "1.5"
    with pytest.raises(TypeError, match="a bool is not a string, an integer or a UUID"):
        key_text(True, strict=True)


def test_an_integer_past_the_conversion_limit_is_a_digest() -> None:
    found = key_text(HUGE, strict=True)
    assert found.startswith("#") and len(found) == 65 and found == key_text(HUGE)
    assert found != key_text(HUGE + 1, strict=True)


def _charges() -> tuple[ToolRegistry, dict[str, int]]:
    reg = ToolRegistry(autoload=False, plugin_options={"idempotency": {"scope": "user_id"}, "budget": {"total": 1}})
    count = {"n": 0}

    def charge(amount: int) -> str:
        count["n"] += 1
        return f"charged {amount}"

    reg.add(charge, name="charge")
    return reg, count


@pytest.mark.parametrize(("first", "second"), [(USER, str(USER)), (7, Tier.GOLD), ("alice", Who.ALICE)])
def test_one_user_in_two_spellings_replays_one_idempotency_key(first: Any, second: Any) -> None:
    reg, count = _charges()
    one = reg.try_call("charge", {"amount": 5}, idempotency_key="order-7", context={"user_id": first})
    two = reg.try_call("charge", {"amount": 5}, idempotency_key="order-7", context={"user_id": second})
    assert (one.ran, two.ran, count["n"]) == (True, False, 1)
    assert two.value == "charged 5"


@pytest.mark.parametrize(("first", "second"), [(7, Tier.GOLD), (USER, str(USER)), ("alice", Who.ALICE)])
def test_one_run_in_two_spellings_has_one_budget(first: Any, second: Any) -> None:
    reg, _ = _charges()
    assert reg.try_call("charge", {"amount": 1}, context={"run_id": first}).ok
    refused = reg.try_call("charge", {"amount": 1}, context={"run_id": second})
    assert refused.error is not None and refused.error.kind == "budget_exhausted"


@pytest.mark.parametrize("second", [str(USER), USER])
def test_one_user_in_two_spellings_has_one_rate_limit_bucket(second: Any) -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock(0))
    reg.add(lambda: "ok", name="t", rate_limit={"rate": 0.001, "burst": 1, "key": "user_id"})
    assert reg.try_call("t", context={"user_id": USER if second != USER else str(USER)}).ok
    refused = reg.try_call("t", context={"user_id": second})
    assert refused.error is not None and refused.error.kind == "rate_limited"
    assert reg.try_call("t", context={"user_id": Tier.GOLD}).ok  # 7: another user
    refused = reg.try_call("t", context={"user_id": "7"})
    assert refused.error is not None and refused.error.kind == "rate_limited"


@pytest.mark.parametrize("field", ["run_id", "user_id"])
def test_a_huge_integer_id_is_a_key_not_a_plugin_error(field: str) -> None:
    reg, count = _charges()
    context = {"user_id": 1, field: HUGE}
    first = reg.try_call("charge", {"amount": 1}, idempotency_key="z", context=context)
    again = reg.try_call("charge", {"amount": 1}, idempotency_key="z", context=context)
    assert first.ok and first.ran and again.ok and not again.ran and count["n"] == 1


# ---------------------------------------------------------------- 2. circuits of removed tools

POLICY = CircuitBreakerPolicy(min_calls=5, window=60.0, open_for=30.0, probes=1)


def test_a_removed_tools_circuit_leaves_the_plugin_and_its_stats() -> None:
    clock = ManualClock(0)
    reg = ToolRegistry(autoload=False, clock=clock)
    plugin = reg.plugins.get("circuit_breaker")
    for i in range(50):
        reg.add(lambda: 1, name=f"session_tool_{i}", circuit_breaker={"min_calls": 5})
        reg.call(f"session_tool_{i}")
        reg.remove(f"session_tool_{i}")
    reg.add(lambda: 1, name="kept", circuit_breaker=True)
    reg.call("kept")
    assert list(plugin._policies) == ["kept"]
    assert [name for name, tool in reg.stats()["tools"].items() if "circuit" in tool] == ["kept"]


def test_the_end_of_a_call_of_a_tool_removed_meanwhile_does_not_note_it_again() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock(0))
    plugin = reg.plugins.get("circuit_breaker")

    def removes_itself() -> int:
        reg.remove("gone")
        return 1

    reg.add(removes_itself, name="gone", circuit_breaker=True)
    assert reg.call("gone") == 1
    assert plugin._policies == {}
    assert plugin.store.snapshot("gone", POLICY, now=0.0)["calls"] == 1  # its end still counted in its circuit


def test_idle_circuits_of_tools_made_and_removed_per_session_are_swept() -> None:
    clock = ManualClock(0)
    store = MemoryCircuits(sweep_every=16)
    reg = ToolRegistry(autoload=False, clock=clock, plugins={"circuit_breaker": CircuitBreakerPlugin(store=store)})
    for i in range(500):
        name = f"session_tool_{i}"
        reg.add(lambda: 1, name=name, circuit_breaker={"min_calls": 5, "window": 60})
        reg.call(name)
        reg.remove(name)
        clock.advance(1.0)
    assert len(store) <= 16 + 61  # those still in their window, and the ones made since the last sweep


def test_the_default_store_sweeps_every_4096_new_circuits() -> None:
    store = ToolRegistry(autoload=False).plugins.get("circuit_breaker").store
    assert type(store) is MemoryCircuits
    for i in range(10_000):
        store.admit(f"session_tool_{i}", POLICY, now=float(i))
        store.record(f"session_tool_{i}", POLICY, now=float(i), failed=False, probe=0)
    assert len(store) <= 4096 + 61


def test_a_circuit_still_counting_or_open_is_not_swept() -> None:
    store = MemoryCircuits(sweep_every=1)
    store.record("counting", POLICY, now=100.0, failed=True, probe=0)
    for _ in range(5):
        store.record("open", POLICY, now=100.0, failed=True, probe=0)
    assert store.snapshot("open", POLICY, now=100.0)["state"] == "open"
    store.admit("new", POLICY, now=159.0)  # a new circuit: a sweep at 159 s
    assert {"counting", "open"} <= set(store._breakers)
    store.breaker("other", POLICY)
    store.admit("other", POLICY, now=161.0)  # the failure left the 60 s window: closed and empty is idle
    assert "counting" not in store._breakers and "open" in store._breakers
    store.breaker("third", POLICY)
    store.admit("third", POLICY, now=220.0)  # open, untouched for twice max(window, open_for): expires as in Redis
    assert "open" not in store._breakers
    assert store.snapshot("open", POLICY, now=220.0) == {"state": "closed", "calls": 0, "failures": 0, "opened": 0}


def test_a_record_that_found_a_breaker_just_swept_counts_in_its_successor() -> None:
    store = MemoryCircuits(sweep_every=1)
    old = store.breaker("t", POLICY)
    store.breaker("u", POLICY)
    store.admit("u", POLICY, now=0.0)  # sweeps "t": closed and empty
    assert old.swept and "t" not in store._breakers
    assert old.record(0.0, True, 0) is False  # counts nothing once swept
    store.record("t", POLICY, now=0.0, failed=True, probe=0)
    assert store.snapshot("t", POLICY, now=0.0)["failures"] == 1 and old.calls == 0


def test_a_late_probe_of_a_swept_breaker_decides_nothing_in_its_successor() -> None:
    store = MemoryCircuits(sweep_every=1)
    for _ in range(5):
        store.record("t", POLICY, now=0.0, failed=True, probe=0)
    assert store.admit("t", POLICY, now=31.0) == (0.0, 1)  # half-open: probe of period 1, then it hangs
    store.breaker("u", POLICY)
    store.admit("u", POLICY, now=200.0)  # "t" untouched since 31 s for 2 * 60 s: swept
    assert "t" not in store._breakers
    for _ in range(5):
        store.record("t", POLICY, now=200.0, failed=True, probe=0)  # a new breaker opens
    wait, probe = store.admit("t", POLICY, now=231.0)
    assert wait == 0.0 and probe > 1
    store.record("t", POLICY, now=231.0, failed=False, probe=1)  # the old probe's late end
    assert store.admit("t", POLICY, now=231.0) == (1.0, 0)  # the new probe's place is still taken
    store.record("t", POLICY, now=231.0, failed=False, probe=probe)
    assert store.snapshot("t", POLICY, now=231.0)["state"] == "closed"


def test_beyond_max_keys_the_closed_circuits_idle_longest_go_and_open_ones_stay() -> None:
    store = MemoryCircuits(max_keys=20, sweep_every=10_000)
    for _ in range(5):
        store.record("open", POLICY, now=0.0, failed=True, probe=0)
    for i in range(25):
        store.record(f"c{i}", POLICY, now=float(i), failed=False, probe=0)
        store.admit(f"c{i}", POLICY, now=float(i))
    assert "open" in store._breakers and len(store) < 20
    assert "c0" not in store._breakers and "c24" in store._breakers
    assert store.snapshot("open", POLICY, now=25.0)["state"] == "open"


def test_memory_circuits_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="circuit sweep_every must be a positive integer, got 0"):
        MemoryCircuits(sweep_every=0)
    with pytest.raises(ValueError, match="circuit max_keys must be a positive integer, got True"):
        MemoryCircuits(max_keys=True)


# ---------------------------------------------------------------- 3. the window's cost


class _SummedWindow:
    """The window as it was: a dict of per-second counts, trimmed and summed on every call."""

    def __init__(self) -> None:
        self.buckets: dict[int, list[int]] = {}

    def record(self, now: float, failed: bool, window: float) -> tuple[int, int]:
        bucket = self.buckets.setdefault(math.floor(now), [0, 0])
        bucket[0] += 1
        bucket[1] += failed
        return self.totals(now, window)

    def totals(self, now: float, window: float) -> tuple[int, int]:
        oldest = math.floor(now - window)
        for second in [s for s in self.buckets if s <= oldest or s > now]:
            del self.buckets[second]
        return sum(b[0] for b in self.buckets.values()), sum(b[1] for b in self.buckets.values())


def test_running_totals_count_as_the_summed_window_did() -> None:
    rng = random.Random(23)
    never = CircuitBreakerPolicy(min_calls=10**9, window=30.0)
    policies = [CircuitBreakerPolicy(min_calls=10**9, window=w) for w in (0.5, 3.0, 30.0)]
    breaker, reference, now = Breaker(never), _SummedWindow(), 1000.0
    for _ in range(20_000):
        now += rng.choice([0.0, 0.1, 0.6, 1.0, 2.5, 40.0, -0.4, -3.0])  # steps back too
        policy = rng.choice(policies)
        if rng.random() < 0.2:
            found = breaker.snapshot(now, policy)
            assert (found["calls"], found["failures"]) == reference.totals(now, policy.window)
            continue
        failed = rng.random() < 0.3
        breaker.record(now, failed, 0, policy)
        assert (breaker.calls, breaker.failures) == reference.record(now, failed, policy.window)
        assert [b[0] for b in breaker.buckets] == sorted(reference.buckets)


def test_a_long_window_keeps_one_entry_per_second_in_order() -> None:
    day = CircuitBreakerPolicy(min_calls=10**9, window=86_400.0)
    breaker = Breaker(day)
    for second in range(5_000):
        breaker.record(float(second), second % 7 == 0, 0, day)
        breaker.record(second + 0.5, False, 0, day)
    assert len(breaker.buckets) == 5_000 and breaker.buckets[0][0] == 0 and breaker.buckets[-1][0] == 4_999
    assert breaker.totals(4_999.5, day) == (10_000, 715)
    assert breaker.totals(86_400.0 + 2_500, day) == (4_998, 357)  # seconds 0..2500 left the window


# ---------------------------------------------------------------- 4. output_limit's default


def test_a_plugin_max_output_of_false_means_no_limit_as_for_a_tool() -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"output_limit": {"max_output": False}})
    reg.add(lambda: "x" * 500, name="t")
    reg.add(lambda: "y" * 500, name="capped", options={"max_output": 100})
    assert reg.call("t") == "x" * 500 and len(reg.call("capped")) == 100
    assert reg.plugins.get("output_limit").default is None


def test_a_plugin_max_output_of_zero_is_refused_as_for_a_tool() -> None:
    with pytest.raises(ToolDefinitionError, match=r"^Tool '\*': max_output must be a positive integer, got 0\.$"):
        OutputLimitPlugin(max_output=0)
    with pytest.raises(PluginError, match=r"max_output must be a positive integer, got 0\.") as caught:
        ToolRegistry(autoload=False, plugin_options={"output_limit": {"max_output": 0}})
    assert caught.value.plugin == "output_limit"


@pytest.mark.parametrize("default", [None, False])
def test_without_a_default_a_tools_mapping_needs_its_own_limit(default: Any) -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"output_limit": {"max_output": default, "mode": "refuse"}})
    with pytest.raises(ToolDefinitionError, match=r"^Tool 't': max_output needs a 'limit'\.$"):
        reg.add(lambda: "x" * 500, name="t", options={"max_output": {"unit": "bytes"}})
    reg.add(lambda: "x" * 500, name="u", options={"max_output": {"limit": 200}})
    refused = reg.try_call("u").error
    assert refused is not None and refused.kind == "output_too_large"  # the plugin's mode still applies


# ---------------------------------------------------------------- 5. plugin options not a mapping


@pytest.mark.parametrize(("value", "got"), [(5, "a value of type int"), (None, "None"), ("ttl=5", "a value of type str")])
def test_a_plugins_options_that_are_not_a_mapping_are_a_plugin_error(value: Any, got: str) -> None:
    with pytest.raises(PluginError) as caught:
        ToolRegistry(autoload=False, plugin_options={"cache": value})
    assert str(caught.value) == f"plugin_options['cache'] must be a mapping of options for plugin 'cache', not {got}."
    assert caught.value.plugin == "cache"


def test_plugin_options_that_are_not_a_mapping_are_a_plugin_error() -> None:
    with pytest.raises(
        PluginError, match=r"^plugin_options must be a mapping of plugin names to their options, not a value of type list\.$"
    ):
        ToolRegistry(autoload=False, plugin_options=[("cache", {"ttl": 5})])  # type: ignore[arg-type]


# ---------------------------------------------------------------- infinite seconds: no limit


def test_a_tools_infinite_timeout_is_no_limit_whatever_the_plugins_default() -> None:
    """``timeout=math.inf`` (or ``total_timeout``) is no limit: the sync tool runs in the caller's
    thread with no deadline, as a tool without a timeout, though the plugin's default is 5 s."""
    reg = ToolRegistry(plugins={"timeout": TimeoutPlugin(default=5, total=60)}, autoload=False)

    def where(call: Call) -> tuple[Any, ...]:
        return (call.deadline, call.total_deadline, threading.current_thread() is threading.main_thread())

    reg.add(where, name="unbounded", timeout=math.inf, total_timeout=math.inf)
    reg.add(where, name="bounded")
    assert reg.call("unbounded") == (None, None, True)
    deadline, total, here = reg.call("bounded")
    assert (deadline is not None, total is not None, here) == (True, True, False)


def test_an_infinite_cache_ttl_keeps_an_answer_until_it_is_evicted() -> None:
    clock = ManualClock()
    reg = ToolRegistry(plugins={"cache": CachePlugin()}, autoload=False, clock=clock)
    runs: list[int] = []

    def look(n: int) -> int:
        runs.append(n)
        return n

    reg.add(look, read_only=True, cache_ttl=math.inf)
    assert reg.call("look", {"n": 1}) == 1
    clock.advance(1e12)
    assert (reg.call("look", {"n": 1}), runs) == (1, [1])


def test_a_store_full_of_open_circuits_sweeps_every_sweep_every_new_circuits_not_on_each() -> None:
    """Open circuits are never dropped: a sweep that frees not a tenth of ``max_keys`` does not make
    the next new circuit sweep again (a scan of the store per call, and the last new circuit's
    breaker dropped before it counted). New circuits count past ``max_keys`` until ``sweep_every``
    more were made; that sweep drops the closed ones, and the open ones stay."""
    store = MemoryCircuits(max_keys=10, sweep_every=50)
    sweeps: list[int] = []
    sweep = store._sweep

    def counted(now: float) -> None:
        sweeps.append(len(store))
        sweep(now)

    store._sweep = counted  # type: ignore[method-assign]
    for i in range(10):
        for _ in range(5):
            store.record(f"open{i}", POLICY, now=0.0, failed=True, probe=0)
    store.admit("new0", POLICY, now=1.0)  # full: this sweep frees nothing
    assert sweeps == [10]
    for i in range(1, 40):
        store.admit(f"new{i}", POLICY, now=1.0)
        store.record(f"new{i}", POLICY, now=1.0, failed=False, probe=0)
    assert sweeps == [10] and len(store) == 50
    assert store.snapshot("new1", POLICY, now=1.0) == {"state": "closed", "calls": 1, "failures": 0, "opened": 0}
    for i in range(40, 70):
        store.admit(f"new{i}", POLICY, now=2.0)
        store.record(f"new{i}", POLICY, now=2.0, failed=False, probe=0)
    assert len(sweeps) == 2  # after 50 more new circuits
    assert {f"open{i}" for i in range(10)} <= set(store._breakers)
    assert all(store.snapshot(f"open{i}", POLICY, now=2.0)["state"] == "open" for i in range(10))
