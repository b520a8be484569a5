"""The network the conformance kit refuses, seen through the interpreter's audit events: at import, in the probe's
fresh interpreter, and while an example runs, in this process (ways past the six socket functions it patched)."""

from __future__ import annotations

import _socket
import contextlib
import re
import threading
from typing import Any

import pytest
from test_conformance import _fresh_entry_points, message  # noqa: F401 - an autouse fixture

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


def test_offline_refuses_every_thread_until_the_block_ends() -> None:
    def lookup() -> str:
        try:
            _socket.getaddrinfo("localhost", 9)
        except OSError as exc:
            return str(exc)
        return "looked up"

    got: list[str] = []
    with offline() as attempts:
        worker = threading.Thread(target=lambda: got.append(lookup()))
        worker.start()
        worker.join()
    assert got == ["network access refused by the harness-one conformance kit: socket.getaddrinfo('localhost', 9)"]
    assert attempts == ["socket.getaddrinfo('localhost', 9)"]
    assert lookup() == "looked up"


def test_a_non_blocking_connect_of_a_raw_socket_is_not_a_blocking_call() -> None:
    sock = _socket.socket()
    sock.setblocking(False)
    with blocking_calls() as blocked, contextlib.suppress(OSError):
        sock.connect(("127.0.0.1", 9))
    sock.close()
    assert blocked == []
