"""fetch_url with a test transport whose response httpx already read (``httpx.Response(content=...)``, the usual way to
write one): its body is used, cut at ``max_bytes``; a response whose stream was already read or closed is a
``ToolError`` naming httpx's error (it was an untyped ``httpx.StreamConsumed``)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import harness_one_fetch_url as mod
import httpx
import pytest

from harness_one import ToolError, ToolTimeout


def _public(host: str, port: int) -> list[str]:
    return ["93.184.215.14"]


def _fetch(make: Callable[[], httpx.Response], **policy: Any) -> mod.FetchResult:
    transport = httpx.MockTransport(lambda request: make())
    return mod.fetch("http://example.com/", mod.FetchPolicy(resolver=_public, transport=transport, **policy))


@pytest.mark.parametrize("status", [200, 404])
def test_a_response_made_with_content_is_read(status: int) -> None:
    out = _fetch(lambda: httpx.Response(status, headers={"Content-Type": "text/plain"}, content=b"hi"))
    assert (out["status"], out["text"], out["bytes"], out["truncated"]) == (status, "hi", 2, False)


def test_a_response_made_with_content_is_cut_at_max_bytes() -> None:
    out = _fetch(lambda: httpx.Response(200, headers={"Content-Type": "text/plain"}, content=b"x" * 100), max_bytes=10)
    assert (out["text"], out["bytes"], out["truncated"]) == ("x" * 10, 10, True)


def test_a_response_made_with_gzip_content_is_decoded_once() -> None:
    headers = {"Content-Type": "text/plain", "Content-Encoding": "gzip"}
    out = _fetch(lambda: httpx.Response(200, headers=headers, content=gzip.compress(b"hello")))
    assert (out["text"], out["truncated"]) == ("hello", False)


def test_a_response_made_with_content_httpx_does_not_decode_is_decoded_as_over_the_network() -> None:
    """httpx decodes no ``x-gzip`` when it reads the body at the response's making: the tool decodes its raw bytes."""
    headers = {"Content-Type": "text/plain", "Content-Encoding": "x-gzip"}
    out = _fetch(lambda: httpx.Response(200, headers=headers, content=gzip.compress(b"hello")))
    assert (out["text"], out["bytes"], out["truncated"]) == ("hello", 5, False)


def test_a_response_the_transport_read_from_an_iterator_is_read() -> None:
    """Its raw stream cannot be read twice: the body httpx holds is taken (it was read as empty, silently)."""

    def make() -> httpx.Response:
        response = httpx.Response(200, headers={"Content-Type": "text/plain"}, content=iter([b"he", b"llo"]))
        response.read()
        return response

    out = _fetch(make)
    assert (out["text"], out["bytes"], out["truncated"]) == ("hello", 5, False)


def _closed() -> httpx.Response:
    response = httpx.Response(200, headers={"Content-Type": "text/plain"}, stream=httpx.ByteStream(b"hi"))
    response.close()
    return response


def _consumed() -> httpx.Response:
    response = httpx.Response(200, headers={"Content-Type": "text/plain"}, stream=httpx.ByteStream(b"hi"))
    assert b"".join(response.iter_raw()) == b"hi"  # streamed, not kept: httpx cannot give it again
    return response


@pytest.mark.parametrize(("make", "name"), [(_closed, "StreamClosed"), (_consumed, "StreamConsumed")])
def test_a_stream_already_closed_or_read_is_a_tool_error(make: Callable[[], httpx.Response], name: str) -> None:
    with pytest.raises(ToolError) as caught:
        _fetch(make)
    assert not isinstance(caught.value, ToolTimeout)
    assert f"Fetching 'http://example.com/' failed: {name}: " in str(caught.value)
