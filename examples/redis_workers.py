"""Four worker processes share one rate limit through Redis.

    .venv/bin/python examples/redis_workers.py [redis://HOST:PORT/DB] [--seconds 3]

Without a URL it starts ``redis-server`` on a free port in a temporary directory (it must be
installed). The URL may carry options (``?timeout=1``); the example's keys go under the
``example:`` prefix. Each worker runs 8 threads calling one tool limited to 20 calls/s with a
burst of 10 for 3 seconds (``--seconds``); together they admit 10 + 20 per second of the time
they spent calling (70 +-1 over 3 s), not 4 x that. The time is measured from the first call
any worker began to the last one any worker ended (on a busy machine the workers may start late).
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import socket
import subprocess
import tempfile
import threading
import time

RATE, BURST, SECONDS, WORKERS, THREADS = 20.0, 10, 3.0, 4, 8
PREFIX = "example:"  # the namespace of the example's keys, apart from other applications'


def worker(url: str, start: float, seconds: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from harness_one import ToolRegistry
    from harness_one.state import State

    registry = ToolRegistry(state=State(url, prefix=PREFIX), autoload=False)
    registry.add(lambda: "ok", name="search", rate_limit={"rate": RATE, "burst": BURST})
    admitted = [0] * THREADS
    spans = [(0.0, 0.0)] * THREADS  # each thread's first call began, last call ended

    def run(i: int) -> None:
        time.sleep(max(start - time.time(), 0))
        first = last = time.time()
        while last < start + seconds:
            if registry.try_call("search").ok:
                admitted[i] += 1
            last = time.time()
        spans[i] = (first, last)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((sum(admitted), min(s[0] for s in spans), max(s[1] for s in spans)))


def start_redis(directory: str) -> tuple[subprocess.Popen[bytes], str]:
    """A ``redis-server`` on a free port keeping its files in ``directory``, once it answers."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server), or pass a redis:// URL")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory, "--save", ""]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, socket_timeout=1)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                client.ping()
                return server, url
            except redis.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    server.kill()
                    raise SystemExit(f"redis-server did not start on port {port}") from None
                time.sleep(0.02)
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="Four worker processes share one rate limit through Redis.")
    parser.add_argument("url", nargs="?", help="a redis:// URL (default: start a redis-server here)")
    parser.add_argument("--seconds", type=float, default=SECONDS, help=f"how long the workers call (default {SECONDS:g})")
    options = parser.parse_args()
    server = None
    with tempfile.TemporaryDirectory() as tmp:
        url = options.url
        if url is None:
            server, url = start_redis(tmp)
        try:
            spawn = multiprocessing.get_context("spawn")
            out = spawn.Queue()
            start = time.time() + 2.0  # time for the workers to start
            procs = [spawn.Process(target=worker, args=(url, start, options.seconds, out)) for _ in range(WORKERS)]
            for p in procs:
                p.start()
            results = [out.get(timeout=60) for _ in procs]
            for p in procs:
                p.join()
        finally:
            if server is not None:
                server.kill()
                server.wait()
    counts = [admitted for admitted, _, _ in results]
    window = max(last for _, _, last in results) - min(first for _, first, _ in results)
    expected = BURST + int(RATE * window)
    print(
        f"admitted per worker: {counts}; total {sum(counts)} "
        f"(one shared limit: {BURST} + {RATE:g}/s x {window:.2f} s = {expected} +-1)"
    )


if __name__ == "__main__":
    main()
