"""The rate-limit plugin and its in-memory backend, through the reusable contracts."""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness_one import Call, CircuitOpen, ManualClock, RateLimitExceeded, ToolRegistry, hookimpl
from harness_one.testing import RateLimitBackendContract, RateLimitPluginContract
from harness_one_plugins import InMemoryBuckets, RateLimitPlugin


class TestInMemoryBuckets(RateLimitBackendContract):
    @pytest.fixture
    def backend(self) -> InMemoryBuckets:
        return InMemoryBuckets()


class TestStandardRateLimit(RateLimitPluginContract):
    @pytest.fixture
    def make_plugin(self) -> Any:
        return RateLimitPlugin


class CountingLimiter:
    """A minimal third-party replacement: a fixed budget of calls per tool, no refill."""

    def __init__(self, default: Any = None, max_wait: float = 0.0) -> None:
        self.used: dict[str, int] = {}

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        limit = call.tool.rate_limit
        if limit is None:
            return
        used = self.used.get(call.tool.name, 0)
        if used >= limit.burst:
            raise RateLimitExceeded(retry_after=limit.cost / limit.rate, tool=call.tool.name)
        self.used[call.tool.name] = used + 1


def test_replacement_passes_the_seed_contract(clock: ManualClock) -> None:
    contract = RateLimitPluginContract()
    contract.test_seed_example(CountingLimiter, clock)
    with pytest.raises(RateLimitExceeded):  # and the contract tells it apart: it never refills
        contract.test_tokens_come_back_at_rate(CountingLimiter, clock)


def test_idle_buckets_are_evicted() -> None:
    buckets = InMemoryBuckets(max_keys=1000, sweep_every=100)
    for i in range(5000):
        buckets.acquire(("t", i), rate=10, burst=1, cost=1, now=float(i))  # each idle after 0.1 s
    assert len(buckets) < 200
    flood = InMemoryBuckets(max_keys=50, sweep_every=10_000)
    for i in range(500):
        flood.acquire(i, rate=0.001, burst=5, cost=1, now=0.0)  # never idle: the cap still holds
    assert len(flood) <= 50


def test_key_function(registry: ToolRegistry) -> None:
    registry.add(lambda: 1, name="f", rate_limit={"rate": 1, "burst": 1, "key": lambda call: call.context["org"]})
    registry.call("f", context={"org": "a", "user": 1})
    registry.call("f", context={"org": "b", "user": 1})
    with pytest.raises(RateLimitExceeded):
        registry.call("f", context={"org": "a", "user": 2})


def test_cost(registry: ToolRegistry) -> None:
    registry.add(lambda: 1, name="heavy", rate_limit={"rate": 1, "burst": 10, "cost": 4})
    registry.call("heavy")
    registry.call("heavy")
    with pytest.raises(RateLimitExceeded) as err:
        registry.call("heavy")
    assert err.value.retry_after == pytest.approx(2.0)


def test_refused_call_does_not_run_tool(registry: ToolRegistry) -> None:
    ran: list[int] = []
    registry.add(lambda: ran.append(1), name="f", rate_limit={"rate": 1, "burst": 1})
    registry.call("f")
    assert not registry.try_call("f").ok
    assert ran == [1]
    assert registry.stats()["tools"]["f"]["rate_limited"] == 1


def test_invalid_arguments_take_no_token(registry: ToolRegistry) -> None:
    registry.add(
        lambda n: n,
        name="f",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        rate_limit={"rate": 1, "burst": 1},
    )
    for _ in range(3):
        assert not registry.try_call("f", {"n": "x"}).ok
    assert registry.call("f", {"n": 1}) == 1


def test_error_payload_carries_retry_after(registry: ToolRegistry) -> None:
    registry.add(lambda: 1, name="f", rate_limit={"rate": 10, "burst": 1})
    registry.call("f")
    result = registry.try_call("f")
    assert result.to_dict()["error"]["retry_after"] == pytest.approx(0.1)
    assert result.for_model() == "Error: Tool 'f' is rate limited. Retry after 0.1 s or use another tool."


def _limited(buckets: InMemoryBuckets, rate: float, burst: float) -> tuple[ToolRegistry, ManualClock]:
    clock = ManualClock()
    reg = ToolRegistry(plugins={"rate_limit": RateLimitPlugin(backend=buckets)}, autoload=False, clock=clock)
    reg.add(lambda: 1, name="t", rate_limit={"rate": rate, "burst": burst})
    return reg, clock


def _wait(reg: ToolRegistry) -> float:
    """0.0 for an admitted call of ``t``, else the refusal's ``retry_after``."""
    result = reg.try_call("t")
    if result.ok:
        return 0.0
    assert isinstance(result.error, RateLimitExceeded) and result.error.retry_after is not None
    return result.error.retry_after


def test_a_tools_calls_decide_as_acquire_does() -> None:
    """The plugin's prepared decision and ``acquire`` share one bucket and answer alike, refill and all."""
    buckets = InMemoryBuckets()
    reg, clock = _limited(buckets, 2.0, 3.0)
    assert [_wait(reg) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert _wait(reg) == pytest.approx(0.5)
    assert buckets.acquire("t", rate=2.0, burst=3.0, cost=1.0, now=0.0) == pytest.approx(0.5)  # the same bucket
    clock.advance(0.5)
    assert _wait(reg) == 0.0 and _wait(reg) == pytest.approx(0.5)
    clock.advance(-0.25)
    assert _wait(reg) == pytest.approx(0.5)  # a clock that steps back refills nothing
    assert len(buckets) == 1


def test_a_tools_limit_survives_its_bucket_being_evicted() -> None:
    buckets = InMemoryBuckets(max_keys=1000, sweep_every=1)
    reg, clock = _limited(buckets, 10.0, 1.0)
    assert _wait(reg) == 0.0 and _wait(reg) == pytest.approx(0.1)
    buckets.acquire("other", rate=10.0, burst=1.0, cost=1.0, now=5.0)  # a sweep: "t" has been full for long
    assert len(buckets) == 1
    clock.advance(5.0)
    assert _wait(reg) == 0.0 and _wait(reg) == pytest.approx(0.1)  # a new, full bucket, then refused


def test_threads_share_one_prepared_bucket_exactly() -> None:
    """No token is taken twice: 8 threads race for 1,000 tokens that never refill."""
    import threading

    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="t", rate_limit={"rate": 1e-9, "burst": 1000})
    admitted = [0] * 8

    def work(i: int) -> None:
        for _ in range(400):
            admitted[i] += reg.try_call("t").ok

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(admitted) == 1000
    stats = reg.stats()["tools"]["t"]
    assert stats["successes"] == 1000 and stats["rate_limited"] == 2200
    assert stats["errors"] == {"RateLimitExceeded": 2200}


def test_a_refusal_built_by_of_is_the_constructors_error() -> None:
    import pickle

    fast = RateLimitExceeded.of(1.5, "t", "id-1")
    slow = RateLimitExceeded(retry_after=1.5, tool="t", call_id="id-1")
    assert type(fast) is RateLimitExceeded and fast.to_dict() == slow.to_dict()
    assert str(fast) == str(slow) == "Tool 't' is rate limited. Retry after 1.5 s or use another tool."
    back = pickle.loads(pickle.dumps(fast))
    assert (back.retry_after, back.tool, back.call_id, str(back)) == (1.5, "t", "id-1", str(slow))


def test_a_refused_call_gets_no_instance_dict() -> None:
    """A refusal writes only slots of its Call (a ``__dict__`` made per refusal costs a dict)."""
    seen: list[Call] = []

    class Keep:
        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> None:
            seen.append(call)

    reg = ToolRegistry(autoload=False, plugins={"keep": Keep()})
    reg.add(lambda: 1, name="t", rate_limit={"rate": 1e-9, "burst": 1})
    reg.call("t")
    result = reg.try_call("t")
    assert isinstance(result.error, RateLimitExceeded) and result.error.call_id == result.call_id
    assert seen and vars(seen[0]) == {}


def test_errors_keep_their_slot_fields_through_pickle_and_from_dict() -> None:
    import pickle

    from harness_one import ToolError, ToolTimeout

    timeout = pickle.loads(pickle.dumps(ToolTimeout(2.0, tool="t", call_id="c")))
    assert (timeout.tool, timeout.call_id, timeout.timeout, str(timeout)) == (
        "t",
        "c",
        2.0,
        (
            "Tool 't' timed out after 2 s. Try a smaller request or another tool; "
            "if the call changes something, check whether it took effect before repeating it."
        ),
    )
    bare = ToolError.from_dict({"type": "RateLimitExceeded", "message": "slow down"})
    assert isinstance(bare, RateLimitExceeded) and (bare.retry_after, bare.tool, bare.call_id, str(bare)) == (
        None,
        None,
        None,
        "slow down",
    )


@pytest.mark.parametrize(
    ("limit", "problem"),
    [
        ({"rate": float("inf")}, "rate must be a finite positive number"),
        ({"rate": 1, "burst": float("inf")}, "burst must be a finite positive number"),
        ({"rate": "10/s"}, "rate must be a finite positive number, got '10/s'"),
        ({"rate": None}, "rate must be a finite positive number, got None"),
        ({"rate": 1, "max_wait": "2"}, "max_wait (seconds) must be a finite non-negative number, got '2'"),
        ({"rate": 1, "max_wait": True}, "max_wait (seconds) must be a finite non-negative number, got True"),
        ({"rate": 1, "key": [1]}, "key must be a context field name or a function of the call, got [1]"),
    ],
)
def test_rate_limits_are_refused_at_definition(limit: dict[str, Any], problem: str) -> None:
    """Not a bare TypeError, nor an inf that made every Redis call fail (PEXPIRE inf)."""
    from harness_one import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match=re.escape(problem)):
        ToolRegistry(autoload=False).add(lambda: 1, name="f", rate_limit=limit)


def test_a_clock_that_steps_back_refills_from_there(clock: ManualClock) -> None:
    """After a step back of 60 s, refills restart at once (they stopped for 60 s, each refusal saying 0.1 s)."""
    reg = ToolRegistry(autoload=False, clock=clock)
    reg.add(lambda: "ok", name="f", rate_limit={"rate": 10, "burst": 1})
    reg.call("f")
    clock.advance(-60)
    refused = reg.try_call("f").error
    assert isinstance(refused, RateLimitExceeded) and refused.retry_after == pytest.approx(0.1)
    clock.advance(0.1)
    assert reg.call("f") == "ok"


def test_a_tools_own_rate_limit_error_is_not_waited_out(clock: ManualClock) -> None:
    """An upstream 429 raised by the tool is its answer: wait mode ran the tool 20 times."""
    reg = ToolRegistry(autoload=False, clock=clock)
    runs: list[int] = []

    def upstream() -> str:
        runs.append(1)
        raise RateLimitExceeded(retry_after=0.1, tool="upstream")

    reg.add(upstream, rate_limit={"rate": 100, "max_wait": 2})
    assert isinstance(reg.try_call("upstream").error, RateLimitExceeded) and runs == [1]


def test_a_flood_of_keys_never_resets_a_tools_own_bucket() -> None:
    """At max_keys the oldest busy bucket went, whoever's: a keyed flood reset a per-hour limit of another tool."""
    buckets = InMemoryBuckets(max_keys=100, sweep_every=10_000)
    assert buckets.acquire("payout", 1 / 3600, 1.0, 1.0, 0.0) == 0.0  # one an hour, taken
    for i in range(1000):
        buckets.acquire(("search", i), 0.001, 5.0, 1.0, 0.0)  # busy keyed buckets, never idle
        assert len(buckets) <= 100
    assert buckets.acquire("payout", 1 / 3600, 1.0, 1.0, 0.0) == pytest.approx(3600.0)  # still refused
    before = len(buckets)
    buckets.acquire(("search", "next"), 0.001, 5.0, 1.0, 0.0)
    assert len(buckets) >= before - 10  # a tenth at most goes at once, so sweeps stay far apart


def test_waiting_retry_after_finds_the_token() -> None:
    """With clock values in the millions, a caller waiting exactly retry_after was refused about half the
    time, with a retry_after near 1e-12 s; it is rounded up to the millisecond."""
    clock = ManualClock(start=1_700_000_000.0)
    reg = ToolRegistry(autoload=False, clock=clock)
    reg.add(lambda: "ok", name="f", rate_limit={"rate": 3, "burst": 1})
    reg.add(lambda: "ok", name="hourly", rate_limit={"rate": 1 / 3600, "burst": 1})
    for _ in range(50):
        reg.call("f")
        refused = reg.try_call("f").error
        assert isinstance(refused, RateLimitExceeded) and refused.retry_after == 0.334
        clock.advance(refused.retry_after)
    assert reg.call("f") == "ok"
    reg.call("hourly")
    assert "Retry after 3,600 s" in reg.try_call("hourly").for_model()  # not 3.6e+03


def test_a_mapping_given_as_a_plugin_is_refused() -> None:
    """plugins={"rate_limit": {...}} replaced the standard plugin with a dict: no limit at all, no error."""
    from harness_one import PluginError

    with pytest.raises(PluginError, match="plugin_options"):
        ToolRegistry(autoload=False, plugins={"rate_limit": {"default": {"rate": 1}}})


def test_keyed_buckets_compare_values_as_text(registry: ToolRegistry) -> None:
    """As in Redis (a key's text): ``1`` and ``"1"`` are one bucket, as for budgets; calls without the
    field share one bucket, not the string ``"None"``'s."""
    registry.add(lambda: 1, name="f", rate_limit={"rate": 1e-9, "burst": 1, "key": "user"})
    for user in (1, None, "None"):
        assert registry.call("f", context={"user": user}) == 1
    for user in ("1", None):
        with pytest.raises(RateLimitExceeded):
            registry.call("f", context={"user": user})
    with pytest.raises(RateLimitExceeded):
        registry.call("f")  # no field: None's bucket


def test_an_attempt_refused_after_its_token_gives_it_back() -> None:
    """Waiting for a concurrency slot took a token at every poll: the bucket drained while the tool ran once."""
    import threading

    from harness_one_plugins import ConcurrencyPlugin

    clock = ManualClock()
    reg = ToolRegistry(plugins={"concurrency": ConcurrencyPlugin(max_wait=1.0, poll=0.01)}, clock=clock, autoload=False)
    entered, release = threading.Event(), threading.Event()

    def work(n: int) -> int:
        if n == 0:
            entered.set()
            release.wait(10)
        return n

    reg.add(work, timeout_mode="none", max_concurrency=1, rate_limit={"rate": 5, "burst": 5})
    holder = threading.Thread(target=reg.call, args=("work", {"n": 0}))
    holder.start()
    assert entered.wait(10)
    try:
        waited = reg.try_call("work", {"n": 1})  # polls the slot for 1 s on one token
    finally:
        release.set()
        holder.join(10)
    # it waited out max_wait for the slot (~100 polls of 0.01 s), never refused by its own rate limit
    assert waited.error is not None and waited.error.kind == "busy" and len(clock.sleeps) >= 90
    assert reg.stats()["rate_limit"]["refused"] == 0


def test_a_flood_of_keys_through_one_tool_resets_no_other_tools_keyed_limit() -> None:
    """At max_keys the oldest keyed buckets went whichever tool's: lookups reset a per-caller hourly SMS limit."""
    buckets = InMemoryBuckets(max_keys=100, sweep_every=10_000)
    assert buckets.acquire(("send_sms", "mallory"), 1 / 3600, 1.0, 1.0, 0.0) == 0.0
    for i in range(1000):
        buckets.acquire(("lookup", i), 0.001, 5.0, 1.0, 0.0)
        assert len(buckets) <= 100
    assert buckets.acquire(("send_sms", "mallory"), 1 / 3600, 1.0, 1.0, 0.0) == pytest.approx(3600.0)  # still refused


def test_a_long_key_is_kept_as_a_digest() -> None:
    """A 200 KB argument as the key was kept whole for each of up to max_keys buckets (400 MB for 2,000 calls)."""
    backend = InMemoryBuckets()
    reg = ToolRegistry(plugins={"rate_limit": RateLimitPlugin(backend=backend)}, clock=ManualClock(), autoload=False)
    reg.add(lambda q: q[:3], name="search", rate_limit={"rate": 1, "burst": 1, "key": lambda call: call.arguments["q"]})
    big = "x" * 200_000
    assert reg.call("search", {"q": big}) == "xxx"
    assert reg.try_call("search", {"q": big}).error.kind == "rate_limited"  # type: ignore[union-attr]  # the same bucket
    assert reg.call("search", {"q": big + "y"}) == "xxx"  # another
    keys = list(backend._buckets)
    assert len(keys) == 2 and all(len(k[1]) == 65 and k[1].startswith("#") for k in keys)


def test_calls_at_exactly_the_rate_are_all_admitted() -> None:
    """Float rounding refused a third of the calls made 1/3 s apart at 3 a second (a wait of 4.8e-12 s)."""
    buckets = InMemoryBuckets()
    refused = [i for i in range(30_000) if buckets.acquire("t", 3.0, 1.0, 1.0, i / 3.0) > 0.0]
    assert refused == []


def test_a_tiny_rate_gives_a_bounded_retry_after() -> None:
    """A rate RateLimit.parse accepts (1e-306 a second) made ceil(inf): an internal error on the refusal."""
    reg = ToolRegistry(clock=ManualClock(), autoload=False)
    reg.add(lambda: 1, name="t", rate_limit={"rate": 1e-306, "burst": 1})
    reg.call("t")
    refused = reg.try_call("t")
    assert isinstance(refused.error, RateLimitExceeded) and refused.error.retry_after == 1e12


def test_the_give_back_hook_is_prepared_only_where_a_later_policy_applies() -> None:
    """An on_error hook is a round of the pipeline on every refusal: a rate-limited tool no later policy
    applies to (the common refusal) gets none; one with a circuit, a cap, a timeout (its own or the
    plugins' defaults) does."""
    from harness_one_plugins import TimeoutPlugin

    def on_error_of(reg: ToolRegistry, name: str) -> list[str]:
        return list(reg.plugins.plan.for_tool(reg.get(name)).on_error_names)

    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="plain", rate_limit={"rate": 1, "burst": 1})
    reg.add(lambda: 1, name="guarded", rate_limit={"rate": 1, "burst": 1}, circuit_breaker=True)
    reg.add(lambda: 1, name="capped", rate_limit={"rate": 1, "burst": 1}, max_concurrency=2)
    reg.add(lambda: 1, name="waits", rate_limit={"rate": 1, "burst": 1, "max_wait": 1.0})
    assert "rate_limit" not in on_error_of(reg, "plain")
    assert all("rate_limit" in on_error_of(reg, name) for name in ("guarded", "capped", "waits"))
    bounded = ToolRegistry(plugins={"timeout": TimeoutPlugin(total=30.0)}, autoload=False)
    bounded.add(lambda: 1, name="plain", rate_limit={"rate": 1, "burst": 1})
    assert "rate_limit" in on_error_of(bounded, "plain")  # the plugin-wide total may refuse it after its token


def test_a_guard_before_the_rate_limit_refusing_gives_back_no_token_it_never_took() -> None:
    """A ToolBusy from a guard that runs before the rate limit made it give back a token no attempt had
    taken: each such refusal minted one (5 runs at a limit of 1)."""
    from harness_one import ToolBusy

    class Gate:
        order = 5

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            if not call.peek("gate.seen"):
                call.state["gate.seen"] = True
                raise ToolBusy("busy, try again", tool=call.tool.name, retry_after=0.01)

    reg = ToolRegistry(plugins={"gate": Gate()}, clock=ManualClock(), autoload=False)
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or "ran", name="send", circuit_breaker=True, rate_limit={"rate": 1e-6, "burst": 1}, retry=3)
    assert [reg.try_call("send").ok for _ in range(5)] == [True, False, False, False, False] and runs == [1]


def test_a_plugin_delegating_to_the_hook_method_still_refuses(clock: ManualClock) -> None:
    """The core takes a refusal the prepared per-tool function returns; the hook method itself still
    raises it, so a subclass calling ``super()`` or a wrapper calling it ignoring its value refuses."""

    class ExpensiveOnly:
        def __init__(self) -> None:
            self.limit = RateLimitPlugin(default={"rate": 0.001, "burst": 1})

        @hookimpl
        def harness_configure(self, registry: ToolRegistry) -> None:
            self.limit.harness_configure(registry)

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            if call.tool.name == "expensive":
                self.limit.harness_pre_call(call)

    class Counting(RateLimitPlugin):
        admitted = 0

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            super().harness_pre_call(call)
            Counting.admitted += 1

    for name, plugin in (("expensive_only", ExpensiveOnly()), ("rate_limit", Counting(default={"rate": 0.001, "burst": 1}))):
        reg = ToolRegistry(autoload=False, standard_plugins=False, clock=clock)
        reg.plugins.register(plugin, name=name)
        reg.add(lambda: "ran", name="expensive")
        answers = [reg.try_call("expensive") for _ in range(3)]
        assert [a.value if a.ok else type(a.error).__name__ for a in answers] == ["ran"] + ["RateLimitExceeded"] * 2
    assert Counting.admitted == 1


@pytest.mark.parametrize(
    ("wait", "text"),
    [(999.6, "1,000"), (999.4, "1,000"), (0.1234, "0.124"), (3600.0, "3,600"), (12.0, "12"), (12.346, "12.4"), (1234.2, "1,235")],
)
def test_retry_after_reads_as_a_person_reads_it(wait: float, text: str) -> None:
    """Three significant digits, whole seconds from 1,000 on (999.6 s read ``1e+03 s``), rounded up: a model that
    waits what the text says is not refused again (12.346 s read 12.3 s)."""
    assert f"Retry after {text} s or use another tool." in str(RateLimitExceeded.of(wait, "t", "c1"))
    assert f"Retry after {text} s or use another tool." in str(CircuitOpen(retry_after=wait, tool="t"))


def test_the_wait_a_refusal_states_is_never_shorter_than_retry_after() -> None:
    waits = [10.0**k * m for k in range(-6, 10) for m in (1.0, 1.0001, 1.2345, 3.0 / 7, 9.9951, 9.99949)]
    for wait in waits:
        said = str(RateLimitExceeded.of(wait, "t", None)).split("Retry after ")[1].split(" s ")[0]
        assert float(said.replace(",", "")) >= wait, (wait, said)


@pytest.mark.parametrize("keyed", [False, True], ids=["tool", "per-caller"])
def test_a_bucket_made_under_a_faster_limit_is_not_swept_before_the_slower_one_refills_it(keyed: bool) -> None:
    """A tool replaced with a slower limit keeps its buckets' tokens; a sweep must not take one for full after
    the old limit's refill time (0.1 s) while the new one (100 s) has not refilled it: that admitted a burst."""
    buckets = InMemoryBuckets(max_keys=1000, sweep_every=1)
    clock = ManualClock()
    reg = ToolRegistry(plugins={"rate_limit": RateLimitPlugin(backend=buckets)}, clock=clock, autoload=False)
    key = {"key": "user"} if keyed else {}
    context = {"user": "u1"} if keyed else None
    reg.add(lambda: 1, name="t", rate_limit={"rate": 10.0, "burst": 1.0, **key})
    assert reg.try_call("t", context=context).ok  # its bucket is empty now
    reg.add(lambda: 1, name="t", rate_limit={"rate": 0.01, "burst": 1.0, **key}, replace=True)
    clock.advance(1.0)  # 0.01 of a token back under the new limit; under the old one it would be full
    buckets.acquire("other", rate=10.0, burst=1.0, cost=1.0, now=clock.now())  # a sweep
    refused = reg.try_call("t", context=context)
    assert isinstance(refused.error, RateLimitExceeded), refused  # (before the fix: swept, a full bucket, admitted)
    assert refused.error.retry_after == pytest.approx(99.0)
