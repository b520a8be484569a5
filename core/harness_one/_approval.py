"""A call the harness holds for approval where nothing can approve it: refused as not run, and withdrawn.

Used by the agent-framework adapters, ``harness-one call`` and the MCP server.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from ._call import CallResult
from ._errors import APPROVAL_REQUIRED, ApprovalUnavailable

__all__ = ["NotAsked", "not_asked"]

#: Why the adapter (or ``harness-one call``, or the MCP server) refuses a call the harness held
#: (:func:`not_asked`), as the model reads it.
NotAsked: TypeAlias = Literal["no_step", "not_reviewed", "rule_said_no", "approval_missed", "one_shot", "mcp_server"]

_NOT_ASKED: dict[NotAsked, str] = {
    # the framework asks no one about this tool (AutoGen; a tool adapted before its approval rule existed)
    "no_step": "no one was asked (this agent has no approval step for it)",
    # the framework may have a step (LangChain's middleware) that did not put this call to a person
    "not_reviewed": "no one was asked (no approval step of this agent put it to a person)",
    # the framework's step asked the harness rule, which said no then and yes when the call ran
    "rule_said_no": "no one was asked (this agent's approval step checked the approval rule before the call ran, "
    "and it asked for no approval then)",
    # a person approved the call in the framework, but not as it ran (the rule said no when the grant was checked)
    "approval_missed": "the approval this agent got from a person did not cover the call as it ran",
    # `harness-one call`: the process makes this one call and ends, so no decision can reach it
    "one_shot": "no one was asked (this command makes one call and ends: it has no approval step)",
    # the MCP server: the protocol has no approval step, and a later result has no way back to the client
    "mcp_server": "no one was asked (this MCP server has no approval step)",
}


def not_asked(result: CallResult, why: NotAsked) -> CallResult:
    """``result``, where the harness held the call for approval, as a refusal the model can act on.

    For a framework (or ``harness-one call``, or the MCP server) that will not bring a later
    result back to the model: the harness's "waiting for a decision, its result comes once
    approved" would be a promise nothing keeps.
    So the call is withdrawn from the ``approval`` plugin's queue (``ApprovalRequired.withdraw``):
    no one approves and runs it later. ``why`` says, truly for the adapter, why the approval is
    missing (:data:`NotAsked`). The refusal is an :class:`~harness_one.ApprovalUnavailable`
    (``kind`` ``approval_unavailable``). Any other result is returned as it is.
    """
    error = result.error
    if error is None or error.kind != APPROVAL_REQUIRED:
        return result
    withdraw = getattr(error, "withdraw", None)
    if callable(withdraw):
        withdraw()
    refused = ApprovalUnavailable(
        f"The call of '{result.tool}' was not run: it needs a person's approval, and {_NOT_ASKED[why]}. "
        "Do not call it again; continue without it, or tell the user it needs their approval.",
        tool=result.tool,
        call_id=result.call_id,
    )
    return result._replace(error=refused)
