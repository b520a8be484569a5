"""The approval plugin: the same call made again while its approved attempt runs is refused, never held or run twice."""

from __future__ import annotations

import asyncio
import threading

from approval_support import CallsDuringSleep

from harness_one import CallResult, ManualClock, ToolRegistry
from harness_one_plugins.approval import ApprovalConflict, ApprovalNotFound, ApprovalPlugin, ApprovalRequired

RUNNING = (
    "The call of 'transfer' is running now under call id c7, as approved; it is not held or run a second time "
    "under this id. Do not make it again: its result comes from the call under way."
)


def registry() -> ToolRegistry:
    return ToolRegistry(autoload=False, clock=ManualClock())


def approval(reg: ToolRegistry) -> ApprovalPlugin:
    plugin = reg.plugins.get("approval")
    assert isinstance(plugin, ApprovalPlugin)
    return plugin


def assert_never_runs_again(reg: ToolRegistry, runs: list[object]) -> None:
    """After the approved call ran: nothing waits under its id, and it cannot be approved and run again."""
    plugin = approval(reg)
    assert plugin.pending() == []
    after = reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c7")
    assert isinstance(after.error, ApprovalConflict) and "already ran under call id c7" in after.error.message
    try:
        plugin.approve("c7")
    except ApprovalNotFound as exc:
        assert "No call waits for approval under call id 'c7'" in exc.message
    else:  # pragma: no cover - the failure this test guards against
        raise AssertionError("the call that ran was approved a second time")
    assert len(runs) == 1


def test_the_same_call_made_again_while_it_runs_is_refused_not_held() -> None:
    reg = registry()
    runs: list[object] = []
    again: list[CallResult] = []

    def transfer(to: str, amount: int) -> str:
        runs.append((to, amount))
        # the agent loop re-sends its turn (same call id, tool, arguments, context) while this runs
        again.append(reg.try_call("transfer", {"to": to, "amount": amount}, call_id="c7"))
        return f"sent {amount} to {to}"

    reg.add(transfer, options={"requires_approval": True})
    held = reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c7")
    assert isinstance(held.error, ApprovalRequired)
    approval(reg).approve("c7")
    result = approval(reg).resume("c7")
    assert result.ok and result.value == "sent 500 to bob"
    [refused] = again
    assert isinstance(refused.error, ApprovalConflict) and refused.error.kind == "approval_conflict"
    assert refused.error.message == RUNNING and refused.error.call_id == "c7" and refused.error.tool == "transfer"
    assert RUNNING in refused.for_model()
    assert_never_runs_again(reg, runs)


def test_the_same_call_made_again_from_another_thread_while_it_runs_is_refused() -> None:
    reg = registry()
    runs: list[object] = []
    started, release = threading.Event(), threading.Event()

    def transfer(to: str, amount: int) -> str:
        runs.append((to, amount))
        started.set()
        assert release.wait(30)
        return f"sent {amount} to {to}"

    reg.add(transfer, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c7")
    approval(reg).approve("c7")
    first: list[CallResult] = []
    worker = threading.Thread(target=lambda: first.append(approval(reg).resume("c7")))
    worker.start()
    try:
        assert started.wait(30)
        refused = reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c7")
    finally:
        release.set()
        worker.join()
    assert isinstance(refused.error, ApprovalConflict) and refused.error.message == RUNNING
    assert first[0].ok and first[0].value == "sent 500 to bob"
    assert_never_runs_again(reg, runs)


def test_the_same_call_made_again_while_it_runs_async_is_refused_not_held() -> None:
    reg = registry()
    runs: list[object] = []

    async def main() -> None:
        started, release = asyncio.Event(), asyncio.Event()

        async def transfer(to: str, amount: int) -> str:
            runs.append((to, amount))
            started.set()
            await release.wait()
            return f"sent {amount} to {to}"

        reg.add(transfer, options={"requires_approval": True})
        held = await reg.atry_call("transfer", {"to": "bob", "amount": 500}, call_id="c7")
        assert isinstance(held.error, ApprovalRequired)
        approval(reg).approve("c7")
        first = asyncio.ensure_future(approval(reg).aresume("c7"))
        await started.wait()
        refused = await reg.atry_call("transfer", {"to": "bob", "amount": 500}, call_id="c7")
        release.set()
        result = await first
        assert isinstance(refused.error, ApprovalConflict) and refused.error.message == RUNNING
        assert result.ok and result.value == "sent 500 to bob"

    asyncio.run(main())
    assert_never_runs_again(reg, runs)


def test_another_call_under_the_id_while_it_runs_is_still_a_conflict_of_calls() -> None:
    reg = registry()
    again: list[CallResult] = []

    def transfer(to: str, amount: int) -> str:
        again.append(reg.try_call("transfer", {"to": to, "amount": amount + 1}, call_id="c7"))
        return f"sent {amount} to {to}"

    reg.add(transfer, options={"requires_approval": True})
    reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c7")
    approval(reg).approve("c7")
    assert approval(reg).resume("c7").ok
    [other] = again
    assert isinstance(other.error, ApprovalConflict)
    assert "Another call of 'transfer' was already decided under call id c7" in other.error.message


def test_the_same_call_made_again_while_it_waits_for_its_next_attempt_is_refused_not_held() -> None:
    during: list[object] = []
    reg = ToolRegistry(autoload=False, clock=CallsDuringSleep(during))
    runs: list[object] = []

    def transfer(to: str, amount: int) -> str:
        runs.append((to, amount))
        return f"sent {amount} to {to}"

    reg.add(transfer, options={"requires_approval": True}, rate_limit={"rate": 1.0, "burst": 1}, retry={"attempts": 3})
    reg.try_call("transfer", {"to": "x", "amount": 1}, call_id="c0")
    approval(reg).approve("c0")
    assert approval(reg).resume("c0").ok  # the token is spent: the next call waits 1 s for one
    runs.clear()
    reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c7")
    approval(reg).approve("c7")
    during.append(lambda: reg.try_call("transfer", {"to": "bob", "amount": 500}, call_id="c7"))
    resumed = approval(reg).resume("c7")
    [refused] = during
    assert resumed.ok and resumed.value == "sent 500 to bob" and reg.clock.sleeps == [1.0]  # type: ignore[attr-defined]
    assert isinstance(refused, CallResult) and isinstance(refused.error, ApprovalConflict)
    assert refused.error.message == RUNNING
    assert_never_runs_again(reg, runs)
