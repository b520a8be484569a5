"""Private helper of the standard plugins: options checked when the plugin is built.

A wrong option is a ``ValueError`` naming it, so the plugin fails to load (reported by
``harness-one doctor``), rather than every call failing later with an internal error.
"""

from __future__ import annotations

from typing import Any, Literal, overload

__all__ = ["count", "flag", "seconds"]


@overload
def seconds(value: Any, what: str, *, zero: bool = ..., optional: Literal[False] = ...) -> float: ...
@overload
def seconds(value: Any, what: str, *, zero: bool = ..., optional: Literal[True]) -> float | None: ...
def seconds(value: Any, what: str, *, zero: bool = False, optional: bool = False) -> float | None:
    """``value`` as a number of seconds: positive (or, with ``zero``, non-negative); None if ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0 if zero else value > 0):
        kind = "non-negative" if zero else "positive"
        raise ValueError(f"{what} must be a {kind} number of seconds{' or None' if optional else ''}, not {value!r}")
    return float(value)


@overload
def count(value: Any, what: str, *, optional: Literal[False] = ...) -> int: ...
@overload
def count(value: Any, what: str, *, optional: Literal[True]) -> int | None: ...
def count(value: Any, what: str, *, optional: bool = False) -> int | None:
    """``value`` as a positive integer; None if ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer{' or None' if optional else ''}, not {value!r}")
    return value


@overload
def flag(value: Any, what: str, *, optional: Literal[False] = ...) -> bool: ...
@overload
def flag(value: Any, what: str, *, optional: Literal[True]) -> bool | None: ...
def flag(value: Any, what: str, *, optional: bool = False) -> bool | None:
    """``value`` as true or false (not a string: ``"false"`` would read as true); None if ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false{' or None' if optional else ''}, not {value!r}")
    return value
