"""The parts of the MCP package that need no server: specs, names, the MCP export, lazy imports, the CLI's errors."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one import Tool, ToolRegistry
from harness_one.export import to_mcp
from harness_one.mcp import McpConnectionError, McpSpec, McpSpecError, attach_servers, local_name, parse_mcp_spec

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_parse_mcp_spec() -> None:
    assert parse_mcp_spec("api=http://127.0.0.1:8000/mcp") == McpSpec(name="api", url="http://127.0.0.1:8000/mcp")
    files = parse_mcp_spec("files = npx -y '@scope/server files' /tmp")
    assert files.name == "files" and files.command == ("npx", "-y", "@scope/server files", "/tmp") and files.url is None
    assert files.prefix == ""
    assert parse_mcp_spec("files:fs=npx server") == McpSpec(name="files", command=("npx", "server"), prefix="fs")
    assert parse_mcp_spec("files:=npx server").prefix == "files"  # an empty prefix: the server name
    assert parse_mcp_spec("api:gh_=https://h/mcp?a=b") == McpSpec(name="api", url="https://h/mcp?a=b", prefix="gh_")
    for bad, needle in [
        ("nothing", "expected NAME[:PREFIX]=COMMAND_OR_URL"),
        ("=cmd", "expected NAME[:PREFIX]=COMMAND_OR_URL"),
        (":fs=cmd", "expected NAME[:PREFIX]=COMMAND_OR_URL"),
        ("x:bad prefix=cmd", "--mcp 'x:bad prefix=cmd': MCP server 'x': 'prefix' must be up to 32"),
        ("a b=cmd", "MCP server name 'a b'"),
        ("x=echo 'open", "cannot split the command"),
    ]:
        with pytest.raises(McpSpecError, match=re.escape(needle)):
            parse_mcp_spec(bad)


def test_config_tables() -> None:
    spec = McpSpec.from_table(
        "gh", {"command": ["gh-mcp", "--stdio"], "prefix": "gh_", "env": {"TOKEN": "s3cret"}, "policies": {"timeout": 10}}
    )
    assert spec.command == ("gh-mcp", "--stdio") and spec.prefix == "gh_" and spec.policies == {"timeout": 10}
    assert "s3cret" not in repr(spec)  # env and headers may hold secrets
    assert McpSpec.from_table("api", {"url": "https://api.example.com/mcp", "headers": {"Authorization": "x"}}).url
    assert spec.call_timeout == 300.0  # the default deadline of calls without a timeout policy
    assert McpSpec.from_table("a", {"command": ["a"], "call_timeout": 60}).call_timeout == 60
    assert McpSpec.from_table("a", {"command": ["a"], "call_timeout": False}).call_timeout is None
    for table, needle in [
        ({"command": ["a"], "tools": 1}, "mcp.servers.x: unknown keys ['tools']"),
        ({"command": "npx server"}, "'command' must be a list of strings"),
        ({"command": ["a"], "url": "http://h/mcp"}, "exactly one of 'command'"),
        ({}, "exactly one of 'command'"),
        ({"url": "ftp://h/mcp"}, "'url' must be an http:// or https:// URL"),
        ({"command": ["a"], "prefix": "bad prefix"}, "'prefix' must be up to 32"),
        ({"command": ["a"], "env": {"A": 1}}, "'env' must be a table of strings"),
        ({"command": ["a"], "policies": {"bogus": 1}}, "unknown policies ['bogus']"),
        ({"command": ["a"], "call_timeout": 0}, "'call_timeout' must be a positive number of seconds or false, got 0"),
        ({"command": ["a"], "call_timeout": "60"}, "'call_timeout' must be a positive number of seconds or false"),
    ]:
        with pytest.raises(McpSpecError, match=re.escape(needle)):
            McpSpec.from_table("x", table)


def test_local_names_are_valid_unique_and_stable() -> None:
    assert local_name("search") == "search" and local_name("search", "gh_") == "gh_search"
    assert local_name("search", "gh") == "gh_search" and local_name("search", "gh-") == "gh-search"
    assert local_name("files.read") == "files_read"
    taken = {"files_read"}
    other = local_name("files/read", taken=taken)
    assert other != "files_read" and other.startswith("files_read_") and VALID.match(other)
    long = local_name("x" * 100, "p_")
    assert len(long) == 64 and VALID.match(long) and long == local_name("x" * 100, "p_")
    assert local_name("x" * 101, "p_") != long
    assert VALID.match(local_name("日本語")) and VALID.match(local_name(""))


def test_mcp_export_annotations() -> None:
    import mcp.types

    def draw(low: int = 0, high: int = 10) -> int:
        """A random number: changes nothing, but is not declared read-only."""
        return low

    def delete(path: str) -> None:
        """Delete a file."""

    drawn = to_mcp(Tool.create(draw, open_world=False, options={"title": "Draw"}))
    assert drawn["title"] == "Draw"
    assert drawn["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,  # MCP's default for a tool not declared read-only or non-destructive
        "idempotentHint": False,
        "openWorldHint": False,
    }
    assert drawn["outputSchema"]["x-fastmcp-wrap-result"] is True  # an int travels as {"result": ...}
    reader = to_mcp(Tool.create(draw, read_only=True))["annotations"]
    assert (reader["readOnlyHint"], reader["destructiveHint"], reader["idempotentHint"]) == (True, False, True)
    assert to_mcp(Tool.create(delete, destructive=True))["annotations"]["destructiveHint"] is True
    assert to_mcp(Tool.create(draw, destructive=False))["annotations"]["destructiveHint"] is False
    for descriptor in (drawn, to_mcp(Tool.create(delete))):
        mcp.types.Tool.model_validate(descriptor)


def test_importing_harness_one_never_imports_the_sdk() -> None:
    code = (
        "import sys, harness_one, harness_one.mcp, harness_one.mcp._command, harness_one._cli; "
        "from harness_one.mcp import McpSpec, parse_mcp_spec; "
        "assert not [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')], 'mcp was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_attach_servers_reports_or_raises() -> None:
    registry = ToolRegistry(autoload=False)
    missing = McpSpec(name="gone", command=("/nonexistent/harness-one-test-server",))
    failures: list[str] = []
    assert attach_servers(registry, [missing], failures=failures) == []
    assert len(failures) == 1 and failures[0].startswith("mcp:gone: McpConnectionError: Cannot connect to MCP server 'gone'")
    with pytest.raises(McpConnectionError, match="Cannot connect to MCP server 'gone'"):
        attach_servers(registry, [missing])
    assert attach_servers(registry, []) == [] and len(registry) == 0


@pytest.fixture
def cli_logging() -> Iterator[None]:
    """The CLI configures structlog for the process; put back what the other tests expect."""
    import structlog

    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


def test_spec_errors_mask_the_credentials_they_quote(cli_logging: None) -> None:
    secret = "Sup3rSecretPw"
    for make in (
        lambda: parse_mcp_spec(f"a b=https://u:{secret}@host/mcp"),  # the --mcp value quoted
        lambda: McpSpec(name="a", url=f"ftp://u:{secret}@host/mcp"),
        lambda: McpSpec(name="a", command=("x", f"--db=postgres://u:{secret}@db/app", "")),
        lambda: McpSpec.from_table("a", {"command": ["x"], "prefix": f"https://u:{secret}@host"}),
    ):
        with pytest.raises(McpSpecError) as refused:
            make()
        assert secret not in str(refused.value) and "[REDACTED]@" in str(refused.value), str(refused.value)
    from harness_one._cli import main

    result = CliRunner().invoke(main, ["--mcp", f"a b=https://u:{secret}@host/mcp", "list"])
    assert result.exit_code == 2 and "[REDACTED]@host" in result.output and secret not in result.output


def test_serve_command_refuses_bad_options(cli_logging: None) -> None:
    from harness_one._cli import main

    runner = CliRunner()
    results: dict[str, Any] = {
        "mcp": runner.invoke(main, ["serve", "--mcp", "no-equals-sign"]),
        "path": runner.invoke(main, ["serve", "--transport", "http", "--path", "mcp"]),
    }
    assert results["mcp"].exit_code == 2 and "expected NAME[:PREFIX]=COMMAND_OR_URL" in results["mcp"].output
    assert results["path"].exit_code == 2 and "must start with '/'" in results["path"].output
    help_text = runner.invoke(main, ["serve", "--help"]).output
    assert "--transport [stdio|http]" in help_text and "NAME[:PREFIX]=COMMAND_OR_URL" in help_text
