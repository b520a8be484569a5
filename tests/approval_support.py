"""The bank the framework adapters' approval tests share: a transfer that needs a person's approval."""

from __future__ import annotations

from typing import Any

from harness_one import Call, ManualClock, ToolRegistry, define_tool
from harness_one_plugins.approval import ApprovalPlugin


class Bank:
    """``transfer`` needs approval above 100 and runs once per ``per`` seconds per user (context
    ``user``, on a manual clock); ``balance`` needs nothing.

    ``sent`` holds ``(call id, to, amount, user)`` of each transfer that ran.
    """

    def __init__(self, *, per: float = 1.0) -> None:
        self.registry = ToolRegistry(autoload=False, clock=ManualClock())
        self.sent: list[tuple[str, str, float, Any]] = []

        @define_tool(
            registry=self.registry,
            rate_limit={"rate": 1 / per, "burst": 1, "key": "user"},
            options={"requires_approval": lambda call: call.arguments["amount"] > 100},
        )
        def transfer(to: str, amount: float, call: Call) -> str:
            """Send money."""
            self.sent.append((call.call_id, to, amount, call.context.get("user")))
            return f"sent {amount:g} to {to}"

        @define_tool(registry=self.registry)
        def balance() -> float:
            """The balance."""
            return 1000.0

    @property
    def approval(self) -> ApprovalPlugin:
        plugin = self.registry.plugins.get("approval")
        assert isinstance(plugin, ApprovalPlugin)
        return plugin


class CallsDuringSleep(ManualClock):
    """A manual clock that makes one more call the first time the registry sleeps (a retry's wait)."""

    def __init__(self, during: list[object]) -> None:
        super().__init__()
        self.during = during

    def sleep(self, seconds: float) -> None:
        if self.during and callable(self.during[0]):
            make = self.during.pop()
            self.during.append(make())  # type: ignore[operator]
        super().sleep(seconds)
