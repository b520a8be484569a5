"""The approval plugin: calls that wait for a decision by call id, then run through every policy or are refused."""

from __future__ import annotations

import asyncio
import json

import pytest
from approval_support import CallsDuringSleep

from harness_one import Call, CallResult, ManualClock, PluginError, RetryableError, ToolDefinitionError, ToolRegistry, hookimpl
from harness_one.dispatch import dispatch, resume
from harness_one_plugins import BudgetPlugin
from harness_one_plugins.approval import ApprovalConflict, ApprovalDenied, ApprovalNotFound, ApprovalPlugin, ApprovalRequired

TRANSFER = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "amount": {"type": "number"}, "currency": {"type": "string", "default": "EUR"}},
    "required": ["to", "amount"],
}


class Bank:
    def __init__(self, reg: ToolRegistry, **definition: object) -> None:
        self.sent: list[tuple[str, float, str]] = []
        reg.add(self.transfer, name="transfer", parameters=TRANSFER, **definition)  # type: ignore[arg-type]

    def transfer(self, to: str, amount: float, currency: str) -> str:
        self.sent.append((to, amount, currency))
        return f"sent {amount} {currency} to {to}"


def registry(**options: object) -> ToolRegistry:
    return ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"approval": options} if options else None)


def approval(reg: ToolRegistry) -> ApprovalPlugin:
    plugin = reg.plugins.get("approval")
    assert isinstance(plugin, ApprovalPlugin)
    return plugin


def test_a_call_needing_approval_does_not_run_and_carries_id_tool_and_arguments() -> None:
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True})
    result = reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="call-1")
    assert not result.ok and isinstance(result.error, ApprovalRequired) and bank.sent == []
    assert result.error.kind == "approval_required" and result.call_id == "call-1"
    assert result.error.to_dict() == {
        "type": "ApprovalRequired",
        "kind": "approval_required",
        "message": result.error.message,
        "tool": "transfer",
        "call_id": "call-1",
        "arguments": {"to": "ann", "amount": 5, "currency": "EUR"},
    }
    assert "needs a person's approval" in result.for_model()
    [pending] = approval(reg).pending()
    assert (pending.call_id, pending.tool, pending.arguments) == (
        "call-1",
        "transfer",
        {"to": "ann", "amount": 5, "currency": "EUR"},
    )


def test_approve_then_resume_runs_the_call_through_its_policies_once() -> None:
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True}, rate_limit={"rate": 0.001, "burst": 1})
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c1", context={"run_id": "r"})
    approval(reg).approve("c1")
    resumed = approval(reg).resume("c1")
    assert resumed.ok and resumed.value == "sent 5 EUR to ann" and resumed.call_id == "c1"
    assert bank.sent == [("ann", 5, "EUR")] and approval(reg).pending() == []
    again = reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c1", context={"run_id": "r"})
    assert again.error.kind == "approval_conflict"  # type: ignore[union-attr]  # an approval is used once: it ran
    assert "already ran under call id c1" in again.error.message and approval(reg).pending() == []  # type: ignore[union-attr]
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c2", context={"run_id": "r"})  # a new id: asked again
    reg.plugins.get("approval").approve("c2")
    refused = reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c2", context={"run_id": "r"})
    assert refused.error.kind == "rate_limited"  # type: ignore[union-attr]
    assert reg.stats()["approval"] == {"pending": 0, "approved": 2, "denied": 0}


def test_deny_refuses_with_a_readable_message() -> None:
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "mallory", "amount": 900}, call_id="c2")
    approval(reg).deny("c2", "the recipient is not on the allow list")
    refused = approval(reg).resume("c2")
    assert isinstance(refused.error, ApprovalDenied) and refused.error.kind == "approval_denied" and bank.sent == []
    assert refused.for_model() == (
        "Error: The call of 'transfer' was denied: the recipient is not on the allow list. Do not make it again with "
        "these arguments; continue without it, or ask the user what to do instead."
    )
    assert refused.error.to_dict()["reason"] == "the recipient is not on the allow list"


def test_an_approval_holds_only_for_the_arguments_it_was_given_for() -> None:
    """The swapped call was held as a new pending call under the approved id: a second approve of that id
    (a double click, a retried request) approved the call nobody was shown. It is refused instead."""
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c3")
    approval(reg).approve("c3")
    swapped = reg.try_call("transfer", {"to": "ann", "amount": 5000}, call_id="c3")
    assert swapped.error is not None and swapped.error.kind == "approval_conflict" and bank.sent == []
    assert "was already decided under call id c3" in swapped.error.message and approval(reg).pending() == []
    assert approval(reg).approve("c3").arguments["amount"] == 5  # the approval again: still the call shown
    assert approval(reg).resume("c3").value == "sent 5 EUR to ann"  # the swap left it be
    assert bank.sent == [("ann", 5, "EUR")]
    again = reg.try_call("transfer", {"to": "ann", "amount": 5000}, call_id="c3")  # used: still not for another call
    assert again.error is not None and again.error.kind == "approval_conflict" and approval(reg).pending() == []


SWAPPED = {"to": "mallory", "amount": 5000}


def spend(reg: ToolRegistry, how: str) -> None:
    """Decide the call c1 (to ann, 5) and spend the decision: used by the call, expired, or withdrawn."""
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c1")
    if how == "denied and used":
        approval(reg).deny("c1")
        assert approval(reg).resume("c1").error.kind == "approval_denied"  # type: ignore[union-attr]
        return
    approval(reg).approve("c1")
    if how == "approved and used":
        assert approval(reg).resume("c1").ok
    elif how == "expired":
        reg.clock.advance(101)  # type: ignore[attr-defined]
    else:
        assert approval(reg).withdraw("c1") is not None


@pytest.mark.parametrize("how", ["approved and used", "denied and used", "expired", "withdrawn"])
def test_a_spent_decisions_id_refuses_another_call_for_ttl(how: str) -> None:
    """Once its decision was used, expired or withdrawn, a call id became free: another call under it was
    held as a new pending call, and a repeated approve() of the id (a double click, a replayed webhook)
    approved a call the person never saw. Now it is ``ApprovalConflict`` for ``ttl``; the same call
    again waits for a new decision if its decision expired or was withdrawn, and is refused if it was used
    (it ran, or was denied: a re-sent turn is not a new request)."""
    reg = registry(ttl=100)
    bank = Bank(reg, options={"requires_approval": True})
    spend(reg, how)
    swapped = reg.try_call("transfer", SWAPPED, call_id="c1")
    assert swapped.error is not None and swapped.error.kind == "approval_conflict", swapped
    assert "was already decided under call id c1" in swapped.error.message and approval(reg).pending() == []
    with pytest.raises(ApprovalNotFound):
        approval(reg).approve("c1")  # the repeated approve finds nothing to approve
    same = reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c1")
    if how.endswith("used"):  # the same call: its decision is not asked for, nor used, twice
        assert same.error is not None and same.error.kind == (
            "approval_conflict" if how == "approved and used" else "approval_denied"
        )
        assert approval(reg).pending() == [] and len(bank.sent) == (how == "approved and used")
        return
    assert same.error is not None and same.error.kind == "approval_required"  # the same call: asked again
    assert [p.arguments["to"] for p in approval(reg).pending()] == ["ann"]
    assert reg.try_call("transfer", SWAPPED, call_id="c1").error.kind == "approval_conflict"  # type: ignore[union-attr]
    assert all(to != "mallory" for to, _, _ in bank.sent)
    reg.clock.advance(201)  # type: ignore[attr-defined]  # the pending call expired: it refuses another for ttl too
    assert reg.try_call("transfer", SWAPPED, call_id="c1").error.kind == "approval_conflict"  # type: ignore[union-attr]
    reg.clock.advance(101)  # type: ignore[attr-defined]  # and then it is forgotten
    assert reg.try_call("transfer", SWAPPED, call_id="c1").error.kind == "approval_required"  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["withdrawn", "expired"])
def test_a_waiting_call_withdrawn_or_expired_leaves_its_id_refusing_another_call(how: str) -> None:
    """A call that waited for a decision and was withdrawn (or expired) left its id free: another call under it
    waited in its place, and a stale approve() of the id approved it (a transfer to mallory nobody saw)."""
    reg = registry(ttl=100)
    bank = Bank(reg, options={"requires_approval": True})
    assert reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c1").error.kind == "approval_required"  # type: ignore[union-attr]
    if how == "withdrawn":
        assert approval(reg).withdraw("c1") is not None
    else:
        reg.clock.advance(101)  # type: ignore[attr-defined]
    swapped = reg.try_call("transfer", SWAPPED, call_id="c1")
    assert swapped.error is not None and swapped.error.kind == "approval_conflict", swapped
    with pytest.raises(ApprovalNotFound):
        approval(reg).approve("c1")
    assert bank.sent == []


def test_spent_decisions_are_bounded_by_max_pending() -> None:
    reg = registry(max_pending=2)
    Bank(reg, options={"requires_approval": True})
    for n in range(3):
        reg.try_call("transfer", {"to": "ann", "amount": n}, call_id=f"c{n}")
        approval(reg).approve(f"c{n}")
        assert approval(reg).resume(f"c{n}").ok
    assert len(approval(reg)._spent) == 2
    assert reg.try_call("transfer", SWAPPED, call_id="c0").error.kind == "approval_required"  # type: ignore[union-attr]  # dropped first
    assert reg.try_call("transfer", SWAPPED, call_id="c2").error.kind == "approval_conflict"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("approved", "made", "runs"), [(500, 500.0, True), (500.0, 500, True), (1, True, False), (0, False, False)]
)
def test_an_approval_holds_for_the_same_number_however_written_never_for_a_boolean(
    approved: object, made: object, runs: bool
) -> None:
    """JSON Schema: 500 and 500.0 are one number, so one approval; ``true`` is not ``1``."""
    reg = registry()
    ran: list[object] = []

    def pay(amount: object) -> str:
        ran.append(amount)
        return "paid"

    reg.add(pay, parameters={"type": "object", "properties": {"amount": {}}}, options={"requires_approval": True})
    reg.try_call("pay", {"amount": approved}, call_id="p1")
    approval(reg).approve("p1")
    made_call = reg.try_call("pay", {"amount": made}, call_id="p1")
    assert made_call.ok is runs and ran == ([made] if runs else [])
    if not runs:
        assert made_call.error is not None and made_call.error.kind == "approval_conflict"


@pytest.mark.parametrize("first", ["approve", "deny"])
def test_a_decision_made_again_changes_nothing_and_another_one_is_refused(first: str) -> None:
    """approve() (or deny()) sent twice is one decision, counted once; the opposite decision is refused,
    ``withdraw`` drops the decision, and the call made again waits for a new one."""
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "bo", "amount": 500}, call_id="c1")
    decide = {"approve": lambda: approval(reg).approve("c1"), "deny": lambda: approval(reg).deny("c1", "no")}
    assert decide[first]().arguments["to"] == decide[first]().arguments["to"] == "bo"
    assert reg.stats()["approval"] == {"pending": 0, "approved": int(first == "approve"), "denied": int(first == "deny")}
    with pytest.raises(
        ApprovalConflict, match=f"Call id 'c1' was {first.replace('y', 'ie')}d already; a decision is not changed"
    ):
        decide["deny" if first == "approve" else "approve"]()
    approval(reg).withdraw("c1")
    assert reg.try_call("transfer", {"to": "bo", "amount": 500}, call_id="c1").error.kind == "approval_required"  # type: ignore[union-attr]
    assert approval(reg).approve("c1") and approval(reg).resume("c1").ok and bank.sent == [("bo", 500, "EUR")]


def test_an_approval_kept_after_a_refusal_still_expires_after_ttl() -> None:
    """A decision put back after a later policy refused its call is not first in line for the sweep."""
    reg = registry(ttl=100)
    bank = Bank(reg, options={"requires_approval": True}, rate_limit={"rate": 0.01, "burst": 1})  # a token per 100 s
    reg.try_call("transfer", {"to": "x", "amount": 1}, call_id="c0")
    approval(reg).approve("c0")
    assert approval(reg).resume("c0").ok  # spends the token
    reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c1")
    approval(reg).approve("c1")  # at t=0
    reg.clock.advance(50)  # type: ignore[attr-defined]
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c2")
    approval(reg).approve("c2")  # at t=50
    reg.clock.advance(10)  # type: ignore[attr-defined]
    refused = approval(reg).resume("c1")
    assert refused.error is not None and refused.error.kind == "rate_limited"  # the approval is kept
    reg.clock.advance(70)  # type: ignore[attr-defined]  # t=130: c1's approval is 130 s old
    late = reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c1")
    assert late.error is not None and late.error.kind == "approval_required"
    assert bank.sent == [("x", 1, "EUR")]


def test_a_predicate_decides_per_call() -> None:
    reg = registry()

    def large(call: Call) -> bool:
        return float(call.arguments["amount"]) > 100

    bank = Bank(reg, options={"requires_approval": large})
    assert reg.try_call("transfer", {"to": "ann", "amount": 20}).ok
    assert reg.try_call("transfer", {"to": "ann", "amount": 200}).error.kind == "approval_required"  # type: ignore[union-attr]
    assert bank.sent == [("ann", 20, "EUR")]


def test_an_approved_call_is_retried_without_asking_again() -> None:
    reg = registry()
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) < 3:
            raise RetryableError("busy")
        return "done"

    reg.add(flaky, idempotent=True, retry={"attempts": 3, "initial": 0.1}, options={"requires_approval": True})
    call_id = reg.try_call("flaky").call_id
    approval(reg).approve(call_id)
    resumed = approval(reg).resume(call_id)
    assert resumed.ok and resumed.attempts == 3 and len(runs) == 3


def test_destructive_tools_and_a_registry_wide_rule() -> None:
    reg = registry(destructive=True)
    reg.add(lambda path: f"deleted {path}", name="delete", destructive=True)
    reg.add(lambda path: f"read {path}", name="read", read_only=True)
    assert reg.try_call("delete", {"path": "/tmp/x"}).error.kind == "approval_required"  # type: ignore[union-attr]
    assert reg.try_call("read", {"path": "/tmp/x"}).ok
    everything = registry(require=True)
    everything.add(lambda: 1, name="f")
    everything.add(lambda: 2, name="exempt", options={"requires_approval": False})
    assert everything.try_call("f").error.kind == "approval_required"  # type: ignore[union-attr]
    assert everything.try_call("exempt").ok


def test_the_round_trip_through_dispatch_uses_the_providers_call_id() -> None:
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True})
    tool_call = {
        "id": "call_abc",
        "type": "function",
        "function": {"name": "transfer", "arguments": json.dumps({"to": "bo", "amount": 1})},
    }
    first = dispatch(reg, [tool_call])
    assert first == [] and bank.sent == []  # reported, not answered as an error
    assert [(h.call_id, h.tool, h.arguments) for h in first.pending] == [
        ("call_abc", "transfer", {"to": "bo", "amount": 1, "currency": "EUR"})
    ]
    [pending] = approval(reg).pending()
    assert pending.call_id == "call_abc"
    approval(reg).approve("call_abc")
    assert resume(reg, first.pending[0]) == {"role": "tool", "tool_call_id": "call_abc", "content": "sent 1 EUR to bo"}
    [again] = dispatch(reg, [tool_call])  # the same tool call, sent again after it ran: not held, not run again
    assert again["tool_call_id"] == "call_abc" and "already ran under call id call_abc" in again["content"]
    with pytest.raises(ApprovalNotFound):  # a repeated approve finds nothing to approve
        approval(reg).approve("call_abc")
    assert bank.sent == [("bo", 1, "EUR")]


def test_aresume_and_the_idempotency_key_is_kept() -> None:
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True}, idempotent=True)

    async def main() -> None:
        first = await reg.atry_call("transfer", {"to": "cy", "amount": 2}, call_id="c9", idempotency_key="order-9")
        assert first.error.kind == "approval_required"  # type: ignore[union-attr]
        approval(reg).approve("c9")
        assert (await approval(reg).aresume("c9")).value == "sent 2 EUR to cy"

    asyncio.run(main())
    replay = reg.try_call("transfer", {"to": "cy", "amount": 2}, idempotency_key="order-9")
    assert replay.value == "sent 2 EUR to cy" and bank.sent == [("cy", 2, "EUR")]  # replayed: ran once


def test_unknown_ids_and_undecided_calls_are_typed_errors() -> None:
    reg = registry()
    Bank(reg, options={"requires_approval": True})
    with pytest.raises(
        ApprovalNotFound,
        match=r"No call waits for approval under call id 'nope'\. It was decided already, withdrawn, or held longer",
    ):
        approval(reg).approve("nope")
    reg.try_call("transfer", {"to": "ann", "amount": 1}, call_id="c4")
    with pytest.raises(ApprovalNotFound, match="approve or deny a pending call first"):
        approval(reg).resume("c4")


def test_pending_calls_expire_after_ttl() -> None:
    reg = registry(ttl=60)
    Bank(reg, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "ann", "amount": 1}, call_id="old")
    reg.clock.advance(61)  # type: ignore[attr-defined]
    reg.try_call("transfer", {"to": "ann", "amount": 1}, call_id="new")
    assert [p.call_id for p in approval(reg).pending()] == ["new"]


def test_off_by_default_and_a_pending_call_uses_no_budget() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="f")
    assert "approval" in reg.plugins.names() and "approval" not in reg.plugins.plan.for_tool(reg.get("f")).on_error_names
    budgeted = ToolRegistry(autoload=False, plugin_options={"budget": {"max_calls": 1}})
    Bank(budgeted, options={"requires_approval": True})
    budgeted.try_call("transfer", {"to": "ann", "amount": 1}, call_id="b1", context={"run_id": "r"})
    assert budgeted.plugins.get("budget").used("r") == 0
    approval(budgeted).approve("b1")
    assert approval(budgeted).resume("b1").ok and budgeted.plugins.get("budget").used("r") == 1


def test_a_grant_from_a_framework_lets_the_next_call_with_that_id_and_those_arguments_run_once() -> None:
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True})
    tool = reg.get("transfer")
    assert approval(reg).grant(reg, tool, {"to": "ann", "amount": 5}, call_id="fw-1")
    assert reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="fw-1").value == "sent 5 EUR to ann"
    again = reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="fw-1")
    assert again.error is not None and again.error.kind == "approval_required" and len(bank.sent) == 1
    approval(reg).grant(reg, tool, {"to": "bo", "amount": 1}, call_id="fw-2")
    other = reg.try_call("transfer", {"to": "bo", "amount": 999}, call_id="fw-2")  # not what was approved
    assert other.error is not None and other.error.kind == "approval_required" and len(bank.sent) == 1
    assert not approval(reg).grant(reg, tool, {"to": 1}, call_id="fw-3")  # refused arguments: nothing granted
    approval(reg).grant(reg, tool, {"to": "cy", "amount": 2}, call_id="fw-4")
    with pytest.raises(ApprovalNotFound, match="granted, not asked for"):
        approval(reg).resume("fw-4")


def test_an_approval_refused_by_a_later_policy_still_holds_and_a_call_id_names_one_call() -> None:
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True}, rate_limit={"rate": 0.001, "burst": 1})
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c1")
    conflict = reg.try_call("transfer", {"to": "eve", "amount": 5000}, call_id="c1")  # reusing the waiting call's id
    assert conflict.error is not None and conflict.error.kind == "approval_conflict"
    assert [p.arguments["to"] for p in approval(reg).pending()] == ["ann"]
    approval(reg).approve("c1")
    assert approval(reg).resume("c1").value == "sent 5 EUR to ann"
    reg.try_call("transfer", {"to": "bo", "amount": 1}, call_id="c2")
    approval(reg).approve("c2")
    refused = approval(reg).resume("c2")
    assert refused.error is not None and refused.error.kind == "rate_limited"  # the burst is spent
    assert bank.sent == [("ann", 5, "EUR")]
    reg.clock.advance(1000)  # type: ignore[attr-defined]  # a token again
    assert approval(reg).resume("c2").value == "sent 1 EUR to bo"  # the refusal did not use the approval up
    assert reg.try_call("transfer", {"to": "bo", "amount": 1}, call_id="c2").error.kind == "approval_conflict"  # type: ignore[union-attr]  # it ran


def test_a_call_id_whose_approved_call_is_under_way_refuses_another_call() -> None:
    """While an approved call is under way (its approval taken, a later policy not yet passed), another call
    under its id is refused, not held as a new request: a repeated approve() of the id (a double click)
    finds nothing to approve, and the approved call, refused and made again, still runs."""
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True})
    seen: dict[str, object] = {}

    class Meanwhile:  # a policy after approval that, once, lets another call under the id come first
        name, order = "meanwhile", 66

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            if not seen:
                other = reg.try_call("transfer", {"to": "mallory", "amount": 5000}, call_id="X")
                seen["other"] = other.error.kind if other.error else other.value
                with pytest.raises(ApprovalNotFound):
                    approval(reg).approve("X")  # nothing waits under X
                seen["pending"] = [p.arguments["to"] for p in approval(reg).pending()]
                raise RetryableError("not now", tool=call.tool.name, call_id=call.call_id)

    reg.plugins.register(Meanwhile(), name="meanwhile")
    assert reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="X").error.kind == "approval_required"  # type: ignore[union-attr]
    approval(reg).approve("X")
    assert approval(reg).resume("X").error.kind == "retryable"  # type: ignore[union-attr]
    assert seen == {"other": "approval_conflict", "pending": []}
    assert reg.call("transfer", {"to": "ann", "amount": 5}, call_id="X") == "sent 5 EUR to ann"  # the approval held
    assert bank.sent == [("ann", 5, "EUR")]


def test_needs_approval_answers_the_rule_without_calling() -> None:
    reg = registry()
    bank = Bank(reg, options={"requires_approval": lambda call: call.arguments["amount"] > 100})
    tool = reg.get("transfer")
    assert approval(reg).needs_approval(reg, tool, {"to": "ann", "amount": 500})
    assert not approval(reg).needs_approval(reg, tool, {"to": "ann", "amount": 5})
    assert bank.sent == [] and approval(reg).pending() == []
    euros = ToolRegistry(autoload=False, clock=ManualClock())
    Bank(euros, options={"requires_approval": lambda call: call.arguments["currency"] != "EUR"})
    euro_tool = euros.get("transfer")
    assert not approval(euros).needs_approval(euros, euro_tool, {"to": "ann", "amount": 5})  # the default is filled in
    assert approval(euros).needs_approval(euros, euro_tool, {"to": "ann", "amount": 5, "currency": "USD"})
    assert not approval(euros).needs_approval(euros, euro_tool, {"to": 1})  # refused anyway, with the readable error
    always = ToolRegistry(autoload=False, clock=ManualClock())
    Bank(always, options={"requires_approval": True})
    assert approval(always).needs_approval(always, always.get("transfer"), {"to": "ann", "amount": 5})
    assert not approval(always).needs_approval(always, always.get("transfer"), {"to": 5})  # refused before any person
    picky = ToolRegistry(autoload=False, clock=ManualClock())
    Bank(picky, options={"requires_approval": lambda call: call.arguments["amount"] / 0 > 1})
    assert not approval(picky).needs_approval(picky, picky.get("transfer"), {"to": "ann", "amount": 5})
    failed = picky.try_call("transfer", {"to": "ann", "amount": 5})  # no decision could lift it: fails closed
    assert failed.error is not None and failed.error.kind == "plugin_error" and "ZeroDivisionError" in failed.error.message
    assert approval(picky).pending() == []


def test_a_call_held_longer_than_ttl_can_no_longer_be_decided_or_resumed() -> None:
    clock = ManualClock()
    reg = ToolRegistry(autoload=False, clock=clock, plugin_options={"approval": {"ttl": 10}})
    bank = Bank(reg, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="late")
    clock.advance(11)
    with pytest.raises(ApprovalNotFound):
        approval(reg).approve("late")
    reg.try_call("transfer", {"to": "bo", "amount": 5}, call_id="kept")
    approval(reg).approve("kept")
    clock.advance(11)  # an unused decision expires too
    with pytest.raises(ApprovalNotFound):
        approval(reg).resume("kept")
    again = reg.try_call("transfer", {"to": "bo", "amount": 5}, call_id="kept")
    assert again.error is not None and again.error.kind == "approval_required" and bank.sent == []


def _wire(to: str, amount: int) -> str:
    return f"sent {amount} to {to}"


def test_a_typo_in_the_guards_options_is_an_error_before_any_call() -> None:
    """It made the approval plugin fail to load (its tools then refused every call): now the registry is not built."""
    with pytest.raises(PluginError, match=r"'approval'.*did you mean 'require'\?"):
        ToolRegistry(autoload=False, plugin_options={"approval": {"requir": True}})


@pytest.mark.parametrize(
    ("setting", "option"),
    [
        ({"block": ["approval"]}, {"requires_approval": lambda call: call.arguments["amount"] > 100}),
        ({"standard_plugins": False}, {"requires_approval": True}),
        ({"block": ["budget"]}, {"max_calls": 5}),
        ({"block": ["budget"]}, {"max_calls": 0}),  # no calls at all: 0 == False, but it asks for the guard
    ],
)
def test_a_guard_whose_plugin_is_not_active_fails_closed(setting: dict[str, object], option: dict[str, object]) -> None:
    ran: list[int] = []

    def wire(to: str, amount: int) -> str:
        ran.append(amount)
        return _wire(to, amount)

    reg = ToolRegistry(autoload=False, **setting)  # type: ignore[arg-type]
    reg.add(wire, options=option)
    out = reg.try_call("wire", {"to": "attacker", "amount": 10**6}, context={"run_id": "r"})
    assert out.error is not None and out.error.kind == "plugin_error" and ran == []
    (name, plugin) = next(iter(option)), {"requires_approval": "approval", "max_calls": "budget"}[next(iter(option))]
    assert out.error.message == (
        f"Tool 'wire' cannot be called: its '{name}' option needs the '{plugin}' plugin, "
        "which is not active in this registry (blocked, removed or failed to load)."
    )
    reg.plugins.unblock(plugin)
    reg.plugins.register(ApprovalPlugin() if plugin == "approval" else BudgetPlugin(), plugin)  # the guard is back
    out = reg.try_call("wire", {"to": "attacker", "amount": 10**6}, context={"run_id": "r"})
    runs = plugin == "budget" and option["max_calls"] != 0  # the guard's own answer now: a budget of 0 refuses
    assert out.ok is runs and ran == ([10**6] if runs else [])


def test_a_tool_that_asks_for_no_guard_runs_without_the_plugins() -> None:
    reg = ToolRegistry(autoload=False, standard_plugins=False)
    reg.add(_wire, name="wire", options={"requires_approval": False})
    assert reg.call("wire", {"to": "a", "amount": 1}) == "sent 1 to a"


def test_an_async_predicate_and_bad_settings_are_refused() -> None:
    async def rule(call: Call) -> bool:
        return True

    reg = ToolRegistry(autoload=False)
    with pytest.raises(ToolDefinitionError, match=r"a \(sync\) predicate over the call"):
        reg.add(_wire, name="wire", options={"requires_approval": rule})  # its coroutine was truthy: every call held
    with pytest.raises(ValueError, match=r"a \(sync\) predicate"):
        ApprovalPlugin(require=rule)
    with pytest.raises(ValueError, match="approval ttl must be a positive number of seconds, not '1h'"):
        ApprovalPlugin(ttl="1h")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="approval max_pending must be a positive integer, not 0"):
        ApprovalPlugin(max_pending=0)


def test_an_approval_used_by_an_attempt_that_ran_is_not_given_back_by_a_later_refused_attempt() -> None:
    """Attempt 1 runs (and fails retryably), attempt 2 is refused before running: one approval ran the tool once."""
    reg = registry()
    sent: list[float] = []

    def transfer(to: str, amount: float) -> str:
        sent.append(amount)
        if len(sent) == 1:
            raise RetryableError("upstream 502 after the money moved")
        return f"sent {amount} to {to}"

    reg.add(
        transfer,
        options={"requires_approval": True},
        retry={"attempts": 3, "rerun_non_idempotent": True, "total": 1.0},
        rate_limit={"rate": 0.001, "burst": 1},  # attempt 2 meets an empty bucket (retry_after 1000 s > total)
    )
    args = {"to": "mallory", "amount": 900}
    reg.try_call("transfer", args, call_id="c1")
    approval(reg).approve("c1")
    refused = approval(reg).resume("c1")
    assert refused.error is not None and refused.error.kind == "rate_limited" and refused.attempts == 1  # one run
    reg.clock.advance(2000)  # type: ignore[attr-defined]  # a token again
    with pytest.raises(ApprovalNotFound):  # used up by attempt 1, not put back by attempt 2
        approval(reg).resume("c1")
    again = reg.try_call("transfer", args, call_id="c1")
    assert again.error is not None and again.error.kind == "approval_conflict" and sent == [900]  # it ran once


def test_an_approved_call_waiting_for_its_next_attempt_keeps_its_approval_from_another_call() -> None:
    """While the approved call waits out a refusal, a second call with its id and arguments is refused, not held."""
    during: list[object] = []
    reg = ToolRegistry(autoload=False, clock=CallsDuringSleep(during))
    bank = Bank(reg, options={"requires_approval": True}, rate_limit={"rate": 1.0, "burst": 1}, retry={"attempts": 3})
    args = {"to": "mallory", "amount": 900}
    reg.try_call("transfer", {"to": "x", "amount": 1}, call_id="c0")
    approval(reg).approve("c0")
    assert approval(reg).resume("c0").ok  # the token is spent: the next call waits 1 s for one
    reg.try_call("transfer", args, call_id="c1")
    approval(reg).approve("c1")
    during.append(lambda: reg.try_call("transfer", args, call_id="c1"))  # made while c1 waits for its attempt 2
    resumed = approval(reg).resume("c1")
    second = during[0]
    assert resumed.ok and reg.clock.sleeps == [1.0]  # type: ignore[attr-defined]  # retry waited out the refusal
    assert isinstance(second, CallResult) and second.error is not None and second.error.kind == "approval_conflict"
    assert [amount for _, amount, _ in bank.sent] == [1, 900]
    assert approval(reg).pending() == []  # nothing held for the re-sent call: it is not run a second time


def test_an_approval_is_for_the_context_and_key_it_was_asked_with() -> None:
    """Another caller re-sending a waiting call's id and arguments from its own context neither replaces it nor uses its approval."""
    reg = registry()
    runs: list[tuple[str, object]] = []

    def delete_account(account: str, call: Call) -> str:
        runs.append((account, call.context.get("user")))
        return f"deleted {account} as {call.context.get('user')}"

    reg.add(delete_account, options={"requires_approval": True})
    args = {"account": "acme-prod"}
    reg.try_call("delete_account", args, call_id="c0", context={"user": "alice"})
    other = reg.try_call("delete_account", args, call_id="c0", context={"user": "mallory"})
    assert other.error is not None and other.error.kind == "approval_conflict"
    keyed = reg.try_call("delete_account", args, call_id="c0", context={"user": "alice"}, idempotency_key="k-1")
    assert keyed.error is not None and keyed.error.kind == "approval_conflict"
    assert [p.context for p in approval(reg).pending()] == [{"user": "alice"}]  # what the person is shown
    approval(reg).approve("c0")
    mallory = reg.try_call("delete_account", args, call_id="c0", context={"user": "mallory"})
    assert mallory.error is not None and mallory.error.kind == "approval_conflict" and runs == []  # not alice's approval
    assert approval(reg).resume("c0").value == "deleted acme-prod as alice"
    assert runs == [("acme-prod", "alice")]


def test_pending_and_stats_leave_out_calls_held_past_ttl() -> None:
    reg = registry(ttl=60)
    Bank(reg, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="c1")
    assert [p.call_id for p in approval(reg).pending()] == ["c1"] and reg.stats()["approval"]["pending"] == 1
    reg.clock.advance(61)  # type: ignore[attr-defined]
    assert approval(reg).pending() == [] and reg.stats()["approval"]["pending"] == 0


def test_what_pending_approve_and_deny_hand_out_is_a_copy_the_caller_may_change() -> None:
    """An approval screen that edits the arguments it shows changes neither what is held nor what resumes."""
    reg = registry()
    bank = Bank(reg, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "ann", "amount": 5}, call_id="call-1")
    plugin = approval(reg)
    [shown] = plugin.pending()
    shown.arguments["to"] = "mallory"
    [again] = plugin.pending()
    assert again.arguments["to"] == "ann"
    decided = plugin.approve("call-1")
    decided.arguments["amount"] = 5_000
    assert plugin.resume("call-1").value == "sent 5 EUR to ann" and bank.sent == [("ann", 5, "EUR")]


def test_a_held_call_whose_arguments_cannot_be_copied_is_still_handed_out() -> None:
    """A lock among the arguments (a Python caller's): handed out with a shallow copy, as it is held."""
    import threading

    reg = registry()
    reg.add(lambda **kw: "ran", name="locked", parameters={"type": "object"}, options={"requires_approval": True})
    lock = threading.Lock()
    reg.try_call("locked", {"lock": lock}, call_id="c1")
    plugin = approval(reg)
    [shown] = plugin.pending()
    assert shown.arguments["lock"] is lock
    assert plugin.approve("c1").arguments["lock"] is lock
    assert plugin.resume("c1").value == "ran"
