"""Review 25, fetch_url: a lone surrogate anywhere in the URL, a port outside 1-65535 (its echo cut), IPv6
documentation space, declared dependencies."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

import harness_one_fetch_url as fetch_mod
import httpx
import pytest

from harness_one import ArgumentProblem, ToolArgumentError, ToolError, ToolRegistry

REACHED: list[str] = []


def _handler(request: httpx.Request) -> httpx.Response:
    REACHED.append(str(request.url))
    if request.url.path == "/to-big-port":
        return httpx.Response(302, headers={"location": "http://127.0.0.1:70000/"})
    if request.url.path == "/to-cesu":  # a surrogate's UTF-8-like bytes: httpx reads the header as Latin-1, never one
        return httpx.Response(302, headers=[(b"location", b"/\xed\xa0\x80")])
    return httpx.Response(200, headers={"content-type": "text/plain"}, stream=httpx.ByteStream(b"REACHED"))


def _policy(*allow: str) -> fetch_mod.FetchPolicy:
    return fetch_mod.FetchPolicy(allow=allow, transport=httpx.MockTransport(_handler))


def _url_problem(url: str, policy: fetch_mod.FetchPolicy) -> ArgumentProblem:
    REACHED.clear()
    with pytest.raises(ToolArgumentError) as err:
        fetch_mod.fetch(url, policy)
    assert REACHED == []  # nothing sent
    (problem,) = err.value.problems
    return problem


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1/\ud800", "not a valid URL: it holds a lone surrogate (U+D800) at position 17"),
        ("http://127.0.0.1/?q=\udfff", "not a valid URL: it holds a lone surrogate (U+DFFF) at position 20"),
        ("http://127.0.0.1/#\ud83d", "not a valid URL: it holds a lone surrogate (U+D83D) at position 18"),
        # in the host and the port httpx refused it in its own words ("Invalid IDNA hostname: 'a\\ud800.com'",
        # "Invalid port: '8\\ud800'"), unlike what the docs say: one message wherever it is
        ("http://a\ud800.com/", "not a valid URL: it holds a lone surrogate (U+D800) at position 8"),
        ("http://127.0.0.1:8\ud800/", "not a valid URL: it holds a lone surrogate (U+D800) at position 18"),
        ("http://[::1\udc00]/", "not a valid URL: it holds a lone surrogate (U+DC00) at position 11"),
    ],
)
def test_a_lone_surrogate_in_the_url_is_an_argument_error(url: str, message: str) -> None:
    # was ToolExecutionError: UnicodeEncodeError (httpx percent-encoding the path, query or fragment)
    problem = _url_problem(url, _policy("127.0.0.1"))
    shown = repr(url.encode("utf-8", "backslashreplace").decode())  # the echo (redact's) writes the surrogate escaped
    assert (problem.path, problem.message, problem.got) == ("$.url", message, shown)


def test_a_lone_surrogate_reaches_the_model_as_an_argument_error() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(fetch_mod.make_fetch_url(_policy("127.0.0.1")))
    got = reg.try_call("fetch_url", {"url": "http://127.0.0.1/a\ud800"})
    assert isinstance(got.error, ToolArgumentError)
    assert [(p.path, p.message) for p in got.error.problems] == [
        ("$.url", "not a valid URL: it holds a lone surrogate (U+D800) at position 18")
    ]


def test_a_redirect_cannot_carry_a_lone_surrogate() -> None:
    # httpx decodes header bytes as ASCII, UTF-8 (strict) or Latin-1: none yields a surrogate, so the hop is followed
    out = fetch_mod.fetch("http://127.0.0.1/to-cesu", _policy("127.0.0.1"))
    assert (out["final_url"], out["redirects"], out.get("text")) == ("http://127.0.0.1/%C3%AD%C2%A0%C2%80", 1, "REACHED")


@pytest.mark.parametrize("port", [0, -1, 65536, 70000, 108831])
def test_a_port_outside_1_65535_is_refused(port: int) -> None:
    # 108831 reached port 43295 (getaddrinfo wraps it), while url, final_url and Host said 108831
    problem = _url_problem(f"http://127.0.0.1:{port}/", _policy("127.0.0.1"))
    assert (problem.path, problem.message) == ("$.url", f"the port must be 1-65535, not {port}")


def test_a_lone_surrogate_in_the_password_is_told_with_the_password_masked() -> None:
    problem = _url_problem("http://user:se\ud800cret@127.0.0.1/", _policy("127.0.0.1"))
    assert (problem.message, problem.got) == (
        "not a valid URL: it holds a lone surrogate (U+D800) at position 14",
        "'http://[REDACTED]@127.0.0.1/'",
    )


@pytest.mark.parametrize("digits", [4_000, 4_300])
def test_a_huge_port_is_cut_in_the_refusal(digits: int) -> None:
    # the whole port was written into the message: 4,000 digits gave a message of 4,030 characters
    problem = _url_problem(f"http://127.0.0.1:{'9' * digits}/", _policy("127.0.0.1"))
    assert problem.message == f"the port must be 1-65535, not {'9' * 200}... ({digits} characters)"


@pytest.mark.parametrize("digits", [4_301, 20_000])
def test_a_port_httpx_cannot_read_is_cut_in_the_refusal(digits: int) -> None:
    # past 4,300 digits httpx refuses it itself, its message echoing the port whole (20,033 characters)
    problem = _url_problem(f"http://127.0.0.1:{'9' * digits}/", _policy("127.0.0.1"))
    assert problem.message == f"not a valid URL: Invalid port: '{'9' * 185}... ({digits + 16} characters)"


def test_the_ports_at_the_ends_of_the_range_are_fetched() -> None:
    for port in (1, 65535):
        REACHED.clear()
        assert fetch_mod.fetch(f"http://127.0.0.1:{port}/", _policy("127.0.0.1")).get("text") == "REACHED"
        assert [f"http://127.0.0.1:{port}/"] == REACHED


def test_a_redirect_to_a_port_outside_the_range_is_the_servers_error() -> None:
    REACHED.clear()
    with pytest.raises(ToolError) as err:
        fetch_mod.fetch("http://127.0.0.1/to-big-port", _policy("127.0.0.1"))
    assert not isinstance(err.value, ToolArgumentError)
    assert str(err.value) == (
        "The server redirected to 'http://127.0.0.1:70000/', which cannot be fetched: the port must be 1-65535, "
        "not 70000. Try another URL."
    )
    assert REACHED == ["http://127.0.0.1/to-big-port"]  # not followed


@pytest.mark.parametrize("address", ["3fff::1", "3fff:fff:ffff::1", "2001:db8::1"])
def test_ipv6_documentation_space_is_refused_on_every_python(address: str) -> None:
    # 3fff::/20 (RFC 9637) is not in Python 3.11's ipaddress tables: it was fetched
    assert fetch_mod.why_refused(ipaddress.IPv6Address(address)) == "is a documentation address"
    problem = _url_problem(f"http://[{address}]/", _policy())
    assert problem.message == f"refused: {address} is a documentation address; only public addresses can be fetched"


def test_next_to_the_documentation_prefix_is_public() -> None:
    assert fetch_mod.why_refused(ipaddress.IPv6Address("3fff:1000::1")) is None  # just past 3fff::/20
    assert fetch_mod.why_refused(ipaddress.IPv6Address("2606:4700::1")) is None


def test_httpcore_is_declared_and_both_are_bounded() -> None:
    project = tomllib.loads((Path(fetch_mod.__file__).parent / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["harness-one>=0.1", "httpx>=0.27,<1", "httpcore>=1.0,<2"]
    assert httpx.__version__.split(".")[0] == "0"  # the installed ones are within those ranges
    import httpcore

    assert httpcore.__version__.split(".")[0] == "1"
