"""Review 31, fetch_url: raw bytes read bounded (zero padding, empty gzip members), a JSON body's BOM and UTF-16/32,
the policy's numbers checked when it is built, a URL's surrounding whitespace, a URL of another type without the
validation plugin, an HTML page's ``<meta charset>``."""

from __future__ import annotations

import gzip
import math
import os
from collections.abc import Iterator
from typing import Any

import harness_one_fetch_url as mod
import httpx
import pytest

from harness_one import ToolArgumentError, ToolRegistry

REACHED: list[str] = []


def _public(host: str, port: int) -> list[str]:
    return ["93.184.215.14"]


class _Endless(httpx.SyncByteStream):
    """``first``, then ``unit`` again and again (up to 256 MB in all, so a regression ends), counting what is read."""

    def __init__(self, first: bytes, unit: bytes) -> None:
        self.first, self.unit, self.read = first, unit, 0

    def __iter__(self) -> Iterator[bytes]:
        self.read += len(self.first)
        yield self.first
        while self.read < 256 << 20:
            self.read += len(self.unit)
            yield self.unit


def _policy(handler: Any, **kw: Any) -> mod.FetchPolicy:
    return mod.FetchPolicy(resolver=_public, transport=httpx.MockTransport(handler), **kw)


def _serve(body: bytes | httpx.SyncByteStream, ctype: str, **headers: str) -> mod.FetchPolicy:
    stream = httpx.ByteStream(body) if isinstance(body, bytes) else body

    def handler(request: httpx.Request) -> httpx.Response:
        REACHED.append(str(request.url))
        return httpx.Response(200, headers={"content-type": ctype, **headers}, stream=stream)

    return _policy(handler)


# 1. Raw bytes read are bounded: padding and empty members decode to nothing, and were read without end.


@pytest.mark.parametrize("unit", [b"\0" * 65_536, gzip.compress(b"", mtime=0) * 3_000], ids=["zero-padding", "empty-members"])
def test_bytes_that_decode_to_nothing_are_not_read_without_end(unit: bytes) -> None:
    # 2.17 GB were read in 10 s, then ToolTimeout, the decoded "hello" lost
    stream = _Endless(gzip.compress(b"hello", mtime=0), unit)
    out = mod.fetch("http://example.com/", _serve(stream, "text/plain", **{"content-encoding": "gzip"}))
    assert (out["text"], out["bytes"], out["truncated"]) == ("hello", 5, True)
    limit = mod._raw_limit(1_000_000)
    assert limit == 2_065_536 and stream.read <= limit + len(unit)  # up to the cap, and the chunk that crossed it


def test_the_raw_bound_leaves_incompressible_gzip_whole() -> None:
    page = os.urandom(100_000)  # gzip makes it a little longer
    packed = gzip.compress(page, mtime=0)
    policy = _serve(packed, "application/octet-stream", **{"content-encoding": "gzip"})
    out = mod.fetch("http://example.com/", mod.FetchPolicy(max_bytes=100_000, resolver=_public, transport=policy.transport))
    assert (out["bytes"], out["truncated"]) == (100_000, False)
    tiny = _serve(gzip.compress(b"x", mtime=0), "text/plain", **{"content-encoding": "gzip"})
    assert (
        mod.fetch("http://example.com/", mod.FetchPolicy(max_bytes=1, resolver=_public, transport=tiny.transport))["text"] == "x"
    )


# 2. JSON with a byte order mark, or in UTF-16 or UTF-32.


@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        (b'\xef\xbb\xbf{"a": 1}', "application/json"),
        (b'\xef\xbb\xbf{"a": 1}', "application/json; charset=utf-8"),  # the header's charset keeps the mark: dropped
        ('{"a": 1}'.encode("utf-16"), "application/json"),
        ('{"a": 1}'.encode("utf-16-be"), "application/json"),  # no mark: told by its zero bytes, as json.loads does
        ('{"a": 1}'.encode("utf-32"), "application/ld+json"),
        ('{"a": 1}'.encode("utf-16"), "application/json; charset=latin-1"),  # a mark outranks the header
    ],
)
def test_json_with_a_byte_order_mark_or_in_utf16_is_parsed(body: bytes, ctype: str) -> None:
    # was 'not valid JSON (or cut at the byte limit); shown as text'
    out = mod.fetch("http://example.com/", _serve(body, ctype))
    assert (out.get("json"), out.get("note")) == ({"a": 1}, None)


def test_a_text_bodys_byte_order_mark_is_dropped() -> None:
    out = mod.fetch("http://example.com/", _serve(b"\xef\xbb\xbfplain", "text/plain"))
    assert out["text"] == "plain"


# 3. The policy's numbers are checked when it is built.


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timeout", -1, "timeout must be a finite number above 0, not -1"),
        ("timeout", 0, "timeout must be a finite number above 0, not 0"),
        ("timeout", math.nan, "timeout must be a finite number above 0, not nan"),
        ("timeout", math.inf, "timeout must be a finite number above 0, not inf"),
        ("timeout", True, "timeout must be a finite number above 0, not True"),
        ("timeout", "10", "timeout must be a finite number above 0, not '10'"),
        ("max_redirects", -1, "max_redirects must be an integer of at least 0, not -1"),
        ("max_redirects", 2.0, "max_redirects must be an integer of at least 0, not 2.0"),
        ("max_redirects", False, "max_redirects must be an integer of at least 0, not False"),
        ("max_bytes", 0, "max_bytes must be an integer of at least 1, not 0"),
        ("max_bytes", "100", "max_bytes must be an integer of at least 1, not '100'"),
        ("max_chars", True, "max_chars must be an integer, not True"),
        ("max_chars", 1e6, "max_chars must be an integer, not 1000000.0"),
    ],
)
def test_a_policys_number_out_of_range_is_refused_when_built(field: str, value: Any, message: str) -> None:
    # timeout=-1 failed every call ("timed out after -1 s"), nan at call time, max_redirects=-1 "more than -1"
    with pytest.raises(ValueError) as err:
        mod.FetchPolicy(**{field: value})
    assert str(err.value) == message


def test_the_least_of_each_number_is_taken() -> None:
    policy = mod.FetchPolicy(timeout=1, max_redirects=0, max_bytes=1)
    assert (policy.timeout, policy.max_redirects, policy.max_bytes) == (1, 0, 1)
    assert mod.FetchPolicy(timeout=0.001).timeout == 0.001


# 4. Whitespace around the URL is dropped, as WHATWG URL parsing drops it.


@pytest.mark.parametrize("url", [" http://example.com/x", "http://example.com/x ", "\t\r\n http://example.com/x\n\x00"])
def test_whitespace_around_the_url_is_dropped(url: str) -> None:
    # " https://..." was "a relative URL" ('%20%20http://...'), and "http://host/x " fetched /x%20
    REACHED.clear()
    out = mod.fetch(url, _serve(b"ok", "text/plain"))
    assert REACHED == ["http://93.184.215.14/x"]
    assert (out["url"], out["final_url"], out["text"]) == ("http://example.com/x", "http://example.com/x", "ok")


def test_whitespace_inside_the_url_is_not_dropped() -> None:
    REACHED.clear()
    mod.fetch("http://example.com/a b", _serve(b"ok", "text/plain"))
    assert REACHED == ["http://93.184.215.14/a%20b"]


# 5. A URL that is no string, without the validation plugin.


@pytest.mark.parametrize(
    ("url", "said", "got"),
    [
        (None, "null", "null"),
        (5, "integer 5", "5"),
        (True, "boolean true", "true"),
        (1.5, "number 1.5", "1.5"),
        ([], "array []", "[]"),
        (b"x", 'bytes "<bytes>"', '"<bytes>"'),
    ],
)
def test_a_url_of_another_type_is_an_argument_error_without_the_validation_plugin(url: object, said: str, got: str) -> None:
    # None was ToolExecutionError: TypeError: object of type 'NoneType' has no len()
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(mod.make_fetch_url(_serve(b"ok", "text/plain")))
    error = reg.try_call("fetch_url", {"url": url}).error
    assert isinstance(error, ToolArgumentError)
    assert [(p.path, p.message, p.keyword, p.got) for p in error.problems] == [
        ("$.url", f"expected string, got {said}", "type", got)
    ]


# 6. An HTML page's <meta charset>.


@pytest.mark.parametrize(
    "meta",
    [
        b'<meta charset="windows-1251">',
        b"<META CHARSET=cp1251>",
        b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
    ],
)
def test_an_html_pages_meta_charset_is_read(meta: bytes) -> None:
    # a cp1251 page came out as U+FFFD
    page = b"<html><head>" + meta + "<title>Привет</title></head><body><p>Мир</p>".encode("cp1251")
    out = mod.fetch("http://example.com/", _serve(page, "text/html"))
    assert (out["title"], out["text"]) == ("Привет", "Мир")


@pytest.mark.parametrize(
    ("page", "ctype", "text"),
    [
        ('<meta charset="no-such-codec"><p>Café'.encode(), "text/html", "Café"),  # unknown: UTF-8
        ('<meta charset="utf-16"><p>Café'.encode(), "text/html", "Café"),  # a meta read as ASCII: no UTF-16, UTF-8
        ('<meta charset="windows-1251"><p>Café'.encode("latin-1"), "text/html; charset=latin-1", "Café"),  # header wins
        (b"<p>" + b" " * 1_100 + '<meta charset="windows-1251">Мир'.encode(), "text/html", "Мир"),  # past 1024 bytes
        ('<meta charset="windows-1251">Мир'.encode(), "text/plain", '<meta charset="windows-1251">Мир'),  # not HTML
    ],
    ids=["unknown", "utf-16", "header", "late", "plain"],
)
def test_a_meta_charset_yields_where_it_should(page: bytes, ctype: str, text: str) -> None:
    assert mod.fetch("http://example.com/", _serve(page, ctype))["text"] == text
