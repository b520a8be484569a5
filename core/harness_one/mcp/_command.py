"""``harness-one serve``: every tool of the CLI's registry over MCP (stdio or streamable HTTP).

Importing this module imports click only; the SDK loads when the command runs.
"""

from __future__ import annotations

import contextlib
import math
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from harness_one._stdout import stdout_for_answers

from ._spec import CALL_TIMEOUT, MAX_REPLY_BYTES, McpSpecError, attach_servers, parse_mcp_spec

if TYPE_CHECKING:
    from harness_one import ToolRegistry

    from ._client import RemoteServer

__all__ = ["close_servers", "serve"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: The address-lookup errors of a name that has no address (not a lookup that failed for now: EAI_AGAIN).
_NO_SUCH_NAME = frozenset(getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name))


def _registry(ctx: click.Context) -> ToolRegistry:
    """The registry of the ``harness-one`` group (its context object has ``registry()``)."""
    build = getattr(ctx.obj, "registry", None)
    if not callable(build):
        raise click.UsageError("'serve' runs as a harness-one subcommand: harness-one serve ...")
    registry: ToolRegistry = build()
    return registry


def _finite(value: float) -> float:
    """A number of seconds click's range let through: NaN compares false with both bounds."""
    if math.isnan(value):
        raise click.BadParameter("must be a number of seconds, not nan")
    return value


#: The options of --transport http only, by their parameter names.
_HTTP_ONLY = frozenset(
    {
        "host",
        "port",
        "path",
        "stateless",
        "json_response",
        "allowed_hosts",
        "allowed_origins",
        "limit_concurrency",
        "timeout_keep_alive",
        "header_timeout",
        "body_timeout",
    }
)


def _refuse_other_transport(ctx: click.Context, transport: str) -> None:
    """A usage error for HTTP's options given on the command line with the stdio transport: they would do
    nothing (the stdio transport's ``--drain-timeout`` given with HTTP is let be, as it always was)."""
    if transport != "stdio":
        return
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name in _HTTP_ONLY and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
    ]
    if given:
        names = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
        verb = "applies" if len(given) == 1 else "apply"
        raise click.UsageError(f"{names} {verb} to --transport http only", ctx)


def _timeout_option(name: str, default: float, help: str) -> Callable[[_F], _F]:
    """A ``--...-timeout SECONDS`` option of ``serve``: a finite number of seconds (0: never)."""
    return click.option(
        name,
        type=click.FloatRange(min=0, max=1e6),
        callback=lambda ctx, param, value: _finite(value),
        default=default,
        show_default=True,
        metavar="SECONDS",
        help=help,
    )


@click.command("serve")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for desktop clients (they start the process); http for streamable HTTP.",
)
# The default is serve_stdio's DRAIN_TIMEOUT, not imported (as serve_http's below): this module loads no SDK.
@_timeout_option(
    "--drain-timeout",
    300.0,
    "stdio: at the end of stdin, wait this long for the answers still to come, then cancel those calls (0: no bound).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="HTTP: the address to bind.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="HTTP: the port (0: any free port; the URL goes to stderr).",
)
@click.option("--path", default="/mcp", show_default=True, help="HTTP: the endpoint path.")
@click.option(
    "--stateless", is_flag=True, help="HTTP: no sessions, so several workers behind a load balancer can serve one tool set."
)
@click.option(
    "--json-response",
    is_flag=True,
    help="HTTP: answer with JSON instead of an SSE stream (no progress, no cancellation on disconnect).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST:PORT",
    help="HTTP: also accept this Host header (DNS-rebinding protection; 'name:*' for any port).",
)
@click.option(
    "--allowed-origin", "allowed_origins", multiple=True, metavar="ORIGIN", help="HTTP: also accept this Origin header."
)
# The four defaults are serve_http's (LIMIT_CONCURRENCY, ...), not imported: this module loads no SDK.
@click.option(
    "--limit-concurrency",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="HTTP: at most this many open connections (idle ones and event streams count) or requests at once, then 503 (0: no bound).",
)
@click.option(
    "--timeout-keep-alive",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    metavar="SECONDS",
    help="HTTP: close a keep-alive connection idle this long.",
)
@_timeout_option(
    "--header-timeout",
    10.0,
    "HTTP: close a connection that has not sent a request's headers this long after it opened or after its last response (0: never).",
)
@_timeout_option(
    "--body-timeout",
    30.0,
    "HTTP: answer 408 and close the connection when a request's body has not all come this long after its headers (0: never).",
)
@click.option(
    "--mcp",
    "mcp_specs",
    multiple=True,
    metavar="NAME[:PREFIX]=COMMAND_OR_URL",
    help="Also serve the tools of this MCP server, with harness policies (repeatable; NAME:PREFIX= or NAME:= prefixes its tool names).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    transport: str,
    drain_timeout: float,
    host: str,
    port: int,
    path: str,
    stateless: bool,
    json_response: bool,
    allowed_hosts: tuple[str, ...],
    allowed_origins: tuple[str, ...],
    limit_concurrency: int,
    timeout_keep_alive: int,
    header_timeout: float,
    body_timeout: float,
    mcp_specs: tuple[str, ...],
) -> None:
    """Serve every tool over the Model Context Protocol, each call through the harness policies.

    Tool errors (invalid arguments, rate limits, timeouts, ...) reach the client as results
    with isError and the model-readable text. HTTP binds 127.0.0.1 unless --host says otherwise.
    """
    _refuse_other_transport(ctx, transport)
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise click.ClickException("'serve' needs the MCP SDK: pip install 'harness-one[mcp]'") from None
    if not path.startswith("/"):
        raise click.BadParameter(f"must start with '/', got {path!r}", param_hint="--path")
    if any(char in "?#%" or char.isspace() for char in path):  # a URL of it would never reach the endpoint
        raise click.BadParameter(f"must be a path alone, without '?', '#', '%' or spaces, got {path!r}", param_hint="--path")
    if transport == "http":  # (before any tool loads; an empty --host "$HOST" would listen on every address)
        from ._server import host_problem

        problem = host_problem(host)
        if problem is not None:
            raise click.BadParameter(problem, param_hint="'--host'")
    bounds = getattr(ctx.obj, "mcp_bounds", None)  # the group's --mcp-call-timeout and --mcp-max-reply-bytes
    wait, limit = bounds() if callable(bounds) else (CALL_TIMEOUT, MAX_REPLY_BYTES)
    try:
        specs = [parse_mcp_spec(text, call_timeout=wait, max_reply_bytes=limit) for text in mcp_specs]
    except McpSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--mcp") from None
    check = getattr(ctx.obj, "mcp_server_specs", None)  # with the group's: two of one name, before any connects
    if callable(check):
        check(specs)
    # Over stdio, stdout is the wire: what the tools print as they load goes to stderr meanwhile.
    with stdout_for_answers() if transport == "stdio" else contextlib.nullcontext():
        registry = _registry(ctx)
        try:
            servers = attach_servers(registry, specs)
        except Exception as exc:
            raise click.ClickException(str(exc)) from None
    from ._server import _ListenError
    from ._server import serve as run

    options: dict[str, Any] = {"drain_timeout": drain_timeout or None}
    if transport == "http":
        options = {
            "host": host,
            "port": port,
            "path": path,
            "stateless": stateless,
            "json_response": json_response,
            "allowed_hosts": allowed_hosts,
            "allowed_origins": allowed_origins,
            "limit_concurrency": limit_concurrency or None,
            "timeout_keep_alive": timeout_keep_alive,
            "header_timeout": header_timeout or None,
            "body_timeout": body_timeout or None,
        }
    terminated = False
    try:
        run(registry, transport, **options)
    except KeyboardInterrupt:  # pragma: no cover - interactive stop
        pass
    except SystemExit:  # SIGTERM while serving (143): a second one during the close ends the process
        terminated = True
        raise
    except _ListenError as exc:
        cause = exc.__cause__
        if isinstance(cause, socket.gaierror) and cause.errno in _NO_SUCH_NAME:  # a typo: a usage error
            raise click.BadParameter(f"{host!r} does not resolve: {cause.strerror}", param_hint="'--host'") from None
        raise click.ClickException(str(exc)) from None
    finally:  # SIGTERM too (run raises SystemExit): the imported stdio servers' process groups are stopped
        close_servers(servers, hold_sigterm=not terminated)


def close_servers(servers: list[RemoteServer], *, hold_sigterm: bool = True) -> None:
    """Close the connections to ``servers`` at once (each stdio server's process group is stopped).

    With ``hold_sigterm`` (no SIGTERM taken yet), a SIGTERM during the close (it may take seconds: the SDK's
    wait for a server to exit, then its group's SIGTERM-to-SIGKILL grace) is only noted, and once the close
    is over raises ``SystemExit(143)``: its default action would end this process with the servers' children
    left running. A second one meanwhile takes the default action.
    """
    if not servers:
        return
    from ._client import _close_each, _wait

    with _sigterm_noted(hold_sigterm) as noted, contextlib.suppress(Exception):
        _wait(_close_each(servers), 10)
    if noted:
        raise SystemExit(128 + noted[0])


@contextlib.contextmanager
def _sigterm_noted(hold: bool) -> Iterator[list[int]]:
    """The SIGTERMs that came meanwhile (only the first: it puts the default handler back), when ``hold`` and this
    is the main thread with SIGTERM at its default handler; else an empty list, the handler left as it is."""
    noted: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    if not (hold and main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        yield noted
        return

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
