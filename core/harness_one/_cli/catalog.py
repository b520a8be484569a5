"""``list``, ``describe`` and ``export``: what the tools are, for people and for providers."""

from __future__ import annotations

import shutil
import textwrap
from typing import Any

import click

from .._formats import FORMATS
from ._main import EXIT_CODES, dumps, main, printable, state_of

__all__ = ["describe", "export", "list_tools"]


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


def _cells(row: dict[str, Any]) -> list[str]:
    limit, timeout = row["rate_limit"] or row["default_rate_limit"], row["timeout"] or row["default_timeout"]
    return [
        row["name"],
        printable(row["source"] or "-"),
        f"{limit['rate']:g}/s burst {limit['burst']:g}{' (default)' if row['default_rate_limit'] else ''}" if limit else "-",
        f"{timeout:g}s{' (default)' if row['default_timeout'] else ''}" if timeout else "-",
        "yes" if row["idempotent"] else "no",
    ]


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="The listing as JSON data, for scripts.")
@click.pass_context
def list_tools(ctx: click.Context, as_json: bool) -> None:
    """List the tools: name, source package, rate limit, timeout, idempotent, description."""
    registry = state_of(ctx).registry()
    rows = [_row(t, registry) for t in registry.tools()]
    if as_json:
        click.echo(dumps(rows, indent=2))
        return
    headers = ["NAME", "SOURCE", "RATE_LIMIT", "TIMEOUT", "IDEMPOTENT"]
    cells = [_cells(r) for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    left = sum(widths) + 2 * len(widths)
    room = max(20, shutil.get_terminal_size((120, 24)).columns - left)
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths)) + "  DESCRIPTION")
    for row, cell in zip(rows, cells):
        lines = textwrap.wrap(printable(row["description"]), room) or [""]
        click.echo(("  ".join(c.ljust(w) for c, w in zip(cell, widths)) + "  " + lines[0]).rstrip())
        for more in lines[1:]:
            click.echo(" " * left + more)


@main.command()
@click.argument("name")
@click.pass_context
def describe(ctx: click.Context, name: str) -> None:
    """Show a tool's schema, policies and metadata as JSON."""
    from .. import ToolNotFound

    try:
        tool = state_of(ctx).registry().get(name)
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
    click.echo(dumps(info, indent=2))


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
@click.option("--name", "names", multiple=True, metavar="TOOL", help="Only this tool (repeatable).")
@click.pass_context
def export(ctx: click.Context, fmt: str, strict: bool, strict_auto: bool, names: tuple[str, ...]) -> None:
    """Print the tools' definitions in a provider's format (JSON); notes about conversions go to stderr."""
    from .. import ToolDefinitionError, ToolNotFound

    if strict and strict_auto:
        raise click.UsageError("--strict and --strict-auto exclude each other")
    try:
        result = state_of(ctx).registry().export(fmt, strict="auto" if strict_auto else strict, names=names or None, copy=False)
    except ToolNotFound as exc:
        raise click.UsageError(str(exc)) from None
    except ToolDefinitionError as exc:
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:  # --strict for a format without strict mode
        raise click.UsageError(str(exc)) from None
    click.echo(dumps(result.tools, indent=2))
    for tool, notes in result.notes.items():
        for note in notes:
            click.echo(f"{tool}: {note}", err=True)
