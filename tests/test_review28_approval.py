"""Review 28 (approval): the `destructive` rule with a `require` predicate, and the `clock` option's type."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness_one import ManualClock, PluginError, ToolRegistry
from harness_one.integrations._common import approval_possible
from harness_one_plugins.approval import ApprovalPlugin


def approval_of(registry: ToolRegistry) -> ApprovalPlugin:
    plugin = registry.plugins.get("approval")
    assert isinstance(plugin, ApprovalPlugin)
    return plugin


def bank(ran: list[str], **options: Any) -> ToolRegistry:
    registry = ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"approval": options})

    def pay(amount: int) -> str:
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    def drop_table(name: str) -> str:
        ran.append(f"drop {name}")
        return f"dropped {name}"

    def read_rows(name: str) -> str:
        ran.append(f"read {name}")
        return f"rows of {name}"

    def drop_index(name: str) -> str:
        ran.append(f"drop index {name}")
        return f"dropped index {name}"

    registry.add(pay)
    registry.add(drop_table, destructive=True)
    registry.add(read_rows)
    registry.add(drop_index, destructive=True, options={"requires_approval": False})  # its own rule decides
    return registry


# ---------------------------------------------------------------- 1. destructive whatever require says


def test_destructive_tool_needs_approval_whatever_the_require_predicate_says() -> None:
    ran: list[str] = []
    registry = bank(ran, destructive=True, require=lambda call: call.tool.name == "pay")
    approval = approval_of(registry)

    dropped = registry.try_call("drop_table", {"name": "users"}, call_id="d1")
    assert dropped.error is not None and dropped.error.kind == "approval_required"
    assert dropped.error.call_id == "d1" and dropped.error.tool == "drop_table"
    paid = registry.try_call("pay", {"amount": 5}, call_id="p1")
    assert paid.error is not None and paid.error.kind == "approval_required"  # the predicate still decides the rest
    read = registry.try_call("read_rows", {"name": "users"}, call_id="r1")
    assert read.ok and read.value == "rows of users"  # the predicate says no, and the tool is not destructive
    index = registry.try_call("drop_index", {"name": "ix"}, call_id="i1")
    assert index.ok and index.value == "dropped index ix"  # a tool's own rule keeps precedence
    assert ran == ["read users", "drop index ix"]

    assert approval.rule_for(registry.get("drop_table")) is True
    assert approval.needs_approval(registry, registry.get("drop_table"), {"name": "users"}) is True
    assert approval.needs_approval(registry, registry.get("read_rows"), {"name": "users"}) is False
    assert approval.needs_approval(registry, registry.get("pay"), {"amount": 5}) is True
    assert approval.needs_approval(registry, registry.get("drop_index"), {"name": "ix"}) is False
    assert approval_possible(registry, registry.get("drop_table")) is True

    approval.approve("d1")
    resumed = approval.resume("d1")
    assert resumed.ok and resumed.value == "dropped users"
    assert ran == ["read users", "drop index ix", "drop users"]


def test_destructive_tool_needs_approval_whatever_the_require_predicate_says_under_acall() -> None:
    ran: list[str] = []
    registry = bank(ran, destructive=True, require=lambda call: False)

    async def main() -> None:
        dropped = await registry.atry_call("drop_table", {"name": "users"}, call_id="d1")
        assert dropped.error is not None and dropped.error.kind == "approval_required"
        assert dropped.error.call_id == "d1" and dropped.error.tool == "drop_table"
        paid = await registry.atry_call("pay", {"amount": 5}, call_id="p1")
        assert paid.ok and paid.value == "paid 5"
        approval_of(registry).approve("d1")
        resumed = await approval_of(registry).aresume("d1")
        assert resumed.ok and resumed.value == "dropped users"

    asyncio.run(main())
    assert ran == ["pay 5", "drop users"]


def test_destructive_off_leaves_destructive_tools_to_the_require_predicate() -> None:
    ran: list[str] = []
    registry = bank(ran, require=lambda call: call.tool.name == "pay")
    approval = approval_of(registry)
    dropped = registry.try_call("drop_table", {"name": "users"}, call_id="d1")
    assert dropped.ok and dropped.value == "dropped users"
    assert approval.needs_approval(registry, registry.get("drop_table"), {"name": "users"}) is False
    assert approval.needs_approval(registry, registry.get("pay"), {"amount": 5}) is True


def test_require_true_with_destructive_holds_every_tool_without_its_own_rule() -> None:
    ran: list[str] = []
    registry = bank(ran, destructive=True, require=True)
    approval = approval_of(registry)
    assert [approval.rule_for(registry.get(name)) for name in ("pay", "drop_table", "read_rows", "drop_index")] == [
        True,
        True,
        True,
        False,
    ]


# ---------------------------------------------------------------- 3. the clock option has now()


@pytest.mark.parametrize("clock", ["x", 3, object()])
def test_a_clock_without_now_is_refused_when_the_plugin_is_built(clock: Any) -> None:
    with pytest.raises(ValueError) as raised:
        ApprovalPlugin(clock=clock)
    assert str(raised.value) == f"approval clock must be a clock (an object with now()), not {clock!r}"
    with pytest.raises(PluginError) as loaded:
        ToolRegistry(autoload=False, plugin_options={"approval": {"clock": clock}})
    assert "Plugin 'approval' cannot be built with its options ['clock']" in str(loaded.value)
    assert f"approval clock must be a clock (an object with now()), not {clock!r}" in str(loaded.value)


def test_a_clock_with_now_is_the_plugins_clock() -> None:
    clock = ManualClock()
    assert ApprovalPlugin(clock=clock).clock is clock
    assert ApprovalPlugin().clock is None  # the registry's, once added
