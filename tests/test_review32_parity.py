"""Review 32: ``call``/``try_call`` and ``acall``/``atry_call`` agree on cancellations and refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness_one import Await, Call, PluginError, ToolError, ToolRegistry, hookimpl
from harness_one.dispatch import adispatch, dispatch


async def _foreign_cancel() -> Any:
    """What a client does whose pending future another task cancelled: our task is not being cancelled."""
    fut = asyncio.get_running_loop().create_future()
    fut.cancel()
    return await fut


def _sync_cancel() -> Any:
    raise asyncio.CancelledError()


class _Guard:
    def __init__(self, hook: str) -> None:
        self.hook = hook

    @hookimpl
    def harness_pre_call(self, call: Call) -> Any:
        return Await(_sync_cancel, _foreign_cancel) if self.hook == "pre" else None

    @hookimpl
    def harness_on_error(self, call: Call, error: ToolError) -> Any:
        return Await(_sync_cancel, _foreign_cancel) if self.hook == "err" else None


def add(a: int, b: int) -> int:
    return a + b


def failing(a: int, b: int) -> int:
    raise ValueError("tool failed")


@pytest.mark.parametrize(("hook", "tool"), [("pre", add), ("err", failing)])
def test_an_awaits_cancelled_error_is_the_hooks_failure_on_both_sides(hook: str, tool: Any) -> None:
    reg = ToolRegistry(standard_plugins=False, autoload=False, plugins={"guard": _Guard(hook)})
    reg.add(tool)
    sync = reg.try_call(tool.__name__, {"a": 1, "b": 2})
    asy = asyncio.run(asyncio.wait_for(reg.atry_call(tool.__name__, {"a": 1, "b": 2}), 10))
    for r in (sync, asy):
        assert not r.ok
        assert type(r.error) is PluginError and r.error.plugin == "guard"
        assert "CancelledError" in str(r.error) and "Tool 'add' failed" not in str(r.error)
        assert r.ran is (hook == "err")
    with pytest.raises(PluginError):
        asyncio.run(asyncio.wait_for(reg.acall(tool.__name__, {"a": 1, "b": 2}), 10))


def test_adispatch_answers_as_dispatch_when_an_await_raises_cancelled_error() -> None:
    reg = ToolRegistry(standard_plugins=False, autoload=False, plugins={"guard": _Guard("pre")})
    reg.add(add)
    calls = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}]
    expected = list(dispatch(reg, calls))
    assert "Internal error in plugin 'guard': CancelledError" in expected[0]["content"]
    assert list(asyncio.run(asyncio.wait_for(adispatch(reg, calls), 10))) == expected


def test_cancelling_the_task_during_an_await_still_cancels_the_call() -> None:
    started = asyncio.Event()

    async def wait_forever() -> Any:
        started.set()
        await asyncio.Event().wait()

    class Slow:
        @hookimpl
        def harness_pre_call(self, call: Call) -> Any:
            return Await(lambda: None, wait_forever)

    reg = ToolRegistry(standard_plugins=False, autoload=False, plugins={"slow": Slow()})
    reg.add(add)

    async def go() -> None:
        task = asyncio.create_task(reg.atry_call("add", {"a": 1, "b": 2}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(go(), 10))


class _EqBoom(str):
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq boom")

    __hash__ = str.__hash__


class _HashBoom:
    def __hash__(self) -> int:
        raise ValueError("hash boom")


@pytest.mark.parametrize("name", [_EqBoom("add"), _HashBoom()])
def test_call_of_a_hostile_name_raises_a_tool_error(name: Any) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(add)
    with pytest.raises(ToolError) as sync:
        reg.call(name, {"a": 1, "b": 2})
    with pytest.raises(ToolError) as asy:
        asyncio.run(reg.acall(name, {"a": 1, "b": 2}))
    assert str(sync.value) == str(asy.value)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [("nope", {}), ("add", {"context": [1]}), ("add", {"idempotency_key": 7}), ("add", {"arguments": {"a": "x"}})],
)
def test_a_refusal_keeps_the_callers_call_id_as_text(name: str, kwargs: dict[str, Any]) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(add)
    arguments = kwargs.pop("arguments", {"a": 1, "b": 2})
    r = reg.try_call(name, arguments, call_id=5, **kwargs)  # type: ignore[arg-type]
    assert not r.ok and r.call_id == "5" and r.error is not None and r.error.call_id == "5"
    ar = asyncio.run(reg.atry_call(name, arguments, call_id=5, **kwargs))  # type: ignore[arg-type]
    assert not ar.ok and ar.call_id == "5"
