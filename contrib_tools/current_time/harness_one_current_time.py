"""``current_time``: the current time in an IANA time zone.

An unknown name is refused with suggestions: the zone of that name in other letter case
(``utc``: ``UTC``), the zones a common abbreviation stands for (``PST``: ``America/Los_Angeles``;
every usual meaning of an ambiguous one, ``IST``: Kolkata, Dublin, Jerusalem), the zones whose
last part is the name's (a city: ``Paris`` or ``new york``, ``Asia/Paris``: ``Europe/Paris``),
else close names, compared ignoring case. An abbreviation is never guessed for an abbreviation
(``PST`` is not ``MST``), and an offset is matched by its sign: ``UTC+3`` is ``Etc/GMT-3`` (POSIX
signs), never ``Etc/GMT+3``, and an Etc/GMT name keeps its sign (``Etc/GMT+03``: ``Etc/GMT+3``); an offset
no zone has exactly (``UTC+5:30``, ``Etc/GMT+14``) gets no guess.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any, Literal, TypedDict, get_args
from zoneinfo import ZoneInfo, available_timezones

from harness_one import ArgumentProblem, ToolArgumentError, defineTool

__all__ = ["CurrentTime", "current_time"]

Format = Literal["iso", "rfc2822", "unix", "human"]
_MAX_NAME = 64  # characters of an unknown zone name echoed in the error
#: An offset from UTC: ``UTC+3``, ``GMT-05:00``, or with the POSIX sign of the Etc/GMT names, ``Etc/GMT+14``.
_OFFSET = re.compile(r"(Etc/GMT|UTC|GMT)\s*([+-])\s*(\d{1,2})(?::?(\d\d))?", re.IGNORECASE)
_POSIX_SIGNS = " (an Etc/GMT name has the POSIX sign: Etc/GMT-3 is 3 hours ahead of UTC)"
_ABBREVIATION = 5  # letters at most of a name read as an abbreviation (AKST, NZDT)
_SUGGESTIONS = 3  # zones at most suggested for a name that is no abbreviation
#: Abbreviations that are not zone names (EST, MST, HST, CET, EET, WET, GMT and UTC are) and the zones they stand for.
_ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "PST": ("America/Los_Angeles",),
    "PDT": ("America/Los_Angeles",),
    "PT": ("America/Los_Angeles",),
    "MDT": ("America/Denver",),
    "MT": ("America/Denver",),
    "CST": ("America/Chicago", "Asia/Shanghai", "America/Havana"),
    "CDT": ("America/Chicago", "America/Havana"),
    "CT": ("America/Chicago",),
    "EDT": ("America/New_York",),
    "ET": ("America/New_York",),
    "AKST": ("America/Anchorage",),
    "AKDT": ("America/Anchorage",),
    "AST": ("America/Halifax", "Asia/Riyadh"),
    "ADT": ("America/Halifax",),
    "NST": ("America/St_Johns",),
    "NDT": ("America/St_Johns",),
    "BST": ("Europe/London", "Asia/Dhaka"),
    "IST": ("Asia/Kolkata", "Europe/Dublin", "Asia/Jerusalem"),
    "CEST": ("CET",),
    "EEST": ("EET",),
    "WEST": ("WET",),
    "MSK": ("Europe/Moscow",),
    "JST": ("Asia/Tokyo",),
    "KST": ("Asia/Seoul", "Asia/Pyongyang"),
    "HKT": ("Asia/Hong_Kong",),
    "SGT": ("Asia/Singapore",),
    "AEST": ("Australia/Sydney", "Australia/Brisbane"),
    "AEDT": ("Australia/Sydney",),
    "ACST": ("Australia/Adelaide", "Australia/Darwin"),
    "ACDT": ("Australia/Adelaide",),
    "AWST": ("Australia/Perth",),
    "NZST": ("Pacific/Auckland",),
    "NZDT": ("Pacific/Auckland",),
    "SAST": ("Africa/Johannesburg",),
}


def _utcnow() -> datetime:
    return datetime.now(UTC)


@functools.lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    # Not zones: "localtime" is this machine's setting (which it would tell), "Factory" a placeholder.
    return (frozenset(available_timezones()) - {"localtime", "Factory", "posixrules"}) | {"UTC"}


@functools.lru_cache(maxsize=1)
def _by_folded_name() -> dict[str, str]:
    """Every zone under its name in lower case (IANA names differ in more than case)."""
    return {zone.casefold(): zone for zone in sorted(_zones())}


def _place(name: str) -> str:
    """The last part of a zone name, the city (``Europe/Paris``: ``paris``), folded, a space read as ``_``."""
    return name.rsplit("/", 1)[-1].casefold().replace(" ", "_")


@functools.lru_cache(maxsize=1)
def _by_place() -> dict[str, list[str]]:
    """Every zone under the last part of its name (:func:`_place`): ``paris``: ``Europe/Paris``."""
    places: dict[str, list[str]] = {}
    for zone in sorted(_zones()):
        places.setdefault(_place(zone), []).append(zone)
    return places


def _abbreviated(name: str) -> bool:
    return name.isalpha() and len(name) <= _ABBREVIATION


@functools.lru_cache(maxsize=1)
def _spelled_out() -> list[str]:
    """The folded names that are not abbreviations: the close names offered for an abbreviation."""
    return [name for name in _by_folded_name() if not _abbreviated(name)]


def _suggestions(name: str) -> list[str]:
    """Zones ``name`` may have meant (none for a name longer than any zone's: difflib is quadratic, and
    a name past what is echoed gets no guess from any of its checks)."""
    if len(name) > _MAX_NAME:
        return []
    folded = name.casefold()
    if folded in _by_folded_name():
        return [_by_folded_name()[folded]]
    if name.upper() in _ABBREVIATIONS:
        return list(_ABBREVIATIONS[name.upper()])
    if (offset := _OFFSET.fullmatch(name.strip())) is not None:
        prefix, sign, hours, minutes = offset.groups()
        posix = sign if prefix.casefold() == "etc/gmt" else "-" if sign == "+" else "+"
        zone = "UTC" if int(hours) == 0 else f"Etc/GMT{posix}{int(hours)}"
        return [zone] if zone in _zones() and int(minutes or 0) == 0 else []
    if (zones := _by_place().get(_place(name))) is not None:
        return zones[:_SUGGESTIONS]
    candidates = _spelled_out() if _abbreviated(name) else list(_by_folded_name())
    return [_by_folded_name()[match] for match in difflib.get_close_matches(folded, candidates, n=_SUGGESTIONS)]


def _type_problems(timezone: object, format: object) -> list[ArgumentProblem]:
    """The arguments' types checked as the schema states them, also without the validation plugin (``timezone``
    ["UTC"] failed as a ``TypeError``; ``format`` "bogus" gave the "human" format), worded as that plugin words them."""
    problems = [] if isinstance(timezone, str) else [ArgumentProblem.mismatch("$.timezone", "string", timezone)]
    if format not in get_args(Format):
        problems.append(ArgumentProblem.mismatch("$.format", f"one of {json.dumps(get_args(Format))}", format, "enum"))
    return problems


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
    options={"cache": False},  # the answer changes every second: never from the cache plugin
)
def current_time(timezone: str = "UTC", format: Format = "iso") -> CurrentTime:
    """Get the current date and time in a time zone.

    Args:
        timezone: An IANA time zone name, such as "Europe/Moscow" or "America/New_York".
        format: "iso" (ISO 8601), "rfc2822", "unix" (seconds since the epoch) or "human".
    """
    if problems := _type_problems(timezone, format):
        raise ToolArgumentError(problems)
    if timezone not in _zones():
        close = _suggestions(timezone)
        hint = f"; did you mean {', '.join(close)}?" if close else "; use an IANA name such as 'Europe/Berlin'"
        if close and close[0].startswith("Etc/GMT"):
            hint += _POSIX_SIGNS
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
