"""Review 36, Redis state: a script's reply of a shape or range no script gives (from a server or proxy
that is not Redis) fails the call as a plugin error, never read as a decision (a budget spent, a circuit
open, an idempotency key claimed); ``stats()`` leaves out a circuit whose key holds another type, as
when Redis is down, instead of failing whole; a ``rediss://`` URL with a bad ``ssl_cert_reqs`` is
refused with the ``ValueError`` of any other bad option, its password masked."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from harness_one import PluginError, ToolRegistry

redis = pytest.importorskip("redis")

# ---------------------------------------------------------------- a fake server answering every script with one reply


class FakeRedis:
    """A server on 127.0.0.1 (port 0) that answers every ``EVALSHA``/``EVAL`` with ``reply`` (raw RESP)
    and any other command with ``+OK``; its threads end with :meth:`close`."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.1)
        buf = b""
        with conn:
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while True:
                    command, buf = _parse(buf)
                    if command is None:
                        break
                    name = command[0].upper()
                    conn.sendall(self.reply if name in (b"EVALSHA", b"EVAL") else _HELLO if name == b"HELLO" else b"+OK\r\n")

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(5)
        self.listener.close()


_HELLO = (
    b"%7\r\n+server\r\n+redis\r\n+version\r\n+7.0.0\r\n+proto\r\n:3\r\n+id\r\n:1\r\n"
    b"+mode\r\n+standalone\r\n+role\r\n+master\r\n+modules\r\n*0\r\n"
)


def _parse(buf: bytes) -> tuple[list[bytes] | None, bytes]:
    """The first whole RESP command of ``buf`` (None while incomplete) and the rest."""
    try:
        end = buf.index(b"\r\n")
        count, pos, args = int(buf[1:end]), end + 2, []
        for _ in range(count):
            end = buf.index(b"\r\n", pos)
            size = int(buf[pos + 1 : end])
            pos = end + 2
            if len(buf) < pos + size + 2:
                return None, buf
            args.append(buf[pos : pos + size])
            pos += size + 2
    except ValueError:
        return None, buf
    return args, buf[pos:]


@pytest.fixture
def fake() -> Iterator[Any]:
    servers: list[FakeRedis] = []

    def make(reply: bytes) -> FakeRedis:
        servers.append(FakeRedis(reply))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def _registry(url: str, kind: str, ran: list[int]) -> tuple[ToolRegistry, dict[str, Any]]:
    """A registry on ``url`` with one tool guarded by the plugin ``kind``, and the keywords of its call."""
    registry = ToolRegistry(autoload=False, state=url, plugin_options={"budget": {"max_calls": 5}})

    def tool(x: int) -> int:
        ran.append(x)
        return x

    if kind == "budget":
        registry.add(tool, name="t")
        return registry, {"context": {"run_id": "r"}}
    if kind == "circuit_breaker":
        registry.add(tool, name="t", circuit_breaker={"min_calls": 5})
        return registry, {}
    registry.add(tool, name="t", idempotent=True)
    return registry, {"idempotency_key": "k1"}


@pytest.mark.parametrize(
    ("kind", "reply"),
    [
        ("budget", b":5\r\n"),  # was BudgetExhausted "This run has already made None tool calls"
        ("budget", b"#f\r\n"),  # was counted (False read as 0) and run
        ("circuit_breaker", b"+OK\r\n"),  # was CircuitOpen "Retry after 79 s" (the bytes of 'OK' unpacked)
        ("circuit_breaker", b"*2\r\n:1\r\n:2\r\n"),  # was CircuitOpen: an integer wait
        ("idempotency", b"_\r\n"),  # was the key claimed (a RESP3 null read as nil) and the tool run
        ("idempotency", b"#f\r\n"),  # likewise
    ],
)
def test_an_odd_script_reply_fails_the_call_never_decides_it(fake: Any, kind: str, reply: bytes) -> None:
    server = fake(reply)
    ran: list[int] = []
    registry, keywords = _registry(server.url, kind, ran)
    with pytest.raises(PluginError) as sync:
        registry.call("t", {"x": 1}, **keywords)
    with pytest.raises(PluginError) as aio:
        asyncio.run(asyncio.wait_for(registry.acall("t", {"x": 1}, **keywords), 10))
    for error in (sync.value, aio.value):
        assert error.plugin == kind and "UnexpectedReply" in str(error) and "not read as a decision" in str(error)
    assert ran == []


def test_a_real_redis_still_claims_and_replays_over_resp2_and_resp3(redis_url: str) -> None:
    # The claim script answers 0 for "the key is the caller's" (it answered false: nil over RESP2, a boolean over RESP3).
    for url in (redis_url + "?protocol=2", redis_url + "?protocol=3"):
        ran: list[int] = []
        registry, keywords = _registry(url, "idempotency", ran)
        first = registry.try_call("t", {"x": 1}, **keywords)
        again = registry.try_call("t", {"x": 1}, **keywords)
        assert first.ok and again.ok and first.ran and not again.ran and again.value == 1 and ran == [1]
        redis.Redis.from_url(redis_url).flushall()


# ---------------------------------------------------------------- stats() with a circuit key of another type


def test_stats_leave_out_a_circuit_whose_key_holds_another_type(redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry(autoload=False, state=redis_url)
    registry.add(lambda: 1, name="bad", circuit_breaker={"min_calls": 5})
    registry.add(lambda: 2, name="good", circuit_breaker={"min_calls": 5})
    assert registry.call("bad") == 1 and registry.call("good") == 2
    client = redis.Redis.from_url(redis_url)
    [key] = [key for key in client.keys("*cb:*") if b"bad" in key]
    client.delete(key)
    client.set(key, "garbage")
    client.close()
    tools = registry.stats()["tools"]  # raised PluginError "circuit_breaker failed in harness_stats: ... WRONGTYPE"
    assert "circuit" not in tools["bad"] and tools["good"]["circuit"]["state"] == "closed"
    assert any("circuit not read for stats" in record.getMessage() for record in caplog.records)
    with pytest.raises(PluginError, match="WRONGTYPE"):  # a call still fails closed
        registry.call("bad")


# ---------------------------------------------------------------- a bad ssl_cert_reqs


def test_a_bad_ssl_cert_reqs_is_the_value_error_of_a_bad_option_with_the_password_masked() -> None:
    with pytest.raises(ValueError, match="refused by the Redis client: Invalid SSL Certificate") as refused:
        ToolRegistry(autoload=False, state="rediss://u:s3cret@127.0.0.1:6391/0?ssl_cert_reqs=bogus")
    assert "s3cret" not in str(refused.value) and "[REDACTED]" in str(refused.value)


def test_stats_leave_out_slots_whose_key_holds_another_type(redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry(autoload=False, state=redis_url)
    registry.add(lambda: 1, name="bad", max_concurrency=2)
    registry.add(lambda: 2, name="good", max_concurrency=2)
    assert registry.call("bad") == 1 and registry.call("good") == 2
    from harness_one.state import RedisLink
    from harness_one.state._redis import RedisSlots

    client = redis.Redis.from_url(redis_url)
    client.set(RedisSlots(RedisLink(redis_url))._keys("bad")[0], "garbage")  # (a slot key exists only while a call runs)
    client.close()
    running = registry.stats()["concurrency"]["running"]  # raised PluginError "... WRONGTYPE"
    assert "bad" not in running and running["good"] == 0
    assert any("slots not read for stats" in record.getMessage() for record in caplog.records)


# ---------------------------------------------------------------- replies a real Redis gives at the edges


def test_a_record_kept_for_good_or_on_a_clock_before_zero_is_read(redis_url: str) -> None:
    import math

    from harness_one.state import Record, RedisLink, RedisStore

    for url in (redis_url + "?protocol=2", redis_url + "?protocol=3"):
        store = RedisStore(RedisLink(url))
        store.finish("tool", "forever", Record("fp", "done", math.inf, True, "ran", None))
        found = store.begin("tool", "forever", "fp", 1000.0, 30)  # raised UnexpectedReply on b"inf"
        assert found is not None and found.expires == math.inf and found.value == "ran"
        assert store.begin("tool", "early", "fp", -100.0, 30, owner="a") is None  # the key is a's
        other = store.begin("tool", "early", "fp", -99.0, 30, owner="b")  # raised UnexpectedReply on b"-70"
        assert other is not None and other.state == "running" and other.expires == -70.0
        redis.Redis.from_url(redis_url).flushall()


def test_a_rate_so_slow_its_wait_overflows_is_a_refusal_on_redis_as_in_memory(redis_url: str) -> None:
    from harness_one import RateLimitExceeded

    for state in (None, redis_url):
        registry = ToolRegistry(autoload=False, state=state)
        registry.add(lambda: 1, name="slow", rate_limit={"rate": 1e-310, "burst": 1})
        assert registry.call("slow") == 1
        with pytest.raises(RateLimitExceeded) as refused:  # Redis: PluginError UnexpectedReply on b"inf"
            registry.call("slow")
        assert refused.value.retry_after == 1e12
    redis.Redis.from_url(redis_url).flushall()


def test_a_shared_circuit_that_cannot_be_read_is_read_once_for_stats(caplog: pytest.LogCaptureFixture) -> None:
    """Tools sharing one circuit read it once; one that cannot be read was read (and logged) again for each tool."""
    registry = ToolRegistry(autoload=False)
    for name in ("a", "b", "c"):
        registry.add(lambda: 1, name=name, circuit_breaker={"key": "backend", "min_calls": 5})
        assert registry.call(name) == 1  # (stats show the tools called)
    plugin = registry.plugins.get("circuit_breaker")
    reads: list[str] = []

    def unreadable(key: str, policy: Any, *, now: float) -> Any:
        reads.append(key)
        raise redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")

    plugin.store.snapshot = unreadable
    tools = registry.stats()["tools"]
    assert reads == ["backend"] and all("circuit" not in tools.get(name, {}) for name in ("a", "b", "c"))
    assert sum("circuit not read for stats" in record.getMessage() for record in caplog.records) == 1
