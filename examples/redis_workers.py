"""Four worker processes share one rate limit through Redis.

    .venv/bin/python examples/redis_workers.py [redis://HOST:PORT/DB] [--seconds 3]

Without a URL it starts ``redis-server`` on a free port in a temporary directory (it must be
installed). The URL may carry options (``?timeout=1``); the example's keys go under the
``example:`` prefix. Each worker runs 8 threads calling one tool limited to 20 calls/s with a
burst of 10. The clock starts once every worker has started and reached Redis, however long
that takes on a busy machine; then the threads call for 3 seconds (``--seconds``). Together
they admit 10 + 20 per second of the window from the first admitted call to the last, +-1, not
4 x that. The window is ``--seconds`` give or take a twentieth of a second on a quiet machine,
so about 70 calls for 3 s. The example prints the window and the expected total, and exits 0
when the total is within the tolerance; 1, with a message on stderr, when it is not or when
Redis is unavailable (a call Redis does not answer is refused and counted, never admitted
unchecked).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

RATE, BURST, SECONDS, WORKERS, THREADS = 20.0, 10, 3.0, 4, 8
PREFIX = "example:"  # the namespace of the example's keys, apart from other applications'
TOLERANCE = 1
STARTUP = 120.0  # seconds the workers may take to start (imports on a cold, busy machine)
LEAD = 0.2  # seconds between the last worker being ready and the first call


def worker(url: str, seconds: float, go: Any, start: Any, out: Any) -> None:
    """Report ``("ready",)``, wait for ``go``, call from ``start.value`` for ``seconds``, report the outcome."""
    from harness_one import ToolRegistry
    from harness_one.state import State, StateUnavailable

    # Closed: a call Redis does not answer is refused (and counted here), never admitted unchecked.
    options = {"rate_limit": {"on_state_error": "closed"}}
    registry = ToolRegistry(state=State(url, prefix=PREFIX), autoload=False, plugin_options=options)
    registry.add(lambda: "ok", name="search", rate_limit={"rate": RATE, "burst": BURST})
    # A first call through a bucket of its own: the connection is open and the script loaded
    # before the clock starts, so the first call of the run reaches Redis at once.
    registry.add(lambda: "ok", name="warm_up", rate_limit={"rate": RATE, "burst": BURST})
    warm = registry.try_call("warm_up")
    if isinstance(warm.error, StateUnavailable):
        out.put(("unavailable", str(warm.error)))
        return
    out.put(("ready",))
    if not go.wait(STARTUP) or start.value <= 0:  # the run was called off
        return
    begin, end = start.value, start.value + seconds
    admitted = [0] * THREADS
    unavailable = [0] * THREADS
    # Each thread's first admitted call began, and its last one ended: the bucket starts with the
    # first call Redis runs (always admitted), and a refused call's wait adds nothing to count.
    spans: list[tuple[float, float]] = []

    def run(i: int) -> None:
        time.sleep(max(begin - time.time(), 0))
        first = last = 0.0
        while time.time() < end:
            began = time.time()
            result = registry.try_call("search")
            if result.ok:
                admitted[i] += 1
                first, last = first or began, time.time()
            elif isinstance(result.error, StateUnavailable):
                unavailable[i] += 1
        if first:
            spans.append((first, last))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = min((s[0] for s in spans), default=0.0)
    last = max((s[1] for s in spans), default=0.0)
    out.put(("done", sum(admitted), sum(unavailable), first, last))


def verdict(total: int, window: float) -> tuple[int, str | None]:
    """The total one shared limit admits over ``window`` seconds, and what is wrong with ``total`` (None: it held)."""
    expected = BURST + int(RATE * window)
    if abs(total - expected) <= TOLERANCE:
        return expected, None
    return expected, (
        f"the shared limit did not hold: {total} calls admitted in {window:.2f} s, "
        f"expected {expected} +-{TOLERANCE} ({BURST} + {RATE:g}/s x {window:.2f} s)"
    )


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


def check_redis(url: str) -> None:
    """Exit with a message unless Redis answers at ``url``."""
    from harness_one.state import State, StateUnavailable

    try:
        link = State(url, prefix=PREFIX).link()  # ValueError: not a Redis URL
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    try:
        link.command("PING")
    except StateUnavailable as exc:
        raise SystemExit(f"Redis at {shown(url)} is unavailable: {exc}") from None
    finally:
        link.close()


def shown(url: str) -> str:
    """``url`` as printed: its password masked, as harness-one's own messages mask it."""
    from harness_one import redact

    return str(redact(url))


def receive(out: Any, procs: list[Any], within: float) -> tuple[Any, ...]:
    """The next worker's message, waiting up to ``within`` seconds; exits if a worker died without one."""
    deadline = time.monotonic() + within
    while True:
        try:
            return out.get(timeout=0.5)  # type: ignore[no-any-return]
        except queue.Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if failed:
                raise SystemExit(f"a worker failed (exit code {failed[0]})") from None
            if time.monotonic() > deadline:
                raise SystemExit(f"the workers did not answer within {within:g} s") from None


def run_workers(url: str, seconds: float) -> list[tuple[int, int, float, float]]:
    """Start the workers, start the clock once all are ready, and return each one's ``(admitted, unavailable, first, last)``."""
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    go = spawn.Event()
    start = spawn.Value("d", 0.0)
    procs = [spawn.Process(target=worker, args=(url, seconds, go, start, out)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            message = receive(out, procs, STARTUP)
            if message[0] == "unavailable":
                raise SystemExit(f"Redis at {shown(url)} is unavailable: {message[1]}")
        start.value = time.time() + LEAD
        go.set()
        return [receive(out, procs, STARTUP + seconds)[1:] for _ in procs]
    finally:
        go.set()  # a worker still waiting finds start 0 and ends
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description="Four worker processes share one rate limit through Redis.")
    parser.add_argument("url", nargs="?", help="a redis:// URL (default: start a redis-server here)")
    parser.add_argument("--seconds", type=float, default=SECONDS, help=f"how long the workers call (default {SECONDS:g})")
    options = parser.parse_args()
    if not 0 < options.seconds < math.inf:
        parser.error("--seconds must be a positive finite number")
    server = None
    with tempfile.TemporaryDirectory() as tmp:
        url = options.url
        if url is None:
            server, url = start_redis(tmp)
        try:
            check_redis(url)
            results = run_workers(url, options.seconds)
        finally:
            if server is not None:
                server.kill()
                server.wait()
    counts = [admitted for admitted, _, _, _ in results]
    refused = sum(unavailable for _, unavailable, _, _ in results)
    spans = [(first, last) for _, _, first, last in results if first]  # the workers that were admitted a call
    # In hundredths, as printed: the expected total is the one for the window shown.
    window = round(max(last for _, last in spans) - min(first for first, _ in spans), 2) if spans else 0.0
    expected, problem = verdict(sum(counts), window)
    print(
        f"admitted per worker: {counts}; total {sum(counts)} "
        f"(one shared limit: {BURST} + {RATE:g}/s x {window:.2f} s = {expected} +-{TOLERANCE})"
    )
    if refused:
        problem = f"Redis at {shown(url)} did not answer {refused} calls during the run: the limit could not be checked"
    if problem is not None:
        sys.exit(problem)
    print("the shared limit held")


if __name__ == "__main__":
    main()
