"""``current_time``: the current time in an IANA time zone."""

from __future__ import annotations

import difflib
import functools
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import Any, Literal, TypedDict
from zoneinfo import ZoneInfo, available_timezones

from harness_one import ArgumentProblem, ToolArgumentError, defineTool

__all__ = ["CurrentTime", "current_time"]

Format = Literal["iso", "rfc2822", "unix", "human"]
_MAX_NAME = 64  # characters of an unknown zone name echoed in the error


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@functools.lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    # Not zones: "localtime" is this machine's setting (which it would tell), "Factory" a placeholder.
    return (frozenset(available_timezones()) - {"localtime", "Factory", "posixrules"}) | {"UTC"}


class CurrentTime(TypedDict):
    """What ``current_time`` returns: the zone, the time in the chosen format, and the zone's offset from UTC."""

    timezone: str
    time: str | float
    utc_offset: str


_EXAMPLES: list[dict[str, Any]] = [
    {"arguments": {}},
    {"arguments": {"timezone": "Asia/Tokyo", "format": "human"}},
    {"description": "seconds since the epoch", "arguments": {"timezone": "America/New_York", "format": "unix"}},
    {
        "description": "an unknown zone is refused with suggestions",
        "arguments": {"timezone": "Europe/Berlinn"},
        "error": "ToolArgumentError",
    },
]


@defineTool(
    registry=None,
    read_only=True,
    open_world=False,
    rate_limit={"rate": 20, "burst": 40},
    tags=["time"],
    examples=_EXAMPLES,
)
def current_time(timezone: str = "UTC", format: Format = "iso") -> CurrentTime:
    """Get the current date and time in a time zone.

    Args:
        timezone: An IANA time zone name, such as "Europe/Moscow" or "America/New_York".
        format: "iso" (ISO 8601), "rfc2822", "unix" (seconds since the epoch) or "human".
    """
    if timezone not in _zones():
        # no IANA name is longer than about 30 characters: a longer one gets no suggestion (difflib is quadratic)
        close = difflib.get_close_matches(timezone, sorted(_zones()), n=3) if len(timezone) <= _MAX_NAME else []
        hint = f"; did you mean {', '.join(close)}?" if close else "; use an IANA name such as 'Europe/Berlin'"
        shown = repr(timezone) if len(timezone) <= _MAX_NAME else f"{timezone[:_MAX_NAME]!r}... ({len(timezone)} characters)"
        raise ToolArgumentError(
            [ArgumentProblem("$.timezone", f"unknown time zone {shown}{hint}", "enum", "an IANA time zone name", shown)]
        )
    now = _utcnow().astimezone(ZoneInfo(timezone))
    rendered: str | float
    if format == "iso":
        rendered = now.isoformat(timespec="seconds")
    elif format == "rfc2822":
        rendered = format_datetime(now)
    elif format == "unix":
        rendered = round(now.timestamp(), 3)
    else:
        rendered = now.strftime("%A, %d %B %Y, %H:%M:%S %Z")
    offset = now.utcoffset()
    return {
        "timezone": timezone,
        "time": rendered,
        "utc_offset": now.strftime("%z")[:3] + ":" + now.strftime("%z")[3:] if offset is not None else "+00:00",
    }
