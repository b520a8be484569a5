"""Helpers shared by the MCP tests: real server processes, a long-lived SDK client, the npm tools."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
TOOLS = str(HERE / "mcp_tools.py")
#: Pinned to versions that run on Node 20 (the conformance suite needs Node 22 from 0.1.14 on).
NPM_PACKAGES = ("@modelcontextprotocol/inspector@0.15.0", "@modelcontextprotocol/conformance@0.1.13")


def server_env(tmp: Path) -> dict[str, str]:
    """Environment for a ``harness-one serve`` child: its own state store."""
    return {
        "HARNESS_ONE_STATE": f"sqlite:///{tmp / 'state.sqlite3'}",
        "PYTHONUNBUFFERED": "1",
    }


def serve_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "harness_one", "--tools", TOOLS, "serve", *extra]


@contextmanager
def http_server(tmp: Path, *extra: str) -> Iterator[str]:
    """``harness-one serve --transport http --port 0`` in a child process; yields its URL."""
    log = tmp / f"serve-{time.monotonic_ns()}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            serve_command("--transport", "http", "--port", "0", *extra),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, **server_env(tmp)},
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            found = re.search(r"serving MCP on (http://\S+)", log.read_text())
            if found:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"harness-one serve did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield found.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()


class Session:
    """An SDK ``Client`` owned by one task, so tests running in other tasks can share it.

    (anyio requires a client to be entered and exited by the same task; pytest runs a
    fixture's setup and teardown in different ones.)
    """

    def __init__(self, target: Any, **options: Any) -> None:
        self.target = target
        self.options = options
        self.messages: list[Any] = []
        self._ready: asyncio.Future[Any] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Any:
        from mcp import Client

        self._ready = asyncio.get_running_loop().create_future()

        async def collect(message: Any) -> None:
            self.messages.append(message)

        async def own() -> None:
            try:
                async with Client(self.target, message_handler=collect, **self.options) as client:
                    assert self._ready is not None
                    self._ready.set_result(client)
                    await self._stop.wait()
            except BaseException as exc:
                if self._ready is None or self._ready.done():
                    raise
                self._ready.set_exception(exc)

        self._task = asyncio.create_task(own())
        return await asyncio.wait_for(self._ready, 60)

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 30)


def npm_bin() -> Path:
    """The ``node_modules/.bin`` holding the pinned MCP Inspector and conformance suite, installed once.

    The cache is ``$HARNESS_ONE_NPM_CACHE`` (default ``~/.cache/harness-one/npm``); without
    ``npm`` the calling test is skipped.
    """
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (needed for the MCP Inspector and the conformance suite)")
    key = "-".join(p.rsplit("/", 1)[-1].replace("@", "-") for p in NPM_PACKAGES)
    root = Path(os.environ.get("HARNESS_ONE_NPM_CACHE") or Path.home() / ".cache" / "harness-one" / "npm") / key
    binary = root / "node_modules" / ".bin"
    if not (binary / "mcp-inspector").exists() or not (binary / "conformance").exists():
        root.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(root), *NPM_PACKAGES],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"npm install {' '.join(NPM_PACKAGES)} failed:\n{done.stderr[-3000:]}")
    return binary
