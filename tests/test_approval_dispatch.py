"""Approval round trips through provider dispatch: a held call is reported, decided by its tool-call id, then answered."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from harness_one import ManualClock, ToolRegistry
from harness_one.dispatch import PROVIDERS, Dispatched, HeldCall, adispatch, aresume, dispatch, resume
from harness_one_plugins.approval import ApprovalNotFound, ApprovalPlugin

SENT = "sent 5 EUR to ann"
REFUSAL = (
    "The call of 'transfer' was denied: not this week. Do not make it again with these arguments; "
    "continue without it, or ask the user what to do instead."
)


def make_registry() -> tuple[ToolRegistry, list[str]]:
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    sent: list[str] = []

    def transfer(to: str, amount: float, currency: str = "EUR") -> str:
        sent.append(to)
        return f"sent {amount} {currency} to {to}"

    reg.add(transfer, options={"requires_approval": lambda call: call.arguments["amount"] > 1})
    reg.add(lambda: 42, name="balance")
    return reg, sent


def approval(reg: ToolRegistry) -> ApprovalPlugin:
    plugin = reg.plugins.get("approval")
    assert isinstance(plugin, ApprovalPlugin)
    return plugin


def call(provider: str, call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call as ``provider`` sends it."""
    if provider == "openai":
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    if provider == "openai-responses":
        return {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}
    if provider == "anthropic":
        return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
    return {"function_call": {"id": call_id, "name": name, "args": arguments}}


def answer(provider: str, call_id: str, name: str, text: str, value: Any, ok: bool) -> dict[str, Any]:
    """The result ``provider`` expects for ``call_id``."""
    if provider == "openai":
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    if provider == "openai-responses":
        return {"type": "function_call_output", "call_id": call_id, "output": text}
    if provider == "anthropic":
        return {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": not ok}
    return {"name": name, "response": {"output": value} if ok else {"error": text.removeprefix("Error: ")}, "id": call_id}


def test_every_provider_format_is_covered() -> None:
    assert set(PROVIDERS) == {"openai", "openai-responses", "anthropic", "gemini"}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("approve", [True, False], ids=["approved", "denied"])
def test_a_held_call_is_reported_then_answered_on_its_call_id(provider: str, approve: bool) -> None:
    reg, sent = make_registry()
    calls = [
        call(provider, "c-small", "transfer", {"to": "bo", "amount": 1}),
        call(provider, "c-big", "transfer", {"to": "ann", "amount": 5}),
    ]
    calls.append(call(provider, "c-balance", "balance", {}))
    out = dispatch(reg, calls, provider=provider)
    assert isinstance(out, Dispatched)
    assert out == [
        answer(provider, "c-small", "transfer", "sent 1 EUR to bo", "sent 1 EUR to bo", True),
        answer(provider, "c-balance", "balance", "42", 42, True),
    ]  # no answer, and no error text, for the held call
    assert out.pending == [
        HeldCall("c-big", "transfer", {"to": "ann", "amount": 5, "currency": "EUR"}, provider, out.pending[0]._request)
    ]
    assert sent == ["bo"] and [p.call_id for p in approval(reg).pending()] == ["c-big"]
    [held] = out.pending
    if approve:
        approval(reg).approve(held.call_id)
        assert resume(reg, held) == answer(provider, "c-big", "transfer", SENT, SENT, True)
        assert sent == ["bo", "ann"]
    else:
        approval(reg).deny(held.call_id, "not this week")
        assert resume(reg, held) == answer(provider, "c-big", "transfer", f"Error: {REFUSAL}", None, False)
        assert sent == ["bo"]
    with pytest.raises(ApprovalNotFound):  # a decision is used once
        resume(reg, held)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_async_round_trip(provider: str) -> None:
    reg, sent = make_registry()

    async def main() -> None:
        out = await adispatch(
            reg,
            [call(provider, "a1", "transfer", {"to": "ann", "amount": 5}), call(provider, "a2", "balance", {})],
            provider=provider,
        )
        assert out == [answer(provider, "a2", "balance", "42", 42, True)]
        assert [h.call_id for h in out.pending] == ["a1"]
        approval(reg).approve("a1")
        assert await aresume(reg, out.pending[0]) == answer(provider, "a1", "transfer", SENT, SENT, True)

    asyncio.run(main())
    assert sent == ["ann"]


def test_resume_before_a_decision_is_a_typed_error_and_the_call_still_waits() -> None:
    reg, sent = make_registry()
    [held] = dispatch(reg, [call("anthropic", "toolu_9", "transfer", {"to": "ann", "amount": 5})], provider="anthropic").pending
    with pytest.raises(ApprovalNotFound, match="No decision was made for call id 'toolu_9'"):
        resume(reg, held)
    assert [p.call_id for p in approval(reg).pending()] == ["toolu_9"] and sent == []


def test_gemini_without_ids_and_with_a_renamed_tool() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "checked", name="2fa-check", options={"requires_approval": True})
    out = dispatch(reg, [{"name": "_2fa-check", "args": {}}], provider="gemini")
    [held] = out.pending
    assert out == [] and held.tool == "2fa-check" and held.call_id  # a call id is made up when Gemini sends none
    approval(reg).approve(held.call_id)
    assert resume(reg, held) == {"name": "_2fa-check", "response": {"output": "checked"}}  # the name the model knows


def test_parallel_dispatch_keeps_the_order_of_the_answered_calls() -> None:
    reg, _ = make_registry()
    calls = [call("openai", f"c{i}", "transfer", {"to": f"p{i}", "amount": i % 3}) for i in range(12)]
    out = dispatch(reg, calls, concurrency=4)
    assert [a["tool_call_id"] for a in out] == [f"c{i}" for i in range(12) if i % 3 <= 1]
    assert [h.call_id for h in out.pending] == [f"c{i}" for i in range(12) if i % 3 == 2]
