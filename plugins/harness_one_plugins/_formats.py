"""Private helpers of the validation plugin: strict format checkers and the pattern dialect.

Formats: jsonschema's own checkers are lenient in places (leap seconds, e-mail local parts,
IDNA A-labels); these follow RFC 3339, RFC 5321, RFC 1123/5890 and RFC 4122 as the JSON
Schema Test Suite reads them. Formats not listed keep jsonschema's checkers. jsonschema-rs
checks date, date-time, time, uri, uuid, ipv4 and ipv6 natively, as these do; it is given
the Python checker for every other format, so both backends give the same verdicts.

Patterns: JSON Schema patterns are ECMA-262 regular expressions. jsonschema-rs implements
them; :func:`python_pattern` rewrites one for the ``regex`` module so that the pure-Python
backend matches the same strings (``\\d``, ``\\w``, ``\\s`` and their negations as
:func:`harness_one.ecma_classes` writes them, ``.``, ``$``, ``\\cX``, ``\\u{...}``, ``[``
inside a class). Matching runs with a time limit.
"""

from __future__ import annotations

import calendar
import ipaddress
import re
from typing import Any

import idna

from harness_one import ecma_classes

__all__ = ["STRICT_FORMATS", "explained", "python_pattern", "strict_format_checker"]

_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})", re.ASCII)
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))", re.ASCII)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", re.ASCII)
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOT_STRING = re.compile(rf"{_ATOM}(?:\.{_ATOM})*", re.ASCII)
_QUOTED = re.compile(r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"', re.ASCII)
# The common case at C speed (jsonschema-rs calls these for every address and host name): LDH
# labels with no "--" after their first two characters (so no A-label to decode).
_PLAIN_LABEL = r"(?![A-Za-z0-9-]{2}--)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PLAIN_HOSTNAME = rf"{_PLAIN_LABEL}(?:\.{_PLAIN_LABEL})*"
_PLAIN_HOST = re.compile(_PLAIN_HOSTNAME, re.ASCII)
_PLAIN_EMAIL = re.compile(rf"({_ATOM}(?:\.{_ATOM})*)@({_PLAIN_HOSTNAME})", re.ASCII)


def is_date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    m = _DATE.fullmatch(value)
    if not m:
        return False
    year, month, day = map(int, m.groups())
    return 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]


def is_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    m = _TIME.fullmatch(value)
    if not m:
        return False
    hour, minute, second = int(m[1]), int(m[2]), int(m[3])
    if hour > 23 or minute > 59 or second > 60:
        return False
    off_h, off_m = (0, 0) if m[4] else (int(m[6]), int(m[7]))
    if off_h > 23 or off_m > 59:
        return False
    if second == 60:  # a leap second is 23:59:60 in UTC
        sign = 0 if m[4] else (1 if m[5] == "+" else -1)
        utc = (hour * 60 + minute - sign * (off_h * 60 + off_m)) % (24 * 60)
        return utc == 23 * 60 + 59
    return True


def is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if len(value) < 11 or value[10] not in "Tt":
        return False
    return is_date(value[:10]) and is_time(value[11:])


def is_uuid(value: object) -> bool:
    return not isinstance(value, str) or _UUID.fullmatch(value) is not None


def is_hostname(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if len(value) <= 253 and _PLAIN_HOST.fullmatch(value):
        return True
    if not value or len(value) > 253 or not value.isascii():
        return False
    for label in value.split("."):
        if not _LABEL.fullmatch(label):
            return False
        if label[2:4] == "--":
            if label[:4].lower() != "xn--":
                return False
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError, ValueError):
                return False
    return True


def is_ipv4(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return value.isascii()


def is_ipv6(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not value.isascii() or "%" in value:
        return False
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def is_email(value: object) -> bool:
    if not isinstance(value, str):
        return True
    plain = _PLAIN_EMAIL.fullmatch(value)
    if plain and len(plain[1]) <= 64 and len(plain[2]) <= 253:
        return True
    local, at, domain = value.rpartition("@")
    if not at or not local or not domain or len(local) > 64:  # RFC 5321: a local part of 64 octets at most
        return False
    if not (_DOT_STRING.fullmatch(local) or _QUOTED.fullmatch(local)):
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        if literal.lower().startswith("ipv6:"):
            return is_ipv6(literal[5:])
        return is_ipv4(literal)
    return is_hostname(domain)


_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def _uri_checker(base: Any) -> Any:
    inner = base.checkers["uri"][0] if "uri" in base.checkers else None

    def is_uri(value: object) -> bool:
        if not isinstance(value, str):
            return True
        if _SPACE_OR_CONTROL.search(value) or (inner is not None and not inner(value)):
            return False  # (the checker's pattern, ending in $, let a final newline through)
        host = value.partition("://")[2].split("/", 1)[0].rpartition("@")[2]
        if host.startswith("["):  # an IP literal: IPv6 (embedded IPv4 included) or IPvFuture
            literal = host[1:].partition("]")[0]
            return literal[:1] in ("v", "V") or is_ipv6(literal)
        return True

    return is_uri


STRICT_FORMATS = {
    "date": is_date,
    "time": is_time,
    "date-time": is_date_time,
    "uuid": is_uuid,
    "hostname": is_hostname,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "email": is_email,
}


def strict_format_checker(base: Any) -> Any:
    """``base`` (a draft's ``FormatChecker``) with the strict checkers above in place of its own."""
    from jsonschema import FormatChecker

    checker = FormatChecker()
    checker.checkers = dict(base.checkers)
    for name, func in {**STRICT_FORMATS, "uri": _uri_checker(base)}.items():
        checker.checkers[name] = (func, ())
    return checker


# ---------------------------------------------------------------------------- what a refusal says

#: What a format asks for, where its name alone does not say it (RFC 3339 requires seconds and a UTC offset).
_SHAPES = {
    "date-time": "RFC 3339, with seconds and a UTC offset: 2024-01-31T09:30:00Z or 2024-01-31T09:30:00+02:00",
    "date": "YYYY-MM-DD, such as 2024-01-31",
    "time": "RFC 3339, with seconds and a UTC offset: 09:30:00Z or 09:30:00+02:00",
}
_TIME_PARTS = re.compile(r"\d{2}:\d{2}(:\d{2}(?:\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?", re.ASCII)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:", re.ASCII)
_NO_DATE = "there is no such date"
# what RFC 3339 requires of a time: a name for it, and its form
_SECONDS, _OFFSET, _TIME_OF_DAY = ("the seconds", "hh:mm:ss"), ("the UTC offset", "Z or +hh:mm"), ("the time", "T09:30:00")


def _time_faults(value: str) -> list[str]:
    """What an RFC 3339 time lacks (its seconds, its UTC offset), or that a part of it is out of range."""
    parts = _TIME_PARTS.fullmatch(value)
    if parts is None:
        return []
    missing = [part for part, found in ((_SECONDS, parts[1]), (_OFFSET, parts[2])) if found is None]
    if missing:
        return [_missing(*missing)]
    return [] if is_time(value) else ["an hour, minute, second or offset is out of range"]


def _missing(*parts: tuple[str, str]) -> str:
    """That ``parts`` (name, form) RFC 3339 requires are missing: ``the UTC offset RFC 3339 requires is missing (Z or +hh:mm)``."""
    names, forms = " and ".join(name for name, _ in parts), ", then ".join(form for _, form in parts)
    return f"{names} RFC 3339 requires {'is' if parts == (_OFFSET,) else 'are'} missing ({forms})"


def _date_faults(value: str) -> list[str]:
    return [_NO_DATE] if _DATE.fullmatch(value) and not is_date(value) else []


def _date_time_faults(value: str) -> list[str]:
    date, joint, time = value[:10], value[10:11], value[11:]
    if not _DATE.fullmatch(date):
        return []
    if not is_date(date):
        return [_NO_DATE]
    if not joint:
        return [_missing(_TIME_OF_DAY, _OFFSET)]
    if joint not in "Tt":
        return ["the date and the time are joined by T, not a space", *_time_faults(time)] if joint == " " else []
    return _time_faults(time)


def _uri_faults(value: str) -> list[str]:
    faults = [] if _SCHEME.match(value) else ["the scheme (such as https:) is missing"]
    if _SPACE_OR_CONTROL.search(value):
        faults.append("spaces and control characters are percent-encoded (a space as %20)")
    return faults


_FAULTS = {"date-time": _date_time_faults, "date": _date_faults, "time": _time_faults, "uri": _uri_faults}


def explained(name: Any, value: Any, shown: str) -> str:
    """The refusal of ``value`` (shown as ``shown``) by the format ``name``: what ``value`` lacks, where that can
    be told (``the UTC offset ... is missing``), else what the format asks for, where its name does not say it."""
    known = isinstance(name, str)
    faults = _FAULTS[name](value) if known and name in _FAULTS and isinstance(value, str) else []
    shape = None if faults or not known else _SHAPES.get(name)
    text = f"expected a valid {name}, got {shown}"
    return text + (": " + "; ".join(faults) if faults else f" ({shape})" if shape else "")


# ---------------------------------------------------------------------------- patterns

_DOT = "[^\\n\\r\\u2028\\u2029]"
_MULTILINE = re.compile(r"\(\?[a-zA-Z]*m[a-zA-Z]*[:)]")
_HEX = frozenset("0123456789abcdefABCDEF")


def python_pattern(pattern: str) -> str:
    """``pattern`` (ECMA-262, as jsonschema-rs reads it) rewritten for the ``regex`` module, from the form
    :func:`~harness_one.ecma_classes` writes it in: no ``\\d``, ``\\w``, ``\\s`` left to read as Unicode classes."""
    pattern = ecma_classes(pattern)
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    multiline = _MULTILINE.search(pattern) is not None
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "c" and i + 2 < n and pattern[i + 2].isascii() and pattern[i + 2].isalpha():
                out.append(f"\\x{ord(pattern[i + 2]) % 32:02x}")
                i += 3
                continue
            if e in "pPux" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                if end > 0 and e in "pP":
                    out.append(pattern[i : end + 1])
                    i = end + 1
                    continue
                digits = pattern[i + 3 : end] if end > 0 else ""
                if digits and set(digits) <= _HEX and len(digits) <= 6 and int(digits, 16) <= 0x10FFFF:
                    out.append(f"\\U{int(digits, 16):08x}")
                    i = end + 1
                    continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append("\\[" if c == "[" else c)
        elif c == "[":
            in_class = True
            out.append(c)
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
        elif c == ".":
            out.append(_DOT)
        elif c == "$" and not multiline:
            out.append("\\Z")
        else:
            out.append(c)
        i += 1
    return "".join(out)
