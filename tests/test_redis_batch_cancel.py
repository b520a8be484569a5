"""A cancelled async caller never fails the calls of its neighbours on the loop's kept connection.

The caller that finds no write on the wire sends its own call, and only its own: the calls made
while that write is on the wire go in the next write, sent by a task of the loop. Cancelled while
Redis holds its reply (:class:`HoldingProxy`), it alone gets ``CancelledError``; the calls queued
behind it get their replies and the link is not marked down.
"""

from __future__ import annotations

import asyncio

import pytest
from redis_support import HoldingProxy
from test_cancel_state import awaited, reading

from harness_one.state._redis import _BUCKET, RedisLink


def bucket(burst: int) -> list[object]:
    """A bucket call (client time 0, rate 1) whose bucket holds ``burst`` tokens: 0 admits, 1 waits a second."""
    return ["0", "1", str(burst), "1"]


async def test_cancelling_the_caller_whose_write_is_on_the_wire_fails_no_other_call(proxy: HoldingProxy) -> None:
    link = RedisLink(proxy.url + "?timeout=5")
    await link.arun(_BUCKET, ["warm"], bucket(1))  # connected, the script loaded
    hold = proxy.hold(_BUCKET)
    sender = asyncio.create_task(link.arun(_BUCKET, ["{s}"], bucket(1)))
    await hold.wait()  # Redis answered; the reply is held
    await reading(sender)
    assert "_drain" in awaited(sender)  # it sends its call itself
    # Each neighbour's bucket is empty or full: a reply given to the wrong caller shows.
    behind = [asyncio.create_task(link.arun(_BUCKET, [f"{{n{i}}}"], bucket(i % 2))) for i in range(4)]
    await asyncio.sleep(0)
    assert len(link._batchers[asyncio.get_running_loop()].queue) == 4  # queued behind the write on the wire
    sender.cancel()
    hold.release()
    with pytest.raises(asyncio.CancelledError):
        await sender
    assert [float(reply) for reply in await asyncio.gather(*behind)] == [1.0, 0.0, 1.0, 0.0]
    assert not link._is_down() and link.failures == 0
    assert float(await link.arun(_BUCKET, ["{s}"], bucket(1))) == 1.0  # Redis ran the cancelled call: its token is gone
    await link.aclose()
