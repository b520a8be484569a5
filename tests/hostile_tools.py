"""Tools for the hostile-input tests: they echo what they get and return awkward values.

Loaded with ``harness-one --tools tests/hostile_tools.py``.
"""

from __future__ import annotations

from typing import Any

from harness_one import defineTool


@defineTool(registry=None)
def echo(text: str = "", count: int = 0) -> dict[str, Any]:
    """Return what it was given.

    Args:
        text: Any text.
        count: Any integer.
    """
    return {"text": text, "count": count}


@defineTool(registry=None)
def awkward(kind: str) -> Any:
    """Return a value that is hard to write as JSON.

    Args:
        kind: One of surrogate, nan, inf, bytes, set, object, huge.
    """
    values: dict[str, Any] = {
        "surrogate": "a\ud800b",
        "nan": float("nan"),
        "inf": float("inf"),
        "bytes": b"\xff\x00",
        "set": {3, 1, 2},
        "object": object(),
        "huge": 10**5000,
    }
    return values[kind]


@defineTool(registry=None)
def explode(message: str = "boom") -> str:
    """Raise an exception.

    Args:
        message: The exception's message.
    """
    raise RuntimeError(message)
