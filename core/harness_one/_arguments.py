"""Decoding the arguments an agent sends into the ``dict`` a tool is called with."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._errors import ArgumentProblem, ToolArgumentError
from ._schema import json_type

__all__ = ["ArgumentLimits", "decode_arguments", "check_signature"]


@dataclass(frozen=True, slots=True)
class ArgumentLimits:
    """Refuse oversized input cheaply, before anything recursive sees it.

    ``max_bytes`` bounds a JSON string's length (and, via the validation plugin, the
    estimated size of a ``dict``); ``max_depth`` bounds nesting of objects and arrays.
    """

    max_bytes: int = 1 << 20
    max_depth: int = 64


def decode_arguments(raw: Any, limits: ArgumentLimits) -> dict[str, Any]:
    """A ``dict`` from a dict, a mapping, ``None``, or a JSON string/bytes holding an object."""
    if type(raw) is dict:
        return raw
    if raw is None:
        return {}
    if isinstance(raw, (str, bytes, bytearray)):
        return _parse(raw, limits)
    if isinstance(raw, Mapping):
        return dict(raw)
    raise ToolArgumentError(
        [ArgumentProblem("$", f"arguments must be a JSON object, got {type(raw).__name__}", "type", "object", type(raw).__name__)]
    )


def _parse(raw: str | bytes | bytearray, limits: ArgumentLimits) -> dict[str, Any]:
    if len(raw) > limits.max_bytes:
        raise ToolArgumentError(
            [
                ArgumentProblem(
                    "$",
                    f"arguments are {len(raw)} bytes; the limit is {limits.max_bytes}",
                    "limits",
                    f"<= {limits.max_bytes} bytes",
                    f"{len(raw)} bytes",
                )
            ]
        )
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        snippet = text[max(0, exc.pos - 20) : exc.pos + 20]
        raise ToolArgumentError(
            [
                ArgumentProblem(
                    "$",
                    f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} (near {snippet!r})",
                    "json",
                    "valid JSON",
                    "invalid JSON",
                )
            ]
        ) from None
    except RecursionError:
        raise ToolArgumentError(
            [
                ArgumentProblem(
                    "$",
                    f"arguments are nested too deeply (limit {limits.max_depth} levels)",
                    "limits",
                    f"depth <= {limits.max_depth}",
                    "deeper",
                )
            ]
        ) from None
    if not isinstance(value, dict):
        raise ToolArgumentError(
            [ArgumentProblem("$", f"arguments must be a JSON object, got {json_type(value)}", "type", "object", json_type(value))]
        )
    return value


def check_signature(args: dict[str, Any], accepted: frozenset[str], required: frozenset[str], accepts_any: bool) -> None:
    """The backstop when no validator ran: unknown or missing parameters, named."""
    problems = []
    if not accepts_any:
        for key in sorted(set(args) - accepted):
            problems.append(
                ArgumentProblem(
                    f"$.{key}",
                    f"unexpected argument; expected one of: {', '.join(sorted(accepted)) or 'none'}",
                    "additionalProperties",
                    "no such property",
                    repr(key),
                )
            )
    for key in sorted(required - set(args)):
        problems.append(ArgumentProblem(f"$.{key}", "required argument is missing", "required", "present", "missing"))
    if problems:
        raise ToolArgumentError(problems)
