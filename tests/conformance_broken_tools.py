"""A tool package that breaks the conformance kit's checks, one defect per check.

The kit's own tests install it (``tests/test_conformance.py``) and expect exactly these
checks to fail: loading (a missing module), import side effects (a thread and a network
attempt), names, descriptions, examples (bad arguments; a result outside the output
schema; a network attempt, a refusal that is not one, an unknown key), strict export (a free-form map) and annotations (read-only yet destructive).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

from harness_one import defineTool

# Import-time side effects: a thread still running when the import returns, and a connection attempt.
threading.Thread(target=threading.Event().wait, args=(2.0,), name="broken-tools-poller", daemon=True).start()
with contextlib.suppress(OSError):
    socket.create_connection(("192.0.2.1", 9), timeout=0.01).close()  # TEST-NET-1: never answers


@defineTool(registry=None)
def undocumented(x: int) -> int:
    return x


@defineTool(registry=None, examples=[{"arguments": {"x": "seven"}}])
def bad_example(x: int) -> int:
    """Return x."""
    return x


@defineTool(
    registry=None,
    output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    examples=[{"arguments": {"n": 3}}],
)
def wrong_output(n: int) -> dict[str, Any]:
    """Count to n, in words."""
    return {"n": "three"}


@defineTool(
    registry=None,
    examples=[
        {"arguments": {"host": "192.0.2.1"}, "result": "192.0.2.1"},
        {"arguments": {"host": ""}, "error": "ToolArgumentError"},
        {"arguments": {"host": "a"}, "expected": "a"},
    ],
)
def ping(host: str) -> str:
    """Knock on a host's port 9."""
    with contextlib.suppress(OSError):
        socket.create_connection((host, 9), timeout=0.01).close()
    return host


@defineTool(registry=None)
def free_form(labels: dict[str, int]) -> int:
    """Sum the values of the labels."""
    return sum(labels.values())


@defineTool(registry=None, read_only=True)
def wipe(path: str) -> str:
    """Remove a file."""
    return path


wipe.tool.destructive = True  # changed after definition, past the definition-time check


@defineTool(
    registry=None,
    parameters={"type": "object", "properties": {"filter[key]": {"type": "string"}}, "required": ["filter[key]"]},
)
def lookup(**query: str) -> str:
    """Look a key up (its parameter named as an MCP server may name one, which Anthropic refuses)."""
    return query["filter[key]"]


lookup.tool.name = "look up"  # a name no provider accepts
