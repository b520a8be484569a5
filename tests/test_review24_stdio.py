"""Review 24, stdio: streams count toward the read-ahead bound, the server's own answers survive a stdout that
cannot be written, the last writes are bounded by the drain, a cancel's id matches as the SDK's does, batches."""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_support import serve_command, serve_file, server_env, serving
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from harness_one.mcp import _stdio
from harness_one.mcp._stdio import _WAKE, MAX_STREAMS, MAX_UNSETTLED, Answering, _Lines, _Out, _ThreadOut

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
OPENING = [
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}).encode() + b"\n",
    b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
]


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _call(request_id: int | str, name: str, arguments: dict[str, Any]) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})


def _cancel(request_id: int | str) -> bytes:
    return _line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})


def _request(request_id: int | str, method: str) -> SessionMessage:
    return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method))


# ---------------------------------------------------------------- 1. a stream is counted toward the read-ahead bound


@pytest.mark.asyncio
async def test_a_listen_request_is_counted_and_held_as_any_request() -> None:
    """``subscriptions/listen`` skipped the bound: a client reading nothing could send them without end, each an
    SDK task waiting on stdout (answered -32601 before 2026-07-28). Now each is counted, and held past the bound."""
    assert MAX_UNSETTLED == 256 and MAX_STREAMS == 4
    requests_in, requests = anyio.create_memory_object_stream[Any](10)
    answers, answers_out = anyio.create_memory_object_stream[Any](10)
    for request_id in ("L1", "L2", "L3", "L4"):
        requests_in.send_nowait(_request(request_id, "subscriptions/listen"))
    read = Answering(requests, answers, _Lines(None), max_unsettled=2)
    assert [(await read.receive()).message.id for _ in range(2)] == ["L1", "L2"]
    third = asyncio.ensure_future(read.receive())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not third.done() and [held.message.id for held in read.held] == ["L3", "L4"]
    assert (read.unsettled, read.passed_streams, read.open_streams) == (2, 2, 0)  # none acknowledged
    error = JSONRPCError(jsonrpc="2.0", id="L1", error={"code": -32601, "message": "Method not found"})  # type: ignore[arg-type]
    await read.answers.send(SessionMessage(error))  # as the SDK answers it before 2026-07-28
    assert (await asyncio.wait_for(third, 10)).message.id == "L3"
    assert (read.unsettled, read.passed_streams, read.open_streams) == (2, 2, 0)  # none acknowledged
    for stream in (requests_in, requests, answers, answers_out):
        stream.close()


def _acknowledged(request_id: int | str) -> SessionMessage:
    meta = {"io.modelcontextprotocol/subscriptionId": request_id}
    return SessionMessage(
        JSONRPCNotification(jsonrpc="2.0", method="notifications/subscriptions/acknowledged", params={"_meta": meta})
    )


async def _settle_turns() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_past_max_streams_acknowledged_a_listen_is_refused_and_open_streams_do_not_hold_the_end() -> None:
    """Streams the SDK acknowledged hold places of the bound until the session ends: past ``max_streams`` a further
    one is refused (``-32603``, never passed on), and the end of stdin still waits for the other requests only.
    (Changed: a stream counts as open once acknowledged, not once passed on; see the next test.)"""
    requests_in, requests = anyio.create_memory_object_stream[Any](10)
    answers, answers_out = anyio.create_memory_object_stream[Any](10)
    for request_id in ("L1", "L2", "L3"):
        requests_in.send_nowait(_request(request_id, "subscriptions/listen"))
    requests_in.send_nowait(_request(4, "ping"))
    requests_in.close()
    read = Answering(requests, answers, _Lines(None), max_unsettled=3, max_streams=2, drain_timeout=60)
    assert [(await read.receive()).message.id for _ in range(2)] == ["L1", "L2"]
    nxt = asyncio.ensure_future(read.receive())
    await _settle_turns()
    assert not nxt.done() and [held.message.id for held in read.held] == ["L3", 4]  # L3 waits for L1 and L2
    await read.answers.send(_acknowledged("L1"))
    await read.answers.send(_acknowledged("L2"))
    assert [m.message.method for m in (answers_out.receive_nowait(), answers_out.receive_nowait())] == [
        "notifications/subscriptions/acknowledged"
    ] * 2
    assert (await asyncio.wait_for(nxt, 10)).message.id == 4
    assert answers_out.receive_nowait().message.model_dump(exclude_none=True) == {
        "jsonrpc": "2.0",
        "id": "L3",
        "error": {"code": -32603, "message": "Subscription limit reached: at most 2 subscriptions/listen streams open at once"},
    }
    ending = asyncio.ensure_future(read.receive())
    await _settle_turns()
    assert not ending.done()  # the ping is waited for
    await read.answers.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=4, result={})))
    with pytest.raises(anyio.EndOfStream):  # the two open streams are not
        await asyncio.wait_for(ending, 10)
    assert (read.unsettled, read.open_streams) == (2, 2)
    for stream in (requests, answers, answers_out):
        stream.close()


@pytest.mark.asyncio
async def test_a_listen_the_sdk_answers_method_not_found_is_not_counted_as_an_open_stream() -> None:
    """Before 2026-07-28 the SDK answers a listen "Method not found". Each listen passed on counted as an open stream
    at once, so with four answers not written yet (stdout full) a fifth got ``-32603`` "Subscription limit reached"
    and the others ``-32601``. Now a stream is open once the SDK acknowledges it: the fifth waits, then is passed on."""
    requests_in, requests = anyio.create_memory_object_stream[Any](10)
    answers, answers_out = anyio.create_memory_object_stream[Any](10)
    for request_id in ("s0", "s1", "s2"):
        requests_in.send_nowait(_request(request_id, "subscriptions/listen"))
    read = Answering(requests, answers, _Lines(None), max_streams=2)
    assert [(await read.receive()).message.id for _ in range(2)] == ["s0", "s1"]
    third = asyncio.ensure_future(read.receive())
    await _settle_turns()
    assert not third.done() and [held.message.id for held in read.held] == ["s2"]
    not_found = JSONRPCError(jsonrpc="2.0", id="s0", error={"code": -32601, "message": "Method not found"})  # type: ignore[arg-type]
    await read.answers.send(SessionMessage(not_found))
    assert read.lines._woken  # as the SDK would, hand on the empty line the wake-up gives it
    read.lines.handed.append(_WAKE)
    requests_in.send_nowait(ValueError("not JSON-RPC"))
    assert (await asyncio.wait_for(third, 10)).message.id == "s2"  # passed on, for the SDK to answer -32601 too
    assert answers_out.receive_nowait().message.error.code == -32601
    with pytest.raises(anyio.WouldBlock):  # nothing refused it
        answers_out.receive_nowait()
    assert (read.unsettled, read.passed_streams, read.open_streams) == (2, 2, 0)
    for stream in (requests_in, requests, answers, answers_out):
        stream.close()


@pytest.mark.asyncio
async def test_a_listen_refused_at_the_end_of_stdin_into_a_full_stdout_does_not_hold_the_drain() -> None:
    """A stream past ``max_streams`` still held at the end of stdin was refused from inside the drain with no time
    limit: with stdout full the drain never ended (``serve`` never exited). Now that write has the drain's bound."""
    requests_in, requests = anyio.create_memory_object_stream[Any](10)
    answers, answers_out = anyio.create_memory_object_stream[Any](1)  # nobody reads: full after one message
    requests_in.send_nowait(_request("L1", "subscriptions/listen"))
    requests_in.send_nowait(_request("L2", "subscriptions/listen"))
    requests_in.close()
    read = Answering(requests, answers, _Lines(None), max_streams=1, drain_timeout=0.5)
    assert (await read.receive()).message.id == "L1"
    ending = asyncio.ensure_future(read.receive())
    await _settle_turns()
    assert not ending.done() and [held.message.id for held in read.held] == ["L2"]
    await read.answers.send(_acknowledged("L1"))  # stdout is full now: L2's refusal cannot be written
    with pytest.raises(anyio.EndOfStream):
        await asyncio.wait_for(ending, 20)  # a hang fails here
    assert not read.held and (read.unsettled, read.open_streams) == (1, 1)
    for stream in (requests, answers, answers_out):
        stream.close()


def test_serve_refuses_a_listen_past_max_streams_open(tmp_path: Path) -> None:
    """Over the wire (2026-07-28): four streams are acknowledged, the fifth is refused, the four end with the session."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def listen(request_id: int) -> bytes:
        params = {"notifications": {"toolsListChanged": True}, "_meta": meta}
        return _line({"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params})

    with serving(tmp_path) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join(listen(n) for n in range(1, MAX_STREAMS + 1)))
        proc.stdin.flush()
        acks = [json.loads(proc.stdout.readline()) for _ in range(MAX_STREAMS)]
        assert {ack["method"] for ack in acks} == {"notifications/subscriptions/acknowledged"}
        proc.stdin.write(listen(99))
        proc.stdin.flush()
        refused = json.loads(proc.stdout.readline())
        proc.stdin.close()
        assert proc.wait(30) == 0
        ended = [json.loads(line) for line in proc.stdout]
    assert refused == {
        "jsonrpc": "2.0",
        "id": 99,
        "error": {"code": -32603, "message": "Subscription limit reached: at most 4 subscriptions/listen streams open at once"},
    }
    assert sorted(answer["id"] for answer in ended) == [1, 2, 3, 4]  # the streams end with the session


# ---------------------------------------------------------------- 2. the server's own answers, stdout unwritable


@pytest.mark.parametrize("stdout", ["1>&-", "1>/dev/full"])
def test_a_line_answered_by_the_server_with_stdout_unwritable_ends_quietly(tmp_path: Path, stdout: str) -> None:
    """With stdout closed (or full), the second line the server answers itself (not JSON, an id that is neither
    a string nor an integer) raised BrokenResourceError out of ``serve``: exit 1 and a traceback. Now exit 0."""
    lines = [*OPENING, b"garbage\n", b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}\n', b"more garbage\n"]
    done = serve_file(tmp_path, b"".join(lines), ["sh", "-c", f'exec "$@" {stdout}', "sh", *serve_command()])
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"Traceback" not in done.stderr and b"BrokenResourceError" not in done.stderr


# ---------------------------------------------------------------- 3. the last writes are bounded by the drain


def _unread(tmp_path: Path, lines: list[bytes], drain: str) -> tuple[int, bytes]:
    """``serve --drain-timeout drain`` sent ``lines``, its stdin closed, its stdout kept open and never read:
    its exit code and stderr (the watchdog fails a run that does not end)."""
    proc = subprocess.Popen(
        serve_command("--drain-timeout", drain),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **server_env(tmp_path)},
    )
    assert proc.stdin is not None and proc.stderr is not None
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    reader.start()
    try:
        proc.stdin.write(b"".join(lines))
        proc.stdin.close()
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            code = -1
    finally:
        proc.kill()
        proc.wait()
        reader.join(10)
        assert proc.stdout is not None
        proc.stdout.close()
    return code, b"".join(err)


BIG = _call(2, "json_schema_2020_12_tool", {"name": "x" * 200_000})  # an answer larger than a pipe holds


def test_an_answer_the_client_never_reads_holds_serve_no_longer_than_the_drain(tmp_path: Path) -> None:
    """A client that closed its stdin and never read stdout: the answer counted as settled once the SDK took it,
    and ``serve`` then waited for ever for it to be written. Now its write gives up with the drain's bound."""
    code, stderr = _unread(tmp_path, [*OPENING, BIG], "0.2")
    assert code == 0, stderr[-2000:]


def test_the_drain_timeout_ends_serve_though_stdout_is_full(tmp_path: Path) -> None:
    """The drain timeout fired (a call still running) while stdout was full: ``serve`` said so and kept waiting
    on the full pipe for ever. Now the last writes ("Connection closed") are bounded too, and it exits 0."""
    code, stderr = _unread(tmp_path, [*OPENING, BIG, _call(3, "wait", {"seconds": 1000, "tag": "w"})], "0.2")
    assert code == 0, stderr[-2000:]
    assert b"1 request still unanswered 0.2 s after the end of stdin (the drain timeout): cancelled" in stderr


# ---------------------------------------------------------------- 4. a cancel's id matches as the SDK's does


def test_a_cancel_with_the_id_as_text_drops_a_held_request(tmp_path: Path) -> None:
    """The SDK takes "7" and 7 for one id when it cancels a running request; a held request's cancel compared
    the types too, so ``"500"`` left request 500 held, to run once room came. Now it is dropped, never answered."""
    env = {**os.environ, **server_env(tmp_path)}
    proc = subprocess.Popen(serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    guard = threading.Timer(120, proc.kill)  # a hang ends as a failure, not a stuck run
    guard.start()
    try:
        calls = b"".join(_call(100 + n, "wait", {"seconds": 1000, "tag": f"c{n}"}) for n in range(MAX_UNSETTLED))
        held = _call(500, "add", {"a": 1, "b": 2}) + _call(600, "add", {"a": 3, "b": 4})
        cancels = _cancel("500") + _cancel(True) + b"".join(_cancel(100 + n) for n in range(MAX_UNSETTLED))
        proc.stdin.write(b"".join(OPENING) + calls + held + cancels + _line({"jsonrpc": "2.0", "id": "P", "method": "ping"}))
        proc.stdin.close()
        answers = [json.loads(line) for line in proc.stdout]
        assert proc.wait(30) == 0
    finally:
        guard.cancel()
        proc.kill()
        proc.wait()
    # 500 dropped by its cancel "500"; 600 (a cancel of id true names no request) runs; the calls were cancelled
    assert sorted(str(a["id"]) for a in answers) == ["1", "600", "P"]


# ---------------------------------------------------------------- 5. a batch


def test_a_batch_is_answered_with_one_array_of_errors_on_its_requests_ids(tmp_path: Path) -> None:
    """A batch (2025-03-26 has them) got one ``-32600`` on ``"id": null``, and its requests were never answered.
    (Changed: each request's error was a line of its own, and a batch of notifications got ``-32600``; now one
    array answers a batch, as JSON-RPC 2.0 asks, a notification in it is not answered, and the answers are capped.)"""
    hello = {**HELLO, "protocolVersion": "2025-03-26"}
    batch = [
        {"jsonrpc": "2.0", "id": 11, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"jsonrpc": "2.0", "id": "twelve", "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
        {"jsonrpc": "2.0", "id": 13, "result": {}},
        7,  # no message: not answered in the array
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
    ]
    many = [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(150)]
    lines = [
        _line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
        OPENING[1],
        _line(batch),  # type: ignore[arg-type]
        b'[{"jsonrpc": "2.0", "method": "notifications/initialized"}]\n',  # notifications only: no answer
        b"[]\n",
        _line(many),  # type: ignore[arg-type]
    ]
    done = serve_file(tmp_path, b"".join(lines))
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()][1:]
    refused = "Invalid request: batches are not supported; send each message on a line of its own"
    assert answers[:2] == [
        [
            {"jsonrpc": "2.0", "id": 11, "error": {"code": -32600, "message": refused}},
            {"jsonrpc": "2.0", "id": "twelve", "error": {"code": -32600, "message": refused}},
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": refused}},  # an id it cannot know
        ],
        # an empty array (or one with no message in it): one answer, on "id": null, as before
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request: expected a JSON object, got list"}},
    ]
    assert len(answers) == 3 and len(answers[2]) == 101
    assert [answer["id"] for answer in answers[2][:100]] == list(range(100))
    assert answers[2][100] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": f"{refused} (50 more messages in it not answered)"},
    }


# ---------------------------------------------------------------- 6. a slow reader gets every answer whole


def test_a_client_that_closes_its_stdin_and_reads_slowly_gets_each_answer_whole(tmp_path: Path) -> None:
    """Once the drain had ended, the last writes had a fixed time (what was left of the drain timeout, at least
    one second), then the transport was aborted: a client still reading, slowly, got its answer cut off mid-line.
    Now the writes are dropped only once stdout's reader has taken nothing for that long."""
    proc = subprocess.Popen(
        serve_command("--drain-timeout", "0.2"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **server_env(tmp_path)},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    guard = threading.Timer(60, proc.kill)  # a hang ends as a failure, not a stuck run
    guard.start()
    err: list[bytes] = []
    errors = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    errors.start()
    try:
        proc.stdin.write(b"".join(OPENING) + BIG)
        proc.stdin.close()
        received = bytearray()
        while chunk := os.read(proc.stdout.fileno(), 16384):  # about 160 KB a second: seconds for the answer
            received += chunk
            time.sleep(0.1)
        assert proc.wait(30) == 0
    finally:
        guard.cancel()
        proc.kill()
        proc.wait()
        errors.join(10)
    lines = bytes(received).split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3, (len(received), b"".join(err)[-2000:])
    answer = json.loads(lines[1])
    assert answer["id"] == 2 and "result" in answer and len(lines[1]) > 200_000


# ---------------------------------------------------------------- 7. the bound is kept by the flush itself


@pytest.mark.asyncio
async def test_a_cut_schedules_nothing_and_a_flush_past_it_drops_what_nobody_reads() -> None:
    """The bound on the last writes was a timer re-arming itself on the event loop: it outlived ``serve_stdio``
    unless the streams cancelled it, and a cut with nothing unwritten on an open transport re-armed it at once, every
    turn of the loop. (Changed: this test checked that the streams cancelled it.) Now a flush keeps the bound
    itself: a cut schedules nothing, and a flush whose reader takes no byte for the bound drops what is unwritten."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(write_fd, "wb", buffering=0)
    )
    try:
        out = _Out(asyncio.StreamWriter(transport, protocol, None, loop), write_fd)
        timers: list[Any] = []
        real_call_at = loop.call_at

        def call_at(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
            timers.append(callback)
            return real_call_at(when, callback, *args, **kwargs)

        loop.call_at = call_at  # type: ignore[method-assign]
        try:
            out.cut(0)  # nothing unwritten, the transport open
            for _ in range(10):
                await asyncio.sleep(0)
        finally:
            del loop.call_at
        assert timers == []
        await out.write("x" * 300_000)  # more than the pipe holds, never read
        with pytest.raises(anyio.ClosedResourceError):
            await out.flush()
        assert transport.is_closing()
        with pytest.raises(anyio.ClosedResourceError):
            await out.write("y")
    finally:
        transport.close()
        os.close(read_fd)


# ---------------------------------------------------------------- 8. embedded: a write left blocked holds nothing

_EMBEDDED_CHILD = """
import io, json, os, sys, threading, anyio
from harness_one import ToolRegistry, define_tool
from harness_one.mcp import serve_stdio

@define_tool
def big(n: int) -> str:
    '''A big answer.'''
    return "x" * n

registry = ToolRegistry()
registry.register(big)
hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
lines = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "big", "arguments": {"n": 300000}}},
]
r_in, w_in = os.pipe()
r_out, w_out = os.pipe()  # never read: the answer fills it
os.write(w_in, b"".join(json.dumps(line).encode() + b"\\n" for line in lines))
os.close(w_in)
sys.stdin = io.TextIOWrapper(os.fdopen(r_in, "rb"))  # the host's own streams, not fd 0 and fd 1
host = sys.stdout = io.TextIOWrapper(os.fdopen(w_out, "wb"))
anyio.run(lambda: serve_stdio(registry, drain_timeout=0.2))
for t in threading.enumerate():  # AnyIO's idle workers end once told to (a moment after the run, on a loaded machine)
    if not t.daemon and t is not threading.main_thread():
        t.join(10)  # a thread the blocked write held would still be alive after this
print("returned", [t.name for t in threading.enumerate() if not t.daemon], file=sys.stderr, flush=True)
os._exit(0)  # the write left blocked holds the host's stream lock: flushing it at exit would abort (see docs/mcp.md)
"""


def test_embedded_a_write_left_blocked_lets_serve_return_and_keeps_no_thread() -> None:
    """Embedded with a host's ``sys.stdout`` (not fd 1), a write the bound left blocked stayed on a non-daemon worker
    thread: ``serve_stdio`` returned, then the process's exit waited for ever. Now it is left on a daemon thread.
    (Changed: the host also wrote to the stream after; the write is now made through the stream, which keeps each
    answer whole against the host's other writers, and one left blocked holds its lock: see the next test.)"""
    done = subprocess.run([sys.executable, "-c", _EMBEDDED_CHILD], capture_output=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.decode().splitlines()[-1] == "returned ['MainThread']"


@pytest.mark.asyncio
async def test_embedded_an_answer_on_a_host_stream_stays_whole_against_its_other_writers() -> None:
    """Embedded, each answer went to the host stream's descriptor with ``os.write`` a chunk at a time, past the
    stream's lock: a log handler writing to the same stream landed inside an answer. Now it goes through the stream,
    whose lock keeps it whole; the host's other write comes after it."""
    read_end, write_end = os.pipe()
    host = os.fdopen(write_end, "wb")
    out = _ThreadOut(host, shared=True)
    answer = b"x" * 300_000 + b"\n"  # more than a pipe holds: the write waits for the reader
    await out.write(answer.decode())
    flushing = asyncio.ensure_future(out.flush())
    while select.select([], [write_end], [], 0)[1]:  # until the answer's write has filled the pipe
        await asyncio.sleep(0.01)

    def log() -> None:
        host.write(b"host log line\n")
        host.flush()

    received = bytearray()

    def read() -> None:
        while chunk := os.read(read_end, 65536):
            received.extend(chunk)

    logger = threading.Thread(target=log)
    logger.start()
    reader = threading.Thread(target=read)
    reader.start()
    await asyncio.wait_for(flushing, 60)
    logger.join(60)
    host.close()
    reader.join(60)
    os.close(read_end)
    assert bytes(received) == answer + b"host log line\n"


# ---------------------------------------------------------------- 9. a batch's errors past the cap are not made


def test_a_batch_past_the_cap_makes_no_error_it_does_not_send(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch got an error object made for each of its requests, then cut to 100: a 1 MiB line of small requests
    cost tens of thousands of objects nobody was sent. Now the ones past the cap are counted, and one error says
    how many."""
    made: list[Any] = []
    real = _stdio._error

    def counting(request_id: Any, code: int, message: str) -> JSONRPCError:
        made.append(request_id)
        return real(request_id, code, message)

    monkeypatch.setattr(_stdio, "_error", counting)
    batch = [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(5000)]
    (reply,) = _stdio.reply_to(json.dumps(batch), 1 << 20, ValueError("a batch"))
    assert isinstance(reply, _stdio._Batch)
    assert made == [*range(100), None]
    assert [error.id for error in reply.errors] == [*range(100), None]
    assert reply.errors[-1].error.message == (
        "Invalid request: batches are not supported; send each message on a line of its own (4900 more messages in it not answered)"
    )
