"""The ``harness-one`` group: global options, settings, and the registry every command uses."""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import functools
import importlib
import importlib.util
import logging
import os
import re
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import click

from .._config import (
    ENV_TOOLS,
    ConfigError,
    Settings,
    blank_state,
    give_state,
    is_file_spec,
    load_settings,
    malformed_state,
    parse_option,
    with_prefix,
)
from .._entrypoints import bounded, set_import_timeout
from .._errors import PluginError, exception_text

if TYPE_CHECKING:
    from .._registry import ToolRegistry
    from .._stdout import Writer
    from ..mcp._spec import McpSpec

__all__ = [
    "EXIT_CODES",
    "EX_SOFTWARE",
    "EX_TERMINATED",
    "CliState",
    "LazyGroup",
    "Terminated",
    "answers_out",
    "configure_logging",
    "dumps",
    "exit_code",
    "lost",
    "main",
    "printable",
    "sigterm_as_interrupt",
    "state_of",
    "utf8_text",
    "write_line",
]

#: Exit codes of ``harness-one call`` (by ``ToolError.kind``), and of every command on bad usage.
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


#: The exit code of ``run`` and ``call`` when an answer could not be written (or the loop failed).
EX_SOFTWARE = 70


class ConfigProblem(click.ClickException):
    """A configuration problem (the file, the environment, a tools entry): ``Error: message``, exit 2,
    without the usage text of a mistyped command."""

    exit_code = EXIT_CODES["usage"]


def utf8_text(ctx: click.Context, param: click.Parameter, text: Any) -> Any:
    """A click callback: ``text`` (or each of a repeated option's) as given on the command line, refused when
    its bytes were not UTF-8 (the interpreter keeps each such byte as a lone surrogate, which no tool, key or
    JSON can hold)."""
    if isinstance(text, tuple):
        return tuple(utf8_text(ctx, param, one) for one in text)
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        os.fsencode(text).decode("utf-8")  # the bytes the command line held
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at position {exc.start})") from None
    except UnicodeEncodeError as exc:  # a lone surrogate no byte gave (an embedding process's argument)
        raise click.BadParameter(
            f"not valid UTF-8 (a lone surrogate U+{ord(text[exc.start]):04X} at position {exc.start})"
        ) from None
    raise click.BadParameter("not valid UTF-8")  # surrogates that stand for UTF-8 bytes: not what was typed


def exit_code(error: Any) -> int:
    """The exit code for a :class:`~harness_one.ToolError`, from its ``kind``."""
    return EXIT_CODES.get(getattr(error, "kind", ""), EXIT_CODES["other"])


def dumps(value: Any, indent: int | None = None) -> str:
    from .._render import dumps as render

    return render(value, indent=indent)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_OR_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` for a terminal: control characters (an escape sequence a model or a package wrote) and
    the line separators U+2028 and U+2029 shown as ``\\x1b``, ``\\u2028``; with ``one_line``, tabs and
    newlines too (an id or a name, which a line break would let forge a line of output)."""
    return (_CONTROL_OR_BREAK if one_line else _CONTROL).sub(_escaped, text)


def answers_out(ctx: click.Context, command: str) -> Writer:
    """Stdout for ``command``'s answers alone, until the command ends: meanwhile fd 1 and
    ``sys.stdout`` go to stderr, so what a tool prints cannot corrupt the answers. A closed
    stdout ends the command at once: one line on stderr, exit 70."""
    from .._stdout import stdout_for_answers

    out = ctx.with_resource(stdout_for_answers())
    if out is None:
        lost(ctx, command, "stdout is closed")
    return out


def write_line(out: Writer, text: str) -> None:
    """Write one answer (``text`` and a newline, in UTF-8) and flush it."""
    out.write(text.encode("utf-8", "replace") + b"\n")
    out.flush()


def lost(ctx: click.Context, command: str, why: str) -> NoReturn:
    """End ``command`` because its answer cannot be written: one line on stderr, exit 70."""
    click.echo(f"harness-one {command}: cannot write {'answers' if command == 'run' else 'the answer'}: {why}", err=True)
    ctx.exit(EX_SOFTWARE)


@dataclass
class CliState:
    """What the group hands its commands: the settings, and the registry built from them on first use."""

    settings: Settings
    tool_specs: list[str]
    mcp_specs: list[str] = field(default_factory=list)
    #: ``--mcp-call-timeout`` as given (None: not given, the default bound).
    mcp_call_timeout: str | None = None
    #: ``--mcp-max-reply-bytes`` as given (None: not given, the default bound).
    mcp_max_reply_bytes: str | None = None
    #: Problems loading --tools or MCP servers that ``doctor`` reports instead of failing on.
    lenient: bool = False
    failures: list[str] = field(default_factory=list)
    #: The names of the MCP servers connected, in order.
    mcp_servers: list[str] = field(default_factory=list)
    _registry: Any = None

    def registry(self) -> ToolRegistry:
        if self._registry is None:
            self._registry = build_registry(self)
        return self._registry  # type: ignore[no-any-return]

    def mcp_bounds(self) -> tuple[float | None, int]:
        """``--mcp-call-timeout`` and ``--mcp-max-reply-bytes`` (checked as the command starts), else their defaults:
        for every ``--mcp`` server, the group's and ``serve``'s."""
        from ..mcp._spec import CALL_TIMEOUT, MAX_REPLY_BYTES, parse_call_timeout, parse_max_reply_bytes

        given, size = self.mcp_call_timeout, self.mcp_max_reply_bytes
        wait = CALL_TIMEOUT if given is None else parse_call_timeout(given)
        return wait, MAX_REPLY_BYTES if size is None else parse_max_reply_bytes(size)

    def mcp_server_specs(self, more: Sequence[McpSpec] = ()) -> list[McpSpec]:
        """The group's MCP servers (its ``[mcp.servers.NAME]`` tables, then ``--mcp``), checked with ``more``
        (``serve --mcp``'s) before any connects: two of one name are a usage error, as a wrong ``--mcp`` is
        (a wrong table: :class:`ConfigProblem`)."""
        from ..mcp._spec import McpSpec, McpSpecError, check_names, parse_mcp_spec

        try:
            specs = [McpSpec.from_table(name, table) for name, table in self.settings.mcp_servers.items()]
        except McpSpecError as exc:  # the configuration file's table: no usage text
            raise ConfigProblem(f"{Path(self.settings.source or '').absolute()}: {exc}") from None
        try:
            wait, limit = self.mcp_bounds()
            specs += [parse_mcp_spec(text, call_timeout=wait, max_reply_bytes=limit) for text in self.mcp_specs]
            check_names([*specs, *more])
        except McpSpecError as exc:
            raise click.UsageError(str(exc)) from None
        return specs


def state_of(ctx: click.Context) -> CliState:
    found = ctx.find_object(CliState)
    assert found is not None
    return found


def build_registry(state: CliState) -> ToolRegistry:
    """Installed tool packages and plugins (with their configured options), local tools, MCP servers."""
    from .. import ToolRegistry
    from .._redact import redact

    settings = state.settings
    try:
        registry = ToolRegistry(
            block=settings.block,
            allow=settings.allow,
            autoload=settings.autoload,
            strict=settings.strict,
            plugin_options=settings.plugin_options,
            discover=True,
            state=settings.state,
        )
    except (ValueError, PluginError) as exc:  # the configuration: plugin options, strict loading
        raise ConfigProblem(str(exc)) from None
    try:
        registry.state.check()
    except Exception as exc:
        shown = redact(f"{settings.state!r}: {exc}")  # the URL's password is not printed
        where = (
            f"set by {settings.state_from}"
            if settings.state_from
            else "the default: choose another with --state or HARNESS_ONE_STATE"
        )
        raise click.ClickException(f"cannot open the state store {shown} ({where})") from None
    given: dict[str, Any] = {}  # each tool name an entry gave, and its tool: a later entry's tool of that name wins
    for spec, origin in _entries([*_tools_origins(settings), *((spec, "") for spec in state.tool_specs)]):
        try:
            found = _tools_of(spec, settings.import_timeout)
            if not found:
                raise ValueError("no tools found (define them with @define_tool, or in a harness_register_tools hook)")
            for tool in found:
                tool.source = tool.source or f"local:{spec}"
                earlier = given.get(tool.name)
                if earlier is not None and earlier is not tool:
                    _conflict(registry, tool, earlier)
                registry.add(tool, replace=True)
                given[tool.name] = tool
        except (Exception, SystemExit) as exc:
            where = f"{spec} (an entry of {origin})" if origin else spec
            message = f"{where}: {exception_text(exc)}"  # masked: an import may fail on its DSN
            if settings.import_timeout is not None and "thread" in message:  # (signal.signal: "only works in main thread")
                message += (
                    " (imported in a helper thread, bounded by HARNESS_ONE_IMPORT_TIMEOUT: 0 imports it in the main thread)"
                )
            if not state.lenient:  # an entry of the configuration is no mistyped command: no usage text
                error = ConfigProblem if origin else click.UsageError
                raise error(f"cannot load tools from {message}") from None
            state.failures.append(message)
    _attach_mcp(state, registry)
    return registry


def _entries(entries: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The tools entries, each loaded once: an entry named again (a file in the configuration and in
    ``--tools``) is loaded where it comes last, so that a later entry still wins."""
    placed: dict[str, tuple[str, str]] = {}
    for spec, origin in entries:
        key = spec
        if is_file_spec(spec):
            with contextlib.suppress(OSError):  # (a removed current directory: loading it says so)
                key = str(Path(spec).resolve())
        placed.pop(key, None)
        placed[key] = (spec, origin)
    return list(placed.values())


def _conflict(registry: ToolRegistry, tool: Any, earlier: Any) -> None:
    """Two tools entries gave a tool of one name: the later, ``tool``, replaces ``earlier``, a name
    conflict (a warning; ``doctor`` lists it and exits 1)."""
    from .._discovery import Conflict
    from .._log import log_event

    conflict = Conflict(tool.name, kept=str(tool.source), skipped=str(earlier.source))
    registry.discovery.conflicts.append(conflict)
    default = type(registry)._current
    if not (isinstance(default, type(registry)) and conflict in default.discovery.conflicts):  # said once
        log_event(30, "tool name conflict", tool=tool.name, kept=conflict.kept, skipped=conflict.skipped)


def _tools_origins(settings: Settings) -> list[tuple[str, str]]:
    """Each tools entry of the settings and where it was set: the configuration file's ``tools`` key
    (the file's entries come first), or the ``HARNESS_ONE_TOOLS`` variable."""
    in_file = f"the 'tools' key of {Path(settings.source or '').absolute()}"
    return [(spec, in_file if n < settings.tools_in_file else f"${ENV_TOOLS}") for n, spec in enumerate(settings.tools)]


def _attach_mcp(state: CliState, registry: ToolRegistry) -> None:
    if not (state.settings.mcp_servers or state.mcp_specs):
        return
    from ..mcp._spec import attach_servers

    specs = state.mcp_server_specs()
    try:
        servers = attach_servers(registry, specs, failures=state.failures if state.lenient else None)
    except Exception as exc:
        raise click.ClickException(f"cannot import MCP tools: {exc}") from None
    state.mcp_servers = [server.spec.name for server in servers]
    ctx = click.get_current_context(silent=True)
    if ctx is not None and servers:  # closed as the command ends, while its logging (masked) is still in place
        ctx.call_on_close(functools.partial(_close_servers, servers))


def _close_servers(servers: list[Any]) -> None:
    """Close the ``--mcp`` servers of a command that is ending; a SIGTERM meanwhile waits for the close unless one was
    taken already (``serve``'s ``SystemExit(143)`` on its way out: a second one takes the default action)."""
    from ..mcp._command import close_servers

    close_servers(servers, hold_sigterm=not isinstance(sys.exc_info()[1], SystemExit))


def _tools_of(spec: str, limit: float | None = None) -> list[Any]:
    """The tools a ``--tools`` spec offers, imported (within ``limit`` seconds, ``HARNESS_ONE_IMPORT_TIMEOUT``'s,
    as a tool package's import is: past them, :class:`~harness_one._entrypoints.ImportTimeout`; None: no bound)
    and registered by its hook with directories on ``sys.path`` meanwhile (see :func:`_on_path`), so the module
    may import its own modules: a file's own directory first, as ``python FILE.py`` has it, and the current
    directory last, so that a file of the current directory cannot stand in for a module of the standard
    library or of an installed package (``import json`` in the tools), whoever wrote that directory."""
    from .._discovery import tools_of
    from .._registry import LOADING_SOURCE

    token = LOADING_SOURCE.set(f"local:{spec}")  # what a name conflict of its plain @defineTool says it kept
    try:
        try:
            cwd = os.getcwd()
        except OSError:  # the directory was removed: nothing to add
            cwd = ""
        own = str(Path(spec).resolve().parent) if is_file_spec(spec) else ""
        with _on_path(own, first=True), _on_path(cwd, first=False) as added:
            before = set(sys.modules)
            if limit is None:
                module = _import(spec)
            else:  # in a helper thread, which has a context of its own: LOADING_SOURCE is copied into it
                load = functools.partial(contextvars.copy_context().run, _import, spec)
                module = bounded(load, limit, spec)
            if added and _found_in(cwd, set(sys.modules) - before):
                from .._runners import worker_path

                worker_path(cwd, last=True)  # a module of it was imported: a process-mode worker finds it there too
            if own:
                _warn_shadowed(spec, own)
                _TOOLS_DIRS.append(own)
            return tools_of(module)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        local = any(os.path.exists(os.path.join(cwd, top + end)) for end in ("", ".py")) if cwd and top else False
        if local and isinstance(sys.modules.get(top), types.ModuleType) and not _found_in(cwd, [top]):
            raise ModuleNotFoundError(  # a local package an installed one of its name comes before
                f"{exc} (the current directory's {top} is passed over: the installed {top} comes first; "
                "`python -m harness_one` puts the current directory first)",
                name=exc.name,
            ) from None
        raise
    finally:
        LOADING_SOURCE.reset(token)


#: The directories of the tools files imported so far in this process (see :func:`_warn_shadowed`).
_TOOLS_DIRS: list[str] = []


def _warn_shadowed(spec: str, own: str) -> None:
    """A WARNING (``tools module shadowed``) for each module beside tools file ``spec`` that the process imported from
    beside an earlier tools file: one ``sys.modules`` serves every entry, so a second tools file's ``import helper``
    gets the ``helper`` beside the first file."""
    from .._log import log_event

    earlier = [d for d in _TOOLS_DIRS if d != own]
    if not earlier:
        return
    try:
        entries = os.listdir(own)
    except OSError:
        return
    for entry in sorted(entries):
        name = entry[:-3] if entry.endswith(".py") else entry if os.path.isfile(os.path.join(own, entry, "__init__.py")) else ""
        module = sys.modules.get(name) if name.isidentifier() and not name.startswith("__") else None
        if isinstance(module, types.ModuleType) and any(_found_in(d, [name]) for d in earlier):
            spec_of = object.__getattribute__(module, "__dict__").get("__spec__")
            used = getattr(spec_of, "origin", None) or "built in"
            log_event(30, "tools module shadowed", tools=spec, module=name, beside=os.path.join(own, entry), used=used)


def _found_in(directory: str, names: Iterable[str]) -> bool:
    """Whether one of the top-level modules ``names`` of ``sys.modules`` was found in ``directory``: read
    from the spec in its namespace, so a lazy module stays unloaded and no ``__getattr__`` of a module is
    asked (an entry that is no module, ``None`` blocking an import, is none)."""
    base = os.path.normcase(os.path.abspath(directory))
    for name in names:
        module = sys.modules.get(name)
        if "." in name or not isinstance(module, types.ModuleType):
            continue
        spec = object.__getattribute__(module, "__dict__").get("__spec__")
        places = list(getattr(spec, "submodule_search_locations", None) or [])
        if getattr(spec, "has_location", False):  # (a built-in or frozen module's origin is no path)
            places.append(spec.origin)
        if any(isinstance(place, str) and os.path.normcase(os.path.dirname(os.path.abspath(place))) == base for place in places):
            return True
    return False


def _import(spec: str) -> Any:
    """The module a tools spec names: a file (``x.py``, ``dir/x``) or a module."""
    if not is_file_spec(spec):
        return importlib.import_module(spec)
    path = Path(spec).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    name = f"harness_one_local_{abs(hash(str(path)))}"
    loader = importlib.util.spec_from_file_location(name, path)
    if loader is None or loader.loader is None:
        raise ImportError(f"cannot import {spec}")
    module = importlib.util.module_from_spec(loader)
    sys.modules[name] = module
    loader.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _on_path(directory: str, *, first: bool) -> Iterator[bool]:
    """``directory`` on ``sys.path`` meanwhile, ``first`` (a tools file's own directory, as ``python
    FILE.py`` has it, kept first on the process-mode workers' too, which import the file's modules by
    name) or last (the current directory); not with ``-P``/``PYTHONSAFEPATH``, which keeps such
    directories off, nor when it is there already (``python -m harness_one`` has the current directory
    first). Gives whether it was added. Taken off again after: a local file does not shadow a module
    the process imports later."""
    there = directory in sys.path or (not first and "" in sys.path)  # "": the current directory, first
    added = bool(directory) and not getattr(sys.flags, "safe_path", False) and not there
    if added:
        if first:
            sys.path.insert(0, directory)
            from .._runners import worker_path

            worker_path(directory)
        else:
            sys.path.append(directory)
    try:
        yield added
    finally:
        if added:
            with contextlib.suppress(ValueError):  # the import took it off itself
                if first:
                    sys.path.remove(directory)
                else:  # the last one: a module that put its own directory first keeps it there
                    del sys.path[len(sys.path) - 1 - sys.path[::-1].index(directory)]


def configure_logging(fmt: str | None, level: str, stream: TextIO) -> Callable[[], None]:
    """Logs on ``stream`` (stderr): ``console`` on a terminal, ``json`` otherwise; nowhere when it is
    closed (``2>&-``). Gives what undoes the standard library's part (the group calls it as the command
    ends, after the ``--mcp`` servers close: records logged later are Python's default handling's).

    harness-one's own events go through structlog, as :func:`~harness_one._log.log_event` sends them
    (no extra work per event). The records of the standard library's ``logging`` (the MCP SDK's, an
    imported package's) take the same form at the same level, as ``logging.basicConfig`` would set it
    up: when the root logger has no handler (other than one an earlier call added, replaced), it gets
    one (this one) and ``level``; a process that set up its own logging keeps it. Their message and
    exception text are masked as the redactor masks a text (secret values, URL user-info, terminal
    controls). Below ``debug``, the MCP SDK's per-request records of its HTTP server stay at ``warning``."""
    from .._stdout import is_closed

    if is_closed(stream):
        stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - the logs' sink for the process's life
    with _closed_stdout_hidden():  # structlog's first import asks sys.stdout.isatty()
        import structlog

    if fmt is None:
        fmt = "console" if stream.isatty() else "json"
    renderer: Any = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    number = getattr(logging, level.upper())
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    earlier = [h for h in root.handlers if isinstance(h, _RootHandler)]
    if len(earlier) != len(root.handlers):  # the process set up its own logging: its handlers write the records
        return _nothing
    before = earlier[0].before if earlier else root.level
    handler = _RootHandler(structlog.PrintLogger(file=stream), before, renderer)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso"),
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,  # the traceback as text, masked next
                _masked_record(),
                renderer,
            ],
        )
    )
    handler.setLevel(number)  # also for a package's logger set to a lower level of its own
    for old in earlier:
        root.removeHandler(old)
        handler.quieted.update(old.quieted)
    root.addHandler(handler)
    root.setLevel(number)
    for name in _PER_REQUEST:  # a line per HTTP request at info ("Terminating session: None")
        per_request = logging.getLogger(name)
        if number > logging.DEBUG and (per_request.level == logging.NOTSET or name in handler.quieted):
            per_request.setLevel(max(number, logging.WARNING))
            handler.quieted.add(name)
        elif name in handler.quieted:
            per_request.setLevel(logging.NOTSET)
            handler.quieted.discard(name)

    def undo() -> None:
        if handler in root.handlers:
            root.removeHandler(handler)
            root.setLevel(handler.before)
            for name in handler.quieted:
                logging.getLogger(name).setLevel(logging.NOTSET)

    return undo


def _nothing() -> None:
    """What undoes a set-up that changed nothing."""


#: The MCP SDK's loggers of its HTTP server that log a line per request at ``info``.
_PER_REQUEST = ("mcp.server.streamable_http", "mcp.server.streamable_http_manager")


class _RootHandler(logging.Handler):
    """The root logger's handler :func:`configure_logging` adds, with the root's level before it. It writes
    through structlog's logger of the stream, the one writer of harness-one's own events too: under its
    lock, a record's line and an event's are never mixed, whichever threads log them."""

    def __init__(self, sink: Any, before: int, renderer: Any) -> None:
        super().__init__()
        self.sink = sink
        self.before = before
        self.renderer = renderer
        self.quieted: set[str] = set()  # the per-request loggers it set to warning

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink.msg(self.format(record))
        except RecursionError:  # as logging.StreamHandler does
            raise
        except Exception:
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        """A record that cannot be formatted (``log.warning("%d", "text")``): one line with its logger, the
        error's type, its masked message and its arguments' types, not logging's traceback with the arguments
        as they are (an argument alone, without its key, is a value the redactor cannot tell a secret; silent
        when ``logging.raiseExceptions`` is off, as logging's is)."""
        if not logging.raiseExceptions:
            return
        from .._render import text_of  # (a record that failed only)

        error = sys.exc_info()[1]
        try:
            event = {
                "event": "a log record could not be formatted",
                "logger": record.name,
                "level": "error",
                "error": type(error).__name__,
                "timestamp": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat()[:-6] + "Z",
                "msg": _redactor().text(text_of(record.msg), _RECORD_TEXT),
                "args": _arg_types(record.args),
            }
            self.sink.msg(self.renderer(None, "error", event))
        except Exception:  # nowhere left to say it
            pass


def _arg_types(args: Any) -> str:
    """A record's arguments by their types alone: ``(str, int)``, ``{str: str}``."""
    if isinstance(args, tuple):
        return "(" + ", ".join(type(a).__name__ for a in args) + ("," if len(args) == 1 else "") + ")"
    if isinstance(args, dict):
        return "{" + ", ".join(f"{type(k).__name__}: {type(v).__name__}" for k, v in args.items()) + "}"
    return type(args).__name__


@functools.cache
def _redactor() -> Any:
    """The redactor that masks records (made at the first record: a command that logs none does not import it)."""
    from .._redact import Redactor

    return Redactor()


#: Characters of a record's message or exception text shown (masked whole, then cut).
_RECORD_TEXT = 20_000


def _masked_record() -> Callable[[Any, str, MutableMapping[str, Any]], MutableMapping[str, Any]]:
    """A structlog processor for a standard library record: its text values (message, exception)
    as :meth:`~harness_one._redact.Redactor.text` shows them (the redactor made at the first record:
    a command that logs none does not import it)."""

    def masked(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key, value in event.items():
            if isinstance(value, str) and key not in ("level", "timestamp", "logger"):
                event[key] = _redactor().text(value, _RECORD_TEXT)
        return event

    return masked


@contextlib.contextmanager
def _closed_stdout_hidden() -> Iterator[None]:
    """``sys.stdout`` is None meanwhile if it is closed (an embedding host closed it): a closed
    stream answers ``isatty()`` with ValueError, None reads as no terminal."""
    from .._stdout import is_closed

    stdout = sys.stdout
    if is_closed(stdout):
        sys.stdout = None
    try:
        yield
    finally:
        sys.stdout = stdout


class LazyGroup(click.Group):
    """A group some of whose commands are imported only when run (or asked for by name).

    ``lazy`` maps a command name to ``(module, attribute, first help line)``: ``--help``
    lists such a command from its first help line without importing its module, so
    ``harness-one --help`` does not import asyncio, the MCP SDK and the agent loop.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, str, str]] = {}

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """The command line, every write to stderr through :func:`~harness_one._stdout.guard_stderr`: a broken
        stderr (its reader gone) drops what goes to it, as a closed one does, instead of failing the command
        (exit 1 from click, an answer never written) after its tool has run."""
        from .._stdout import guard_stderr

        standalone = kwargs.get("standalone_mode", args[3] if len(args) > 3 else True)
        token = _STANDALONE.set(bool(standalone))
        try:
            with guard_stderr():
                return super().main(*args, **kwargs)
        finally:
            _STANDALONE.reset(token)

    def invoke(self, ctx: click.Context) -> Any:
        """The command; Ctrl-C (or a click ``Abort``) while it runs, or while its tools load, ends it with
        one line on stderr and exit 130, as ``run``'s, not click's ``Aborted!`` and exit 1 (the code of
        a command that could not start). ``main()`` embedded (``standalone_mode=False``) raises click's
        ``Abort`` for it, as click's ``main()`` does: the application decides."""
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, click.Abort) as exc:  # the command's contexts are closed by now
            if not _STANDALONE.get():
                raise
            interrupted(ctx.invoked_subcommand, terminated=isinstance(exc, Terminated))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, attribute, _ = self.lazy[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            if cmd_name not in self.commands:  # a module whose decorator did not register it
                self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """The command and its arguments; when they ask for its help, the help, shown at once: before
        the group loads the configuration, so ``run --help`` works whatever the configuration holds."""
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and _asks_for_help(ctx, command, rest):
            command.make_context(name, list(rest), parent=ctx)  # shows the help and exits
        return name, command, rest

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [n for n in self.list_commands(ctx) if n in self.lazy or not self.commands[n].hidden]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                command = click.Command(name, help=self.lazy[name][2])
            rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


#: Whether the group's ``main()`` runs as the program itself (click's ``standalone_mode``), not embedded.
_STANDALONE: contextvars.ContextVar[bool] = contextvars.ContextVar("harness_one_cli_standalone", default=True)

#: The exit code of a command ended by Ctrl-C (128 + SIGINT), as a shell gives it.
EX_INTERRUPTED = 130

#: The exit code of ``call`` and ``run`` ended by SIGTERM (128 + SIGTERM), as a shell gives it.
EX_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises ``KeyboardInterrupt`` (see :func:`sigterm_as_interrupt`): a call it
    lands in is cancelled as Ctrl-C cancels it (its plugins release what it held, an idempotency key), and
    the command ends with exit 143."""


def terminate() -> NoReturn:
    """A signal callback: :class:`Terminated`."""
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[bool]:
    """Meanwhile SIGTERM raises :class:`Terminated`, so it ends the command as Ctrl-C does (its default action
    would end the process at once, a call's idempotency key left held); yields whether it does. Only in the
    program itself (not ``main()`` embedded), in the main thread, with SIGTERM at its default handler (a
    host's own is left as it is). The default is back once the first SIGTERM is taken: a second one ends the
    process at once."""
    if not (
        _STANDALONE.get()
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        yield False
        return

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        terminate()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield True
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def interrupted(command: str | None, *, terminated: bool = False) -> NoReturn:
    """End the command after Ctrl-C: one line on stderr, exit 130 (its contexts are closed as it ends,
    and the process ends as after any command: the ``--mcp`` servers closed); after SIGTERM
    (``terminated``), ``terminated`` and exit 143."""
    from .._stdout import is_closed

    stderr = sys.stderr
    fresh = "" if terminated or is_closed(stderr) or not stderr.isatty() else "\n"  # on a terminal: past its ``^C``
    what = "terminated" if terminated else "interrupted"
    click.echo(f"{fresh}harness-one{' ' + command if command else ''}: {what}", err=True)
    raise click.exceptions.Exit(EX_TERMINATED if terminated else EX_INTERRUPTED)


def _asks_for_help(ctx: click.Context, command: click.Command, args: list[str]) -> bool:
    """Whether ``args`` give ``command`` its help option (not as another option's value), read by
    its parser alone: no value is converted, no file opened."""
    probe = click.Context(command, parent=ctx, resilient_parsing=True)
    option = command.get_help_option(probe)
    try:
        options, _, _ = command.make_parser(probe).parse_args(list(args))
    except click.ClickException:
        return False
    return option is not None and bool(options.get(option.name))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
    "-O",
    "--plugin-option",
    "plugin_options",
    multiple=True,
    metavar="NAME.OPTION=VALUE",
    help="An option for plugin NAME (VALUE is JSON, else a string), as in [plugins.NAME] (repeatable).",
)
@click.option(
    "--mcp",
    "mcp_specs",
    multiple=True,
    metavar="NAME[:PREFIX]=COMMAND_OR_URL",
    help="Also use the tools of this MCP server, under harness policies (repeatable; NAME:PREFIX= or NAME:= prefixes its tool names).",
)
@click.option(
    "--mcp-call-timeout",
    "mcp_call_timeout",
    metavar="SECONDS|false",
    help="Bound on a call of an --mcp server's tool that has no timeout policy (default 300; false: none).",
)
@click.option(
    "--mcp-max-reply-bytes",
    "mcp_max_reply_bytes",
    metavar="BYTES",
    help="Bound on one reply of an --mcp server; a longer one fails its call (default 16777216).",
)
@click.option(
    "--state", "state_url", metavar="URL", help="Where shared state lives (default: $HARNESS_ONE_STATE or a SQLite file)."
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
    ctx: click.Context,
    config_path: str | None,
    tool_specs: tuple[str, ...],
    plugin_options: tuple[str, ...],
    mcp_specs: tuple[str, ...],
    mcp_call_timeout: str | None,
    mcp_max_reply_bytes: str | None,
    state_url: str | None,
    log_format: str | None,
    log_level: str | None,
) -> None:
    """harness-one: the tool system LLM agents call through.

    Tools come from installed tool packages (the harness_one.tools entry points), from
    --tools and from --mcp servers. Exit codes of `call`: 0 ok, 3 unknown tool, 4 invalid
    arguments, 5 rate limited, 6 timeout, 7 the tool failed, 8 any other tool error; `describe`
    and `export --name`: 3 unknown tool; every command: 2 for bad usage or configuration, 1 when
    a SQLite state file cannot be opened or an MCP server cannot be reached at start-up, 70 when
    the answer cannot be written (stdout closed; not `serve`), 130 on Ctrl-C, 143 on SIGTERM
    (`call`, `run`, `serve`). What a tool prints
    goes to stderr.
    """
    if state_url is not None and not state_url.strip():
        raise click.BadParameter(blank_state("it", "leave the option out"), param_hint="--state")
    why = None if state_url is None else malformed_state(state_url)
    if why:
        raise click.BadParameter(why, param_hint="--state")
    try:
        settings = load_settings(config_path, state_given=state_url is not None)  # a given --state wins
    except ConfigError as exc:
        raise ConfigProblem(str(exc)) from None
    try:
        if mcp_call_timeout is not None or mcp_max_reply_bytes is not None:  # checked even when no --mcp server is named
            from ..mcp._spec import McpSpecError, parse_call_timeout, parse_max_reply_bytes

            try:
                if mcp_call_timeout is not None:
                    parse_call_timeout(mcp_call_timeout)
                if mcp_max_reply_bytes is not None:
                    parse_max_reply_bytes(mcp_max_reply_bytes)
            except McpSpecError as exc:
                raise ConfigError(str(exc)) from None
        for text in plugin_options:
            plugin, option, value = parse_option(text)
            settings.plugin_options.setdefault(plugin, {})[option] = value
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    settings.log_format = log_format or settings.log_format
    settings.log_level = log_level or settings.log_level
    if state_url is not None:  # the configured key namespace applies to it too, as to the environment's URL
        settings.state, settings.state_from = with_prefix(state_url, settings.state_prefix), "--state"
        give_state(settings.state)  # the default registry a tool file's @defineTool builds reads no variable either
        ctx.call_on_close(functools.partial(give_state, None))
    ctx.call_on_close(configure_logging(settings.log_format, settings.log_level, sys.stderr))
    set_import_timeout(settings.import_timeout)
    ctx.call_on_close(functools.partial(set_import_timeout, None))  # the library's default again (main() embedded)
    ctx.obj = CliState(
        settings,
        list(tool_specs),
        list(mcp_specs),
        mcp_call_timeout=mcp_call_timeout,
        mcp_max_reply_bytes=mcp_max_reply_bytes,
    )
