"""Shared state: a wrong TLS setting or an unusable SQLite file is a configuration error, not an outage
(no fail mode applies), and a closed state's backends connect again at their next use."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import shutil
import sqlite3
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_support import _free_port, _missing, _spawn, answers

from harness_one import ToolRegistry
from harness_one.state import Record, SQLiteStore, StateUnavailable

# --------------------------------------------------------------------------- TLS


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 and its key (PEM files in ``directory``)."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "harness-one test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A redis-server listening with TLS only: its port and the certificate (its own CA)."""
    if shutil.which("redis-server") is None:
        _missing("redis-server is not installed")
    pytest.importorskip("redis")
    directory = tmp_path_factory.mktemp("redis-tls")
    cert, key = _certificate(directory)
    port = _free_port()
    tls = ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert), "--tls-key-file", str(key)]
    process = _spawn(_free_port(), directory, [*tls, "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"])
    try:
        import redis

        client = redis.Redis.from_url(f"rediss://127.0.0.1:{port}/0", ssl_ca_certs=str(cert), socket_timeout=1)
        if not answers(client, process):
            if process.poll() is not None:
                pytest.skip("this redis-server has no TLS (--tls-port refused): the TLS tests skip")
            raise RuntimeError("redis-server with TLS did not start")
        yield port, cert
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def _fail_open(url: str) -> tuple[ToolRegistry, list[int]]:
    """A registry on ``url`` whose plugins all fail open, with a rate-limited, budgeted, circuit-broken tool."""
    options = {name: {"on_state_error": "open"} for name in ("rate_limit", "idempotency", "circuit_breaker", "budget")}
    reg = ToolRegistry(state=url, autoload=False, plugin_options=options)
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or len(runs), name="t", rate_limit={"rate": 100, "burst": 100})
    return reg, runs


async def test_rediss_with_an_untrusted_certificate_is_a_configuration_error_not_an_outage(
    tls_server: tuple[int, Path],
) -> None:
    """A certificate the client does not trust failed the TLS handshake as a ConnectionError, an outage: every
    fail-open plugin admitted every call unchecked for as long as the URL stayed wrong. Now ``plugin_error``,
    sync and async, whatever ``on_state_error`` says; the message names the problem, not the address."""
    port, cert = tls_server
    reg, runs = _fail_open(f"rediss://127.0.0.1:{port}/0")
    for result in (reg.try_call("t"), await reg.atry_call("t"), reg.try_call("t", idempotency_key="k")):
        assert result.error is not None and result.error.kind == "plugin_error", result.error
        message = str(result.error)
        assert "did not trust the server's TLS certificate (CERTIFICATE_VERIFY_FAILED" in message
        assert "configuration error" in message and "127.0.0.1" not in message
    assert runs == [] and "state_failed_open" not in str(reg.stats())
    trusted, trusted_runs = _fail_open(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={cert}")
    assert trusted.call("t") == 1 and await trusted.acall("t") == 2 and len(trusted_runs) == 2


def test_tls_errors_that_say_the_ends_disagree_are_misconfiguration_and_a_cut_connection_an_outage() -> None:
    """By the ``ssl`` error redis-py chained: a refused certificate or a TLS alert or protocol error (also
    under a Redis Cluster client's error) is a configuration error; an EOF, a reset or a timeout mid-handshake
    can be an outage and takes the fail mode."""
    import redis
    from redis.exceptions import RedisClusterException

    from harness_one.state._redis import _cannot_decide, _misconfigured

    def wrapped(cause: BaseException, outer: type[Exception] = redis.ConnectionError) -> Exception:
        try:
            try:
                raise cause
            except OSError as exc:
                raise redis.ConnectionError("Error 1 connecting to 10.0.0.7:6380.") from exc
        except redis.ConnectionError as exc:
            if outer is redis.ConnectionError:
                return exc
            found = outer("Redis Cluster cannot be connected: 10.0.0.7:6380")
            found.__cause__ = exc
            return found

    verify = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    verify.reason = "CERTIFICATE_VERIFY_FAILED"
    alert = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    alert.reason = "WRONG_VERSION_NUMBER"
    cluster = getattr(redis.exceptions, "RedisClusterUnreachableError", RedisClusterException)
    for exc in (wrapped(verify), wrapped(alert), wrapped(verify, cluster)):
        assert not _cannot_decide(exc)
        err = _misconfigured(exc, cluster=isinstance(exc, RedisClusterException))
        assert err is not None and "configuration error" in str(err) and "10.0.0.7" not in str(err)
    assert "did not trust the server's TLS certificate" in str(_misconfigured(wrapped(verify), cluster=False))
    assert "failed the TLS handshake with the server (WRONG_VERSION_NUMBER" in str(_misconfigured(wrapped(alert), cluster=False))
    for cause in (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), ConnectionResetError(104, "reset")):
        assert _cannot_decide(wrapped(cause)) and _misconfigured(wrapped(cause), cluster=False) is None
    assert _cannot_decide(redis.TimeoutError("Timeout connecting to server"))


# --------------------------------------------------------------------------- SQLite


@pytest.mark.parametrize("kind", ["a text file", "a directory"])
async def test_a_sqlite_path_that_is_no_database_is_a_configuration_error_not_an_outage(tmp_path: Path, kind: str) -> None:
    """A state path naming a text file or a directory took the fail mode on every call for ever ("cannot be
    used now": an idempotency key that fails open ran its tool every time). Now ``plugin_error``, sync and
    async, whatever ``on_state_error`` says; and once the path is fit, the next call opens it."""
    path = tmp_path / "state.sqlite3"
    if kind == "a text file":
        path.write_text("not a database " * 100)
    else:
        path.mkdir()
    reg = ToolRegistry(state=f"sqlite://{path}", autoload=False, plugin_options={"idempotency": {"on_state_error": "open"}})
    runs: list[int] = []
    reg.add(lambda: runs.append(1) or len(runs), name="pay")
    for result in (reg.try_call("pay", idempotency_key="k"), await reg.atry_call("pay", idempotency_key="k")):
        assert result.error is not None and result.error.kind == "plugin_error", result.error
        assert "configuration error" in str(result.error) and str(tmp_path) not in str(result.error)
    assert runs == [] and "state_failed_open" not in str(reg.stats())
    with pytest.raises(Exception, match="The SQLite state cannot open its file") as raised:  # refused at a check
        reg.state.check()
    assert not isinstance(raised.value, StateUnavailable) and raised.value.where == str(path)  # type: ignore[attr-defined]
    if kind == "a text file":
        path.unlink()
    else:
        path.rmdir()
    assert reg.call("pay", idempotency_key="k") == 1 and await reg.acall("pay", idempotency_key="k") == 1 and runs == [1]


def test_a_locked_sqlite_file_is_still_unavailable_now(tmp_path: Path) -> None:
    """What passes (a file locked by another connection past the timeout) still takes the fail mode."""
    path = tmp_path / "state.sqlite3"
    SQLiteStore(path).open()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StateUnavailable, match="cannot be used now"):
            SQLiteStore(path, timeout=0.05).begin("t", "k", "fp", 0.0, 60.0)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_registry_goes_on_after_its_state_is_closed(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> None:
    """After ``State.close()`` a SQLite-backed registry failed every keyed call for good ("Cannot operate on a
    closed database", a replay too) while a Redis-backed one reconnected. Both go on now, sync and async,
    replays included."""
    url = f"sqlite:///{tmp_path / 's.sqlite3'}" if backend == "sqlite" else request.getfixturevalue("redis_url")
    reg = ToolRegistry(state=url, autoload=False)
    runs: list[int] = []

    def t(x: int) -> int:
        runs.append(x)
        return x

    reg.add(t, idempotent=True, max_concurrency=3, rate_limit={"rate": 100, "burst": 100})
    assert reg.call("t", {"x": 1}, idempotency_key="a") == 1
    reg.state.close()
    assert reg.call("t", {"x": 2}, idempotency_key="b") == 2
    reg.state.close()
    assert asyncio.run(reg.acall("t", {"x": 3}, idempotency_key="c")) == 3
    reg.state.close()
    assert reg.call("t", {"x": 1}, idempotency_key="a") == 1  # a replay of the first
    assert runs == [1, 2, 3]


def test_a_closed_sqlite_store_opens_its_file_again(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite3")
    assert store.begin("t", "k", "fp", 0.0, 60.0, owner="A") is None
    store.close()
    store.close()  # (twice is harmless)
    found: Any = store.begin("t", "k", "fp", 1.0, 60.0, owner="B")
    assert found is not None and found.state == "running"  # the claim made before close, read from the file
    store.close()
    assert asyncio.run(store.arenew("t", "k", 2.0, 60.0, owner="A")) is True
    store.close()


# ---------------------------------------------------------------- review of the SQLite changes


def test_a_closed_in_memory_store_stays_closed_so_no_key_runs_again() -> None:
    """An in-memory database is gone once closed: opened again it would be empty, and a key it held would run
    its tool a second time. It stays closed (StateUnavailable), as before."""
    store = SQLiteStore(":memory:")
    assert store.begin("t", "k", "fp", 0.0, 60.0, owner="A") is None
    store.close()
    with pytest.raises(StateUnavailable, match="closed in-memory database"):
        store.begin("t", "k", "fp", 0.0, 60.0, owner="B")


def test_storing_an_outcome_on_a_file_that_became_unusable_is_unavailable_not_a_configuration_error(tmp_path: Path) -> None:
    """Only a claim (nothing has run yet) takes a file that cannot be opened as a configuration error: storing the
    outcome of a tool that ran is StateUnavailable, which the plugin logs and returns the result."""
    path = tmp_path / "s.sqlite3"
    store = SQLiteStore(path, timeout=0.5)
    assert store.begin("t", "k", "fp", 0.0, 60.0, owner="A") is None
    store.close()
    path.unlink()
    path.mkdir()  # the path is now a directory: a claim would be refused as misconfiguration
    record = Record("fp", "done", 3600.0, True, 1, None)
    with pytest.raises(StateUnavailable):
        store.finish("t", "k", record, owner="A")
    with pytest.raises(sqlite3.OperationalError, match="configuration error"):
        store.begin("t", "k2", "fp", 0.0, 60.0, owner="B")


def test_cannot_open_is_a_configuration_error_only_where_the_path_says_why(tmp_path: Path) -> None:
    """SQLite says CANTOPEN when a process is out of file descriptors too: that passes, so it is an outage."""
    from harness_one.state._sqlite import _unopenable

    def cantopen() -> sqlite3.OperationalError:
        exc = sqlite3.OperationalError("unable to open database file")
        exc.sqlite_errorcode = sqlite3.SQLITE_CANTOPEN
        return exc

    fine = tmp_path / "fine.sqlite3"
    assert not _unopenable(cantopen(), str(fine))  # a writable directory, no file yet: e.g. out of descriptors
    assert _unopenable(cantopen(), str(tmp_path))  # a directory
    assert _unopenable(cantopen(), str(tmp_path / "missing" / "x.sqlite3"))  # no directory to hold it
    notadb = sqlite3.DatabaseError("file is not a database")
    notadb.sqlite_errorcode = sqlite3.SQLITE_NOTADB
    assert _unopenable(notadb, str(fine))
