"""Per-run call budgets (the budget plugin) and rate limits keyed by a context field."""

from __future__ import annotations

import threading

import pytest

from harness_one import ManualClock, RetryableError, ToolDefinitionError, ToolRegistry
from harness_one.state import MemoryBudgets
from harness_one_plugins import BudgetPlugin
from harness_one_plugins.budget import ALL_TOOLS, BudgetExhausted, BudgetRunInvalid


def registry(**options: object) -> ToolRegistry:
    return ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"budget": options} if options else None)


def test_a_tool_is_called_at_most_max_calls_times_per_run() -> None:
    reg = registry()
    reg.add(lambda q: f"result for {q}", name="search", options={"max_calls": 2})
    run = {"run_id": "r1"}
    assert [reg.try_call("search", {"q": str(i)}, context=run).ok for i in range(3)] == [True, True, False]
    refused = reg.try_call("search", {"q": "again"}, context=run)
    assert isinstance(refused.error, BudgetExhausted) and refused.error.kind == "budget_exhausted"
    assert refused.for_model() == (
        "Error: Tool 'search' has already been called 2 times in this run, the most it may be called. "
        "Do not call it again in this run; continue with the results you have."
    )
    assert refused.error.to_dict()["scope"] == "search" and refused.error.to_dict()["limit"] == 2
    assert reg.try_call("search", {"q": "x"}, context={"run_id": "r2"}).ok  # another run has its own budget
    assert all(reg.try_call("search", {"q": "x"}).ok for _ in range(5))  # no run id: not counted
    budget = reg.plugins.get("budget")
    assert budget.used("r1", "search") == 2 and budget.used("r1") == 2 and budget.used("r2") == 1
    assert reg.stats()["budget"] == {"runs": 2, "refused": 2, "unscoped": 5}  # the 5 calls without a run id


def test_a_total_for_all_tools_and_a_default_per_tool_from_plugin_options() -> None:
    reg = registry(total=3, max_calls=2, key="thread")
    reg.add(lambda: "a", name="a")
    reg.add(lambda: "b", name="b")
    thread = {"thread": "t"}
    outcomes = [reg.try_call(name, context=thread) for name in ("a", "a", "a", "b", "b")]
    assert [r.ok for r in outcomes] == [True, True, False, True, False]
    assert outcomes[2].error.scope == "a"  # type: ignore[union-attr]
    assert outcomes[4].error.scope == ALL_TOOLS  # type: ignore[union-attr]
    assert outcomes[4].for_model().startswith("Error: This run has already made 3 tool calls, the most it may make.")


def test_retries_of_one_call_take_one_unit() -> None:
    reg = registry()
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) % 3:
            raise RetryableError("busy")
        return "ok"

    reg.add(flaky, idempotent=True, retry={"attempts": 3, "initial": 0.1}, options={"max_calls": 1})
    result = reg.try_call("flaky", context={"run_id": "r"})
    assert result.ok and result.attempts == 3
    assert reg.plugins.get("budget").used("r") == 1
    assert reg.try_call("flaky", context={"run_id": "r"}).error.kind == "budget_exhausted"  # type: ignore[union-attr]


def test_a_call_that_never_ran_gives_its_unit_back() -> None:
    reg = registry()
    reg.add(lambda: "pong", name="ping", rate_limit={"rate": 0.001, "burst": 1}, options={"max_calls": 2})
    reg.add(lambda: "v", name="lookup", read_only=True, cache_ttl=60, options={"max_calls": 2})
    run = {"run_id": "r"}
    assert reg.try_call("ping", context=run).ok
    assert reg.try_call("ping", context=run).error.kind == "rate_limited"  # type: ignore[union-attr]
    assert reg.plugins.get("budget").used("r", "ping") == 1  # the refused call did not run: not counted
    assert [reg.try_call("lookup", context=run).ok for _ in range(4)] == [True] * 4  # cache hits run nothing
    assert reg.plugins.get("budget").used("r", "lookup") == 1
    assert reg.try_call("ping", {"unexpected": 1}, context=run).error.kind == "invalid_arguments"  # type: ignore[union-attr]
    assert reg.plugins.get("budget").used("r", "ping") == 1


def test_a_tool_that_ran_and_failed_used_its_unit() -> None:
    reg = registry()
    reg.add(lambda: 1 / 0, name="boom", options={"max_calls": 1})
    assert reg.try_call("boom", context={"run_id": "r"}).error.kind == "tool_failed"  # type: ignore[union-attr]
    assert reg.try_call("boom", context={"run_id": "r"}).error.kind == "budget_exhausted"  # type: ignore[union-attr]


def test_concurrent_calls_never_exceed_the_budget() -> None:
    reg = registry()
    gate = threading.Barrier(16)
    reg.add(lambda: "ok", name="work", options={"max_calls": 5})
    results: list[bool] = []

    def one() -> None:
        gate.wait()
        results.append(reg.try_call("work", context={"run_id": "r"}).ok)

    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 5 and len(results) == 16


def test_runs_are_bounded_and_can_be_reset() -> None:
    reg = ToolRegistry(autoload=False, plugins={"budget": BudgetPlugin(max_calls=1, store=MemoryBudgets(max_runs=2))})
    reg.add(lambda: 1, name="f")
    for run in ("a", "b", "c"):
        assert reg.try_call("f", context={"run_id": run}).ok
    budget = reg.plugins.get("budget")
    assert (budget.used("a"), budget.used("b"), budget.used("c")) == (0, 1, 1)  # "a" was the least recently active
    budget.reset("b")
    assert reg.try_call("f", context={"run_id": "b"}).ok and not reg.try_call("f", context={"run_id": "c"}).ok
    budget.reset()
    assert reg.stats()["budget"]["runs"] == 0


def test_budgets_cost_nothing_for_tools_without_one_and_bad_options_are_refused() -> None:
    reg = registry()
    reg.add(lambda: 1, name="free")
    assert "budget" not in reg.plugins.plan.for_tool(reg.get("free")).on_error_names
    with pytest.raises(ToolDefinitionError, match="max_calls must be a non-negative integer"):
        reg.add(lambda: 1, name="bad", options={"max_calls": "3"})
    zero = registry()
    zero.add(lambda: 1, name="never", options={"max_calls": 0})
    assert zero.try_call("never", context={"run_id": "r"}).error.kind == "budget_exhausted"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="max_runs"):
        MemoryBudgets(max_runs=0)
    with pytest.raises(ValueError, match="ttl"):
        BudgetPlugin(ttl=0)
    with pytest.raises(ValueError, match="on_state_error"):
        BudgetPlugin(on_state_error="maybe")


def test_a_finished_run_is_forgotten_after_the_ttl() -> None:
    reg = registry(ttl=60, max_calls=1)
    reg.add(lambda: 1, name="f")
    budget = reg.plugins.get("budget")
    assert reg.try_call("f", context={"run_id": "r"}).ok
    reg.clock.advance(59)  # type: ignore[attr-defined]
    assert reg.try_call("f", context={"run_id": "r"}).error.kind == "budget_exhausted"  # type: ignore[union-attr]
    reg.clock.advance(59)  # type: ignore[attr-defined]  # the refusal was activity: the run is still kept
    assert budget.used("r") == 1
    reg.clock.advance(1)  # type: ignore[attr-defined]  # 60 s idle: forgotten, its budget starts again
    assert budget.used("r") == 0 and reg.try_call("f", context={"run_id": "r"}).ok


def test_run_ids_are_compared_as_text_and_the_store_is_the_registrys() -> None:
    reg = registry(max_calls=1)
    reg.add(lambda: 1, name="f")
    budget = reg.plugins.get("budget")
    assert budget.store is reg.state.budgets() and isinstance(budget.store, MemoryBudgets)
    assert reg.try_call("f", context={"run_id": 7}).ok
    assert budget.used(7) == 1 and budget.used("7") == 1  # the same text: the same run
    assert reg.try_call("f", context={"run_id": "7"}).error.kind == "budget_exhausted"  # type: ignore[union-attr]
    refused = reg.try_call("f", context={"run_id": ("7",)}).error  # a tuple's text is no run id
    assert isinstance(refused, BudgetRunInvalid) and refused.field == "run_id" and budget.used(7) == 1


def test_a_run_id_that_is_an_object_is_refused_not_counted_as_a_new_run() -> None:
    """An object's text may be its address: a new ``Run`` object per call was a new, unspent run each time
    (a budget of one call let every call through)."""

    class Run:
        pass

    reg = registry(max_calls=1)
    runs: list[int] = []
    reg.add(lambda: runs.append(1), name="f")
    answers = [reg.try_call("f", context={"run_id": Run()}) for _ in range(3)]
    assert [a.error.kind for a in answers if a.error] == ["budget_run_invalid"] * 3 and runs == []
    assert "context field 'run_id', which holds a Run" in answers[0].error.message  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- keyed rate limits


def test_a_rate_limit_keyed_by_a_context_field_has_one_bucket_per_value() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    reg.add(lambda: "ok", name="search", rate_limit={"rate": 5, "burst": 10, "key": "user"})
    ann = [reg.try_call("search", context={"user": "ann"}).ok for _ in range(11)]
    assert ann == [True] * 10 + [False]
    assert all(reg.try_call("search", context={"user": "bob"}).ok for _ in range(10))  # bob's own bucket
    refused = reg.try_call("search", context={"user": "ann"})
    assert refused.error.kind == "rate_limited" and refused.error.retry_after == pytest.approx(0.2)  # type: ignore[union-attr]
    reg.clock.advance(0.2)  # type: ignore[attr-defined]
    assert reg.try_call("search", context={"user": "ann"}).ok


def test_a_long_run_id_is_kept_as_a_digest() -> None:
    """A 200 KB run id was kept whole for each run in memory (40 MB for 200 runs); compared by its digest now."""
    from harness_one.state import key_text

    reg = ToolRegistry(plugin_options={"budget": {"total": 1}}, autoload=False)
    reg.add(lambda: 1, name="t")
    long = "r-" + "x" * 200_000
    assert reg.call("t", context={"run_id": long}) == 1
    assert reg.try_call("t", context={"run_id": long}).error.kind == "budget_exhausted"  # type: ignore[union-attr]
    assert reg.call("t", context={"run_id": long + "y"}) == 1  # another run
    budget = reg.plugins.get("budget")
    assert budget.used(long) == 1 and all(len(run) == 65 for run in budget.store._runs)
    assert key_text(long).startswith("#") and len(key_text(long)) == 65
