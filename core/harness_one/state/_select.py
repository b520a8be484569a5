"""A registry's state location, from a URL: which backend each kind of shared state uses."""

from __future__ import annotations

import importlib.util
import inspect
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, parse_qsl, unquote, urlencode, urlparse, urlunparse

from .._redact import redact
from ._memory import MemoryBuckets, MemoryBudgets, MemoryCircuits, MemorySlots, MemoryStore
from ._protocols import BudgetStore, CircuitStore, ConcurrencySlots, IdempotencyStore, RateLimitBackend, positive_seconds

__all__ = ["REDIS_SCHEMES", "State", "open_state", "redis_keys", "split_redis_url"]

#: URL schemes that put every kind of state on Redis.
REDIS_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")


#: URL schemes of a Redis Cluster (the client discovers the other nodes from the given one).
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


#: Socket options of a Redis URL that a link's ``timeout`` sets instead: redis-py lets a URL's options win over
#: keyword arguments, so ``?socket_timeout=60`` would let one operation wait 60 s, not ``timeout``.
LINK_TIMEOUTS = ("socket_timeout", "socket_connect_timeout")


def split_redis_url(url: str, *, link: bool = False) -> tuple[str, dict[str, str], bool]:
    """The URL without harness-one's own query options (``prefix``, ``timeout``), those options,
    and whether it names a Redis Cluster (``redis+cluster://``, given to the client as ``redis://``).
    ``decode_responses`` is dropped: the backends read Redis's replies as bytes; with ``link`` (the URL
    the client is given) :data:`LINK_TIMEOUTS` too.

    A malformed option is refused here, when the state is made, not later in each plugin (where
    the plugin would be left on state of its own process).
    """
    parsed = urlparse(url)
    ours: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for name, value in parse_qsl(parsed.query, keep_blank_values=True):
        if name in ("prefix", "timeout"):
            ours[name] = value
        elif name != "decode_responses" and not (link and name in LINK_TIMEOUTS):
            rest.append((name, value))
    if "timeout" in ours:
        _bounded(positive_seconds(ours["timeout"], "the Redis state URL's timeout"), "timeout")
    cluster = parsed.scheme in CLUSTER_SCHEMES
    if cluster:
        parsed = parsed._replace(scheme=parsed.scheme.removesuffix("+cluster"))
    return urlunparse(parsed._replace(query=urlencode(rest))), ours, cluster


#: The key prefix of a Redis state that sets none.
DEFAULT_PREFIX = "harness-one:"


def slot_tag(prefix: str) -> str:
    """The hash tag's part of a concurrency slot's Redis keys: both keys of a slot script start with it."""
    return f"{prefix}{{{prefix}cc}}"


def redis_prefix(prefix: str | None, options: dict[str, str], *, where: str | None = None) -> str:
    """The Redis key prefix used: ``prefix`` when given, else the URL's ``?prefix=`` (``options``, from
    :func:`split_redis_url`), else :data:`DEFAULT_PREFIX`. ``TypeError`` when it is not a ``str``;
    ``ValueError`` naming it and where it came from when it makes an empty hash tag. Redis Cluster hashes
    a key by the text between its first ``{`` and the first ``}`` after it, or, when that text is empty,
    by the whole key: a concurrency script's two keys would then fall in two slots (``CROSSSLOT`` on every
    capped call). Refused on every Redis (the same prefix may later name a Cluster). A non-empty tag
    (``{tenant-a}:``) is kept: every key of the prefix then hashes to that tag's one slot, on one node.
    The message names ``where`` (the variable or configuration key that set it), else ``prefix=`` or the URL."""
    if where is None:
        where = "prefix=" if prefix is not None else "the URL's ?prefix="
    used: object = prefix if prefix is not None else options.get("prefix", DEFAULT_PREFIX)
    if not isinstance(used, str):
        raise TypeError(f"the Redis key prefix ({where}) is a str, not {used!r}")
    key = slot_tag(used)  # the first '{' of every key is the prefix's, or else this tag's
    start = key.index("{")
    if key[start + 1 : start + 2] == "}":
        raise ValueError(
            f"the Redis key prefix {used!r} ({where}) makes an empty hash tag ('{{' then '}}'): Redis Cluster"
            " then hashes each key whole, and a concurrency script's two keys fall in different slots"
            " (CROSSSLOT); put a name between the braces ('{tenant-a}:') or use a prefix without them"
        )
    return used


def redis_keys(state: State) -> tuple[tuple[str, str, int, str, bool], str] | None:
    """Where a Redis ``state`` keeps its keys: the server its client is given (scheme, host in lower case, port,
    database: the defaults 6379 and 0 filled in; a cluster or not) and the key prefix it uses; None for a state
    not in Redis. Two states with the same answer share every key (``url`` and ``url + "?timeout=1"``,
    ``redis://localhost`` and ``redis://LOCALHOST:6379/0``, the default prefix given or not, ``prefix="a:"``
    and ``?prefix=a:``)."""
    if not state.redis:
        return None
    url, options, cluster = split_redis_url(state.url or "", link=True)
    parsed = urlparse(url)
    server = (
        parsed.scheme,
        (parsed.hostname or "").lower(),
        parsed.port or 6379,
        unquote(parsed.path).strip("/") or "0",
        cluster,
    )
    return server, redis_prefix(state.prefix, options)


#: The most seconds a Redis timeout may be (~11.6 days): a larger one overflows the socket's timeout.
MOST_SECONDS = 1e6


def _bounded(seconds: float, name: str) -> float:
    if not seconds <= MOST_SECONDS:
        raise ValueError(f"the Redis state URL's {name} is {seconds!r} seconds: at most {MOST_SECONDS:g}")
    return seconds


def check_redis_url(url: str) -> None:
    """Refuse now what the Redis client would refuse only when a plugin makes its link (each plugin
    then left on state of its own process): a port out of range, a database that is not a number
    (or not 0 on a Redis Cluster), an option the client does not take or with a bad value, a socket
    timeout over :data:`MOST_SECONDS`. Parses with redis-py and builds a connection object (no
    connection is made). ``ValueError``, naming the URL without its password."""
    from redis import RedisCluster, RedisError
    from redis.cluster import REDIS_ALLOWED_KEYS
    from redis.connection import ConnectionPool, parse_url

    plain, ours, cluster = split_redis_url(url)
    parsed = urlparse(plain)
    try:
        port = parsed.port
        options = parse_url(plain)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise ValueError(f"state URL {_shown(url)} is malformed: {exc}") from None
    if port == 0:
        raise ValueError(f"state URL {_shown(url)} is malformed: port 0")
    path = unquote(parsed.path).strip("/")
    if path and not path.isdigit():
        raise ValueError(f"state URL {_shown(url)} names the database {path!r}: use a number ('redis://HOST:PORT/0')")
    db = options.get("db", 0)
    if cluster and db != 0:
        raise ValueError(f"state URL {_shown(url)} names database {db}: a Redis Cluster has only database 0")
    for name in ("socket_timeout", "socket_connect_timeout"):
        if name in options:
            seconds = options[name]
            if not seconds > 0:
                raise ValueError(f"the Redis state URL's {name} is {seconds!r}: use a number of seconds above 0")
            _bounded(seconds, name)
    if cluster:
        known = set(REDIS_ALLOWED_KEYS) | set(inspect.signature(RedisCluster.__init__).parameters)
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"state URL {_shown(url)} has the option {unknown[0]!r}, which the Redis client does not take")
        return
    timeout = float(ours.get("timeout", 0.25))
    try:  # builds the connection the link would (connection_class, ssl options): an unknown option is a TypeError,
        # a bad ssl_cert_reqs a RedisError
        ConnectionPool.from_url(plain, socket_timeout=timeout, socket_connect_timeout=timeout).make_connection()
    except (TypeError, ValueError, RedisError) as exc:
        detail = str(exc).replace(parsed.password or "\0", "***") if parsed.password else str(exc)
        raise ValueError(f"state URL {_shown(url)} is refused by the Redis client: {detail}") from None


#: The States holding each backend that closes (a SQLite store, a Redis link): the one that made it, and those a
#: plugin shared with it holds it for (:meth:`State.holds`). Each closing State lets go of its hold; the last closes it.
_HOLDERS: weakref.WeakKeyDictionary[Any, weakref.WeakSet[State]] = weakref.WeakKeyDictionary()
_HOLDING = threading.Lock()


def _forked() -> None:
    """A forked child's lock: another thread of the parent may have held it at the fork."""
    global _HOLDING
    _HOLDING = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forked)


def _closes(backend: Any) -> bool:
    """Whether a state closes ``backend`` itself (a Redis backend's link is closed instead)."""
    return callable(getattr(backend, "close", None)) and not hasattr(backend, "link")


def _hold(backend: Any, state: State) -> None:
    with _HOLDING:
        _HOLDERS.setdefault(backend, weakref.WeakSet()).add(state)


def _let_go(backend: Any, state: State) -> bool:
    """Let go of ``state``'s hold on ``backend``: whether it was the last State holding it (it closes then)."""
    with _HOLDING:
        holders = _HOLDERS.get(backend)
        if holders is None:
            return True
        holders.discard(state)
        if holders:
            return False
        del _HOLDERS[backend]
        return True


class State:
    """The backends of one registry, created on first use and then shared by its plugins.

    ``url``: ``None`` or ``"memory:"`` (this process), ``"sqlite:///PATH"`` or a plain file
    path (idempotency records in a SQLite file; other state in this process; ``?timeout=2``
    sets the seconds an operation waits for the file, default 10), or
    ``"redis://host:port/db"`` / ``"rediss://..."`` (everything in Redis, shared by every
    process and host using it; ``"redis+cluster://node:port"`` for a Redis Cluster; ``?prefix=app:`` namespaces the keys, ``?timeout=0.25`` sets
    the seconds to wait for Redis). ``prefix`` overrides the URL's prefix. A Redis state has
    its own connection pools (one per registry).
    """

    def __init__(self, url: str | None = None, *, prefix: str | None = None) -> None:
        self.url = url
        parsed = urlparse(url or "memory:")
        self.scheme = parsed.scheme or "sqlite"  # a plain path is a SQLite file
        if self.scheme not in ("memory", "sqlite", *REDIS_SCHEMES):
            raise ValueError(
                f"unknown state URL {_shown(url)}: use 'memory:', 'sqlite:///PATH', 'redis://HOST:PORT/DB' or a file path"
            )
        self.path: Path | None = None
        self._sqlite_timeout: float | None = None
        if self.scheme == "sqlite":
            self.path = _sqlite_path(url or "", parsed)
            if parsed.scheme:  # a plain path has no options: '?' is part of the file's name
                self._sqlite_timeout = _sqlite_timeout(url or "", parsed.query)
        if self.redis:
            if importlib.util.find_spec("redis") is None:
                raise ValueError(f"state URL {_shown(url)} needs the Redis client: pip install 'harness-one[redis]'")
            check_redis_url(url or "")  # refuses a malformed URL or option now
            redis_prefix(prefix, split_redis_url(url or "")[1])  # and a prefix the link would refuse
        self.prefix = prefix
        self._lock = threading.RLock()  # a Redis backend makes the link inside _once
        self._made: dict[str, Any] = {}
        self._held: list[Any] = []  # other States' backends its registries' plugins use (see holds)

    @property
    def redis(self) -> bool:
        """Whether the state lives in Redis."""
        return self.scheme in REDIS_SCHEMES

    def _once(self, what: str, make: Callable[[], Any]) -> Any:
        with self._lock:
            found = self._made.get(what)
            if found is None:
                found = self._made[what] = make()
                if _closes(found):
                    _hold(found, self)
            return found

    def link(self) -> Any:
        """The :class:`~harness_one.state.RedisLink` of a Redis state (its connection pools)."""
        if not self.redis:
            raise ValueError(f"{self!r} is not a Redis state")
        assert self.url is not None

        def make() -> Any:
            from ._redis import RedisLink

            return RedisLink(self.url or "", prefix=self.prefix)

        return self._once("link", make)

    def _redis(self, what: str, kind: str) -> Any:
        def make() -> Any:
            from . import _redis

            return getattr(_redis, kind)(self.link())

        return self._once(what, make)

    def rate_limits(self) -> RateLimitBackend:
        """The token-bucket backend."""
        if self.redis:
            return self._redis("rate_limits", "RedisBuckets")  # type: ignore[no-any-return]
        return self._once("rate_limits", MemoryBuckets)  # type: ignore[no-any-return]

    def idempotency(self) -> IdempotencyStore:
        """The idempotency-record store (SQLite for ``sqlite:`` URLs: its directory made now, its file opened
        by its first operation or :meth:`check`)."""
        if self.redis:
            return self._redis("idempotency", "RedisStore")  # type: ignore[no-any-return]
        if self.path is None:
            return self._once("idempotency", MemoryStore)  # type: ignore[no-any-return]
        path, timeout = self.path, self._sqlite_timeout

        def make() -> Any:
            from ._sqlite import SQLiteStore

            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # (a new one: for its owner, as the file)
            return SQLiteStore(path) if timeout is None else SQLiteStore(path, timeout=timeout)

        return self._once("idempotency", make)  # type: ignore[no-any-return]

    def concurrency(self) -> ConcurrencySlots:
        """The slots of concurrency caps (in this process unless the state is Redis)."""
        if self.redis:
            return self._redis("concurrency", "RedisSlots")  # type: ignore[no-any-return]
        return self._once("concurrency", MemorySlots)  # type: ignore[no-any-return]

    def circuits(self) -> CircuitStore:
        """The circuit-breaker states (in this process unless the state is Redis)."""
        if self.redis:
            return self._redis("circuits", "RedisCircuits")  # type: ignore[no-any-return]
        return self._once("circuits", MemoryCircuits)  # type: ignore[no-any-return]

    def budgets(self) -> BudgetStore:
        """The per-run call counters of budgets (in this process unless the state is Redis)."""
        if self.redis:
            return self._redis("budgets", "RedisBudgets")  # type: ignore[no-any-return]
        return self._once("budgets", MemoryBudgets)  # type: ignore[no-any-return]

    def check(self) -> None:
        """Open now what the state needs (the SQLite file, the Redis client), so a bad location fails here, not mid-call.

        Redis is not contacted: an unreachable server is a runtime condition that each
        plugin's fail mode handles.
        """
        if self.path is not None:
            self.idempotency().open()  # type: ignore[attr-defined]  # a SQLiteStore
        elif self.redis:
            self.link()

    def holds(self, backend: Any) -> None:
        """Hold ``backend`` (its Redis link) as if this state made it, until :meth:`close`: another State's store that
        keeps this state's records too (a SQLite store on its file, Redis at its keys), kept by a plugin that
        registries on both share. It is closed when the last State holding it closes (not before, even when the
        State that made it closed first)."""
        if isinstance(backend, State):
            raise TypeError("State.holds takes a store (what a plugin keeps), not a State")
        backend = getattr(backend, "link", backend)
        if not _closes(backend):
            return
        with self._lock:
            if not any(backend is mine for mine in (*self._made.values(), *self._held)):
                self._held.append(backend)
                _hold(backend, self)

    def close(self) -> None:
        """Close the connections this state opened (a Redis pool, a SQLite file), except those another open
        State holds too (:meth:`holds`: a plugin shared by States on one SQLite file keeps the first one's store):
        the last of them to close closes it. Not for good: a backend a plugin holds connects again at its next
        use (a Redis link reconnects, a SQLite store opens its file again), and the next backend asked of the
        state is a new one."""
        with self._lock:
            made, self._made = self._made, {}
            held, self._held = self._held, []
        for backend in (*made.values(), *held):
            if _closes(backend) and _let_go(backend, self):
                backend.close()

    @property
    def shared(self) -> bool:
        """Whether the state is visible to other processes (False for memory)."""
        return self.scheme != "memory"

    def __repr__(self) -> str:
        return f"State({_shown(self.url)})"


def _sqlite_path(url: str, parsed: ParseResult) -> Path:
    """The file of a SQLite state: a plain path as written (``#`` and ``?`` are part of it), or the
    path of ``sqlite:///PATH`` percent-decoded (a raw ``#`` refused: ``%23``), ``~`` expanded
    (``sqlite:///~/state.sqlite3`` too); a relative path taken from the current directory now, when the state is
    made (a later ``chdir`` opens the same file), ``:memory:`` as it is."""
    if not parsed.scheme:
        raw = url
    elif parsed.netloc:  # sqlite://data/x.db: "data" is read as a host, and the path would be /x.db
        raise ValueError(f"state URL {_shown(url)} has a host part: use 'sqlite:///PATH' (three slashes) or a file path")
    elif "#" in url:  # urlparse would take what follows as a fragment and open another file
        raise ValueError(f"state URL {_shown(url)} has a '#': write a '#' in the file's name as %23")
    else:
        raw = unquote(parsed.path)
        if raw.startswith("/~"):
            raw = raw[1:]
    if not raw or raw == "/":
        raise ValueError(f"state URL {_shown(url)} names no file: use 'sqlite:///PATH'")
    return Path(raw) if raw == ":memory:" else Path(raw).expanduser().absolute()


def _sqlite_timeout(url: str, query: str) -> float | None:
    """The ``?timeout=`` of a ``sqlite:`` URL (None: the store's default); any other option is refused,
    as is a timeout that is not a number of seconds above 0."""
    timeout = None
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name != "timeout":
            raise ValueError(
                f"state URL {_shown(url)} has the option {name!r}: a SQLite state URL takes only 'timeout'"
                " (write a '?' in the file's name as %3F)"
            )
        timeout = positive_seconds(value, "the SQLite state URL's timeout")
    return timeout


def _shown(url: str | None) -> str:
    """``url`` as errors and ``repr`` show it: without a password (user-info, ``?password=``)."""
    return repr(url if url is None else redact(url))


def open_state(url: str | None) -> State:
    """The :class:`State` for ``url`` (``ValueError`` for an unknown scheme)."""
    return State(url)
