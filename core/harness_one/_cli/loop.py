"""``run``: the agent loop. One request per input line, exactly one answer line per request.

The loop never stops on bad input: a line that is not UTF-8, not JSON, nested too deeply,
too long, not an object, or not a tool call gets an ``InvalidRequest`` answer; a tool or plugin
failure gets the error answer the registry gives. A call that needs approval is answered
``approval_required``; a decision line (``{"approve": id}``, ``{"deny": id, "reason": ...}``)
is answered with that call's result or refusal, on its id. Answers are JSON written by one
encoder (``harness_one._render.dumps``), so they are valid JSON in valid UTF-8 whatever a
tool returned: lone surrogates become U+FFFD, ``NaN``/``Infinity`` become strings; and one line
each for any line reader (``json_line``: U+2028, U+2029 and U+0085 escaped).

Exit status: 0 when every request was answered (errors included); 1 with ``--fail-on-error``
when at least one answer was an error (``approval_required`` is not one); 70 when the loop
itself failed or an answer could not be written (no line is read after that); 130 on Ctrl-C,
at once (the calls still running cancelled, their plugins given up to a second to release what they held;
a sync tool still running is abandoned with the process); 143 on SIGTERM, as on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import signal
import sys
from codecs import BOM_UTF8
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import IO, TYPE_CHECKING, Any

import click

from .._errors import APPROVAL_REQUIRED, _seconds, exception_text
from ._main import (
    EX_SOFTWARE,
    EX_TERMINATED,
    Terminated,
    answers_out,
    main,
    printable,
    sigterm_as_interrupt,
    state_of,
    terminate,
    write_line,
)
from .calls import outcome_details

if TYPE_CHECKING:
    from .._requests import Decision, Request
    from .._stdout import LineReader, Writer

__all__ = ["EX_SOFTWARE", "Loop", "run"]

#: Said of a line that does not read because it starts with a byte-order mark (a file saved as "UTF-8 with BOM").
_BOM = " (the line starts with a UTF-8 byte-order mark: save the file as UTF-8 without one)"


@dataclass
class Loop:
    """The state of one run: the registry, where answers go, and what was answered."""

    registry: Any
    out: Writer
    text: bool = False
    progress: IO[str] | None = None
    counts: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    answered: int = 0
    broken: str | None = None
    #: Calls answered ``approval_required``: call id -> (the request's id, the tool's name).
    held: dict[str, tuple[Any, str]] = field(default_factory=dict)
    #: ``--strict``: read arguments as OpenAI strict mode sends them (nulls for absent optional ones).
    strict: bool = False

    def answer(self, answer: dict[str, Any], name: str) -> None:
        """Write one answer line; a failure to write marks the loop broken (exit 70)."""
        from .._render import json_line, safe_text

        error = answer.get("error", {})
        kind = "ok" if answer.get("ok") else "held" if error.get("kind") == APPROVAL_REQUIRED else str(error.get("type", "Error"))
        try:
            write_line(self.out, printable(_readable(answer, safe_text(name))) if self.text else json_line(answer))
        except Exception as exc:  # a closed or broken output: the answer is lost, not counted
            self.broken = self.broken or f"cannot write answers: {type(exc).__name__}: {exc}"
        else:
            self.answered += 1
            self.counts[kind] += 1
        if self.progress is not None:
            self.progress.write(f"\r{self.answered} answered, {_count(self.errors, 'error')}")
            self.progress.flush()

    def stopped(self) -> bool:
        """True once an answer could not be written: no more requests are run."""
        return self.broken is not None

    @property
    def errors(self) -> int:
        """Error answers so far (an ``approval_required`` answer is not one: its call waits)."""
        return self.answered - self.counts["ok"] - self.counts["held"]

    def invalid(self, lineno: int, message: str, request_id: Any = None) -> None:
        error = {"type": "InvalidRequest", "kind": "invalid_request", "message": f"line {lineno}: {message}"}
        self.answer({"id": request_id, "ok": False, "error": error}, "(malformed request)")

    def parse(self, lineno: int, raw: bytes) -> Request | Decision | None:
        """The line's request or decision; None when the line was answered as invalid."""
        from .._requests import BadRequest, Request, parse_line, resolve

        item: Request | Decision | None = None
        try:
            item = parse_line(raw)
            return resolve(item, self.registry, strict=self.strict) if isinstance(item, Request) else item
        except BadRequest as exc:
            self.invalid(lineno, f"{exc}{_BOM if raw.startswith(BOM_UTF8) else ''}", exc.request_id)
        except Exception as exc:  # never lose a line, whatever failed (answered on its id once it was read)
            self.invalid(lineno, f"internal error: {exception_text(exc)}", None if item is None else item.id)
        return None

    async def handle(self, lineno: int, item: Request | Decision, after: asyncio.Task[None] | None = None) -> None:
        """Answer one request or decision; whatever happens, it gets exactly one answer.

        It waits for ``after``: the task of the last earlier line with its call id (a request,
        or a decision), so the lines of one call id are answered in their order.
        """
        from .._requests import Decision, text_id

        rid: Any = item.id
        try:
            if after is not None:
                await asyncio.wait([after])
            if isinstance(item, Decision):
                rid, name = self.held.pop(item.call_id, (item.id, "(decision)"))
                self.answer(await self._decide(lineno, item, rid), name)
                return
            result = await self.registry.atry_call(
                item.name,
                item.arguments,
                call_id=text_id(item.id),
                idempotency_key=item.idempotency_key,
                context=item.context,
            )
            if result.error is not None and result.error.kind == APPROVAL_REQUIRED:
                self._hold(result.call_id, item)
            self.answer(_answer_for(item.id, result), item.name)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # never lose a line, whatever failed
            self.invalid(lineno, f"internal error: {exception_text(exc)}", rid)

    def _hold(self, call_id: str, request: Request) -> None:
        """Remember whose call ``call_id`` is, keeping as many as the approval plugin keeps pending."""
        self.held.pop(call_id, None)
        self.held[call_id] = (request.id, request.name)
        keep = getattr(self.registry.plugins.get("approval"), "max_pending", 10_000)
        while len(self.held) > keep:
            del self.held[next(iter(self.held))]

    async def _decide(self, lineno: int, decision: Decision, rid: Any) -> dict[str, Any]:
        """Record the decision and run the held call: its answer, or why there is none."""
        from .._errors import ToolError

        approval = self.registry.plugins.get("approval")
        if approval is None:
            message = f"line {lineno}: no call waits for a decision: the approval plugin is not loaded"
            return {"id": rid, "ok": False, "error": {"type": "InvalidRequest", "kind": "invalid_request", "message": message}}
        try:
            if decision.approve:
                approval.approve(decision.call_id)
            else:
                approval.deny(decision.call_id, decision.reason)
            result = await approval.aresume(decision.call_id)
        except ToolError as exc:  # ApprovalNotFound: no call waits under that id
            return {"id": rid, "ok": False, "error": exc.to_dict()}
        return _answer_for(rid, result)

    def summary(self) -> str:
        errors = {k: v for k, v in self.counts.items() if k not in ("ok", "held")}
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        lost = self.requests - self.answered
        held = self.counts["held"]
        return (
            f"harness-one run: {_count(self.requests, 'request')}, {self.counts['ok']} ok, {_count(sum(errors.values()), 'error')}"
            + (f" ({detail})" if detail else "")
            + (f", {held} held for approval" if held else "")
            + (f"; {lost} NOT ANSWERED" if lost else "")
        )


def _count(number: int, noun: str) -> str:
    """``1 request``, ``2 requests``, ``0 requests``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _answer_for(rid: Any, result: Any) -> dict[str, Any]:
    """The answer line for a :class:`~harness_one.CallResult` (``attempts`` and ``ran`` as ``call`` gives them)."""
    if result.ok:
        return {"id": rid, "ok": True, "result": result.value, **outcome_details(result)}
    return {"id": rid, "ok": False, "error": result.error.to_dict()}


def _readable(answer: dict[str, Any], name: str) -> str:
    from .._render import dumps, safe_text

    rid = answer.get("id")
    head = printable(f"[{'?' if rid is None else safe_text(str(rid))}] {name}", one_line=True)
    if answer["ok"]:
        tries = f" (after {answer['attempts']} attempts)" if "attempts" in answer else ""
        if answer.get("ran") is False:
            tries += " (not run: an earlier outcome)"
        return f"{head} -> ok{tries}: {dumps(answer['result'])}"
    error = answer["error"]
    wait = error.get("retry_after")
    extra = f" (retry after {_seconds(wait, up=True)} s)" if isinstance(wait, (int, float)) else ""
    message = safe_text(str(error.get("message", ""))).replace("\n", "\n      ")
    if error.get("kind") == APPROVAL_REQUIRED:
        message += f"\n      arguments: {dumps(error.get('arguments'))}"
    return f"{head} -> {error['type']}{extra}:\n      {message}"


class _Lines:
    """Reads a binary stream line by line, never holding more than ``limit`` bytes of one line."""

    def __init__(self, source: LineReader, limit: int) -> None:
        self.source = source
        self.limit = limit

    def next(self) -> tuple[bytes, tuple[bytes, bytes] | None] | None:
        """``(line, None)``, or None at the end. A too-long line's rest is read and dropped: ``(b"", (head, tail))``,
        with only its first and last :data:`~harness_one._requests.CUT_KEEP` bytes, to read its id from."""
        from .._requests import CUT_KEEP

        line = self.source.readline(self.limit + 1)
        if not line:
            return None
        if len(line) <= self.limit or line.endswith(b"\n"):
            return line.rstrip(b"\r\n"), None
        head, tail = line[:CUT_KEEP], line[-CUT_KEEP - 2 :]
        while True:  # skip the rest of an oversized line
            rest = self.source.readline(1 << 16)
            tail = (tail + rest)[-CUT_KEEP - 2 :]  # (+ the line ending)
            if not rest or rest.endswith(b"\n"):
                return b"", (head, tail.rstrip(b"\r\n")[-CUT_KEEP:])


def _cut_id(head: bytes, tail: bytes) -> Any:
    """The id of a line dropped for its length, read as ``serve`` reads one (:func:`~harness_one._requests.cut_line`):
    a string or a finite number, else None; for a Responses item (its ``type`` seen at the line's start or end) its
    ``call_id``, read at either (the SDK writes both after the ``arguments``), never its ``id``: the id the whole line
    would have been answered on (:func:`~harness_one._requests.partial_id`)."""
    from .._requests import cut_line, partial_id, tail_members

    members, _, rid = cut_line(head, tail)
    return partial_id(rid, members, tail_members(tail))


def _forget(by_id: dict[str, asyncio.Task[None]], key: str, task: asyncio.Task[None]) -> None:
    if by_id.get(key) is task:
        del by_id[key]


async def serve_lines(loop: Loop, source: LineReader, concurrency: int, limit: int) -> None:
    """Answer every line of ``source``, at most ``concurrency`` at once.

    Lines with the same call id (requests by their ``id``, decisions by the id they decide)
    are answered in their order, each after the one before it: a decision decides the call of
    the last line before it with that id and never a later one, so a scripted session decides
    the same calls in every mode. Lines with different ids run concurrently.
    """
    from .._requests import Request, text_id

    lines = _Lines(source, limit)
    slots = asyncio.Semaphore(concurrency)
    pending: set[asyncio.Task[None]] = set()
    by_id: dict[str, asyncio.Task[None]] = {}  # the last running line (request or decision) of each call id
    lineno = 0

    async def one(number: int, item: Request | Decision, after: asyncio.Task[None] | None) -> None:
        try:
            await loop.handle(number, item, after)
        finally:
            slots.release()

    while not loop.stopped():
        item = await asyncio.to_thread(lines.next)
        if item is None:
            break
        lineno += 1
        raw, cut = item
        if cut is None and not raw.strip():
            continue
        await slots.acquire()  # before any answer, so that with one slot answers come in order
        if loop.stopped():  # an answer before this line could not be written
            slots.release()
            break
        loop.requests += 1
        parsed = None if cut is not None else loop.parse(lineno, raw)
        if parsed is None:
            if cut is not None:
                loop.invalid(lineno, f"the line is longer than {limit} bytes", _cut_id(*cut))
            slots.release()
            continue
        key = text_id(parsed.id) if isinstance(parsed, Request) else parsed.call_id
        after = None if key is None else by_id.get(key)
        task = asyncio.create_task(one(lineno, parsed, after))
        pending.add(task)
        task.add_done_callback(pending.discard)
        if key is not None:
            by_id[key] = task
            task.add_done_callback(partial(_forget, by_id, key))
    if pending:
        await asyncio.gather(*pending)


class _InputFile(click.File):
    """``click.File("rb")``, but ``-`` is None: stdin is taken by :func:`_requests_in`."""

    def __init__(self) -> None:
        super().__init__("rb")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (str, os.PathLike)) and os.fsdecode(value) == "-":
            return None
        return super().convert(value, param, ctx)


def _requests_in(ctx: click.Context, source: IO[bytes] | None) -> LineReader:
    """Where the requests come from: ``source``, or stdin (None). Either way, until the command
    ends, fd 0 and ``sys.stdin`` read the null device, so a tool that reads stdin reads nothing
    (not the requests); a closed stdin holds no requests."""
    from .._stdout import stdin_for_requests

    stdin = ctx.with_resource(stdin_for_requests())
    if source is not None:
        return source
    return stdin if stdin is not None else io.BytesIO()


@main.command()
@click.option(
    "--concurrency",
    default=1,
    show_default=True,
    type=click.IntRange(1, 1024),
    help="Requests run at once; answers carry their id.",
)
@click.option(
    "--output", type=click.Choice(["jsonl", "text"]), default="jsonl", show_default=True, help="JSON Lines, or readable text."
)
@click.option("--input", "source", type=_InputFile(), default="-", help="Read requests from this file instead of stdin.")
@click.option("--fail-on-error", is_flag=True, help="Exit 1 if any answer was an error.")
@click.option(
    "--strict",
    is_flag=True,
    help="The calls come from a model given export --strict (or --strict-auto): a null it sends for an optional "
    "parameter means absent, so the default applies (OpenAI calls and plain requests).",
)
@click.pass_context
def run(ctx: click.Context, concurrency: int, output: str, source: IO[bytes], fail_on_error: bool, strict: bool) -> None:
    """The agent loop: JSON Lines requests on stdin, one answer line per request on stdout.

    A request is {"id", "name", "arguments"} (optionally "idempotency_key", "context"), an
    OpenAI tool call, a Responses function_call, an Anthropic tool_use block or a Gemini
    function_call. An answer is {"id", "ok": true, "result"} or {"id", "ok": false, "error":
    {"type", "kind", "message", ...}}; a call needing approval gets the error kind
    "approval_required" and waits for a line {"approve": "<call id>"} or {"deny": "<call id>",
    "reason": "..."}, which is answered with the call's result or refusal on the call's id.
    Once the loop starts, every line gets exactly one answer, whatever it holds.
    Exit status: 0 every request answered; 1 an error answer with --fail-on-error, or (no line
    read) a SQLite state file cannot be opened or an MCP server cannot be reached; 70 the loop
    failed or an answer was lost; 2 bad usage or configuration. Progress (on a terminal), a
    summary and what a tool prints go to stderr; a tool that reads stdin reads nothing. SIGTERM
    ends it as Ctrl-C does (the summary, then exit 143).
    """
    from .._stdout import is_closed

    out = answers_out(ctx, "run")  # before the tools load: what they print goes to stderr
    requests = _requests_in(ctx, source)  # before the tools load too: what they read is the null device
    sigterm = ctx.with_resource(sigterm_as_interrupt())  # while the tools load; the loop's handler below
    registry = state_of(ctx).registry()
    progress = None if is_closed(sys.stderr) or not sys.stderr.isatty() else sys.stderr  # 2>&-: no progress
    loop = Loop(registry, out, text=output == "text", progress=progress, strict=strict)
    limit = max(2 * registry.limits.max_bytes, 1 << 16)
    events = asyncio.new_event_loop()  # not asyncio.run: on Ctrl-C it would wait for every worker thread
    asyncio.set_event_loop(events)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not on Windows, nor off the main thread
        # Also wakes the loop when the signal lands on a worker thread (the stdin reader, a tool).
        events.add_signal_handler(signal.SIGINT, _interrupt)
        if sigterm:
            events.add_signal_handler(signal.SIGTERM, terminate)
    try:
        events.run_until_complete(serve_lines(loop, requests, concurrency, limit))
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        terminated = isinstance(exc, Terminated)
        _cancel_calls(events)
        click.echo(("\n" if progress else "") + loop.summary() + (" (terminated)" if terminated else " (interrupted)"), err=True)
        _exit_now(EX_TERMINATED if terminated else 130)
    except Exception as exc:
        loop.broken = loop.broken or f"{type(exc).__name__}: {exc}"
    try:
        left = asyncio.all_tasks(events)  # what asyncio.run does on the way out
        for task in left:
            task.cancel()
        events.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        events.run_until_complete(events.shutdown_asyncgens())
        events.run_until_complete(events.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        events.close()
    if progress is not None:
        progress.write("\n")
    click.echo(loop.summary(), err=True)
    if loop.broken or loop.answered != loop.requests:
        click.echo(f"harness-one run: the loop failed: {loop.broken or 'answers were lost'}", err=True)
        ctx.exit(EX_SOFTWARE)
    if fail_on_error and loop.errors:
        ctx.exit(1)


#: Seconds the calls cancelled by Ctrl-C or SIGTERM have to release what they held before the loop exits.
RELEASE_WAIT = 1.0


def _cancel_calls(events: asyncio.AbstractEventLoop) -> None:
    """Cancel the calls still running, so their plugins release what they held (an idempotency key): at most
    :data:`RELEASE_WAIT` seconds, cut short by a second Ctrl-C or SIGTERM. A sync tool's thread runs on."""
    running = asyncio.all_tasks(events)
    for task in running:
        task.cancel()
    if running:
        with contextlib.suppress(BaseException):  # a second signal, or a release that failed: exit all the same
            events.run_until_complete(asyncio.wait(running, timeout=RELEASE_WAIT))


def _interrupt() -> None:
    raise KeyboardInterrupt  # out of the loop's run_until_complete, as a signal in the main thread would


def _exit_now(status: int) -> None:
    """Exit without waiting for threads: the stdin reader and a sync tool still running are abandoned.

    A blocked read of stdin, or a tool that never returns, would otherwise hold the process
    (and a second Ctrl-C at interpreter shutdown can abort it). Output and log handlers are
    flushed first; other ``atexit`` work is skipped.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed stream: nothing more can be written
            if stream is not None:
                stream.flush()
    logging.shutdown()
    os._exit(status)
