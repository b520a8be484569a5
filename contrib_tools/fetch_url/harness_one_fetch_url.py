"""``fetch_url``: HTTP(S) GET that is safe by default.

- Only ``http`` and ``https``.
- The host is resolved once; every address it resolves to must be public (not loopback,
  private, link-local such as 169.254.169.254, multicast, reserved, unspecified, shared or
  documentation space), for IPv4, IPv6 and IPv4 embedded in IPv6 (mapped, 6to4, Teredo,
  NAT64). The request then goes to that address (the ``Host`` header and TLS SNI carry the
  name), so a second DNS answer cannot switch it to another host (DNS rebinding).
- Redirects are followed by hand, each hop checked the same way, at most ``max_redirects``.
- Time and response size are capped; the result says when it was truncated.
- HTML becomes readable text; JSON stays JSON.

``HARNESS_ONE_FETCH_ALLOW`` (comma-separated hosts, addresses or CIDR networks) opens chosen
private destinations on purpose; :func:`make_fetch_url` builds a tool with its own policy.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import httpx

from harness_one import ArgumentProblem, Tool, ToolArgumentError, ToolError, ToolTimeout, defineTool

__all__ = ["ALLOW_ENV", "FetchPolicy", "fetch", "fetch_url", "html_to_text", "make_fetch_url"]

ALLOW_ENV = "HARNESS_ONE_FETCH_ALLOW"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_BLOCKED_V4 = [ipaddress.ip_network(n) for n in ("0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4")]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (A and AAAA)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class FetchPolicy:
    """What ``fetch`` may do. ``allow`` opens hosts, addresses or networks that would be refused."""

    allow: tuple[str, ...] = ()
    max_bytes: int = 1_000_000
    max_redirects: int = 5
    timeout: float = 10.0
    resolver: Resolver = system_resolver
    transport: httpx.BaseTransport | None = field(default=None, compare=False)

    @classmethod
    def from_env(cls, **overrides: Any) -> FetchPolicy:
        allow = tuple(x.strip() for x in os.environ.get(ALLOW_ENV, "").split(",") if x.strip())
        return cls(allow=allow, **overrides)

    def allows(self, host: str, ip: IPAddress) -> bool:
        for entry in self.allow:
            if entry.lower() == host.lower():
                return True
            try:
                if ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        return False


def why_refused(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public destination, or None when it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            inner = why_refused(embedded)
            return f"it embeds the IPv4 address {embedded}, which {inner}" if inner else None
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


def _refuse(message: str, url: str) -> ToolArgumentError:
    return ToolArgumentError([ArgumentProblem("$.url", message, "url", "a public http(s) URL", repr(url[:200]))])


def _pin(url: httpx.URL, policy: FetchPolicy) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """Resolve ``url``'s host once, check every address, and aim the request at the first."""
    if url.scheme not in ("http", "https"):
        raise _refuse(f"only http and https URLs can be fetched, not {url.scheme or 'a relative URL'!r}", str(url))
    host = url.host
    if not host:
        raise _refuse("the URL has no host", str(url))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = [ipaddress.ip_address(a.split("%")[0]) for a in policy.resolver(host, port)]
        except (OSError, ValueError) as exc:
            raise ToolError(f"Could not resolve {host!r}: {exc}") from None
        if not addresses:
            raise ToolError(f"{host!r} has no addresses.")
    for ip in addresses:
        reason = why_refused(ip)
        if reason and not policy.allows(host, ip):
            via = "" if literal is not None else f" ({host} resolves to {ip})"
            raise _refuse(f"refused: {ip}{via} {reason}; only public addresses can be fetched", str(url))
    target = addresses[0]
    netloc_host = f"[{target}]" if target.version == 6 else str(target)
    pinned = url.copy_with(host=netloc_host.strip("[]"))
    default_port = port == (443 if url.scheme == "https" else 80)
    headers = {"Host": host if default_port else f"{host}:{port}", "Accept": "text/html, application/json;q=0.9, text/*;q=0.8"}
    extensions = {"sni_hostname": host} if url.scheme == "https" and literal is None else {}
    return pinned, headers, extensions


class _TextExtractor(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
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
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self._SKIP:
            self._skip += 1
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._SKIP and self._skip:
            self._skip -= 1
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """``(title, text)``: the visible text of an HTML page, whitespace collapsed, paragraphs kept."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = "\n".join(line for line in lines if line)
    return parser.title.strip(), text


def fetch(url: str, policy: FetchPolicy) -> dict[str, Any]:
    """GET ``url`` under ``policy`` (see the module docstring)."""
    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise _refuse(f"not a valid URL: {exc}", url) from None
    deadline = time.monotonic() + policy.timeout
    with httpx.Client(transport=policy.transport, follow_redirects=False, trust_env=False) as client:
        for hop in range(policy.max_redirects + 1):
            pinned, headers, extensions = _pin(current, policy)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ToolTimeout(policy.timeout)
            try:
                with client.stream(
                    "GET", pinned, headers=headers, extensions=extensions, timeout=httpx.Timeout(left)
                ) as response:
                    if response.is_redirect and "location" in response.headers:
                        current = httpx.URL(urljoin(str(current), response.headers["location"]))
                        continue
                    body, truncated = _read(response, policy.max_bytes, deadline)
                    return _result(url, current, response, body, truncated, hop)
            except httpx.TimeoutException:
                raise ToolTimeout(policy.timeout) from None
            except httpx.HTTPError as exc:
                raise ToolError(f"Fetching {str(current)!r} failed: {type(exc).__name__}: {exc}") from None
    raise ToolError(f"Too many redirects (more than {policy.max_redirects}) starting at {url!r}.")


def _read(response: httpx.Response, limit: int, deadline: float) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
        if time.monotonic() > deadline:
            raise ToolTimeout(round(deadline, 3))
    return b"".join(chunks), False


def _result(url: str, final: httpx.URL, response: httpx.Response, body: bytes, truncated: bool, redirects: int) -> dict[str, Any]:
    ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
    out: dict[str, Any] = {
        "url": url,
        "final_url": str(final),
        "status": response.status_code,
        "content_type": ctype,
        "bytes": len(body),
        "truncated": truncated,
        "redirects": redirects,
    }
    text = body.decode(response.encoding or "utf-8", errors="replace")
    if ctype in ("application/json", "text/json") or ctype.endswith("+json"):
        try:
            out["json"] = json.loads(text)
            return out
        except ValueError:
            pass  # truncated or invalid JSON: show it as text
    if ctype in ("text/html", "application/xhtml+xml"):
        out["title"], out["text"] = html_to_text(text)
    elif ctype.startswith("text/") or ctype in ("application/xml", "application/javascript", ""):
        out["text"] = text
    else:
        out["text"] = None
        out["note"] = f"binary content ({ctype}) is not shown"
    return out


def make_fetch_url(policy: FetchPolicy | None = None, *, name: str = "fetch_url", allow: Iterable[str] | None = None) -> Tool:
    """A ``fetch_url`` tool with its own policy (default: :meth:`FetchPolicy.from_env` at call time)."""

    def fetch_url(url: str) -> dict[str, Any]:
        """Fetch a web page or JSON document over HTTP(S) and return its readable content.

        Args:
            url: An http:// or https:// URL on the public internet.
        """
        chosen = policy if policy is not None else FetchPolicy.from_env()
        if allow is not None:
            chosen = FetchPolicy(
                tuple(allow), chosen.max_bytes, chosen.max_redirects, chosen.timeout, chosen.resolver, chosen.transport
            )
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
    )(fetch_url).tool


fetch_url = make_fetch_url()
