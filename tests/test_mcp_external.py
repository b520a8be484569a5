"""Other MCP implementations against ``harness-one serve``: the MCP Inspector CLI and the official conformance suite.

Both are npm packages, installed once into a cache by ``mcp_support.npm_bin`` (exact
versions in ``tests/mcp_npm/package-lock.json``, ones that run on Node 20).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_support import TOOLS, http_server, npm_bin, server_env

#: Scenarios for what harness-one does not serve (resources, prompts, logging, completion,
#: sampling, elicitation, non-text content), SSE resumability (SEP-1699 SHOULDs: no event store;
#: gone in 2026-07-28).
CONFORMANCE_BASELINE = [
    "server-sse-polling",
    "logging-set-level",
    "completion-complete",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
]
MUST_PASS = {
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "tools-call-with-progress",
    "json-schema-2020-12",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
}


@pytest.fixture(scope="module")
def tools_bin() -> Path:
    return npm_bin()


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-external")


@pytest.fixture(scope="module")
def url(tmp_module: Path) -> Any:
    with http_server(tmp_module) as found:
        yield found


def inspector(tools_bin: Path, tmp: Path, *target_and_method: str) -> Any:
    env = [arg for key, value in server_env(tmp).items() for arg in ("-e", f"{key}={value}")]
    done = subprocess.run(
        [str(tools_bin / "mcp-inspector-cli"), *env, "--cli", *target_and_method],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def stdio_target() -> list[str]:
    return [sys.executable, "-m", "harness_one", "--tools", TOOLS, "serve"]


def test_inspector_lists_and_calls_over_stdio(tools_bin: Path, tmp_module: Path) -> None:
    listing = inspector(tools_bin, tmp_module, *stdio_target(), "--method", "tools/list")
    tools = {t["name"]: t for t in listing["tools"]}
    assert {"add", "wait", "whoami", "test_simple_text"} <= set(tools)
    assert tools["add"]["annotations"]["idempotentHint"] is True
    call = [*stdio_target(), "--method", "tools/call", "--tool-name", "add", "--tool-arg"]
    answer = inspector(tools_bin, tmp_module, *call, "a=2", "b=3")
    assert answer["content"][0]["text"] == "5" and answer["structuredContent"] == {"result": 5}


def test_inspector_over_http(tools_bin: Path, tmp_module: Path, url: str) -> None:
    listing = inspector(tools_bin, tmp_module, url, "--transport", "http", "--method", "tools/list")
    assert "add" in {t["name"] for t in listing["tools"]}
    call = [url, "--transport", "http", "--method", "tools/call", "--tool-name", "add", "--tool-arg"]
    answer = inspector(tools_bin, tmp_module, *call, "a=20", "b=22")
    assert answer["structuredContent"] == {"result": 42}
    refused = inspector(tools_bin, tmp_module, *call, "a=2")  # an argument error: a result, not a protocol error
    assert refused["isError"] is True and "$.b" in refused["content"][0]["text"]
    assert refused["_meta"]["harness-one/error"]["kind"] == "invalid_arguments"


@pytest.fixture(scope="module")
def stateless_url(tmp_module: Path) -> Any:
    with http_server(tmp_module, "--stateless") as found:
        yield found


@pytest.mark.parametrize("mode", ["sessions", "stateless"])
def test_conformance_suite(tools_bin: Path, tmp_module: Path, mode: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("url" if mode == "sessions" else "stateless_url")
    expected, must = list(CONFORMANCE_BASELINE), set(MUST_PASS)
    if mode == "stateless":  # no session, so no standalone GET stream beside the POST streams (warnings only)
        expected.append("server-sse-multiple-streams")
        must.discard("server-sse-multiple-streams")
    baseline = tmp_module / f"conformance-baseline-{mode}.yml"
    baseline.write_text("server:\n" + "".join(f"  - {name}\n" for name in expected))
    done = subprocess.run(
        [str(tools_bin / "conformance"), "server", "--suite", "all", "--url", url, "--expected-failures", str(baseline)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_module,
    )
    out = done.stdout + done.stderr
    summary = out[out.rfind("=== SUMMARY ===") :]
    passed = set(re.findall(r"✓ (\S+):", summary))
    failed = set(re.findall(r"✗ (\S+):", summary))
    total = re.search(r"Total: (\d+) passed, (\d+) failed", summary)
    print(
        f"conformance ({mode}): {len(passed)} scenarios passed, {len(failed)} failed; checks {total.group(0) if total else '?'}"
    )
    assert passed >= must, summary
    assert failed <= set(expected), summary
    assert done.returncode == 0, summary  # no unexpected failure, no stale baseline entry
