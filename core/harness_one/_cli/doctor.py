"""``doctor``: what is installed and loaded, what failed, which names clash, and the hook order."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

import click

from ._main import answers_out, dumps, main, printable, state_of
from .catalog import emit

if TYPE_CHECKING:
    from .._registry import ToolRegistry

__all__ = ["doctor"]

#: Options whose values are key names, not secrets (the ``logging`` and ``otel`` plugins'
#: redaction settings): shown, though their names hold "secret".
KEY_NAME_OPTIONS = frozenset({"secret_keys", "extra_secret_keys"})


def _shown_options(options: dict[str, Any]) -> dict[str, Any]:
    """A plugin's options as the report shows them: masked as the redactor masks a mapping (the
    value under a secret-sounding name such as ``secret_values`` or ``api_token``; a password in a
    URL or ``token=...`` in text), but the key names of :data:`KEY_NAME_OPTIONS` shown, each
    masked as text on its own (as a list, ``["api_key", "x"]`` would read as a secret pair)."""
    from .._redact import redact

    shown: dict[str, Any] = redact(options)
    for name in KEY_NAME_OPTIONS & shown.keys():
        value = options[name]
        shown[name] = [redact(item) for item in value] if isinstance(value, (list, tuple)) else redact(value)
    return shown


def _unenforced(registry: ToolRegistry) -> list[str]:
    """Each policy a tool declares whose plugin is not active in ``registry``, and why (the reason
    a guarded option's refusal gives): a policy the registry silently leaves out, or a tool it refuses."""
    from .._plugins import unenforced

    plan = registry.plugins.plan
    return [
        f"{tool.name}: {policy} needs the '{plugin}' plugin, which is not active ({plan.inactive(plugin)})"
        for tool in registry.tools()
        for policy, plugin in unenforced(tool, plan.active)
    ]


def _blocked(registry: ToolRegistry, block: list[str]) -> list[str]:
    """The plugins ``registry`` keeps out: of those the configuration's ``block`` and
    ``HARNESS_ONE_BLOCK_PLUGINS`` name, each installed one it blocked. A name no installed plugin
    has blocks nothing (a typo, ``cahce``): the registry reports it as a load failure instead."""
    from .._entrypoints import PLUGIN_GROUP, entry_points
    from .._plugins import ENV_BLOCK, _env_names

    installed = {ep.name for ep in entry_points(PLUGIN_GROUP)}
    named = {*block, *_env_names(ENV_BLOCK)} & installed
    return sorted(name for name in named if registry.plugins.is_blocked(name))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Report installed tool packages and plugins, load failures, name conflicts and tool policies
    no active plugin enforces (exit 1 if any)."""
    from .. import __version__
    from .._redact import redact
    from .._render import safe_text

    out = answers_out(ctx, "doctor")  # before the tools load: what they print goes to stderr
    state = state_of(ctx)
    state.lenient = True  # report broken --tools and MCP servers instead of stopping at them
    registry = state.registry()
    tools = registry.tools()
    report: dict[str, Any] = {
        "harness_one": __version__,
        "python": platform.python_version(),
        "config": state.settings.source,
        "state": redact(state.settings.state),  # a Redis password stays out of the report
        "plugins": [
            {
                "name": n,
                "source": registry.plugins.sources.get(n, "registered in code"),
                "options": _shown_options(registry.plugins.options.get(n, {})),
            }
            for n in registry.plugins.names()
        ],
        "blocked_plugins": _blocked(registry, state.settings.block),
        # each plugin once, where it first runs: a plugin may give a hook more than one implementation (otel, metrics)
        "hook_order": {hook: list(dict.fromkeys(names)) for hook, names in registry.plugins.plan.order.items()},
        "tool_packages": registry.discovery.loaded,
        "mcp_servers": {name: [t.name for t in tools if t.source == f"mcp:{name}"] for name in state.mcp_servers},
        "tools": len(tools),
        "failures": [str(f) for f in [*registry.plugins.failures, *registry.discovery.failures]] + state.failures,
        "conflicts": [str(c) for c in registry.discovery.conflicts],
        "unenforced": _unenforced(registry),
    }
    if as_json:
        emit(ctx, out, "doctor", dumps(report, indent=2))
    else:
        lines: list[str] = []

        def say(line: str, *, one_line: bool = False) -> None:  # names, sources and errors come from packages and servers:
            lines.append(printable(safe_text(line), one_line=one_line))  # no escape reaches the terminal; an item, no line break

        say(f"harness-one {report['harness_one']} on Python {report['python']}; config: {report['config'] or 'none'}")
        say(f"State: {report['state']}")
        blocked = f"; blocked: {', '.join(report['blocked_plugins'])}" if report["blocked_plugins"] else ""
        say(f"\nPlugins ({len(report['plugins'])}{blocked}):")
        for p in report["plugins"]:
            options = f"  {dumps(p['options'])}" if p["options"] else ""
            say(f"  {p['name']:<16} {p['source']}{options}", one_line=True)
        for hook, names in report["hook_order"].items():
            say(f"  {hook:<13} {' -> '.join(names) or '-'}")
        say(f"\nTools: {report['tools']}")
        say(f"Tool packages ({len(report['tool_packages'])}):")
        for dist, names in sorted(report["tool_packages"].items()):
            say(f"  {dist:<28} {', '.join(names)}", one_line=True)
        if report["mcp_servers"]:
            say(f"MCP servers ({len(report['mcp_servers'])}):")
        for server, names in report["mcp_servers"].items():
            say(f"  {server:<28} {len(names)} tools: {', '.join(names) or '-'}", one_line=True)
        say(f"\nLoad failures: {len(report['failures']) or 'none'}")
        for line in report["failures"]:
            say(f"  {line}", one_line=True)
        say(f"Name conflicts: {len(report['conflicts']) or 'none'}")
        for line in report["conflicts"]:
            say(f"  {line}", one_line=True)
        say(f"Unenforced policies: {len(report['unenforced']) or 'none'}")
        for line in report["unenforced"]:
            say(f"  {line}", one_line=True)
        emit(ctx, out, "doctor", "\n".join(lines))
    if report["failures"] or report["conflicts"] or report["unenforced"]:
        ctx.exit(1)
