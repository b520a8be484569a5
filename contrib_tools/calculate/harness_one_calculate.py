"""``calculate``: arithmetic on a whitelist of operators and math functions, without ``eval``.

The expression is parsed with :mod:`ast`; only numbers, ``+ - * / // % **``, unary signs,
parentheses, a few constants and whitelisted functions are evaluated. Every size limit is
checked *before* the work it bounds (a computation that holds the GIL cannot be timed out
from a thread), so a refusal is instant:

- the expression: at most :data:`MAX_LENGTH` characters and :data:`MAX_DEPTH` levels of
  nesting (parentheses, calls, signs and right operands nest; a chain ``1 + 2 + 3`` does not);
- every integer (literal, operand, intermediate, result): at most :data:`MAX_RESULT_DIGITS`
  digits, estimated from bit lengths before ``*`` and ``**`` run;
- ``factorial(n)``: ``n <= MAX_FACTORIAL`` (the largest with a result under the digit limit);
- ``round(x, ndigits)``: ``|ndigits| <= MAX_RESULT_DIGITS``;
- every result is a real number (``(-8) ** 0.5`` is refused, not returned as a complex);
- the result is finite: ``1e999`` (``inf``) and ``inf - inf`` (NaN) are refused, as JSON cannot carry
  them. Intermediates follow IEEE rules as operands do (``inf`` is a constant), so ``1 / 1e999`` is 0.0.

A power whose integer operand is past a float's range (Python fails converting it) is still
computed where its result is exact: ``1.0 ** (10**999)`` is 1.0, ``2 ** -(10**999)`` and
``(10**999) ** -1`` are 0.0, ``2.0 ** (10**999)`` is out of a float's range. Elsewhere such an
operand is refused as too large to convert to a float.

Evaluation walks the tree with an explicit stack, so no Python recursion limit is involved.
Every refusal is a :class:`ToolArgumentError` for ``$.expression``.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypedDict

from harness_one import ArgumentProblem, ToolArgumentError, defineTool

__all__ = ["MAX_DEPTH", "MAX_FACTORIAL", "MAX_LENGTH", "MAX_RESULT_DIGITS", "Calculation", "calculate", "evaluate"]

MAX_LENGTH = 1000
MAX_DEPTH = 100
_PAREN = {"(": 1, ")": -1}
MAX_RESULT_DIGITS = 1000  # integers beyond this many digits are refused


def _largest_factorial(digits: int) -> int:
    n = 0
    while math.lgamma(n + 2) / math.log(10) < digits:  # log10((n + 1)!) < digits: (n + 1)! fits
        n += 1
    return n


MAX_FACTORIAL = _largest_factorial(MAX_RESULT_DIGITS)
_INT_BOUND = 10**MAX_RESULT_DIGITS  # |value| < bound  <=>  at most MAX_RESULT_DIGITS digits
_MAX_BITS = (_INT_BOUND - 1).bit_length()

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FILENAME = "<calculate>"
_QUIET = ("ignore", None, SyntaxWarning, re.compile(re.escape(_FILENAME)), 0)
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf}


class _Refused(Exception):
    """An expression outside the whitelist; the message says which."""


class _TooBig(_Refused):
    """An expression past a size limit; the message names the limit, ``expected`` states it."""

    def __init__(self, message: str, expected: str) -> None:
        super().__init__(message)
        self.expected = expected


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _too_many_digits(what: str) -> _TooBig:
    return _TooBig(f"{what} more than {MAX_RESULT_DIGITS} digits (the limit for integers)", f"<= {MAX_RESULT_DIGITS} digits")


def _multiply(left: Any, right: Any) -> Any:
    if _is_int(left) and _is_int(right) and left.bit_length() + right.bit_length() - 1 > _MAX_BITS:
        raise _too_many_digits("the product would have")
    return left * right


def _power(base: Any, exponent: Any) -> Any:
    # digits(base ** exponent) ~ exponent * log10|base|; the bit-length test keeps that float finite
    if (
        _is_int(base)
        and _is_int(exponent)
        and abs(base) > 1
        and exponent > 0
        and (exponent.bit_length() > 64 or exponent * math.log10(abs(base)) > MAX_RESULT_DIGITS)
    ):
        shown = f"{f'({base})' if base < 0 else base} ** {exponent}"  # -2 ** n would read as -(2 ** n)
        raise _too_many_digits(f"{shown if len(shown) <= 40 else 'the power'} would have")
    try:
        return operator.pow(base, exponent)
    except OverflowError:  # "int too large to convert to float", or a float power out of range
        if not (_past_floats(base) or _past_floats(exponent)):
            raise
        return _power_past_floats(base, exponent)


#: Natural logarithms of the largest float and of half the least (a power below it rounds to 0.0), with a margin
#: for the error of computing them.
_LN_OVER = math.log(sys.float_info.max) + 1e-6
_LN_UNDER = -1075 * math.log(2) - 1e-6
_NOT_REAL = "the result is not a real number (a fractional power of a negative number?)"
_NOT_FINITE = (
    "the result is not a finite number (infinity or NaN), which JSON cannot carry; it is {} (a float past about "
    "1.8e308 is inf, as 1e999 is; inf - inf and 0 * inf are nan)"
)


def _past_floats(value: Any) -> bool:
    """Whether ``value`` is an integer too large for a float (about 1.8e308)."""
    if not _is_int(value):
        return False
    try:
        float(value)
    except OverflowError:
        return True
    return False


def _out_of_range() -> OverflowError:
    return OverflowError(34, "Numerical result out of range")  # as Python words a float power past the range


def _power_past_floats(base: Any, exponent: Any) -> Any:
    """``base ** exponent`` where Python failed converting an integer operand past a float's range to a float: the
    result where it is exact (a base of 0, 1 or -1, infinite or NaN; a power that underflows to 0.0; ``n ** -1``),
    ``OverflowError`` where the result overflows, else ``OverflowError`` saying the operand is too large."""
    if _past_floats(exponent):
        odd = exponent % 2 == 1
        if base in (0, 1, -1) or (isinstance(base, float) and not math.isfinite(base)):
            return base ** ((3 if odd else 2) * (1 if exponent > 0 else -1))  # the same sign and parity: the same result
        if (exponent > 0) == (abs(base) > 1):
            raise _out_of_range()
        return -0.0 if base < 0 and odd else 0.0
    # The base is past floats; the exponent is a float or an integer of a float's range.
    if isinstance(exponent, float) and not math.isfinite(exponent):
        return (-2.0 if base < 0 else 2.0) ** exponent  # inf, 0.0 or nan, as for any base past 1 in size
    whole = _is_int(exponent) or exponent.is_integer()
    if base < 0 and not whole:
        raise _Refused(_NOT_REAL)
    if exponent == 0:
        return 1.0
    odd = whole and int(exponent) % 2 == 1
    ln = exponent * math.log(abs(base))
    if ln > _LN_OVER:
        raise _out_of_range()
    if ln < _LN_UNDER:
        return -0.0 if base < 0 and odd else 0.0
    if exponent == -1:
        return 1 / base  # integer true division: correctly rounded
    raise OverflowError("int too large to convert to float")


def _factorial(n: Any) -> int:
    if not _is_int(n) or n < 0:
        raise ValueError("factorial() takes a non-negative integer")
    if n > MAX_FACTORIAL:
        raise _TooBig(
            f"factorial() is limited to n <= {MAX_FACTORIAL} (a larger result has more than {MAX_RESULT_DIGITS} digits)",
            f"n <= {MAX_FACTORIAL}",
        )
    return math.factorial(n)


def _whole(fn: Callable[[Any], int]) -> Callable[[Any], int]:
    """``fn`` (``floor``, ``ceil``, ``round``) refusing an infinite value, which has no integer (Python says it overflows)."""

    def whole(x: Any) -> int:
        if isinstance(x, float) and math.isinf(x):
            raise ValueError(f"{fn.__name__}() of {x}: the value is infinite, not a finite number, so it has no integer value")
        return fn(x)

    return whole


_round_whole = _whole(round)


def _round(number: Any, ndigits: Any = None) -> Any:
    if ndigits is not None and _is_int(ndigits) and abs(ndigits) > MAX_RESULT_DIGITS:
        raise _TooBig(
            f"round() takes ndigits between -{MAX_RESULT_DIGITS} and {MAX_RESULT_DIGITS}, not {ndigits}",
            f"|ndigits| <= {MAX_RESULT_DIGITS}",
        )
    return _round_whole(number) if ndigits is None else round(number, ndigits)


_BINARY[ast.Mult] = _multiply
_BINARY[ast.Pow] = _power

_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs, "round": _round, "min": min, "max": max,
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log10": math.log10, "log2": math.log2,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "atan2": math.atan2, "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh,
    "floor": _whole(math.floor), "ceil": _whole(math.ceil), "hypot": math.hypot, "degrees": math.degrees, "radians": math.radians,
    "factorial": _factorial, "gcd": math.gcd,
}  # fmt: skip


def _checked(value: Any) -> Any:
    """``value`` if it is a real number inside the integer limit."""
    if _is_int(value):
        if not -_INT_BOUND < value < _INT_BOUND:
            raise _too_many_digits("a number in the calculation has")
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, complex):
        raise _Refused(_NOT_REAL)
    raise _Refused(f"the result is not a number but {type(value).__name__}")


def _operands(node: ast.AST) -> list[ast.expr]:
    """The nodes ``node`` is computed from, after checking it is allowed (nothing is computed here)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return []
        raise _Refused(f"only numbers are allowed, not {type(node.value).__name__} {node.value!r}")
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise _Refused(f"the operator {type(node.op).__name__} is not allowed")
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise _Refused(f"the operator {type(node.op).__name__} is not allowed")
        return [node.operand]
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return []
        raise _Refused(f"unknown name {node.id!r}; constants: {', '.join(sorted(_CONSTANTS))}")
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            raise _Refused("attribute access is not allowed")
        if not isinstance(node.func, ast.Name):
            raise _Refused("only direct calls of whitelisted functions are allowed")
        if node.func.id not in _FUNCTIONS:
            raise _Refused(f"the function {node.func.id!r} is not allowed; functions: {', '.join(sorted(_FUNCTIONS))}")
        if node.keywords:
            raise _Refused("keyword arguments are not allowed")
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            raise _Refused("* arguments are not allowed")
        return list(node.args)
    if isinstance(node, ast.Attribute):
        raise _Refused("attribute access is not allowed")
    raise _Refused(f"{type(node).__name__} is not allowed in an arithmetic expression")


def _check(root: ast.expr) -> None:
    """Refuse anything outside the whitelist or nested past :data:`MAX_DEPTH`, before computing."""
    stack: list[tuple[ast.expr, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _TooBig(f"the expression is nested more than {MAX_DEPTH} levels deep", f"<= {MAX_DEPTH} levels")
        children = _operands(node)
        if isinstance(node, ast.BinOp):  # a left-to-right chain (1 + 2 + 3) stays at one level
            stack += [(node.left, depth), (node.right, depth + 1)]
        else:
            stack += [(child, depth + 1) for child in children]
        if isinstance(node, ast.Constant):
            _checked(node.value)


def _apply(node: ast.expr, values: list[Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](*values)
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](*values)
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # _check allowed nothing else
    return _FUNCTIONS[node.func.id](*values)


def _eval(root: ast.expr) -> Any:
    """Post-order evaluation with an explicit stack (no recursion)."""
    values: list[Any] = []
    stack: list[tuple[ast.expr, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        children = _operands(node)
        if not ready:
            stack.append((node, True))
            stack += [(child, False) for child in reversed(children)]
            continue
        arguments = values[len(values) - len(children) :]
        del values[len(values) - len(children) :]
        values.append(_checked(_apply(node, arguments)))
    return values[0]


def _not_text(expression: object) -> ToolArgumentError | None:
    """The refusal of an expression that is not a string, also without the validation plugin (5 failed as a
    ``TypeError``), worded as that plugin words it."""
    return (
        None
        if isinstance(expression, str)
        else ToolArgumentError([ArgumentProblem.mismatch("$.expression", "string", expression)])
    )


def _quiet_tokenizer() -> None:
    """Silence the tokenizer's SyntaxWarnings ("1if", "0x1for") for expressions only: they are the model's text.

    Checked per call, because ``warnings.catch_warnings`` elsewhere may have dropped the filter.
    """
    if _QUIET not in warnings.filters:
        warnings.filterwarnings("ignore", category=SyntaxWarning, module=re.escape(_FILENAME))


def evaluate(expression: str) -> int | float:
    """Evaluate ``expression`` or raise :class:`ToolArgumentError` saying what is not allowed."""
    if (wrong := _not_text(expression)) is not None:
        raise wrong

    def refuse(message: str, keyword: str = "expression", expected: str = "an arithmetic expression") -> ToolArgumentError:
        got = repr(expression[:60]) + ("..." if len(expression) > 60 else "")
        return ToolArgumentError([ArgumentProblem("$.expression", message, keyword, expected, got)])

    def too_deep() -> ToolArgumentError:
        return refuse(f"the expression is nested more than {MAX_DEPTH} levels deep", "limits", f"<= {MAX_DEPTH} levels")

    if len(expression) > MAX_LENGTH:
        raise refuse(
            f"the expression is {len(expression)} characters; the limit is {MAX_LENGTH}", "limits", f"<= {MAX_LENGTH} characters"
        )
    if max(itertools.accumulate(map(_PAREN.get, expression, itertools.repeat(0))), default=0) > MAX_DEPTH:
        raise too_deep()  # parentheses make no tree nodes: counted in the text
    _quiet_tokenizer()
    try:
        tree = ast.parse(expression.strip(), _FILENAME, mode="eval")
    except SyntaxError as exc:
        if "too many nested" in (exc.msg or ""):
            raise too_deep() from None
        where = f" at column {exc.offset}" if exc.offset else ""
        raise refuse(f"not a valid expression: {exc.msg}{where}") from None
    except UnicodeEncodeError as exc:  # a lone surrogate (such as "\ud800") is not text the parser can read
        char = f"U+{ord(exc.object[exc.start]):04X}"
        raise refuse(f"not a valid expression: a lone surrogate ({char}) at column {exc.start + 1}") from None
    except ValueError as exc:  # Python 3.11 reports a null byte so, 3.12 as a SyntaxError
        raise refuse(f"not a valid expression: {exc}") from None
    except (RecursionError, MemoryError):  # the parser's own nesting limits
        raise too_deep() from None
    try:
        _check(tree.body)
        result: int | float = _eval(tree.body)
        if isinstance(result, float) and not math.isfinite(result):
            raise _Refused(_NOT_FINITE.format(result))  # the output schema (JSON) has no inf or NaN: every caller refuses it
    except _TooBig as exc:
        raise refuse(str(exc), "limits", exc.expected) from None
    except _Refused as exc:
        raise refuse(str(exc)) from None
    except ZeroDivisionError:
        raise refuse("division by zero") from None
    except OverflowError as exc:
        if "too large to convert" in str(exc):  # an integer past floats, which the operation converts: not the result
            raise refuse(f"math error: an operand is too large to convert to a float (about 1.8e308): {exc}") from None
        raise refuse(f"math error: the result is out of the range of a float (about 1.8e308): {exc}") from None
    except (ValueError, TypeError) as exc:
        raise refuse(f"math error: {exc}") from None
    return result


class Calculation(TypedDict):
    """What ``calculate`` returns: the expression and its value."""

    expression: str
    result: int | float


_EXAMPLES: list[dict[str, Any]] = [
    {"arguments": {"expression": "2 * (3 + 4) ** 2"}, "result": {"expression": "2 * (3 + 4) ** 2", "result": 98}},
    {
        "description": "compound interest: 100 at 7% for 10 years",
        "arguments": {"expression": "round(100 * 1.07 ** 10, 2)"},
        "result": {"expression": "round(100 * 1.07 ** 10, 2)", "result": 196.72},
    },
    {
        "description": "anything but arithmetic is refused",
        "arguments": {"expression": "__import__('os').system('ls')"},
        "error": "ToolArgumentError",
    },
]


@defineTool(
    registry=None,
    idempotent=True,
    read_only=True,
    open_world=False,
    rate_limit={"rate": 50, "burst": 100},
    tags=["math"],
    examples=_EXAMPLES,
)
def calculate(expression: str) -> Calculation:
    """Evaluate an arithmetic expression, e.g. "2 * (3 + 4) ** 2" or "sqrt(2) * pi".

    Args:
        expression: Numbers, + - * / // % **, parentheses, the constants pi, e, tau, and
            functions such as sqrt, log, sin, cos, round, min, max, factorial.
    """
    return {"expression": expression, "result": evaluate(expression)}
