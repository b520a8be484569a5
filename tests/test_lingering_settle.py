"""A cancelled ``acall`` whose sync tool returned before a plugin's ``on_error`` ran: what the plugin
holds for the tool (a concurrency slot, an idempotency claim) is settled through the Redis store's
awaitable twin, not by a blocking round trip in the event loop's thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from gate_support import Gated, cancel_once_entered

from harness_one import (
    Call,
    IdempotencyConflict,
    ToolArgumentError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)
from harness_one_plugins import ConcurrencyPlugin, IdempotencyPlugin


class Slow:
    """An on_error before every other that lasts until the cancelled call's tool has returned."""

    name = "slow"

    def __init__(self, gated: Gated) -> None:
        self.gated = gated

    @hookimpl(tryfirst=True)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        if call.lingering is not None:
            returned = threading.Event()
            call.lingering.then(returned.set)
            self.gated.gate.set()
            assert returned.wait(10)


def cancelled_in_a_loop(reg: ToolRegistry, name: str, gated: Gated, loop_thread: list[int], **options: Any) -> None:
    """``acall(name, **options)`` cancelled once its tool started, in a new event loop whose thread is noted."""

    async def cancel() -> None:
        loop_thread.append(threading.get_ident())
        await cancel_once_entered(reg, name, gated.entered, **options)

    asyncio.run(cancel())


def test_a_slot_whose_tool_returned_before_its_release_is_released_without_blocking_the_loop(redis_url: str) -> None:
    """The slot was released at once, in the event loop's thread, by the Redis store's blocking
    ``release`` (a round trip, up to the link's timeout, with every other task of the loop stopped)."""
    from harness_one.state import RedisLink, RedisSlots

    blocking: list[str] = []  # the store's blocking methods called in the loop's thread
    loop_thread: list[int] = []

    class Watched(RedisSlots):
        def release(self, tool: str, holder: str) -> None:
            if threading.get_ident() in loop_thread:
                blocking.append("release")
            super().release(tool, holder)

    gated = Gated()
    reg = ToolRegistry(autoload=False)
    reg.plugins.replace("concurrency", ConcurrencyPlugin(slots=Watched(RedisLink(redis_url))))
    reg.plugins.register(Slow(gated))
    reg.add(gated, name="work", max_concurrency=1)
    cancelled_in_a_loop(reg, "work", gated, loop_thread)
    assert blocking == []
    assert reg.plugins.get("concurrency").running("work") == 0  # released all the same
    assert reg.call("work") == "done" and gated.runs == [1, 1]


@pytest.mark.parametrize("ends", ["returns", "raises", "refuses"])
def test_a_key_whose_tool_returned_before_its_finish_is_finished_without_blocking_the_loop(redis_url: str, ends: str) -> None:
    """The key was finished (or freed) at once, in the event loop's thread, by the Redis store's
    blocking ``finish``/``release``, not by its awaitable twin."""
    from harness_one.state import Record, RedisLink, RedisStore

    blocking: list[str] = []
    loop_thread: list[int] = []

    class Watched(RedisStore):
        def finish(self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None) -> bool:
            if threading.get_ident() in loop_thread:
                blocking.append("finish")
            return super().finish(scope, key, record, owner=owner, now=now)

        def release(self, scope: str, key: str, *, owner: str | None = None) -> None:
            if threading.get_ident() in loop_thread:
                blocking.append("release")
            super().release(scope, key, owner=owner)

    gated = Gated("charged")
    reg = ToolRegistry(autoload=False)
    reg.plugins.replace("idempotency", IdempotencyPlugin(store=Watched(RedisLink(redis_url))))
    reg.plugins.register(Slow(gated))

    def charge() -> str:
        result = gated()
        if ends == "raises":
            raise OSError("card declined")
        if ends == "refuses":
            raise ToolArgumentError("no such card")
        return result

    reg.add(charge)
    cancelled_in_a_loop(reg, "charge", gated, loop_thread, idempotency_key="pay-1")
    assert blocking == []
    again = reg.try_call("charge", idempotency_key="pay-1")
    assert not isinstance(again.error, IdempotencyConflict)  # the key was settled all the same
    if ends == "returns":  # its value is kept
        assert again.value == "charged" and gated.runs == [1]
    elif ends == "raises":  # its failure is kept
        assert isinstance(again.error, ToolExecutionError) and again.error.replayed and gated.runs == [1]
    else:  # wrong arguments keep nothing: the key was freed, the tool ran again
        assert isinstance(again.error, ToolArgumentError) and not again.error.replayed and gated.runs == [1, 1]


def test_under_call_a_tool_returned_before_on_error_keeps_its_key_and_frees_its_slot() -> None:
    """A thread-mode timeout of a blocking caller whose tool returned before the plugins' ``on_error``:
    settled in the caller's thread (in-memory state): the slot is free, the key keeps the value."""
    gated = Gated("charged")
    reg = ToolRegistry(autoload=False)
    reg.plugins.register(Slow(gated))
    reg.add(gated, name="charge", timeout=0.05, max_concurrency=1)
    assert isinstance(reg.try_call("charge", idempotency_key="pay-1").error, ToolTimeout)
    assert reg.plugins.get("concurrency").running("charge") == 0
    assert reg.call("charge", idempotency_key="pay-1") == "charged" and gated.runs == [1]
