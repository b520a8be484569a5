"""Four worker processes share one rate limit through Redis.

    .venv/bin/python examples/redis_workers.py [redis://HOST:PORT/DB]

Without a URL it starts ``redis-server`` on a free port in a temporary directory (it must be
installed). Each worker runs 8 threads calling one tool limited to 20 calls/s with a burst of
10 for 3 seconds; together they admit 10 + 20 * 3 = 70 calls (+-1), not 4 x 70.
"""

from __future__ import annotations

import multiprocessing
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

RATE, BURST, SECONDS, WORKERS, THREADS = 20.0, 10, 3.0, 4, 8


def worker(url: str, start: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from harness_one import ToolRegistry

    registry = ToolRegistry(state=url + "?prefix=example:", autoload=False)
    registry.add(lambda: "ok", name="search", rate_limit={"rate": RATE, "burst": BURST})
    admitted = [0] * THREADS

    def run(i: int) -> None:
        time.sleep(max(start - time.time(), 0))
        while time.time() < start + SECONDS:
            if registry.try_call("search").ok:
                admitted[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(sum(admitted))


def main() -> None:
    server = None
    with tempfile.TemporaryDirectory() as tmp:
        if len(sys.argv) > 1:
            url = sys.argv[1]
        else:
            binary = shutil.which("redis-server")
            if binary is None:
                raise SystemExit("redis-server is not installed (apt-get install redis-server), or pass a redis:// URL")
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            server = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", ""], stdout=subprocess.DEVNULL
            )
            url = f"redis://127.0.0.1:{port}/0"
            time.sleep(0.3)
        try:
            spawn = multiprocessing.get_context("spawn")
            out = spawn.Queue()
            start = time.time() + 2.0  # time for the workers to start
            procs = [spawn.Process(target=worker, args=(url, start, out)) for _ in range(WORKERS)]
            for p in procs:
                p.start()
            counts = [out.get(timeout=60) for _ in procs]
            for p in procs:
                p.join()
        finally:
            if server is not None:
                server.kill()
                server.wait()
    expected = BURST + int(RATE * SECONDS)
    print(f"admitted per worker: {counts}; total {sum(counts)} (one shared limit: {expected} +-1)")


if __name__ == "__main__":
    main()
