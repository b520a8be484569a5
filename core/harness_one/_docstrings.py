"""Read a summary and per-parameter descriptions from Google, NumPy and reST docstrings."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

_GOOGLE_HEADERS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_GOOGLE_OTHER = {
    "returns",
    "return",
    "yields",
    "raises",
    "examples",
    "example",
    "notes",
    "note",
    "see also",
    "attributes",
    "warnings",
    "warning",
    "todo",
    "references",
}
_GOOGLE_SECTIONS = _GOOGLE_HEADERS | _GOOGLE_OTHER
_NUMPY_PARAMS = {"parameters", "other parameters", "args", "arguments", "keyword args", "keyword arguments"}
#: The section names (numpydoc's, and napoleon's singular forms) a dash-underlined NumPy header may
#: have; any other line above dashes is text (a markdown rule).
_NUMPY_HEADERS = _NUMPY_PARAMS | {
    "returns",
    "return",
    "yields",
    "yield",
    "receives",
    "receive",
    "raises",
    "raise",
    "warns",
    "warn",
    "warnings",
    "warning",
    "see also",
    "notes",
    "note",
    "references",
    "examples",
    "example",
    "attributes",
    "methods",
}
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
#: ``:param x: text``, and Sphinx's other names for it (``:parameter``, ``:arg``, ``:argument``, ``:key``, ``:keyword``).
_REST_PARAM = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?(\*{0,2}\w+)\s*:\s*(.*)$")
#: A field list item (``:returns: text``, ``:type x: int``), not a role starting a line of text
#: (``:class:`Path` objects are ...``): the name and its arguments end in a colon and a space.
_REST_FIELD = re.compile(r"^:\w+(?:\s[^:`]*)?:(?:\s|$)")
#: ``name (type): text``; the type may hold one level of brackets (``size (tuple(int, int)):``).
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(?:\(((?:[^()]|\([^()]*\))*)\))?\s*:\s*(.*)$")
_NUMPY_ITEM = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::\s*(.*))?$")  # "a, b : int" is two


@dataclass
class Docstring:
    """What a docstring says: the text before any section, and one text per parameter."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Docstring:
    """Parse ``doc`` in whichever of the three common styles it uses."""
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    result = Docstring()
    body: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        header = stripped.rstrip(":").lower()
        # NumPy: a known section name underlined with dashes.
        if _numpy_header(lines, i):
            i = _numpy_section(lines, i + 2, header, result)
            continue
        # Google: "Args:" followed by indented items.
        if stripped.endswith(":") and header in _GOOGLE_SECTIONS:
            i = _google_section(lines, i + 1, header in _GOOGLE_HEADERS, result)
            continue
        # reST: ":param x: text" fields (other fields end the description too).
        if _is_field(stripped):
            i = _rest_field(lines, i, result)
            continue
        if not result.params:
            body.append(line)
        i += 1
    result.description = "\n".join(body).strip()
    return result


def _numpy_header(lines: list[str], i: int) -> bool:
    """Whether ``lines[i]`` is a NumPy section header: a known section name, then a line of dashes."""
    return (
        i + 1 < len(lines)
        and lines[i].strip().rstrip(":").lower() in _NUMPY_HEADERS
        and _NUMPY_RULE.match(lines[i + 1]) is not None
    )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _flush_item(line: str) -> bool:
    """Whether an unindented ``line`` is a Google item (``name: text``) rather than a section header."""
    match = _GOOGLE_ITEM.match(line)
    return match is not None and match.group(1).lower() not in _GOOGLE_SECTIONS


def _google_section(lines: list[str], i: int, is_params: bool, out: Docstring) -> int:
    """Items indented under the header; or, when the line right after it is an unindented item,
    unindented items (each continued by indented lines) up to a blank line or other text."""
    flush = i < len(lines) and _indent(lines[i]) == 0 and _flush_item(lines[i])
    base: int | None = None
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            if flush:
                break
            i += 1
            continue
        indent = _indent(line)
        if indent == 0 and not (flush and _flush_item(line)):
            break
        if base is None:
            base = indent
        match = _GOOGLE_ITEM.match(line.strip()) if indent == base else None
        if match and is_params:
            current = match.group(1).lstrip("*")
            out.params[current] = match.group(3).strip()
        elif current is not None and is_params and indent > base:
            out.params[current] = (out.params[current] + " " + line.strip()).strip()
        i += 1
    return i


def _numpy_section(lines: list[str], i: int, header: str, out: Docstring) -> int:
    is_params = header in _NUMPY_PARAMS
    current: list[str] = []
    while i < len(lines):
        line = lines[i]
        if _numpy_header(lines, i):
            break
        if not line.strip():
            i += 1
            continue
        if _indent(line) == 0:
            match = _NUMPY_ITEM.match(line.strip())
            current = [name.strip().lstrip("*") for name in match.group(1).split(",")] if match else []
            if is_params:
                for name in current:
                    out.params[name] = ""
        elif is_params:
            for name in current:
                out.params[name] = (out.params[name] + " " + line.strip()).strip()
        i += 1
    return i


def _is_field(line: str) -> bool:
    return _REST_FIELD.match(line) is not None or _REST_PARAM.match(line) is not None


def _rest_field(lines: list[str], i: int, out: Docstring) -> int:
    match = _REST_PARAM.match(lines[i].strip())
    name = match.group(1).lstrip("*") if match else None
    if name and match:
        out.params[name] = match.group(2).strip()
    i += 1
    while i < len(lines) and lines[i].strip() and not _is_field(lines[i].strip()):
        if name:
            out.params[name] = (out.params[name] + " " + lines[i].strip()).strip()
        i += 1
    return i
