"""The fetch deadline and the decompressed-size cap, against real sockets on the loopback interface."""

from __future__ import annotations

import gzip
import socket
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import harness_one_fetch_url as mod
import httpx
import pytest

from harness_one import CallResult, ToolArgumentError, ToolError, ToolRegistry, ToolTimeout

Reply = Callable[[socket.socket, threading.Event], None]
LOOPBACK = ("127.0.0.1",)  # the test server's address, opened on purpose (refused by default)


class RawServer:
    """A TCP server on 127.0.0.1 that answers every connection with ``reply`` (after reading the request)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                self.reply(conn, self.stop)
            except OSError:  # the client gave up: that is what the deadline tests want
                pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Reply], str]]:
    servers: list[RawServer] = []

    def start(reply: Reply) -> str:
        servers.append(RawServer(reply))
        return servers[-1].url

    yield start
    for server in servers:
        server.close()


def trickle(head: bytes, rest: bytes, interval: float = 0.05, limit: float = 5.0) -> Reply:
    """Send ``head`` at once, then ``rest`` one byte per ``interval`` s, for at most ``limit`` s."""

    def reply(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head)
        end = time.monotonic() + limit
        for byte in rest:
            if stop.wait(interval) or time.monotonic() > end:
                return
            conn.sendall(bytes([byte]))

    return reply


HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"


@pytest.mark.parametrize(
    ("head", "rest"),
    [
        (b"", HEADERS),  # the status line and headers, a byte at a time (the per-read timeout restarted on each)
        (HEADERS, b"x" * 100_000),  # the headers at once, then the body a byte at a time
    ],
    ids=["headers", "body"],
)
def test_one_deadline_over_headers_and_body(serve: Callable[[Reply], str], head: bytes, rest: bytes) -> None:
    url = serve(trickle(head, rest))
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_fetch_url(mod.FetchPolicy(allow=LOOPBACK, timeout=0.5)))
    start = time.monotonic()
    with pytest.raises(ToolTimeout, match=r"timed out after 0\.5 s\.") as err:
        reg.call("fetch_url", {"url": url})
    took = time.monotonic() - start
    assert err.value.timeout == 0.5
    assert 0.45 <= took < 2.0, f"the deadline was 0.5 s, the fetch took {took:.3f} s"  # a trickle never ended before


def test_the_deadline_covers_the_dns_lookup() -> None:
    answered = threading.Event()

    def hanging(host: str, port: int) -> list[str]:  # a resolver that never answers in time
        answered.wait(5)
        return ["93.184.215.14"]

    start = time.monotonic()
    with pytest.raises(ToolTimeout, match=r"timed out after 0\.25 s\."):
        mod.fetch("http://slow-dns.test/", mod.FetchPolicy(timeout=0.25, resolver=hanging))
    answered.set()
    assert time.monotonic() - start < 0.6


def deflate_bomb(wbits: int, size: int = 32 << 20) -> bytes:
    """``size`` zero bytes compressed (about 1000:1) in the container ``wbits`` selects."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(1 << 20)
    return b"".join(packer.compress(block) for _ in range(size >> 20)) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "wbits"),
    [("gzip", 31), ("deflate", 15), ("deflate", -15)],  # gzip; deflate in its zlib wrapper; raw deflate (sent by some servers)
    ids=["gzip", "deflate-zlib", "deflate-raw"],
)
def test_a_compression_bomb_stops_at_the_byte_cap(serve: Callable[[Reply], str], encoding: str, wbits: int) -> None:
    body = deflate_bomb(wbits)  # about 32 KB on the wire, 32 MiB inflated
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: {encoding}\r\nContent-Length: {len(body)}\r\n\r\n"

    def reply(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head.encode() + body)

    url = serve(reply)
    policy = mod.FetchPolicy(allow=LOOPBACK, max_bytes=100_000)
    tracemalloc.start()
    try:
        out = mod.fetch(url, policy)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out["truncated"] is True and out["bytes"] == 100_000 and out["text"] == "\0" * 100_000
    assert peak < 3_000_000, f"peak {peak / 1e6:.1f} MB for a 0.1 MB cap"  # inflating one 32 KB chunk at once takes 32 MB


def test_a_body_that_is_not_what_it_claims_is_a_readable_error(serve: Callable[[Reply], str]) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: 9\r\n\r\n"
    url = serve(lambda conn, stop: conn.sendall(head + b"not gzip!"))
    with pytest.raises(ToolError, match="not valid gzip data"):
        mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK))
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\n"
    url = serve(lambda conn, stop: conn.sendall(head + b"x"))
    with pytest.raises(ToolError, match="only gzip and deflate are supported"):
        mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK))


def test_a_redirect_to_a_name_with_a_private_address_is_refused(serve: Callable[[Reply], str]) -> None:
    url = serve(
        lambda conn, stop: conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://inside.test/\r\nContent-Length: 0\r\n\r\n")
    )
    names = {"inside.test": ["10.1.2.3"]}
    policy = mod.FetchPolicy(allow=LOOPBACK, resolver=lambda host, port: names[host])
    with pytest.raises(ToolError, match=r"refused: 10\.1\.2\.3 \(inside\.test resolves to 10\.1\.2\.3\) is a private") as err:
        mod.fetch(url, policy)
    assert type(err.value) is ToolError  # the server's redirect, not the model's URL
    assert err.value.message.startswith("The server redirected to 'http://inside.test/', which cannot be fetched")


def test_a_redirect_to_a_scheme_not_fetched_is_the_servers_doing(serve: Callable[[Reply], str]) -> None:
    url = serve(
        lambda conn, stop: conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: ftp://example.org/x\r\nContent-Length: 0\r\n\r\n")
    )
    with pytest.raises(ToolError) as err:
        mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK))
    assert type(err.value) is ToolError and err.value.message == (
        "The server redirected to 'ftp://example.org/x', which cannot be fetched: "
        "only http and https URLs can be fetched, not 'ftp'. Try another URL."
    )


def test_loopback_is_refused_without_the_opt_in(serve: Callable[[Reply], str]) -> None:
    url = serve(lambda conn, stop: conn.sendall(HEADERS))
    with pytest.raises(ToolArgumentError, match=r"refused: 127\.0\.0\.1 is a loopback address"):
        mod.fetch(url, mod.FetchPolicy())
    with pytest.raises(ToolArgumentError, match=r"localhost resolves to 127\.0\.0\.1"):
        mod.fetch(url.replace("127.0.0.1", "localhost"), mod.FetchPolicy(resolver=lambda host, port: ["127.0.0.1"]))


def _page(ctype: bytes, body: bytes) -> Reply:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
    return lambda conn, stop: conn.sendall(head + body)


@pytest.mark.parametrize(
    "body",
    [b"<p>shown</p>" + b"<!--" * 250_000, b"<p>shown</p>" + b"<a" * 400_000],  # markup that never closes, 1 MB
    ids=["comment", "tag"],
)
def test_html_left_open_is_parsed_in_linear_work(serve: Callable[[Reply], str], body: bytes) -> None:
    """html.parser's close() read open markup one character at a time: 455 s for 1 MB of '<!--'."""
    url = serve(_page(b"text/html", body))
    done: list[mod.FetchResult] = []
    worker = threading.Thread(target=lambda: done.append(mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK))), daemon=True)
    worker.start()
    worker.join(60)  # a liveness bound, not a speed figure
    assert done, "html_to_text did not finish"
    text = done[0]["text"]
    assert text is not None and text.startswith("shown")


@pytest.mark.parametrize(
    "html",
    [
        "<p>shown</p><a " + "b " * 50_000,
        "<p>shown</p>" + "<p/" * 30_000,
        "<p>shown</p>" + "<a\n" * 30_000,
        "<p>shown</p>" * 5_000,
        "<p>shown</p>" + "words & " * 5_000 + "AT&T",  # text held back at the end, given to close()
    ],
    ids=["attributes", "self-closing", "newlines", "closed", "held-back"],
)
def test_html_is_scanned_once(monkeypatch: pytest.MonkeyPatch, html: str) -> None:
    """Fed in 8 KB pieces, a tag left open was scanned again with each piece: 13 s for 1 MB of '<a b b b ...'."""
    scanned: list[int] = []
    goahead = mod._TextExtractor.goahead

    def counted(self: Any, end: bool) -> None:
        scanned.append(len(self.rawdata))
        goahead(self, end)

    monkeypatch.setattr(mod._TextExtractor, "goahead", counted)
    assert mod.html_to_text(html)[1].startswith("shown")
    assert sum(scanned) <= 2 * len(html)  # each character read at most twice (feed, then close)


@pytest.mark.parametrize(("tail", "shown"), [("Contact AT&T", "Contact AT&T"), ("AT&T.", "AT&T."), ("fish &amp", "fish &")])
def test_text_held_back_at_the_end_past_16_kb_is_kept(tail: str, shown: str) -> None:
    """html.parser holds back a last text run with an ``&`` in its last 34 characters (a character reference may be cut
    there); past 16 KB, close() was skipped and the page's whole text lost."""
    body = "Quarterly report. " * 1_000
    assert mod.html_to_text("<html><body><p>" + body + tail) == ("", (body + shown).strip())
    out = mod.fetch("https://example.com/", mocked(answer(body=("<p>" + body + tail).encode(), headers=HTML)))
    assert out["text"] == (body + shown).strip() and out["truncated"] is False


def test_a_charset_whose_decoder_is_slow_is_not_used(serve: Callable[[Reply], str]) -> None:
    """punycode decodes in time that grows with the square of the text (a 1 MB body: 5.5 minutes): UTF-8 is used instead."""
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_fetch_url(mod.FetchPolicy(allow=LOOPBACK)))
    body = b"-" + b"a" * 2_000
    for charset in (b"punycode", b"idna"):
        assert reg.call("fetch_url", {"url": serve(_page(b"text/plain; charset=" + charset, body))})["text"] == body.decode()
    latin = "caf\u00e9 na\u00efve".encode("latin-1")
    assert reg.call("fetch_url", {"url": serve(_page(b"text/plain; charset=latin-1", latin))})["text"] == "caf\u00e9 na\u00efve"
    sjis = "\u65e5\u672c\u8a9e".encode("shift_jis")  # a codec of C, registered by the standard library
    assert reg.call("fetch_url", {"url": serve(_page(b"text/plain; charset=shift_jis", sjis))})["text"] == "\u65e5\u672c\u8a9e"


@pytest.mark.parametrize(
    ("ctype", "body", "text"),
    [
        (b"text/plain; charset=idna", b"plain words", "plain words"),  # a codec that cannot replace errors
        (b"text/plain; charset=undefined", b"more words", "more words"),
        (b"text/html", b"<p>before</p><![<![\x8b![", "before"),  # markup html.parser refuses with an AssertionError
    ],
)
def test_odd_charsets_and_markup_still_give_the_text(serve: Callable[[Reply], str], ctype: bytes, body: bytes, text: str) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(mod.make_fetch_url(mod.FetchPolicy(allow=LOOPBACK)))
    assert reg.call("fetch_url", {"url": serve(_page(ctype, body))})["text"] == text


def read(value: Any) -> str:
    """``value`` as the model reads it."""
    return CallResult(True, value, None, "", "", 0.0, 1).for_model()


def test_the_result_fits_the_registrys_default_output_limit(serve: Callable[[Reply], str]) -> None:
    reg = ToolRegistry(autoload=False)  # the standard plugins: output_limit's default is 1,000,000 characters
    reg.add(mod.make_fetch_url(mod.FetchPolicy(allow=LOOPBACK)))
    assert "max_output" not in reg.get("fetch_url").options  # it would override the operator's limit
    got = reg.try_call("fetch_url", {"url": serve(_page(b"text/plain", b"\x00" * 2_000_000))})  # 6 characters a byte in JSON
    assert got.ok and isinstance(got.value, dict)  # whole JSON, not the output limit's cut text (was 6 million characters)
    assert mod.MAX_CHARS - 6 < len(got.for_model()) <= mod.MAX_CHARS
    assert got.value["truncated"] is True and got.value["bytes"] == 1_000_000
    assert got.value["note"] == "cut at the 1,000,000 characters this tool may return" and set(got.value["text"]) == {"\x00"}


def test_an_operators_lower_output_limit_applies(serve: Callable[[Reply], str]) -> None:
    url = serve(_page(b"text/plain", b"x" * 200_000))
    reg = ToolRegistry(autoload=False, plugin_options={"output_limit": {"max_output": 50_000}})
    reg.add(mod.make_fetch_url(mod.FetchPolicy(allow=LOOPBACK)))
    refused = reg.try_call("fetch_url", {"url": url})  # a structured result cannot be cut: refused
    assert refused.error is not None and refused.error.kind == "output_too_large"
    reg.add(mod.make_fetch_url(mod.FetchPolicy(allow=LOOPBACK, max_chars=50_000), name="small_fetch"))
    small = reg.call("small_fetch", {"url": url})
    assert small["truncated"] is True and len(small["text"]) > 49_000 and len(read(small)) <= 50_000


@pytest.mark.parametrize("room", range(1_000, 1_012))
def test_text_is_cut_whole_escapes_and_all(serve: Callable[[Reply], str], room: int) -> None:
    body = 'a\x01\u00e9"\n\\\U0001f600' * 400  # escapes of 2 and 6 characters, and characters of 2 and 4 bytes
    url = serve(_page(b"text/plain; charset=utf-8", body.encode()))
    out = mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK, max_chars=room))
    text = out["text"]
    assert (
        text is not None and body.startswith(text) and len(read(out)) <= room < len(read({**out, "text": body[: len(text) + 1]}))
    )


def test_json_past_the_limit_is_cut_text_and_a_long_title_is_cut(serve: Callable[[Reply], str]) -> None:
    doc = mod.fetch(
        serve(_page(b"application/json", b'{"items": [' + b'"x", ' * 2_000 + b'"y"]}')),
        mod.FetchPolicy(allow=LOOPBACK, max_chars=3_000),
    )
    assert "json" not in doc and doc["truncated"] is True and len(read(doc)) <= 3_000
    assert doc["text"] is not None and doc["text"].startswith('{"items": ["x", ') and "shown as text, cut" in doc["note"]
    page = b"<title>" + b"T" * 5_000 + b"</title><p>" + b"body " * 1_000 + b"</p>"
    html = mod.fetch(serve(_page(b"text/html", page)), mod.FetchPolicy(allow=LOOPBACK, max_chars=3_000))
    assert html["text"] == "" and html["title"] is not None and len(html["title"]) > 2_000 and len(read(html)) <= 3_000


def test_a_long_title_is_kept_whole_when_the_text_makes_room(serve: Callable[[Reply], str]) -> None:
    page = b"<title>" + b'T\x01"' * 100 + b"</title><p>" + b"body " * 1_000 + b"</p>"  # a title of escapes
    html = mod.fetch(serve(_page(b"text/html", page)), mod.FetchPolicy(allow=LOOPBACK, max_chars=3_000))
    assert html["title"] == 'T\x01"' * 100 and html["text"] is not None and len(read(html)) == 3_000


LONG_PATH = "/" + "p" * 3_000  # echoed cut at 2,000 characters, saying how long it was
LONG_TYPE = b"text/" + b"t" * 500  # echoed cut at 200


def _moved(location: str) -> Reply:
    head = b"HTTP/1.1 302 Found\r\nLocation: " + location.encode() + b"\r\nContent-Length: 0\r\n\r\n"
    return lambda conn, stop: conn.sendall(head)


def shown_type(ctype: bytes) -> str:
    """A content type as a result echoes it."""
    return ctype.decode() if len(ctype) <= 200 else ctype.decode()[:200] + f"... ({len(ctype)} characters)"


@pytest.mark.parametrize("over", [1, 0, -1])
def test_metadata_longer_than_max_chars_are_cut_to_fit(serve: Callable[[Reply], str], over: int) -> None:
    url = serve(_page(LONG_TYPE, b"text " * 100)) + LONG_PATH
    whole = mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK))
    metadata = len(read({**whole, "text": "", "truncated": True, "note": "cut at the 1,000 characters this tool may return"}))
    assert 4_000 < metadata < 10_000  # the limits below have as many digits as 1,000
    out = mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK, max_chars=metadata + over))
    assert len(read(out)) == metadata + over  # it was 4,446 at least, whatever max_chars
    assert out["truncated"] is True and out["text"] == "text "[: max(over, 0)]
    assert (out["final_url"], out["content_type"]) == (whole["final_url"], whole["content_type"])
    if over < 0:  # the model's URL, which it knows, is cut first
        assert out["url"] == url[:1_999] + f"... ({len(url)} characters)"
    else:
        assert out["url"] == whole["url"] == url[:2_000] + f"... ({len(url)} characters)"


@pytest.mark.parametrize(
    ("ctype", "body"),
    [
        (LONG_TYPE, b"x" * 5_000),
        (b"text/html", b"<title>" + b"T" * 1_000 + b"</title><p>" + b"x" * 5_000),
        (b"application/" + b"j" * 500 + b"+json", b"[" + b"1, " * 2_000 + b"1]"),  # JSON past the limit: cut text
        (b"application/" + b"j" * 500 + b"+json", b"{not json"),
        (b"x/" + b"b" * 500, b"\x00" * 5_000),  # binary: the note names the content type too
    ],
    ids=["text", "html", "json", "not-json", "binary"],
)
def test_the_result_keeps_to_the_least_max_chars_a_policy_takes(serve: Callable[[Reply], str], ctype: bytes, body: bytes) -> None:
    target = serve(_page(ctype, body)) + "/" + "\\p" * 1_500  # escaped in JSON, as the model's URL's quotes
    url = serve(_moved(target)) + "/" + '"\\p' * 1_000  # the model's URL and the one redirected to, both long
    least = mod.FetchPolicy().min_chars
    out = mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK, max_chars=least))
    assert len(read(out)) <= least < 300 and out["truncated"] is True and out["redirects"] == 1
    assert least - 25 < len(read(out)) and out["status"] == 200 and out["bytes"] == len(body)
    cut = f"... ({len(target)} characters)"  # the model's URL goes first, then the one redirected to
    final = out["final_url"]
    assert out["url"] == "..." and (final == "..." or (final.startswith(target[:23]) and final.endswith(cut)))
    above = mod.fetch(url, mod.FetchPolicy(allow=LOOPBACK, max_chars=1_000))
    assert 975 < len(read(above)) <= 1_000 and above["url"] == "..." and above["content_type"] == shown_type(ctype)
    assert above["final_url"].startswith(target[:100]) and above["final_url"].endswith(cut)


def test_a_max_chars_no_result_can_keep_to_is_refused_naming_the_least() -> None:
    least = mod.FetchPolicy(max_chars=300).min_chars  # the least for a limit of three digits (it says the limit)
    assert 250 < least < 300
    with pytest.raises(ValueError, match=rf"max_chars must be at least {least} \(.*\), not {least - 1}$"):
        mod.FetchPolicy(max_chars=least - 1)
    assert mod.FetchPolicy(max_chars=least).max_chars == least
    assert mod.FetchPolicy(max_bytes=10**12, max_redirects=100, max_chars=10**7).min_chars == least + 6 + 2 + 7  # digits
    with pytest.raises(ValueError, match="at least"):
        mod.make_fetch_url(mod.FetchPolicy.from_env(max_chars=100))


def public(host: str, port: int) -> list[str]:
    return ["93.184.215.14"]


def mocked(handler: Callable[[httpx.Request], httpx.Response], **policy: Any) -> mod.FetchPolicy:
    """A policy whose requests ``handler`` answers (no network)."""
    return mod.FetchPolicy(resolver=public, transport=httpx.MockTransport(handler), **policy)


def answer(
    status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None
) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, headers=headers, stream=httpx.ByteStream(body))


HTML = {"content-type": "text/html"}
LONG_URL = "https://example.com/" + "a" * 60_000  # httpx takes URLs up to 64 KB


def _status(line: bytes, ctype: bytes, body: bytes) -> Reply:
    head = b"HTTP/1.1 " + line + b"\r\nContent-Type: " + ctype + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
    return lambda conn, stop: conn.sendall(head + body)


@pytest.mark.parametrize(
    ("ctype", "body"),
    [(b"x/" + b"b" * 500, b"\x00" * 5_000), (b"application/json", b"[" + b"1, " * 2_000 + b"1]")],
    ids=["binary", "json"],  # the longest notes
)
def test_any_status_a_real_server_sends_keeps_to_the_least_max_chars(
    serve: Callable[[Reply], str], ctype: bytes, body: bytes
) -> None:
    """Over the network a status has three digits (h11 reads no other): the widest keeps to ``min_chars``, the rest
    are refused."""
    least = mod.FetchPolicy().min_chars
    policy = mod.FetchPolicy(allow=LOOPBACK, max_chars=least)
    for line in (b"999 Wide", b"200 OK", b"599 X"):
        out = mod.fetch(serve(_status(line, ctype, body)) + "/" + "p" * 3_000, policy)
        assert out["status"] == int(line[:3]) and out["truncated"] is True and least - 25 < len(read(out)) <= least
    for line in (b"1000 X", b"99999999999 X", b"99 X", b"042 X", b"2 X", b"-1 X", b"+20 X"):
        with pytest.raises(ToolError, match="failed: RemoteProtocolError"):
            mod.fetch(serve(_status(line, ctype, body)), policy)


@pytest.mark.parametrize("status", [1000, 10**60, 99, 0, -1, True, 200.0])
def test_a_status_outside_100_to_999_from_a_transport_is_refused(status: Any) -> None:
    """A transport's ``httpx.Response(10**60)`` made a result longer than ``max_chars`` at ``min_chars`` (which leaves
    room for three digits)."""
    least = mod.FetchPolicy().min_chars
    url, headers = "https://example.com/" + "p" * 3_000, {"content-type": "x/" + "b" * 500}
    fine = mod.fetch(url, mocked(answer(999, b"\x00" * 5_000, headers), max_chars=least))
    assert fine["status"] == 999 and fine["url"] == fine["final_url"] == "..." and len(read(fine)) <= least
    with pytest.raises(ToolError, match=r"failed: the server answered with a status outside 100-999\.$"):
        mod.fetch(url, mocked(answer(status, b"\x00" * 5_000, headers), max_chars=least))


def test_long_urls_and_headers_echoed_in_a_result_are_cut() -> None:
    out = mod.fetch(LONG_URL, mocked(answer(body=b"x", headers={"content-type": "x/" + "b" * 100_000})))
    assert out["url"] == LONG_URL[:2_000] + "... (60020 characters)" and out["final_url"] == out["url"]
    assert out["content_type"] == "x/" + "b" * 198 + "... (100002 characters)"
    assert out["note"] == f"binary content ({out['content_type']}) is not shown" and len(read(out)) < 5_000  # was 2.1 MB

    def moving(request: httpx.Request) -> httpx.Response:  # to a 60 KB path, and the page there
        if request.url.path == "/":
            return answer(302, headers={"location": "/" + "c" * 60_000})(request)
        return answer(body=b"ok", headers={"content-type": "text/plain"})(request)

    moved = mod.fetch("https://example.com/", mocked(moving))
    assert moved["final_url"] == ("https://example.com/" + "c" * 60_000)[:2_000] + "... (60020 characters)"
    assert moved["text"] == "ok"


def failing(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("refused by the test")


def unresolved(host: str, port: int) -> list[str]:
    raise OSError("no such name")


LONG_HOST = ".".join(["d" * 63] * 3 + ["d" * 61])  # the longest name DNS carries, 253 characters (a longer one is refused)


@pytest.mark.parametrize(
    ("url", "policy", "shown"),
    [
        (LONG_URL, mocked(failing), "... (60020 characters)' failed: ConnectError"),
        (LONG_URL, mocked(answer(302, headers={"location": "/again"}), max_redirects=0), "... (60020 characters)'."),
        ("https://example.com/", mocked(answer(headers={"content-encoding": "z" * 100_000})), "... (100000 characters)'"),
        ("ftp" + "p" * 60_000 + "://example.com/", mocked(failing), "... (60003 characters)'"),  # the scheme
        (f"https://{LONG_HOST}/", mod.FetchPolicy(resolver=unresolved), "... (253 characters)'"),  # the host
        ("https://example.com/", mocked(answer(302, headers={"location": "ftp://x/" + "c" * 60_000})), "... (60008 characters)'"),
    ],
    ids=["connect", "redirects", "encoding", "scheme", "host", "redirect-target"],
)
def test_long_urls_and_headers_echoed_in_an_error_are_cut(url: str, policy: mod.FetchPolicy, shown: str) -> None:
    with pytest.raises(ToolError) as err:
        mod.fetch(url, policy)
    text = str(err.value)
    assert shown in text and len(text) < 3_000, text[:300]  # was up to the error text limit, 10,000 characters


def test_no_cookie_is_kept_or_sent_across_redirects() -> None:
    """Kept under the pinned address, a cookie ``a.example`` set went to ``b.example`` on the same address (and a
    server could set one for another name there)."""
    cookies: list[str | None] = []

    def hosts(request: httpx.Request) -> httpx.Response:
        cookies.append(request.headers.get("cookie"))
        to = {"/a": "http://b.example/b", "/b": "http://a.example/c"}.get(request.url.path)
        if to is not None:
            return answer(302, headers={"set-cookie": "session=SECRET; Path=/", "location": to})(request)
        return answer(body=b"ok", headers={"content-type": "text/plain"})(request)

    out = mod.fetch("http://a.example/a", mocked(hosts))
    assert out["text"] == "ok" and out["redirects"] == 2
    assert cookies == [None, None, None]  # to another host, and back to the one that set it


@pytest.mark.parametrize("location", ["//[", "http://[::1", "//[" + "x" * 60_000])
def test_a_redirect_to_no_url_is_the_servers_doing(location: str) -> None:
    """httpx parsed the ``Location`` first: ValueError, IDNAError or InvalidURL failed the tool untyped."""
    with pytest.raises(ToolError) as err:
        mod.fetch("http://example.com/", mocked(answer(302, headers={"location": location})))
    assert type(err.value) is ToolError
    assert err.value.message.startswith(f"The server redirected to {location[:200]!r}"[:-1])
    assert "which cannot be fetched: it is not a valid URL: Invalid IPv6 URL" in err.value.message
    assert len(err.value.message) < 500


def test_a_redirect_to_a_malformed_idn_host_is_followed_as_written() -> None:
    """``xn--`` is no IDNA label: httpx, decoding it for a redirect it never sends, raised IDNAError."""

    def moving(request: httpx.Request) -> httpx.Response:
        if request.headers["host"] == "example.com":
            return answer(302, headers={"location": "http://xn--/"})(request)
        return answer(body=b"there", headers={"content-type": "text/plain"})(request)

    out = mod.fetch("http://example.com/", mocked(moving))
    assert out["final_url"] == "http://xn--/" and out["text"] == "there"


def test_an_http_error_text_echoed_is_cut() -> None:
    """h11 quotes a bad header line whole (90 KB): the error showed 10,000 characters of it."""

    def bad_header(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("illegal header line: bytearray(b'X-Big: " + "a" * 90_000 + "')")

    with pytest.raises(ToolError) as err:
        mod.fetch("http://example.com/", mocked(bad_header))
    assert err.value.message.startswith("Fetching 'http://example.com/' failed: RemoteProtocolError: illegal header line")
    assert err.value.message.endswith("... (90042 characters)") and len(err.value.message) < 400


class Chunks(httpx.SyncByteStream):
    """A body that arrives in these chunks."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks


def in_chunks(chunks: Iterable[bytes], encoding: str) -> Callable[[httpx.Request], httpx.Response]:
    headers = {"content-type": "text/plain", "content-encoding": encoding}
    return lambda request: httpx.Response(200, headers=headers, stream=Chunks(chunks))


@pytest.mark.parametrize(("encoding", "wbits"), [("deflate", -15), ("deflate", 15), ("gzip", 31)], ids=["raw", "zlib", "gzip"])
def test_a_compressed_body_arriving_a_byte_at_a_time_is_read(encoding: str, wbits: int) -> None:
    """Raw deflate was told from zlib's by the first chunk failing: a one-byte first chunk did not, and then the rest did."""
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    data = packer.compress(b"hello world " * 1_000) + packer.flush()
    for chunks in ([data[:1], data[1:]], [data[i : i + 1] for i in range(len(data))]):
        out = mod.fetch("http://example.com/", mocked(in_chunks(chunks, encoding)))
        assert out["text"] == "hello world " * 1_000 and out["truncated"] is False


@pytest.mark.parametrize(
    "chunks",
    [[b"junk" * 1_000], [b"", b"junk"], [b"\0\0\x1f", b"junk"], [b"\x1f", b"\x8c"]],
    ids=["same-chunk", "next-chunk", "after-padding", "magic-split"],
)
def test_reading_stops_at_bytes_after_the_compressed_body(chunks: list[bytes]) -> None:
    """Bytes after a gzip stream were read (and ignored) until the connection closed or the deadline passed: reading
    stops at the first bytes that are no gzip member, and the result says it was cut (they were not shown)."""

    def endless(first: bytes) -> Iterator[bytes]:
        yield first + chunks[0]
        yield from chunks[1:]
        raise AssertionError("read past the bytes after the gzip stream")

    out = mod.fetch("http://example.com/", mocked(in_chunks(endless(gzip.compress(b"hello")), "gzip")))
    assert out["text"] == "hello" and out["truncated"] is True


@pytest.mark.parametrize(
    "ctype",
    [
        "application/rss+xml",
        "application/atom+xml",
        "image/svg+xml",
        "application/yaml",
        "application/x-ndjson",
        "application/csv",
    ],
)
def test_text_types_outside_text_are_shown_as_text(ctype: str) -> None:
    out = mod.fetch("http://example.com/", mocked(answer(body=b"<rss>News</rss>", headers={"content-type": ctype})))
    assert out["text"] == "<rss>News</rss>" and "note" not in out


@pytest.mark.parametrize(
    ("html", "title", "text"),
    [
        ("<html><head><title>Shop</title><body><h1>Prices</h1><p>Apples 3 EUR", "Shop", "Prices\nApples 3 EUR"),
        ("<head><meta charset=utf-8><title>Shop</title><p>Apples", "Shop", "Apples"),  # no <body> either
        ("<head><title>Shop</title><style>p{}</style><script>x()</script><noscript>on</noscript></head>", "Shop", ""),
        ("<head><title>Shop</title></head><body><svg><title>Close icon</title></svg><p>Apples</p>", "Shop", "Apples"),
        ("<title>Shop</title><math><title>m</title></math><title>Second</title><p>Apples", "Shop", "m\nApples"),
    ],
    ids=["no-head-end", "no-body-tag", "head-content-hidden", "svg-title", "later-titles"],
)
def test_html_text_and_title_as_a_browser_shows_them(html: str, title: str, text: str) -> None:
    """Without ``</head>`` (optional in HTML) the whole body was dropped; an SVG icon's title joined the page's."""
    assert mod.html_to_text(html) == (title, text)


def test_a_multi_member_gzip_body_is_read_whole(serve: Callable[[Reply], str]) -> None:
    """gzip('hello ') + gzip('world') (RFC 1952: one gzip file of two members, as ``cat a.gz b.gz`` makes) was cut to
    'hello ', with truncated false."""
    body = gzip.compress(b"hello ") + gzip.compress(b"world")
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body)
    out = mod.fetch(serve(lambda conn, stop: conn.sendall(head + body)), mod.FetchPolicy(allow=LOOPBACK))
    assert out["text"] == "hello world" and out["bytes"] == 11 and out["truncated"] is False


@pytest.mark.parametrize("split", ["whole", "at-member-end", "byte-at-a-time"])
@pytest.mark.parametrize("padding", [b"", b"\0" * 3], ids=["no-padding", "zero-padding"])
def test_gzip_members_are_read_however_they_arrive(split: str, padding: bytes) -> None:
    """Each member decoded in turn, zero bytes between and after them skipped (as the gzip module does)."""
    first, second, third = gzip.compress(b"hello "), gzip.compress(b""), gzip.compress(b"world " * 1_000)
    data = first + padding + second + third + padding
    chunks = {
        "whole": [data],
        "at-member-end": [first, padding + second, third + padding],
        "byte-at-a-time": [data[i : i + 1] for i in range(len(data))],
    }[split]
    out = mod.fetch("http://example.com/", mocked(in_chunks(chunks, "gzip")))
    assert out["text"] == "hello " + "world " * 1_000 and out["truncated"] is False


def test_the_byte_cap_counts_every_gzip_member() -> None:
    data = gzip.compress(b"a" * 600) + gzip.compress(b"b" * 600)
    out = mod.fetch("http://example.com/", mocked(in_chunks([data], "gzip"), max_bytes=1_000))
    assert out["text"] == "a" * 600 + "b" * 400 and out["bytes"] == 1_000 and out["truncated"] is True


@pytest.mark.parametrize(
    ("encoding", "data", "text"),
    [
        ("gzip", gzip.compress(b"hello ") + gzip.compress(b"world")[:14], "hello "),  # ends within a member's data
        ("gzip", gzip.compress(b"hello ") + b"\x1f\x8bnot a member", "hello "),  # a later member that is no gzip
        ("gzip", gzip.compress(b"hello")[:-4], "hello"),  # the one member's trailer missing
        ("deflate", zlib.compress(b"hello") + b"more", "hello"),  # deflate has no members: bytes after it
        ("deflate", zlib.compress(b"hello") + gzip.compress(b"world"), "hello"),
    ],
    ids=["ends-within-a-member", "bad-later-member", "no-trailer", "deflate-trailing", "deflate-then-gzip"],
)
def test_compressed_data_not_all_decoded_is_truncated(encoding: str, data: bytes, text: str) -> None:
    """What was decoded is kept, and ``truncated`` says the body held more than is shown."""
    out = mod.fetch("http://example.com/", mocked(in_chunks([data], encoding)))
    shown = out["text"]
    assert shown is not None and shown.startswith(text) and out["truncated"] is True


def test_an_empty_compressed_body_is_not_truncated() -> None:
    for encoding in ("gzip", "deflate"):
        out = mod.fetch("http://example.com/", mocked(in_chunks([], encoding)))
        assert out["text"] == "" and out["bytes"] == 0 and out["truncated"] is False


LONG_REF = "&#" + "0" * 4_301 + "65;"  # past Python's 4,300 digits of decimal text: int() raised ValueError


@pytest.mark.parametrize(
    ("html", "title", "text"),
    [
        (f"<title>Hi</title><p>Real content.</p><p>{LONG_REF}</p><p>More</p>", "Hi", "Real content.\nA\nMore"),
        ("<title>&#" + "9" * 5_000 + ";</title><p>x</p>", "\ufffd", "x"),  # past U+10FFFF: U+FFFD, as unescape gives
        ('<p>Intro</p><a href="/x?id=&#' + "1" * 4_400 + ';">link</a><p>More</p>', "", "Intro\nlink\nMore"),
        (
            "<p>&#" + "0" * 5_000 + "66 &#00000000067;&#000000001114109&#00000001114112;&#x" + "0" * 5_000 + "44;",
            "",
            "B C\U0010fffd\ufffdD",
        ),
    ],
    ids=["text", "title", "attribute", "forms"],
)
def test_a_long_decimal_character_reference_reads_as_its_character(
    serve: Callable[[Reply], str], html: str, title: str, text: str
) -> None:
    """One ``&#`` and 5,000 digits failed the fetch (ToolExecutionError ValueError) with none of the page."""
    assert mod.html_to_text(html) == (title, text)
    out = mod.fetch(serve(_page(b"text/html; charset=utf-8", html.encode())), mod.FetchPolicy(allow=LOOPBACK))
    assert (out["title"], out["text"]) == (title, text)


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("a" * 64 + ".com", "the host name has a label of 64 characters; a DNS label is 1-63"),
        ("a..com", "the host name has an empty label"),
        (".com", "the host name has an empty label"),
        ("a." * 127 + "com", "the host name is 257 characters long; a DNS name is at most 253"),
    ],
    ids=["long-label", "empty-label", "leading-dot", "long-name"],
)
def test_a_host_name_dns_cannot_carry_is_the_models_argument_error(host: str, reason: str) -> None:
    """Blamed on DNS: "Could not resolve ...: encoding with 'idna' codec failed (UnicodeError: label empty or too long)"
    (and with a resolver that took the name, it was fetched)."""
    for resolver in (mod.system_resolver, public):
        with pytest.raises(ToolArgumentError) as err:
            mod.fetch(f"http://{host}/", mod.FetchPolicy(resolver=resolver))
        problem = err.value.problems[0]
        assert problem.path == "$.url" and problem.message == reason
    redirect = answer(302, headers={"location": f"http://{host}/"})
    with pytest.raises(ToolError, match=f"The server redirected to .*, which cannot be fetched: {reason}") as redirected:
        mod.fetch("http://example.com/", mocked(redirect))
    assert type(redirected.value) is ToolError


@pytest.mark.parametrize("host", ["a" * 63 + ".com", "example.com.", "a." * 125 + "com", "b\u00fccher.example"])
def test_host_names_dns_can_carry_are_resolved(host: str) -> None:
    asked: list[str] = []

    def resolver(name: str, port: int) -> list[str]:
        asked.append(name)
        return ["93.184.215.14"]

    out = mod.fetch(f"http://{host}/", mod.FetchPolicy(resolver=resolver, transport=httpx.MockTransport(answer(body=b"ok"))))
    assert out["status"] == 200 and len(asked) == 1


def test_json_with_an_integer_too_long_to_read_says_so_not_that_it_is_invalid(serve: Callable[[Reply], str]) -> None:
    body = b'{"n": ' + b"9" * 5_000 + b"}"  # valid JSON, not cut: past Python's int-to-text limit (4,300 digits)
    doc = mod.fetch(serve(_page(b"application/json", body)), mod.FetchPolicy(allow=LOOPBACK))
    assert "json" not in doc and doc["truncated"] is False and doc["text"] == body.decode()
    assert doc["note"] == "a JSON integer too long to read; shown as text"
    for invalid in (b'{"n": 1,}', b'{"n": ' + b"9" * 5_000 + b", }"):  # a long integer before the syntax error too
        broken = mod.fetch(serve(_page(b"application/json", invalid)), mod.FetchPolicy(allow=LOOPBACK))
        assert broken["note"] == "not valid JSON (or cut at the byte limit); shown as text", invalid[-10:]
    cut = mod.fetch(serve(_page(b"application/json", body + b" " * 100)), mod.FetchPolicy(allow=LOOPBACK, max_bytes=5_000))
    assert cut["truncated"] is True and cut["note"] == "not valid JSON (or cut at the byte limit); shown as text"
