"""Which remote MCP servers to import: ``--mcp NAME[:PREFIX]=COMMAND_OR_URL`` and ``[mcp.servers.NAME]`` tables.

Nothing here imports the ``mcp`` SDK; :func:`attach_servers` loads the client only when
there is a server to connect to.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._redact import _SHOWN, _USER_FLAGS, REDACTED, _command_masked, mask_secrets

if TYPE_CHECKING:
    from harness_one import ToolRegistry

    from ._client import RemoteServer

__all__ = [
    "CALL_TIMEOUT",
    "ERROR_META_KEY",
    "LIST_TIMEOUT",
    "MAX_REPLY_BYTES",
    "POLICY_KEYS",
    "McpSpec",
    "McpSpecError",
    "attach_servers",
    "parse_mcp_spec",
]

#: Where an ``isError`` result from a harness-one server carries the error's data, ``ToolError.to_dict()``
#: (``type``, ``kind``, ``message``, ``retry_after``, ...): in ``_meta``, since clients check
#: ``structuredContent`` against the tool's output schema even on errors.
ERROR_META_KEY = "harness-one/error"

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
_PREFIX = re.compile(r"^[A-Za-z0-9_-]{0,32}\Z")
#: ``defineTool`` keywords a server's ``policies`` may set for every tool it brings.
POLICY_KEYS = frozenset(
    {"rate_limit", "timeout", "timeout_mode", "total_timeout", "retry", "max_concurrency", "circuit_breaker", "cache_ttl", "tags"}
)
_TABLE_KEYS = (
    "command",
    "url",
    "prefix",
    "env",
    "cwd",
    "headers",
    "policies",
    "call_timeout",
    "max_reply_bytes",
    "list_timeout",
)
#: Seconds a remote call may take when no ``timeout``/``total_timeout`` policy bounds it (the HTTP read timeout).
CALL_TIMEOUT = 300.0
#: Seconds a server's whole tool listing (``tools/list``, all its pages) may take; each page, ``connect_timeout``.
LIST_TIMEOUT = 300.0
#: The default bound on one reply of a server (a line over stdio, a body or an event over HTTP): 16 MiB.
MAX_REPLY_BYTES = 16 << 20


class McpSpecError(ValueError):
    """A remote-server spec or config table is invalid; the message names the field and what was expected."""


@dataclass(frozen=True)
class McpSpec:
    """One remote MCP server: a command to run (stdio) or a streamable-HTTP ``url``.

    ``prefix`` goes before every imported tool name (``fs`` or ``fs_``: ``fs_read_file``); ``policies`` are ``defineTool``
    keywords (rate limit, timeout, retry, ...) applied to each of its tools. ``env`` and
    ``headers`` may hold secrets and are kept out of ``repr``; credentials in ``url`` (user-info, ``?api_key=``) and ``command`` (``--token=...``, ``--api-key KEY``) are masked there, by the model's keys and ``pin``, ``auth``, ``signature``, ``credential``.
    """

    name: str
    command: tuple[str, ...] = ()
    url: str | None = field(default=None, repr=False)
    prefix: str = ""
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    policies: Mapping[str, Any] = field(default_factory=dict)
    #: Seconds a call of a tool without a timeout policy may take (None or ``false``: no bound).
    call_timeout: float | None = CALL_TIMEOUT
    #: Bytes one reply may take; a longer one fails its call (``reply_too_large``).
    max_reply_bytes: int = MAX_REPLY_BYTES
    #: Seconds the whole tool listing (all its pages, at the import and at each refresh) may take.
    list_timeout: float = LIST_TIMEOUT

    def __repr__(self) -> str:
        shown = f"url={self.shown_url()!r}" if self.url is not None else f"command={self.shown_command()!r}"
        return f"McpSpec(name={self.name!r}, {shown}, prefix={self.prefix!r})"

    def shown_url(self) -> str | None:
        """``url`` with its user-info and the values of secret query keys (``?api_key=``, ``?auth=``) masked."""
        return None if self.url is None else _SHOWN.mask(self.url)

    def shown_command(self) -> tuple[str, ...]:
        """``command``, every word, with secret values masked (``--token=...``, ``PGPASSWORD=...``), the word after
        a flag named as a secret (``--api-key KEY``, ``--auth KEY``) and the password of a user flag's
        ``user:password`` (``-u bob:...``) and the password of a client's own flag, read on the command line the words
        make (``mysql -uroot -p...``, ``redis-cli -a ...``); the keys are the model's and ``pin``, ``auth``,
        ``signature``, ``credential`` (``--max-tokens 500`` is shown)."""
        shown: list[str] = []
        masked = _command_masked(self.command)  # (the first 100 words: a client's password flag on the command line)
        after_flag = after_user = False
        for index, word in enumerate(self.command):
            if after_flag:
                shown.append(REDACTED)
            elif after_user and ":" in word and word[:1] != "+" and word.partition(":")[2][:2] != "//":
                shown.append(f"{_SHOWN.mask(word.partition(':')[0])}:{REDACTED}")
            else:
                shown.append(_SHOWN.mask(masked[index] if masked is not None and index < len(masked) else word))
            after_flag = word.startswith("-") and "=" not in word and _SHOWN._flag(word)  # (the redactor's own rule)
            after_user = word in _USER_FLAGS
        return tuple(shown)

    def __post_init__(self) -> None:
        where = f"MCP server '{self.name}'"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise McpSpecError(f"MCP server name {_shown(self.name)}: expected 1-64 letters, digits, '_' or '-'.")
        if bool(self.command) == (self.url is not None):
            raise McpSpecError(f"{where}: expected exactly one of 'command' (a list of strings) or 'url'.")
        if self.command and not all(isinstance(part, str) and part for part in self.command):
            raise McpSpecError(f"{where}: 'command' must be a list of non-empty strings, got {_shown(list(self.command))}.")
        if self.url is not None and not re.match(r"^https?://[^\s/]+", self.url):
            raise McpSpecError(f"{where}: 'url' must be an http:// or https:// URL, got {_shown(self.url)}.")
        if not isinstance(self.prefix, str) or not _PREFIX.match(self.prefix):
            raise McpSpecError(f"{where}: 'prefix' must be up to 32 letters, digits, '_' or '-', got {_shown(self.prefix)}.")
        for key in ("env", "headers"):
            value = getattr(self, key)
            if value is not None and not (
                isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
            ):
                raise McpSpecError(f"{where}: '{key}' must be a table of strings.")
        if self.cwd is not None and not isinstance(self.cwd, str):
            raise McpSpecError(f"{where}: 'cwd' must be a string path, got {_shown(self.cwd)}.")
        if not isinstance(self.policies, Mapping):
            raise McpSpecError(f"{where}: 'policies' must be a table of defineTool keywords.")
        wait = self.call_timeout
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 < wait < float("inf")):
            raise McpSpecError(f"{where}: 'call_timeout' must be a positive number of seconds or false, got {_shown(wait)}.")
        wait = self.list_timeout
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 < wait < float("inf"):
            raise McpSpecError(f"{where}: 'list_timeout' must be a positive number of seconds, got {_shown(wait)}.")
        if not is_byte_count(self.max_reply_bytes):
            raise McpSpecError(
                f"{where}: 'max_reply_bytes' must be a positive number of bytes, got {_shown(self.max_reply_bytes)}."
            )
        unknown = sorted(set(self.policies) - POLICY_KEYS)
        if unknown:
            raise McpSpecError(f"{where}: unknown policies {unknown}; expected some of {sorted(POLICY_KEYS)}.")

    @classmethod
    def from_table(cls, name: str, table: Mapping[str, Any]) -> McpSpec:
        """The spec for ``[mcp.servers.NAME]``: ``command = [...]`` or ``url = "..."``, optional ``prefix``,
        ``env``, ``cwd``, ``headers``, a ``policies`` table, ``call_timeout``, ``max_reply_bytes`` and ``list_timeout``."""
        if not isinstance(table, Mapping):
            raise McpSpecError(f"mcp.servers.{name}: expected a table, got {type(table).__name__}.")
        unknown = sorted(set(table) - set(_TABLE_KEYS))
        if unknown:
            raise McpSpecError(f"mcp.servers.{name}: unknown keys {unknown}; expected some of {list(_TABLE_KEYS)}.")
        command = table.get("command", ())
        if isinstance(command, str) or not isinstance(command, Sequence):
            raise McpSpecError(f'mcp.servers.{name}: \'command\' must be a list of strings, like ["npx", "-y", "pkg"].')
        try:
            return cls(
                name=name,
                command=tuple(command),
                url=table.get("url"),
                prefix=table.get("prefix", ""),
                env=table.get("env"),
                cwd=table.get("cwd"),
                headers=table.get("headers"),
                policies=table.get("policies") or {},
                call_timeout=None
                if table.get("call_timeout", CALL_TIMEOUT) is False
                else table.get("call_timeout", CALL_TIMEOUT),
                max_reply_bytes=table.get("max_reply_bytes", MAX_REPLY_BYTES),
                list_timeout=table.get("list_timeout", LIST_TIMEOUT),
            )
        except McpSpecError as exc:
            raise McpSpecError(f"mcp.servers.{name}: {exc}") from None


def parse_mcp_spec(text: str, *, call_timeout: float | None = CALL_TIMEOUT, max_reply_bytes: int = MAX_REPLY_BYTES) -> McpSpec:
    """``NAME[:PREFIX]=COMMAND_OR_URL`` (the ``--mcp`` option): an ``http(s)://`` URL, or a command split like a shell would.

    ``files:fs=npx ...`` names the server ``files`` and its tools ``fs_...``; ``files:=npx ...``
    (an empty prefix after the colon) uses the server name as prefix: ``files_...``.
    ``call_timeout`` bounds its tools' calls and ``max_reply_bytes`` its replies, as in :class:`McpSpec`.
    """
    name, sep, target = text.partition("=")
    name, target = name.strip(), target.strip()
    name, colon, prefix = name.partition(":")
    name, prefix = name.strip(), prefix.strip()
    if not sep or not name or not target:
        raise McpSpecError(
            f"--mcp {_shown(text)}: expected NAME[:PREFIX]=COMMAND_OR_URL, for example 'files=npx -y @scope/server', "
            "'files:fs=npx -y @scope/server' or 'api=http://127.0.0.1:8000/mcp'."
        )
    if colon and not prefix:
        prefix = name
    try:
        if re.match(r"^https?://", target):
            return McpSpec(name=name, url=target, prefix=prefix, call_timeout=call_timeout, max_reply_bytes=max_reply_bytes)
        try:
            command = tuple(shlex.split(target))
        except ValueError as exc:
            raise McpSpecError(f"cannot split the command: {exc}.") from None
        return McpSpec(name=name, command=command, prefix=prefix, call_timeout=call_timeout, max_reply_bytes=max_reply_bytes)
    except McpSpecError as exc:
        raise McpSpecError(f"--mcp {_shown(text)}: {exc}") from None


def parse_call_timeout(text: str) -> float | None:
    """``--mcp-call-timeout``'s value: ``false`` (None: no bound) or a positive, finite number of seconds."""
    if text.strip().lower() == "false":
        return None
    try:
        wait = float(text)
    except ValueError:
        wait = math.nan
    if not 0 < wait < math.inf:
        raise McpSpecError(f"--mcp-call-timeout {text!r}: expected a positive number of seconds or 'false'.")
    return wait


def is_byte_count(value: object) -> bool:
    """Whether ``value`` is a positive number of bytes (an ``int``, not a ``bool``)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def parse_max_reply_bytes(text: str) -> int:
    """``--mcp-max-reply-bytes``'s value: a positive whole number of bytes."""
    try:
        size = int(text)
    except ValueError:
        size = 0
    if not is_byte_count(size):
        raise McpSpecError(f"--mcp-max-reply-bytes {text!r}: expected a positive whole number of bytes.")
    return size


def attach_servers(
    registry: ToolRegistry, specs: Iterable[McpSpec], *, failures: list[str] | None = None, replace: bool = False
) -> list[RemoteServer]:
    """Connect to each server and add its tools to ``registry``; returns the connected servers.

    A server that cannot be reached, or a tool that cannot be added, raises (an
    :class:`McpConnectionError` or :class:`~harness_one.ToolDefinitionError`) unless
    ``failures`` is given: then ``"mcp:NAME: reason"`` is appended and the others go on, as is each tool a
    connected server left out (its ``failures``: one refused, a listing cut). Two of ``specs`` of one
    name raise :class:`McpSpecError` before any connects; so does a name a server attached to ``registry``
    holds, for that server (as :func:`~harness_one.mcp.import_tools`: unless ``replace``).
    """
    specs = list(specs)
    if not specs:
        return []
    check_names(specs)
    from ._client import import_tools

    servers = []
    for spec in specs:
        try:
            server = import_tools(registry, spec, replace=replace, call_timeout=spec.call_timeout)
        except Exception as exc:
            if failures is None:
                raise
            failures.append(f"mcp:{spec.name}: {type(exc).__name__}: {exc}")
            continue
        servers.append(server)
        if failures is not None:  # what it left out of its tools (one refused, a listing cut) is one too
            failures += [f"mcp:{spec.name}: {why}" for why in server.failures]
    return servers


def check_names(specs: Iterable[McpSpec]) -> None:
    """:class:`McpSpecError` when two of ``specs`` have one name: a server's name is its tools' source
    (``mcp:NAME``), its circuit and its tag, each server's own."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise McpSpecError(
                f"two MCP servers are named '{spec.name}' (--mcp or [mcp.servers.{spec.name}]); give each server its own name."
            )
        seen.add(spec.name)


def _shown(value: object) -> str:
    """``repr(value)`` as an error shows it: URL user-info and secret values masked (:func:`~harness_one._redact.mask_secrets`)."""
    return mask_secrets(repr(value))
