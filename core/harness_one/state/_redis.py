"""Shared state in Redis: token buckets, idempotency records, concurrency slots and circuits.

Every decision is one Lua script, called by SHA (``EVALSHA``; ``EVAL`` when the server says
``NOSCRIPT``, which also loads it): one round trip, atomic across every process and host on
the Redis. Rate limits, slots and circuits take their clock from Redis ``TIME`` (client
clocks skew); idempotency records compare the callers' wall-clock times, as the SQLite store
does. Keys are ``<prefix><kind>:...`` with hash tags where a script touches several keys.

This module needs the ``redis`` package (``pip install 'harness-one[redis]'``); the rest of
harness-one never imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NoReturn, TypeGuard
from urllib.parse import urlparse

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    ClusterError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)
from redis.retry import Retry

from .._log import log_event
from ._memory import known_moment, moment
from ._protocols import EXPIRES, KEPT_TICKETS, LEASE, TTL, Record, StateUnavailable, key_text, outcome_json, seconds
from ._select import MOST_SECONDS, check_redis_url, redis_prefix, slot_tag, split_redis_url

__all__ = ["RedisBudgets", "RedisBuckets", "RedisCircuits", "RedisLink", "RedisSlots", "RedisStore"]

#: What "Redis cannot decide now" looks like: no answer, a cluster that is down or has no map
#: yet, a primary demoted to a read-only replica by a failover, a server out of memory under
#: ``maxmemory`` with ``noeviction``, a cluster slot being moved (``TRYAGAIN``). Each takes the
#: plugin's fail mode; any other error reply is a fault of the script's caller and is raised,
#: as are :data:`_MISCONFIGURED` (redis-py makes a refused password a ``ConnectionError``).
#: A Redis Cluster client's own errors are configuration errors (a database other than 0, a server
#: not in cluster mode), except those of :data:`_CLUSTER_OUTAGES`: no node answers, a slot no node serves.
_CLUSTER_OUTAGES = tuple(
    getattr(redis.exceptions, name)
    for name in ("RedisClusterUnreachableError", "SlotNotCoveredError")
    if hasattr(redis.exceptions, name)  # (redis-py 5 has neither: see _cluster_outage)
)
_LINK_ERRORS = (
    redis.ConnectionError,
    redis.TimeoutError,
    ClusterError,
    *_CLUSTER_OUTAGES,
    ReadOnlyError,
    OutOfMemoryError,
    TryAgainError,
)
#: Error replies that say the same but come as a plain ``ResponseError``: writes refused after a
#: failed snapshot (``MISCONF``), a script running past its time limit (``BUSY``), a replica cut
#: off from its primary (``MASTERDOWN``), a primary with fewer replicas than ``min-replicas-to-write``
#: (``NOREPLICAS``).
_UNABLE = ("MISCONF ", "BUSY ", "MASTERDOWN ", "NOREPLICAS ")
_CAUGHT = (*_LINK_ERRORS, redis.ResponseError, RedisClusterException)
#: What a misconfigured link looks like: a wrong or missing password (``WRONGPASS``, ``NOAUTH``),
#: an ACL user without a command or key the scripts need (``NOPERM``), and a TLS failure of
#: :func:`_tls_refused`. No fail mode applies: a fail-open plugin would admit every call for as long
#: as the configuration stays wrong.
_MISCONFIGURED = (AuthenticationError, AuthorizationError, NoPermissionError)
#: The TLS errors that say the two ends will never agree (a certificate the client does not trust or
#: that names another host; a TLS alert or a record that is not TLS: ``ssl.SSLError`` itself), unlike
#: its subclasses that say a connection ended (EOF, a clean close, a failed system call), as in an outage.
_TLS_REFUSALS = (ssl.SSLError, ssl.SSLCertVerificationError)


def _tls_refused(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error of :data:`_TLS_REFUSALS` that caused ``exc`` (a connection error: redis-py wraps
    the ``ssl`` module's), if any."""
    if not isinstance(exc, (redis.ConnectionError, RedisClusterException)):
        return None
    cause: BaseException | None = exc
    for _ in range(8):  # (redis-py chains one or two; a cycle ends here)
        if cause is None:
            return None
        if type(cause) in _TLS_REFUSALS:
            return cause  # type: ignore[return-value]
        cause = cause.__cause__ if cause.__cause__ is not None or cause.__suppress_context__ else cause.__context__
    return None


def _wrong_link(exc: BaseException) -> bool:
    """Whether ``exc`` says the link is misconfigured: :data:`_MISCONFIGURED`, or a TLS refusal."""
    return isinstance(exc, _MISCONFIGURED) or _tls_refused(exc) is not None


#: Error replies to the ``SELECT`` of the URL's database: the server has no such database, or is a cluster node.
_WRONG_DB = ("DB index is out of range", "SELECT is not allowed in cluster mode")


def _cluster_outage(exc: BaseException) -> bool:
    """Whether ``exc``, a Redis Cluster client's own error, says no node could be reached (an outage; a TLS
    refusal, which looks alike, is :func:`_tls_refused`'s, asked first)."""
    if isinstance(exc, _CLUSTER_OUTAGES):
        return True
    return (  # an older redis-py, without RedisClusterUnreachableError: a plain RedisClusterException
        len(_CLUSTER_OUTAGES) < 2
        and type(exc) is RedisClusterException
        and str(exc).startswith("Redis Cluster cannot be connected")
        and "Cluster mode is not enabled" not in str(exc)
        and not isinstance(exc.__cause__, _MISCONFIGURED)
    )


def _cannot_decide(exc: BaseException) -> TypeGuard[Exception]:
    """Whether ``exc`` means "Redis cannot decide now" (the plugin's fail mode), not a fault to raise."""
    if isinstance(exc, _LINK_ERRORS):
        return not _wrong_link(exc)
    if isinstance(exc, RedisClusterException):
        return _tls_refused(exc) is None and _cluster_outage(exc)
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(_UNABLE)


_NOW = """
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
else
  now = tonumber(ARGV[1])
end
local function num(x) return string.format('%.17g', x) end
"""


class UnexpectedReply(redis.ResponseError):
    """A script's reply of a shape or range the script never gives (a server or proxy that is not
    Redis answering for it): raised as a fault, as an error reply is, never read as a decision."""


def _count(reply: Any) -> bool:
    """Whether ``reply`` is a count as a script returns one: an integer, 0 or more."""
    return type(reply) is int and reply >= 0  # (not a bool: a RESP3 boolean is no count)


def _flag(reply: Any) -> bool:
    """Whether ``reply`` is 0 or 1, as a script that answers yes or no returns it."""
    return type(reply) is int and reply in (0, 1)


def _number(reply: Any) -> float | None:
    """``reply`` read as a number a script writes (``num``, as text; ``inf`` too), or None: no such text, or NaN."""
    if not isinstance(reply, bytes):
        return None
    try:
        value = float(reply)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _seconds(reply: Any) -> bool:
    """Whether ``reply`` is a wait as a script writes it: a number, 0 or more (``inf``: a rate so slow that the
    wait overflows, which the caller caps)."""
    value = _number(reply)
    return value is not None and value >= 0


class _Shape:
    """The replies a script gives: ``what`` names them (for the error), ``fits`` tells whether a reply is one."""

    def __init__(self, what: str, fits: Callable[[Any], bool]) -> None:
        self.what = what
        self.fits = fits


_YES_NO = _Shape("0 or 1", _flag)
_COUNT = _Shape("a count", _count)


def _begun(reply: Any) -> bool:
    """Whether ``reply`` is a claim's: 0 (the key is the caller's), or a live record's fields."""
    if type(reply) is int:
        return reply == 0
    return (
        isinstance(reply, list)
        and len(reply) == 7
        and isinstance(reply[0], bytes)
        and reply[1] in (b"running", b"done")
        and _number(reply[2]) is not None  # (an expiry: any time of the caller's clock, inf for a record kept for good)
    )


def _admitted(reply: Any) -> bool:
    """Whether ``reply`` is a slot's: [admitted (0 or 1), held by the tool, held overall]."""
    return isinstance(reply, list) and len(reply) == 3 and _flag(reply[0]) and _count(reply[1]) and _count(reply[2])


def _waited(reply: Any) -> bool:
    """Whether ``reply`` is a circuit's admission: [the wait, the half-open period probed (0: none)]."""
    return isinstance(reply, list) and len(reply) == 2 and _seconds(reply[0]) and _count(reply[1])


def _snapshot(reply: Any) -> bool:
    """Whether ``reply`` is a circuit's snapshot: [its state, calls, failures, times opened]."""
    return (
        isinstance(reply, list)
        and len(reply) == 4
        and reply[0] in (b"closed", b"open", b"half_open")
        and all(_count(n) for n in reply[1:])
    )


class _Script:
    """A Lua script and its SHA1, computed here so the first call can already be ``EVALSHA``.

    ``settles``: the script settles what a call held (a release, an outcome, a give-back): it is
    sent, with the normal timeout, also while the link fails fast after a failure (``down_for``),
    so a short stall of Redis leaves no slot, claim or probe held until its lease ends.
    ``reply``: the shape of the replies the script gives (None: its reply is not read); the link
    raises :class:`UnexpectedReply` for any other, so no odd reply is taken for a decision.
    """

    def __init__(self, source: str, *, settles: bool = False, reply: _Shape | None = None) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        self.settles = settles
        self.reply = reply

    def checked(self, reply: Any) -> Any:
        """``reply``, if it is one the script gives; else :class:`UnexpectedReply`."""
        if self.reply is None or self.reply.fits(reply):
            return reply
        shown = repr(reply)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise UnexpectedReply(
            f"Redis answered a script with {shown}, not {self.reply.what}: not read as a decision "
            "(is the state URL's server Redis?)"
        )


# ARGV: now ('' = Redis TIME), rate, burst, cost. Returns the wait in seconds (0: allowed).
# As MemoryBuckets: a time up to 1 s (MemoryBuckets.step_back) before the last is a late reading
# (server_time=False: read before the round trip) and refills nothing; earlier by more, the clock
# stepped back and refills run from there. The key expires once full again, after at most 10^15 ms
# (~31,700 years), sent as digits: Lua wrote 1e17 as "1e+17", which PEXPIRE refused.
_BUCKET = _Script(
    _NOW
    + """
local rate, burst, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local b = redis.call('HMGET', KEYS[1], 't', 'at')
local tokens, last = tonumber(b[1]), tonumber(b[2])
if tokens == nil or last == nil then
  tokens, last = burst, now
elseif now > last then
  tokens = math.min(burst, tokens + (now - last) * rate)
  last = now
elseif last - now > 1 then
  last = now
end
local wait = 0
if tokens >= cost - cost * 1e-9 then tokens = tokens - cost else wait = (cost - tokens) / rate end
redis.call('HSET', KEYS[1], 't', num(tokens), 'at', num(last))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.min(math.ceil(burst / rate * 1000) + 1000, 1e15)))
return num(wait)
""",
    reply=_Shape("a wait in seconds", _seconds),
)

# ARGV: burst, cost. The tokens a call took and did not use, back (nothing once the bucket expired: it is full).
_BUCKET_GIVE_BACK = _Script(
    """
local t = tonumber(redis.call('HGET', KEYS[1], 't'))
if t ~= nil then
  redis.call('HSET', KEYS[1], 't', string.format('%.17g', math.min(tonumber(ARGV[1]), t + tonumber(ARGV[2]))))
end
return 0
""",
    settles=True,
)

# ARGV: now, fingerprint, lease, owner. Returns 0 (the caller owns the key; not nil, which a server
# that is not Redis may send for anything) or the live record.
# A claim sent again after its reply was lost finds its own owner and is the caller's. Its first write
# is the HSET, which Redis refuses under maxmemory with noeviction (a script is refused there only
# until its first write: a DEL first would have let the claim through); the fields of the expired
# record it replaces go after. The TTL is sent as digits, at most 10^15 ms, so PEXPIRE never refuses it.
_BEGIN = _Script(
    _NOW
    + """
local r = redis.call('HMGET', KEYS[1], 'fp', 'st', 'ex', 'ok', 'v', 'e', 'ow', 'q')
local ex = tonumber(r[3])
if ex ~= nil and ex > now then
  if r[2] == 'running' and r[7] == ARGV[4] then return 0 end
  return {r[1], r[2], r[3], r[4], r[5], r[6], r[8]}
end
local lease = tonumber(ARGV[3])
local ms = string.format('%.0f', math.min(math.max(1, math.ceil(lease * 1000)), 1e15))
redis.call('HSET', KEYS[1], 'fp', ARGV[2], 'st', 'running', 'ex', num(now + lease), 'at', ARGV[1], 'ow', ARGV[4])
redis.call('HDEL', KEYS[1], 'ok', 'v', 'e', 'q')
redis.call('PEXPIRE', KEYS[1], ms)
return 0
""",
    reply=_Shape("0 (the key is the caller's) or a live record", _begun),
)

# ARGV: now, lease, owner ('' any). Returns 1 if the running record's lease was extended.
_RENEW = _Script(
    _NOW
    + """
local r = redis.call('HMGET', KEYS[1], 'st', 'ex', 'ow')
local ex = tonumber(r[2])
if r[1] ~= 'running' or ex == nil or ex <= now then return 0 end
if ARGV[3] ~= '' and r[3] ~= ARGV[3] then return 0 end
local lease = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'ex', num(now + lease), 'at', ARGV[1])
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.min(math.max(1, math.ceil(lease * 1000)), 1e15)))
return 1
""",
    reply=_YES_NO,
)

# ARGV: now ('' unknown), fingerprint, state, expires, ok, value, error, fallback TTL (ms), owner ('' any), quoted.
# Returns 1 if stored; 0 if the key holds another owner's record live at `now` (kept).
# The key lives until `expires` measured from the last time the caller gave (begin or renew).
_FINISH = _Script(
    """
local r = redis.call('HMGET', KEYS[1], 'at', 'ow', 'ex')
local mine = ARGV[9] == '' or r[2] == ARGV[9]
if not mine and r[3] and (ARGV[1] == '' or tonumber(r[3]) > tonumber(ARGV[1])) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fp', ARGV[2], 'st', ARGV[3], 'ex', ARGV[4], 'ok', ARGV[5], 'v', ARGV[6], 'e', ARGV[7], 'q', ARGV[10])
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'ow', ARGV[9]) end
local ttl = tonumber(ARGV[8])
local at = tonumber(r[1])
if mine and at ~= nil then ttl = math.ceil((tonumber(ARGV[4]) - at) * 1000) end
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.min(math.max(ttl, 1), 1e15))) -- as digits: Redis refuses '1e+17'
return 1
""",
    settles=True,
    reply=_YES_NO,
)

# ARGV: owner. Deletes the record only if it is that owner's claim (a lapsed owner frees nothing).
_RELEASE = _Script(
    """
if redis.call('HGET', KEYS[1], 'ow') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
""",
    settles=True,
)

# Deletes the record whoever claimed it (``release`` without an owner): a settling DEL.
_DELETE = _Script("return redis.call('DEL', KEYS[1])", settles=True)

# KEYS: the tool's slots, all slots. ARGV: now, holder, cap ('' none), total ('' none), lease.
# Returns {admitted, held by the tool, held overall} (counts before this call). The live slots are
# counted without a write; the first write is the ZADD of an admitted call, which Redis refuses under
# maxmemory with noeviction (the lapsed slots are removed after it: removed first, they would have let it through).
_SLOT_ACQUIRE = _Script(
    _NOW
    + """
local live = '(' .. num(now)
local n, all = redis.call('ZCOUNT', KEYS[1], live, '+inf'), redis.call('ZCOUNT', KEYS[2], live, '+inf')
local mine = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[2]))
if mine ~= nil and mine > now then return {1, n - 1, all - 1} end
local cap, total = tonumber(ARGV[3]), tonumber(ARGV[4])
if (cap ~= nil and n >= cap) or (total ~= nil and all >= total) then return {0, n, all} end
local lease = tonumber(ARGV[5])
local ms = math.min(math.max(1, math.ceil(lease * 1000)), 1e15)
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, num(now + lease), ARGV[2])
end
for _, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, string.format('%.0f', ms)) end
end
return {1, n, all}
""",
    reply=_Shape("[0 or 1, a count, a count]", _admitted),
)

# KEYS: the tool's slots, all slots. ARGV: now, holder, lease. Returns 1 if the slot was held.
_SLOT_RENEW = _Script(
    _NOW
    + """
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[2]))
if score == nil or score <= now then return 0 end
local lease = tonumber(ARGV[3])
local ms = math.min(math.max(1, math.ceil(lease * 1000)), 1e15)
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', num(now + lease), ARGV[2])
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, string.format('%.0f', ms)) end
end
return 1
""",
    reply=_YES_NO,
)

_SLOT_RELEASE = _Script(
    """
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
""",
    settles=True,
)

_SLOT_COUNT = _Script(
    _NOW
    + """
return redis.call('ZCOUNT', KEYS[1], '(' .. num(now), '+inf')
""",
    reply=_COUNT,
)

# Circuits: one hash per circuit (a tool, or a key tools share).
# ARGV: now, failure_ratio, min_calls, window, open_for, probes, ...
_CIRCUIT_COMMON = (
    _NOW
    + """
local k = KEYS[1]
local ratio, min_calls, window = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local open_for, probes = tonumber(ARGV[5]), tonumber(ARGV[6])
local ttl = string.format('%.0f', math.min(math.ceil(math.max(window, open_for) * 2000) + 1000, 1e15))
local function field(name, default) return tonumber(redis.call('HGET', k, name)) or default end
local function open()
  local opened = field('n', 0) + 1
  redis.call('DEL', k)
  redis.call('HSET', k, 'st', 'open', 'op', num(now), 'n', opened)
  redis.call('PEXPIRE', k, ttl)
end
-- The half-open period a probe belongs to ('p', 0: none): see begin() in the admit script.
local function period() return field('p', 0) end
-- The window's calls and failures, and its oldest second (those up to it are out). The hash keeps running
-- totals ('tc', 'tf') of its per-second counts ('c<second>', 'f<second>') after second 'lo'. The seconds
-- that left the window since are subtracted one by one (their counts deleted when `trim`); when they are
-- more than the fields (a long idle), or the clock stepped back, or there are no totals yet (a new hash,
-- or one an earlier version kept), the counts are summed from the fields instead.
local function totals(trim)
  local oldest = math.floor(now - window)
  local t = redis.call('HMGET', k, 'tc', 'tf', 'lo')
  local calls, failures, lo = tonumber(t[1]), tonumber(t[2]), tonumber(t[3])
  if calls and failures and lo and oldest >= lo and (oldest - lo) * 2 <= redis.call('HLEN', k) then
    for second = lo + 1, oldest do
      local c = redis.call('HMGET', k, 'c' .. second, 'f' .. second)
      if c[1] or c[2] then
        calls, failures = calls - (tonumber(c[1]) or 0), failures - (tonumber(c[2]) or 0)
        if trim then redis.call('HDEL', k, 'c' .. second, 'f' .. second) end
      end
    end
    return calls, failures, oldest
  end
  calls, failures = 0, 0
  local all = redis.call('HGETALL', k)
  for i = 1, #all, 2 do
    local name = all[i]
    local kind = string.sub(name, 1, 1)
    if kind == 'c' or kind == 'f' then
      if tonumber(string.sub(name, 2)) <= oldest then
        if trim then redis.call('HDEL', k, name) end
      elseif kind == 'c' then calls = calls + tonumber(all[i + 1])
      else failures = failures + tonumber(all[i + 1]) end
    end
  end
  return calls, failures, oldest
end
local st = redis.call('HGET', k, 'st') or 'closed'
"""
)

# Returns {wait as text, probe}: the half-open period probed, 0 for none.
_CIRCUIT_ADMIT = _Script(
    _CIRCUIT_COMMON
    + """
-- A new half-open period (the circuit's first probe, or a reclaim of hung probes), named by Redis's clock in
-- microseconds and after the last: a probe that outlived its circuit's expired hash names none of the new ones.
local function begin(last)
  local t = redis.call('TIME')
  local p = math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('HSET', k, 'p', num(p))
  return p
end
if st == 'open' then
  local op = field('op', 0)
  if op > now then -- the clock stepped back: the open period runs from now, never longer than open_for
    op = now
    redis.call('HSET', k, 'op', num(now))
  end
  local wait = op + open_for - now
  if wait > 0 then return {num(wait), 0} end
  st = 'half_open'
  redis.call('HSET', k, 'st', st, 'pr', 0, 'ps', 0)
  redis.call('PEXPIRE', k, ttl)
end
if st == 'half_open' then
  local probing, passed, p = field('pr', 0), field('ps', 0), period()
  if probing > 0 then
    local pt = field('pt', now)
    if pt > now then -- the clock stepped back: the probes' time runs from now, never longer than open_for
      pt = now
      redis.call('HSET', k, 'pt', num(now))
    end
    if now - pt > open_for then -- hung, or lost with their process
      probing = 0
      p = begin(p) -- a new period: their late ends would free a new probe's place
    end
  end
  if probing + passed >= probes then return {num(math.min(1, open_for)), 0} end
  if p == 0 then p = begin(0) end
  redis.call('HSET', k, 'pr', probing + 1, 'pt', num(now))
  redis.call('PEXPIRE', k, ttl)
  return {'0', p}
end
return {'0', 0}
""",
    reply=_Shape("[a wait in seconds, a half-open period]", _waited),
)

# ARGV[7]: failed (0/1), ARGV[8]: the period probed (0: not a probe; one of an earlier period decides nothing).
# A probe's outcome settles its place (_CIRCUIT_PROBED, the same script); another call's only counts.
_CIRCUIT_RECORD = _Script(
    _CIRCUIT_COMMON
    + """
local failed, probe = ARGV[7] == '1', tonumber(ARGV[8]) or 0
if probe > 0 then -- only a half-open circuit has probes ('pr'); a missing one is not recreated
  if st ~= 'half_open' or probe ~= period() then return 0 end
  redis.call('HSET', k, 'pr', math.max(field('pr', 0) - 1, 0))
  if failed then open() return 1 end
  if redis.call('HINCRBY', k, 'ps', 1) >= probes then
    local opened = field('n', 0)
    redis.call('DEL', k)
    redis.call('HSET', k, 'st', 'closed', 'n', opened)
  end
  redis.call('PEXPIRE', k, ttl)
  return 0
end
if st ~= 'closed' then return 0 end
local calls, failures, oldest = totals(true)
local second = math.floor(now)
if second > oldest then -- (a window under a second may have left it already)
  calls = calls + 1
  redis.call('HINCRBY', k, 'c' .. second, 1)
  if failed then
    failures = failures + 1
    redis.call('HINCRBY', k, 'f' .. second, 1)
  end
end
redis.call('HSET', k, 'tc', calls, 'tf', failures, 'lo', num(oldest))
redis.call('PEXPIRE', k, ttl)
if calls >= min_calls and failures / calls >= ratio then open() return 1 end
return 0
"""
)
_CIRCUIT_PROBED = _Script(_CIRCUIT_RECORD.source, settles=True)

# ARGV[7]: the period probed.
_CIRCUIT_UNPROBE = _Script(
    _CIRCUIT_COMMON
    + """
if tonumber(ARGV[7]) == period() and field('pr', 0) > 0 then redis.call('HINCRBY', k, 'pr', -1) end
return 0
""",
    settles=True,
)

# Returns {state, calls, failures, opened}.
_CIRCUIT_SNAPSHOT = _Script(
    _CIRCUIT_COMMON
    + """
local calls, failures = totals(false)
return {st, calls, failures, field('n', 0)}
""",
    reply=_Shape("[a circuit state, a count, a count, a count]", _snapshot),
)


class _Pending:
    """One script call waiting for its reply, and what its caller waits on: a held lock (one for
    all the calls a thread queued together; None once that thread stopped waiting), a future, or
    nothing when the caller sends it itself. ``waiter``: the state of the thread that queued it
    (sync calls only)."""

    __slots__ = ("command", "done", "outcome", "script", "waiter")

    def __init__(self, script: _Script, command: tuple[Any, ...], done: Any) -> None:
        self.script = script
        self.command = command  # EVALSHA sha numkeys keys... argv...
        self.done = done
        self.outcome: Any = _UNANSWERED
        self.waiter: _Waiter | None = None


#: The states of a thread whose sync calls are queued (changed under ``RedisLink._queue_lock``).
_WAITING, _WOKEN, _WRITING, _LEFT = range(4)


class _Waiter:
    """A thread waiting for the calls it queued, on its held lock ``done``: ``_WAITING``;
    ``_WOKEN`` once ``done`` was released (its calls answered, or its turn to send the queue),
    which happens once; ``_WRITING`` once it took the queue (``claimed``) to send; ``_LEFT`` once
    it handed the queue on, or was interrupted."""

    __slots__ = ("claimed", "done", "state")

    def __init__(self, done: Any) -> None:
        self.done = done
        self.state = _WAITING
        self.claimed: list[_Pending] = []


class _Batcher:
    """One event loop's side of a link: a kept connection, and the calls waiting for the next write."""

    __slots__ = ("connection", "queue", "sending", "task")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.queue: list[_Pending] = []
        self.sending = False  # a write is on the wire, or about to be
        self.task: asyncio.Task[None] | None = None  # the task sending the queue, when one does


_UNANSWERED: Any = object()  # the outcome of a call before its reply (a reply may be None)
#: A write waits for its replies the link's timeout times the calls it carries, up to this many (Redis
#: answers a write only after it ran all of it, so its first reply waits for its last call).
_MOST_CALLS = 16
#: Seconds a thread whose calls are queued waits before it checks that a thread sends: when none
#: does (the sender was interrupted where it could not hand the queue on), it sends the queue itself.
_PATIENCE = 0.1
_DOWN: Any = object()  # the outcome of a call not sent because Redis failed moments ago


class BatchTimeout(redis.TimeoutError):
    """A write of several calls that Redis did not answer in the time they had together: Redis is
    slow on them (a long script), or stalled. Its calls take the fail mode; the link is not marked
    down (a single call not answered marks it down)."""


def _timed_out(exc: BaseException, calls: int, timeout: float) -> BaseException:
    """``exc``, or for a timeout of a write of several ``calls`` (``timeout`` each) a :class:`BatchTimeout`."""
    if calls > 1 and isinstance(exc, redis.TimeoutError):
        slow = BatchTimeout(f"no reply to a write of {calls} calls within {timeout * min(calls, _MOST_CALLS):g} s")
        slow.__cause__ = exc
        return slow
    return exc


def _interrupted() -> redis.ConnectionError:
    return redis.ConnectionError("the call was interrupted before Redis answered")


def _sendable(connection: Any, batch: Sequence[_Pending]) -> list[_Pending]:
    """The calls of ``batch`` whose arguments can be sent; each other call is given its error
    (redis-py's ``DataError`` for, say, a ``bool``; ``UnicodeEncodeError`` for a lone surrogate),
    for its own caller: one call's arguments never fail its neighbours or mark the link down."""
    sendable = []
    for pending in batch:
        try:
            connection.pack_command(*pending.command)
        except Exception as exc:  # packing is local: whatever it raises is about this call's arguments
            pending.outcome = exc
        else:
            sendable.append(pending)
    return sendable


def _commands(calls: Sequence[_Pending], reload: bool) -> list[tuple[Any, ...]]:
    """The calls' commands: ``EVALSHA``, or ``EVAL`` when ``reload`` (it also loads the script)."""
    if reload:
        return [("EVAL", p.script.source, *p.command[2:]) for p in calls]
    return [p.command for p in calls]


def _write(connection: Any, batch: Sequence[_Pending], reload: bool) -> tuple[Sequence[_Pending], list[tuple[Any, ...]], Any]:
    """The calls of one write, their commands and the packed bytes; a call that cannot be sent is left out."""
    calls, commands = batch, _commands(batch, reload)
    try:
        return calls, commands, connection.pack_commands(commands)
    except Exception:
        calls = _sendable(connection, calls)
        commands = _commands(calls, reload)
        return calls, commands, connection.pack_commands(commands)


def _settle(batch: Sequence[_Pending], replies: Sequence[Any]) -> list[_Pending]:
    """Give each call its reply; return those Redis answered ``NOSCRIPT`` (it lost its scripts:
    a restart or ``SCRIPT FLUSH``)."""
    unloaded = []
    for pending, reply in zip(batch, replies):
        pending.outcome = reply
        if type(reply) is NoScriptError:
            unloaded.append(pending)
    return unloaded


def _unanswered(pending: _Pending) -> bool:
    """Whether ``pending`` has no reply (or only ``NOSCRIPT``)."""
    return pending.outcome is _UNANSWERED or type(pending.outcome) is NoScriptError


def _fail(batch: Sequence[_Pending], outcome: Any) -> None:
    """Give ``outcome`` to each call of ``batch`` that has no reply (or only ``NOSCRIPT``)."""
    for pending in batch:
        if _unanswered(pending):
            pending.outcome = outcome


def _exchange(connection: Any, batch: Sequence[_Pending], *, reload: bool = False) -> list[_Pending]:
    """Send the calls of ``batch`` in one write, give each its reply (a Redis error in its
    reply's place), and return those answered ``NOSCRIPT``.

    A dead connection is reconnected and the calls not yet answered are sent once more; any
    other failure (a timeout, an interrupt, a second dead connection) drops the connection
    (replies would be left in flight) and raises, after giving the calls whose replies were
    read their replies.
    """
    calls, commands, packed = _write(connection, batch, reload)
    replies: list[Any] = []
    for attempt in (0, 1):
        sent = len(commands) - len(replies)  # a lone call: the socket's timeout (no timeout= to pass)
        more = {"timeout": connection.socket_timeout * min(sent, _MOST_CALLS)} if sent > 1 else {}
        try:
            connection.send_packed_command(packed)
            while len(replies) < len(commands):
                try:
                    replies.append(connection.read_response(**more))
                except redis.ResponseError as exc:
                    replies.append(exc)
            return _settle(calls, replies)
        except BaseException as exc:
            try:
                connection.disconnect()
                if attempt or not isinstance(exc, redis.ConnectionError) or _wrong_link(exc):
                    raise _timed_out(exc, sent, connection.socket_timeout)  # exc itself, or a BatchTimeout caused by it
                packed = connection.pack_commands(commands[len(replies) :])
            finally:  # also when an interrupt lands here: a call Redis answered keeps its reply
                _settle(calls, replies)  # (RedisLink._pass_on sends only the calls left unanswered again)
    raise AssertionError("unreachable")  # pragma: no cover


async def _aexchange(connection: Any, batch: Sequence[_Pending], *, reload: bool = False) -> list[_Pending]:
    """:func:`_exchange` on an asyncio connection, connected first (:func:`_aconnect`)."""
    calls, commands, packed = _write(connection, batch, reload)
    replies: list[Any] = []
    timeout = connection.socket_timeout
    fresh = connection.is_connected or await _aconnect(connection)
    for attempt in (0, 1) if fresh else (1,):  # (a failed connect was the first attempt)
        sent = len(commands) - len(replies)
        connection.socket_timeout = timeout * min(sent, _MOST_CALLS)  # (read_response(timeout=...) answers None on a timeout)
        try:
            await connection.send_packed_command(packed)
            while len(replies) < len(commands):
                try:
                    replies.append(await connection.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
            return _settle(calls, replies)
        except BaseException as exc:
            try:
                if not isinstance(exc, redis.ConnectionError):
                    await connection.disconnect(nowait=True)
                    raise _timed_out(exc, sent, timeout)  # exc itself, or a BatchTimeout caused by it
                await connection.disconnect()
                if attempt or _wrong_link(exc):
                    raise
                packed = connection.pack_commands(commands[len(replies) :])
            finally:  # as in _exchange: a call Redis answered keeps its reply
                _settle(calls, replies)
        finally:
            connection.socket_timeout = timeout
    raise AssertionError("unreachable")  # pragma: no cover


async def _aconnect(connection: Any) -> bool:
    """Connect ``connection`` (and its handshake) before anything is sent: True, or False when it failed in
    a way the next attempt may not (it is then disconnected, to be connected again as the write is sent).

    A timeout counts as such on the asyncio path: its timer runs on the event loop, which other
    work may have held past it while Redis answered in time (a blocking step, thousands of calls
    starting at once), so one timeout does not mark the link down; two in a row do. A dead
    connection is tried again as :func:`_aexchange` tries one; a configuration error is raised.
    """
    try:
        connect = getattr(connection, "connect_check_health", None)  # redis-py 6.0 and later
        if connect is not None:
            await connect(check_health=False)
        else:  # redis-py 5.x: connect() is that step; its handshake is not health-checked here either (the
            # URL's health_check_interval would send a PING before AUTH), so the interval is 0 meanwhile
            interval, connection.health_check_interval = connection.health_check_interval, 0
            try:
                await connection.connect()
            finally:
                connection.health_check_interval = interval
        return True
    except BaseException as exc:
        await connection.disconnect(nowait=True)
        if not isinstance(exc, (redis.TimeoutError, redis.ConnectionError)) or _wrong_link(exc):
            raise
        return False


class _Deadline:
    """A connection's socket whose reads are bounded by a deadline (:class:`_WholeReply`): before each read its
    timeout is what is left (a timeout, not a wait: redis-py's own), so a reply that trickles in ends there,
    not only a wait in which no byte comes. Everything else is the socket's."""

    __slots__ = ("_sock", "_timeout", "until")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._timeout = sock.gettimeout()  # what the parsers set (settimeout), restored after a bounded read
        self.until: float | None = None  # (time.monotonic) None: unbounded

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout
        self._sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        return self._timeout

    def _bound(self) -> None:
        if self.until is None or self._timeout == 0:  # (0: a poll, which does not wait)
            return
        left = self.until - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")  # socket.timeout, as the socket raises it (no errno: not the OS's)
        self._sock.settimeout(left if self._timeout is None or left < self._timeout else self._timeout)

    def recv(self, size: int, *flags: int) -> bytes:
        self._bound()
        return self._sock.recv(size, *flags)

    def recv_into(self, buffer: Any, *more: int) -> int:
        self._bound()
        return self._sock.recv_into(buffer, *more)

    def end(self) -> None:
        """Unbound, with the timeout the parsers set."""
        self.until = None
        with contextlib.suppress(OSError):  # closed: a read that failed disconnected it
            self._sock.settimeout(self._timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _WholeReply:
    """The sync connections' reply bound: a reply (the handshake's too) is read within the socket timeout, or
    the ``timeout`` a write of several calls reads each with, as a whole, as the asyncio client reads one.
    redis-py's socket timeout bounds each read only: a reply that keeps coming, a byte every 50 ms, kept a
    call waiting 27 s for 400 characters."""

    socket_timeout: float | None

    def _connect(self) -> Any:
        return _Deadline(super()._connect())  # type: ignore[misc]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        sock = getattr(self, "_sock", None)
        if type(sock) is not _Deadline or sock.until is not None:  # (a read within a bounded one: its bound)
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        seconds = kwargs.get("timeout", self.socket_timeout)
        if not isinstance(seconds, (int, float)) or not seconds > 0:  # (redis-py's SENTINEL, None: no bound)
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        sock.until = time.monotonic() + seconds
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        finally:
            sock.end()


class _Connection(_WholeReply, redis.Connection):
    """``redis://``: a :class:`redis.Connection` that reads each reply within its timeout."""


class _SSLConnection(_WholeReply, redis.SSLConnection):
    """``rediss://``: a :class:`redis.SSLConnection` that reads each reply within its timeout."""


_CONFIGURATION = "This is a configuration error, not an outage: no fail mode applies."


def _misconfigured(exc: Exception, cluster: bool) -> Exception | None:
    """The error to raise for ``exc`` when it says the link is misconfigured (a refused password or
    command, a database the server does not have, a cluster node named by a ``redis://`` URL or a
    server not in cluster mode named by a ``redis+cluster://`` one, TLS refused), its message naming
    the problem and what to check (not the address: the message reaches the model; :meth:`RedisLink._raise`
    logs it); None for any other error."""
    tls = _tls_refused(exc)
    if tls is not None:  # its reason (an OpenSSL code), not its text: a host name mismatch names the host
        reason = tls.reason or type(tls).__name__
        problem = (
            f"did not trust the server's TLS certificate ({reason}: check the URL's ssl_ca_certs and host name)"
            if isinstance(tls, ssl.SSLCertVerificationError)
            else f"failed the TLS handshake with the server ({reason}: check the URL's scheme, rediss:// for"
            " TLS, its ssl_ options and the server's TLS settings)"
        )
        return redis.ConnectionError(f"The Redis client {problem}. {_CONFIGURATION}")
    if isinstance(exc, redis.ResponseError) and str(exc).startswith(_WRONG_DB):
        if str(exc).startswith(_WRONG_DB[1]):
            return redis.ResponseError(
                f"Redis refused the state URL's database: the server is a Redis Cluster node (use 'redis+cluster://'"
                f" and database 0). {_CONFIGURATION}"
            )
        return redis.ResponseError(
            f"Redis has no database the state URL names (DB index is out of range: the server's 'databases'"
            f" setting bounds it). {_CONFIGURATION}"
        )
    if isinstance(exc, AskError) and not cluster:  # MOVED or ASK: its text names another node's address
        return redis.ResponseError(
            f"Redis answered that the key is served by another node: the state URL names a node of a Redis Cluster"
            f" (use 'redis+cluster://HOST:PORT'). {_CONFIGURATION}"
        )
    if isinstance(exc, RedisClusterException) and not _cluster_outage(exc):
        problem = (
            "the server is not in cluster mode (use 'redis://' for a single server)"
            if "Cluster mode is not enabled" in str(exc)
            else "the Redis Cluster client refused the state URL (the log says why)"
        )
        return RedisClusterException(f"Redis Cluster state: {problem}. {_CONFIGURATION}")
    if not isinstance(exc, _MISCONFIGURED):
        return None
    if isinstance(exc, NoPermissionError):
        problem = (
            "denied the state's user a command or key it needs (its ACL must allow EVALSHA, EVAL and the"
            " commands the scripts run, on the keys under the prefix)"
        )
    else:
        problem = "refused the user or password of the state URL"
    return type(exc)(f"Redis {problem}: {str(exc).rstrip('.')}. {_CONFIGURATION}")


_LINKS: weakref.WeakSet[RedisLink] = weakref.WeakSet()


def _after_fork() -> None:
    """A forked child starts with no sync call queued or on the wire (the parent's threads are not there)."""
    for link in list(_LINKS):
        link._send_lock = threading.Lock()
        link._queue_lock = threading.Lock()
        link._queue = []
        link._sending = False


os.register_at_fork(after_in_child=_after_fork)


class RedisLink:
    """One registry's connection to Redis: a sync client with its own pool for ``call``, an
    asyncio client per event loop for the backends' ``a...`` methods.

    Args:
        url: ``redis://[user:password@]host[:port][/db]`` or ``rediss://`` (TLS); for a Redis
            Cluster ``redis+cluster://host:port`` (any node; ``rediss+cluster://`` with TLS).
            The query may set ``prefix=`` and ``timeout=`` (they override the defaults, not
            the arguments); its ``socket_timeout=`` and ``socket_connect_timeout=`` are dropped
            (``timeout`` sets both).
        prefix: the namespace of every key (default ``harness-one:``), so several
            applications can share one Redis.
        timeout: seconds to connect and to wait for each answer (a write of several calls waits
            that times their number, at most 16 times: Redis answers it once it ran it all).
        down_for: after a failure, seconds during which calls fail at once instead of waiting
            for the timeout again (not those that settle what a call held: a release, an
            outcome, a give-back); then the next call reconnects. On a Redis Cluster a node
            that did not answer fails at once only the calls of its keys.
        cluster: use the Redis Cluster clients (``RedisCluster``) even for a ``redis://`` URL.

    A command that fails to reach the server is sent once more on a fresh connection (a
    restarted server leaves dead connections in the pool); on the asyncio path, so is one whose
    new connection timed out (the event loop may have been late, not Redis). If the first reply was lost after
    Redis ran the script, that decision counts twice (a token, a circuit outcome); a budget's
    take and give-back with a ticket, and the idempotency scripts, are safe to repeat.
    Failures raise :class:`StateUnavailable`. Scripts go over one kept connection per process
    (sync) and per event loop (asyncio): calls made while a write is on the wire are sent
    together in the next write, so concurrent callers share round trips, each call is still
    one ``EVALSHA``, and Redis runs them one after the other as it would on separate
    connections. Plain commands and Redis Cluster use the clients' pools.
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str | None = None,
        timeout: float | None = None,
        down_for: float = 0.5,
        cluster: bool = False,
    ) -> None:
        check_redis_url(url)
        self.url, options, in_url = split_redis_url(url, link=True)  # `timeout` bounds each operation, whatever the URL says
        self.cluster = cluster or in_url
        self.prefix = redis_prefix(prefix, options)
        self.timeout = timeout if timeout is not None else float(options.get("timeout", 0.25))
        if not 0 < self.timeout <= MOST_SECONDS:
            raise ValueError(f"a Redis timeout is seconds above 0, at most {MOST_SECONDS:g}, not {self.timeout!r}")
        self.down_for = down_for
        self._options: dict[str, Any] = {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
        }
        # (the sync client's: a reply read within the timeout as a whole, as the asyncio client reads it)
        connection = _SSLConnection if urlparse(self.url).scheme == "rediss" else _Connection
        self._sync_options: dict[str, Any] = {**self._options, "connection_class": connection}
        self._client: redis.Redis | redis.RedisCluster | None = None
        if not self.cluster:
            self._client = redis.Redis.from_url(
                self.url, retry=Retry(NoBackoff(), 1, (redis.ConnectionError,)), **self._sync_options
            )
        self._client_lock = threading.Lock()
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._down_until = 0.0
        self._down_nodes: dict[str, float] = {}  # a cluster's nodes that failed: "host:port" -> until (monotonic)
        self._logged_until = 0.0
        self.failures = 0
        self._hot: Any = None  # one connection kept out of the pool for the sending thread
        self._hot_pid = 0
        self._send_lock = threading.Lock()  # held by the thread writing on the kept connection
        self._queue_lock = threading.Lock()  # guards _queue, _sending and the waiters' states
        self._queue: list[_Pending] = []  # sync calls waiting for the next write
        self._sending = False  # a thread sends on the kept connection, or is woken to
        self._owed = False  # a write's replies may still be in flight on the kept connection
        self._patience = _PATIENCE  # how long a waiting thread waits before it checks on the sender
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = weakref.WeakKeyDictionary()
        _LINKS.add(self)

    @property
    def client(self) -> Any:
        """The sync client: a ``redis.Redis``, or a ``redis.RedisCluster`` made on first use (it
        asks a node for the slot map then, so an unreachable cluster fails a call, not the setup)."""
        found = self._client
        if found is None:
            with self._client_lock:
                if self._client is None:
                    # the URL's options, then ours: from_url would put its own connection class (a rediss URL's
                    # SSLConnection) over the one that reads a reply within the timeout
                    options = {**redis.connection.parse_url(self.url), **self._sync_options}  # type: ignore[no-untyped-call]
                    if options.get("db") == 0:  # (what from_url takes: a cluster has database 0 only, and refuses others)
                        del options["db"]
                    self._client = redis.RedisCluster(retry=Retry(NoBackoff(), 1), **options)
                found = self._client
        return found

    def aclient(self) -> Any:
        """The asyncio client of the running event loop (one pool per loop)."""
        loop = asyncio.get_running_loop()
        found = self._aclients.get(loop)
        if found is None:
            self._forget_closed_loops()
            if self.cluster:
                found = aredis.RedisCluster.from_url(self.url, retry=AsyncRetry(NoBackoff(), 1), **self._options)
            else:
                found = aredis.Redis.from_url(
                    self.url, retry=AsyncRetry(NoBackoff(), 1, (redis.ConnectionError,)), **self._options
                )
            self._aclients[loop] = found
        return found

    def _forget_closed_loops(self) -> None:
        """Drop the clients and kept connections of event loops that have closed (each
        ``asyncio.run`` is a new loop; their sockets close when the objects are collected)."""
        for table in (self._aclients, self._batchers):
            for ref in table.keyrefs():  # a copy: other threads' loops come and go meanwhile
                loop = ref()
                if loop is not None and loop.is_closed():
                    table.pop(loop, None)

    def _unavailable(self) -> StateUnavailable:
        return StateUnavailable(
            "The shared state (Redis) is unavailable (it failed moments ago). Retry shortly.",
            retry_after=self.down_for,
            where=self._where(),
        )

    def _is_down(self) -> bool:
        return bool(self._down_until) and time.monotonic() < self._down_until

    def _check(self) -> None:
        if self._is_down():
            raise self._unavailable()

    def _failed(self, exc: Exception, node: str | None = None) -> StateUnavailable:
        self.failures += 1
        if time.monotonic() >= self._logged_until:
            self._logged_until = time.monotonic() + self.down_for
            log_event(30, "redis unavailable", where=self._where(), error=f"{type(exc).__name__}: {exc}")
        if node is not None:  # one cluster node failed: the calls of its keys fail fast a while, not all
            self._down_nodes[node] = time.monotonic() + self.down_for
        elif not isinstance(exc, BatchTimeout):  # a single call not answered: Redis failed, calls fail fast a while
            self._down_until = time.monotonic() + self.down_for
        err = StateUnavailable(  # its address and error text (which names it) in the log and ``where``, not in the message
            f"The shared state (Redis) is unavailable ({type(exc).__name__}). Retry shortly.",
            retry_after=self.down_for,
            where=self._where(),
        )
        err.__cause__ = exc
        return err

    def _raise(self, exc: Exception, node: str | None = None) -> NoReturn:
        """Raise what ``exc`` means: :class:`StateUnavailable` when Redis cannot decide now (``node``:
        the cluster node that failed, marked down alone), an error naming the problem for a
        misconfigured link, else ``exc`` itself (a fault of the caller)."""
        if _cannot_decide(exc):
            raise self._failed(exc, node) from exc
        err = _misconfigured(exc, self.cluster)
        if err is not None:
            if time.monotonic() >= self._logged_until:
                self._logged_until = time.monotonic() + self.down_for
                log_event(40, "redis misconfigured", where=self._where(), error=f"{err} ({type(exc).__name__}: {exc})")
            err.where = self._where()  # type: ignore[attr-defined]  # as StateUnavailable's: for the application
            raise err from exc
        raise exc

    def _where(self) -> str:
        parsed = urlparse(self.url)
        kind = "+cluster" if self.cluster else ""
        return f"{parsed.scheme}{kind}://{parsed.hostname or 'localhost'}:{parsed.port or 6379}"

    def _hot_connection(self) -> Any:
        """The kept connection (taken from the pool once per process; a forked child takes its own)."""
        pid = os.getpid()
        if self._hot is None or self._hot_pid != pid:
            assert isinstance(self.client, redis.Redis)
            self._hot = self.client.connection_pool.make_connection()
            self._hot_pid = pid
        return self._hot

    def _reply(self, outcome: Any) -> Any:
        """A call's reply, or its failure raised (a link error as :class:`StateUnavailable`)."""
        if isinstance(outcome, Exception):  # every failure a call is given is an Exception
            self._raise(outcome)
        if outcome is _DOWN:
            raise self._unavailable()
        return outcome

    def run(self, script: _Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run ``script`` (one command; ``StateUnavailable`` if Redis does not answer).

        Calls from several threads share the kept connection: while one write is on the wire,
        the calls that arrive queue, and the first of them sends them all in the next write.
        A script that ``settles`` is sent also while the link fails fast.
        """
        if self._down_until and not script.settles:
            self._check()
        if self.cluster:
            return self._run_pooled(script, keys, args)
        pending = _Pending(script, ("EVALSHA", script.sha, len(keys), *keys, *args), None)
        self._send([pending])
        return script.checked(self._reply(pending.outcome))

    def _send(self, batch: list[_Pending]) -> None:
        """Have ``batch`` (this thread's calls) sent in one write: queued behind the write on the
        wire, then answered or sent by this thread with the queue; or, with none on the wire, sent now."""
        if self._sending:
            with self._queue_lock:
                waits = self._sending
                if waits:
                    done = threading.Lock()  # one for the thread's calls: it waits for them all
                    done.acquire()
                    waiter = _Waiter(done)
                    for pending in batch:
                        pending.done = done
                        pending.waiter = waiter
                    self._queue.extend(batch)  # one queue: the next write takes them all
            if waits:
                try:
                    self._wait(batch, waiter)
                except BaseException:
                    self._leave(batch, waiter)
                    raise
                return
        with self._send_lock:
            self._sending = True
            try:
                self._lead(batch)
            except BaseException:  # Ctrl-C before _lead's own hand-on ran: hand on (again, harmless: no
                self._pass_on(batch, True)  # call of this batch is queued, and a thread woken is not woken twice)
                raise

    def _wait(self, batch: list[_Pending], waiter: _Waiter) -> None:
        """Wait for the replies to this thread's queued calls ``batch`` (``waiter.done`` is released
        when they come, or when it is this thread's turn to send the queue: it then sends it).

        A wait has a bound: every ``_patience`` seconds without a wake, the thread checks that a
        thread holds the send lock (is writing) and that its calls are queued (that writer's
        hand-on wakes a queued thread to send them). When either is not so, the sender may have
        been interrupted where it could not hand the queue on: the thread waits for the send lock
        (for the write on the wire, if one is) and, its calls still unanswered, sends the queue
        itself (its own calls again if a sender took them and left them unanswered). Only the
        thread holding the send lock writes on the kept connection. Interrupted
        (``KeyboardInterrupt``) once it took the queue, it hands it on before it lets go of the
        send lock, even where :meth:`_lead` could not (as that starts or hands on); interrupted
        before, :meth:`_send` takes its calls out of the queue (:meth:`_leave`)."""
        done = waiter.done
        while True:
            woken = done.acquire(timeout=self._patience)
            if not any(map(_unanswered, batch)):
                return
            if woken or not self._send_lock.locked() or not self._queued(done):
                with self._send_lock:
                    try:
                        queued = self._claim(batch, waiter)
                        if queued is not None:
                            self._lead(queued, waiter)
                    except BaseException:
                        self._pass_on(waiter.claimed, True, waiter)  # a no-op once handed on
                        raise
                return

    def _queued(self, done: Any) -> bool:
        """Whether the calls of the thread waiting on ``done`` are in the queue."""
        with self._queue_lock:
            return any(pending.done is done for pending in self._queue)

    def _claim(self, batch: list[_Pending], waiter: _Waiter) -> list[_Pending] | None:
        """The queue, taken to send by this thread (it holds the send lock), with its own calls
        ``batch`` first if a sender took them and could not queue them again; None when they were
        answered meanwhile."""
        with self._queue_lock:
            if not any(map(_unanswered, batch)):
                return None
            queued = self._queue
            if not any(pending.done is waiter.done for pending in queued):  # no thread sends them now: nor will one
                queued = [pending for pending in batch if _unanswered(pending)] + queued
            waiter.claimed = queued  # (no call between these stores: an interrupt lands before or after them all)
            self._queue = []
            self._sending = True
            waiter.state = _WRITING
            return queued

    def _leave(self, batch: list[_Pending], waiter: _Waiter) -> None:
        """This thread, interrupted, stops waiting for its calls ``batch``: they leave the queue (in
        flight, they are not sent again), and the next queued thread gets its turn to send."""
        following = None
        with self._queue_lock:
            if waiter.state < _WRITING:  # queued still (a writer hands the queue on itself: _pass_on)
                self._queue = [pending for pending in self._queue if pending.done is not waiter.done]
                if waiter.state == _WOKEN and any(map(_unanswered, batch)):  # woken for its turn
                    following = self._nominate()
            for pending in batch:
                pending.done = None  # no one waits for them
            waiter.state = _LEFT
        if following is not None:
            following.release()

    def _nominate(self) -> Any:
        """(Under ``_queue_lock``.) The lock to release to wake the first queued thread for its turn
        to send the queue; None when none is queued or it was woken already."""
        queue = self._queue
        self._sending = bool(queue)
        if queue:
            waiter = queue[0].waiter
            if waiter is not None and waiter.state == _WAITING:
                waiter.state = _WOKEN
                return queue[0].done
        return None

    def run_many(self, script: _Script, calls: Sequence[tuple[Sequence[str], Sequence[Any]]]) -> list[Any]:
        """Run ``script`` once per ``(keys, args)`` of ``calls``, all in one write (with the calls
        queued meanwhile): one round trip for them all. Returns the replies in order, or raises the
        first failure (``StateUnavailable`` if Redis does not answer). On a Redis Cluster, whose
        keys may live on several nodes, the calls go one after the other."""
        if self._down_until and not script.settles:
            self._check()
        if self.cluster or not calls:
            return [self._run_pooled(script, keys, args) for keys, args in calls]
        batch = [_Pending(script, ("EVALSHA", script.sha, len(keys), *keys, *args), None) for keys, args in calls]
        self._send(batch)
        return [script.checked(self._reply(pending.outcome)) for pending in batch]

    def _lead(self, batch: list[_Pending], mine: _Waiter | None = None) -> None:
        """(The send lock held.) Send ``batch`` in one write, give every call its reply, and hand the
        queue to the next sender. ``mine``: this thread's state when it took ``batch`` from the queue
        (None when it sends its own calls alone). Only an interrupt (a ``BaseException`` that is no ``Exception``:
        Ctrl-C) is this thread's own; any other failure is given to the calls left unanswered
        (:meth:`_broke`)."""
        interrupted = True
        try:
            try:
                sending = self._to_send(batch)
                if sending:
                    connection = self._hot_connection()
                    if self._owed:  # a write cut short where it could not drop the connection
                        connection.disconnect()  # its replies must not be read as this write's
                    self._owed = True
                    unloaded = _exchange(connection, sending)
                    if unloaded:
                        _exchange(connection, unloaded, reload=True)
                    self._owed = False
            except Exception as exc:
                self._broke(batch, exc)
            interrupted = False
        finally:
            self._pass_on(batch, interrupted, mine)

    def _to_send(self, batch: list[_Pending]) -> list[_Pending]:
        """The calls of ``batch`` to send: all, or while the link fails fast (``down_for`` after a
        failure) those whose script ``settles`` (the others fail at once)."""
        if not self._is_down():
            return batch
        sending = []
        for pending in batch:
            if pending.script.settles:
                sending.append(pending)
            else:
                pending.outcome = _DOWN
        return sending

    def _broke(self, batch: Sequence[_Pending], exc: Exception) -> None:
        """Give ``exc`` to the calls of ``batch`` left unanswered, and mark the link down when Redis
        cannot decide now (the calls queued meanwhile fail fast), unless only a write of several
        calls was slow (:class:`BatchTimeout`). Any other error is each call's to raise: a
        configuration error met while connecting (a refused ``SELECT`` or password, a service that
        is not Redis) fails every call, never the fail mode."""
        _fail(batch, exc)
        if _cannot_decide(exc) and not isinstance(exc, BatchTimeout):
            self._down_until = time.monotonic() + self.down_for

    def _pass_on(self, batch: list[_Pending], interrupted: bool, mine: _Waiter | None = None) -> None:
        """Wake the threads whose calls ``batch`` (sent by this thread, in state ``mine`` if it took
        them from the queue) answered, and the first queued thread for its turn to send the queue;
        once per batch taken (``mine``'s state then goes from ``_WRITING`` to ``_LEFT``). When this
        thread was ``interrupted`` (``KeyboardInterrupt``: its own), the calls of waiting threads
        it left unanswered go first in the queue, so one of those threads sends them again: no
        other call fails, and the link is not marked down."""
        again: list[_Pending] = []
        woken = []
        own = None if mine is None else mine.done
        with self._queue_lock:
            if mine is not None:
                if mine.state != _WRITING:  # handed on already
                    return
                mine.state, mine.claimed = _LEFT, []
            if interrupted:
                again = [p for p in batch if p.done is not own and p.done is not None and _unanswered(p)]
                if again:
                    self._queue = again + self._queue
            waiting = {p.done for p in again} if again else ()  # their threads wait on
            last = own
            for pending in batch:  # one wake per thread (its calls are side by side)
                done = pending.done
                if done is not last and done is not None:
                    last = done
                    waiter = pending.waiter
                    if done in waiting:
                        continue
                    if waiter is None:
                        woken.append(done)
                    elif waiter.state == _WAITING:  # a thread woken already is not woken twice
                        waiter.state = _WOKEN
                        woken.append(done)
            if self._queue:
                following = self._nominate()
            else:  # (the lone caller's path: no call to make)
                following, self._sending = None, False
        for done in woken:
            done.release()
        if following is not None:
            following.release()

    def _node_down(self, client: Any, keys: Sequence[str]) -> None:
        """(A cluster with failed nodes.) Fail at once a call whose key's node failed moments ago."""
        now = time.monotonic()
        for name, until in list(self._down_nodes.items()):
            if until <= now:
                self._down_nodes.pop(name, None)
        if self._down_nodes and self._node_of(client, keys, None) in self._down_nodes:
            raise self._unavailable()

    @staticmethod
    def _node_of(client: Any, keys: Sequence[str], exc: Exception | None) -> str | None:
        """The cluster node (``host:port``) of a call: the one ``exc`` names (redis-py 6+ gives a
        failed call's connection), else the node serving the call's first key in the client's slot
        map; None when neither is known (the whole link is then marked down)."""
        found = getattr(exc, "connection", None)
        host, port = getattr(found, "host", None), getattr(found, "port", None)
        if host is not None and port is not None:
            return f"{host}:{port}"
        try:
            node = client.nodes_manager.get_node_from_slot(client.keyslot(keys[0]))
            return f"{node.host}:{node.port}"
        except Exception:
            return None

    def _cluster_failure(self, client: Any, keys: Sequence[str], exc: Exception) -> NoReturn:
        """Raise what a cluster call's ``exc`` means; a node that did not answer is marked down alone."""
        one = keys and isinstance(exc, (redis.ConnectionError, redis.TimeoutError)) and _cannot_decide(exc)
        self._raise(exc, self._node_of(client, keys, exc) if one else None)

    def _run_pooled(self, script: _Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            client = self.client  # made on first use: it asks a node for the slot map
        except _CAUGHT as exc:
            self._raise(exc)
        if self._down_nodes and not script.settles and keys:
            self._node_down(client, keys)
        try:
            try:
                reply = client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                reply = client.eval(script.source, len(keys), *keys, *args)
        except _CAUGHT as exc:
            self._cluster_failure(client, keys, exc)
        return script.checked(reply)

    async def arun(self, script: _Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """:meth:`run` on the asyncio client: the event loop is never blocked. The loop's tasks
        share one kept connection the same way: calls made while a write is on the wire go
        together in the next one."""
        if self._down_until and not script.settles:
            self._check()
        if self.cluster:
            return await self._arun_pooled(script, keys, args)
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _Batcher(self.aclient().connection_pool.make_connection())
        pending = _Pending(script, ("EVALSHA", script.sha, len(keys), *keys, *args), loop.create_future())
        batcher.queue.append(pending)
        if batcher.sending:
            await pending.done
        else:  # nothing on the wire: this caller sends its call itself (no task to start)
            batcher.sending = True
            await self._drain(batcher, once=True)
        return script.checked(self._reply(pending.outcome))

    async def _drain(self, batcher: _Batcher, *, once: bool = False) -> None:
        """Send the queued calls a write at a time (a cancelled call is not sent): one write
        when ``once``, handing what is queued after it to a task; else until none is left."""
        batch: list[_Pending] = []
        try:
            while batcher.queue:
                batch = [p for p in batcher.queue if not p.done.done()]
                batcher.queue = []
                sending = self._to_send(batch)
                if sending:
                    try:
                        unloaded = await _aexchange(batcher.connection, sending)
                        if unloaded:
                            await _aexchange(batcher.connection, unloaded, reload=True)
                    except Exception as exc:
                        self._broke(sending, exc)
                for pending in batch:
                    if not pending.done.done():
                        pending.done.set_result(None)
                batch = []
                if once:
                    break
        except BaseException as exc:
            failed = batch if once else [*batch, *batcher.queue]
            if not once:
                batcher.queue = []
            _fail(failed, _interrupted())
            for pending in failed:
                if not pending.done.done():
                    pending.done.set_result(None)
            if once or not isinstance(exc, Exception):
                raise
            log_event(40, "redis batch failed", where=self._where(), error=f"{type(exc).__name__}: {exc}")
        finally:
            batcher.sending = bool(once and batcher.queue)
            batcher.task = asyncio.get_running_loop().create_task(self._drain(batcher)) if batcher.sending else None

    async def _arun_pooled(self, script: _Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        client = self.aclient()
        if self._down_nodes and not script.settles and keys:
            self._node_down(client, keys)
        try:
            try:
                reply = await client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                reply = await client.eval(script.source, len(keys), *keys, *args)
        except _CAUGHT as exc:
            self._cluster_failure(client, keys, exc)
        return script.checked(reply)

    def command(self, *args: Any) -> Any:
        """A plain command (``DEL``, ``PING``), with the same failure handling."""
        self._check()
        try:
            return self.client.execute_command(*args)
        except _CAUGHT as exc:
            self._raise(exc)

    async def acommand(self, *args: Any) -> Any:
        """:meth:`command` on the asyncio client."""
        self._check()
        try:
            return await self.aclient().execute_command(*args)
        except _CAUGHT as exc:
            self._raise(exc)

    def close(self) -> None:
        """Close the sync pool and the kept connection, after the write on it, if one is on the
        wire, has its replies (or failed): not under a writer (asyncio clients close with :meth:`aclose`).

        The wait is bounded (twice the timeout and a second: a write and its resend): a signal
        handler that closes the link in the very thread writing on it would wait for ever; it
        then closes it under that write, whose calls fail with :class:`StateUnavailable` or are sent again.
        """
        held = self._send_lock.acquire(timeout=2 * self.timeout + 1.0)
        try:
            hot, self._hot = self._hot, None
            if hot is not None and self._hot_pid == os.getpid():
                hot.disconnect()
        finally:
            if held:
                self._send_lock.release()
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        """Close the asyncio client and the kept connection of the running loop."""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.pop(loop, None)
        if batcher is not None:
            if batcher.task is not None:  # let the calls on the wire have their replies first
                await asyncio.wait({batcher.task})
            await batcher.connection.disconnect()
        found = self._aclients.pop(loop, None)
        if found is not None:
            await found.aclose()

    def __repr__(self) -> str:
        return f"RedisLink({self._where()!r}, prefix={self.prefix!r})"


def _now_arg(server_time: bool, now: float) -> str:
    """``now`` as a script takes it (checked: :func:`~harness_one.state._memory.moment`), or ``''`` for Redis ``TIME``."""
    return "" if server_time else repr(moment(now))


#: The longest key TTL the scripts set, in milliseconds (~31,700 years).
_MOST_MS = 1e15


def _lease(lease: float, what: str = LEASE) -> str:
    """A lease (or a budget's ttl) as the scripts take it: at most 10^12 s (a TTL of 10^15 ms), so a
    huge or infinite one cannot make ``PEXPIRE`` refuse the TTL and leave a key with none; NaN is
    refused (``ValueError``) before anything is sent, as every backend refuses it."""
    return repr(min(seconds(lease, what), _MOST_MS / 1000))


class RedisBuckets:
    """Token buckets in Redis: one hash per bucket (tokens, last refill) that expires once full again.

    ``server_time`` (default): the clock is Redis ``TIME`` and ``now`` is ignored, so every
    host agrees; ``False`` uses the caller's ``now`` (deterministic tests, one host).
    """

    def __init__(self, link: RedisLink, *, server_time: bool = True) -> None:
        self.link = link
        self.server_time = server_time

    def _key(self, key: Hashable) -> str:
        return f"{self.link.prefix}rl:{{{key_text(key)}}}"

    def _args(self, key: Hashable, rate: float, burst: float, cost: float, now: float) -> tuple[list[str], list[Any]]:
        return [self._key(key)], [
            _now_arg(self.server_time, now),
            repr(rate),
            repr(burst),
            repr(cost),
        ]

    def acquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float:
        return float(self.link.run(_BUCKET, *self._args(key, rate, burst, cost, now)))

    async def aacquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float:
        """:meth:`acquire` on the asyncio client."""
        return float(await self.link.arun(_BUCKET, *self._args(key, rate, burst, cost, now)))

    def give_back(self, key: Hashable, *, burst: float, cost: float) -> None:
        """Return the ``cost`` tokens a call took and did not use (refused afterwards, before it ran)."""
        self.link.run(_BUCKET_GIVE_BACK, [self._key(key)], [repr(burst), repr(cost)])

    async def agive_back(self, key: Hashable, *, burst: float, cost: float) -> None:
        """:meth:`give_back` on the asyncio client."""
        await self.link.arun(_BUCKET_GIVE_BACK, [self._key(key)], [repr(burst), repr(cost)])


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _record(found: Any) -> Record | None:
    if found == 0:  # the key is the caller's
        return None
    fp, st, ex, ok, value, error, quoted = found  # (quoted nil: a record written before it)
    return Record(
        _text(fp),
        _text(st),
        float(ex),
        ok == b"1",
        json.loads(value) if value else None,
        json.loads(error) if error else None,
        quoted == b"1",
    )


class RedisStore:
    """Idempotency records in Redis: a hash per (tool, key) with a TTL of its lease, then of its record TTL.

    Same semantics as :class:`MemoryStore` and :class:`SQLiteStore` (``now`` is the callers'
    wall-clock time, compared with the stored expiry). Values are stored as JSON, as in the
    SQLite store: a replay returns the JSON form of the first result; ``finish`` raises
    ``TypeError``/``ValueError`` for a result that is not JSON, and ``ValueError`` for one
    whose JSON is longer than ``max_value`` characters (8 MiB by default: a larger record
    would take longer to write and read than a Redis operation may, so it could be stored but
    never replayed). A claim's ``owner`` is a field of its hash.
    """

    def __init__(self, link: RedisLink, *, max_value: int = 8 << 20) -> None:
        self.link = link
        self.max_value = max_value

    def _key(self, scope: str, key: str) -> str:
        return f"{self.link.prefix}idem:{len(scope)}:{scope}:{key}"

    def _begin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, owner: str | None
    ) -> tuple[list[str], list[Any]]:
        mine = owner if owner is not None else os.urandom(8).hex()  # a claim sent again finds its owner
        return [self._key(scope, key)], [repr(moment(now)), fingerprint, _lease(lease), mine]

    def begin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, *, owner: str | None = None
    ) -> Record | None:
        return _record(self.link.run(_BEGIN, *self._begin(scope, key, fingerprint, now, lease, owner)))

    async def abegin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, *, owner: str | None = None
    ) -> Record | None:
        return _record(await self.link.arun(_BEGIN, *self._begin(scope, key, fingerprint, now, lease, owner)))

    def _renew(self, scope: str, key: str, now: float, lease: float, owner: str | None) -> tuple[list[str], list[Any]]:
        return [self._key(scope, key)], [repr(moment(now)), _lease(lease), owner or ""]

    def renew(self, scope: str, key: str, now: float, lease: float, *, owner: str | None = None) -> bool:
        return bool(self.link.run(_RENEW, *self._renew(scope, key, now, lease, owner)))

    def renew_many(self, claims: Sequence[tuple[str, str, str | None]], now: float, lease: float) -> list[bool]:
        """:meth:`renew` of each ``(scope, key, owner)`` of ``claims``, in one round trip."""
        calls = [self._renew(scope, key, now, lease, owner) for scope, key, owner in claims]
        return [bool(renewed) for renewed in self.link.run_many(_RENEW, calls)]

    async def arenew(self, scope: str, key: str, now: float, lease: float, *, owner: str | None = None) -> bool:
        return bool(await self.link.arun(_RENEW, *self._renew(scope, key, now, lease, owner)))

    def _finish(self, scope: str, key: str, record: Record, owner: str | None, now: float | None) -> tuple[list[str], list[Any]]:
        # before any I/O: the script would write the record and then fail to give it a TTL ('nan')
        expires = seconds(record.expires, EXPIRES)
        now = known_moment(now)
        value = outcome_json(record.value)  # TypeError/ValueError for values not JSON as they are: the plugin stores
        error = "" if record.error is None else outcome_json(record.error)  # their JSON form
        if len(value) + len(error) > self.max_value:
            raise ValueError(
                f"the outcome is {len(value) + len(error):,} characters of JSON, over the {self.max_value:,} a record holds"
            )
        # measured on the caller's clock, the one `record.expires` was read from (wall time if not given, or
        # not finite: a NaN or infinite `now` gave the outcome a TTL of 1 ms)
        left = (expires - (now if now is not None else time.time())) * 1000
        fallback = math.ceil(min(left, _MOST_MS)) if left >= 1 else 1  # at most 10^15 ms (an infinite ttl too)
        return [self._key(scope, key)], [
            "" if now is None else repr(now),
            record.fingerprint,
            record.state,
            repr(expires),
            "1" if record.ok else "0",
            value,
            error,
            fallback,
            owner or "",
            "1" if record.quoted else "0",
        ]

    def finish(self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None) -> bool:
        return bool(self.link.run(_FINISH, *self._finish(scope, key, record, owner, now)))

    async def afinish(self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None) -> bool:
        return bool(await self.link.arun(_FINISH, *self._finish(scope, key, record, owner, now)))

    def release(self, scope: str, key: str, *, owner: str | None = None) -> None:
        self.link.run(_DELETE if owner is None else _RELEASE, [self._key(scope, key)], [] if owner is None else [owner])

    async def arelease(self, scope: str, key: str, *, owner: str | None = None) -> None:
        await self.link.arun(_DELETE if owner is None else _RELEASE, [self._key(scope, key)], [] if owner is None else [owner])


class RedisSlots:
    """Concurrency slots in Redis: a sorted set of holders per tool (and one over all tools),
    scored by lease expiry, so the slots of a killed process free themselves after ``lease``.

    All slot keys share one hash tag (a script checks a tool's cap and the total together).
    """

    def __init__(self, link: RedisLink, *, server_time: bool = True) -> None:
        self.link = link
        self.server_time = server_time

    def _keys(self, tool: str) -> list[str]:
        tag = slot_tag(self.link.prefix)
        return [f"{tag}:{len(tool)}:{tool}", f"{tag}:*"]

    def _acquire(
        self, tool: str, holder: str, cap: int | None, total: int | None, now: float, lease: float
    ) -> tuple[list[str], list[Any]]:
        return self._keys(tool), [
            _now_arg(self.server_time, now),
            holder,
            "" if cap is None else cap,
            "" if total is None else total,
            _lease(lease),
        ]

    def acquire(
        self, tool: str, holder: str, *, cap: int | None, total: int | None, now: float, lease: float
    ) -> tuple[bool, int, int]:
        ok, running, overall = self.link.run(_SLOT_ACQUIRE, *self._acquire(tool, holder, cap, total, now, lease))
        return bool(ok), int(running), int(overall)

    async def aacquire(
        self, tool: str, holder: str, *, cap: int | None, total: int | None, now: float, lease: float
    ) -> tuple[bool, int, int]:
        ok, running, overall = await self.link.arun(_SLOT_ACQUIRE, *self._acquire(tool, holder, cap, total, now, lease))
        return bool(ok), int(running), int(overall)

    def _renew(self, tool: str, holder: str, now: float, lease: float) -> tuple[list[str], list[Any]]:
        return self._keys(tool), [_now_arg(self.server_time, now), holder, _lease(lease)]

    def renew(self, tool: str, holder: str, *, now: float, lease: float) -> bool:
        return bool(self.link.run(_SLOT_RENEW, *self._renew(tool, holder, now, lease)))

    def renew_many(self, held: Sequence[tuple[str, str]], *, now: float, lease: float) -> list[bool]:
        """:meth:`renew` of each ``(tool, holder)`` of ``held``, in one round trip."""
        calls = [self._renew(tool, holder, now, lease) for tool, holder in held]
        return [bool(renewed) for renewed in self.link.run_many(_SLOT_RENEW, calls)]

    def release(self, tool: str, holder: str) -> None:
        self.link.run(_SLOT_RELEASE, self._keys(tool), ["", holder])

    async def arelease(self, tool: str, holder: str) -> None:
        await self.link.arun(_SLOT_RELEASE, self._keys(tool), ["", holder])

    def running(self, tool: str | None, *, now: float) -> int:
        keys = self._keys(tool or "")
        return int(self.link.run(_SLOT_COUNT, [keys[0] if tool is not None else keys[1]], [_now_arg(self.server_time, now)]))


class RedisCircuits:
    """Circuit breakers in Redis: one hash per circuit, a tool's name or a ``key`` tools share
    (state, probes, per-second counts), so one process's failures open the circuit for all. An
    idle circuit's hash expires after twice ``max(window, open_for)``; a probe lost with its
    process is forgotten after ``open_for``. A half-open period is named by Redis's clock (in
    microseconds) when it began, so a probe's late end counts in no later period, also after
    the hash expired.
    """

    def __init__(self, link: RedisLink, *, server_time: bool = True) -> None:
        self.link = link
        self.server_time = server_time

    def _call(self, tool: str, policy: Any, now: float, *extra: Any) -> tuple[list[str], list[Any]]:
        name = key_text(tool)
        return [f"{self.link.prefix}cb:{{{len(name)}:{name}}}"], [
            _now_arg(self.server_time, now),
            repr(float(policy.failure_ratio)),
            int(policy.min_calls),
            repr(float(policy.window)),
            repr(float(policy.open_for)),
            int(policy.probes),
            *extra,
        ]

    def admit(self, tool: str, policy: Any, *, now: float) -> tuple[float, int]:
        wait, probe = self.link.run(_CIRCUIT_ADMIT, *self._call(tool, policy, now))
        return float(wait), int(probe)

    async def aadmit(self, tool: str, policy: Any, *, now: float) -> tuple[float, int]:
        wait, probe = await self.link.arun(_CIRCUIT_ADMIT, *self._call(tool, policy, now))
        return float(wait), int(probe)

    def record(self, tool: str, policy: Any, *, now: float, failed: bool, probe: int) -> None:
        self.link.run(_CIRCUIT_PROBED if probe else _CIRCUIT_RECORD, *self._call(tool, policy, now, int(failed), int(probe)))

    async def arecord(self, tool: str, policy: Any, *, now: float, failed: bool, probe: int) -> None:
        script = _CIRCUIT_PROBED if probe else _CIRCUIT_RECORD
        await self.link.arun(script, *self._call(tool, policy, now, int(failed), int(probe)))

    def unprobe(self, tool: str, policy: Any, *, probe: int) -> None:
        self.link.run(_CIRCUIT_UNPROBE, *self._call(tool, policy, 0.0, int(probe)))

    async def aunprobe(self, tool: str, policy: Any, *, probe: int) -> None:
        await self.link.arun(_CIRCUIT_UNPROBE, *self._call(tool, policy, 0.0, int(probe)))

    def snapshot(self, tool: str, policy: Any, *, now: float) -> dict[str, Any]:
        state, calls, failures, opened = self.link.run(_CIRCUIT_SNAPSHOT, *self._call(tool, policy, now))
        return {"state": _text(state), "calls": int(calls), "failures": int(failures), "opened": int(opened)}


# Budgets: one hash per run, fields 'n:<scope>' (counts; 'n:*' over all scopes), 'ex' (the
# time the counters expire: the last take plus its ttl; the key's own TTL also cleans it up),
# 'g': the tickets of the run's last 64 give-backs, each as 16 hex digits and a comma (a comma
# follows 16 hex digits only at the end of a whole ticket: a find is exact), and 'c': the
# tickets of the run's last 64 takes with one, each followed by ',' (counted) or ';' (given back
# by an untake, or untaken before it came). ('t', the take tickets an earlier version kept, is
# no longer read.)
_TICKETS = f"local kept = {17 * KEPT_TICKETS}\n"
#: Seconds a run whose calls were all given back keeps its give-backs' tickets (then its hash
#: expires): a give-back re-sent after a lost reply comes within the link's timeout.
KEEP_GIVE_BACKS = 60.0

# KEYS: the run's hash. ARGV: now ('' = Redis TIME), scope, limit ('' none), total ('' none), ttl,
# ticket ('' none). Returns 0 (counted; or, for a ticket the run holds, counted already or
# untaken: nothing is counted), 1 (the scope's budget is spent) or 2 (the run's total is spent).
_BUDGET_TAKE = _Script(
    _NOW
    + _TICKETS
    + """
local k, f, ttl, t = KEYS[1], 'n:' .. ARGV[2], tonumber(ARGV[5]), ARGV[6]
local c = redis.call('HMGET', k, f, 'n:*', 'ex', 'c')
local n, all, ex, held = tonumber(c[1]) or 0, tonumber(c[2]) or 0, tonumber(c[3]), c[4] or ''
if ex ~= nil and now >= ex then
  n, all, held = 0, 0, ''
  redis.call('DEL', k)
end
if t ~= '' and (string.find(held, t .. ',', 1, true) or string.find(held, t .. ';', 1, true)) then return 0 end
local limit, total = tonumber(ARGV[3]), tonumber(ARGV[4])
local spent = 0
if limit ~= nil and n >= limit then spent = 1
elseif total ~= nil and all >= total then spent = 2
elseif t == '' then redis.call('HSET', k, f, n + 1, 'n:*', all + 1)
else
  held = held .. t .. ','
  if #held > kept then held = string.sub(held, -kept) end
  redis.call('HSET', k, f, n + 1, 'n:*', all + 1, 'c', held)
end
if spent ~= 0 and all == 0 and n == 0 then -- maybe nothing counted ('n:*' is 0 after a give-back of an uncounted scope)
  local counted = false
  local fields = redis.call('HGETALL', k)
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 2) == 'n:' and tonumber(fields[i + 1]) ~= 0 then counted = true end
  end
  if not counted then return spent end -- nothing counted: leave no key; else the refusal restarts the ttl, as in memory
end
redis.call('HSET', k, 'ex', num(now + ttl))
redis.call('PEXPIRE', k, math.min(math.max(1, math.ceil(ttl * 1000)), 604800000))
return spent
""",
    reply=_Shape("0, 1 or 2", lambda reply: type(reply) is int and reply in (0, 1, 2)),
)

# The end of both scripts that uncount a call (k, f, c: the scope's and the run's counts before,
# keeps: whether the run holds tickets): one call of the scope and of '*' uncounted, never below
# zero. A run left with no count is deleted if it holds no ticket (a missing run counts zero);
# else it keeps its tickets, expiring within ARGV[4] (a re-send comes long before), so a
# give-back sent again after a new take of the run still finds its ticket, and refused calls of
# new runs leave no key for a day.
_UNCOUNT = """
if (tonumber(c[1]) or 0) > 0 then redis.call('HINCRBY', k, f, -1) end
if (tonumber(c[2]) or 0) > 0 then redis.call('HINCRBY', k, 'n:*', -1) end
local left = (tonumber(c[2]) or 0) > 1
if not left then
  local all = redis.call('HGETALL', k)
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 2) == 'n:' and tonumber(all[i + 1]) ~= 0 then left = true end
  end
end
if not left then
  local keep = tonumber(ARGV[4])
  if not keeps then redis.call('DEL', k)
  else
    local ms = redis.call('PTTL', k)
    if ms < 0 or ms > keep then redis.call('PEXPIRE', k, keep) end
  end
end
return 1
"""

# ARGV: '', scope, ticket ('' none), how long (ms) a run left with no count keeps its tickets.
# Uncounts one call (_UNCOUNT); with a ticket, unless the run's recent give-backs hold it (the
# same give-back, sent again after its reply was lost), and then records it. A missing run
# (never counted, expired, forgotten) is not made.
_BUDGET_GIVE_BACK = _Script(
    _TICKETS
    + """
local k, f, t = KEYS[1], 'n:' .. ARGV[2], ARGV[3]
local c = redis.call('HMGET', k, f, 'n:*', 'g', 'c')
if not c[2] then return 0 end
local done = c[3] or ''
if t ~= '' and string.find(done, t .. ',', 1, true) then return 0 end
if t ~= '' then
  done = done .. t .. ','
  if #done > kept then done = string.sub(done, -kept) end
  redis.call('HSET', k, 'g', done)
end
local keeps = done ~= '' or c[4]
"""
    + _UNCOUNT,
    settles=True,
)

# ARGV: '', scope, the take's ticket, how long (ms) a run left with no count keeps its tickets.
# Gives back the take of the ticket if the run counted it and it was not given back (_UNCOUNT),
# marking it ';': the same untake sent again, or the take sent again, changes nothing. A ticket
# the run does not hold (the take never came, or comes later) is recorded as given back, so the
# take counts nothing should it come; a run that holds nothing else then keeps it for ARGV[4].
_BUDGET_UNTAKE = _Script(
    _TICKETS
    + """
local k, f, t = KEYS[1], 'n:' .. ARGV[2], ARGV[3]
local c = redis.call('HMGET', k, f, 'n:*', 'c')
local held = c[3] or ''
if string.find(held, t .. ';', 1, true) then return 0 end
local at = string.find(held, t .. ',', 1, true)
if at then held = string.sub(held, 1, at + 15) .. ';' .. string.sub(held, at + 17)
else
  held = held .. t .. ';'
  if #held > kept then held = string.sub(held, -kept) end
end
redis.call('HSET', k, 'c', held)
if not at then
  if not c[2] then redis.call('PEXPIRE', k, tonumber(ARGV[4])) end
  return 0
end
local keeps = true
"""
    + _UNCOUNT,
    settles=True,
)

# ARGV: now, scope. Returns the scope's count (0 once the run's counters expired).
_BUDGET_USED = _Script(
    _NOW
    + """
local c = redis.call('HMGET', KEYS[1], 'n:' .. ARGV[2], 'ex')
local ex = tonumber(c[2])
if ex == nil or now >= ex then return 0 end
return tonumber(c[1]) or 0
""",
    reply=_COUNT,
)


def _ticket(ticket: str | None) -> str:
    """A take's or give-back's ticket as the budget scripts keep it: 16 hex digits (64 bits of its BLAKE2b digest), '' for none."""
    return "" if ticket is None else hashlib.blake2b(ticket.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class RedisBudgets:
    """Per-run call counters in Redis: one hash per run, expiring ``ttl`` seconds after the run's
    last ``take`` (at most 7 days), so every process and host on the Redis shares each run's budget.
    The hash also holds the tickets of the run's last 64 give-backs and of its last 64 takes with
    one (17 bytes each); a run left with no count keeps them for 60 seconds (``KEEP_GIVE_BACKS``;
    four times the link's ``timeout`` if that is longer), then expires.

    ``server_time`` (default): expiry runs on Redis ``TIME`` and ``now`` is ignored; ``False``
    uses the caller's ``now`` (deterministic tests, one host).
    """

    def __init__(self, link: RedisLink, *, server_time: bool = True) -> None:
        self.link = link
        self.server_time = server_time
        self._keep = math.ceil(max(KEEP_GIVE_BACKS, 4 * link.timeout) * 1000)  # ms

    def _key(self, run: str) -> str:
        name = key_text(run)  # a run id is caller data: a huge or unprintable one is hashed
        return f"{self.link.prefix}budget:{{{len(name)}:{name}}}"

    def _take(
        self, run: str, scope: str, limit: int | None, total: int | None, now: float, ttl: float, ticket: str | None
    ) -> tuple[list[str], list[Any]]:
        return [self._key(run)], [
            _now_arg(self.server_time, now),
            scope,
            "" if limit is None else limit,
            "" if total is None else total,
            _lease(ttl, TTL),
            _ticket(ticket),
        ]

    def take(
        self, run: str, scope: str, *, limit: int | None, total: int | None, now: float, ttl: float, ticket: str | None = None
    ) -> int:
        return int(self.link.run(_BUDGET_TAKE, *self._take(run, scope, limit, total, now, ttl, ticket)))

    async def atake(
        self, run: str, scope: str, *, limit: int | None, total: int | None, now: float, ttl: float, ticket: str | None = None
    ) -> int:
        """:meth:`take` on the asyncio client."""
        return int(await self.link.arun(_BUDGET_TAKE, *self._take(run, scope, limit, total, now, ttl, ticket)))

    def give_back(self, run: str, scope: str, *, ticket: str | None = None) -> None:
        self.link.run(_BUDGET_GIVE_BACK, [self._key(run)], ["", scope, _ticket(ticket), self._keep])

    async def agive_back(self, run: str, scope: str, *, ticket: str | None = None) -> None:
        """:meth:`give_back` on the asyncio client."""
        await self.link.arun(_BUDGET_GIVE_BACK, [self._key(run)], ["", scope, _ticket(ticket), self._keep])

    def untake(self, run: str, scope: str, *, ticket: str) -> None:
        """Give back the take of ``ticket`` whose reply was cut short, once, if the run counted it;
        a take of ``ticket`` that comes later counts nothing (:class:`~harness_one.state.BudgetStore`)."""
        self.link.run(_BUDGET_UNTAKE, [self._key(run)], ["", scope, _ticket(ticket), self._keep])

    async def auntake(self, run: str, scope: str, *, ticket: str) -> None:
        """:meth:`untake` on the asyncio client."""
        await self.link.arun(_BUDGET_UNTAKE, [self._key(run)], ["", scope, _ticket(ticket), self._keep])

    def used(self, run: str, scope: str, *, now: float) -> int:
        return int(self.link.run(_BUDGET_USED, [self._key(run)], [_now_arg(self.server_time, now), scope]))

    def forget(self, run: str | None) -> None:
        """Drop ``run``'s counters; ``None``: every run's under this prefix (``SCAN``, on every node of a cluster)."""
        if run is not None:
            self.link.command("DEL", self._key(run))
            return
        prefix = "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in self.link.prefix)
        try:
            keys = list(self.link.client.scan_iter(match=f"{prefix}budget:*", count=1000))
        except _CAUGHT as exc:
            self.link._raise(exc)
        for key in keys:  # one by one: on a cluster the keys live in different slots
            self.link.command("DEL", key)
