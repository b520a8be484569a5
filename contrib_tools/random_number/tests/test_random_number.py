from __future__ import annotations

import math
import random

import harness_one_random_number as mod
import pytest

from harness_one import ManualClock, RateLimitExceeded, ToolArgumentError, ToolRegistry


@pytest.fixture
def reg() -> ToolRegistry:
    registry = ToolRegistry(autoload=False, block=["rate_limit"])
    registry.add(mod.random_number)
    return registry


def test_integers_and_floats_in_range(reg: ToolRegistry) -> None:
    ints = [reg.call("random_number", {"min": 1, "max": 3, "seed": s})["value"] for s in range(5)]
    assert set(ints) <= {1, 2, 3} and all(isinstance(v, int) for v in ints)
    floats = reg.call("random_number", {"min": 0.5, "max": 0.75, "kind": "float", "seed": 1})["value"]
    assert 0.5 <= floats <= 0.75 and isinstance(floats, float)


def test_seed_is_reproducible(reg: ToolRegistry) -> None:
    first = reg.call("random_number", {"min": 0, "max": 10**9, "seed": 42})
    second = reg.call("random_number", {"min": 0, "max": 10**9, "seed": 42})
    assert first == second


def test_min_greater_than_max(reg: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("random_number", {"min": 5, "max": 1})
    assert err.value.problems[0].path == "$.min" and "greater than max" in str(err.value)
    with pytest.raises(ToolArgumentError, match="no integer"):
        reg.call("random_number", {"min": 0.2, "max": 0.8})


def test_rate_limit_burst() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    reg.add(mod.random_number)
    for _ in range(5):
        reg.call("random_number", {})
    with pytest.raises(RateLimitExceeded) as err:
        reg.call("random_number", {})
    assert err.value.retry_after == pytest.approx(0.2)


def test_the_widest_float_range_gives_a_finite_number(reg: ToolRegistry) -> None:
    values = [reg.call("random_number", {"min": -1e308, "max": 1e308, "kind": "float", "seed": s})["value"] for s in range(20)]
    assert all(-1e308 <= v <= 1e308 for v in values) and len(set(values)) == 20  # uniform() alone gave inf


@pytest.mark.parametrize(("field", "bound"), [("min", float("nan")), ("max", float("inf")), ("min", float("-inf"))])
def test_non_finite_bounds_are_refused_without_the_validation_plugin(field: str, bound: float) -> None:
    reg = ToolRegistry(autoload=False, block=["validation"])
    reg.add(mod.random_number)
    with pytest.raises(ToolArgumentError) as err:  # was a ValueError or OverflowError from the tool
        reg.call("random_number", {field: bound, "kind": "integer"})
    assert err.value.problems[0].path == f"$.{field}" and "finite number" in err.value.problems[0].message


def test_an_integer_bound_past_the_float_range_is_refused_for_a_float_draw(reg: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("random_number", {"min": 0, "max": 10**400, "kind": "float"})  # was OverflowError in the tool
    assert [p.path for p in err.value.problems] == ["$.max"]
    assert 0 <= reg.call("random_number", {"min": 0, "max": 10**400, "kind": "integer"})["value"] <= 10**400


def test_a_float_draw_stays_within_integer_bounds_no_float_equals(reg: ToolRegistry) -> None:
    low = 2**53 + 1  # between the floats 2**53 and 2**53 + 2
    with pytest.raises(ToolArgumentError, match="no float lies between 9007199254740993 and 9007199254740993"):
        reg.call("random_number", {"min": low, "max": low, "kind": "float"})  # was 9007199254740992.0, below min
    values = [reg.call("random_number", {"min": low, "max": low + 2, "kind": "float", "seed": s})["value"] for s in range(20)]
    assert values == [float(low + 1)] * 20  # the one float inside
    wide = [reg.call("random_number", {"min": -low, "max": low, "kind": "float", "seed": s})["value"] for s in range(20)]
    assert all(-low <= v <= low for v in wide)


class RoundingPast(random.Random):
    """Draws the float just past ``b``, as ``uniform`` may by rounding."""

    def uniform(self, a: float, b: float) -> float:
        return math.nextafter(b, math.inf)


def test_a_float_draw_that_rounds_past_an_end_is_clamped(reg: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "Random", RoundingPast)  # the one the tool draws with
    assert reg.call("random_number", {"min": 0.5, "max": 0.75, "kind": "float"})["value"] == 0.75
