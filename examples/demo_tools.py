"""Two stand-in tools for the scripted session: one that overruns its timeout, one that fails once.

Loaded with ``harness-one --tools examples/demo_tools.py``.
"""

from __future__ import annotations

import time

from harness_one import Call, RetryableError, defineTool


@defineTool(registry=None, timeout=0.3)
def slow_report(call: Call, seconds: float = 3.0) -> str:
    """Build a report that takes `seconds` seconds (longer than this tool's 0.3 s timeout).

    Args:
        seconds: How long the report takes.
    """
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if call.cancelled:  # the caller gave up at the deadline: stop early
            return "abandoned"
        time.sleep(0.02)
    return "report ready"


@defineTool(registry=None, idempotent=True, retry={"attempts": 3, "initial": 0.05})
def flaky_lookup(call: Call, item: str) -> dict[str, object]:
    """Look up an item in a service that fails on the first attempt of every call.

    Args:
        item: What to look up.
    """
    if call.attempt == 1:
        raise RetryableError("the inventory service answered 503")
    return {"item": item, "in_stock": True, "attempt": call.attempt}
