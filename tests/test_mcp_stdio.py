"""``harness-one serve`` on raw stdio pipes: what reaches the wire, and what does not."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import serve_command, serve_file, server_env, serving

from harness_one import ManualClock, ToolRegistry

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
OPENING = [
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}).encode() + b"\n",
    b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
]
PING = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}).encode() + b"\n"


def exchange(tmp_path: Path, lines: list[bytes], answers: int) -> tuple[list[dict[str, Any]], bytes]:
    """``harness-one serve`` on raw pipes: ``lines`` written, ``answers`` lines read back, then its stderr."""
    with serving(tmp_path) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(b"".join(lines))
        proc.stdin.flush()
        read = [json.loads(proc.stdout.readline()) for _ in range(answers)]
        proc.stdin.close()
        assert proc.wait(10) == 0
    return read, proc.stderr.read()


def test_stdio_wire_survives_stray_prints_and_oversized_lines(tmp_path: Path) -> None:
    """A tool's print goes to stderr, a line over the limit is dropped (and answered), and the next request is answered."""
    noisy = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "noisy", "arguments": {}}}
    long = b'"' + b"x" * 3_000_000 + b'"\n'  # longer than the registry's argument limit
    read, stderr = exchange(tmp_path, [*OPENING, json.dumps(noisy).encode() + b"\n", long, PING], 4)
    answers = {answer["id"]: answer for answer in read}
    assert answers[2]["result"]["content"][0]["text"] == "quiet" and answers[3]["result"] == {}
    assert answers[None]["error"]["code"] == -32600  # the dropped line is answered (no id in it to answer on)
    assert b"stray output" in stderr


def test_stdio_answers_every_line_it_cannot_read(tmp_path: Path) -> None:
    """Not JSON, invalid UTF-8, a lone surrogate, not a message: an error answer each (the client waited for ever)."""
    call = '{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "noisy", "arguments": {"x": %s}}}'
    bad = [
        b"{not json\n",
        b'{"jsonrpc": "2.0", "id": 4, \xff\xfe}\n',  # invalid UTF-8 outside a string
        (call % ("5", '"\\ud800"')).encode() + b"\n",  # a lone surrogate escaped
        b'{"jsonrpc": "2.0", "id": "six", "method": 6}\n',
        b"[1, 2]\n",
        b'{"jsonrpc": "2.0", "id": 99, "result": {}}\n',  # a response to nothing: never answered
        b'"' + b"x" * 3_000_000 + b'"\n',  # longer than the line limit
    ]
    answers, _ = exchange(tmp_path, [*OPENING, *bad, PING], 8)
    got = [(a["id"], a.get("error", {}).get("code")) for a in answers[1:]]
    assert got == [(None, -32700), (None, -32700), (5, -32600), ("six", -32600), (None, -32600), (None, -32600), (3, None)]
    messages = [a["error"]["message"] for a in answers[1:-1]]
    assert messages[0].startswith("Parse error: Expecting property name") and "Request too large" in messages[5]
    assert "hex escape" in messages[2] and "expected a JSON object, got list" in messages[4], messages


def test_stdio_answers_a_request_whose_id_is_neither_text_nor_an_integer(tmp_path: Path) -> None:
    """The SDK took {"id": 1.5, "method": ...} for a notification: no answer, the client waited for ever."""
    odd = [b'{"jsonrpc": "2.0", "id": %s, "method": "ping"}\n' % given for given in (b"1.5", b"true", b"[1]", b"null")]
    note = b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}\n'
    answers, _ = exchange(tmp_path, [*OPENING, *odd, note, PING], 6)
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers[1:]] == [(None, -32600)] * 4 + [(3, None)]
    assert answers[1]["error"]["message"] == "Invalid request: id must be a string or an integer"


def test_stdio_answers_a_line_nested_deeper_than_json_reads(tmp_path: Path) -> None:
    """One line nested 100,000 deep ended the server (a RecursionError), and every call in flight with it;
    then it was answered on a null id (the client waited for ever): now on its own id."""
    deep = b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n"
    answers, _ = exchange(tmp_path, [*OPENING, deep, PING], 3)
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers[1:]] == [(7, -32600), (3, None)]
    assert "recursion" in answers[1]["error"]["message"]


def test_stdio_answers_a_request_with_an_integer_past_the_int_to_text_limit_on_its_id(tmp_path: Path) -> None:
    """A 5,000-digit integer in a call's arguments was answered on a null id: the client waited for ever. Then a
    -32600 naming no field: now the registry's refusal, on the id, as for arguments given as text."""
    call = '{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "noisy", "arguments": {"x": %s}}}'
    big = [(call % (rid, "9" * 5000)).encode() + b"\n" for rid in ("10", '"ten"')]
    answers, _ = exchange(tmp_path, [*OPENING, *big, PING], 4)
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers[1:]] == [(10, None), ("ten", None), (3, None)]
    for answer in answers[1:3]:
        assert answer["result"]["isError"] is True
        assert "$.x: a number of 5000 digits is too long to read" in answer["result"]["content"][0]["text"]


def test_what_a_tool_printed_unflushed_never_reaches_the_wire(tmp_path: Path) -> None:
    """Block-buffered stdout (no PYTHONUNBUFFERED, as a desktop client starts servers): flushed to stderr, not at exit."""
    tools = tmp_path / "chatty_tools.py"
    tools.write_text(
        "from harness_one import defineTool\n@defineTool(registry=None)\ndef chatty() -> str:\n"
        "    print('unflushed chatter')\n    return 'said'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["HARNESS_ONE_STATE"] = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "chatty", "arguments": {}}}
    command = [*serve_command()[:3], "--tools", str(tools), "serve"]
    done = subprocess.run(
        command,
        input=b"".join([*OPENING, json.dumps(call).encode() + b"\n"]),
        capture_output=True,
        env=env,
        timeout=60,
        check=True,
    )
    wire = done.stdout.splitlines()
    assert [json.loads(line)["id"] for line in wire] == [1, 2], done.stdout[-300:]
    assert b"unflushed chatter" in done.stderr


async def test_line_reader_drops_a_line_over_its_limit() -> None:
    """On a pipe (the event loop's reader) and on any other stream (a line at a time on a worker thread)."""
    from harness_one.mcp._stdio import _Lines, _ThreadLines, _TooLong

    data = b'{"a": 1}\n' + b"y" * 500 + b"\n" + b'{"b": 2}\n' + b"tail without newline"
    reader = asyncio.StreamReader(limit=64)
    reader.feed_data(data)
    reader.feed_eof()
    expected = ['{"a": 1}\n', "", '{"b": 2}\n', "tail without newline"]
    assert [line async for line in _Lines(reader)] == expected
    lines = _ThreadLines(io.BytesIO(data), 64)
    assert [line async for line in lines] == expected
    handed = list(lines.handed)
    assert handed[::2] == ['{"a": 1}\n', '{"b": 2}\n'] and handed[3] == "tail without newline"
    assert isinstance(handed[1], _TooLong) and handed[1].size == 500


def test_stdio_sends_no_progress_a_client_cannot_read(tmp_path: Path) -> None:
    """A NaN progress went out as ``"progress": null`` (the schema says a number); an infinite total as null too."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "odd_progress", "arguments": {}, "_meta": {"progressToken": "p"}},
    }
    read, _ = exchange(tmp_path, [*OPENING, json.dumps(call).encode() + b"\n"], 3)
    progress = [m["params"] for m in read if m.get("method") == "notifications/progress"]
    assert [(p["progress"], p.get("total")) for p in progress] == [(2.0, None)]
    assert read[-1]["id"] == 2 and read[-1]["result"]["content"][0]["text"] == "done"


def test_stdio_runs_sync_tools_on_a_pool_of_its_own(tmp_path: Path) -> None:
    """asyncio's default executor is 6 threads on 2 cores: a few slow sync calls held up every other."""
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "thread_name", "arguments": {}}}
    read, _ = exchange(tmp_path, [*OPENING, json.dumps(call).encode() + b"\n"], 2)
    assert read[1]["result"]["content"][0]["text"].startswith("harness-one-tool")


def test_stdio_answers_every_request_sent_before_the_client_closed_its_stdin(tmp_path: Path) -> None:
    """At the end of stdin the SDK ended the session: a call still running got "Connection closed" or
    nothing. Now the server ends once every request has its answer; a request the client cancelled
    (never answered) does not hold it."""

    def line(message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode() + b"\n"

    def wait(request_id: int, seconds: float) -> bytes:
        arguments = {"seconds": seconds, "tag": f"w{request_id}"}
        return line(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "wait", "arguments": arguments}}
        )

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "changed my mind"}}
    pings = [line({"jsonrpc": "2.0", "id": 100 + n, "method": "ping"}) for n in range(200)]
    requests = [*OPENING, wait(2, 0.5), wait(5, 60), line(cancel), *pings, wait(3, 0.3), b"{not json\n"]
    with serving(tmp_path) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(b"".join(requests))
        proc.stdin.close()  # before reading a single answer
        read = [json.loads(answer) for answer in proc.stdout]
        assert proc.wait(10) == 0
    answers = {answer["id"]: answer for answer in read}
    assert len(answers) == len(read) == 204, proc.stderr.read()[-2000:]
    assert sorted(i for i in answers if i is not None) == [1, 2, 3, *range(100, 300)]  # 5 was cancelled
    assert [answers[i]["result"]["content"][0]["text"] for i in (2, 3)] == ["done", "done"]
    assert answers[None]["error"]["code"] == -32700


async def test_a_flush_on_a_pipe_returns_once_every_byte_is_written() -> None:
    """A flush returned with up to 64 KiB still in the loop's buffer (its high-water mark), lost when the
    server ended before the client had read them: a slow client lost the last answers."""
    import fcntl

    from harness_one.mcp._stdio import _Out

    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4096)  # a pipe that holds 4 KiB (Linux)
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(write_fd, "wb", buffering=0)
    )
    try:
        out = _Out(asyncio.StreamWriter(transport, protocol, None, loop))
        await out.write("x" * 40_000)
        flushing = asyncio.ensure_future(out.flush())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not flushing.done()  # 36 KB wait in the loop's buffer for the client to read
        got = b""
        while len(got) < 40_000:
            got += await asyncio.to_thread(os.read, read_fd, 65536)
        await flushing
        assert transport.get_write_buffer_size() == 0
    finally:
        transport.close()
        os.close(read_fd)


@pytest.mark.parametrize("closed", [0, 1])
def test_stdio_with_stdin_or_stdout_closed_ends_quietly(tmp_path: Path, closed: int) -> None:
    """``serve <&-`` (or ``>&-``): a descriptor of uvloop's own landed on the closed fd, and libuv aborted the
    process when it closed it (``Assertion `fd > STDERR_FILENO' failed``, exit -6)."""
    done = serve_file(tmp_path, b"".join([*OPENING, PING]), ["sh", "-c", f'exec "$@" {closed}>&-', "sh", *serve_command()])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == b""  # no requests, or nowhere to answer them


@pytest.mark.parametrize("null", ["stdin", "stdout"])
def test_stdio_on_the_null_device(tmp_path: Path, null: str) -> None:
    """``serve < /dev/null`` or ``> /dev/null`` with a pipe on the other side: uvloop aborted the process
    polling the null device as a pipe (a character device, as a terminal is)."""
    streams: dict[str, Any] = {"stdin": subprocess.DEVNULL} if null == "stdin" else {"input": b"".join([*OPENING, PING])}
    done = subprocess.run(
        serve_command(),
        stdout=subprocess.DEVNULL if null == "stdout" else subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **server_env(tmp_path)},
        timeout=60,
        check=False,
        **streams,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_stdio_leaves_its_pipes_blocking_as_it_found_them(tmp_path: Path) -> None:
    """The event loop made stdin and stdout non-blocking, and left them so: a terminal shared with the
    shell that started ``serve`` then failed the shell's reads (EAGAIN) after the server had ended."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    try:
        os.write(stdin_w, b"".join([*OPENING, PING]))
        os.close(stdin_w)
        done = subprocess.run(
            serve_command(),
            check=False,
            stdin=stdin_r,
            stdout=stdout_w,
            stderr=subprocess.PIPE,
            env={**os.environ, **server_env(tmp_path)},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert os.get_blocking(stdin_r) and os.get_blocking(stdout_w)  # the same open files as the server's
        os.close(stdout_w)
        answers = [json.loads(line) for line in os.read(stdout_r, 65536).splitlines()]
        assert [answer["id"] for answer in answers] == [1, 3]
    finally:
        for fd in (stdin_r, stdout_r, stdout_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def test_a_listen_stream_open_at_the_end_of_stdin_does_not_hold_the_server(tmp_path: Path) -> None:
    """``subscriptions/listen`` is answered only when the session ends: waiting for every request to be
    answered before ending waited for it for ever (serve never exited after the client closed stdin)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    listen = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
    }
    with serving(tmp_path) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(listen).encode() + b"\n")
        proc.stdin.flush()
        acknowledged = json.loads(proc.stdout.readline())
        proc.stdin.close()
        assert proc.wait(10) == 0
        ended = [json.loads(line) for line in proc.stdout]
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert [answer.get("id") for answer in ended] == [1]  # the stream ends with the session


# ---------------------------------------------------------------- the bound on the wait at the end of stdin


class _GatedClock(ManualClock):
    """A manual clock whose waits pass only once ``opened`` is set (then at once, by exactly what was asked)."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = asyncio.Event()

    async def asleep(self, seconds: float) -> None:
        await self.opened.wait()
        await super().asleep(seconds)


async def _serve_lines(
    monkeypatch: pytest.MonkeyPatch, registry: ToolRegistry, lines: list[bytes], **options: Any
) -> list[dict[str, Any]]:
    """``serve_stdio`` in this process on ``lines`` (then the end of stdin), to its end; the lines it wrote."""
    from harness_one.mcp import serve_stdio

    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"".join(lines)), encoding="utf-8"))
    monkeypatch.setattr(sys, "stdout", stdout)
    with anyio.fail_after(60):  # a watchdog: the wait used to have no bound
        await serve_stdio(registry, **options)
    return [json.loads(line) for line in stdout.buffer.getvalue().splitlines()]  # type: ignore[attr-defined]


async def test_the_end_of_stdin_waits_at_most_the_drain_timeout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A running call of a tool without a timeout held ``serve`` for ever once stdin had ended. Now, after
    ``drain_timeout`` seconds of the registry's clock, it is cancelled (its plugins release what it held),
    answered ``Connection closed``, and stderr says how many requests went unanswered."""
    clock = _GatedClock()
    registry = ToolRegistry(autoload=False, clock=clock)
    release, cancelled = asyncio.Event(), []

    async def hang() -> str:
        """Wait until released."""
        clock.opened.set()  # the drain's wait passes once the call runs
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "released"

    registry.add(hang, max_concurrency=1)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hang", "arguments": {}}}
    answers = await _serve_lines(monkeypatch, registry, [*OPENING, json.dumps(call).encode() + b"\n"], drain_timeout=5)
    assert [(a["id"], a.get("error")) for a in answers] == [(1, None), (2, {"code": -32000, "message": "Connection closed"})]
    assert cancelled == [True] and clock.sleeps == [5] and clock.now() == 5
    assert "1 request still unanswered 5 s after the end of stdin (the drain timeout): cancelled" in capsys.readouterr().err
    release.set()
    assert (await registry.atry_call("hang", {})).value == "released"  # its max_concurrency slot was released


async def test_a_request_to_the_client_gets_connection_closed_at_the_end_of_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that asked the client something around the end of stdin waited for the answer for ever (only
    stdin could carry it), and so did ``serve``. Now the request gets ``Connection closed`` at once, as the SDK
    gives every one at the end of its input, and the call is answered."""
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    async def call_tool(ctx: Any, params: Any) -> dict[str, Any]:
        try:
            await ctx.session.send_ping()
            text = "pong"
        except MCPError as exc:
            text = f"{exc.error.code}: {exc.error.message}"
        return {"content": [{"type": "text", "text": text}]}

    server: Server[Any] = Server("asks", on_call_tool=call_tool)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "any", "arguments": {}}}
    lines = [*OPENING, json.dumps(call).encode() + b"\n"]
    answers = await _serve_lines(monkeypatch, ToolRegistry(autoload=False), lines, server=server, drain_timeout=None)
    assert [a.get("method") for a in answers if "method" in a] == ["ping"]  # the server's request went out
    result = next(a for a in answers if a.get("id") == 2)["result"]
    assert result["content"][0]["text"] == "-32000: Connection closed"


def test_serve_ends_after_its_drain_timeout(tmp_path: Path) -> None:
    """``--drain-timeout`` reaches the server: a call still running that long after the end of stdin is cancelled."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "wait", "arguments": {"seconds": 600, "tag": "w"}},
    }
    done = serve_file(tmp_path, b"".join([*OPENING, json.dumps(call).encode() + b"\n"]), serve_command("--drain-timeout", "0.05"))
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [(1, None), (2, -32000)]
    assert b"1 request still unanswered 0.05 s after the end of stdin" in done.stderr


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf])
async def test_serve_stdio_refuses_a_drain_timeout_that_is_not_positive_seconds(value: float) -> None:
    from harness_one.mcp import serve_stdio

    with pytest.raises(ValueError, match="drain_timeout must be a positive number of seconds or None"):
        await serve_stdio(ToolRegistry(autoload=False), drain_timeout=value)
