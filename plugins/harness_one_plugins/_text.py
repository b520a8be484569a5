"""Private helper of the output-limit and OpenTelemetry plugins: the text the model reads for a result."""

from __future__ import annotations

from typing import Any

from harness_one import CallResult

__all__ = ["rendered"]


def rendered(value: Any) -> str:
    """``value`` as the model reads it: a string as is, anything else as harness-one's JSON.

    Goes through :meth:`harness_one.CallResult.for_model`, the one renderer of the project.
    """
    return CallResult(True, value, None, "", "", 0.0, 1).for_model()
