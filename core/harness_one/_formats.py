"""The provider formats, listed once: what ``export``, ``dispatch`` and the CLI accept."""

from __future__ import annotations

__all__ = ["CALL_FORMATS", "FORMATS", "check_format"]

#: Tool-definition formats (:mod:`harness_one.export`).
FORMATS = ("openai", "openai-responses", "anthropic", "gemini", "mcp")
#: Formats whose tool calls come back to be answered (:mod:`harness_one.dispatch`, ``harness-one run``).
CALL_FORMATS = ("openai", "openai-responses", "anthropic", "gemini")


def check_format(name: str, *, calls: bool = False) -> str:
    """``name`` if it is a known format (of calls, with ``calls=True``); else ``ValueError`` listing them."""
    known = CALL_FORMATS if calls else FORMATS
    if name not in known:
        raise ValueError(f"unknown {'provider' if calls else 'export format'} {name!r}; known: {', '.join(known)}")
    return name
