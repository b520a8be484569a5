"""``random_number``: a random integer or float in a range.

A float draw stays within ``[min, max]``: an integer bound no float equals (past 2**53) is
rounded inward to the nearest float inside the range, the draw is clamped to those floats
(``uniform`` may round past its end), and a range that holds no float is refused.
"""

from __future__ import annotations

import json
import math
import random
import sys
from typing import Any, Literal, TypedDict, get_args

from harness_one import ArgumentProblem, ToolArgumentError, defineTool

__all__ = ["Draw", "random_number"]


Kind = Literal["integer", "float"]


class Draw(TypedDict):
    """What ``random_number`` returns: the value drawn, and the range and kind it was drawn from."""

    value: float
    min: float
    max: float
    kind: Kind


_EXAMPLES: list[dict[str, Any]] = [
    {"description": "a die roll", "arguments": {"min": 1, "max": 6}},
    {
        "description": "reproducible with a seed",
        "arguments": {"min": 1, "max": 6, "seed": 42},
        "result": {"value": 6, "min": 1, "max": 6, "kind": "integer"},
    },
    {"arguments": {"min": 0, "max": 1, "kind": "float"}},
    {"description": "an empty range is refused", "arguments": {"min": 10, "max": 1}, "error": "ToolArgumentError"},
]


def _type_problems(low: object, high: object, kind: object, seed: object) -> list[ArgumentProblem]:
    """The arguments' types checked as the schema states them, also without the validation plugin (``min`` "1" failed
    as a ``TypeError``; ``kind`` "bogus" drew a float labelled "bogus"), worded as that plugin words them: a NaN or an
    infinity too (``expected a finite number, got NaN``), each bound told."""
    problems: list[ArgumentProblem] = []
    for field, bound in (("min", low), ("max", high)):
        if isinstance(bound, bool) or not isinstance(bound, (int, float)):
            problems.append(ArgumentProblem.mismatch(f"$.{field}", "number", bound))
        elif isinstance(bound, float) and not math.isfinite(bound):
            problems.append(ArgumentProblem.mismatch(f"$.{field}", "a finite number", bound))
    if kind not in get_args(Kind):
        problems.append(ArgumentProblem.mismatch("$.kind", f"one of {json.dumps(get_args(Kind))}", kind, "enum"))
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        problems.append(ArgumentProblem.mismatch("$.seed", "integer or null", seed))
    return problems


_SHOWN_DIGITS = 30  # a bound past this many digits is told by its digit count


def _digits(value: int) -> int:
    """How many decimal digits ``value`` has, told without ``str`` (which refuses past 4,300 digits)."""
    n = max(1, int(abs(value).bit_length() * 0.30103))  # log10(2): within one of the count
    while 10**n <= abs(value):
        n += 1
    while n > 1 and 10 ** (n - 1) > abs(value):
        n -= 1
    return n


def _shown(bound: float) -> str:
    """``bound`` as a refusal shows it: an integer past :data:`_SHOWN_DIGITS` digits (a JSON integer has any size) as
    its digit count, as ``str`` refuses one past 4,300 digits."""
    if type(bound) is int and (digits := _digits(bound)) > _SHOWN_DIGITS:
        return f"{'a negative' if bound < 0 else 'an'} integer of {digits:,} digits"
    return str(bound)


def _inward(low: float, high: float) -> tuple[float, float]:
    """The floats nearest ``low`` and ``high`` inside ``[low, high]`` (an integer past 2**53 may fall between floats)."""
    first, last = float(low), float(high)
    if first < low:
        first = math.nextafter(first, math.inf)
    if last > high:
        last = math.nextafter(last, -math.inf)
    if first > last:
        raise ToolArgumentError(
            [
                ArgumentProblem(
                    "$",
                    f"no float lies between {low} and {high}",
                    "range",
                    "a range containing a float (or kind 'integer')",
                    f"[{low}, {high}]",
                )
            ]
        )
    return first, last


@defineTool(
    registry=None,
    destructive=False,
    open_world=False,
    rate_limit={"rate": 5, "burst": 5},
    tags=["math"],
    examples=_EXAMPLES,
    options={"cache": False},  # a new draw each call: never from the cache plugin
)
def random_number(
    min: float = 0,
    max: float = 100,
    kind: Kind = "integer",
    seed: int | None = None,
) -> Draw:
    """Draw a random number between min and max (both included).

    Args:
        min: The smallest possible value.
        max: The largest possible value.
        kind: "integer" or "float".
        seed: Make the draw reproducible.
    """
    if problems := _type_problems(min, max, kind, seed):
        raise ToolArgumentError(problems)
    for field, bound in (("min", min), ("max", max)):
        if kind != "integer" and type(bound) is int and abs(bound) > sys.float_info.max:  # a JSON integer: any size
            raise ToolArgumentError(
                [
                    ArgumentProblem(
                        f"$.{field}",
                        f"{field} is too large for a float draw",
                        "range",
                        "a number a float can hold",
                        f"an integer of {bound.bit_length()} bits",
                    )
                ]
            )
    if min > max:
        raise ToolArgumentError(
            [
                ArgumentProblem(
                    "$.min", f"min ({_shown(min)}) is greater than max ({_shown(max)})", "range", f"<= {_shown(max)}", _shown(min)
                )
            ]
        )
    rng = random.Random(seed)
    if kind == "integer":
        low, high = math.ceil(min), math.floor(max)
        if low > high:
            raise ToolArgumentError(
                [
                    ArgumentProblem(
                        "$",
                        f"no integer lies between {min} and {max}",
                        "range",
                        "a range containing an integer",
                        f"[{min}, {max}]",
                    )
                ]
            )
        value: float = rng.randint(low, high)
    else:
        first, last = _inward(min, max)
        value = rng.uniform(first, last)
        if math.isinf(value):  # max - min overflowed (min=-1e308, max=1e308): weigh the ends instead
            share = rng.random()
            value = first * (1 - share) + last * share
        value = first if value < first else last if value > last else value  # uniform() may round past an end
    return {"value": value, "min": min, "max": max, "kind": kind}
