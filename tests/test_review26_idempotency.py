"""Review 26: deeply nested results under idempotency (never replayed cut short; the in-memory store
copies any depth), and the order of the policies as docs/plugins.md gives it."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from harness_one import ToolRegistry
from harness_one.state import copied
from harness_one_plugins import IdempotencyPlugin, MemoryStore
from harness_one_plugins.approval import ApprovalPlugin
from harness_one_plugins.budget import BudgetPlugin
from harness_one_plugins.cache import CachePlugin
from harness_one_plugins.idempotency import OutcomeNotReplayable

DOCS = Path(__file__).resolve().parent.parent / "docs"


def nested(leaf: Any, depth: int, kind: type = list) -> Any:
    for _ in range(depth):
        leaf = kind([leaf])
    return leaf


def unnest(value: Any) -> tuple[int, Any]:
    """How deep ``value``'s one-item lists and tuples go, and what is at the bottom."""
    depth = 0
    while type(value) in (list, tuple) and len(value) == 1:
        value, depth = value[0], depth + 1
    return depth, value


def deep(n: int) -> Any:
    """A receipt under ``n`` lists."""
    return nested({"amount": 42}, n)


def _registry(state: str, runs: list[int]) -> ToolRegistry:
    reg = ToolRegistry(state=state)

    def tool(n: int) -> Any:
        runs.append(n)
        return deep(n)

    reg.add(tool, name="deep", idempotent=True)
    return reg


def _call(reg: ToolRegistry, mode: str, n: int) -> Any:
    if mode == "call":
        return reg.try_call("deep", {"n": n}, idempotency_key="k")
    return asyncio.run(reg.atry_call("deep", {"n": n}, idempotency_key="k"))


def _not_replayed_cut_short(reg: ToolRegistry, mode: str, runs: list[int], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="harness_one"):
        first = _call(reg, mode, 2000)
    assert unnest(first.value) == (2000, {"amount": 42})  # the caller gets what the tool did
    assert "idempotent outcome not replayable: kept as OutcomeNotReplayable" in caplog.text
    for _ in range(2):
        again = _call(reg, mode, 2000).error
        assert isinstance(again, OutcomeNotReplayable) and again.replayed
        assert again.kind == "idempotency_not_replayable"
        assert "already ran for idempotency key 'k', but its outcome could not be stored to replay" in again.message
    assert runs == [2000]
    assert reg.stats()["idempotency"]["not_replayable"] == 1


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_sqlite_keeps_a_result_nested_past_json_as_not_replayable_not_cut_short(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """2,000 levels: SQLite's JSON cannot hold it, and what the model read stops at 200 levels ('...').
    The key keeps OutcomeNotReplayable (warned, counted), not a value whose data is gone."""
    runs: list[int] = []
    _not_replayed_cut_short(_registry(f"sqlite:///{tmp_path / 'i.db'}", runs), mode, runs, caplog)


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_redis_keeps_a_result_nested_past_json_as_not_replayable_not_cut_short(
    redis_url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []
    _not_replayed_cut_short(_registry(redis_url, runs), mode, runs, caplog)


@pytest.mark.parametrize("depth", [300, 900])
def test_sqlite_replays_a_result_json_holds_whole(tmp_path: Path, depth: int) -> None:
    runs: list[int] = []
    reg = _registry(f"sqlite:///{tmp_path / 'i.db'}", runs)
    assert unnest(_call(reg, "call", depth).value) == (depth, {"amount": 42})
    assert unnest(_call(reg, "call", depth).value) == (depth, {"amount": 42})
    assert runs == [depth] and "not_replayable" not in reg.stats()["idempotency"]


@pytest.mark.parametrize("mode", ["call", "acall"])
@pytest.mark.parametrize("depth", [600, 2000, 5000])
def test_the_default_in_memory_store_replays_a_deeply_nested_result_whole(mode: str, depth: int) -> None:
    """``copy.deepcopy`` stops near 500 levels; the in-memory store copies lists level by level past that."""
    runs: list[int] = []
    reg = _registry("memory:", runs)
    first = _call(reg, mode, depth).value
    for _ in range(2):
        again = _call(reg, mode, depth)
        assert again.ok and not again.ran
        assert unnest(again.value) == (depth, {"amount": 42})
        assert again.value is not first  # a copy: no caller changes what the next one is replayed
    assert runs == [depth]
    assert reg.stats()["idempotency"]["replays"] == 2 and "not_replayable" not in reg.stats()["idempotency"]


def test_copied_keeps_sharing_cycles_types_and_other_parts_past_the_recursion_limit() -> None:
    shared = [1, 2]
    loop: list[Any] = []
    loop.append(loop)
    bottom = {"a": shared, "b": shared, (1, ("t",)): (shared,), "loop": loop, "n": 3.5, "raw": b"x", "none": None}
    value = nested(nested(bottom, 1500, tuple), 1500)
    made = copied(value)
    depth, got = unnest(made)
    assert depth == 3000
    # tuples stay tuples, lists lists, at each level
    level: Any = made
    kinds = []
    for _ in range(3000):
        kinds.append(type(level))
        level = level[0]
    assert kinds == [list] * 1500 + [tuple] * 1500
    assert got == {"a": [1, 2], "b": [1, 2], (1, ("t",)): ([1, 2],), "loop": got["loop"], "n": 3.5, "raw": b"x", "none": None}
    assert got["a"] is got["b"] is got[(1, ("t",))][0] and got["a"] is not shared  # shared once, as deepcopy shares
    assert got["loop"][0] is got["loop"] and got["loop"] is not loop  # a cycle copied as a cycle
    shared.append(3)
    assert got["a"] == [1, 2]  # nothing the caller holds


def test_copied_refuses_a_deep_value_it_cannot_copy_as_type_error() -> None:
    with pytest.raises(TypeError, match=r"^the value cannot be copied: TypeError: cannot pickle '_thread.lock' object$"):
        copied(nested(threading.Lock(), 2000))
    inner: list[Any] = []
    holder = (inner,)
    inner.append(holder)  # a tuple inside itself, nested past the recursion limit
    with pytest.raises(TypeError, match=r"^the value cannot be copied: RecursionError: a tuple holds itself"):
        copied(nested(holder, 2000))


def test_an_in_memory_key_of_a_deep_result_that_cannot_be_copied_keeps_not_replayable() -> None:
    """Not copyable, nested past the renderer's 200 levels: not kept as what the model read (cut short)."""
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=MemoryStore())}, autoload=False)
    runs: list[int] = []
    lock = threading.Lock()
    reg.add(lambda: runs.append(1) or nested([lock, {"amount": 42}], 2000), name="deep")
    assert unnest(reg.try_call("deep", idempotency_key="k").value)[0] == 2000
    again = reg.try_call("deep", idempotency_key="k").error
    assert isinstance(again, OutcomeNotReplayable) and again.replayed and runs == [1]


def test_the_documented_order_is_the_order_the_plugins_run_in() -> None:
    """docs/plugins.md: replay, then the budget and approval, then a cache hit (their pre_call order)."""
    text = (DOCS / "plugins.md").read_text(encoding="utf-8")
    line = re.search(r"^idempotency replay -> .*-> tool$", text, re.M)
    assert line is not None
    steps = line.group().split(" -> ")
    assert steps[:5] == ["idempotency replay", "budget", "approval", "cache hit", "rate limit"]
    orders = [IdempotencyPlugin.order, BudgetPlugin.order, ApprovalPlugin.order, CachePlugin.order]
    assert orders == sorted(orders)
    assert "An idempotency replay or a cache hit answers before anything else" not in text


def test_a_call_the_cache_could_answer_is_still_refused_once_the_budget_is_spent() -> None:
    runs: list[str] = []
    reg = ToolRegistry(plugin_options={"cache": {"ttl": 60}})
    reg.add(lambda city: runs.append(city) or f"sunny in {city}", name="weather", read_only=True, options={"max_calls": 2})
    run = {"run_id": "R"}
    assert reg.try_call("weather", {"city": "Oslo"}, context=run).value == "sunny in Oslo"
    hit = reg.try_call("weather", {"city": "Oslo"}, context=run)
    assert hit.value == "sunny in Oslo" and not hit.ran  # a cache hit gives its unit back
    assert reg.plugins.get("budget").used("R") == 1
    assert reg.try_call("weather", {"city": "Bergen"}, context=run).ok  # the second unit
    refused = reg.try_call("weather", {"city": "Oslo"}, context=run).error
    assert refused is not None and refused.kind == "budget_exhausted"  # cached, but the budget comes first
    assert runs == ["Oslo", "Bergen"] and reg.stats()["cache"]["hits"] == 1
