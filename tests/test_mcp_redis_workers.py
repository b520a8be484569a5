"""Several ``harness-one serve --transport http`` workers on one Redis hold one rate limit together.

Three worker processes (as behind a load balancer) get ``HARNESS_ONE_REDIS_URL`` pointing at the
test redis-server; the official ``mcp`` SDK client calls all three at once. The tool's bucket is
``burst`` tokens refilled at ``rate`` per second, so together they admit ``burst + floor(rate * t)``
calls (plus or minus one); with a bucket per worker they would admit ``burst`` each.
"""

from __future__ import annotations

import asyncio
import math
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from mcp_support import Session, http_server
from redis_support import RedisServer

from harness_one.mcp import ERROR_META_KEY

WORKERS, CALLS_EACH, BURST, RATE = 3, 4, 5, 0.001  # per-worker buckets would admit all 12 calls

TOOLS = f'''
import os

from harness_one import defineTool


@defineTool(registry=None, rate_limit={{"rate": {RATE}, "burst": {BURST}}})
def ticket() -> int:
    """Take a ticket; the answer is the serving worker's process id."""
    return os.getpid()
'''


async def test_workers_share_one_rate_limit(
    redis_server: RedisServer, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "ticket_tools.py"
    tools.write_text(TOOLS)
    monkeypatch.setenv("HARNESS_ONE_REDIS_URL", redis_url)  # wins over the helper's HARNESS_ONE_STATE
    monkeypatch.setenv("HARNESS_ONE_TOOLS", str(tools))
    with ExitStack() as stack:
        urls = [stack.enter_context(http_server(tmp_path)) for _ in range(WORKERS)]
        assert len(set(urls)) == WORKERS
        async with Session(urls[0]) as a, Session(urls[1]) as b, Session(urls[2]) as c:
            started = time.monotonic()
            results: list[Any] = await asyncio.gather(
                *(client.call_tool("ticket", {}) for _ in range(CALLS_EACH) for client in (a, b, c))
            )
            elapsed = time.monotonic() - started
    admitted = [r.structured_content["result"] for r in results if not r.is_error]
    refused = [r.meta[ERROR_META_KEY] for r in results if r.is_error]
    expected = BURST + math.floor(RATE * elapsed)
    assert abs(len(admitted) - expected) <= 1, (len(admitted), expected, elapsed)
    assert len(admitted) + len(refused) == WORKERS * CALLS_EACH
    assert len(set(admitted)) >= 2  # the admitted calls were served by different workers
    assert {e["kind"] for e in refused} == {"rate_limited"}
    assert all(0 < e["retry_after"] <= 1 / RATE for e in refused)
    assert any(b"ticket" in key for key in redis_server.client().keys("*"))  # the bucket lives in Redis
