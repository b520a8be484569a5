"""Where harness-one's own messages go: structlog when the application configured it, else stdlib logging."""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["emit"]

_stdlib = logging.getLogger("harness_one")


def emit(level: int, event: str, **fields: Any) -> None:
    """Log ``event`` with ``fields``; never configures anything globally."""
    if structlog.is_configured():
        structlog.get_logger("harness_one").log(level, event, **fields)
    elif _stdlib.isEnabledFor(level):
        detail = " ".join(f"{k}={v!r}" for k, v in fields.items())
        _stdlib.log(level, "%s %s", event, detail, extra={"harness_one": fields})
