"""Tools the MCP tests serve with ``harness-one --tools tests/mcp_tools.py serve`` (not a test module)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from harness_one import Call, defineTool

#: What happened in this server process, read back with the ``events`` tool.
EVENTS: list[str] = []


@defineTool(registry=None, output_schema={"type": "integer"}, idempotent=True, options={"title": "Add"})
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@defineTool(registry=None, rate_limit={"rate": 0.001, "burst": 1, "key": "mcp_client"})
def limited() -> str:
    """One call per client, then refused for a long while."""
    return "ok"


@defineTool(registry=None, timeout=0.2)
async def slow(seconds: float, tag: str = "slow") -> str:
    """Sleep longer than the 0.2 s timeout allows."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        EVENTS.append(f"cancelled {tag}")
        raise
    return "done"


@defineTool(registry=None)
async def wait(seconds: float, tag: str) -> str:
    """Sleep (no timeout), recording the start and a cancellation."""
    EVENTS.append(f"started {tag}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        EVENTS.append(f"cancelled {tag}")
        raise
    EVENTS.append(f"finished {tag}")
    return "done"


@defineTool(registry=None, read_only=True)
def events() -> list[str]:
    """What happened so far in this server."""
    return list(EVENTS)


@defineTool(registry=None, read_only=True)
def whoami(call: Call) -> dict[str, Any]:
    """The caller identity the MCP server put into the call context."""
    return {k: v for k, v in call.context.items() if k.startswith("mcp_")}


@defineTool(registry=None, read_only=True)
def meta(call: Call) -> dict[str, Any]:
    """The ``_meta`` of the MCP request, as the server put it into the call context."""
    return dict(call.context.get("_meta") or {})


@defineTool(registry=None)
def grow(name: str, call: Call) -> str:
    """Add a tool called ``name`` to the serving registry (clients are told the list changed)."""

    def grown() -> str:
        return "grown"

    call.registry.add(grown, name=name, description="Added at run time.")
    return name


@defineTool(registry=None, read_only=True, name="test_simple_text")
def simple_text() -> str:
    """The conformance suite's simple text tool."""
    return "This is a simple text response for testing."


@defineTool(registry=None, name="test_error_handling")
def error_handling() -> None:
    """The conformance suite's failing tool."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@defineTool(
    registry=None,
    read_only=True,
    name="json_schema_2020_12_tool",
    description="Tool with JSON Schema 2020-12 features",
    parameters={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    },
)
def json_schema_tool(name: str = "", address: dict[str, Any] | None = None) -> dict[str, Any]:
    """The conformance suite's schema-preservation tool."""
    return {"name": name, "address": address}


@defineTool(registry=None, name="test_tool_with_progress")
async def progress_steps(call: Call) -> str:
    """The conformance suite's progress tool: 0, 50 and 100 of 100, 50 ms apart."""
    for step in (0, 50, 100):
        call.report_progress(step, 100, f"{step}%")
        if step < 100:
            await asyncio.sleep(0.05)
    return "progress done"


@defineTool(registry=None)
def count_up(n: int, call: Call) -> int:
    """Report progress 1..n from a worker thread (a sync tool)."""
    for i in range(1, n + 1):
        call.report_progress(i, n)
    return n


@defineTool(registry=None, read_only=True)
def thread_name() -> str:
    """The name of the thread a sync tool without a timeout runs in."""
    return threading.current_thread().name


@defineTool(registry=None, read_only=True)
def odd_progress(call: Call) -> str:
    """Report progress with an infinite total, then a NaN progress (one notification: the NaN is not sent)."""
    call.report_progress(2, float("inf"))
    call.report_progress(float("nan"), 3)
    return "done"


@defineTool(registry=None, read_only=True)
def noisy() -> str:
    """Print to stdout, which must not reach the MCP wire."""
    print("stray output", flush=True)
    return "quiet"


@defineTool(registry=None)
def wait_sync(seconds: float, tag: str, call: Call) -> str:
    """A sync tool that waits, polling ``call.cancelled`` (set when the request is cancelled)."""
    EVENTS.append(f"started {tag}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if call.cancelled:
            EVENTS.append(f"cancelled {tag}")
            return "stopped"
        time.sleep(0.01)
    EVENTS.append(f"finished {tag}")
    return "done"


@defineTool(registry=None, read_only=True)
def surrogates(call: Call, fail: bool = False) -> str:
    """Report, then return (or fail with), text holding a lone surrogate: a name os.listdir gives for bytes not UTF-8."""
    call.report_progress(1, "2", "step \udc80")  # and a total given as text
    if fail:
        raise ValueError("bad \udc80 value")
    return "a\ud800b"
