"""The network the conformance kit refuses, seen through the interpreter's audit events: at import, in the probe's
fresh interpreter, and while an example runs, in this process (ways past the six socket functions it patched), to the
example's own code only."""

from __future__ import annotations

import _socket
import asyncio
import contextlib
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_conformance import _fresh_entry_points, message  # noqa: F401 - an autouse fixture

from harness_one import ToolRegistry, defineTool
from harness_one.testing import ToolPackageTests
from harness_one.testing._audit import blocking_calls, offline

pytest_plugins = ["pytester"]

#: A way to the network (on this machine: nothing leaves it), and how the kit reports it.
TRIES = {
    "raw_connect": (
        "s = _socket.socket()\ns.settimeout(0.5)\ns.connect(('127.0.0.1', 9))",
        "socket.connect(('127.0.0.1', 9))",
    ),
    "send_message": (
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendmsg([b'x'], [], 0, ('127.0.0.1', 9))",
        "socket.sendmsg(('127.0.0.1', 9))",
    ),
    "reverse_lookup": ("socket.gethostbyaddr('127.0.0.1')", "socket.gethostbyaddr('127.0.0.1')"),
    "raw_lookup": ("_socket.getaddrinfo('localhost', 9)", "socket.getaddrinfo('localhost', 9)"),
}


def _tried(code: str, indent: str = "") -> str:
    """``code``, run with what it raises (the kit's refusal, or a refused connection) suppressed."""
    body = "\n".join(f"{indent}    {line}" for line in code.splitlines())
    return f"{indent}with contextlib.suppress(OSError):\n{body}\n"


def _package(code: str) -> str:
    return (
        "import _socket, contextlib, socket\n\nfrom harness_one import defineTool\n\n"
        + _tried(code)
        + '\n\n@defineTool(registry=None)\ndef quiet(x: int) -> int:\n    """Return x."""\n    return x\n'
    )


def suite(**attributes: Any) -> Any:
    return type("TestSubject", (ToolPackageTests,), attributes)()


@pytest.mark.parametrize("way", sorted(TRIES))
def test_the_import_probe_sees_the_network_past_the_socket_functions(dists: Any, way: str) -> None:
    code, shown = TRIES[way]
    dist = f"conformance-{way.replace('_', '-')}"
    dists.make(dist, {f"conformance_{way}": _package(code)}, {"harness_one.tools": {"quiet": f"conformance_{way}:quiet"}})
    with pytest.raises(pytest.fail.Exception, match=f"tried the network at import: {re.escape(shown)}$"):
        suite(distribution=dist).test_import_has_no_side_effects()


def test_another_package_that_tries_the_network_at_import_is_not_blamed_on_this_one(dists: Any) -> None:
    """The probe also imports every installed package (for the name conflicts), after this one's import is judged."""
    dists.make(
        "conformance-noisy",
        {"conformance_noisy": _package("socket.getaddrinfo('localhost', 9)").replace("def quiet", "def noisy")},
        {"harness_one.tools": {"noisy": "conformance_noisy:noisy"}},
    )
    dists.make(
        "conformance-polite",
        {"conformance_polite": _package("pass")},
        {"harness_one.tools": {"quiet": "conformance_polite:quiet"}},
    )
    suite(distribution="conformance-polite").test_import_has_no_side_effects()
    with pytest.raises(pytest.fail.Exception, match=r"tried the network at import: socket.getaddrinfo\('localhost', 9\)"):
        suite(distribution="conformance-noisy").test_import_has_no_side_effects()


def _tools_module() -> str:
    """A tool per way to the network, each with an example that expects ``"done"``."""
    parts = ["import _socket, contextlib, socket\n\nfrom harness_one import defineTool\n"]
    for name, (code, _) in sorted(TRIES.items()):
        parts.append(
            f'\n\n@defineTool(registry=None, read_only=True, examples=[{{"arguments": {{}}, "result": "done"}}])\n'
            f'def {name}() -> str:\n    """Try the network, then say done."""\n' + _tried(code, "    ") + '    return "done"\n'
        )
    return "".join(parts)


def test_examples_run_offline_past_the_socket_functions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        network_tools=_tools_module(),
        test_network=(
            "from network_tools import raw_connect, raw_lookup, reverse_lookup, send_message\n"
            "from harness_one.testing import ToolPackageTests\n\n\n"
            "class TestNetwork(ToolPackageTests):\n    tools = [raw_connect, raw_lookup, reverse_lookup, send_message]\n"
        ),
    )
    pytester.syspathinsert()
    inner = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_examples")
    text = message(inner, "TestNetwork::test_examples")
    for name, (_, shown) in TRIES.items():
        assert f"tool {name!r}, example 0: tried the network ({shown}): examples run offline" in text


def _lookup() -> str:
    try:
        _socket.getaddrinfo("localhost", 9)
    except OSError as exc:
        return str(exc)
    return "looked up"


REFUSED = "network access refused by the harness-one conformance kit: socket.getaddrinfo('localhost', 9)"


def test_offline_refuses_the_threads_its_code_starts_until_the_block_ends() -> None:
    """A plain ``threading.Thread`` copies no context: the thread is the block's because the block's code started it
    (and so is one that thread starts)."""
    got: list[str] = []

    def nested() -> None:
        inner = threading.Thread(target=lambda: got.append(_lookup()))
        inner.start()
        inner.join()

    with offline() as attempts:
        worker = threading.Thread(target=lambda: [got.append(_lookup()), nested()])
        worker.start()
        worker.join()
    assert got == [REFUSED, REFUSED]
    assert attempts == ["socket.getaddrinfo('localhost', 9)"] * 2
    assert _lookup() == "looked up"


def test_offline_every_thread_refuses_a_thread_started_before_it() -> None:
    """What the import probe's interpreter uses: there, every thread is the package's."""
    go, done, got = threading.Event(), threading.Event(), []
    before = threading.Thread(target=lambda: [go.wait(), got.append(_lookup()), done.set()])
    before.start()
    try:
        with offline(every_thread=True) as attempts:
            go.set()
            done.wait()
    finally:
        go.set()
        before.join()
    assert (got, attempts) == ([REFUSED], ["socket.getaddrinfo('localhost', 9)"])


def _run(fn: Any, arguments: dict[str, Any] | None = None, *, asynchronous: bool = False) -> tuple[Any, list[str]]:
    """Run the tool ``fn`` as the kit runs an example (in a registry of its own): its value and what went wrong."""
    registry = ToolRegistry(plugins=[])
    registry.add(fn)
    tool = registry.get(fn.tool.name)
    value, _, problems = suite(example_budget=60.0).run_offline(registry, tool, arguments or {}, asynchronous=asynchronous)
    return value, problems


def test_a_thread_the_test_session_started_is_not_refused() -> None:
    """A fixture's thread, started before the example, serves, looks up and connects while a pure tool's example runs:
    neither refused nor blamed on the tool."""
    go, done, got = threading.Event(), threading.Event(), []

    def fixture() -> None:
        go.wait()
        try:
            with HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as server:
                _socket.getaddrinfo("127.0.0.1", 9)
                socket.create_connection(server.server_address[:2]).close()
            got.append("served")
        except OSError as exc:
            got.append(str(exc))
        finally:
            done.set()

    @defineTool(registry=None)
    def add(a: int, b: int) -> int:
        """Add two numbers while the fixture serves."""
        go.set()
        done.wait()
        return a + b

    session_thread = threading.Thread(target=fixture)
    session_thread.start()
    try:
        value, problems = _run(add, {"a": 1, "b": 2})
    finally:
        go.set()
        session_thread.join()
    assert (value, problems, got) == (3, [], ["served"])


def _made_of_sockets() -> tuple[socket.socket, socket.socket]:
    """``socket.socketpair`` where ``_socket`` has none (Windows), as CPython's ``Lib/socket.py`` makes it: a
    listener bound on loopback, a connection to it."""
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.socket()
        client.setblocking(False)
        with contextlib.suppress(BlockingIOError, InterruptedError):
            client.connect(listener.getsockname())
        client.setblocking(True)
        server, _ = listener.accept()
    finally:
        listener.close()
    return server, client


def test_a_socket_pair_made_of_sockets_is_not_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Binding reaches nothing, nor does connecting to what the example's code bound: an event loop (whose self-pipe
    is such a pair on Windows) runs within an example."""
    monkeypatch.setattr(socket, "socketpair", _made_of_sockets)
    with offline() as attempts:
        left, right = socket.socketpair()
        left.sendall(b"x")
        assert right.recv(1) == b"x"
        left.close()
        right.close()
        assert asyncio.run(asyncio.sleep(0, "ran")) == "ran"
    assert attempts == []


@pytest.fixture(params=["loopback", "unix"])
def local_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[socket.socket, Any]]:
    """A server of this machine the test session listens with: a TCP one on loopback, a Unix-domain one."""
    if request.param == "unix":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(tmp_path / "server"))
    else:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
    with sock:
        sock.listen()
        yield sock, sock.getsockname()


def test_a_server_on_this_machine_is_the_network_to_an_example(local_server: tuple[socket.socket, Any]) -> None:
    """A server on this machine (a database, a daemon's socket, a fixture's) is not the example's own."""
    _, address = local_server
    connected: list[bool] = []

    @defineTool(registry=None)
    def reach() -> str:
        """Connect to the local server."""
        with contextlib.suppress(OSError), socket.socket(local_server[0].family) as sock:
            sock.connect(address)
            connected.append(True)
        return "done"

    value, problems = _run(reach)
    assert (value, connected) == ("done", [])
    assert problems == [f"tried the network (socket.connect({address!r})): examples run offline"]


def _connects() -> int:
    """Connect to the discard port (nothing leaves this machine); the thread that tried."""
    with contextlib.suppress(OSError), socket.socket() as sock:
        sock.settimeout(5.0)
        sock.connect(("127.0.0.1", 9))
    return threading.get_ident()


TRIED = "tried the network (socket.connect(('127.0.0.1', 9))): examples run offline"


def test_a_blocking_tool_under_acall_is_refused_in_its_worker_thread() -> None:
    @defineTool(registry=None, blocking=True)
    def connects() -> int:
        """Connect, from the worker thread acall runs a blocking tool in."""
        return _connects()

    ident, problems = _run(connects, asynchronous=True)
    assert ident != threading.get_ident()
    assert problems == [TRIED]


def test_a_tool_under_a_thread_mode_timeout_is_refused_in_the_runner_thread() -> None:
    """The runner's thread is started before the block (by a first call): it runs the tool in a copy of the caller's
    context."""

    @defineTool(registry=None, timeout=60.0)
    def connects() -> int:
        """Connect, from the timeout runner's thread."""
        return _connects()

    registry = ToolRegistry(plugins=[])
    registry.add(connects)
    worker = registry.call("connects", {})
    value, _, problems = suite(example_budget=60.0).run_offline(registry, registry.get("connects"), {})
    assert value == worker != threading.get_ident()
    assert problems == [TRIED]


def test_a_non_blocking_connect_of_a_raw_socket_is_not_a_blocking_call() -> None:
    sock = _socket.socket()
    sock.setblocking(False)
    with blocking_calls() as blocked, contextlib.suppress(OSError):
        sock.connect(("127.0.0.1", 9))
    sock.close()
    assert blocked == []
