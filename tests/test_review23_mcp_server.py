"""The MCP server against a 23rd review: a client that stops reading its event stream held up ``listChanged``
for every other, progress that went backwards, a stdio server left running for a client gone, and no bound
on the requests read while the client reads no answers."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.message import SessionMessage
from mcp_support import serve_command, server_env
from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse, ToolListChangedNotification

from harness_one import Call, ToolRegistry
from harness_one.mcp import create_server
from harness_one.mcp._stdio import MAX_UNSETTLED, Answering, _Hangup, _Lines

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}).encode() + b"\n"
INITIALIZED = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'


def _request(request_id: int, name: str, arguments: dict[str, Any]) -> bytes:
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return json.dumps(call).encode() + b"\n"


class _Timers:
    """A clock whose sleeps end only when the test says the time has come (:meth:`fire`)."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[None]] = []

    def now(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        pass

    async def asleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        await future

    def fire(self) -> None:
        pending, self.pending = self.pending, []
        for future in pending:
            if not future.done():
                future.set_result(None)


def extra(x: int) -> int:
    """Added while serving."""
    return x


# ---------------------------------------------------------------- 1. listChanged to a client that stopped reading


@pytest.mark.asyncio
async def test_a_client_that_stops_reading_holds_up_no_other_list_changed() -> None:
    """One connection's send that never finished (its client stopped reading its event stream, which filled)
    held every later ``listChanged`` of every other connection, each change one more task stuck on it."""
    timers = _Timers()
    registry = ToolRegistry(autoload=False, clock=timers)  # type: ignore[arg-type]
    registry.add(lambda: "x", name="base", description="Always there.")
    server = create_server(registry)
    bridge = server.lifespan.__self__  # type: ignore[attr-defined]
    stuck_seen: list[Any] = []
    live_seen = asyncio.Queue[Any]()
    full: list[int] = []

    async def stuck(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            stuck_seen.append(message)

    async def live(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            live_seen.put_nowait(message)

    async def never_taken(**kwargs: Any) -> None:  # the SDK's write to a stream its client no longer reads
        full.append(1)
        await asyncio.Event().wait()

    async with (
        Client(server, mode="legacy", message_handler=stuck) as a,
        Client(server, mode="legacy", message_handler=live) as b,
    ):
        await a.list_tools()
        (reader_a,) = list(bridge._legacy)
        await b.list_tools()
        assert len(bridge._legacy) == 2
        reader_a.send_tool_list_changed = never_taken
        for _ in range(6):
            registry.add(extra) if "extra" not in registry._tools else registry.remove("extra")
            await asyncio.wait_for(live_seen.get(), 10)  # b is told of every change
        assert sum(full) == 1 and bridge._sending == {reader_a: True}  # one send to a under way, merged changes
        timers.fire()  # LIST_CHANGED_TIMEOUT passes: a is given up
        for _ in range(100):
            if not bridge._sending and not bridge._tasks:
                break
            await asyncio.sleep(0)
        assert bridge._sending == {} and list(bridge._legacy) != [] and reader_a not in bridge._legacy
        assert sum(full) == 1 and not bridge._tasks
        del reader_a.send_tool_list_changed  # its client reads again
        await a.list_tools()  # and lists the tools: told of changes again
        assert reader_a in bridge._legacy
        registry.add(lambda: "y", name="later", description="Added last.")
        await asyncio.wait_for(live_seen.get(), 10)
        for _ in range(500):
            if stuck_seen:
                break
            await asyncio.sleep(0.01)
        assert len(stuck_seen) == 1


@pytest.mark.asyncio
async def test_changes_during_a_send_are_one_more_send() -> None:
    """Changes made while a connection's notification is under way are merged into one more, not one each."""
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: "x", name="base", description="Always there.")
    server = create_server(registry)
    bridge = server.lifespan.__self__  # type: ignore[attr-defined]
    release = asyncio.Event()

    async with Client(server, mode="legacy") as client:
        await client.list_tools()
        (connection,) = list(bridge._legacy)
        sent: list[int] = []
        original = connection.send_tool_list_changed

        async def counted(**kwargs: Any) -> None:
            sent.append(1)
            await release.wait()
            await original(**kwargs)

        connection.send_tool_list_changed = counted
        for i in range(50):
            registry.add(extra, name=f"extra_{i}")
            await asyncio.sleep(0)  # each change's notification starts before the next change
        assert sum(sent) == 1 and bridge._sending == {connection: True}
        release.set()
        for _ in range(100):
            if not bridge._sending:
                break
            await asyncio.sleep(0.01)
        assert sum(sent) == 2 and bridge._sending == {}


# ---------------------------------------------------------------- 3. progress only increases


@pytest.mark.asyncio
async def test_progress_that_does_not_increase_is_not_sent() -> None:
    """Reports of 5, then 2, then 2 all went out: the spec has progress increase with each notification."""
    timers = _Timers()  # the pause between two notifications ends only with the call
    registry = ToolRegistry(autoload=False, clock=timers)  # type: ignore[arg-type]
    first = asyncio.Event()

    async def steps(call: Call) -> str:
        """Report forwards and backwards."""
        call.report_progress(1, 10, "one")
        call.report_progress(4, 10, "four")
        call.report_progress(3, 10, "three")  # behind the report waiting to go out: dropped
        await first.wait()  # the pump sent "four" and is pausing
        call.report_progress(2, 10, "two")
        call.report_progress(4, 10, "four again")
        call.report_progress(6, 10, "six")
        call.report_progress(6, 10, "six again")
        call.report_progress(5, 10, "five")
        return "done"

    registry.add(steps)
    seen: list[tuple[float, float | None, str | None]] = []

    async def record(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        first.set()

    async with Client(create_server(registry), mode="legacy") as client:
        result = await client.call_tool("steps", {}, progress_callback=record)
    assert result.content[0].text == "done"
    assert seen == [(4, 10, "four"), (6, 10, "six")]


# ---------------------------------------------------------------- 2. stdio: a client gone ends the drain


def test_the_drain_ends_once_the_client_has_closed_both_pipes(tmp_path: Path) -> None:
    """A client gone (stdin ended, stdout's read end closed) left the server running its calls for up to the
    300 s drain timeout: nothing told it until an answer failed, and none came before a call ended."""
    env = {**os.environ, **server_env(tmp_path)}
    proc = subprocess.Popen(serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(INITIALIZE + INITIALIZED + _request(2, "wait", {"seconds": 1000, "tag": "gone"}))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        for attempt in range(3, 1000):  # until the long call runs
            proc.stdin.write(_request(attempt, "events", {}))
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            assert answer["id"] == attempt
            if "started gone" in answer["result"]["structuredContent"]["result"]:
                break
        proc.stdout.close()
        proc.stdin.close()
        assert proc.wait(60) == 0  # at once, not at the end of the call (1000 s) or of the drain timeout (300 s)
        assert b"still unanswered" not in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.asyncio
async def test_the_hang_up_watch_sees_a_closed_socket_and_stops_when_asked() -> None:
    """The watch behind the drain's early end: a socket whose peer closed (``POLLHUP``) is a reader gone; a
    socket only half-closed (the client's requests ended, its reading not) is not, and stop() ends the thread."""
    ours, theirs = socket.socketpair()
    seen = asyncio.Event()
    try:
        watch = _Hangup.start(theirs.fileno(), seen.set)
        assert watch is not None
        ours.shutdown(socket.SHUT_WR)  # no more requests, answers still read
        await asyncio.sleep(0.05)
        assert not seen.is_set() and not watch.over
        ours.close()
        await asyncio.wait_for(seen.wait(), 10)
        assert watch.over
        healthy, other = socket.socketpair()  # a reader still there: only stop() ends this one
        try:
            quiet = _Hangup.start(healthy.fileno(), seen.clear)
            assert quiet is not None
            quiet.stop()
            for _ in range(1000):
                if quiet.over:
                    break
                await asyncio.sleep(0.01)
            assert quiet.over and seen.is_set()  # ended by stop(), without calling back
        finally:
            healthy.close()
            other.close()
    finally:
        theirs.close()


# ---------------------------------------------------------------- 4. stdio: a bound on the requests read ahead


def _ping(request_id: int) -> SessionMessage:
    return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))


@pytest.mark.asyncio
async def test_no_more_lines_are_read_while_max_unsettled_requests_are_unsettled_and_held() -> None:
    """A client sending requests and reading no answers had the server read on and hold every answer: past
    ``max_unsettled`` unsettled requests further ones are held, and past as many held no more lines are read."""
    assert MAX_UNSETTLED == 256
    requests_in, requests = anyio.create_memory_object_stream[Any](10)
    answers, answers_out = anyio.create_memory_object_stream[Any](10)
    for request_id in (1, 2, 3, 4, 5, 6):
        requests_in.send_nowait(_ping(request_id))
    read = Answering(requests, answers, _Lines(None), max_unsettled=2)
    assert [(await read.receive()).message.id for _ in range(2)] == [1, 2]
    third = asyncio.ensure_future(read.receive())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not third.done() and requests.statistics().current_buffer_used == 2  # 3 and 4 held, 5 and 6 unread
    assert [held.message.id for held in read.held] == [3, 4]
    await read.answers.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=1, result={})))
    assert (await asyncio.wait_for(third, 10)).message.id == 3
    fourth = asyncio.ensure_future(read.receive())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not fourth.done() and requests.statistics().current_buffer_used == 1  # 5 held after 4, 6 unread
    read.ask("sampling-1")  # the server waits for the client's answer, which can only come on stdin: read on
    assert (await asyncio.wait_for(fourth, 10)).message.id == 4
    assert read.unsettled == 3 and answers_out.receive_nowait().message.id == 1
    for stream in (requests_in, requests, answers, answers_out):
        stream.close()


def _cancel(request_id: int) -> bytes:
    return (
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}) + "\n"
    ).encode()


def test_past_max_unsettled_calls_cancels_still_get_through_and_free_room(tmp_path: Path) -> None:
    """With MAX_UNSETTLED calls running, stdin was no longer read at all: the client's cancels never arrived,
    and a ping sent after them was never answered. Cancels now pass on (a held call's drops it unanswered)."""
    env = {**os.environ, **server_env(tmp_path)}
    proc = subprocess.Popen(serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        count = MAX_UNSETTLED + 44
        calls = b"".join(_request(100 + n, "wait", {"seconds": 1000, "tag": f"c{n}"}) for n in range(count))
        cancels = b"".join(_cancel(100 + n) for n in range(count))
        ping = (json.dumps({"jsonrpc": "2.0", "id": "PING", "method": "ping"}) + "\n").encode()
        proc.stdin.write(INITIALIZE + INITIALIZED + calls + cancels + ping)
        proc.stdin.flush()
        guard = threading.Timer(120, proc.kill)  # a hang ends as a failure (no answer), not a stuck run
        guard.start()
        try:
            answers = [json.loads(proc.stdout.readline() or b"null") for _ in range(2)]
        finally:
            guard.cancel()
        assert None not in answers, "the ping was never answered"
        # the initialize answer, then the ping's: no call was answered (each was cancelled)
        assert [answer["id"] for answer in answers] == [1, "PING"] and answers[1]["result"] == {}
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.asyncio
async def test_a_cancel_drops_a_held_request_and_the_drain_closes_those_left() -> None:
    """A held request the client cancels is never passed on (nor answered); a held request the drain gives up
    on (the timeout passed, or the client gone) is answered ``Connection closed``: the SDK never saw it."""
    requests_in, requests = anyio.create_memory_object_stream[Any](10)
    answers, answers_out = anyio.create_memory_object_stream[Any](10)
    for request_id in (1, 2, 3):
        requests_in.send_nowait(_ping(request_id))
    cancel = JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 3})
    requests_in.send_nowait(SessionMessage(cancel))
    requests_in.send_nowait(_ping(4))
    requests_in.close()
    read = Answering(requests, answers, _Lines(None), max_unsettled=2, drain_timeout=0)
    assert [(await read.receive()).message.id for _ in range(2)] == [1, 2]
    with pytest.raises(anyio.EndOfStream):  # 3 dropped by its cancel; 4 held until the drain gave up
        await read.receive()
    assert not read.held and answers_out.receive_nowait().message.model_dump(exclude_none=True) == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {"code": -32000, "message": "Connection closed"},
    }
    with pytest.raises(anyio.WouldBlock):
        answers_out.receive_nowait()
    for stream in (requests, answers, answers_out):
        stream.close()
