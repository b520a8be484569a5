"""Calls per second over MCP: ``harness-one serve`` beside FastMCP serving the same tool, one client.

The client is the official ``mcp`` SDK's ``Client`` (2026-07-28 by default, ``--mode
legacy`` for the 2025-11-25 handshake), calling ``add(a, b) -> int`` one call after another;
each server runs in its own process, over stdio and over streamable HTTP, each as it runs by
default (``harness-one serve``; FastMCP's ``mcp.run()``), with the same Python unless
``--fastmcp-python`` names another. Within a round the servers take turns every ``--chunk``
calls, so that a noisy machine slows both alike; the median round is shown, with the server
process's own CPU time per call (from /proc on Linux), which the client's share and other
load on the machine do not blur, and the median of the rounds' ratios.

    pip install -r bench/requirements.txt   # FastMCP, the peer
    python bench/mcp.py                     # --calls 300 --rounds 5 --chunk 20 --fastmcp-python PATH
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

# This file is named mcp.py: keep its folder off the path so that "import mcp" finds the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

HARNESS_TOOLS = '''
from harness_one import defineTool

@defineTool(registry=None, output_schema={"type": "integer"})
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

FASTMCP_SERVER = '''
import sys
from fastmcp import FastMCP

mcp = FastMCP("bench")

@mcp.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

if sys.argv[1] == "stdio":
    mcp.run(transport="stdio", show_banner=False, log_level="WARNING")
else:
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False, log_level="warning")
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[Any], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


class Server:
    """How to start one server: its stdio command, and its HTTP command plus URL."""

    def __init__(self, name: str, stdio: list[str], http: Callable[[int], list[str]], env: dict[str, str], marker: str) -> None:
        self.name, self.stdio, self.http, self.env, self.marker = name, stdio, http, env, marker

    @asynccontextmanager
    async def client(self, transport: str, mode: str) -> AsyncIterator[Any]:
        from mcp import Client, StdioServerParameters

        if transport == "stdio":
            params = StdioServerParameters(command=self.stdio[0], args=self.stdio[1:], env=self.env)
            async with Client(params, mode=mode) as client:
                yield client
            return
        port = free_port()
        proc = subprocess.Popen(
            self.http(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **self.env}
        )
        try:
            wait_for_port(port, proc)
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
                yield client
        finally:
            proc.terminate()
            proc.wait(10)


def server_pids(marker: str) -> list[int]:
    """This process's children whose command line contains ``marker`` (Linux; else none)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid() and marker in (stat.parent / "cmdline").read_text():
                pids.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user and system) used so far by ``pids``."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            continue
    return total


class Meter:
    """One server's wall-clock and server CPU seconds over the calls it answered."""

    def __init__(self, client: Any, pids: list[int]) -> None:
        self.client, self.pids = client, pids
        self.calls, self.seconds, self.cpu = 0, 0.0, 0.0

    async def run(self, calls: int) -> None:
        cpu = cpu_seconds(self.pids)
        started = time.perf_counter()
        for i in range(self.calls, self.calls + calls):
            result = await self.client.call_tool("add", {"a": i, "b": 1})
            if result.is_error or result.structured_content != {"result": i + 1}:
                raise RuntimeError(f"unexpected answer: {result}")
        self.seconds += time.perf_counter() - started
        self.cpu += cpu_seconds(self.pids) - cpu
        self.calls += calls

    def rate(self) -> tuple[float, float]:
        """Calls per second, and the server's CPU microseconds per call."""
        return self.calls / self.seconds, self.cpu / self.calls * 1e6


async def compare(
    servers: list[Server], transport: str, mode: str, calls: int, rounds: int, chunk: int
) -> dict[str, list[tuple[float, float]]]:
    """Per server, one (calls/s, server CPU us/call) per round.

    Within a round the servers take turns every ``chunk`` calls (the first turn alternating
    between rounds), so load on the machine that comes and goes hits both alike.
    """
    rates: dict[str, list[tuple[float, float]]] = {s.name: [] for s in servers}
    async with servers[0].client(transport, mode) as first, servers[1].client(transport, mode) as second:
        pairs = list(zip(servers, (first, second)))
        for _, client in pairs:
            await client.list_tools()
        pids = {server.name: server_pids(server.marker) for server in servers}
        for server, client in pairs:
            await Meter(client, pids[server.name]).run(max(20, calls // 10))  # warm-up
        for number in range(rounds):
            meters = [(server, Meter(client, pids[server.name])) for server, client in pairs]
            if number % 2:
                meters.reverse()
            for done in range(0, calls, chunk):
                for _, meter in meters:
                    await meter.run(min(chunk, calls - done))
            for server, meter in meters:
                rates[server.name].append(meter.rate())
    return rates


def httptools_in(python: str) -> str:
    found = subprocess.run([python, "-c", "import httptools"], capture_output=True, check=False).returncode == 0
    return "httptools" if found else "h11"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="calls per round (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per server and transport (default 5)")
    parser.add_argument("--chunk", type=int, default=20, help="calls per turn: the servers alternate within a round (default 20)")
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"], help="auto: 2026-07-28; legacy: 2025-11-25")
    parser.add_argument("--transports", default="stdio,http", help="comma-separated: stdio,http")
    parser.add_argument("--fastmcp-python", default=sys.executable, help="a Python with fastmcp installed")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tools, peer = Path(tmp) / "bench_tools.py", Path(tmp) / "fastmcp_server.py"
        tools.write_text(HARNESS_TOOLS)
        peer.write_text(FASTMCP_SERVER)
        env = {"HARNESS_ONE_STATE": f"sqlite:///{Path(tmp) / 'state.sqlite3'}", "PYTHONUNBUFFERED": "1"}
        harness = [sys.executable, "-m", "harness_one", "--tools", str(tools), "serve"]
        servers = [
            Server("harness-one", harness, lambda port: [*harness, "--transport", "http", "--port", str(port)], env, str(tools)),
            Server(
                "FastMCP",
                [args.fastmcp_python, str(peer), "stdio"],
                lambda port: [args.fastmcp_python, str(peer), "http", str(port)],
                {},
                str(peer),
            ),
        ]
        version = subprocess.run(
            [args.fastmcp_python, "-c", "import fastmcp; print(fastmcp.__version__)"], capture_output=True, text=True, check=False
        )
        if version.returncode != 0:
            sys.exit(f"{args.fastmcp_python} cannot import fastmcp: pip install -r bench/requirements.txt")
        parsers = f"uvicorn parses HTTP with {httptools_in(sys.executable)} (harness-one), {httptools_in(args.fastmcp_python)} (FastMCP)"
        print(
            f"one client (mcp SDK, mode={args.mode}), {args.rounds} rounds of {args.calls} sequential calls per server, "
            f"turns of {args.chunk}; FastMCP {version.stdout.strip()}; {parsers}"
        )
        print(f"{'transport':<10} {'server':<12} {'calls/s (median)':>17} {'min':>8} {'max':>8} {'server CPU us/call':>19}")
        for transport in [t.strip() for t in args.transports.split(",") if t.strip()]:
            load = os.getloadavg()[0]
            rates = asyncio.run(compare(servers, transport, args.mode, args.calls, args.rounds, args.chunk))
            medians = {name: statistics.median(r for r, _ in values) for name, values in rates.items()}
            cpus = {name: statistics.median(c for _, c in values) for name, values in rates.items()}
            for name, values in rates.items():
                low, high = min(r for r, _ in values), max(r for r, _ in values)
                print(f"{transport:<10} {name:<12} {medians[name]:>17.0f} {low:>8.0f} {high:>8.0f} {cpus[name]:>19.0f}")
            # The ratio of each round (both servers under the same load), the median of those.
            ratio = statistics.median(h[0] / f[0] for h, f in zip(rates["harness-one"], rates["FastMCP"]))
            cpu_ratio = statistics.median(
                f[1] / h[1] if h[1] else float("nan") for h, f in zip(rates["harness-one"], rates["FastMCP"])
            )
            print(f"{transport:<10} {'ratio':<12} {ratio:>16.2f}x {'':>17} {cpu_ratio:>18.2f}x")
            print(f"{'':<10} load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
