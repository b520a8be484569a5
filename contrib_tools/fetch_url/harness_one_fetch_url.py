"""``fetch_url``: HTTP(S) GET that is safe by default.

- Only ``http`` and ``https``. Leading and trailing C0 controls and spaces around the URL are dropped, as WHATWG URL
  parsing drops them; a URL that is no string is a ``ToolArgumentError`` on ``$.url``, with or without the validation
  plugin.
- The host is resolved once; every address it resolves to must be public (not loopback,
  private, link-local such as 169.254.169.254, multicast, reserved, unspecified, shared or
  documentation space), for IPv4, IPv6 and IPv4 embedded in IPv6 (mapped, 6to4, Teredo,
  NAT64). The request then goes to that address (the ``Host`` header and TLS SNI carry the
  name), so a second DNS answer cannot switch it to another host (DNS rebinding). An
  internationalised name (``bücher.example``) is resolved and sent in its ASCII form
  (``xn--bcher-kva.example``); ``allow`` takes either spelling (:meth:`FetchPolicy.allows`, given either,
  matches both). A host name DNS cannot carry (an empty label, a label past 63 characters, a name
  past 253) is refused before it is resolved.
- A URL with a user name or password (``https://user:secret@host/``) is refused, the model's
  or a redirect's: httpx would send it as Basic auth and the result would echo it. The refusal
  shows it masked (``https://[REDACTED]@host/``).
- Redirects are followed by hand, each hop checked the same way, at most ``max_redirects``. A
  ``Location`` that is no URL (``//[``) is a ``ToolError`` saying the server redirected to an
  invalid URL. No cookie is kept or sent, within a fetch or across its redirects.
- One deadline, ``timeout`` seconds, covers the whole fetch: DNS, connect, TLS, every read
  and write of headers and body, over every redirect. Each socket operation gets only the
  time left, so a server that trickles a byte at a time cannot stretch it.
- The body is read raw and decompressed here (gzip, deflate), never past ``max_bytes``, so a
  small compressed body cannot inflate in memory; the result says when it was truncated. gzip's
  members are read one after another; bytes after the compressed data that are no member end the
  reading there, and the result says it was truncated, as when the body ends within a stream. At most
  ``2 * max_bytes`` + 64 KiB of the body as sent are decoded (zero bytes between members and empty members decode to
  nothing, and a server may send them without end): past that the reading stops, ``truncated``.
- The result, as the model reads it (harness-one's JSON), is at most ``max_chars`` characters
  (default 1,000,000, the ``output_limit`` plugin's default): past it the text is cut, and
  JSON past it is shown as cut text; ``truncated`` and ``note`` say so. Where the metadata
  alone are longer (long URLs and content type echoed), the echoes are cut further: the
  model's URL first, then the final URL, then the content type, down to ``...``. A
  ``max_chars`` below what the metadata take with every echo ``...`` (``FetchPolicy.min_chars``:
  268 with the default ``max_bytes`` and ``max_redirects``) is refused when the policy is
  built (``ValueError`` naming it). A status outside 100-999 (which a test ``transport`` may
  return; HTTP/1.1 over the network has three digits) is a ``ToolError``, so it cannot
  overrun ``max_chars``. The tool sets no ``max_output`` of its own, so an
  operator's lower output limit applies to it as to any tool.
- A byte order mark decides the charset, and is dropped; else the header's charset; else JSON's is told by its zero
  bytes (UTF-8, UTF-16 or UTF-32, as ``json.loads`` tells it) and an HTML page's by a ``<meta>`` in its first 1024
  bytes; else, or where that names no text encoding, UTF-8.
- HTML becomes readable text (:func:`html_to_text`); JSON stays JSON; ``text/*``, ``+xml``, YAML, NDJSON and
  CSV are text; any other type is binary, not shown.
- A URL or header echoed in the result or an error, and an HTTP error's text, is cut, saying how long it was.

``HARNESS_ONE_FETCH_ALLOW`` (comma-separated hosts, addresses or CIDR networks) opens chosen
private destinations on purpose; :func:`make_fetch_url` builds a tool with its own policy.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import functools
import http.cookiejar
import ipaddress
import json
import math
import os
import re
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, TypedDict, cast
from urllib.parse import urljoin
from urllib.request import Request

import httpcore
import httpx

from harness_one import (
    ArgumentProblem,
    Tool,
    ToolArgumentError,
    ToolError,
    ToolTimeout,
    defineTool,
    redact,
    rendered_length,
)

__all__ = ["ALLOW_ENV", "MAX_CHARS", "FetchPolicy", "FetchResult", "fetch", "fetch_url", "html_to_text", "make_fetch_url"]

ALLOW_ENV = "HARNESS_ONE_FETCH_ALLOW"
#: Characters of a result as the model reads it: the ``output_limit`` plugin's default, so the tool's own cut decides there.
MAX_CHARS = 1_000_000
#: Characters of a URL echoed in a result or an error (``redact``'s own cut): httpx takes 64 KB.
_URL_SHOWN = 2_000
#: Characters of anything else echoed: a refused URL, a host, a scheme, a header's value (up to 100 KB).
_SHOWN = 200
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_BLOCKED_V4 = [ipaddress.ip_network(n) for n in ("0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4")]
#: IPv6 documentation space, whatever Python's ``ipaddress`` tables hold: 3fff::/20 (RFC 9637, 2024) is not in
#: Python 3.11's, which counted it global; 2001:db8::/32 (RFC 3849) is in every version's.
_BLOCKED_V6 = [ipaddress.ip_network(n) for n in ("2001:db8::/32", "3fff::/20")]


class _Response(TypedDict):
    url: str
    final_url: str
    status: int
    content_type: str
    bytes: int
    truncated: bool
    redirects: int


class FetchResult(_Response, total=False):
    """What ``fetch_url`` returns: the response's metadata and its content as ``json``, or ``title`` and ``text``."""

    json: Any
    title: str
    text: str | None
    note: str


_EXAMPLES: list[dict[str, Any]] = [
    {"description": "a web page, as its title and text", "arguments": {"url": "https://example.com/"}},
    {"arguments": {"url": "https://api.github.com/repos/python/cpython"}},
    {
        "description": "cloud metadata and other private addresses are refused",
        "arguments": {"url": "http://169.254.169.254/latest/meta-data/"},
        "error": "ToolArgumentError",
    },
    {"description": "only http and https", "arguments": {"url": "file:///etc/passwd"}, "error": "ToolArgumentError"},
]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (A and AAAA)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class FetchPolicy:
    """What ``fetch`` may do. ``allow`` opens hosts, addresses or networks that would be refused.

    ``timeout`` is the total for one fetch, redirects included; ``max_bytes`` bounds the
    decompressed body, ``max_chars`` the result as the model reads it, at least :attr:`min_chars`
    (a lower one is a ``ValueError`` naming it). Every number is checked when the policy is built, a ``ValueError``
    naming it: ``max_bytes`` an integer of at least 1, ``max_redirects`` of at least 0, ``max_chars`` an integer,
    ``timeout`` a finite number above 0 (a bool is none of them); so is ``allow``: a collection of non-empty strings,
    not one string (read a character at a time, ``"10.0.0.0/8"`` opened ``"0"``, this machine). A ``transport``
    (for tests) replaces the network, and with it the per-operation deadline: then the deadline is checked between
    body chunks only. A response it made with ``content=`` (which httpx reads and decodes when it is made, all but
    ``x-gzip``, decoded here) has that body cut at ``max_bytes``; one whose stream was already read or closed is a
    ``ToolError`` naming httpx's error.
    """

    allow: tuple[str, ...] = ()
    max_bytes: int = 1_000_000
    max_redirects: int = 5
    timeout: float = 10.0
    resolver: Resolver = system_resolver
    transport: httpx.BaseTransport | None = field(default=None, compare=False)
    max_chars: int = MAX_CHARS

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow", _allowed(self.allow))  # frozen; a list or generator is kept as a tuple
        # Checked here, not at each call: a timeout of -1 failed every fetch ("timed out after -1 s"), NaN at call time.
        _check_limit("max_bytes", self.max_bytes, 1, integer=True)
        _check_limit("max_redirects", self.max_redirects, 0, integer=True)
        _check_limit("timeout", self.timeout, 0, integer=False)
        if type(self.max_chars) is not int:  # its least, min_chars, is told below
            raise ValueError(f"max_chars must be an integer, not {_cut(repr(self.max_chars))}")
        if self.max_chars < (least := self.min_chars):
            raise ValueError(
                f"max_chars must be at least {least:,} (the least a result's metadata take, every URL and content "
                f"type echoed cut to {_GONE!r}, with no content), not {self.max_chars:,}"
            )

    @property
    def min_chars(self) -> int:
        """The fewest characters a result can be cut to: its metadata at their longest (the longest note, the status,
        ``bytes`` and ``redirects`` with all their digits), every URL and content type echoed cut to ``...``, no content.
        A note names ``max_chars``, so this grows with its digits too: 274 with the defaults, 268 for a ``max_chars`` of
        three digits (the least accepted with the default ``max_bytes`` and ``max_redirects``)."""
        return _least_chars(self.max_bytes, self.max_redirects, self.max_chars)

    @classmethod
    def from_env(cls, **overrides: Any) -> FetchPolicy:
        allow = tuple(x.strip() for x in os.environ.get(ALLOW_ENV, "").split(",") if x.strip())
        return cls(allow=allow, **overrides)

    def allows(self, host: str, ip: IPAddress) -> bool:
        """Whether ``allow`` opens ``host`` or its address ``ip``: a host in either spelling of an internationalised
        name, as written in Unicode (``bücher.example``) or in ASCII (``xn--bcher-kva.example``), whichever is given."""
        names = _spellings(host)
        for entry in self.allow:
            if entry.lower() in names:
                return True
            try:
                if ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        return False


def _allowed(allow: object) -> tuple[str, ...]:
    """``allow`` as a tuple, or a ``ValueError`` naming it unless it is a collection of non-empty strings."""
    if isinstance(allow, str | bytes):  # read a character at a time, "10.0.0.0/8" opened "0" (0.0.0.0, this machine)
        raise ValueError(
            f"allow must be a collection of hosts, addresses or networks, not a single {type(allow).__name__} "
            f"({_cut(repr(allow))}), which would be read a character at a time"
        )
    if not isinstance(allow, Iterable):
        raise ValueError(f"allow must be a collection of hosts, addresses or networks, not {_cut(repr(allow))}")
    entries = tuple(allow)
    for entry in entries:
        if not isinstance(entry, str) or not entry:
            raise ValueError(f"allow must hold non-empty strings (hosts, addresses or networks), not {_cut(repr(entry))}")
    return entries


def _check_limit(name: str, value: object, least: int, *, integer: bool) -> None:
    """A ``ValueError`` naming ``name`` unless ``value`` is an integer of at least ``least`` (``integer``) or else a finite
    number above ``least``; a bool is neither."""
    if integer:
        if type(value) is not int or value < least:
            raise ValueError(f"{name} must be an integer of at least {least}, not {_cut(repr(value))}")
    elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= least:
        raise ValueError(f"{name} must be a finite number above {least}, not {_cut(repr(value))}")


@functools.lru_cache(maxsize=64)  # a policy is built for each call of the default tool
def _least_chars(max_bytes: int, max_redirects: int, max_chars: int) -> int:
    """:attr:`FetchPolicy.min_chars` of a policy with these limits."""
    notes = [_json_cut(max_chars), *(_with_cut(note, max_chars) for note in (_NOT_JSON, _TOO_DEEP, _LONG_NUMBER, _binary(_GONE)))]
    least: FetchResult = {
        "url": _GONE,
        "final_url": _GONE,
        "status": 999,  # the widest status a result holds (fetch refuses any outside 100-999)
        "content_type": _GONE,
        "bytes": max_bytes,
        "truncated": True,
        "redirects": max_redirects,
        "title": "",
        "text": None,  # "null": longer than ""
        "note": max(notes, key=len),
    }
    return rendered_length(least)


def why_refused(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public destination, or None when it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            inner = why_refused(embedded)
            return f"it embeds the IPv4 address {embedded}, which {inner}" if inner else None
        if any(ip in net for net in _BLOCKED_V6):  # before Python's tables, so every version says the same
            return "is a documentation address"
    checks = [  # most specific first: Python counts several of these as private too
        ("is_unspecified", "is the unspecified address"),
        ("is_loopback", "is a loopback address"),
        ("is_link_local", "is a link-local address (such as cloud metadata at 169.254.169.254)"),
        ("is_multicast", "is a multicast address"),
        ("is_reserved", "is a reserved address"),
        ("is_site_local", "is a site-local address"),
        ("is_private", "is a private address"),
    ]
    for attr, reason in checks:
        if getattr(ip, attr, False):
            return reason
    if isinstance(ip, ipaddress.IPv4Address) and any(ip in net for net in _BLOCKED_V4):
        return "is in a special-purpose range"
    if not ip.is_global:
        return "is not a public address"
    return None


def _cut(text: str, limit: int = _SHOWN, *, masked: bool = False) -> str:
    """``text`` (``masked``: with secrets masked, by ``redact``), past ``limit`` characters cut, saying how long it was."""
    shown = redact(text) if masked else text
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text)} characters)"


def _surrogate_at(text: str) -> int | None:
    """The position of the first lone surrogate in ``text`` (which UTF-8 cannot encode), or None when it has none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _refuse(message: str, url: str, *, redirect: bool = False) -> ToolError:
    """The model's URL refused (an argument error on ``$.url``), or a redirect's target (the server's doing, not the model's)."""
    shown = repr(_cut(url, masked=True))
    if redirect:
        return ToolError(f"The server redirected to {shown}, which cannot be fetched: {message}. Try another URL.")
    return ToolArgumentError([ArgumentProblem("$.url", message, "url", "a public http(s) URL", shown)])


def _spellings(host: str) -> set[str]:
    """``host`` lowercased, in its ASCII (IDNA) form and as written in Unicode, as httpx writes them (the ASCII form
    where IDNA cannot decode it: ``xn--n3h.net``); only as given where httpx takes no such host."""
    try:
        url = httpx.URL(scheme="http", host=host)
    except httpx.InvalidURL:
        return {host.lower()}
    ascii_form = url.raw_host.decode("ascii")
    try:
        unicode_form = url.host
    except Exception:  # (idna's InvalidCodepoint and the like)
        unicode_form = ascii_form
    return {host.lower(), ascii_form.lower(), unicode_form.lower()}


_CREDENTIALS = "the URL has a user name or password before '@', and this tool neither sends nor echoes credentials"


def _pin(
    url: httpx.URL, policy: FetchPolicy, deadline: _Deadline, *, redirect: bool
) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """Resolve ``url``'s host once, check every address, and aim the request at the first (``redirect``: a hop's target)."""
    if url.scheme not in ("http", "https"):
        raise _refuse(
            f"only http and https URLs can be fetched, not {_cut(url.scheme) or 'a relative URL'!r}", str(url), redirect=redirect
        )
    if url.userinfo:  # httpx would send it as Basic auth, and the result echo it
        raise _refuse(_CREDENTIALS, str(url), redirect=redirect)
    host = url.raw_host.decode("ascii")  # what goes on the wire: an IDN host in its ASCII (IDNA) form, as httpx wrote it
    if not host:
        raise _refuse("the URL has no host", str(url), redirect=redirect)
    port = url.port if url.port is not None else 443 if url.scheme == "https" else 80
    if not 1 <= port <= 65535:  # past it, getaddrinfo wraps it (108831 reached 43295) or blames the network
        raise _refuse(f"the port must be 1-65535, not {_cut(str(port))}", str(url), redirect=redirect)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        if (problem := _unresolvable(host)) is not None:  # the resolver's IDNA codec failed on it, blamed on DNS
            raise _refuse(problem, str(url), redirect=redirect)
        try:
            addresses = [ipaddress.ip_address(a.split("%")[0]) for a in _resolve(policy, host, port, deadline)]
        except (OSError, ValueError) as exc:
            raise ToolError(f"Could not resolve {_cut(host)!r}: {exc}") from None
        if not addresses:
            raise ToolError(f"{_cut(host)!r} has no addresses.")
    for ip in addresses:
        reason = why_refused(ip)
        if reason and not policy.allows(host, ip):
            via = "" if literal is not None else f" ({_cut(host)} resolves to {ip})"
            raise _refuse(f"refused: {ip}{via} {reason}; only public addresses can be fetched", str(url), redirect=redirect)
    pinned = url.copy_with(host=str(addresses[0]))  # httpx adds the brackets of an IPv6 address
    default_port = port == (443 if url.scheme == "https" else 80)
    name = f"[{host}]" if literal is not None and literal.version == 6 else host
    headers = {
        "Host": name if default_port else f"{name}:{port}",
        "Accept": "text/html, application/json;q=0.9, text/*;q=0.8",
        "Accept-Encoding": "gzip, deflate",  # what _read can decompress within the byte limit
    }
    extensions = {"sni_hostname": host} if url.scheme == "https" and literal is None else {}
    return pinned, headers, extensions


def _unresolvable(host: str) -> str | None:
    """Why DNS cannot carry the name ``host`` (in its ASCII form), or None: an empty label, a label past 63 characters,
    a name past 253 (RFC 1035 2.3.4; one trailing dot, the root's, aside)."""
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if not all(labels):
        return "the host name has an empty label"
    if (longest := max(map(len, labels))) > 63:
        return f"the host name has a label of {longest} characters; a DNS label is 1-63"
    if len(name) > 253:
        return f"the host name is {len(name)} characters long; a DNS name is at most 253"
    return None


class _Deadline:
    """The end of one fetch: every network operation gets at most the time left."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def cap(self, timeout: float | None, error: type[Exception]) -> float:
        """``timeout`` shortened to the time left; ``error`` when none is left."""
        left = self.left()
        if left <= 0:
            raise error(f"the fetch deadline of {self.seconds:g} s passed")
        return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._deadline.cap(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._deadline.cap(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self._stream.start_tls(ssl_context, server_hostname, self._deadline.cap(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's socket backend, with every connect, read and write ending by the deadline."""

    def __init__(self, deadline: _Deadline) -> None:
        self._backend = httpcore.SyncBackend()
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        left = self._deadline.cap(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, left, local_address, socket_options), self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not fetched")

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(min(seconds, max(self._deadline.left(), 0)))


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=False)


class _Body(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        yield from self._response.iter_stream()

    def close(self) -> None:
        self._response.close()


class _DeadlineTransport(httpx.BaseTransport):
    """HTTP/1.1 through httpcore on :class:`_DeadlineBackend` (httpx's own transport cannot take a backend)."""

    def __init__(self, deadline: _Deadline) -> None:
        self._pool = httpcore.ConnectionPool(ssl_context=_ssl_context(), network_backend=_DeadlineBackend(deadline))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core = httpcore.Request(
            request.method,
            httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            extensions=request.extensions,
        )
        response = self._pool.handle_request(core)
        return httpx.Response(response.status, headers=response.headers, stream=_Body(response), extensions=response.extensions)

    def close(self) -> None:
        self._pool.close()


def _resolve(policy: FetchPolicy, host: str, port: int, deadline: _Deadline) -> list[str]:
    """``policy.resolver(host, port)``, given up on at the deadline (``getaddrinfo`` has no timeout of its own)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(policy.resolver(host, port))
        except Exception as exc:  # handed to the caller below
            outcome.append(exc)

    worker = threading.Thread(target=run, name=f"resolve {host}", daemon=True)
    worker.start()
    worker.join(max(deadline.left(), 0))
    if not outcome:  # the lookup goes on in its daemon thread; its answer is dropped
        raise ToolTimeout(deadline.seconds)
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    answer: list[str] = outcome[0]
    return answer


class _TextExtractor(HTMLParser):
    """The text a browser shows, and the page's title.

    The head is not skipped as such: what it may hold shows nothing (``meta``, ``link``, the skipped ``style``,
    ``script``, ``noscript``), and text or any other tag leaves it in a browser, ``</head>`` being optional (a page
    without it lost its whole body). The title is the first ``<title>`` outside ``<svg>`` and ``<math>`` (an SVG
    icon's ``<title>`` is a tooltip); another shows nothing.
    """

    _SKIP = frozenset({"script", "style", "noscript", "noframes", "template", "svg"})
    _FOREIGN = frozenset({"svg", "math"})
    _BLOCK = frozenset(
        {
            "p",
            "div",
            "br",
            "li",
            "ul",
            "ol",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "tr",
            "table",
            "section",
            "article",
            "pre",
            "blockquote",
            "title",
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._foreign = 0  # <svg> and <math> open
        self._in_title = False
        self._titled = False  # the title was read: another <title> shows nothing

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "title" and not self._foreign:
            self._in_title = True
        elif tag in self._SKIP:
            self._skip += 1
        if tag in self._FOREIGN:
            self._foreign += 1
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in_title:
            self._in_title, self._titled = False, True
        elif tag in self._SKIP and self._skip:
            self._skip -= 1
        if tag in self._FOREIGN and self._foreign:
            self._foreign -= 1
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            if not self._titled:
                self.title += data
        elif not self._skip:
            self.parts.append(data)


_PENDING = 16384  # unparsed characters at the end past which close() is not called
#: A decimal character reference of 8 digits or more (``&#0065;`` padded, or past U+10FFFF), which ``html.unescape``
#: reads with ``int()``: past 4,300 digits that raised ValueError (Python's limit on decimal text), losing the page.
#: Hex references are read in linear time, without the limit.
_LONG_DECIMAL_REF = re.compile(r"&#([0-9]{8,})")
_PAST_UNICODE = "1114112"  # 0x10FFFF + 1: unescape gives U+FFFD for any reference past U+10FFFF


def _short_decimal_ref(match: re.Match[str]) -> str:
    """The reference in at most 7 digits, of the same meaning to ``unescape``: leading zeros dropped, a number past
    U+10FFFF (any of 8 digits or more) as the least such; its ``;`` (or none) left as it was."""
    digits = match[1].lstrip("0") or "0"
    return f"&#{digits if len(digits) <= 7 else _PAST_UNICODE}"


def html_to_text(html: str) -> tuple[str, str]:
    """``(title, text)``: the visible text of an HTML page, whitespace collapsed, paragraphs kept.

    Linear in the page's size: the page is fed whole (fed in pieces, a tag left open across
    them was scanned again with each piece: a 1 MB page of ``<a b b b ...`` took 13 s), and
    markup left open at the end (a comment or tag that never closes, which a browser does not
    show either) is dropped rather than given to ``close()``, which would read it one character
    at a time (a 1 MB page of ``<!--`` took minutes). Text the parser holds back at the end (an
    ``&`` in its last 34 characters may start a character reference cut in two) has no markup,
    and is given to ``close()`` however long. Markup the parser cannot read ends the text there. A decimal character
    reference of any length (``&#`` and 5,000 digits) reads as the character it names, U+FFFD past U+10FFFF.
    """
    parser = _TextExtractor()
    try:
        parser.feed(_LONG_DECIMAL_REF.sub(_short_decimal_ref, html))
        if len(parser.rawdata) <= _PENDING or "<" not in parser.rawdata:  # no markup left: close() reads it in one go
            parser.close()
    except (AssertionError, ValueError):  # html.parser's refusal of some markup ("<![" + junk), or of a value: keep what was read
        pass
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = "\n".join(line for line in lines if line)
    return parser.title.strip(), text


def fetch(url: str, policy: FetchPolicy) -> FetchResult:
    """GET ``url`` under ``policy`` (see the module docstring)."""
    _check_string(url)
    # A lone surrogate, which no UTF-8 URL holds, told alike wherever it is: httpx refused it in the host or port with
    # its own message, and raised UnicodeEncodeError percent-encoding the path, query or fragment.
    if (at := _surrogate_at(url)) is not None:
        raise _refuse(f"not a valid URL: it holds a lone surrogate (U+{ord(url[at]):04X}) at position {at}", url)
    # Leading and trailing C0 controls and spaces dropped, as WHATWG URL parsing drops them: httpx read " http://..."
    # as a relative URL and sent a trailing space as %20.
    url = url.strip(_C0_OR_SPACE)
    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, UnicodeError) as exc:  # httpx's message may echo the URL whole: cut
        raise _refuse(f"not a valid URL: {_cut(str(exc), masked=True)}", url) from None
    deadline = _Deadline(policy.timeout)
    transport = policy.transport if policy.transport is not None else _DeadlineTransport(deadline)
    # No cookie jar that keeps anything: stored under the pinned address, a cookie one host set went to every other
    # host a redirect reached on that address (and a server could set one for another's name).
    cookies = http.cookiejar.CookieJar(_NoCookies())
    hooks = {"response": [_redirected]}
    with httpx.Client(transport=transport, follow_redirects=False, trust_env=False, cookies=cookies, event_hooks=hooks) as client:
        for hop in range(policy.max_redirects + 1):
            pinned, headers, extensions = _pin(current, policy, deadline, redirect=hop > 0)
            left = deadline.left()
            if left <= 0:
                raise ToolTimeout(policy.timeout)
            try:
                with client.stream(
                    "GET", pinned, headers=headers, extensions=extensions, timeout=httpx.Timeout(left)
                ) as response:
                    _check_status(response.status_code, current)
                    body, truncated = _read(response, policy.max_bytes, deadline)
                    return _result(url, current, response, body, truncated, hop, policy.max_chars)
            except _Redirect as redirect:
                current = _target(current, redirect.location)
            except (httpx.TimeoutException, httpcore.TimeoutException):
                raise ToolTimeout(policy.timeout) from None
            except (
                httpx.HTTPError,
                httpx.StreamError,  # a test transport's response already streamed or closed
                httpcore.NetworkError,
                httpcore.ProtocolError,
                httpcore.UnsupportedProtocol,
            ) as exc:
                shown = _cut(str(current), _URL_SHOWN, masked=True)  # the error's text may hold a header: 100 KB
                raise ToolError(f"Fetching {shown!r} failed: {type(exc).__name__}: {_cut(str(exc), masked=True)}") from None
    shown = _cut(url, _URL_SHOWN, masked=True)  # no password
    raise ToolError(f"Too many redirects (more than {policy.max_redirects}) starting at {shown!r}.")


#: What WHATWG's URL parser strips from both ends of a URL: U+0000-U+001F and the space.
_C0_OR_SPACE = "".join(map(chr, range(0x21)))


def _check_string(url: object) -> None:
    """A ``ToolArgumentError`` on ``$.url`` unless ``url`` is a string, also without the validation plugin (None was a
    ``TypeError`` from ``len()``)."""
    if not isinstance(url, str):
        raise ToolArgumentError([ArgumentProblem.mismatch("$.url", "string", url)])


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """A cookie policy that keeps no cookie, so none is sent: each fetch is a stranger to every server."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Request) -> bool:
        return False


class _Redirect(Exception):
    """A redirect's ``Location``, raised by :func:`_redirected` (httpx, parsing it first, failed on a malformed one
    with ``ValueError``, ``IDNAError`` or ``InvalidURL``)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


def _redirected(response: httpx.Response) -> None:
    """The response hook: a redirect's ``Location`` taken (as :class:`_Redirect`) before httpx parses it for a
    ``next_request`` that is never sent (the redirect is followed by hand, its target checked)."""
    if response.has_redirect_location:
        raise _Redirect(response.headers["location"])


def _target(current: httpx.URL, location: str) -> httpx.URL:
    """The URL ``location`` names, relative to ``current``; a ``ToolError`` (the server's doing) when it is no URL."""
    try:
        return httpx.URL(urljoin(str(current), location))
    except (ValueError, httpx.InvalidURL) as exc:  # urljoin's "Invalid IPv6 URL"; httpx's own
        raise _refuse(f"it is not a valid URL: {_cut(str(exc), masked=True)}", location, redirect=True) from None


def _check_status(status: object, url: httpx.URL) -> None:
    """Refuse a status that is not an integer in 100-999: HTTP's have three digits (h11 reads no other over the
    network), and :attr:`FetchPolicy.min_chars` leaves room for three; a ``transport`` may return any."""
    if type(status) is not int or not 100 <= status <= 999:
        shown = _cut(str(url), _URL_SHOWN, masked=True)
        raise ToolError(f"Fetching {shown!r} failed: the server answered with a status outside 100-999.")


class _Plain:
    """The body as sent (no ``Content-Encoding``), within ``room`` bytes: ``(input, room) -> (output, input left)``."""

    eof = False  # it ends where the body does
    cut = False  # all of it is decoded

    def __call__(self, data: bytes, room: int) -> tuple[bytes, bytes]:
        return data[:room], data[room:]


def _decoder(content_encoding: str) -> _Plain | _Inflate:
    """A decoder for the response's ``Content-Encoding`` that never outputs more than it has room for."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip().lower() not in ("", "identity")]
    if not codings:
        return _Plain()
    if len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate"):
        raise ToolError(f"The server sent content-encoding {_cut(content_encoding)!r}; only gzip and deflate are supported.")
    return _Inflate(codings[0])


_GZIP_MAGIC = b"\x1f\x8b"


class _Inflate:
    """gzip or deflate decoding (a zlib or gzip header detected, raw deflate as a fallback) within ``room`` bytes.

    gzip's members are decoded one after another (RFC 1952 2.2: ``cat a.gz b.gz`` is one gzip body), zero bytes
    between them skipped, as the ``gzip`` module does. Other bytes after the compressed data end it: ``eof``, so that
    they are not read on, and ``cut``, as is a body that ends within a stream (the content is not all there).
    """

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._members = coding in ("gzip", "x-gzip")
        self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)
        self._started = False  # the first stream's kind is told (deflate: zlib header or raw)
        self._held = b""  # input held until more tells what it is: deflate's first byte, a next member's first
        self._later = False  # a member after the first is being decoded
        self.eof = False  # set only where bytes were left undecoded: it is a cut too

    @property
    def cut(self) -> bool:
        """Once the body has ended: whether bytes it sent were not decoded, or its last stream did not end."""
        return self.eof or bool(self._held) or (self._started and not self._z.eof)

    def __call__(self, data: bytes, room: int) -> tuple[bytes, bytes]:
        data, self._held = self._held + data, b""
        out = bytearray()  # one chunk may hold many members
        while data and not self.eof and len(out) < room:
            if self._z.eof:  # a stream ended: what follows is another gzip member, or not read
                data = self._follow(data)
                continue
            if self.coding == "deflate" and not self._started and len(data) < 2:  # zlib reads a header (or none) from two
                self._held, data = data, b""
                break
            try:
                out += self._z.decompress(data, room - len(out))
            except zlib.error as exc:
                if self.coding == "deflate" and not self._started:  # some servers send deflate without its zlib header
                    self._z, self._started = zlib.decompressobj(-zlib.MAX_WBITS), True
                    continue
                if self._later:  # a later gzip member: what the earlier ones gave is kept, cut
                    self.eof = True
                    break
                raise ToolError(f"The response body is not valid {self.coding} data: {exc}") from None
            self._started = True
            data = self._z.unused_data if self._z.eof else self._z.unconsumed_tail
        return bytes(out), data

    def _follow(self, data: bytes) -> bytes:
        """After a stream's end, ``data`` with a next gzip member begun, or nothing: held until more tells, skipped
        padding, or bytes that are no member (``eof`` and ``cut``)."""
        if self._members:
            data = data.lstrip(b"\0")
            if data.startswith(_GZIP_MAGIC):
                self._z, self._later = zlib.decompressobj(zlib.MAX_WBITS | 16), True
                return data
            if not data or data == _GZIP_MAGIC[:1]:
                self._held = data
                return b""
        self.eof = True
        return b""


def _raw_limit(limit: int) -> int:
    """The bytes of a body read off the wire, as sent, for at most ``limit`` bytes decompressed: compressed data worth
    decoding takes fewer, with its headers; past it, what follows decodes to (next to) nothing (zero bytes between gzip
    members, empty members), which a server may send without end."""
    return 2 * limit + _RAW_SLACK


#: Raw bytes read past ``2 * max_bytes`` (:func:`_raw_limit`): room for gzip's and deflate's headers under a small cap.
_RAW_SLACK = 65_536


def _read(response: httpx.Response, limit: int, deadline: _Deadline) -> tuple[bytes, bool]:
    """The body, decompressed, at most ``limit`` bytes, and whether it was cut (past ``limit``, past
    :func:`_raw_limit` read, or not all decoded); memory stays near ``limit`` plus one network chunk. A body httpx
    read when the response was made (a test transport's ``Response(content=...)``), which httpx decoded but for
    ``x-gzip`` (decoded here), is cut at ``limit``."""
    decode = _decoder(response.headers.get("content-encoding", ""))
    chunks: Iterable[bytes]
    try:
        content = response.content  # read when made (a test transport's Response(content=...)), decoded by httpx
    except httpx.ResponseNotRead:  # a stream, as over the network (one streamed or closed already: the caller's ToolError)
        chunks = response.iter_raw()
    else:
        if not (isinstance(decode, _Inflate) and decode.coding == "x-gzip"):  # (the one coding httpx leaves)
            return content[:limit], len(content) > limit
        chunks = (content,)
    body = bytearray()
    room = _raw_limit(limit)  # raw bytes left to decode
    for chunk in chunks:
        data, over = chunk[:room], len(chunk) > room
        room -= len(data)
        while data:
            out, data = decode(data, limit + 1 - len(body))
            body += out
            if len(body) > limit:
                return bytes(body[:limit]), True
            if not out:
                break
        if over:  # read as much as the cap allows and more: the rest is not read
            return bytes(body), True
        if decode.eof:  # bytes after the compressed data: what follows is not read (a server may send it without end)
            break
        if deadline.left() <= 0:  # only reachable with an injected transport: the backend's reads end at the deadline
            raise ToolTimeout(deadline.seconds)
    return bytes(body), decode.cut


def _text(body: bytes, encoding: str | None) -> str:
    """``body`` decoded as its byte order mark says (the mark dropped), else with ``encoding`` (the response's charset, or
    what the body declares) when that names a text encoding, else UTF-8.

    Only the standard library's codecs, but ``punycode`` and ``idna`` (pure Python and quadratic:
    a 1 MB body named ``punycode`` took 5.5 minutes); not one another package registered.
    """
    for bom, name in _BOMS:  # a BOM outranks the header, as in a browser (WHATWG's "decode")
        if body.startswith(bom):
            return body[len(bom) :].decode(name, errors="replace")
    if encoding is not None:
        try:
            codec = codecs.lookup(encoding)
            module = getattr(codec.incrementaldecoder, "__module__", None) or ""
            if codec.name not in _SLOW_CODECS and module.startswith("encodings."):
                return body.decode(codec.name, errors="replace")
        except (LookupError, UnicodeError):  # rot13 is no text encoding; "undefined" cannot replace
            pass
    return body.decode("utf-8", errors="replace")


#: Byte order marks and their encodings, UTF-32's before UTF-16's (whose LE mark begins UTF-32's LE mark).
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
#: A ``<meta charset=...>`` or ``<meta http-equiv="Content-Type" content="...; charset=...">``: its name.
_META_CHARSET = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
#: The bytes of a page searched for it, as a browser's prescan searches (WHATWG).
_PRESCAN = 1024


def _meta_charset(body: bytes) -> str | None:
    """The charset an HTML page declares in a ``<meta>`` within its first 1024 bytes, or None: a UTF-16 or UTF-32 one
    read as UTF-8 (a page whose ``<meta>`` reads as ASCII is neither), a name no codec has as None (UTF-8 then)."""
    if (match := _META_CHARSET.search(body, 0, _PRESCAN)) is None:
        return None
    try:
        name = codecs.lookup(match[1].decode("ascii")).name
    except LookupError:
        return None
    return "utf-8" if name.startswith(("utf-16", "utf-32")) else name


#: Codecs of the standard library whose decoding is written in Python, in time that grows with the square of the text.
_SLOW_CODECS = frozenset({"punycode", "idna"})


def _result(
    url: str, final: httpx.URL, response: httpx.Response, body: bytes, truncated: bool, redirects: int, max_chars: int
) -> FetchResult:
    ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
    out: FetchResult = {
        "url": _cut(url, _URL_SHOWN),
        "final_url": _cut(str(final), _URL_SHOWN),
        "status": response.status_code,
        "content_type": _cut(ctype),
        "bytes": len(body),
        "truncated": truncated,
        "redirects": redirects,
    }
    is_json = ctype in ("application/json", "text/json") or ctype.endswith("+json")
    encoding = response.charset_encoding  # the header's; without it, what the body tells
    if encoding is None and is_json:
        encoding = json.detect_encoding(body)  # UTF-8, or UTF-16 or UTF-32 by its zero bytes (RFC 4627), as json.loads
    elif encoding is None and ctype == "text/html":  # (XHTML is XML: UTF-8, or its own declaration)
        encoding = _meta_charset(body)
    text = _text(body, encoding)
    if is_json:
        try:
            out["json"] = json.loads(text)
        except ValueError as exc:  # an integer past the int-to-text limit is a ValueError too, not a JSONDecodeError
            out["text"], out["note"] = text, _NOT_JSON
            if not truncated and not isinstance(exc, json.JSONDecodeError):  # (it is met before a later syntax error)
                with contextlib.suppress(ValueError, RecursionError):
                    json.loads(text, parse_int=str)
                    out["note"] = _LONG_NUMBER
        except RecursionError:
            out["text"], out["note"] = text, _TOO_DEEP
    elif ctype in _HTML_TYPES:
        out["title"], out["text"] = html_to_text(text)
    elif ctype.startswith("text/") or ctype.endswith("+xml") or ctype in _TEXT_TYPES:
        out["text"] = text
    else:
        out["text"] = None
        out["note"] = _binary(out["content_type"])
    # Surely within: JSON writes a character of the text (whence title and content come) or of
    # the metadata in at most 6 (a control character as \u0001; a number such as 1e15 in at most 4.5).
    if 6 * (len(text) + len(out["url"]) + len(out["final_url"]) + 2 * len(out["content_type"])) + 1_000 > max_chars:
        _fit(out, text, {"url": url, "final_url": str(final), "content_type": ctype}, max_chars)
    return out


_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: Types of text outside ``text/`` (besides ``+xml`` and ``+json`` ones: RSS, Atom, SVG, JSON-LD); ``""`` is none sent.
_TEXT_TYPES = frozenset(
    {
        "",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/yaml",
        "application/x-yaml",
        "application/x-ndjson",
        "application/ndjson",
        "application/csv",
    }
)
_NOT_JSON = "not valid JSON (or cut at the byte limit); shown as text"
_TOO_DEEP = "the JSON is nested too deeply to parse; shown as text"
_LONG_NUMBER = "a JSON integer too long to read; shown as text"
#: An echo cut to nothing (``max_chars`` near :attr:`FetchPolicy.min_chars`).
_GONE = "..."
#: The echoes cut past their own cut when the metadata alone are longer than ``max_chars``: the model's URL first (it
#: knows it), then the URL redirected to, then the content type.
_ECHOES = ("url", "final_url", "content_type")


def _binary(content_type: str) -> str:
    return f"binary content ({content_type}) is not shown"


def _with_cut(note: str | None, limit: int) -> str:
    """``note``, and that the result was cut at ``limit`` characters."""
    cut = f"cut at the {limit:,} characters this tool may return"
    return f"{note}; {cut}" if note else cut


def _json_cut(limit: int) -> str:
    return f"the JSON is longer than the {limit:,} characters this tool may return; shown as text, cut"


def _fit(out: FetchResult, text: str, echoed: dict[str, str], limit: int) -> None:
    """Cut ``out`` so that it reads as at most ``limit`` characters (at least :attr:`FetchPolicy.min_chars`): its content
    (the text, then the title), and when its metadata alone are longer, the URLs and content type it echoes
    (``echoed``: whole).

    JSON cannot be cut into JSON: past the limit it is shown as text (``text``, the body), cut.
    The result is written once to measure it; past the limit, its metadata once more (and once per echo cut).
    """
    if rendered_length(out) <= limit:
        return
    if "json" in out:
        del out["json"]
        out["text"] = text
        out["note"] = _json_cut(limit)
    else:
        out["note"] = _with_cut(out.get("note"), limit)
    out["truncated"] = True
    content, title = out.get("text"), out.get("title")
    room = _squeeze(out, echoed, limit)
    title_chars = 0 if title is None else rendered_length([title]) - 4  # escaped; its quotes are in the rest
    if content is not None:
        out["text"] = _shorten(content, room - title_chars)
    if title is not None and title_chars > room:
        out["title"] = _shorten(title, room)


def _squeeze(out: FetchResult, echoed: dict[str, str], limit: int) -> int:
    """The characters left for the content of ``out`` (the text and title, written empty) within ``limit``; when none
    are, its echoes (:data:`_ECHOES`, in order) cut further until the rest fits."""
    empty = {key: "" for key in ("text", "title") if out.get(key) is not None}
    room = limit - rendered_length({**out, **empty})
    shown = cast("dict[str, Any]", out)  # the echoes by name
    binary = out.get("text") is None  # the note names the content type too
    for key in _ECHOES:
        if room >= 0:
            break
        copies = 2 if binary and key == "content_type" else 1
        shown[key] = _echo(echoed[key], rendered_length([shown[key]]) - 4 + room // copies)  # its JSON, less the excess
        if binary:
            out["note"] = _with_cut(_binary(out["content_type"]), limit)
        room = limit - rendered_length({**out, **empty})
    return room


def _echo(text: str, room: int) -> str:
    """The start of ``text`` that JSON writes in at most ``room`` characters (its quotes aside), saying how long
    ``text`` was, or where that does not fit, with ``...``; ``...`` alone at the least."""
    told = f"... ({len(text)} characters)"
    if room < len(told):
        told = _GONE
    return _shorten(text, room - len(told)) + told


def _shorten(text: str, room: int) -> str:
    """The longest start of ``text`` that JSON writes in at most ``room`` characters (its quotes aside)."""
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    if len(escaped) <= room:
        return text
    escaped = escaped[: max(room, 0)]
    for end in range(len(escaped), max(len(escaped) - 6, -1), -1):  # an escape cut in two (``\u00``, ``\``) is dropped
        try:
            return str(json.loads(f'"{escaped[:end]}"'))
        except ValueError:
            continue
    return ""


def make_fetch_url(policy: FetchPolicy | None = None, *, name: str = "fetch_url", allow: Iterable[str] | None = None) -> Tool:
    """A ``fetch_url`` tool with its own policy (default: :meth:`FetchPolicy.from_env` at call time); ``allow``, checked
    here as the policy checks it (a ``ValueError`` naming it), replaces the policy's."""
    opened = None if allow is None else _allowed(allow)

    def fetch_url(url: str) -> FetchResult:
        """Fetch a web page or JSON document over HTTP(S) and return its readable content.

        Args:
            url: An http:// or https:// URL on the public internet.
        """
        chosen = policy if policy is not None else FetchPolicy.from_env()
        if opened is not None:
            chosen = dataclasses.replace(chosen, allow=opened)
        return fetch(url, chosen)

    return defineTool(
        registry=None,
        name=name,
        read_only=True,
        idempotent=True,
        open_world=True,
        rate_limit={"rate": 2, "burst": 5},
        timeout=30,
        timeout_mode="none",
        tags=["web"],
        examples=_EXAMPLES,
    )(fetch_url).tool


fetch_url = make_fetch_url()
