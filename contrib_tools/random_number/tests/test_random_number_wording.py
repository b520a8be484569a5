"""A bound that is no finite number is worded alike with the validation plugin and without it (the tool's own
check said ``min must be a finite number, not nan``)."""

from __future__ import annotations

import math
from typing import Any

import harness_one_random_number as random_number
import pytest

from harness_one import ArgumentProblem, ManualClock, ToolArgumentError, ToolRegistry

_WITH = {"autoload": False, "block": ["rate_limit"], "clock": ManualClock()}  # the validation plugin checks the arguments first
_WITHOUT = {"autoload": False, "standard_plugins": False}  # the tool's own checks


def _problems(options: dict[str, Any], arguments: dict[str, Any]) -> list[ArgumentProblem]:
    reg = ToolRegistry(**options)
    reg.add(random_number.random_number)
    with pytest.raises(ToolArgumentError) as err:
        reg.call("random_number", arguments)
    return list(err.value.problems)


@pytest.mark.parametrize(
    ("field", "bound", "got"), [("min", math.nan, "NaN"), ("max", math.inf, "Infinity"), ("min", -math.inf, "-Infinity")]
)
@pytest.mark.parametrize("kind", ["integer", "float"])
def test_a_bound_that_is_no_finite_number_is_worded_alike_on_both_sides(field: str, bound: float, got: str, kind: str) -> None:
    arguments = {field: bound, "kind": kind}
    expected = [ArgumentProblem(f"$.{field}", f"expected a finite number, got {got}", "type", "a finite number", got)]
    assert _problems(_WITH, arguments) == expected
    assert _problems(_WITHOUT, arguments) == expected  # was "min must be ..., not nan"
