"""``calculate``: arithmetic on a whitelist of operators and math functions, without ``eval``.

The expression is parsed with :mod:`ast` and only numbers, ``+ - * / // % **``, unary signs,
parentheses, a few constants and whitelisted functions are evaluated. Size limits keep it
cheap: the expression length, the exponent of ``**`` and the size of every intermediate
result are bounded, so ``9**9**9`` is refused at once instead of hanging the CPU.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from harness_one import ArgumentProblem, ToolArgumentError, defineTool

__all__ = ["MAX_LENGTH", "MAX_RESULT_DIGITS", "calculate", "evaluate"]

MAX_LENGTH = 1000
MAX_RESULT_DIGITS = 1000  # integers beyond this many digits are refused
MAX_FACTORIAL = 500

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf}


def _factorial(n: Any) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError("factorial() takes a non-negative integer")
    if n > MAX_FACTORIAL:
        raise ValueError(f"factorial() is limited to n <= {MAX_FACTORIAL}")
    return math.factorial(n)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs, "round": round, "min": min, "max": max,
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log10": math.log10, "log2": math.log2,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "atan2": math.atan2, "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh,
    "floor": math.floor, "ceil": math.ceil, "hypot": math.hypot, "degrees": math.degrees, "radians": math.radians,
    "factorial": _factorial, "gcd": math.gcd,
}  # fmt: skip


class _Refused(Exception):
    """An expression outside the whitelist or the limits; the message says which."""


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_RESULT_DIGITS * 3.33:
        raise _Refused(f"an intermediate result has more than {MAX_RESULT_DIGITS} digits")
    return value


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, int) and isinstance(base, int) and abs(base) > 1:
        if exponent > 0 and exponent * math.log10(abs(base)) > MAX_RESULT_DIGITS:
            raise _Refused(f"{base} ** {exponent} would have more than {MAX_RESULT_DIGITS} digits")
    elif isinstance(exponent, (int, float)) and abs(exponent) > 10_000 and isinstance(base, (int, float)) and abs(base) != 1:
        raise _Refused(f"the exponent {exponent} is too large")
    return operator.pow(base, exponent)


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        raise _Refused(f"only numbers are allowed, not {type(node.value).__name__} {node.value!r}")
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_power(left, right))
        op = _BINARY.get(type(node.op))
        if op is None:
            raise _Refused(f"the operator {type(node.op).__name__} is not allowed")
        return _check_size(op(left, right))
    if isinstance(node, ast.UnaryOp):
        unary = _UNARY.get(type(node.op))
        if unary is None:
            raise _Refused(f"the operator {type(node.op).__name__} is not allowed")
        return unary(_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise _Refused(f"unknown name {node.id!r}; constants: {', '.join(sorted(_CONSTANTS))}")
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            raise _Refused("attribute access is not allowed")
        if not isinstance(node.func, ast.Name):
            raise _Refused("only direct calls of whitelisted functions are allowed")
        func = _FUNCTIONS.get(node.func.id)
        if func is None:
            raise _Refused(f"the function {node.func.id!r} is not allowed; functions: {', '.join(sorted(_FUNCTIONS))}")
        if node.keywords:
            raise _Refused("keyword arguments are not allowed")
        return _check_size(func(*(_eval(arg) for arg in node.args)))
    if isinstance(node, ast.Attribute):
        raise _Refused("attribute access is not allowed")
    raise _Refused(f"{type(node).__name__} is not allowed in an arithmetic expression")


def evaluate(expression: str) -> int | float:
    """Evaluate ``expression`` or raise :class:`ToolArgumentError` saying what is not allowed."""

    def refuse(message: str, got: str | None = None) -> ToolArgumentError:
        return ToolArgumentError([ArgumentProblem("$.expression", message, "expression", "an arithmetic expression", got)])

    if len(expression) > MAX_LENGTH:
        raise refuse(f"the expression is {len(expression)} characters; the limit is {MAX_LENGTH}")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise refuse(f"not a valid expression: {exc.msg} at column {exc.offset}", repr(expression[:60])) from None
    try:
        result: int | float = _eval(tree)
    except _Refused as exc:
        raise refuse(str(exc), repr(expression[:60])) from None
    except ZeroDivisionError:
        raise refuse("division by zero", repr(expression[:60])) from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise refuse(f"math error: {exc}", repr(expression[:60])) from None
    return result


@defineTool(
    registry=None, idempotent=True, read_only=True, open_world=False, rate_limit={"rate": 50, "burst": 100}, tags=["math"]
)
def calculate(expression: str) -> dict[str, Any]:
    """Evaluate an arithmetic expression, e.g. "2 * (3 + 4) ** 2" or "sqrt(2) * pi".

    Args:
        expression: Numbers, + - * / // % **, parentheses, the constants pi, e, tau, and
            functions such as sqrt, log, sin, cos, round, min, max, factorial.
    """
    return {"expression": expression, "result": evaluate(expression)}
