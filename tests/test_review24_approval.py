"""Review 24 (approval): copies around uncopyable values, the held context, given-back decisions past ttl,
a plugin shared by registries on different clocks, and a grant under a person's decision."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import threading
import weakref
from collections import OrderedDict, defaultdict
from typing import Any, NamedTuple

import pytest
from agents import Agent, RunConfig, Runner, ToolApprovalItem
from approval_support import Bank
from test_integration_openai_agents_approval import ScriptedModel

from harness_one import Call, ManualClock, PluginError, SystemClock, ToolRegistry, define_tool
from harness_one._clock import SYSTEM_CLOCK
from harness_one.dispatch import dispatch
from harness_one.integrations._common import grant_approval
from harness_one.integrations.openai_agents import to_openai_agents
from harness_one.state import WallClock
from harness_one_plugins.approval import ApprovalConflict, ApprovalDenied, ApprovalNotFound, ApprovalPlugin, _own


def approval_of(registry: ToolRegistry) -> ApprovalPlugin:
    plugin = registry.plugins.get("approval")
    assert isinstance(plugin, ApprovalPlugin)
    return plugin


# ---------------------------------------------------------------- 2. one uncopyable value


def test_one_uncopyable_value_leaves_the_rest_copied() -> None:
    registry = ToolRegistry(autoload=False)
    got: list[tuple[dict[str, Any], list[str], Any]] = []

    @define_tool(registry=registry, options={"requires_approval": True})
    def send(to: dict[str, Any], cc: list[str], lock: Any = None) -> str:
        """Send."""
        got.append((to, cc, lock))
        return "ok"

    lock = threading.Lock()
    arguments: dict[str, Any] = {"to": {"iban": "DE89370400440532013000"}, "cc": ["ann"], "lock": lock}
    waiting = registry.try_call("send", arguments, call_id="c")
    assert waiting.error is not None and waiting.error.kind == "approval_required"
    approval = approval_of(registry)
    waiting.error.arguments["to"]["iban"] = "DE89************3000"  # a UI masks what it shows
    waiting.error.arguments["cc"].append("mallory")
    approval.pending()[0].arguments["cc"].append("edited-in-pending")
    arguments["to"]["iban"] = "changed-by-caller"  # the caller's own dict, changed afterwards
    arguments["cc"].append("caller")
    assert waiting.error.arguments["lock"] is lock  # only what cannot be copied is shared

    approval.approve("c")
    result = approval.resume("c")
    assert result.ok, result.error
    assert got == [({"iban": "DE89370400440532013000"}, ["ann"], lock)]


def test_uncopyable_value_inside_nested_containers() -> None:
    registry = ToolRegistry(autoload=False)
    got: list[Any] = []

    @define_tool(registry=registry, options={"requires_approval": True})
    def send(items: Any) -> str:
        """Send."""
        got.append(items)
        return "ok"

    lock = threading.Lock()
    inner = {"k": "v"}
    items: list[Any] = ["a", [lock, inner], inner]  # one dict met twice: copied once, as a deep copy does
    waiting = registry.try_call("send", {"items": items}, call_id="c")
    assert waiting.error is not None and waiting.error.kind == "approval_required"
    shown = waiting.error.arguments["items"]
    assert shown[1][1] is shown[2] and shown[1][1] is not inner and shown[1][0] is lock
    shown[1][1]["k"] = "masked"
    approval = approval_of(registry)
    held = approval.pending()[0].arguments["items"]
    assert held[1][1] == {"k": "v"} and held[1][0] is lock


# ---------------------------------------------------------------- 3. the held context is the caller's


class Session:
    """A request's session object: equal only to itself (a deep copy is not it)."""

    def __init__(self) -> None:
        self.audit: list[str] = []


def session_bank() -> tuple[ToolRegistry, list[int]]:
    registry = ToolRegistry(autoload=False)
    ran: list[int] = []

    @define_tool(registry=registry, options={"requires_approval": True})
    def transfer(to: str, amount: int, call: Call) -> str:
        """Send."""
        call.context["session"].audit.append(f"transfer {amount} to {to}")
        ran.append(amount)
        return f"sent {amount} to {to}"

    return registry, ran


def test_the_same_call_again_with_a_context_object_equal_only_to_itself_runs() -> None:
    registry, ran = session_bank()
    context = {"session": Session()}
    first = registry.try_call("transfer", {"to": "bob", "amount": 5}, context=context, call_id="c1")
    assert first.error is not None and first.error.kind == "approval_required"
    approval_of(registry).approve("c1")
    again = registry.try_call("transfer", {"to": "bob", "amount": 5}, context=context, call_id="c1")
    assert again.ok and again.value == "sent 5 to bob"
    assert ran == [5] and context["session"].audit == ["transfer 5 to bob"]


def test_dispatch_re_sent_after_a_decision_meets_it_with_a_session_in_the_context() -> None:
    registry, ran = session_bank()
    approval = approval_of(registry)
    context = {"session": Session()}

    def tool_call(call_id: str, amount: int) -> list[dict[str, Any]]:
        arguments = json.dumps({"to": "cy", "amount": amount})
        return [{"id": call_id, "type": "function", "function": {"name": "transfer", "arguments": arguments}}]

    assert [held.call_id for held in dispatch(registry, tool_call("call_8", 900), context=context).pending] == ["call_8"]
    approval.approve("call_8")
    assert dispatch(registry, tool_call("call_8", 900), context=context) == [
        {"role": "tool", "tool_call_id": "call_8", "content": "sent 900 to cy"}
    ]
    dispatch(registry, tool_call("call_9", 5), context=context)
    approval.deny("call_9", "no")
    denied = (
        "Error: The call of 'transfer' was denied: no. Do not make it again with these arguments; "
        "continue without it, or ask the user what to do instead."
    )
    for _ in range(2):  # the denial, and again once it was used
        answer = dispatch(registry, tool_call("call_9", 5), context=context)
        assert answer == [{"role": "tool", "tool_call_id": "call_9", "content": denied}]
    assert ran == [900]


def test_resume_runs_with_the_callers_context_objects() -> None:
    registry, _ = session_bank()
    approval = approval_of(registry)
    session = Session()
    registry.try_call("transfer", {"to": "bo", "amount": 9}, context={"session": session}, call_id="c")
    assert approval.pending()[0].context["session"] is session
    approval.approve("c")
    result = approval.resume("c")
    assert result.ok and result.value == "sent 9 to bo"
    assert session.audit == ["transfer 9 to bo"]  # the tool wrote to the application's session, not a copy


# ---------------------------------------------------------------- 4. a given-back decision past ttl


def one_token_gated(clock: ManualClock) -> ToolRegistry:
    """A registry with tool ``t``: held for approval, and one token of rate limit (refills in 10^5 s)."""
    registry = ToolRegistry(autoload=False, clock=clock)

    @define_tool(registry=registry, rate_limit={"rate": 1 / 100000, "burst": 1}, options={"requires_approval": True})
    def t(x: int) -> int:
        """T."""
        return x

    return registry


def given_back_past_ttl() -> tuple[ToolRegistry, ApprovalPlugin]:
    """c1 approved at 0, refused by the rate limit after c2 was approved at 10 (given back), then 3605 s old."""
    clock = ManualClock()
    registry = one_token_gated(clock)
    approval = approval_of(registry)
    registry.try_call("t", {"x": 0}, call_id="burn")
    approval.approve("burn")
    assert registry.try_call("t", {"x": 0}, call_id="burn").ok  # takes the only token
    registry.try_call("t", {"x": 1}, call_id="c1")
    approval.approve("c1")
    clock.advance(10)
    registry.try_call("t", {"x": 2}, call_id="c2")
    approval.approve("c2")
    refused = registry.try_call("t", {"x": 1}, call_id="c1")
    assert refused.error is not None and refused.error.kind == "rate_limited"  # the approval is given back
    clock.advance(3595)  # c1's decision is 3605 s old, c2's 3595 s
    return registry, approval


def test_resume_of_a_given_back_decision_past_ttl_is_not_found() -> None:
    _, approval = given_back_past_ttl()
    with pytest.raises(ApprovalNotFound, match="No decision was made for call id 'c1'"):
        approval.resume("c1")
    assert approval.pending() == []  # not held again for a new decision


def test_a_given_back_decision_is_swept_at_its_ttl() -> None:
    _, approval = given_back_past_ttl()
    assert approval.pending() == []  # sweeps
    assert approval.withdraw("c1") is None  # swept, not left behind c2: nothing to withdraw
    assert approval.withdraw("c2") is not None  # still fresh


# ---------------------------------------------------------------- 5. one plugin, registries on different clocks


def test_a_shared_plugin_refuses_a_registry_on_another_clock() -> None:
    approval = ApprovalPlugin(ttl=60)
    ToolRegistry(autoload=False, clock=ManualClock(), plugins=[approval])
    with pytest.raises(PluginError, match=r"give the plugin its own clock \(ApprovalPlugin\(clock=\.\.\.\)\)"):
        ToolRegistry(autoload=False, plugins=[approval])


def test_a_shared_plugin_serves_registries_on_its_clock() -> None:
    clock = ManualClock(100.0)
    approval = ApprovalPlugin(ttl=60, clock=clock)
    first = ToolRegistry(autoload=False, plugins=[approval])
    second = ToolRegistry(autoload=False, clock=ManualClock(), plugins=[approval])
    shared = ApprovalPlugin()  # no clock: both registries on the system clock share it
    ToolRegistry(autoload=False, plugins=[shared])
    ToolRegistry(autoload=False, plugins=[shared])
    for registry in (first, second):

        @define_tool(registry=registry, options={"requires_approval": True})
        def t(x: int) -> int:
            """T."""
            return x

    second.try_call("t", {"x": 1}, call_id="c")
    assert [p.requested for p in approval.pending()] == [100.0]


# ---------------------------------------------------------------- 6. a grant under a person's decision


def simple() -> tuple[ToolRegistry, list[int]]:
    registry = ToolRegistry(autoload=False)
    ran: list[int] = []

    @define_tool(registry=registry, options={"requires_approval": True})
    def pay(amount: int) -> str:
        """Pay."""
        ran.append(amount)
        return f"paid {amount}"

    return registry, ran


def test_a_grant_does_not_replace_a_persons_denial() -> None:
    registry, ran = simple()
    approval = approval_of(registry)
    registry.try_call("pay", {"amount": 5}, call_id="c")
    approval.deny("c", "not today")
    with pytest.raises(ApprovalConflict, match="Call id 'c' was denied already by a person; a grant does not replace"):
        approval.grant(registry, registry.get("pay"), {"amount": 5}, call_id="c")
    with pytest.raises(ApprovalDenied, match="was denied: not today"):
        registry.call("pay", {"amount": 5}, call_id="c")
    with pytest.raises(ApprovalConflict, match="Call id 'c' was denied already by a person"):  # used, within ttl
        approval.grant(registry, registry.get("pay"), {"amount": 5}, call_id="c")
    assert ran == []


def test_a_grant_does_not_replace_a_persons_approval_of_other_arguments() -> None:
    registry, ran = simple()
    approval = approval_of(registry)
    registry.try_call("pay", {"amount": 5}, call_id="c")
    approval.approve("c")
    with pytest.raises(ApprovalConflict, match="Call id 'c' was approved already by a person"):
        approval.grant(registry, registry.get("pay"), {"amount": 7}, call_id="c")
    assert approval.resume("c").value == "paid 5"  # the person's approval still holds
    assert ran == [5]


def test_a_grant_replaces_an_earlier_grant() -> None:
    registry, ran = simple()
    approval = approval_of(registry)
    tool = registry.get("pay")
    assert approval.grant(registry, tool, {"amount": 5}, call_id="g")
    assert approval.grant(registry, tool, {"amount": 6}, call_id="g")
    assert registry.call("pay", {"amount": 6}, call_id="g") == "paid 6"
    assert ran == [6]


def test_grant_approval_under_a_persons_denial_leaves_the_call_refused() -> None:
    registry, ran = simple()
    approval = approval_of(registry)
    registry.try_call("pay", {"amount": 5}, call_id="c")
    approval.deny("c", "not today")
    grant_approval(registry, "c", registry.get("pay"), '{"amount": 5}', context=None)  # does not raise
    result = registry.try_call("pay", {"amount": 5}, call_id="c")
    assert result.error is not None and result.error.kind == "approval_denied"
    assert ran == []


def test_an_sdk_approval_under_a_persons_harness_denial_is_refused_and_the_run_goes_on() -> None:
    bank = Bank(per=1000)
    held = bank.registry.try_call("transfer", {"to": "eve", "amount": 500}, context={"user": "alice"}, call_id="c1")
    assert held.error is not None and held.error.kind == "approval_required"
    bank.approval.deny("c1", "unknown payee")  # a person denied it in the harness
    model = ScriptedModel([("c1", {"to": "eve", "amount": 500})])
    tool = to_openai_agents("transfer", bank.registry, context=lambda ctx: {"user": ctx.context})
    agent = Agent(name="bank", instructions="pay", model=model, tools=[tool])
    config = RunConfig(tracing_disabled=True)

    async def scenario() -> Any:
        result = await Runner.run(agent, "pay", context="alice", run_config=config)
        [item] = result.interruptions
        assert isinstance(item, ToolApprovalItem)
        state = result.to_state()
        state.approve(item)  # the SDK's person approves: the grant conflicts with the harness's denial
        return await Runner.run(agent, state, run_config=config)

    result = asyncio.run(scenario())
    assert result.final_output == "done"
    answers = {
        item["call_id"]: item["output"]
        for item in model.inputs[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
    assert answers == {
        "c1": "Error: The call of 'transfer' was denied: unknown payee. Do not make it again with these arguments; "
        "continue without it, or ask the user what to do instead."
    }
    assert bank.sent == []


# ---------------------------------------------------------------- D1.1 the context a call was asked with


def account_bank() -> tuple[ToolRegistry, list[tuple[int, str]]]:
    registry = ToolRegistry(autoload=False)
    ran: list[tuple[int, str]] = []

    @define_tool(registry=registry, options={"requires_approval": True})
    def transfer(amount: int, call: Call) -> str:
        """Transfer from the caller's account."""
        ran.append((amount, call.context["account"]["id"]))
        return f"sent {amount}"

    return registry, ran


OTHER_CALL = (
    "Another call of 'transfer' was already decided under call id c1; a call id names one call "
    "(its tool as registered, arguments, context and idempotency key). Make this call with a new call id."
)


def test_resume_after_a_nested_context_value_changed_is_refused_not_run() -> None:
    registry, ran = account_bank()
    approval = approval_of(registry)
    context = {"account": {"id": "acct-1"}}
    registry.try_call("transfer", {"amount": 500}, context=context, call_id="c1")
    context["account"]["id"] = "acct-2"  # the caller's session switches account after the hold
    assert approval.pending()[0].context == {"account": {"id": "acct-1"}}  # the person is shown what was asked
    approval.approve("c1")
    result = approval.resume("c1")
    assert result.error is not None and result.error.kind == "approval_conflict"
    assert str(result.error) == OTHER_CALL
    assert ran == []


def test_the_same_call_id_again_after_a_nested_context_value_changed_is_refused() -> None:
    registry, ran = account_bank()
    approval = approval_of(registry)
    context = {"account": {"id": "acct-1"}}
    registry.try_call("transfer", {"amount": 7}, context=context, call_id="c1")
    approval.approve("c1")
    context["account"]["id"] = "acct-9"
    again = registry.try_call("transfer", {"amount": 7}, context=context, call_id="c1")
    assert again.error is not None and again.error.kind == "approval_conflict"
    assert str(again.error) == OTHER_CALL
    assert ran == []
    # the context it was asked with, rebuilt by another request (equal, not the same objects), is the same call
    rebuilt = registry.try_call("transfer", {"amount": 7}, context={"account": {"id": "acct-1"}}, call_id="c1")
    assert rebuilt.ok and rebuilt.value == "sent 7"
    assert ran == [(7, "acct-1")]


def test_masking_the_context_pending_shows_changes_neither_the_caller_nor_the_held_call() -> None:
    registry, ran = account_bank()
    approval = approval_of(registry)
    context = {"account": {"id": "acct-1"}}
    registry.try_call("transfer", {"amount": 500}, context=context, call_id="c1")
    approval.pending()[0].context["account"]["id"] = "acct-*"  # a UI masks what it shows
    approval.approve("c1").context["account"]["id"] = "x"  # and what approve() hands back
    assert context == {"account": {"id": "acct-1"}}
    assert approval.pending() == []
    result = approval.resume("c1")
    assert result.ok and result.value == "sent 500"
    assert ran == [(500, "acct-1")]


# ---------------------------------------------------------------- D1.3 one plugin, registries on system clocks


def test_a_shared_plugin_serves_registries_each_on_its_own_system_clock() -> None:
    for kind in (SystemClock, WallClock):
        shared = ApprovalPlugin()
        ToolRegistry(autoload=False, clock=kind(), plugins=[shared])
        ToolRegistry(autoload=False, clock=kind(), plugins=[shared])  # the same time source: not refused
    other = ApprovalPlugin()
    ToolRegistry(autoload=False, clock=ManualClock(), plugins=[other])
    with pytest.raises(PluginError, match=r"this registry has another \(SystemClock\(\), not ManualClock"):
        ToolRegistry(autoload=False, clock=SystemClock(), plugins=[other])


def test_a_shared_plugin_keeps_no_registry_alive() -> None:
    shared = ApprovalPlugin()
    first = ToolRegistry(autoload=False, plugins=[shared])
    ToolRegistry(autoload=False, plugins=[shared])
    gone = weakref.ref(first)
    del first
    gc.collect()
    assert gone() is None
    assert shared.clock is SYSTEM_CLOCK


# ---------------------------------------------------------------- D1.4 containers of every kind around a lock


@dataclasses.dataclass
class Envelope:
    to: dict[str, str]
    conn: Any


class Pair(NamedTuple):
    to: list[str]
    conn: Any


def test_an_ordered_dict_around_a_lock_is_copied_not_shared() -> None:
    registry = ToolRegistry(autoload=False)
    got: list[dict[str, Any]] = []

    @define_tool(registry=registry, options={"requires_approval": True})
    def send(payload: Any) -> str:
        """Send."""
        got.append(dict(payload))
        return "ok"

    lock = threading.Lock()
    payload = OrderedDict(iban="DE89370400440532013000", conn=lock)
    waiting = registry.try_call("send", {"payload": payload}, call_id="c")
    assert waiting.error is not None and waiting.error.kind == "approval_required"
    shown = waiting.error.arguments["payload"]
    assert type(shown) is OrderedDict and shown is not payload and shown["conn"] is lock
    shown["iban"] = "DE89****3000"  # a UI masks what it shows
    approval = approval_of(registry)
    approval.approve("c")
    result = approval.resume("c")
    assert result.ok, result.error
    assert got == [{"iban": "DE89370400440532013000", "conn": lock}]


def test_every_container_kind_around_a_lock_is_copied() -> None:
    lock = threading.Lock()
    tally: defaultdict[str, list[int]] = defaultdict(list, {"a": [1]})
    values: dict[str, Any] = {
        "defaultdict": (tally, lock),
        "set": {"x", lock},
        "dataclass": Envelope({"iban": "DE89"}, lock),
        "namedtuple": Pair(["ann"], lock),
    }
    mine = _own(values)
    assert mine == values
    tally_copy, shared_lock = mine["defaultdict"]
    assert type(tally_copy) is defaultdict and tally_copy.default_factory is list and shared_lock is lock
    assert tally_copy is not tally and tally_copy["a"] is not tally["a"]
    assert mine["set"] is not values["set"] and lock in mine["set"]
    envelope = mine["dataclass"]
    assert type(envelope) is Envelope and envelope is not values["dataclass"]
    assert envelope.to is not values["dataclass"].to and envelope.conn is lock
    pair = mine["namedtuple"]
    assert type(pair) is Pair and pair.to is not values["namedtuple"].to and pair.conn is lock


# ---------------------------------------------------------------- D1.5 giving an approval back moves nothing


class CountingOrder(OrderedDict[str, Any]):
    moves = 0

    def move_to_end(self, key: str, last: bool = True) -> None:
        type(self).moves += 1
        super().move_to_end(key, last)


def test_giving_an_approval_back_moves_no_newer_decision_and_it_still_expires_at_its_ttl() -> None:
    clock = ManualClock()
    registry = one_token_gated(clock)
    approval = approval_of(registry)
    registry.try_call("t", {"x": -1}, call_id="burn")
    approval.approve("burn")
    assert registry.try_call("t", {"x": -1}, call_id="burn").ok  # takes the only token
    registry.try_call("t", {"x": 0}, call_id="c0")
    approval.approve("c0")
    for i in range(1, 200):
        clock.advance(1)
        registry.try_call("t", {"x": i}, call_id=f"c{i}")
        approval.approve(f"c{i}")
    approval._decisions = CountingOrder(approval._decisions)
    refused = registry.try_call("t", {"x": 0}, call_id="c0")
    assert refused.error is not None and refused.error.kind == "rate_limited"  # given back
    assert CountingOrder.moves == 0
    clock.advance(3601 - 199)  # c0 decided at 0 is past ttl; c1.. are not
    assert approval.withdraw("c0") is None  # swept at its ttl, though put back last
    assert approval.withdraw("c199") is not None
    # withdrawn, c0 made again is held for a new decision, which the given-back one's sweep leaves alone
    registry.try_call("t", {"x": 0}, call_id="c0")
    approval.approve("c0")
    clock.advance(3000)
    assert approval.withdraw("c0") is not None
