"""Review 26: deeply nested results under idempotency (as docs/plugins.md says: whole where the store holds
them, else what the model read), and the order of the policies as docs/plugins.md gives it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness_one import ToolRegistry

DOCS = Path(__file__).resolve().parent.parent / "docs"


def unnest(value: Any) -> tuple[int, Any]:
    """How deep ``value``'s one-item lists go, and what is at the bottom."""
    depth = 0
    while type(value) is list and len(value) == 1:
        value, depth = value[0], depth + 1
    return depth, value


def deep(n: int) -> Any:
    """A receipt under ``n`` lists."""
    value: Any = {"amount": 42}
    for _ in range(n):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("state", "depth", "replayed"),
    [
        ("memory:", 300, (300, {"amount": 42})),
        ("memory:", 600, "idempotency_not_replayable"),  # deepcopy stops at about 500 levels; so does its JSON copy
        ("memory:", 2000, (201, "...")),  # json cannot write it: the model read it cut at 200 levels, and so is it kept
        ("sqlite", 900, (900, {"amount": 42})),
        ("sqlite", 2000, (201, "...")),
    ],
)
def test_a_deep_result_replays_as_the_docs_say(tmp_path: Path, state: str, depth: int, replayed: Any) -> None:
    reg = ToolRegistry(state=f"sqlite:{tmp_path / 'i.db'}" if state == "sqlite" else state, autoload=False)
    runs: list[int] = []
    reg.add(lambda n: runs.append(n) or deep(n), name="deep", idempotent=True)
    first = reg.try_call("deep", {"n": depth}, idempotency_key="k")
    assert unnest(first.value) == (depth, {"amount": 42})  # the caller gets what the tool did
    if depth > 1000:
        assert first.for_model().count("[") == 201  # what the model read: cut at 200 levels
    again = reg.try_call("deep", {"n": depth}, idempotency_key="k")
    assert (again.error.kind if again.error else unnest(again.value)) == replayed and not again.ran
    assert runs == [depth]


def test_the_documented_order_is_the_order_the_plugins_run_in() -> None:
    """docs/plugins.md: replay, then the budget and approval, then a cache hit (their pre_call order)."""
    text = (DOCS / "plugins.md").read_text(encoding="utf-8")
    line = re.search(r"^idempotency replay -> .*-> tool$", text, re.M)
    assert line is not None
    steps = line.group().split(" -> ")
    assert steps[:5] == ["idempotency replay", "budget", "approval", "cache hit", "rate limit"]
    planned = ToolRegistry(autoload=False).plugins.plan.order["pre_call"]  # what the core runs, tryfirst included
    assert [name for name in planned if name in ("idempotency", "budget", "approval", "cache", "rate_limit")] == [
        "idempotency",
        "budget",
        "approval",
        "cache",
        "rate_limit",
    ]
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
