"""The ``harness-one`` command line: list, describe, call, export, doctor, and the agent loop ``run``."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import logging
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

import click

from ._config import ConfigError, Settings, load_settings

__all__ = ["EXIT_CODES", "main"]

#: Exit codes of ``harness-one call`` (and of ``run`` on a bad configuration).
EXIT_CODES = {
    "ok": 0,
    "usage": 2,
    "not_found": 3,
    "invalid_arguments": 4,
    "rate_limited": 5,
    "timeout": 6,
    "tool_failed": 7,
    "other": 8,
}
_ERROR_EXIT = {
    "ToolNotFound": "not_found",
    "ToolArgumentError": "invalid_arguments",
    "RateLimitExceeded": "rate_limited",
    "ToolTimeout": "timeout",
    "ToolExecutionError": "tool_failed",
}


@dataclass
class _State:
    settings: Settings
    tool_specs: list[str]
    _registry: Any = None
    local_failures: list[str] = field(default_factory=list)

    def registry(self) -> Any:
        if self._registry is None:
            self._registry = build_registry(self.settings, self.tool_specs, self.local_failures)
        return self._registry


def build_registry(settings: Settings, tool_specs: Iterable[str] = (), failures: list[str] | None = None) -> Any:
    """The CLI's registry: installed tool packages, configured standard plugins, local tool modules."""
    from . import ToolRegistry
    from ._discovery import _collect, as_tool

    plugins: dict[str, Any] = {}
    blocked = set(settings.block)
    if "rate_limit" not in blocked and settings.rate_limit is not None:
        from harness_one_plugins import RateLimitPlugin

        plugins["rate_limit"] = RateLimitPlugin(default=settings.rate_limit)
    if "timeout" not in blocked and settings.timeout is not None:
        from harness_one_plugins import TimeoutPlugin

        plugins["timeout"] = TimeoutPlugin(default=settings.timeout)
    if "concurrency" not in blocked and settings.max_concurrency is not None:
        from harness_one_plugins import ConcurrencyPlugin

        plugins["concurrency"] = ConcurrencyPlugin(default=settings.max_concurrency)
    if "idempotency" not in blocked and settings.idempotency_store == "sqlite":
        from harness_one_plugins import IdempotencyPlugin, SQLiteStore

        path = Path(settings.idempotency_path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            store = SQLiteStore(path)
        except (OSError, sqlite3.Error) as exc:
            raise click.ClickException(
                f"cannot open the idempotency store {str(path)!r}: {exc} (set HARNESS_ONE_IDEMPOTENCY_DB)"
            ) from None
        plugins["idempotency"] = IdempotencyPlugin(store=store)
    registry = ToolRegistry(
        plugins=plugins,
        block=settings.block,
        allow=settings.allow,
        autoload=settings.autoload,
        strict=settings.strict,
        discover=True,
    )
    for spec in [*settings.tools, *tool_specs]:
        try:
            module = _import(spec)
            items = _collect(module) or []
            for item in items:
                tool = as_tool(item)
                tool.source = tool.source or f"local:{spec}"
                registry.add(tool, replace=True)
        except Exception as exc:
            message = f"{spec}: {type(exc).__name__}: {exc}"
            if failures is None:
                raise click.ClickException(f"cannot load tools from {message}") from exc
            failures.append(message)
    return registry


def _import(spec: str) -> Any:
    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        path = Path(spec).resolve()
        name = f"harness_one_local_{abs(hash(str(path)))}"
        loader = importlib.util.spec_from_file_location(name, path)
        if loader is None or loader.loader is None:
            raise ImportError(f"cannot import {spec}")
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        loader.loader.exec_module(module)
        return module
    return importlib.import_module(spec)


def configure_logging(fmt: str | None, level: str, stream: TextIO) -> None:
    """Structured logs on ``stream`` (stderr): ``console`` on a terminal, ``json`` otherwise."""
    import structlog

    if fmt is None:
        fmt = "console" if stream.isatty() else "json"
    renderer: Any = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


def _dumps(value: Any, indent: int | None = None) -> str:
    from ._render import json_default

    return json.dumps(value, ensure_ascii=False, default=json_default, indent=indent)


# --------------------------------------------------------------------------- the group


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config", "config_path", metavar="FILE", help="TOML configuration (default: $HARNESS_ONE_CONFIG or ./harness-one.toml)."
)
@click.option(
    "--tools",
    "tool_specs",
    multiple=True,
    metavar="MODULE|FILE.py",
    help="Also load the tools defined in this module or file (repeatable).",
)
@click.option(
    "--log-format",
    type=click.Choice(["console", "json"]),
    help="Log format on stderr (default: console on a terminal, json otherwise).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    help="Log level (default: warning; info shows every call).",
)
@click.version_option(package_name="harness-one", prog_name="harness-one")
@click.pass_context
def main(
    ctx: click.Context, config_path: str | None, tool_specs: tuple[str, ...], log_format: str | None, log_level: str | None
) -> None:
    """harness-one: the tool system LLM agents call through.

    Tools come from installed tool packages (the harness_one.tools entry points) and from
    --tools. Exit codes of `call`: 0 ok, 3 unknown tool, 4 invalid arguments, 5 rate
    limited, 6 timeout, 7 the tool failed, 8 any other tool error, 2 usage or configuration.
    """
    try:
        settings = load_settings(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    settings.log_format = log_format or settings.log_format
    settings.log_level = log_level or settings.log_level
    configure_logging(settings.log_format, settings.log_level, sys.stderr)
    ctx.obj = _State(settings, list(tool_specs))


def _state(ctx: click.Context) -> _State:
    state = ctx.find_object(_State)
    assert state is not None
    return state


# --------------------------------------------------------------------------- list / describe


def _policy_text(tool: Any) -> dict[str, str]:
    limit = tool.rate_limit
    return {
        "rate_limit": f"{limit.rate:g}/s burst {limit.burst:g}" if limit else "-",
        "timeout": f"{tool.timeout:g}s" if tool.timeout else "-",
        "idempotent": "yes" if tool.idempotent else "no",
    }


@main.command("list")
@click.option(
    "--json", "as_json", is_flag=True, help="JSON for scripts (the default when stdout is not a terminal is still a table)."
)
@click.pass_context
def list_tools(ctx: click.Context, as_json: bool) -> None:
    """List the tools: name, source package, rate limit, timeout, idempotent."""
    tools = _state(ctx).registry().tools()
    rows = [
        {"name": t.name, "source": t.source or "-", **_policy_text(t), "description": t.description.split("\n")[0]} for t in tools
    ]
    if as_json:
        click.echo(_dumps(rows, indent=2))
        return
    headers = ["name", "source", "rate_limit", "timeout", "idempotent"]
    widths = {h: max([len(h)] + [len(str(r[h])) for r in rows]) for h in headers}
    click.echo("  ".join(h.upper().ljust(widths[h]) for h in headers))
    for row in rows:
        click.echo("  ".join(str(row[h]).ljust(widths[h]) for h in headers).rstrip())


@main.command()
@click.argument("name")
@click.pass_context
def describe(ctx: click.Context, name: str) -> None:
    """Show a tool's schema, policies and metadata as JSON."""
    from . import ToolNotFound

    try:
        tool = _state(ctx).registry().get(name)
    except ToolNotFound as err:
        click.echo(str(err), err=True)
        ctx.exit(EXIT_CODES["not_found"])
    limit = tool.rate_limit
    info = {
        **tool.describe(),
        "source": tool.source,
        "is_async": tool.is_async,
        "policies": {
            "rate_limit": None
            if limit is None
            else {
                "rate": limit.rate,
                "burst": limit.burst,
                "cost": limit.cost,
                "key": None if limit.key is None else str(limit.key),
            },
            "timeout": tool.timeout,
            "timeout_mode": tool.timeout_mode,
            "total_timeout": tool.total_timeout,
            "idempotent": tool.idempotent,
            "retry": None
            if tool.retry is None
            else {"attempts": tool.retry.attempts, "on": [t.__name__ for t in tool.retry.on], "timeouts": tool.retry.timeouts},
            "max_concurrency": tool.max_concurrency,
            "circuit_breaker": tool.circuit_breaker is not None,
            "cache_ttl": tool.cache_ttl,
        },
        "hints": {"read_only": tool.read_only, "destructive": tool.destructive, "open_world": tool.open_world},
        "tags": sorted(tool.tags),
        "output_schema": tool.output_schema,
    }
    click.echo(_dumps(info, indent=2))


# --------------------------------------------------------------------------- call


def _exit_code(error: Any) -> int:
    for cls in type(error).__mro__:
        if cls.__name__ in _ERROR_EXIT:
            return EXIT_CODES[_ERROR_EXIT[cls.__name__]]
    return EXIT_CODES["other"]


@main.command()
@click.argument("name")
@click.option("--args", "arguments", default="{}", metavar="JSON", help="The arguments, a JSON object.")
@click.option(
    "--context", "context_json", default=None, metavar="JSON", help="Caller context (e.g. a user_id for keyed rate limits)."
)
@click.option("--idempotency-key", default=None, help="Replay the first outcome of this key.")
@click.pass_context
def call(ctx: click.Context, name: str, arguments: str, context_json: str | None, idempotency_key: str | None) -> None:
    """Call tool NAME once and print its answer as JSON; the exit code tells the outcome."""
    context = None
    if context_json:
        try:
            context = json.loads(context_json)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--context") from None
    result = _state(ctx).registry().try_call(name, arguments, context=context, idempotency_key=idempotency_key)
    click.echo(_dumps(result.to_dict(), indent=2))
    if not result.ok:
        click.echo(result.for_model(), err=True)
        ctx.exit(_exit_code(result.error))


# --------------------------------------------------------------------------- export


@main.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openai", "openai-responses", "anthropic", "gemini", "mcp"]),
    default="openai",
    show_default=True,
)
@click.option("--strict", is_flag=True, help="OpenAI strict mode (fails, naming the schema parts, when a tool cannot be strict).")
@click.pass_context
def export(ctx: click.Context, fmt: str, strict: bool) -> None:
    """Print every tool's definition in a provider's format (JSON); notes about conversions go to stderr."""
    from . import ToolDefinitionError

    try:
        result = _state(ctx).registry().export(fmt, strict=strict)
    except ToolDefinitionError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(_dumps(result.tools, indent=2))
    for tool, notes in result.notes.items():
        for note in notes:
            click.echo(f"{tool}: {note}", err=True)


# --------------------------------------------------------------------------- doctor


@main.command()
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Report installed tool packages and plugins, load failures and name conflicts (exit 1 if any)."""
    import platform

    from . import __version__

    state = _state(ctx)
    registry = state.registry()
    tools = registry.tools()
    report = {
        "harness_one": __version__,
        "python": platform.python_version(),
        "config": state.settings.source,
        "plugins": [
            {"name": n, "source": registry.plugins.sources.get(n, "registered in code")} for n in registry.plugins.names()
        ],
        "blocked_plugins": sorted(state.settings.block),
        "hook_order": dict(registry.plugins.plan.order),
        "tool_packages": registry.discovery.loaded,
        "tools": len(tools),
        "failures": [str(f) for f in [*registry.plugins.failures, *registry.discovery.failures]] + state.local_failures,
        "conflicts": [str(c) for c in registry.discovery.conflicts],
    }
    if as_json:
        click.echo(_dumps(report, indent=2))
    else:
        click.echo(f"harness-one {report['harness_one']} on Python {report['python']}; config: {report['config'] or 'none'}")
        click.echo(f"\nPlugins ({len(report['plugins'])}):")
        for p in report["plugins"]:
            click.echo(f"  {p['name']:<16} {p['source']}")
        for hook, names in report["hook_order"].items():
            click.echo(f"  {hook:<13} {' -> '.join(names) or '-'}")
        click.echo(f"\nTool packages ({len(report['tool_packages'])}), {report['tools']} tools:")
        for dist, names in sorted(report["tool_packages"].items()):
            click.echo(f"  {dist:<28} {', '.join(names)}")
        click.echo(f"\nLoad failures: {len(report['failures']) or 'none'}")
        for line in report["failures"]:
            click.echo(f"  {line}")
        click.echo(f"Name conflicts: {len(report['conflicts']) or 'none'}")
        for line in report["conflicts"]:
            click.echo(f"  {line}")
    if report["failures"] or report["conflicts"]:
        ctx.exit(1)


# --------------------------------------------------------------------------- run


@dataclass
class Request:
    """One request of the agent loop, normalised from any of the accepted shapes."""

    id: Any
    name: str
    arguments: Any
    idempotency_key: str | None = None
    context: dict[str, Any] | None = None


class BadRequest(Exception):
    def __init__(self, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.request_id = request_id


def parse_request(line: str) -> Request:
    """``{"id", "name", "arguments"}``, an OpenAI tool call, a Responses ``function_call`` or an Anthropic ``tool_use`` block."""
    try:
        data = json.loads(line.strip())
    except ValueError as exc:
        raise BadRequest(f"the line is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(f"a request must be a JSON object, not {type(data).__name__}")
    rid = data.get("id")
    if data.get("type") == "tool_use":
        name, arguments = data.get("name"), data.get("input", {})
    elif isinstance(data.get("function"), dict):
        name, arguments = data["function"].get("name"), data["function"].get("arguments", "{}")
    elif data.get("type") == "function_call":
        rid = data.get("call_id", rid)
        name, arguments = data.get("name"), data.get("arguments", "{}")
    else:
        name, arguments = data.get("name"), data.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise BadRequest("the request has no tool 'name'", rid)
    key = data.get("idempotency_key")
    context = data.get("context")
    if context is not None and not isinstance(context, dict):
        raise BadRequest("'context' must be a JSON object", rid)
    return Request(rid, name, arguments, key if isinstance(key, str) else None, context)


class _Loop:
    def __init__(self, registry: Any, output: str, out: IO[str]) -> None:
        self.registry = registry
        self.output = output
        self.out = out
        self.counts: Counter[str] = Counter()

    def bad(self, exc: BadRequest, lineno: int) -> None:
        self.counts["InvalidRequest"] += 1
        error = {"type": "InvalidRequest", "message": f"line {lineno}: {exc}"}
        self.emit({"id": exc.request_id, "ok": False, "error": error}, "(malformed request)")

    def answer(self, request: Request, result: Any) -> None:
        self.counts["ok" if result.ok else type(result.error).__name__] += 1
        if result.ok:
            answer: dict[str, Any] = {"id": request.id, "ok": True, "result": result.value}
            if result.attempts > 1:
                answer["attempts"] = result.attempts
        else:
            answer = {"id": request.id, "ok": False, "error": result.error.to_dict()}
        self.emit(answer, request.name)

    def emit(self, answer: dict[str, Any], name: str) -> None:
        if self.output == "jsonl":
            self.out.write(_dumps(answer) + "\n")
        else:
            self.out.write(_readable(answer, name) + "\n")
        self.out.flush()

    def summary(self) -> str:
        calls = sum(self.counts.values())
        errors = {k: v for k, v in self.counts.items() if k != "ok"}
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        return f"harness-one run: {calls} requests, {self.counts['ok']} ok, {sum(errors.values())} errors" + (
            f" ({detail})" if detail else ""
        )


def _readable(answer: dict[str, Any], name: str) -> str:
    rid = answer.get("id")
    head = f"[{'?' if rid is None else rid}] {name}"
    if answer["ok"]:
        tries = f" (after {answer['attempts']} attempts)" if "attempts" in answer else ""
        return f"{head} -> ok{tries}: {_dumps(answer['result'])}"
    error = answer["error"]
    extra = f" (retry after {error['retry_after']:.3g} s)" if isinstance(error.get("retry_after"), (int, float)) else ""
    message = str(error.get("message", "")).replace("\n", "\n      ")
    return f"{head} -> {error['type']}{extra}:\n      {message}"


def _requests(lines: Iterable[str]) -> Iterable[tuple[int, str]]:
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            yield lineno, line


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
@click.option("--input", "source", type=click.File("r"), default="-", help="Read requests from this file instead of stdin.")
@click.pass_context
def run(ctx: click.Context, concurrency: int, output: str, source: IO[str]) -> None:
    """The agent loop: JSON Lines requests on stdin, one answer line per request on stdout.

    A request is {"id", "name", "arguments"} (optionally "idempotency_key", "context"), an
    OpenAI tool call, a Responses function_call, or an Anthropic tool_use block. An answer
    is {"id", "ok": true, "result"} or {"id", "ok": false, "error": {"type", "message", ...}}.
    A malformed line gets an error answer and the loop goes on; at EOF a summary goes to stderr.
    """
    loop = _Loop(_state(ctx).registry(), output, sys.stdout)
    if concurrency == 1:
        for lineno, line in _requests(source):
            try:
                request = parse_request(line)
            except BadRequest as exc:
                loop.bad(exc, lineno)
                continue
            loop.answer(
                request,
                loop.registry.try_call(
                    request.name,
                    request.arguments,
                    call_id=_call_id(request),
                    idempotency_key=request.idempotency_key,
                    context=request.context,
                ),
            )
    else:
        asyncio.run(_run_concurrently(loop, source, concurrency))
    click.echo(loop.summary(), err=True)


def _call_id(request: Request) -> str | None:
    return None if request.id is None else str(request.id)


async def _run_concurrently(loop: _Loop, source: IO[str], concurrency: int) -> None:
    slots = asyncio.Semaphore(concurrency)
    pending: set[asyncio.Task[None]] = set()

    async def handle(request: Request) -> None:
        try:
            result = await loop.registry.atry_call(
                request.name,
                request.arguments,
                call_id=_call_id(request),
                idempotency_key=request.idempotency_key,
                context=request.context,
            )
            loop.answer(request, result)
        finally:
            slots.release()

    lineno = 0
    while True:
        line = await asyncio.to_thread(source.readline)
        if not line:
            break
        lineno += 1
        if not line.strip():
            continue
        try:
            request = parse_request(line)
        except BadRequest as exc:
            loop.bad(exc, lineno)
            continue
        await slots.acquire()
        task = asyncio.create_task(handle(request))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)
