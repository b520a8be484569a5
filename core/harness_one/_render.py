"""Turning tool results into text a model reads."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

__all__ = ["json_default", "render_value"]


def json_default(value: Any) -> Any:
    """``json.dumps`` fallback: dataclasses, enums, sets, bytes and anything with ``model_dump``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return str(value)


def render_value(value: Any) -> str:
    """A string as is; anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=json_default)
