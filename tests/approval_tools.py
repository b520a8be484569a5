"""Tools for the approval tests of the agent loop: ``harness-one --tools tests/approval_tools.py run``."""

from __future__ import annotations

from harness_one import Call, defineTool


def _large(call: Call) -> bool:
    return float(call.arguments["amount"]) > 100


@defineTool(registry=None, options={"requires_approval": _large})
def transfer(to: str, amount: float) -> str:
    """Send money; more than 100 needs a person's approval.

    Args:
        to: Who receives it.
        amount: How much.
    """
    return f"sent {amount:g} to {to}"
