"""Settings for the command line: a TOML file, then the environment, then flags.

Plugin options are never interpreted here: ``[plugins.<name>]`` tables (and ``-O
name.option=value`` flags) go to the plugin's entry-point factory as keyword arguments, for a
standard plugin exactly as for a third-party one; but the file's relative paths start at its
directory, ``[plugins.idempotency] path`` among them (:func:`_paths_from`).
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlparse, urlunparse

__all__ = [
    "BOM_ADVICE",
    "ConfigError",
    "Settings",
    "blank_state",
    "environment_state",
    "is_file_spec",
    "load_settings",
    "malformed_state",
    "parse_option",
    "with_prefix",
]

ENV_CONFIG = "HARNESS_ONE_CONFIG"
ENV_LOG_FORMAT = "HARNESS_ONE_LOG_FORMAT"
ENV_LOG_LEVEL = "HARNESS_ONE_LOG_LEVEL"
ENV_STATE = "HARNESS_ONE_STATE"
ENV_REDIS = "HARNESS_ONE_REDIS_URL"
ENV_REDIS_PREFIX = "HARNESS_ONE_REDIS_PREFIX"
ENV_TOOLS = "HARNESS_ONE_TOOLS"
ENV_IMPORT_TIMEOUT = "HARNESS_ONE_IMPORT_TIMEOUT"
#: Seconds the command line lets a tool package, a plugin or a tools entry (a ``--tools`` file) take to import.
IMPORT_TIMEOUT = 30.0
DEFAULT_FILE = "harness-one.toml"
#: The largest configuration file read: a larger one (or a device) is refused, not read whole into memory.
MAX_CONFIG_BYTES = 1 << 20
#: Keys of ``[plugins]`` that are not plugin names.
PLUGIN_SETTINGS = {"block", "allow", "autoload", "strict"}


#: Said of JSON or TOML text that does not read because it starts with a byte-order mark (a file saved as "UTF-8 with BOM").
BOM_ADVICE = "it starts with a UTF-8 byte-order mark: save the file as UTF-8 without one"


class ConfigError(Exception):
    """The configuration file, environment or a flag is invalid; the message says where."""


def blank_state(where: str, instead: str) -> str:
    """Why a state URL that is empty or only spaces is refused (the file's key, a variable, ``--state``):
    it would name a SQLite file called " " in the current directory, or the default without a word."""
    return f"{where} is empty: give a state URL ('memory:', a SQLite file, 'redis://host:6379/0'), or {instead} for the default SQLite file"


def malformed_state(url: str) -> str | None:
    """Why a state URL does not parse at all (an unclosed ``[`` of an IPv6 host), in the words the state uses
    for a malformed one (``state URL '...' is malformed: ...``, its password masked); None when it parses. Each
    place a URL is set checks it (``--state``, the file's key, the variable), so the error can name that place."""
    try:
        urlparse(url)
    except ValueError as exc:
        from ._redact import redact

        return f"state URL {redact(url)!r} is malformed: {exc}"
    return None


def with_prefix(url: str, prefix: str | None, where: str | None = None) -> str:
    """``url`` with its ``?prefix=`` (the namespace of Redis keys) set to ``prefix``, replacing one it
    had; unchanged when ``prefix`` is None or the state is not Redis. With ``where`` (the variable or the
    configuration key that set it), a prefix Redis cannot take is a ``ValueError`` naming ``where``: in the
    URL, the state would blame "the URL's ?prefix=", which the user never wrote."""
    from .state import REDIS_SCHEMES

    parsed = urlparse(url)
    if prefix is None or parsed.scheme not in REDIS_SCHEMES:
        return url
    if where is not None:
        from .state._select import redis_prefix

        redis_prefix(prefix, {}, where=where)
    query = [(name, value) for name, value in parse_qsl(parsed.query, keep_blank_values=True) if name != "prefix"]
    return urlunparse(parsed._replace(query=urlencode([*query, ("prefix", prefix)], safe=":")))


def is_file_spec(spec: str) -> bool:
    """Whether a tools spec (``--tools``, ``tools = [...]``) names a file (``x.py``, ``dir/x``), not a module."""
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def _from_file(spec: str, directory: Path) -> str:
    """A tools spec of the configuration file: a relative file path is taken from the file's ``directory``."""
    return _path_from_file(spec, directory) if is_file_spec(spec) else spec


def _path_from_file(path: str, directory: Path) -> str:
    """A file path of the configuration file: a relative one is taken from the file's ``directory``
    (``~`` is the home directory)."""
    expanded = Path(path).expanduser()
    return path if not path or expanded.is_absolute() else str(directory / expanded)


def _state_from_file(url: str, directory: Path) -> str:
    """The configuration file's state URL: a relative SQLite file (a plain path, or ``sqlite:PATH``
    without the slashes) is taken from the file's ``directory``."""
    parsed = urlparse(url)
    if not parsed.scheme:  # a plain path, taken as written: '?' and '#' are part of it
        return _path_from_file(url, directory)
    if parsed.scheme != "sqlite" or parsed.netloc or parsed.path.startswith(("/", "~")) or not parsed.path:
        return url
    return urlunparse(parsed._replace(path=f"{quote(str(directory))}/{parsed.path}"))


#: The state URL of the command line's ``--state`` while the CLI runs: it replaces the environment's (see below).
_given_state: str | None = None


def give_state(url: str | None) -> None:
    """While the CLI runs with ``--state``: ``url`` (None again after) is the state of every registry built from
    the environment's, the default registry too (a tool file's ``@defineTool`` builds it), not the variables."""
    global _given_state
    _given_state = url


def environment_state(*, prefixed: bool = True) -> str | None:
    """The state URL the environment names: ``HARNESS_ONE_REDIS_URL``, else ``HARNESS_ONE_STATE`` (an empty
    variable is unset), with ``HARNESS_ONE_REDIS_PREFIX`` as its key prefix unless not ``prefixed`` (None when
    neither is set). A variable of spaces is refused with ``ValueError``, as a malformed state URL is: it would
    name a SQLite file called " " in the current directory. The one reader of these variables (the CLI and
    :meth:`ToolRegistry.default`); while the CLI runs with ``--state``, that URL, and the variables are not read."""
    if _given_state is not None:
        return _given_state
    found = _state_variable()
    if found is None:
        return None
    url = found[1]
    return with_prefix(url, os.environ.get(ENV_REDIS_PREFIX) or None, ENV_REDIS_PREFIX) if prefixed else url


def _state_variable() -> tuple[str, str] | None:
    """The variable that names the state URL, and the URL: ``HARNESS_ONE_REDIS_URL``, else ``HARNESS_ONE_STATE``
    (an empty variable is unset). ``ValueError`` naming the variable for one of spaces or one that does not parse."""
    for name in (ENV_REDIS, ENV_STATE):
        url = os.environ.get(name)
        if url and not url.strip():
            raise ValueError(blank_state(name, "unset it"))
        if url:
            why = malformed_state(url)
            if why:
                raise ValueError(f"{name}: {why}")
            return name, url
    return None


def default_state() -> str:
    """The CLI's state: a SQLite file under ``$XDG_STATE_HOME/harness-one`` (else ``~/.local/state``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return f"sqlite://{quote(str(Path(base).absolute() / 'harness-one' / 'state.sqlite3'))}"  # a '#' in it is quoted


@dataclass
class Settings:
    """Everything the CLI builds its registry from. See ``docs/configuration.md``."""

    block: list[str] = field(default_factory=list)
    allow: list[str] | None = None
    autoload: bool | None = None
    strict: bool | None = None
    plugin_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    state: str = field(default_factory=default_state)
    #: ``[state] prefix`` (or ``HARNESS_ONE_REDIS_PREFIX``): the Redis key namespace, already applied to ``state``.
    state_prefix: str | None = None
    #: Where ``state`` was set (``--state``, ``FILE: [state] url``, ``HARNESS_ONE_STATE``); None: the default.
    state_from: str | None = None
    log_format: str | None = None
    log_level: str = "warning"
    tools: list[str] = field(default_factory=list)
    #: How many of ``tools`` (the first ones) the configuration file's ``tools`` key gave; the rest are ``HARNESS_ONE_TOOLS``'s.
    tools_in_file: int = 0
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str | None = None
    #: ``HARNESS_ONE_IMPORT_TIMEOUT``: seconds an entry point's or a tools entry's import may take (None: no bound).
    import_timeout: float | None = IMPORT_TIMEOUT


_SECTIONS = {"plugins", "state", "logging", "mcp", "tools"}


def _table(data: dict[str, Any], key: str, where: str, known: set[str]) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    unknown = set(value) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)} in [{key}]; known: {sorted(known)}")
    return value


def _apply_file(settings: Settings, data: dict[str, Any], where: str) -> None:
    unknown = set(data) - _SECTIONS
    if unknown:
        first = sorted(unknown)[0]
        raise ConfigError(
            f"{where}: unknown section [{first}]; known: {', '.join(sorted(_SECTIONS))} "
            "(plugin options go in [plugins.<name>] tables)"
        )
    tools = data.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(v, str) for v in tools):
        raise ConfigError(f"{where}: 'tools' must be a list of module names or file paths")
    settings.tools = list(tools)
    plugins = data.get("plugins", {})
    if not isinstance(plugins, dict):
        raise ConfigError(f"{where}: [plugins] must be a table")
    for key, value in plugins.items():
        if key in PLUGIN_SETTINGS:
            continue
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: [plugins.{key}] must be a table of options for the plugin '{key}'")
        settings.plugin_options[key] = dict(value)
    block = plugins.get("block", [])
    if not isinstance(block, list) or not all(isinstance(v, str) for v in block):
        raise ConfigError(f"{where}: [plugins] block must be a list of plugin names")
    settings.block = list(block)
    allow = plugins.get("allow")
    if allow is not None and (not isinstance(allow, list) or not all(isinstance(v, str) for v in allow)):
        raise ConfigError(f"{where}: [plugins] allow must be a list of plugin names, not {allow!r}")
    if allow == []:  # would load no entry-point plugin, validation included: never what an empty list meant
        raise ConfigError(
            f"{where}: [plugins] allow is empty, which would load no plugin at all, validation included: "
            "name the plugins to load, or leave 'allow' out to load every installed one"
        )
    settings.allow = allow
    for flag in ("autoload", "strict"):
        if not isinstance(plugins.get(flag, False), bool):
            raise ConfigError(f"{where}: [plugins] {flag} must be true or false, not {plugins[flag]!r}")
    settings.autoload = plugins.get("autoload")
    settings.strict = plugins.get("strict")
    state = _table(data, "state", where, {"url", "redis_url", "prefix"})
    for key in ("url", "redis_url"):
        if key in state and not isinstance(state[key], str):
            raise ConfigError(f"{where}: [state] {key} must be a string (e.g. 'redis://host:6379/0'), not {state[key]!r}")
        if key in state and not state[key].strip():  # (an empty HARNESS_ONE_STATE is unset: this is no variable)
            raise ConfigError(f"{where}: {blank_state(f'[state] {key}', 'leave the key out')}")
        why = malformed_state(state[key]) if key in state else None
        if why:
            raise ConfigError(f"{where}: [state] {key}: {why}")
    if "url" in state or "redis_url" in state:  # redis_url, when given, puts all shared state on Redis
        key = "redis_url" if state.get("redis_url") else "url"
        settings.state, settings.state_from = state[key], f"{where}: [state] {key}"
    prefix = state.get("prefix")
    if prefix is not None and not isinstance(prefix, str):
        raise ConfigError(f"{where}: [state] prefix must be a string (the namespace of the Redis keys, e.g. 'app:')")
    settings.state_prefix = prefix
    logs = _table(data, "logging", where, {"format", "level"})
    for key in ("format", "level"):
        if key in logs and not isinstance(logs[key], str):
            raise ConfigError(f"{where}: [logging] {key} must be a string, not {logs[key]!r}")
    settings.log_format = logs.get("format")
    settings.log_level = logs.get("level", settings.log_level)
    mcp = _table(data, "mcp", where, {"servers"})
    servers = mcp.get("servers", {})
    if not isinstance(servers, dict) or not all(isinstance(v, dict) for v in servers.values()):
        raise ConfigError(f"{where}: [mcp.servers.NAME] must be tables")
    settings.mcp_servers = {name: dict(spec) for name, spec in servers.items()}


def _paths_from(settings: Settings, directory: Path) -> None:
    """The relative paths the configuration file gives, taken from its ``directory`` wherever the
    command runs: ``tools`` files, a SQLite state file, ``[plugins.idempotency] path`` and the ``cwd``
    of an ``[mcp.servers.NAME]`` table (a value of the wrong type is left for its reader to refuse)."""
    settings.tools = [_from_file(spec, directory) for spec in settings.tools]
    settings.state = _state_from_file(settings.state, directory)
    paths = [(settings.plugin_options.get("idempotency", {}), "path")]
    paths += [(server, "cwd") for server in settings.mcp_servers.values()]
    for table, key in paths:
        if isinstance(table.get(key), str):
            table[key] = _path_from_file(table[key], directory)


def _environment_over_file(settings: Settings) -> None:
    """The plugin settings of the environment win over the file's (the library lets code win over
    the environment, and the file reaches the library as code)."""
    from ._errors import PluginError
    from ._plugins import ENV_ALLOW, ENV_NO_AUTOLOAD, ENV_STRICT, _env_flag, _env_names, env_options

    try:
        found = env_options(settings.plugin_options)
        for var in (ENV_STRICT, ENV_NO_AUTOLOAD):
            _env_flag(var)  # a value that is no boolean is refused, not taken as an override that means False
    except PluginError as exc:
        raise ConfigError(exc.message) from None
    for name, values in found.items():
        settings.plugin_options[name] = {**settings.plugin_options[name], **values}
    if _env_names(ENV_ALLOW):
        settings.allow = None  # the registry reads it (a value naming no plugin leaves the file's list)
    if os.environ.get(ENV_STRICT, "").strip():
        settings.strict = None
    if os.environ.get(ENV_NO_AUTOLOAD, "").strip():
        settings.autoload = None


def _read_config(file: Path, chosen: str, found: bool) -> dict[str, Any]:
    """The configuration file's TOML. A file ``found`` in the current directory (not named by ``--config`` or
    ``HARNESS_ONE_CONFIG``) is read only when it is the user's own (:func:`_refuse_foreign`), checked on the
    file opened: it names code that runs (its ``tools``, its MCP servers' commands)."""
    try:
        # Not blocking on a FIFO with no writer; checked on the file opened, then read at most one byte past the bound.
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        try:
            status = os.fstat(fd)
            kind = _not_regular(status)
            if kind:
                raise ConfigError(f"cannot read the configuration file {chosen!r}: it is {kind}, not a regular file")
            if found:
                _refuse_foreign(status, chosen)
            if stat.S_ISFIFO(status.st_mode) and hasattr(os, "set_blocking"):  # a pipe (`--config <(...)`, /dev/stdin):
                os.set_blocking(fd, True)  # read as its writer writes (one with no writer reads as empty)
            with open(fd, "rb", closefd=False) as stream:
                raw = stream.read(MAX_CONFIG_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ConfigError(f"cannot read the configuration file {chosen!r}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"cannot read the configuration file {chosen!r}: it is larger than 1 MiB")
    try:
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # (as text mode read it)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{chosen}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position {exc.start})") from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{chosen}: invalid TOML: {BOM_ADVICE if text.startswith(chr(0xFEFF)) else exc}") from None
    except RecursionError:  # arrays or tables nested deeper than the parser recurses
        raise ConfigError(f"{chosen}: invalid TOML: nested too deeply") from None
    return data


def _not_regular(status: os.stat_result) -> str | None:
    """What a file that is neither a regular one nor a pipe is (``"a directory"``, ``"a socket"``, ...); None
    for a regular file, a pipe, and the null device (``--config /dev/null``: no settings)."""
    mode = status.st_mode
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return None
    if stat.S_ISCHR(mode):
        try:
            null = os.stat(os.devnull)
        except OSError:  # pragma: no cover - no null device
            return "a character device"
        return None if stat.S_ISCHR(null.st_mode) and status.st_rdev == null.st_rdev else "a character device"
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISSOCK: "a socket", stat.S_ISBLK: "a block device"}
    return next((name for test, name in kinds.items() if test(mode)), "a special file")


def _refuse_foreign(status: os.stat_result, chosen: str) -> None:
    """Refuse a configuration file found in the current directory that another user owns or may write (as
    git refuses a repository another user owns): its ``tools`` and ``[mcp.servers]`` would run as this user.
    A group-writable file of the user's own group (the user private group, as a umask of 002 makes) is
    the user's alone. Not on Windows, which has no such owners and modes."""
    if not hasattr(os, "getuid"):  # pragma: no cover - Windows
        return
    import stat

    uid = os.getuid()
    if status.st_uid != uid:
        why = f"it is owned by another user (uid {status.st_uid}), not you (uid {uid})"
    elif status.st_mode & stat.S_IWOTH:
        why = "any user may write it"
    elif status.st_mode & stat.S_IWGRP and not _own_group(status.st_gid):
        why = f"the users of its group (gid {status.st_gid}) may write it"
    else:
        return
    raise ConfigError(
        f"{Path(chosen).absolute()}: not read: this configuration file was found in the current directory and {why}, "
        "and its 'tools' and [mcp.servers] would run as you. If you trust it, name it: --config "
        f"{chosen} (or HARNESS_ONE_CONFIG); else run harness-one in another directory"
    )


def _own_group(gid: int) -> bool:
    """Whether ``gid`` is the user's private group: their primary group, of their own name and no other member."""
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(os.getuid()), grp.getgrgid(gid)
    except KeyError:  # no such user or group in the databases
        return False
    return gid == user.pw_gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def load_settings(path: str | None = None, *, state_given: bool = False) -> Settings:
    """Read ``path`` (or ``$HARNESS_ONE_CONFIG``, or ``./harness-one.toml`` if present), then the environment
    (its state URL not, when ``state_given``: a ``--state`` replaces it)."""
    settings = Settings()
    named = path or os.environ.get(ENV_CONFIG)
    chosen = named or (DEFAULT_FILE if Path(DEFAULT_FILE).is_file() else None)
    if chosen:
        file = Path(chosen).expanduser()
        data = _read_config(file, chosen, found=not named)
        _apply_file(settings, data, chosen)
        _paths_from(settings, file.absolute().parent)
        settings.source = str(file)
    _environment_over_file(settings)
    settings.log_format = os.environ.get(ENV_LOG_FORMAT) or settings.log_format
    settings.log_level = os.environ.get(ENV_LOG_LEVEL) or settings.log_level
    if not state_given:
        try:
            found = _state_variable()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if found is not None:
            settings.state_from, settings.state = found
    prefix_from = ENV_REDIS_PREFIX if os.environ.get(ENV_REDIS_PREFIX) else f"{chosen}: [state] prefix"
    settings.state_prefix = os.environ.get(ENV_REDIS_PREFIX) or settings.state_prefix
    try:
        settings.state = with_prefix(settings.state, settings.state_prefix, prefix_from)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    settings.tools_in_file = len(settings.tools)
    settings.tools += [t for t in os.environ.get(ENV_TOOLS, "").split(os.pathsep) if t]
    settings.import_timeout = _import_timeout(os.environ.get(ENV_IMPORT_TIMEOUT, ""))
    if settings.log_format not in (None, "console", "json"):
        where = ENV_LOG_FORMAT if os.environ.get(ENV_LOG_FORMAT) else f"{chosen}: [logging] format"
        raise ConfigError(f"{where} must be 'console' or 'json', not {settings.log_format!r}")
    if settings.log_level.lower() not in ("debug", "info", "warning", "error"):
        where = ENV_LOG_LEVEL if os.environ.get(ENV_LOG_LEVEL) else f"{chosen}: [logging] level"
        raise ConfigError(f"{where} must be debug, info, warning or error, not {settings.log_level!r}")
    return settings


def _import_timeout(text: str) -> float | None:
    """``HARNESS_ONE_IMPORT_TIMEOUT``: seconds, ``0`` for no bound; unset or empty, the default."""
    if not text.strip():
        return IMPORT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 1e6:  # (a thread's wait refuses a timeout past what the platform holds)
        raise ConfigError(f"{ENV_IMPORT_TIMEOUT} must be a number of seconds up to 1e6 (0: no bound), not {text!r}")
    return seconds or None


def parse_option(text: str) -> tuple[str, str, Any]:
    """``"rate_limit.max_wait=2"`` -> ``("rate_limit", "max_wait", 2)``: the value is JSON if it parses, else a string.

    The option is after the last dot (a keyword has none; a plugin's entry-point name may: ``acme.audit.level``).
    """
    target, sep, raw = text.partition("=")
    plugin, dot, option = target.rpartition(".")
    if not (sep and dot and plugin and option):
        raise ConfigError(f"plugin option {text!r} must look like NAME.OPTION=VALUE (e.g. rate_limit.max_wait=2)")
    try:
        value: Any = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder reads
        value = raw
    return plugin.strip(), option.strip(), value
