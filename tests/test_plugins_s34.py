"""The plugin plan, session 34: ``plan.order`` (and so ``harness-one doctor``) shows on_error implementations in the
order they run, after-decision ones last."""

from __future__ import annotations

from typing import Any

from harness_one import Call, Retry, ToolRegistry, applies_to, hookimpl


def _plugin(tag: str, seen: list[str], **marks: Any) -> Any:
    class Plugin:
        order = 0

        @hookimpl(**marks)
        @applies_to(after_decision=tag == "late")
        def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
            seen.append(tag)
            return Retry(0) if tag == "decider" and call.attempt < 2 else None

    return Plugin()


def test_plan_order_lists_on_error_hooks_as_they_run() -> None:
    seen: list[str] = []
    plugins = {
        "late": _plugin("late", seen, tryfirst=True),
        "decider": _plugin("decider", seen),
        "obs": _plugin("obs", seen, trylast=True),
    }
    reg = ToolRegistry(standard_plugins=False, autoload=False, plugins=plugins)

    def fails() -> None:
        raise ValueError("x")

    reg.add(fails, name="f")
    reg.try_call("f")
    assert seen == ["decider", "obs", "late", "decider", "obs"]  # the decision's round, then the last one's
    assert reg.plugins.plan.order["on_error"] == ("decider", "obs", "late")
