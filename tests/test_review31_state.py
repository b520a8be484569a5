"""Review 31, shared state: a Redis key prefix refused for an empty hash tag is blamed on where it came from
(``HARNESS_ONE_REDIS_PREFIX``, the configuration file's ``[state] prefix``), not on a ``?prefix=`` the user never
wrote. A clock reading that is NaN or infinite is a ``ValueError`` in every backend before anything is kept
or sent (the call fails closed: a ``PluginError`` through the registry), where it made a bucket that never
refills or refills at once, a claim that never expires, and ``nan`` written into Redis; a ``finish`` with
one takes its ``now`` as unknown (another owner's live claim is kept)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from harness_one import ManualClock, PluginError, ToolRegistry, defineTool
from harness_one.state import MemoryBuckets, MemoryBudgets, MemoryCircuits, MemoryStore, Record, SQLiteStore

NOWHERE = "redis://127.0.0.1:1/0"
BROKEN = [math.nan, math.inf, -math.inf]


def _clock_error(now: float) -> str:
    return f"the clock's time is a finite number of seconds, not {now!r}: the clock is broken"


# --------------------------------------------------------------------------- finding 1: who is blamed


def test_an_empty_tag_prefix_from_the_environment_is_blamed_on_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_one._config import ENV_REDIS_PREFIX, environment_state

    monkeypatch.setenv("HARNESS_ONE_REDIS_URL", NOWHERE)
    monkeypatch.setenv(ENV_REDIS_PREFIX, "}x:")
    with pytest.raises(ValueError) as refused:
        ToolRegistry(state=environment_state(), autoload=True)
    assert "'}x:' (HARNESS_ONE_REDIS_PREFIX) makes an empty hash tag" in str(refused.value)
    # a URL that names its own prefix is still blamed on the URL, and prefix= on the argument
    monkeypatch.delenv(ENV_REDIS_PREFIX)
    with pytest.raises(ValueError, match=r"'app\{\}:' \(the URL's \?prefix=\)"):
        ToolRegistry(state=f"{NOWHERE}?prefix=app%7B%7D%3A", autoload=True)


@pytest.mark.parametrize("from_env", [False, True])
def test_an_empty_tag_prefix_from_the_configuration_is_blamed_on_its_key(
    from_env: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness_one._config import ConfigError, load_settings

    for name in ("HARNESS_ONE_REDIS_URL", "HARNESS_ONE_STATE", "HARNESS_ONE_REDIS_PREFIX", "HARNESS_ONE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "app.toml"
    config.write_text(f'[state]\nurl = "{NOWHERE}"\nprefix = "{"ok:" if from_env else "app{}:"}"\n')
    if from_env:
        monkeypatch.setenv("HARNESS_ONE_REDIS_PREFIX", "}x:")
    with pytest.raises(ConfigError) as refused:
        load_settings(str(config))
    where = "HARNESS_ONE_REDIS_PREFIX" if from_env else f"{config}: [state] prefix"
    assert f"({where}) makes an empty hash tag" in str(refused.value)
    assert "?prefix=" not in str(refused.value)
    config.write_text('[state]\nurl = "memory:"\nprefix = "app{}:"\n')  # no Redis: the prefix is not used
    monkeypatch.delenv("HARNESS_ONE_REDIS_PREFIX", raising=False)
    assert load_settings(str(config)).state == "memory:"


# --------------------------------------------------------------------------- finding 2: a broken clock


@pytest.mark.parametrize("now", BROKEN)
def test_the_memory_buckets_refuse_a_broken_reading_and_keep_the_bucket(now: float) -> None:
    buckets = MemoryBuckets()
    with pytest.raises(ValueError) as new:  # a new bucket read at NaN never refilled again
        buckets.acquire("t", 1.0, 1.0, 1.0, now)
    assert str(new.value) == _clock_error(now)
    assert len(buckets) == 0
    assert buckets.acquire("t", 1.0, 1.0, 1.0, 100.0) == 0.0  # empty now
    with pytest.raises(ValueError) as held:  # +inf refilled it at once; -inf refilled it at the next reading
        buckets.acquire("t", 1.0, 1.0, 1.0, now)
    assert str(held.value) == _clock_error(now)
    assert buckets.acquire("t", 1.0, 1.0, 1.0, 100.5) == pytest.approx(0.5)  # still empty: nothing refilled
    assert buckets.acquire("t", 1.0, 1.0, 1.0, 101.0) == 0.0  # and it refills from its last good reading


def test_a_broken_clock_fails_a_rate_limited_call_closed() -> None:
    class Broken(ManualClock):
        def now(self) -> float:
            return math.nan

    registry = ToolRegistry(clock=Broken(), autoload=True)
    ran: list[int] = []

    @defineTool(registry=registry, rate_limit={"rate": 1, "burst": 1})
    def echo(x: int) -> int:
        """Echo."""
        ran.append(x)
        return x

    for _ in range(2):
        with pytest.raises(PluginError, match="the clock's time is a finite number of seconds, not nan"):
            registry.call("echo", {"x": 1})
    assert ran == []


@pytest.mark.parametrize("now", BROKEN)
def test_the_memory_stores_refuse_a_broken_reading(now: float) -> None:
    store = MemoryStore()
    with pytest.raises(ValueError, match="the clock's time"):
        store.begin("tool", "k", "fp", now, 30.0, owner="o")
    assert len(store) == 0  # a NaN claim never expired: the key was held for ever
    assert store.begin("tool", "k", "fp", 100.0, 30.0, owner="o") is None
    with pytest.raises(ValueError, match="the clock's time"):
        store.renew("tool", "k", now, 30.0, owner="o")
    # finish: an unknown `now`, so another owner's live claim is kept (NaN found it expired and wrote over it)
    assert store.finish("tool", "k", Record("fp", "done", 200.0, True, 1, None), owner="p", now=now) is False
    assert store.begin("tool", "k", "fp", 101.0, 30.0, owner="q").state == "running"  # type: ignore[union-attr]
    circuits = MemoryCircuits()
    policy = _Policy()
    with pytest.raises(ValueError, match="the clock's time"):
        circuits.admit("t", policy, now=now)
    with pytest.raises(ValueError, match="the clock's time"):
        circuits.record("t", policy, now=now, failed=True, probe=0)
    budgets = MemoryBudgets()
    assert budgets.take("run", "s", limit=1, total=None, now=100.0, ttl=60.0) == 0
    with pytest.raises(ValueError, match="the clock's time"):  # NaN dropped every run's counts as expired
        budgets.take("run", "s", limit=1, total=None, now=now, ttl=60.0)
    assert budgets.take("run", "s", limit=1, total=None, now=101.0, ttl=60.0) == 1


def test_an_open_memory_circuit_is_not_let_through_by_a_nan_reading() -> None:
    circuits = MemoryCircuits()
    policy = _Policy()
    for _ in range(2):
        circuits.record("t", policy, now=100.0, failed=True, probe=0)
    assert circuits.admit("t", policy, now=100.0)[0] > 0  # open
    with pytest.raises(ValueError, match="the clock's time"):  # it let a probe through
        circuits.admit("t", policy, now=math.nan)
    assert circuits.admit("t", policy, now=101.0)[0] > 0


class _Policy:
    failure_ratio, min_calls, window, open_for, probes = 0.5, 2, 60.0, 30.0, 1


@pytest.mark.parametrize("now", BROKEN)
def test_the_sqlite_store_refuses_a_broken_reading(tmp_path: Path, now: float) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        with pytest.raises(ValueError, match="the clock's time"):  # inf: a claim that never expired; NaN: StateUnavailable
            store.begin("tool", "k", "fp", now, 30.0, owner="o")
        assert store.begin("tool", "k", "fp", 100.0, 30.0, owner="o") is None
        with pytest.raises(ValueError, match="the clock's time"):
            store.renew("tool", "k", now, 30.0, owner="o")
        assert store.finish("tool", "k", Record("fp", "done", 200.0, True, 1, None), owner="p", now=now) is False
        assert store.begin("tool", "k", "fp", 101.0, 30.0, owner="q").state == "running"  # type: ignore[union-attr]
    finally:
        store.close()


async def test_the_sqlite_store_refuses_a_broken_reading_on_the_asyncio_path(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        with pytest.raises(ValueError, match="the clock's time"):
            await store.abegin("tool", "k", "fp", math.inf, 30.0, owner="o")
        assert await store.abegin("tool", "k", "fp", 100.0, 30.0, owner="o") is None
        with pytest.raises(ValueError, match="the clock's time"):
            await store.arenew("tool", "k", math.nan, 30.0, owner="o")
    finally:
        store.close()


@pytest.mark.parametrize("now", BROKEN)
def test_the_redis_backends_refuse_a_broken_reading_before_writing(redis_url: str, now: float) -> None:
    import redis

    from harness_one.state import RedisBuckets, RedisBudgets, RedisCircuits, RedisLink, RedisSlots, RedisStore

    link = RedisLink(redis_url, prefix="c:", timeout=2)
    raw = redis.Redis.from_url(redis_url)
    try:
        buckets = RedisBuckets(link, server_time=False)
        with pytest.raises(ValueError, match="the clock's time"):  # it wrote 'at' = 'nan': a bucket never refilled
            buckets.acquire("t", rate=1.0, burst=1.0, cost=1.0, now=now)
        store = RedisStore(link)
        with pytest.raises(ValueError, match="the clock's time"):  # it wrote 'ex' = 'nan'
            store.begin("tool", "k", "fp", now, 30.0, owner="o")
        with pytest.raises(ValueError, match="the clock's time"):
            store.renew("tool", "k", now, 30.0, owner="o")
        with pytest.raises(ValueError, match="the clock's time"):
            RedisSlots(link, server_time=False).acquire("t", "h", cap=1, total=None, now=now, lease=30.0)
        with pytest.raises(ValueError, match="the clock's time"):
            RedisCircuits(link, server_time=False).admit("t", _Policy(), now=now)
        with pytest.raises(ValueError, match="the clock's time"):
            RedisBudgets(link, server_time=False).take("run", "s", limit=1, total=None, now=now, ttl=30.0)
        assert list(raw.scan_iter(match="c:*")) == []
        # on Redis's own clock (the default) the caller's `now` is not read
        assert RedisBuckets(link).acquire("t", rate=1.0, burst=1.0, cost=1.0, now=now) == 0.0
    finally:
        raw.close()
        link.close()


async def test_the_redis_backends_refuse_a_broken_reading_on_the_asyncio_path(redis_url: str) -> None:
    from harness_one.state import RedisBuckets, RedisLink, RedisStore

    link = RedisLink(redis_url, prefix="d:", timeout=2)
    try:
        with pytest.raises(ValueError, match="the clock's time"):
            await RedisBuckets(link, server_time=False).aacquire("t", rate=1.0, burst=1.0, cost=1.0, now=math.nan)
        with pytest.raises(ValueError, match="the clock's time"):
            await RedisStore(link).abegin("tool", "k", "fp", math.inf, 30.0, owner="o")
    finally:
        await link.aclose()


# --------------------------------------------------------------------------- finding 3: a reply that trickles in


class _Trickler:
    """A fake Redis on a local port: ``+OK`` to every command of the handshake (``HELLO`` refused), and to a script (``EVALSHA``,
    ``EVAL``) or a ``PING`` a reply of ``size`` bytes sent a byte every ``gap`` seconds (until the client
    hangs up or :meth:`stop`)."""

    def __init__(self, *, size: int = 400, gap: float = 0.02) -> None:
        import socket
        import threading

        self.size, self.gap = size, gap
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import threading

        self.server.settimeout(0.1)
        while not self.stopped.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: Any) -> None:
        conn.settimeout(0.1)
        buffer = b""
        with conn:
            while not self.stopped.is_set():
                try:
                    data = conn.recv(65536)
                except OSError:
                    continue
                if not data:
                    return
                buffer += data
                while True:
                    command, buffer = _command(buffer)
                    if command is None:
                        break
                    name = command[0].upper()
                    if name == b"HELLO":  # the client then speaks RESP2
                        conn.sendall(b"-ERR unknown command 'HELLO'\r\n")
                        continue
                    if name not in (b"EVALSHA", b"EVAL", b"PING"):
                        conn.sendall(b"+OK\r\n")
                        continue
                    reply = b"$%d\r\n%s\r\n" % (self.size, b"0" * self.size)
                    for i in range(len(reply)):
                        if self.stopped.wait(self.gap):
                            return
                        try:
                            conn.sendall(reply[i : i + 1])
                        except OSError:
                            return

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.server.close()


def _command(buffer: bytes) -> tuple[list[bytes] | None, bytes]:
    """The first whole RESP command of ``buffer`` (an array of bulk strings) and what follows it."""
    if not buffer.startswith(b"*") or b"\r\n" not in buffer:
        return None, buffer
    head, rest = buffer.split(b"\r\n", 1)
    parts: list[bytes] = []
    for _ in range(int(head[1:])):
        if b"\r\n" not in rest:
            return None, buffer
        length, rest = rest.split(b"\r\n", 1)
        size = int(length[1:])
        if len(rest) < size + 2:
            return None, buffer
        parts.append(rest[:size])
        rest = rest[size + 2 :]
    return parts, rest


@pytest.fixture
def trickler() -> Any:
    server = _Trickler()
    try:
        yield server
    finally:
        server.stop()


def _bounded(what: Any) -> tuple[BaseException | None, float]:
    """Run ``what()`` in a thread, waiting at most 20 s: what it raised (None) and the seconds it took."""
    import threading
    import time

    found: list[BaseException | None] = []

    def run() -> None:
        try:
            what()
            found.append(None)
        except BaseException as exc:
            found.append(exc)

    start = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    assert found, "the call was still waiting after 20 s"
    return found[0], time.monotonic() - start


def test_a_sync_call_whose_reply_trickles_in_ends_near_the_timeout(trickler: Any) -> None:
    """400 bytes at a byte every 20 ms take 8 s: each read gets a byte well within the 0.25 s timeout."""
    from harness_one.state import RedisBuckets, RedisLink, StateUnavailable

    link = RedisLink(f"redis://127.0.0.1:{trickler.port}/0", prefix="t:")
    try:
        buckets = RedisBuckets(link, server_time=False)
        raised, took = _bounded(lambda: buckets.acquire("t", rate=1.0, burst=1.0, cost=1.0, now=1.0))
        assert isinstance(raised, StateUnavailable), raised
        assert took < 4.0, took
        link._down_until = 0.0  # (the link is marked down: a plain command is tried at once)
        raised, took = _bounded(lambda: link.command("PING"))
        assert isinstance(raised, StateUnavailable), raised
        assert took < 4.0, took
    finally:
        link.close()


@pytest.mark.parametrize("scheme", ["redis+cluster", "rediss+cluster"])
def test_a_clusters_nodes_read_each_whole_reply_within_the_timeout(scheme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # RedisCluster.from_url put a rediss URL's plain SSLConnection over the connection class that bounds a whole reply
    import redis.cluster

    from harness_one.state._redis import RedisLink, _Connection, _SSLConnection

    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def nodes(self: Any, *args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(redis.cluster.NodesManager, "__init__", nodes)
    with pytest.raises(Stop):
        RedisLink(f"{scheme}://user:pw@127.0.0.1:7000/0").client  # noqa: B018 - made on first use
    options = seen.get("connection_kwargs") or seen
    assert options["connection_class"] is (_SSLConnection if scheme == "rediss+cluster" else _Connection)
    assert options.get("password") == "pw"
    assert [(node.host, node.port) for node in seen["startup_nodes"]] == [("127.0.0.1", 7000)]
