"""``run``: the agent loop. One request per input line, exactly one answer line per request.

The loop never stops on bad input: a line that is not UTF-8, not JSON, nested too deeply,
too long, not an object, or not a tool call gets an ``InvalidRequest`` answer; a tool or plugin
failure gets the error answer the registry gives. Answers are JSON written by one encoder
(``harness_one._render.dumps``), so they are valid JSON in valid UTF-8 whatever a tool
returned: lone surrogates become U+FFFD, ``NaN``/``Infinity`` become strings.

Exit status: 0 when every request was answered (errors included); 1 with ``--fail-on-error``
when at least one answer was an error; 70 when the loop itself failed or an answer could not
be written; 130 on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

import click

from ._main import main, state_of

__all__ = ["Loop", "run"]

EX_SOFTWARE = 70


@dataclass
class Loop:
    """The state of one run: the registry, where answers go, and what was answered."""

    registry: Any
    out: IO[bytes]
    text: bool = False
    progress: IO[str] | None = None
    counts: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    answered: int = 0
    broken: str | None = None

    def answer(self, answer: dict[str, Any], name: str) -> None:
        """Write one answer line; a failure to write marks the loop broken (exit 70)."""
        from .._render import dumps, safe_text

        self.answered += 1
        self.counts["ok" if answer.get("ok") else str(answer.get("error", {}).get("type", "Error"))] += 1
        try:
            line = _readable(answer, safe_text(name)) if self.text else dumps(answer)
            self.out.write(line.encode("utf-8", "replace") + b"\n")
            self.out.flush()
        except Exception as exc:  # a closed or broken output
            self.answered -= 1
            self.broken = self.broken or f"cannot write answers: {type(exc).__name__}: {exc}"
        if self.progress is not None:
            self.progress.write(f"\r{self.answered} answered, {self.answered - self.counts['ok']} errors")
            self.progress.flush()

    def invalid(self, lineno: int, message: str, request_id: Any = None) -> None:
        error = {"type": "InvalidRequest", "kind": "invalid_request", "message": f"line {lineno}: {message}"}
        self.answer({"id": request_id, "ok": False, "error": error}, "(malformed request)")

    async def handle(self, lineno: int, raw: bytes) -> None:
        """Parse and answer one line; whatever happens, it gets exactly one answer."""
        from .._requests import BadRequest, parse_line, resolve

        rid: Any = None
        try:
            try:
                request = resolve(parse_line(raw), self.registry)
            except BadRequest as exc:
                self.invalid(lineno, str(exc), exc.request_id)
                return
            rid = request.id
            result = await self.registry.atry_call(
                request.name,
                request.arguments,
                call_id=None if request.id is None else str(request.id),
                idempotency_key=request.idempotency_key,
                context=request.context,
            )
            if result.ok:
                answer: dict[str, Any] = {"id": request.id, "ok": True, "result": result.value}
                if result.attempts > 1:
                    answer["attempts"] = result.attempts
            else:
                answer = {"id": request.id, "ok": False, "error": result.error.to_dict()}
            self.answer(answer, request.name)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # never lose a line, whatever failed
            self.invalid(lineno, f"internal error: {type(exc).__name__}: {exc}", rid)

    def summary(self) -> str:
        errors = {k: v for k, v in self.counts.items() if k != "ok"}
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        lost = self.requests - self.answered
        return (
            f"harness-one run: {self.requests} requests, {self.counts['ok']} ok, {sum(errors.values())} errors"
            + (f" ({detail})" if detail else "")
            + (f"; {lost} NOT ANSWERED" if lost else "")
        )


def _readable(answer: dict[str, Any], name: str) -> str:
    from .._render import dumps, safe_text

    rid = answer.get("id")
    head = f"[{'?' if rid is None else safe_text(str(rid))}] {name}"
    if answer["ok"]:
        tries = f" (after {answer['attempts']} attempts)" if "attempts" in answer else ""
        return f"{head} -> ok{tries}: {dumps(answer['result'])}"
    error = answer["error"]
    extra = f" (retry after {error['retry_after']:.3g} s)" if isinstance(error.get("retry_after"), (int, float)) else ""
    message = safe_text(str(error.get("message", ""))).replace("\n", "\n      ")
    return f"{head} -> {error['type']}{extra}:\n      {message}"


class _Lines:
    """Reads a binary stream line by line, never holding more than ``limit`` bytes of one line."""

    def __init__(self, source: IO[bytes], limit: int) -> None:
        self.source = source
        self.limit = limit

    def next(self) -> tuple[bytes, bool] | None:
        """``(line, too_long)``, or None at the end. A too-long line's rest is read and dropped."""
        line = self.source.readline(self.limit + 1)
        if not line:
            return None
        if len(line) <= self.limit or line.endswith(b"\n"):
            return line.rstrip(b"\r\n"), False
        while True:  # skip the rest of an oversized line
            rest = self.source.readline(1 << 16)
            if not rest or rest.endswith(b"\n"):
                return b"", True


async def serve_lines(loop: Loop, source: IO[bytes], concurrency: int, limit: int) -> None:
    """Answer every line of ``source``, at most ``concurrency`` at once."""
    lines = _Lines(source, limit)
    slots = asyncio.Semaphore(concurrency)
    pending: set[asyncio.Task[None]] = set()
    lineno = 0

    async def one(number: int, raw: bytes) -> None:
        try:
            await loop.handle(number, raw)
        finally:
            slots.release()

    while True:
        item = await asyncio.to_thread(lines.next)
        if item is None:
            break
        lineno += 1
        raw, too_long = item
        if not too_long and not raw.strip():
            continue
        loop.requests += 1
        if too_long:
            loop.invalid(lineno, f"the line is longer than {limit} bytes")
            continue
        await slots.acquire()
        task = asyncio.create_task(one(lineno, raw))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)


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
@click.option("--input", "source", type=click.File("rb"), default="-", help="Read requests from this file instead of stdin.")
@click.option("--fail-on-error", is_flag=True, help="Exit 1 if any answer was an error.")
@click.pass_context
def run(ctx: click.Context, concurrency: int, output: str, source: IO[bytes], fail_on_error: bool) -> None:
    """The agent loop: JSON Lines requests on stdin, one answer line per request on stdout.

    A request is {"id", "name", "arguments"} (optionally "idempotency_key", "context"), an
    OpenAI tool call, a Responses function_call, an Anthropic tool_use block or a Gemini
    function_call. An answer is {"id", "ok": true, "result"} or {"id", "ok": false, "error":
    {"type", "kind", "message", ...}}. Every request gets exactly one answer, whatever it holds.
    Exit status: 0 every request answered; 1 an error answer with --fail-on-error; 70 the loop
    failed or an answer was lost; 2 bad usage. Progress (on a terminal) and a summary go to stderr.
    """
    registry = state_of(ctx).registry()
    if sys.stdout is None:  # started with stdout closed: nothing can be answered
        click.echo("harness-one run: the loop failed: cannot write answers: stdout is closed", err=True)
        ctx.exit(EX_SOFTWARE)
    out = sys.stdout.buffer
    progress = sys.stderr if sys.stderr.isatty() else None
    loop = Loop(registry, out, text=output == "text", progress=progress)
    limit = max(2 * registry.limits.max_bytes, 1 << 16)
    try:
        asyncio.run(serve_lines(loop, source, concurrency, limit))
    except KeyboardInterrupt:
        click.echo(("\n" if progress else "") + loop.summary() + " (interrupted)", err=True)
        ctx.exit(130)
    except Exception as exc:
        loop.broken = loop.broken or f"{type(exc).__name__}: {exc}"
    if progress is not None:
        progress.write("\n")
    click.echo(loop.summary(), err=True)
    if loop.broken or loop.answered != loop.requests:
        click.echo(f"harness-one run: the loop failed: {loop.broken or 'answers were lost'}", err=True)
        ctx.exit(EX_SOFTWARE)
    if fail_on_error and loop.answered != loop.counts["ok"]:
        ctx.exit(1)
