"""``list``, ``describe`` and ``export``: what the tools are, for people and for providers."""

from __future__ import annotations

import math
import shutil
import textwrap
from typing import TYPE_CHECKING, Any

import click

from .._formats import FORMATS
from ._main import EXIT_CODES, answers_out, dumps, lost, main, printable, state_of, utf8_text, write_line

if TYPE_CHECKING:
    from .._stdout import Writer

__all__ = ["UnknownTool", "describe", "emit", "export", "list_tools"]


class UnknownTool(click.ClickException):
    """A tool name no tool has: ``Error: Unknown tool 'x'. Available tools: ...``, exit 3, as ``call`` has it.
    The name is shown escaped: a line break in it cannot forge a line of output."""

    exit_code = EXIT_CODES["not_found"]

    def __init__(self, message: str) -> None:
        super().__init__(printable(message, one_line=True))


def emit(ctx: click.Context, out: Writer, command: str, text: str) -> None:
    """Write ``text`` (and a newline) to ``command``'s stdout (from :func:`answers_out`), in UTF-8:
    stdout closed or its reader gone, one line on stderr and exit 70, as for ``call``."""
    try:
        write_line(out, text)
    except Exception as exc:  # a broken pipe, a closed stream
        lost(ctx, command, f"{type(exc).__name__}: {exc}")


def _limit(limit: Any) -> dict[str, Any] | None:
    return None if limit is None else {"rate": limit.rate, "burst": limit.burst}


def _row(tool: Any, registry: Any) -> dict[str, Any]:
    """A tool's listing as data: ``rate_limit`` (``{"rate", "burst"}``) and ``timeout`` (seconds) as
    the tool declares them, else null; ``default_rate_limit`` and ``default_timeout``: the active
    plugin's ``default`` that applies instead to a tool declaring none, else null."""
    limits, timeouts = registry.plugins.get("rate_limit"), registry.plugins.get("timeout")
    return {
        "name": tool.name,
        "source": tool.source,
        "rate_limit": _limit(tool.rate_limit),
        "default_rate_limit": _limit(getattr(limits, "default", None)) if tool.rate_limit is None else None,
        "timeout": tool.timeout,
        "default_timeout": getattr(timeouts, "default", None) if tool.timeout is None else None,
        "idempotent": tool.idempotent,
        "read_only": tool.read_only,
        "description": tool.description.split("\n")[0],
    }


def _seconds(timeout: float, default: bool) -> str:
    text = "no limit" if timeout == math.inf else f"{timeout:g}s"
    return f"{text} (default)" if default else text


def _cells(row: dict[str, Any]) -> list[str]:
    limit, timeout = row["rate_limit"] or row["default_rate_limit"], row["timeout"] or row["default_timeout"]
    return [
        row["name"],
        printable(row["source"] or "-"),
        f"{limit['rate']:g}/s burst {limit['burst']:g}{' (default)' if row['default_rate_limit'] else ''}" if limit else "-",
        _seconds(timeout, row["default_timeout"] is not None) if timeout else "-",
        "yes" if row["idempotent"] else "no",
    ]


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="The listing as JSON data, for scripts.")
@click.pass_context
def list_tools(ctx: click.Context, as_json: bool) -> None:
    """List the tools: name, source package, rate limit, timeout, idempotent, description."""
    from .._render import safe_text

    columns = shutil.get_terminal_size((120, 24)).columns  # stdout's, before fd 1 points at stderr
    out = answers_out(ctx, "list")  # before the tools load: what they print goes to stderr
    registry = state_of(ctx).registry()
    rows = [_row(t, registry) for t in registry.tools()]
    if as_json:
        emit(ctx, out, "list", dumps(rows, indent=2))
        return
    headers = ["NAME", "SOURCE", "RATE_LIMIT", "TIMEOUT", "IDEMPOTENT"]
    cells = [_cells(r) for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    left = sum(widths) + 2 * len(widths)
    room = max(20, columns - left)
    table = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)) + "  DESCRIPTION"]
    for row, cell in zip(rows, cells):
        lines = textwrap.wrap(printable(safe_text(row["description"])), room) or [""]
        table.append(("  ".join(c.ljust(w) for c, w in zip(cell, widths)) + "  " + lines[0]).rstrip())
        table += [" " * left + more for more in lines[1:]]
    emit(ctx, out, "list", "\n".join(table))


@main.command()
@click.argument("name", callback=utf8_text)
@click.pass_context
def describe(ctx: click.Context, name: str) -> None:
    """Show a tool's schema, policies and metadata as JSON (exit 3 for an unknown tool)."""
    from .. import ToolNotFound

    out = answers_out(ctx, "describe")  # before the tools load: what they print goes to stderr
    try:
        tool = state_of(ctx).registry().get(name)
    except ToolNotFound as err:
        raise UnknownTool(str(err)) from None
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
    emit(ctx, out, "describe", dumps(info, indent=2))


@main.command()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="openai", show_default=True)
@click.option(
    "--strict",
    is_flag=True,
    help="OpenAI strict mode for every tool (fails, naming the schema parts, when a tool cannot be strict).",
)
@click.option(
    "--strict-auto", is_flag=True, help="OpenAI strict mode where each tool allows it; the others are listed on stderr."
)
@click.option("--name", "names", multiple=True, metavar="TOOL", callback=utf8_text, help="Only this tool (repeatable).")
@click.pass_context
def export(ctx: click.Context, fmt: str, strict: bool, strict_auto: bool, names: tuple[str, ...]) -> None:
    """Print the tools' definitions in a provider's format (JSON); notes about conversions go to stderr.

    Exit 3 when a --name names no tool, 1 when --strict meets a tool that cannot be strict."""
    from .. import ToolDefinitionError, ToolNotFound

    if strict and strict_auto:
        raise click.UsageError("--strict and --strict-auto exclude each other")
    out = answers_out(ctx, "export")  # before the tools load: what they print goes to stderr
    try:
        result = state_of(ctx).registry().export(fmt, strict="auto" if strict_auto else strict, names=names or None, copy=False)
    except ToolNotFound as exc:
        raise UnknownTool(str(exc)) from None
    except ToolDefinitionError as exc:  # the schema parts a tool's package wrote: no escape reaches the terminal
        raise click.ClickException(printable(str(exc))) from None
    except ValueError as exc:  # --strict for a format without strict mode
        raise click.UsageError(str(exc)) from None
    emit(ctx, out, "export", dumps(result.tools, indent=2))
    for tool, notes in result.notes.items():
        for note in notes:
            click.echo(printable(f"{tool}: {note}", one_line=True), err=True)
