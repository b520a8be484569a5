from __future__ import annotations

import ipaddress
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import harness_one_fetch_url as mod
import httpx
import pytest

from harness_one import ToolArgumentError, ToolError, ToolRegistry

#: Every request the test server got: its path and its ``Authorization`` header.
SEEN: list[tuple[str, str | None]] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, ctype: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        SEEN.append((self.path, self.headers.get("Authorization")))
        if self.path == "/html":
            page = "<html><head><title>Hello</title><style>p{}</style></head><body><h1>Title</h1><p>First  para.</p><script>evil()</script><p>Second &amp; last</p></body></html>"
            self._send(200, "text/html; charset=utf-8", page.encode())
        elif self.path == "/json":
            self._send(200, "application/json", json.dumps({"ok": True, "host": self.headers["Host"]}).encode())
        elif self.path == "/big":
            self._send(200, "text/plain", b"x" * 200_000)
        elif self.path == "/to-json":
            self._send(302, "text/plain", b"", {"Location": "/json"})
        elif self.path == "/to-private":
            self._send(302, "text/plain", b"", {"Location": "http://10.0.0.1/admin"})
        elif self.path == "/to-metadata":
            self._send(301, "text/plain", b"", {"Location": "http://169.254.169.254/latest/meta-data/"})
        elif self.path == "/to-credentials":
            self._send(302, "text/plain", b"", {"Location": f"http://bob:hunter2@{self.headers['Host']}/credentials-target"})
        elif self.path == "/loop":
            self._send(302, "text/plain", b"", {"Location": "/loop"})
        elif self.path == "/image":
            self._send(200, "image/png", b"\x89PNG....")
        else:
            self._send(404, "text/plain", b"nope")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def test_an_ipv6_literal_keeps_its_brackets_in_the_host_header() -> None:
    try:
        httpd = IPv6Server(("::1", 0), Handler)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        port = httpd.server_address[1]
        out = registry_with(allow=("::1",)).call("fetch_url", {"url": f"http://[::1]:{port}/json"})
        assert out["json"]["host"] == f"[::1]:{port}" and out["final_url"] == f"http://[::1]:{port}/json"
    finally:
        httpd.shutdown()
        httpd.server_close()


def registry_with(**policy: Any) -> ToolRegistry:
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_fetch_url(mod.FetchPolicy(**policy)))
    return reg


OPEN = {"allow": ("127.0.0.1",)}


def test_html_becomes_text_and_json_stays_json(server: str) -> None:
    reg = registry_with(**OPEN)
    page = reg.call("fetch_url", {"url": f"{server}/html"})
    assert page["title"] == "Hello" and page["text"] == "Title\nFirst para.\nSecond & last" and page["status"] == 200
    doc = reg.call("fetch_url", {"url": f"{server}/json"})
    assert doc["json"]["ok"] is True and doc["json"]["host"] == server.removeprefix("http://")
    image = reg.call("fetch_url", {"url": f"{server}/image"})
    assert image["text"] is None and "binary" in image["note"]


def test_redirects_followed_and_checked(server: str) -> None:
    reg = registry_with(**OPEN)
    hop = reg.call("fetch_url", {"url": f"{server}/to-json"})
    assert hop["redirects"] == 1 and hop["final_url"].endswith("/json") and hop["json"]["ok"]
    for path, address in (("/to-private", "10.0.0.1"), ("/to-metadata", "169.254.169.254")):
        with pytest.raises(ToolError) as err:
            reg.call("fetch_url", {"url": f"{server}{path}"})
        assert type(err.value) is ToolError  # the server's doing: the model's $.url was fine
        assert f"The server redirected to 'http://{address}/" in str(err.value) and f"refused: {address}" in str(err.value)
    with pytest.raises(ToolError, match="Too many redirects"):
        reg.call("fetch_url", {"url": f"{server}/loop"})


CREDENTIALS = "the URL has a user name or password before '@', and this tool neither sends nor echoes credentials"


@pytest.mark.parametrize(
    ("userinfo", "secret"),
    [
        ("alice:s3cret@", "s3cret"),
        ("ghp_t0ken@", "ghp_t0ken"),  # a token as the user name
        (":s3cret@", "s3cret"),
        ("alice:correct horse@", "correct horse"),  # httpx takes a password with a space
    ],
)
def test_a_url_with_credentials_is_refused_before_anything_is_sent(server: str, userinfo: str, secret: str) -> None:
    """httpx sent them as Basic auth, and the result echoed them back (``url``, ``final_url``)."""
    requests = len(SEEN)
    with pytest.raises(ToolArgumentError) as err:
        registry_with(**OPEN).call("fetch_url", {"url": server.replace("://", f"://{userinfo}") + "/json"})
    problem = err.value.problems[0]
    assert problem.path == "$.url" and problem.message == CREDENTIALS and "[REDACTED]@127.0.0.1" in (problem.got or "")
    assert secret not in json.dumps(err.value.to_dict())
    assert SEEN[requests:] == []  # no request at all


def test_a_redirect_to_a_url_with_credentials_is_refused(server: str) -> None:
    """The server's doing (a ``ToolError``, not the model's argument error); they were sent on, and echoed in ``final_url``."""
    with pytest.raises(ToolError) as err:
        registry_with(**OPEN).call("fetch_url", {"url": f"{server}/to-credentials"})
    assert type(err.value) is ToolError and "hunter2" not in json.dumps(err.value.to_dict())
    assert err.value.message == (
        f"The server redirected to 'http://[REDACTED]@{server.removeprefix('http://')}/credentials-target', which cannot "
        f"be fetched: {CREDENTIALS}. Try another URL."
    )
    assert ("/to-credentials", None) in SEEN and all(path != "/credentials-target" for path, _ in SEEN)


def test_truncation(server: str) -> None:
    reg = registry_with(max_bytes=1000, **OPEN)
    out = reg.call("fetch_url", {"url": f"{server}/big"})
    assert out["truncated"] is True and out["bytes"] == 1000 and out["text"] == "x" * 1000


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[::ffff:127.0.0.1]/", "embeds the IPv4 address 127.0.0.1"),
        ("http://[::ffff:a9fe:a9fe]/", "embeds the IPv4 address 169.254.169.254"),
        ("http://[fe80::1]/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://100.64.0.1/", "special-purpose"),
        ("http://localhost/", "localhost resolves to"),
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.org/", "only http and https"),
    ],
)
def test_refused_by_default(url: str, reason: str) -> None:
    reg = registry_with()
    with pytest.raises(ToolArgumentError) as err:
        reg.call("fetch_url", {"url": url})
    assert reason in str(err.value), str(err.value)
    assert err.value.problems[0].path == "$.url"


def test_dns_name_resolving_to_private_is_refused() -> None:
    reg = registry_with(resolver=lambda host, port: ["93.184.215.14", "192.168.1.10"])  # one bad answer is enough
    with pytest.raises(ToolArgumentError, match=r"resolves to 192\.168\.1\.10"):
        reg.call("fetch_url", {"url": "http://mixed.example/"})


def test_resolved_once_and_pinned(server: str) -> None:
    port = int(server.rsplit(":", 1)[1])
    answers = iter(["127.0.0.1", "10.0.0.1"])  # a rebinding DNS server: a second lookup would say 10.0.0.1
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return [next(answers)]

    reg = registry_with(allow=("127.0.0.1",), resolver=rebinding)
    out = reg.call("fetch_url", {"url": f"http://rebind.test:{port}/json"})
    assert calls == ["rebind.test"]  # one lookup per hop, and the connection used its answer
    assert out["json"]["host"] == f"rebind.test:{port}"  # the Host header carries the name


IDN = "xn--bcher-kva.example"  # bücher.example in its ASCII (IDNA) form


def plain(body: bytes) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/plain"}, stream=httpx.ByteStream(body))


@pytest.mark.parametrize(
    ("url", "host"),
    [("https://bücher.example/", IDN), (f"https://{IDN}/", IDN), ("https://BÜCHER.example:8443/", f"{IDN}:8443")],
)
def test_an_idn_host_goes_to_the_resolver_and_on_the_wire_in_ascii(url: str, host: str) -> None:
    """The Unicode name (httpx's ``url.host``, for either spelling) went into the Host header: UnicodeEncodeError."""
    asked: list[str] = []
    sent: list[httpx.Request] = []

    def resolver(name: str, port: int) -> list[str]:
        asked.append(name)
        return ["93.184.215.14"]

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return plain(b"ok")

    out = mod.fetch(url, mod.FetchPolicy(resolver=resolver, transport=httpx.MockTransport(handler)))
    assert out["text"] == "ok" and asked == [IDN]
    assert sent[0].url.host == "93.184.215.14" and sent[0].headers["Host"] == host
    assert sent[0].extensions["sni_hostname"] == IDN


@pytest.mark.parametrize("allow", [(), ("bücher.example",), (IDN,)])
def test_an_idn_host_is_checked_by_its_addresses_and_allowed_in_either_spelling(allow: tuple[str, ...]) -> None:
    inside = httpx.MockTransport(lambda request: plain(b"inside"))
    policy = mod.FetchPolicy(allow=allow, resolver=lambda name, port: ["10.0.0.1"], transport=inside)
    if not allow:
        with pytest.raises(ToolArgumentError, match=r"refused: 10\.0\.0\.1 \(xn--bcher-kva\.example resolves to 10\.0\.0\.1\)"):
            mod.fetch("http://bücher.example/", policy)
    else:
        assert mod.fetch("http://bücher.example/", policy)["text"] == "inside"


@pytest.mark.parametrize(
    ("allow", "host"),
    [
        (("bücher.example",), IDN),
        ((IDN,), "bücher.example"),
        (("BÜCHER.example",), IDN.upper()),
        ((IDN.upper(),), "Bücher.Example"),
        (("bücher.example",), "bücher.example"),
        (("xn--n3h.net",), "xn--n3h.net"),  # a name IDNA cannot decode: compared as given
    ],
)
def test_allows_takes_either_spelling_of_an_idn_host(allow: tuple[str, ...], host: str) -> None:
    """The tool asked ``allows`` with each spelling; ``allows`` itself took only the one given."""
    inside = ipaddress.ip_address("10.0.0.1")
    assert mod.FetchPolicy(allow=allow).allows(host, inside)
    assert not mod.FetchPolicy(allow=("other.example",)).allows(host, inside)


def test_a_punycode_host_idna_cannot_decode_is_refused_by_its_address_not_failed() -> None:
    """``xn--n3h.net`` (a symbol IDNA 2008 does not allow): checked by its addresses like any host, a
    private one refused as such (it failed as an internal InvalidCodepoint), a public one fetched."""
    inside = httpx.MockTransport(lambda request: plain(b"inside"))
    private = mod.FetchPolicy(resolver=lambda name, port: ["10.0.0.1"], transport=inside)
    with pytest.raises(ToolArgumentError, match=r"refused: 10\.0\.0\.1 \(xn--n3h\.net resolves to 10\.0\.0\.1\)"):
        mod.fetch("http://xn--n3h.net/", private)
    public = mod.FetchPolicy(resolver=lambda name, port: ["93.184.215.14"], transport=inside)
    assert mod.fetch("http://xn--n3h.net/", public)["text"] == "inside"


def test_allow_list_by_network_and_env(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert registry_with(allow=("127.0.0.0/8",)).call("fetch_url", {"url": f"{server}/json"})["status"] == 200
    reg = ToolRegistry(autoload=False)
    reg.add(mod.fetch_url)
    assert not reg.try_call("fetch_url", {"url": f"{server}/json"}).ok
    monkeypatch.setenv(mod.ALLOW_ENV, "127.0.0.1")
    assert reg.call("fetch_url", {"url": f"{server}/json"})["status"] == 200


def test_metadata() -> None:
    tool = mod.fetch_url
    assert tool.read_only and tool.idempotent and tool.open_world and tool.rate_limit is not None
