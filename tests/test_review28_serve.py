"""Review 28: serve's start-up failures, its host and transport options, the configuration file's
type and size, and the id of a ``run`` line that is not valid UTF-8."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp_support import TOOLS, serve_command, server_env

from harness_one import ToolRegistry
from harness_one._cli import main
from harness_one._config import MAX_CONFIG_BYTES, ConfigError, load_settings
from harness_one._requests import BadRequest, parse_line
from harness_one.mcp import _server, http_app
from harness_one.mcp import serve as serve_registry

UNRESOLVABLE = "harness-one-test.invalid"  # RFC 6761: a .invalid name never resolves


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port another socket listens on, on 127.0.0.1."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness_one", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **server_env(tmp_path)},
        timeout=60,
        check=False,
    )


def _registry() -> ToolRegistry:
    registry = ToolRegistry(state="memory:")

    def echo(text: str) -> str:
        """Echo text."""
        return text

    registry.add(echo)
    return registry


# ---------------------------------------------------------------- finding 2: a port in use, a name that does not resolve


def test_serve_http_on_a_port_in_use_is_one_error_line_exit_1(tmp_path: Path, busy_port: int) -> None:
    done = subprocess.run(
        serve_command("--transport", "http", "--port", str(busy_port)),
        capture_output=True,
        text=True,
        env={**os.environ, **server_env(tmp_path)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr == f"Error: cannot listen on 127.0.0.1:{busy_port}: Address already in use\n"


def test_serve_http_on_a_host_that_does_not_resolve_is_a_usage_error(tmp_path: Path) -> None:
    try:
        socket.getaddrinfo(UNRESOLVABLE, 0)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_NONAME:
            pytest.skip(f"the resolver does not say {UNRESOLVABLE} has no address: {exc}")
    done = _run(tmp_path, "--tools", TOOLS, "serve", "--transport", "http", "--host", UNRESOLVABLE, "--port", "0")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '--host': '{UNRESOLVABLE}' does not resolve: Name or service not known"
    )


def test_serve_python_api_raises_the_oserror_itself_not_an_exception_group(busy_port: int) -> None:
    """``serve`` in the main thread watches SIGTERM in a task group: a failure of the serving is raised as it is."""
    with pytest.raises(OSError) as raised:
        serve_registry(_registry(), "http", port=busy_port)
    assert type(raised.value) is _server._ListenError
    assert str(raised.value) == f"cannot listen on 127.0.0.1:{busy_port}: Address already in use"
    assert isinstance(raised.value.__cause__, OSError) and raised.value.__cause__.errno == 98


# ---------------------------------------------------------------- finding 3: an empty host


@pytest.mark.parametrize("host", ["", "  "])
def test_serve_refuses_an_empty_host(host: str) -> None:
    done = CliRunner().invoke(main, ["serve", "--transport", "http", "--host", host, "--port", "0"])
    assert done.exit_code == 2, done.output
    assert done.output.splitlines()[-1] == (
        f"Error: Invalid value for '--host': must be the address to bind ('127.0.0.1'; '0.0.0.0' for every IPv4 address), "
        f"not {host!r}"
    )


@pytest.mark.parametrize("host", ["", " "])
def test_http_app_and_serve_refuse_an_empty_host(host: str) -> None:
    wanted = f"host must be the address to bind ('127.0.0.1'; '0.0.0.0' for every IPv4 address), not {host!r}"
    with pytest.raises(ValueError) as raised:
        http_app(_registry(), host=host)
    assert str(raised.value) == wanted
    with pytest.raises(ValueError) as served:
        serve_registry(_registry(), "http", host=host, port=0)
    assert type(served.value) is ValueError and str(served.value) == wanted


# ---------------------------------------------------------------- finding 4: options of the other transport


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """What the command hands to ``serve`` (recorded, not served)."""
    given: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(_server, "serve", lambda registry, transport, **options: given.append((transport, options)))
    return given


def test_http_options_over_stdio_are_a_usage_error(served: list[tuple[str, dict[str, Any]]]) -> None:
    args = ["--tools", TOOLS, "serve", "--host", "0.0.0.0", "--port", "8080", "--allowed-host", "tools.example.com:443"]
    done = CliRunner().invoke(main, args, input="")
    assert done.exit_code == 2, done.output
    assert done.output.splitlines()[-1] == "Error: --host, --port and --allowed-host apply to --transport http only"
    one = CliRunner().invoke(main, ["serve", "--transport", "stdio", "--stateless"], input="")
    assert one.exit_code == 2 and one.output.splitlines()[-1] == "Error: --stateless applies to --transport http only"
    assert served == []


def test_drain_timeout_over_http_is_let_be_as_it_was(served: list[tuple[str, dict[str, Any]]]) -> None:
    """Wrappers pass --drain-timeout for either transport: refusing it with HTTP broke them."""
    done = CliRunner().invoke(main, ["serve", "--transport", "http", "--port", "0", "--drain-timeout", "5"])
    assert done.exit_code == 0, done.output
    assert served[0][0] == "http"


def test_each_transport_takes_its_own_options(served: list[tuple[str, dict[str, Any]]]) -> None:
    stdio = CliRunner().invoke(main, ["serve", "--drain-timeout", "5"], input="")
    http = CliRunner().invoke(main, ["serve", "--transport", "http", "--host", "::1", "--port", "0"])
    assert stdio.exit_code == 0 and http.exit_code == 0, (stdio.output, http.output)
    assert served[0] == ("stdio", {"drain_timeout": 5.0})
    assert served[1][0] == "http" and served[1][1]["host"] == "::1" and served[1][1]["port"] == 0


# ---------------------------------------------------------------- finding 7: the configuration file's type and size


def test_a_fifo_configuration_with_no_writer_reads_as_empty_without_waiting(tmp_path: Path) -> None:
    """A blocking open waited for a writer for ever."""
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    assert load_settings(str(fifo)).tools == []
    named = _run(tmp_path, "--config", str(fifo), "list", "--json")
    assert named.returncode == 0, named.stderr


def test_a_pipe_configuration_is_read_as_text_mode_read_it(tmp_path: Path) -> None:
    """`--config <(...)` and `--config /dev/stdin` are pipes: read (they were refused as FIFOs); a lone CR ends a
    line, as text mode read the file."""
    read, write = os.pipe()
    try:
        os.write(write, b'tools = ["m"]\r[logging]\rlevel = "debug"\r\n')
        os.close(write)
        settings = load_settings(f"/dev/fd/{read}")
    finally:
        os.close(read)
    assert settings.tools == ["m"]
    file = tmp_path / "cr.toml"
    file.write_bytes(b'tools = ["m"]\r[logging]\rlevel = "debug"\r')
    assert load_settings(str(file)).tools == ["m"]


def test_a_device_or_directory_configuration_is_refused_the_null_device_read_as_empty(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings("/dev/zero")
    assert str(raised.value) == "cannot read the configuration file '/dev/zero': it is a character device, not a regular file"
    with pytest.raises(ConfigError) as directory:
        load_settings(str(tmp_path))
    assert str(directory.value) == f"cannot read the configuration file '{tmp_path}': it is a directory, not a regular file"
    assert load_settings(os.devnull).tools == []


def test_a_configuration_file_over_1_mib_is_refused(tmp_path: Path) -> None:
    assert MAX_CONFIG_BYTES == 1 << 20
    file = tmp_path / "big.toml"
    line = b'tools = ["m"]\n'
    file.write_bytes(line + b"#" * (MAX_CONFIG_BYTES - len(line)))  # exactly the bound: read
    assert load_settings(str(file)).tools == ["m"]
    file.write_bytes(line + b"#" * (MAX_CONFIG_BYTES - len(line) + 1))
    with pytest.raises(ConfigError) as raised:
        load_settings(str(file))
    assert str(raised.value) == f"cannot read the configuration file '{file}': it is larger than 1 MiB"
    done = _run(tmp_path, "--config", str(file), "list")
    assert (done.returncode, done.stderr) == (2, f"Error: cannot read the configuration file '{file}': it is larger than 1 MiB\n")


def test_a_huge_configuration_file_is_not_read_whole(tmp_path: Path) -> None:
    """A sparse 4 GiB file, read under a 1 GiB address-space limit: refused from its first MiB, not a MemoryError."""
    file = tmp_path / "huge.toml"
    with file.open("wb") as out:
        out.truncate(4 << 30)
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "from harness_one._config import ConfigError, load_settings\n"
        "try:\n    load_settings(sys.argv[1])\nexcept ConfigError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(file)], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, f"cannot read the configuration file '{file}': it is larger than 1 MiB\n"), (
        done.stderr
    )


def test_a_configuration_file_not_utf8_still_names_the_byte(tmp_path: Path) -> None:
    file = tmp_path / "latin1.toml"
    file.write_bytes(b"# caf\xe9\ntools = []\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(str(file))
    assert str(raised.value) == f"{file}: not UTF-8 text (byte 0xe9 at position 5)"


# ---------------------------------------------------------------- finding 8: invalid UTF-8 answered on its id


def test_a_line_not_valid_utf8_keeps_its_readable_id() -> None:
    with pytest.raises(BadRequest) as raised:
        parse_line(b'{"id":"call_7","name":"echo","arguments":{"text":"caf\xe9"}}')
    assert str(raised.value) == "the line is not valid UTF-8 (byte 0xe9 at position 53)"
    assert raised.value.request_id == "call_7"
    with pytest.raises(BadRequest) as numbered:
        parse_line(b'{"id": 12, "name": "echo", "arguments": {"text": "\xff"}}')
    assert numbered.value.request_id == 12
    with pytest.raises(BadRequest) as decision:
        parse_line(b'{"approve": "call_3", "reason": "ok \xfe"}')
    assert decision.value.request_id == "call_3"


def test_a_line_whose_bad_byte_is_in_the_id_has_no_id() -> None:
    for line in (b'{"id":"caf\xe9","name":"echo","arguments":{}}', b'{"approve": "c\xe9"}', b'{"id": \xe9}', b"\xff"):
        with pytest.raises(BadRequest) as raised:
            parse_line(line)
        assert raised.value.request_id is None, line
        assert str(raised.value).startswith("the line is not valid UTF-8 (byte 0x"), line


def test_an_escaped_lone_surrogate_in_the_id_is_json_s_own_and_kept() -> None:
    # "\\ud800" and "\\udce9" are JSON escapes, not bad bytes: kept as a valid line's id is (shown as U+FFFD)
    for escape in ("\\ud800", "\\udce9"):
        line = b'{"id": "a' + escape.encode() + b'", "name": "echo", "arguments": {"text": "caf\xe9"}}'
        with pytest.raises(BadRequest) as raised:
            parse_line(line)
        assert raised.value.request_id == "a" + escape.encode().decode("unicode_escape"), line
    with pytest.raises(BadRequest) as both:  # an escape and a bad byte in the id: not answered
        parse_line(b'{"id": "\\ud800\xe9", "name": "echo"}')
    assert both.value.request_id is None


def test_run_answers_a_line_not_valid_utf8_on_its_id(tmp_path: Path) -> None:
    tools = tmp_path / "echo_tools.py"
    tools.write_text(
        'from harness_one import define_tool\n\n@define_tool\ndef echo(text: str) -> str:\n    """Echo."""\n    return text\n'
    )
    lines = (
        b'{"id":"call_7","name":"echo","arguments":{"text":"caf\xe9"}}\n{"id":"call_8","name":"echo","arguments":{"text":"ok"}}\n'
    )
    done = CliRunner().invoke(main, ["--tools", str(tools), "run", "--concurrency", "4"], input=lines)
    answers = sorted((json.loads(line) for line in done.stdout.splitlines()), key=lambda a: str(a["id"]))
    assert answers[0] == {
        "id": "call_7",
        "ok": False,
        "error": {
            "type": "InvalidRequest",
            "kind": "invalid_request",
            "message": "line 1: the line is not valid UTF-8 (byte 0xe9 at position 53)",
        },
    }
    assert answers[1] == {"id": "call_8", "ok": True, "result": "ok"}
