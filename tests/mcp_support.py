"""Helpers shared by the MCP tests: real server processes, a long-lived SDK client, the npm tools."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
TOOLS = str(HERE / "mcp_tools.py")
#: package.json and package-lock.json of the npm tools: the MCP Inspector's CLI 0.15.0 and the conformance
#: suite 0.1.13 (from 0.1.14 on it needs Node 22).
NPM_DIR = HERE / "mcp_npm"
#: npm's words for a registry it cannot reach.
_OFFLINE = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network")


def server_env(tmp: Path) -> dict[str, str]:
    """Environment for a ``harness-one serve`` child: its own state store."""
    return {
        "HARNESS_ONE_STATE": f"sqlite:///{tmp / 'state.sqlite3'}",
        "PYTHONUNBUFFERED": "1",
    }


def serve_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "harness_one", "--tools", TOOLS, "serve", *extra]


def serve_file(tmp: Path, requests: bytes, command: list[str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """``harness-one serve`` (``command``; default :func:`serve_command`) run to its end with a regular
    file of ``requests`` as its stdin (``serve < requests.jsonl``), its output captured."""
    path = tmp / f"requests-{time.monotonic_ns()}.jsonl"
    path.write_bytes(requests)
    with path.open("rb") as stdin:
        return subprocess.run(
            command or serve_command(),
            stdin=stdin,
            capture_output=True,
            env={**os.environ, **server_env(tmp)},
            timeout=60,
            check=False,
        )


@contextmanager
def serving(tmp: Path, command: list[str] | None = None, *, watchdog: float = 30) -> Iterator[subprocess.Popen[bytes]]:
    """``harness-one serve`` (``command``; default :func:`serve_command`) on raw pipes, killed on
    leaving, or after ``watchdog`` seconds if a test waits for it longer."""
    proc = subprocess.Popen(
        command or serve_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **server_env(tmp)},
    )
    timer = threading.Timer(watchdog, proc.kill)
    timer.start()
    try:
        yield proc
    finally:
        timer.cancel()
        proc.kill()


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
    """The ``node_modules/.bin`` holding the MCP Inspector CLI and the conformance suite, installed once.

    ``npm ci`` from ``tests/mcp_npm`` (exact versions in its lock file, ones that run on Node
    20) into ``$HARNESS_ONE_NPM_CACHE`` (default ``~/.cache/harness-one/npm``), one folder per
    lock file, moved into place only once complete. Without ``node``/``npm``, or when the npm
    registry cannot be reached, the calling test is skipped (fails with
    ``HARNESS_ONE_REQUIRE_NPM=1``); any other install failure fails it.
    """
    required = os.environ.get("HARNESS_ONE_REQUIRE_NPM") == "1"
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        (pytest.fail if required else pytest.skip)("node and npm are needed for the MCP Inspector and the conformance suite")
    lock = NPM_DIR / "package-lock.json"
    key = hashlib.sha256(lock.read_bytes()).hexdigest()[:12]
    root = Path(os.environ.get("HARNESS_ONE_NPM_CACHE") or Path.home() / ".cache" / "harness-one" / "npm") / key
    if not (root / ".installed").exists():
        _npm_install(npm, root, required)
    return root / "node_modules" / ".bin"


def _npm_install(npm: str, root: Path, required: bool) -> None:
    work = root.with_name(f"{root.name}.{os.getpid()}.tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(NPM_DIR / name, work / name)
    command = [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"]
    try:
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=300, check=False)
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        done, output = None, "npm ci timed out (ETIMEDOUT)"
    if done is None or done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        offline = [line for line in output.splitlines() if _OFFLINE.search(line)]
        if offline and not required:
            pytest.skip(f"the npm registry cannot be reached: {offline[0].strip()[:200]}")
        pytest.fail(f"npm ci in {NPM_DIR} failed:\n{output[-3000:]}")
    (work / ".installed").write_text("ok\n")
    try:
        work.rename(root)
    except OSError:  # installed meanwhile by another process: keep that one
        shutil.rmtree(work, ignore_errors=True)
