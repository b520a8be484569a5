from __future__ import annotations

import math
import time

import harness_one_calculate as mod
import pytest

from harness_one import ToolArgumentError, ToolRegistry


@pytest.fixture
def reg() -> ToolRegistry:
    registry = ToolRegistry(autoload=False)
    registry.add(mod.calculate)
    return registry


@pytest.mark.parametrize(
    ("expression", "value"),
    [("2 * (3 + 4) ** 2", 98), ("7 // 2 + 7 % 2", 4), ("-3 + +5", 2), ("sqrt(16) + log10(1000)", 7.0), ("round(pi, 3)", 3.142),
     ("max(1, 2, 3) - min(4, 5)", -1), ("2 ** 0.5", math.sqrt(2)), ("factorial(5)", 120), ("10 ** 999 // 10 ** 998", 10)],
)  # fmt: skip
def test_arithmetic(reg: ToolRegistry, expression: str, value: float) -> None:
    assert reg.call("calculate", {"expression": expression})["result"] == pytest.approx(value)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("__import__('os')", "function '__import__' is not allowed"),
        ("__import__('os').system('true')", "attribute access is not allowed"),
        ("(1).__class__", "attribute access is not allowed"),
        ("math.pi", "attribute access is not allowed"),
        ("9**9**9", "9 ** 387420489 would have more than 1000 digits"),
        ("2 ** 100000", "more than 1000 digits"),
        ("factorial(100000)", "limited to n <= 500"),
        ("1 / 0", "division by zero"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers"),
        ("[1, 2]", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("1 +", "not a valid expression"),
        ("sqrt(-1)", "math error"),
        ("1 << 2", "LShift is not allowed"),
        ("1" * 2000, "limit is 1000"),
    ],
)
def test_refusals_are_clear_and_fast(reg: ToolRegistry, expression: str, fragment: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ToolArgumentError) as err:
        reg.call("calculate", {"expression": expression})
    assert fragment in str(err.value), str(err.value)
    assert err.value.problems[0].path == "$.expression"
    assert time.perf_counter() - start < 5  # refused, not computed


def test_growth_by_repeated_multiplication_is_bounded() -> None:
    with pytest.raises(ToolArgumentError, match="more than 1000 digits"):
        mod.evaluate("*".join(["10 ** 900"] * 3))
