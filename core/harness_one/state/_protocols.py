"""The backend contracts (checked for every backend by ``harness_one.testing``)."""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._errors import ToolError
from .._policies import _as_seconds, _shown

__all__ = [
    "EXPIRES",
    "LEASE",
    "TTL",
    "key_text",
    "outcome_json",
    "positive_seconds",
    "seconds",
    "AsyncBudgetStore",
    "AsyncCircuitStore",
    "AsyncConcurrencySlots",
    "AsyncIdempotencyStore",
    "AsyncRateLimitBackend",
    "BudgetStore",
    "CircuitStore",
    "ConcurrencySlots",
    "IdempotencyStore",
    "RateLimitBackend",
    "Record",
    "StateUnavailable",
]


#: How many of a run's latest give-backs a standard budget store remembers the tickets of.
KEPT_TICKETS = 64


def outcome_json(value: Any) -> str:
    """An idempotent outcome as the JSON text a store keeps (``json.dumps``): ``TypeError`` for a value that is not
    JSON, a dict key that is not a string included (``json.dumps`` writes ``1`` and ``"1"`` as one key, which would
    read back as one), ``ValueError`` for a cycle or nesting past what ``json.dumps`` follows; the idempotency
    plugin then stores the text the model read for it."""
    stack, seen = [value], set()
    while stack:  # (not recursive: as deep as json.dumps then refuses)
        item = stack.pop()
        if isinstance(item, dict):
            if id(item) in seen:
                continue  # a part met twice (json.dumps refuses a cycle)
            seen.add(id(item))
            if any(type(key) is not str for key in item):
                raise TypeError("a dict key that is not a string")
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            stack.extend(item)
    try:
        return json.dumps(value)
    except RecursionError as exc:
        raise ValueError(f"the outcome is nested too deeply to store: {exc}") from None


def key_text(value: Hashable, *, strict: bool = False) -> str:
    """A caller's key (a bucket, a run, a circuit) as bounded text: its text, or ``#`` and a digest
    of it when the text is over 200 characters or not printable (a lone surrogate cannot be sent to
    Redis; a huge one would be kept for every bucket, or time out the link), or is itself ``#`` and
    64 characters (so no key is taken for another's digest; ``#42`` stays ``#42``).

    The text of a string (a ``StrEnum`` member too) is the string itself, of an integer (an
    ``IntEnum`` member too, not a bool) its decimal digits, of a UUID its canonical form
    (``str(uuid)``), so ``7``, ``"7"`` and ``Tier.GOLD == 7`` are one key, as are a UUID and its
    string. An integer past Python's 4,300-digit conversion limit is keyed by a digest of its
    hexadecimal text (its decimal text would take quadratic time). Any other value's text is its
    ``repr``.

    ``strict``: only a value whose text says whose it is, a string, an integer (not a bool), an
    enum of them or a UUID; ``TypeError`` for any other (an object's text may be its address,
    another object's later), as a per-user key needs."""
    if strict and (not isinstance(value, (str, int, uuid.UUID)) or isinstance(value, bool)):
        raise TypeError(f"a {type(value).__name__} is not a string, an integer or a UUID")
    if isinstance(value, str):
        text = str.__str__(value)  # a str subclass's own __str__/__format__ may name its class
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            text = int.__repr__(value)  # an IntEnum's repr is <Tier.GOLD: 7>
        except ValueError:  # over sys.get_int_max_str_digits(): linear-time text, always digested
            text = hex(int(value))
    elif isinstance(value, uuid.UUID):
        text = uuid.UUID.__str__(value)
    else:
        text = repr(value)
    if len(text) <= 200 and text.isprintable() and not (len(text) == 65 and text[0] == "#"):
        return text
    return "#" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def positive_seconds(value: float | str, what: str) -> float:
    """``value`` (a number, or a URL's text ``float()`` reads) as a number of seconds above 0 and finite
    (:func:`~harness_one._policies._as_seconds`: an int past a float's range is not), else ``ValueError``
    naming ``what``."""
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        number = math.nan
    found = _as_seconds(number)
    if found is None:
        raise ValueError(f"{what} must be a number of seconds above 0, not {_shown(value)}")
    return found


#: What a backend's ``seconds`` check names (a lease, a record's expiry, a budget's ttl): the same input, the same error.
LEASE, EXPIRES, TTL = "a lease", "a record's expiry", "a budget's ttl"


def seconds(value: float, what: str) -> float:
    """``value`` (a lease, an expiry or a ttl a backend was given) as ``float()`` reads it, unless that is
    NaN, or ``float()`` refuses it: then ``ValueError`` (``TypeError`` for a type ``float()`` does not take)
    naming ``what`` (:data:`LEASE`, :data:`EXPIRES`, :data:`TTL`). A NaN time never compares as passed: a
    record or count would live for ever in one backend and vanish at once, or be written without a TTL, in
    another. Unlike :func:`positive_seconds` it takes 0, a negative and an infinite number (a backend caps
    or expires them)."""
    try:
        found = float(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{what} is a number of seconds, not {value!r}") from None
    if math.isnan(found):
        raise ValueError(f"{what} is a number of seconds, not NaN")
    return found


class StateUnavailable(ToolError):
    """The shared-state backend (Redis) did not answer in time or refused the connection.

    Backends raise it instead of their client's exceptions; each plugin's ``on_state_error``
    setting decides what a call does then (``docs/scaling.md``). ``retry_after`` is how long
    the backend will fail fast before it tries to reconnect. ``where`` names the backend (a
    Redis address, a SQLite file) for the application and its logs; the message, which a model
    may read when a plugin fails closed, does not.
    """

    kind = "state_unavailable"

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        tool: str | None = None,
        call_id: str | None = None,
        where: str | None = None,
    ) -> None:
        super().__init__(message, tool=tool, call_id=call_id)
        self.retry_after = retry_after
        self.where = where


@runtime_checkable
class RateLimitBackend(Protocol):
    """Where token buckets live.

    ``acquire`` takes ``cost`` tokens from the bucket ``key`` (``rate`` tokens per second,
    ``burst`` capacity, full when new) at time ``now`` and answers 0.0 when allowed, or the
    seconds until the tokens will be there. A refused call takes nothing.
    """

    def acquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float: ...


@dataclass
class Record:
    """What an idempotency store keeps per (scope, key): ``running`` until the outcome is ``done``.

    ``error`` is the failure's :meth:`ToolError.to_dict <harness_one.ToolError.to_dict>`,
    rebuilt with :meth:`ToolError.from_dict <harness_one.ToolError.from_dict>` on replay.
    ``quoted`` says a string ``value`` is the JSON of what the tool returned (a date, a ``Decimal``,
    bytes), which the model read quoted, not text it read as it is; a store keeps it with the value
    (one that does not replays such a value as text, without its quotes).
    """

    fingerprint: str
    state: str
    expires: float
    ok: bool = False
    value: Any = None
    error: dict[str, Any] | None = None
    quoted: bool = False


@runtime_checkable
class IdempotencyStore(Protocol):
    """Where idempotency records live. ``begin`` is atomic: exactly one caller gets ``None``.

    ``owner`` is a token unique to one claim (:func:`~harness_one.state.new_token`). A store
    that takes it keeps it with the claim, and then ``renew``, ``finish`` and ``release`` given
    an ``owner`` act only on that owner's claim: once a lease lapsed another caller may hold the
    key, and a late caller must not free or overwrite it. Without ``owner`` they act on whatever
    the key holds. The plugin passes ``owner`` to a store whose four methods (and ``a...`` twins)
    take it, and calls one written before owners without it.
    """

    def begin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, *, owner: str | None = None
    ) -> Record | None:
        """Return the live record for (scope, key), or create a ``running`` one (until ``now + lease``,
        held by ``owner``) and return None."""
        ...

    def renew(self, scope: str, key: str, now: float, lease: float, *, owner: str | None = None) -> bool:
        """Extend a ``running`` record's lease to ``now + lease``; False if it is gone, no longer
        running, lapsed, or (given ``owner``) another owner's."""
        ...

    def finish(self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None) -> bool | None:
        """Store the outcome (``record.state == "done"``).

        Given ``owner``: only if the key is that owner's, or holds nothing, or holds a record
        expired at ``now`` (no one else holds a live claim); else the other caller's claim or
        outcome is kept and the answer is False (a lapsed claim's result is then not stored).
        """
        ...

    def release(self, scope: str, key: str, *, owner: str | None = None) -> None:
        """Forget the key (the call produced no outcome to keep); given ``owner``, only that owner's claim."""
        ...


@runtime_checkable
class ConcurrencySlots(Protocol):
    """Where the slots of concurrency caps live: one per running call, held by a ``holder`` id.

    ``acquire`` is atomic across every process sharing the backend; a slot expires ``lease``
    seconds after it was taken or last renewed (a shared backend frees the slots of a killed
    process that way; the memory backend frees them when the call ends).
    """

    def acquire(
        self, tool: str, holder: str, *, cap: int | None, total: int | None, now: float, lease: float
    ) -> tuple[bool, int, int]:
        """Take a slot of ``tool`` if fewer than ``cap`` (None: no per-tool cap) are held and, when
        ``total`` is set, fewer than ``total`` over all tools. Returns ``(admitted, held for tool,
        held overall)``, the counts as they were before this call."""
        ...

    def renew(self, tool: str, holder: str, *, now: float, lease: float) -> bool:
        """Extend a held slot to ``now + lease``; False if it is gone."""
        ...

    def release(self, tool: str, holder: str) -> None:
        """Give the slot back (nothing happens if it is gone)."""
        ...

    def running(self, tool: str | None, *, now: float) -> int:
        """Slots held now, of one tool or (None) of all."""
        ...


@runtime_checkable
class CircuitStore(Protocol):
    """Where circuit-breaker state lives, per tool: closed, open or half-open, and recent counts.

    ``policy`` is a :class:`~harness_one.CircuitBreakerPolicy`; the store applies it (the
    transitions are the same for every backend, so a shared store opens a circuit for every
    process at once).
    """

    def admit(self, tool: str, policy: Any, *, now: float) -> tuple[float, int]:
        """``(0, probe)`` to let a call through, or ``(seconds to wait, 0)`` to refuse it.

        ``probe`` is 0 for a call of a closed circuit, else the half-open period the call probes
        (a positive number that changes each time the circuit opens).
        """
        ...

    def record(self, tool: str, policy: Any, *, now: float, failed: bool, probe: int) -> None:
        """Count a finished call; a probe's result closes or reopens a half-open circuit, unless
        it probed an earlier period (it ended after that period's verdict), which decides nothing."""
        ...

    def unprobe(self, tool: str, policy: Any, *, probe: int) -> None:
        """A probe admitted by ``admit`` did not run (refused later): give its place back (in its period only)."""
        ...

    def snapshot(self, tool: str, policy: Any, *, now: float) -> dict[str, Any]:
        """``{"state", "calls", "failures", "opened"}`` for statistics."""
        ...


@runtime_checkable
class BudgetStore(Protocol):
    """Where per-run call counters live: per run, a count per scope (a tool's name) and one over
    all scopes (``"*"``).

    ``take`` is atomic across every process sharing the store. Run ids are compared as text.
    A run's counters expire ``ttl`` seconds after its last ``take`` (measured with ``now``, or
    by a shared store's own clock), so finished runs are forgotten.
    """

    def take(self, run: str, scope: str, *, limit: int | None, total: int | None, now: float, ttl: float) -> int:
        """Count one call of ``scope`` in ``run`` if fewer than ``limit`` (None: no limit) are
        counted for ``scope`` and, when ``total`` is set, fewer than ``total`` for all scopes.
        Returns 0 (counted), 1 (``scope``'s budget is spent) or 2 (the run's total is spent);
        a refusal counts nothing.

        A take sent again (after its reply was lost) may count twice: the run has one call
        fewer, never one more. A store whose round trips can be cut short (with awaitable twins)
        may instead take ``ticket=`` (a token unique to this take) and have ``untake``:

        - ``take(..., ticket=t)``: the store remembers the tickets of the run's recent takes (the
          standard stores: the last 64); a take of a ticket it holds counts nothing and answers 0
          (sent again: the first counted it; or ``untake`` came first).
        - ``untake(run, scope, *, ticket)`` (and ``auntake``): give back the take of ``ticket``,
          whose reply was cut short (a cancelled ``acall``), if the store counted it and did not
          give it back yet; else nothing, and the take counts nothing should it come later. So it
          returns a unit once, and never one another call holds.

        The plugin passes take tickets, and sends ``untake`` for a take cut short, only to a
        store that has ``auntake``.
        """
        ...

    def give_back(self, run: str, scope: str, *, ticket: str | None = None) -> None:
        """Uncount one call of ``scope`` (and of all scopes) in ``run``; counts never go below zero.

        ``ticket`` is a token unique to this give-back (:func:`~harness_one.state.new_token`): a
        store that takes it remembers the tickets of the run's recent give-backs (the standard
        stores: the last 64), also once they left the run with nothing counted, and ignores a
        give-back of a ticket it holds, so a give-back sent again (after its reply was lost)
        changes nothing; any other give-back applies, however many takes of the run came since
        its take. The plugin passes ``ticket`` to a store whose ``give_back`` (and
        ``agive_back``) take it, and calls one written before tickets without it.
        """
        ...

    def used(self, run: str, scope: str, *, now: float) -> int:
        """Calls of ``scope`` (``"*"``: of all scopes) counted for ``run``, 0 once expired."""
        ...

    def forget(self, run: str | None) -> None:
        """Drop the counters of ``run`` (``None``: of every run)."""
        ...


# A backend whose decisions are network round trips also has ``a...`` twins of them; the
# standard plugins then answer their hooks with :class:`~harness_one.Await`, so ``acall``
# awaits the twin and never blocks the event loop. Lease renewal stays synchronous (it runs
# on the plugins' lease thread).


@runtime_checkable
class AsyncRateLimitBackend(RateLimitBackend, Protocol):
    """A :class:`RateLimitBackend` with an awaitable ``aacquire`` (same answer as ``acquire``)."""

    async def aacquire(self, key: Hashable, *, rate: float, burst: float, cost: float, now: float) -> float: ...


@runtime_checkable
class AsyncBudgetStore(BudgetStore, Protocol):
    """A :class:`BudgetStore` with awaitable ``atake`` and ``agive_back``."""

    async def atake(self, run: str, scope: str, *, limit: int | None, total: int | None, now: float, ttl: float) -> int: ...

    async def agive_back(self, run: str, scope: str, *, ticket: str | None = None) -> None: ...


@runtime_checkable
class AsyncIdempotencyStore(IdempotencyStore, Protocol):
    """An :class:`IdempotencyStore` with awaitable ``abegin``, ``afinish`` and ``arelease``."""

    async def abegin(
        self, scope: str, key: str, fingerprint: str, now: float, lease: float, *, owner: str | None = None
    ) -> Record | None: ...

    async def afinish(
        self, scope: str, key: str, record: Record, *, owner: str | None = None, now: float | None = None
    ) -> bool | None: ...

    async def arelease(self, scope: str, key: str, *, owner: str | None = None) -> None: ...


@runtime_checkable
class AsyncConcurrencySlots(ConcurrencySlots, Protocol):
    """:class:`ConcurrencySlots` with awaitable ``aacquire`` and ``arelease``."""

    async def aacquire(
        self, tool: str, holder: str, *, cap: int | None, total: int | None, now: float, lease: float
    ) -> tuple[bool, int, int]: ...

    async def arelease(self, tool: str, holder: str) -> None: ...


@runtime_checkable
class AsyncCircuitStore(CircuitStore, Protocol):
    """A :class:`CircuitStore` with awaitable ``aadmit``, ``arecord`` and ``aunprobe``."""

    async def aadmit(self, tool: str, policy: Any, *, now: float) -> tuple[float, int]: ...

    async def arecord(self, tool: str, policy: Any, *, now: float, failed: bool, probe: int) -> None: ...

    async def aunprobe(self, tool: str, policy: Any, *, probe: int) -> None: ...
