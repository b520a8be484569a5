"""An async tool that swallows its cancellation, as docs/plugins.md describes it: under ``acall``
it has returned (as when awaited directly: asyncio cannot make a coroutine stop); a timeout bounds it
(tests/test_timeouts_review.py). The pipeline's own cancellation handling adds no second cancel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness_one import Call, ToolRegistry, hookimpl


class Errors:
    """Records what on_error hooks were given."""

    def __init__(self) -> None:
        self.seen: list[type[BaseException]] = []

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self.seen.append(type(error))


def registry(fn: Any, **definition: Any) -> tuple[ToolRegistry, Errors]:
    errors = Errors()
    reg = ToolRegistry(autoload=False, plugins={"errors": errors})
    reg.add(fn, name="tool", **definition)
    return reg, errors


async def stubborn() -> str:
    """Swallows its cancellation and answers."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        return "swallowed"
    return "slept"


@pytest.mark.parametrize("method", ["acall", "atry_call"])
def test_a_tool_that_swallows_its_cancel_has_returned(method: str) -> None:
    reg, errors = registry(stubborn)

    async def main() -> Any:
        task = asyncio.ensure_future(getattr(reg, method)("tool", {}))
        for _ in range(5):  # the tool awaits its sleep
            await asyncio.sleep(0)
        task.cancel()
        answer = await asyncio.wait_for(task, 10)
        await asyncio.sleep(0)  # the cancellation ended in the tool: none is left for the caller
        return answer

    answer = asyncio.run(main())
    assert (answer if method == "acall" else answer.value) == "swallowed"
    assert errors.seen == []
