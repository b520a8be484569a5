from __future__ import annotations

import math
import time
import warnings

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
     ("max(1, 2, 3) - min(4, 5)", -1), ("2 ** 0.5", math.sqrt(2)), ("factorial(5)", 120), ("10 ** 999 // 10 ** 998", 10),
     ("+".join(["1"] * 400), 400), ("-" * 98 + "1", 1), ("round(123456, -3)", 123000), ("factorial(449) // factorial(448)", 449)],
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
        ("factorial(100000)", "limited to n <= 449"),
        ("1 / 0", "division by zero"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers"),
        ("[1, 2]", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("1 +", "not a valid expression"),
        ("sqrt(-1)", "math error"),
        ("round(inf)", "math error: round() of inf: the value is infinite, not a finite number, so it has no integer value"),
        ("floor(-inf)", "floor() of -inf: the value is infinite"),  # was "out of the range of a float (about 1.8e308)"
        ("ceil(1e308 * 10)", "ceil() of inf: the value is infinite"),
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


@pytest.mark.parametrize(
    ("expression", "fragment", "expected"),
    [
        ("round(1, -10**7)", "round() takes ndigits between -1000 and 1000, not -10000000", "|ndigits| <= 1000"),  # ran 7 s
        ("round(2.5, 10**9)", "ndigits between -1000 and 1000", "|ndigits| <= 1000"),
        ("factorial(450)", "limited to n <= 449", "n <= 449"),  # 450! has 1001 digits
        ("(10**999) * (10**999)", "the product would have more than 1000 digits", "<= 1000 digits"),
        ("3 ** 2 ** 200", "the power would have more than 1000 digits", "<= 1000 digits"),
        ("7 ** 1184", "7 ** 1184 would have more than 1000 digits", "<= 1000 digits"),
        ("(-2) ** (2 ** 63)", "(-2) ** 9223372036854775808 would have", "<= 1000 digits"),  # was -2 ** 9223...: -(2 ** ...)
        ("10 ** 1000", "has more than 1000 digits", "<= 1000 digits"),  # the estimate allows it, the result is checked
        ("0x" + "f" * 900, "has more than 1000 digits", "<= 1000 digits"),  # a literal past the limit
        ("-" * 999 + "1", "nested more than 100 levels deep", "<= 100 levels"),  # was a RecursionError
        ("abs(" * 101 + "1" + ")" * 101, "nested more than 100 levels deep", "<= 100 levels"),
        ("(" * 300 + "1" + ")" * 300, "nested more than 100 levels deep", "<= 100 levels"),  # the parser's own limit
        ("(" * 101 + "1" + ")" * 101, "nested more than 100 levels deep", "<= 100 levels"),  # parentheses make no nodes
        ("2 ** " * 150 + "1", "nested more than 100 levels deep", "<= 100 levels"),
    ],
)
def test_size_limits_are_checked_before_computing(reg: ToolRegistry, expression: str, fragment: str, expected: str) -> None:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("calculate", {"expression": expression})
    problem = err.value.problems[0]
    assert fragment in problem.message, problem.message
    assert (problem.path, problem.keyword, problem.expected) == ("$.expression", "limits", expected)


def test_limits_match_their_documentation() -> None:
    assert len(str(math.factorial(mod.MAX_FACTORIAL))) <= mod.MAX_RESULT_DIGITS < len(str(math.factorial(mod.MAX_FACTORIAL + 1)))
    assert mod.evaluate("9" * 1000) == int("9" * 1000)  # the largest literal of the length limit
    assert mod.evaluate("7 ** 1183") == 7**1183  # 1000 digits: the largest power of 7 allowed
    assert mod.evaluate("round(1, -1000)") == 0
    assert mod.evaluate("(" * 100 + "1" + ")" * 100) == 1  # 100 levels of parentheses


@pytest.mark.parametrize("expression", ["(-8) ** 0.5", "(-1) ** (1 / 3)"])
def test_complex_results_are_refused(reg: ToolRegistry, expression: str) -> None:
    with pytest.raises(ToolArgumentError, match="not a real number"):
        reg.call("calculate", {"expression": expression})


def test_the_models_text_prints_no_syntax_warning() -> None:
    with warnings.catch_warnings(record=True) as caught, pytest.raises(ToolArgumentError, match="IfExp is not allowed"):
        mod.evaluate("1if 1 else 2")  # the tokenizer warns "invalid decimal literal" on stderr
    assert [w for w in caught if issubclass(w.category, SyntaxWarning)] == []


@pytest.mark.parametrize(
    "expression",
    ["round(1, -10**7)", "round(1.5, 10**9)", "2 ** 10 ** 9", "(10**999) ** (10**999)", "10**999 * 10**999", "factorial(10**6)"],
)
def test_a_refusal_is_instant(expression: str) -> None:
    """Each of these holds the GIL for seconds (or forever) when computed; a thread timeout cannot stop it."""
    start = time.perf_counter()
    with pytest.raises(ToolArgumentError) as err:
        mod.evaluate(expression)
    assert time.perf_counter() - start < 0.1
    assert err.value.problems[0].keyword == "limits"


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("-" * 1000 + "1", "the expression is 1001 characters; the limit is 1000"),
        ("-" * 999 + "1", "nested more than 100 levels deep"),
        ("\ud800", "a lone surrogate (U+D800) at column 1"),  # was a raw UnicodeEncodeError
        ("1 + \udfff", "a lone surrogate (U+DFFF) at column 5"),
        ("1\x00", "null bytes"),
    ],
)
def test_hostile_text_is_a_readable_refusal(reg: ToolRegistry, expression: str, fragment: str) -> None:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("calculate", {"expression": expression})
    problem = err.value.problems[0]
    assert problem.path == "$.expression" and fragment in problem.message, problem.message


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1.0 ** (10**999)", 1.0),
        ("(-1.0) ** (10**999 + 1)", -1.0),
        ("(-1) ** -(10**999)", 1.0),
        ("2 ** -(10**999)", 0.0),
        ("0.5 ** (10**999)", 0.0),
        ("(10**999) ** -1", 0.0),
        ("(-(10**999)) ** -3", -0.0),
        ("(10**999) ** -2.5", 0.0),
        ("(10**999) ** 0.0", 1.0),
        ("(2**1024) ** -1", 2.0**-1024),  # a subnormal float: 1 / 2**1024, correctly rounded
        ("inf ** -(10**999)", 0.0),
        ("1 / (10**999) ** inf", 0.0),  # inf as an intermediate: only the result must be finite
    ],
)
def test_a_power_of_an_integer_past_floats_is_exact_where_it_can_be(expression: str, value: float) -> None:
    """Python fails converting the integer to a float: "out of the range of a float" for 1.0 or 0.0."""
    result = mod.evaluate(expression)
    assert type(result) is float and result == value and math.copysign(1, result) == math.copysign(1, value)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("2.0 ** (10**999)", "the result is out of the range of a float"),
        ("0.5 ** -(10**999)", "the result is out of the range of a float"),
        ("(10**999) ** 0.5", "the result is out of the range of a float"),
        ("0.0 ** -(10**999)", "division by zero"),
        ("(-(10**999)) ** 0.5", "the result is not a real number"),
        ("(10**400) ** -0.5", "an operand is too large to convert to a float"),  # 1e-200: fits, but not computed
        ("10**999 * 1e-900", "an operand is too large to convert to a float"),
        ("sqrt(10**999)", "an operand is too large to convert to a float"),
    ],
)
def test_an_integer_past_floats_elsewhere_is_refused_as_an_operand(expression: str, fragment: str) -> None:
    with pytest.raises(ToolArgumentError) as err:
        mod.evaluate(expression)
    assert fragment in str(err.value), str(err.value)
