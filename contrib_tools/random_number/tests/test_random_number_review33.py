"""Review 33, random_number: ``min > max`` with an integer bound past Python's 4,300-digit ``str()`` limit is a
ToolArgumentError on ``$.min`` without the validation plugin (it was an untyped ValueError), the bound told by its
digit count."""

from __future__ import annotations

import harness_one_random_number as mod
import pytest

from harness_one import ArgumentProblem, ToolArgumentError, ToolRegistry


@pytest.mark.parametrize(
    ("low", "high", "message", "expected", "got"),
    [
        (10**5000, 1, "min (an integer of 5,001 digits) is greater than max (1)", "<= 1", "an integer of 5,001 digits"),
        (
            1,
            -(10**5000),
            "min (1) is greater than max (a negative integer of 5,001 digits)",
            "<= a negative integer of 5,001 digits",
            "1",
        ),
        (10**29, 10**29 - 1, f"min ({10**29}) is greater than max ({10**29 - 1})", f"<= {10**29 - 1}", str(10**29)),
        (10**31, 1.5, "min (an integer of 32 digits) is greater than max (1.5)", "<= 1.5", "an integer of 32 digits"),
    ],
    ids=["huge-min", "huge-negative-max", "30-digits-shown", "32-digits-counted"],  # str() of 10**5000 fails in an id
)
def test_min_past_max_is_refused_on_min_whatever_the_bounds_size(
    low: int, high: float, message: str, expected: str, got: str
) -> None:
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(mod.random_number)
    with pytest.raises(ToolArgumentError) as err:
        reg.call("random_number", {"min": low, "max": high})
    assert list(err.value.problems) == [ArgumentProblem("$.min", message, "range", expected, got)]


@pytest.mark.parametrize("exponent", [0, 1, 29, 30, 4300, 9999])
def test_digits_are_counted_without_str(exponent: int) -> None:
    assert mod._digits(10**exponent) == mod._digits(-(10**exponent)) == exponent + 1
    assert mod._digits(10**exponent - 1) == max(exponent, 1)
