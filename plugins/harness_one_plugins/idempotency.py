"""The ``idempotency`` plugin: the first outcome of (tool, idempotency key) is stored and replayed.

Semantics follow Stripe and the IETF Idempotency-Key draft: the same key with different
arguments is an error; the same key while the first call still runs is a conflict (or a wait);
records expire; nothing is stored for arguments that fail validation. An in-progress record
holds the key for a lease that is renewed while the call runs, so a long call never runs
twice for one key while its first caller is alive, and a crashed caller frees the key when
its lease runs out. Each claim has an owner token, so a caller whose lease lapsed (its call
ran past it while the renewals failed) neither frees nor overwrites a claim another caller
took since: its outcome is stored only if no one else holds a live claim.

A tool that ran keeps its key: an outcome the store cannot hold as it is is stored as the
JSON the model read for it, and one it cannot hold even so as :class:`OutcomeNotReplayable`.
"""

from __future__ import annotations

import json
import threading
from collections import UserString
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from harness_one import (
    Await,
    Call,
    Clock,
    IdempotencyConflict,
    IdempotencyKeyMismatch,
    Lingering,
    Outcome,
    PluginError,
    Retry,
    ToolArgumentError,
    ToolCancelled,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    applies_to,
    fingerprint,
    hookimpl,
    log_event,
)
from harness_one.state import (
    Accepts,
    AsyncIdempotencyStore,
    AsyncTwins,
    FailMode,
    IdempotencyStore,
    LeaseKeeper,
    MemoryStore,
    Record,
    StateUnavailable,
    WallClock,
    key_text,
    new_token,
    round_trip,
)

from ._options import count, provides, seconds, takes_state
from ._text import rendered

if TYPE_CHECKING:
    from harness_one.state import SQLiteStore

__all__ = [
    "IdempotencyPlugin",
    "IdempotencyScopeMissing",
    "IdempotencyStore",
    "MemoryStore",
    "OutcomeNotReplayable",
    "QuotedString",
    "Record",
    "SQLiteStore",
    "WallClock",
    "fingerprint",
]


_OWNED = "idempotency.owned"  # (the key stored, fingerprint, owner token: None for a store without owners)
_WAITED = "idempotency.waited"
#: What each attempt another followed did, by its number: (its Lingering, None) when its tool runs on, else (None, kept).
_RAN = "idempotency.ran"
#: Errors a key keeps no outcome for: wrong arguments (the tool's own too) and a call cancelled before its tool returned.
_NOT_KEPT = (ToolArgumentError, ToolCancelled)


#: Errors a store raises for an outcome it cannot hold (not JSON, not copyable, too large, nested too deeply).
_NOT_STORABLE = (TypeError, ValueError, RecursionError)
#: Errors ``finish`` raises for an outcome not stored: not storable, or the store did not answer.
_NOT_STORED = (*_NOT_STORABLE, StateUnavailable)


def _nothing(_: Any) -> None:
    return None


#: What a key keeps of one attempt: ``(ok, value, error)``, the error as stored (its dict, without a call id).
_Kept: TypeAlias = tuple[bool, Any, dict[str, Any] | None]


def _error_record(error: ToolError) -> dict[str, Any]:
    """``error`` as a record stores it: its dict without its call's id (a replay fills in its own)."""
    return {**error.to_dict(), "call_id": None}


def _kept(call: Call, outcome: tuple[bool, Any] | None) -> _Kept | None:
    """What the key of ``call``, whose tool ran on past its caller, keeps (a :class:`~harness_one.Lingering`
    outcome): ``(ok, value, error)``, or None to free it (not known, stopped by KeyboardInterrupt and
    the like, or an error that keeps nothing, as when the caller waits). An exception's text has the
    call's secret values masked, as the core masks a failure the caller waited for."""
    if outcome is None or not (outcome[0] or isinstance(outcome[1], Exception)):
        return None
    ok, value = outcome
    if ok:
        return True, value, None
    error = value if isinstance(value, ToolError) else ToolExecutionError.of(call, value)
    return None if isinstance(error, _NOT_KEPT) else (False, None, _error_record(error))


class _Attempts:
    """The outcome a key keeps of a call whose attempts ran the tool, some of them on in threads
    past their timeouts: the first success known of any attempt (the tool did it), else, once every
    attempt's tool has returned, the outcome of the last attempt that left one (None: the key is
    freed). A later attempt refused before its tool started (busy, rate limited), or cancelled
    before its tool returned, left nothing to keep."""

    __slots__ = ("call", "known", "lock", "pending", "settled")

    def __init__(self, call: Call, ran: dict[int, tuple[Lingering | None, _Kept | None]]) -> None:
        self.call = call
        self.lock = threading.Lock()
        self.settled = False
        self.known = {n: kept for n, (lingering, kept) in ran.items() if lingering is None}
        self.pending = {n: lingering for n, (lingering, _) in ran.items() if lingering is not None}

    def arrived(self, attempt: int | None, outcome: tuple[bool, Any] | None) -> tuple[_Kept | None] | None:
        """Note that ``attempt``'s tool returned ``outcome`` (None: only decide): the key's outcome
        to store, in a 1-tuple, to the one caller that decides it; None while some tool runs on, or
        once it was decided."""
        with self.lock:
            if self.settled:
                return None
            if attempt is not None and self.pending.pop(attempt, None) is not None:
                self.known[attempt] = _kept(self.call, outcome)
            ordered = sorted(self.known.items())
            success = next((kept for _, kept in ordered if kept is not None and kept[0]), None)
            if success is None and self.pending:
                return None
            self.settled = True
            if success is not None:
                return (success,)
            # the last attempt that left an outcome: one cancelled before its tool returned left none
            return (next((kept for _, kept in reversed(ordered) if kept is not None), None),)


class OutcomeNotReplayable(ToolError):
    """The outcome a key keeps when its tool ran but what it returned cannot be stored to replay.

    Neither the result nor the JSON the model read for it could be kept (a store's size bound,
    an integer past Python's digit limit): later calls with the key get this error (marked
    ``replayed``) instead of running the tool again.
    """

    kind = "idempotency_not_replayable"


class IdempotencyScopeMissing(ToolError):
    """A keyed call without a context field of the plugin's ``scope``: refused, not run, nothing stored.

    ``field`` names the missing field (or one holding no string, integer or UUID: an object's
    text may be its address, another user's later). A key scoped by a field is only ever the key of
    one value of it, so a call that does not say whose key it is neither claims nor replays one.
    """

    kind = "idempotency_scope_missing"

    def __init__(
        self, field: str, key: str, *, got: str | None = None, tool: str | None = None, call_id: str | None = None
    ) -> None:
        self.field = field
        if got is None:
            why = f"without the context field '{field}' that idempotency keys are scoped by"
            fix = "Make the call with that field in its context."
        else:
            why = (
                f"the context field '{field}' that idempotency keys are scoped by holds {got}, not a string, an integer or a UUID"
            )
            fix = "Give that field a string, an integer or a UUID."
        super().__init__(
            f"Tool '{tool}' was called with idempotency key '{key}' but {why}, so it was not run. {fix}",
            tool=tool,
            call_id=call_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "field": self.field}


def _scope_fields(scope: Any) -> tuple[str, ...]:
    """The ``scope`` option as a tuple of context field names (empty: keys are not scoped, ``None``).

    An empty list is refused, as an empty or blank name is: it read as unscoped, every user's keys one."""
    fields = (scope,) if isinstance(scope, str) else () if scope is None else scope
    named = isinstance(fields, (tuple, list)) and all(isinstance(f, str) and f.strip() for f in fields)
    if not named or (scope is not None and not fields):
        raise ValueError(f"idempotency scope must be a context field name or a non-empty list of them, not {scope!r}")
    if len(set(fields)) != len(fields):
        raise ValueError(f"idempotency scope names a context field twice: {scope!r}")
    return tuple(fields)


class QuotedString(UserString):
    """A replayed result whose first answer was a value written in JSON as this string (a date, a
    ``Decimal``, a UUID, bytes), from a store that keeps JSON: equal to the string and its JSON
    data, and read by the model as JSON, quoted, as it read the first answer (a ``str`` it reads as
    it is)."""


def _as_json(data: Any) -> Any:
    """``data`` (an error's record) as plain JSON data: the text the model reads for it (:func:`rendered`), read back.
    ``ValueError`` when that text cannot be read back."""
    return json.loads(rendered(data))


def _result_json(data: Any) -> tuple[Any, bool]:
    """A result ``data`` as :func:`_as_json` gives it, and whether that is a string the model read quoted
    (``data`` was not a string): its replay shows the model the text it read. That text itself where a list or
    dict read back would lose part of it (keys ``1`` and ``"1"`` are one key read back), so its replay shows the
    model all of it. ``ValueError`` when that text cannot be read back."""
    if isinstance(data, str):
        return data, False
    text = rendered(data)
    value = json.loads(text)
    if isinstance(value, str):
        return value, True
    return (value if rendered(value) == text else text), False


class IdempotencyPlugin:
    """Replays the first outcome of a call made with ``idempotency_key=``.

    Args:
        store: where records live (default: the registry's state: in memory, or the SQLite
            file of a ``sqlite:`` state URL).
        path: a SQLite file to keep records in (instead of ``store``).
        timeout: with ``path``, the seconds an operation waits for the SQLite file while another
            connection writes it (default 10; the ``?timeout=`` of a ``sqlite:`` state URL).
        ttl: seconds a finished record is kept (default 24 h).
        lease: seconds an in-progress record holds the key without renewal (default 5 min);
            it is renewed every ``lease / 3`` while the call runs.
        wait: seconds a call waits for an in-progress call with the same key to finish
            (0: fail at once with :class:`IdempotencyConflict`).
        poll: seconds between checks while waiting.
        clock: time for expiry (default: wall-clock time, comparable across processes).
        scope: a ``Call.context`` field name, or a list of them, whose values are part of every
            key: the same key from two users (``scope="user_id"``) is two keys. A keyed call whose
            context has no value (or None) under one of them fails with
            :class:`IdempotencyScopeMissing` (not run). Default: keys are not scoped.
        max_records: at most this many finished records an in-memory store keeps (default: the
            store's own, 100,000); past it the oldest are dropped first, and their keys run again.
        max_chars: at most this many characters of outcomes an in-memory store keeps together,
            each measured as the model reads it (default: the store's own, 100,000,000); past it
            the oldest are dropped first; an outcome larger alone is kept as
            :class:`OutcomeNotReplayable`.
        on_state_error: when a shared store (Redis) does not answer at admission:
            ``"closed"`` (default: the call fails with
            :class:`~harness_one.state.StateUnavailable`, so a key never runs twice) or
            ``"open"`` (the call runs without the key's protection, with a warning). An
            outcome that cannot be stored is logged; the key stays held until its lease ends.

    A key's outcome is what the tool did: an outcome the store cannot hold as it is (not JSON
    for SQLite and Redis, not copyable in memory) is stored as the JSON the model read for it,
    and one it cannot hold even so (too large) as :class:`OutcomeNotReplayable`, counted in
    ``stats()["idempotency"]["not_replayable"]``: the key is never freed for the tool to run
    again. A plugin's hook failing after the tool returned (a :class:`~harness_one.PluginError`)
    fails this call only: the key keeps the tool's value. Of a retried call, the key keeps the
    first success of any attempt (one whose tool ran on past its timeout too), else, once every
    attempt's tool has returned, the outcome of the last attempt that left one, never a later
    attempt's refusal nor a cancel after an attempt's tool returned. A key is matched by the arguments
    alone: keys are the caller's, and one caller's key is not another's to reuse (``scope``
    makes each user's keys their own).

    A store whose methods take ``owner`` (the standard ones do) gets a token per claim; an
    outcome its lapsed owner could not store (another call holds the key) is logged and
    counted in ``stats()["idempotency"]["lapsed"]``.
    """

    name = "idempotency"
    order = 60

    def __init__(
        self,
        *,
        store: IdempotencyStore | None = None,
        path: str | Path | None = None,
        timeout: float | None = None,
        ttl: float = 24 * 3600.0,
        lease: float = 300.0,
        wait: float = 0.0,
        poll: float = 0.02,
        clock: Clock | None = None,
        scope: str | Sequence[str] | None = None,
        on_state_error: str = "closed",
        max_records: int | None = None,
        max_chars: int | None = None,
    ) -> None:
        self.fail = FailMode("idempotency", on_state_error)
        #: Bounds of an in-memory store (None: the store's own, 100,000 records and 100,000,000 characters).
        self.max_records = count(max_records, "idempotency max_records", optional=True)
        self.max_chars = count(max_chars, "idempotency max_chars", optional=True)
        self.scope = _scope_fields(scope)
        # Checked before the first call: a ttl of 0 would keep no record, a "24h" fail after the tool ran.
        self.ttl = seconds(ttl, "idempotency ttl")
        self.lease = seconds(lease, "idempotency lease", minimum=0.001)  # a shorter one would renew without end
        self.wait = seconds(wait, "idempotency wait", zero=True)
        self.poll = seconds(poll, "idempotency poll", minimum=0.001)
        if store is not None and path is not None:
            raise ValueError("give a store or a path, not both")
        store = provides(
            store, "idempotency store", "an idempotency store", ("begin", "renew", "finish", "release"), optional=True
        )
        if timeout is not None and path is None:
            raise ValueError(
                "idempotency timeout= is the wait for the SQLite file of path=; give it with path=, "
                "as SQLiteStore(path, timeout=...) for store=, or as ?timeout= in a sqlite: state URL"
            )
        wait_for_file = seconds(timeout, "idempotency timeout", optional=True)
        if path is not None:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # (a new one: its owner's)
            from harness_one.state import SQLiteStore  # sqlite3 imported only for a file's records

            file = Path(path).expanduser()
            store = SQLiteStore(file) if wait_for_file is None else SQLiteStore(file, timeout=wait_for_file)
        self.store: IdempotencyStore = store if store is not None else MemoryStore()
        self._own_store = store is not None
        self._bound(self.store)
        self.clock: Clock = provides(clock, "idempotency clock", "a clock", ("now",), optional=True) or WallClock()
        self.replays = 0
        self.stored = 0
        self.lapsed = 0
        self.not_replayable = 0
        self._leases = LeaseKeeper("idempotency", lambda: self.lease / 3, self._renew, retake=self._retake)
        self._twins = AsyncTwins("abegin")  # whether the store has awaitable twins
        methods = ("begin", "renew", "finish", "release", "abegin", "arenew", "afinish", "arelease")
        self._owners = Accepts("owner", *methods)  # whether the store keeps claims' owners

    def _renew(self, held: list[tuple[str, str, str | None, str]]) -> Sequence[bool]:
        """Renew the claims of one pass of the lease keeper: in one round trip where the store can (Redis)."""
        store, now, lease = self.store, self.clock.now(), self.lease
        many = getattr(store, "renew_many", None)
        if many is not None:
            return many([(name, key, owner) for name, key, owner, _ in held], now, lease)  # type: ignore[no-any-return]
        return [store.renew(name, key, now, lease, **self._owners.keywords(store, owner)) for name, key, owner, _ in held]

    def _retake(self, held: tuple[str, str, str | None, str]) -> bool:
        """Claim again a key whose lease lapsed while its call runs, if no one else holds it."""
        name, key, owner, digest = held
        store = self.store
        return store.begin(name, key, digest, self.clock.now(), self.lease, **self._owners.keywords(store, owner)) is None

    def _bound(self, store: IdempotencyStore) -> None:
        """Give an in-memory store the bounds set here (a SQLite or Redis store keeps records until ``ttl``)."""
        if isinstance(store, MemoryStore) and (self.max_records is not None or self.max_chars is not None):
            store.bound(max_records=self.max_records, max_chars=self.max_chars)

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        # (records are rows of a SQLite state's file: another State on that file holds the same rows and claims)
        if not self._own_store and takes_state(self, registry, "records", "store", "path", in_file=True):
            self.store = registry.state.idempotency()
            self._bound(self.store)

    @hookimpl(tryfirst=True)
    @applies_to(keyed=True)  # calls without an idempotency key never reach these hooks
    def harness_pre_call(self, call: Call) -> Outcome | Await | None:
        key = call.idempotency_key
        if key is None or call.peek(_OWNED) is not None:
            return None
        if self.scope:
            key = self._scoped(call, key)
        digest = fingerprint(call.arguments)
        store, name, now = self.store, call.tool.name, self.clock.now()
        owner = new_token() if self._owners(store) else None
        mine = self._owners.keywords(store, owner)
        if store is not self._twins.plain:  # not the store known to answer without I/O
            shared = self._twins(store)
            if shared is not None:
                return round_trip(
                    lambda: store.begin(name, key, digest, now, self.lease, **mine),
                    lambda: shared.abegin(name, key, digest, now, self.lease, **mine),
                    lambda found: self._claimed(call, key, digest, owner, found),
                    lambda exc: self._unclaimed(call, exc),
                    # cancelled meanwhile: a claim made is released (only its owner's; none without owners)
                    None if owner is None else lambda: self._freeing(shared, name, key, owner),
                )
        try:
            found = store.begin(name, key, digest, now, self.lease, **mine)
        except StateUnavailable as exc:
            self._unclaimed(call, exc)
            return None
        return self._claimed(call, key, digest, owner, found)

    def _scoped(self, call: Call, key: str) -> str:
        """The key stored for ``call``: ``key`` after the text of each ``scope`` field's value, each
        length-prefixed (``5:alice:order-7``), so no two users' keys are one."""
        scoped = []
        for field in self.scope:
            value = call.context.get(field)
            try:
                text = key_text(value, strict=True)  # a string, an integer or a UUID: an object's text may be its address
            except TypeError:
                got = None if value is None else f"a {type(value).__name__}"
                raise IdempotencyScopeMissing(field, key, got=got, tool=call.tool.name, call_id=call.call_id) from None
            scoped.append(f"{len(text)}:{text}:")
        return "".join(scoped) + key

    def _unclaimed(self, call: Call, exc: StateUnavailable) -> None:
        self.fail.handle(exc, call.tool.name, call.call_id, "idempotency key not claimed")

    def _claimed(self, call: Call, key: str, digest: str, owner: str | None, found: Record | None) -> Outcome | None:
        """The answer to ``begin``: the key is ours (run the call), or replay, or refuse."""
        if found is None:
            call.state[_OWNED] = (key, digest, owner)
            self._leases.hold(id(call), (call.tool.name, key, owner, digest))
            return None
        if found.fingerprint != digest:
            raise IdempotencyKeyMismatch(
                f"Idempotency key '{call.idempotency_key}' was already used for tool '{call.tool.name}' "
                "with different arguments. Use a new key for a new request, or repeat the original arguments.",
                tool=call.tool.name,
                call_id=call.call_id,
            )
        if found.state != "done":
            raise IdempotencyConflict(
                f"A call of tool '{call.tool.name}' with idempotency key '{call.idempotency_key}' is still running. "
                "Retry shortly.",
                retry_after=self.poll,
                tool=call.tool.name,
                call_id=call.call_id,
            )
        self.replays += 1
        if found.ok:  # (a value whose JSON is a string: read by the model quoted, as the first time)
            return Outcome.success(QuotedString(found.value) if found.quoted and isinstance(found.value, str) else found.value)
        error = ToolError.from_dict(found.error or {})
        error.call_id = None  # the replaying call's id is filled in
        error.replayed = True
        return Outcome.failure(error)

    def _finish(self, call: Call, ok: bool, value: Any = None, error: dict[str, Any] | None = None) -> Await | None:
        self._leases.drop(id(call))
        key, digest, owner = call.take(_OWNED)
        now = self.clock.now()
        record = self._record(digest, now, ok, value, error)
        store = self.store
        shared = self._twins(store)
        if shared is None:
            self._store(store, call, key, record, owner, now)
            return None

        def storing() -> None:
            self._store(store, call, key, record, owner, now)

        def astoring() -> Awaitable[None]:
            return self._astore(shared, call, key, record, owner, now)

        # cancelled meanwhile (after its tool returned): sent again, an owner's finish is safe to repeat
        return round_trip(storing, astoring, _nothing, _nothing, lambda: Await(storing, astoring))

    def _refused(self, call: Call, record: Record, refused: list[Exception], exc: Exception) -> Record | None:
        """What to store after ``finish`` raised ``exc`` for ``record`` or a fallback of it (``refused``:
        one error per earlier refusal): nothing once the store did not answer, else the JSON the model
        read for the outcome, then :class:`OutcomeNotReplayable`, then nothing more (logged). The tool
        ran: its key is never freed for it to run again; one whose outcome is not stored is held until
        its lease ends. The one decision of :meth:`_store` and :meth:`_astore`, which do only the I/O."""
        name = call.tool.name
        if isinstance(exc, StateUnavailable):  # the caller still gets the outcome
            log_event(40, "idempotent result not stored", tool=name, error=str(exc))
            return None
        refused.append(exc)  # not storable as it is (not JSON, not copyable, too large, nested too deep)
        if len(refused) == 1:
            try:
                value, quoted = (None, False) if record.value is None else _result_json(record.value)
                error = None if record.error is None else _as_json(record.error)
            except _NOT_STORABLE:  # its JSON cannot be read back (an integer past Python's digit limit)
                refused.append(exc)  # on to the next
            else:
                return Record(record.fingerprint, record.state, record.expires, record.ok, value, error, quoted)
        if len(refused) == 2:
            self.not_replayable += 1
            log_event(30, "idempotent outcome not replayable: kept as OutcomeNotReplayable", tool=name, error=str(exc))
            lost = OutcomeNotReplayable(
                f"Tool '{name}' already ran for idempotency key '{call.idempotency_key}', "
                "but its outcome could not be stored to replay; it is not run again with this key.",
                tool=name,
            )
            return Record(record.fingerprint, record.state, record.expires, False, None, {**lost.to_dict(), "call_id": None})
        # Not even the error was stored (a store refusing it)
        log_event(40, "idempotent result not stored", tool=name, error=str(exc))
        return None

    def _store(self, store: IdempotencyStore, call: Call, key: str, record: Record, owner: str | None, now: float) -> None:
        """Store ``record`` as ``key``'s outcome, or what :meth:`_refused` gives in its place."""
        name = call.tool.name
        mine = self._owners.keywords(store, owner, now=now)
        refused: list[Exception] = []
        kept: Record | None = record
        while kept is not None:
            try:  # given an owner, the store keeps another caller's live claim or outcome (this claim's lease lapsed)
                self._stored(name, store.finish(name, key, kept, **mine))
                return
            except _NOT_STORED as exc:
                kept = self._refused(call, record, refused, exc)

    async def _astore(
        self, store: AsyncIdempotencyStore, call: Call, key: str, record: Record, owner: str | None, now: float
    ) -> None:
        """:meth:`_store` through the store's awaitable twin."""
        name = call.tool.name
        mine = self._owners.keywords(store, owner, now=now)
        refused: list[Exception] = []
        kept: Record | None = record
        while kept is not None:
            try:
                self._stored(name, await store.afinish(name, key, kept, **mine))
                return
            except _NOT_STORED as exc:
                kept = self._refused(call, record, refused, exc)

    def _stored(self, name: str, answer: bool | None) -> None:
        """Count ``finish``'s answer: False when the claim had lapsed and another call holds the key."""
        if answer is False:
            self.lapsed += 1
            log_event(30, "idempotent result not stored: its lease lapsed and another call holds the key", tool=name)
        else:
            self.stored += 1

    def _release_key(self, tool: str, key: str, owner: str | None) -> None:
        try:
            self.store.release(tool, key, **self._owners.keywords(self.store, owner))
        except StateUnavailable as exc:
            self._not_released(tool, exc)

    async def _arelease_key(self, store: AsyncIdempotencyStore, tool: str, key: str, owner: str | None) -> None:
        try:
            await store.arelease(tool, key, **self._owners.keywords(store, owner))
        except StateUnavailable as exc:
            self._not_released(tool, exc)

    def _freeing(self, shared: AsyncIdempotencyStore, tool: str, key: str, owner: str | None) -> Await:
        """The release of a claim, as an ``Await`` (an owner's is safe to repeat)."""
        return Await(lambda: self._release_key(tool, key, owner), lambda: self._arelease_key(shared, tool, key, owner))

    def _not_released(self, tool: str, exc: StateUnavailable) -> None:
        self.fail.note(exc, tool, "idempotency key not released; it frees when its lease ends")

    def _release(self, call: Call) -> Await | None:
        self._leases.drop(id(call))
        key, _, owner = call.take(_OWNED)
        name, shared = call.tool.name, self._twins(self.store)
        if shared is None:
            self._release_key(name, key, owner)
            return None
        freeing = self._freeing(shared, name, key, owner)
        # cancelled meanwhile: sent again, an owner's (one without could free another caller's claim made since)
        return round_trip(freeing.sync, freeing.aio, _nothing, _nothing, None if owner is None else lambda: freeing)

    @hookimpl
    @applies_to(keyed=True)
    def harness_post_call(self, call: Call) -> Await | None:
        if call.peek(_OWNED) is not None:
            return self._finish(call, True, value=call.result)
        return None

    @hookimpl
    @applies_to(keyed=True)
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | Await | None:
        if isinstance(error, IdempotencyConflict) and not call.ran:
            waited = call.peek(_WAITED, 0.0)
            if waited + self.poll <= self.wait:
                call.state[_WAITED] = waited + self.poll
                return Retry(self.poll)
            return None
        if call.peek(_OWNED) is None:
            return None
        if type(call.decision) is Retry:  # another attempt follows: what this one's tool did is kept for the end
            if call.ran:
                ran = call.peek(_RAN)
                if ran is None:
                    ran = call.state[_RAN] = {}
                ran[call.attempt] = self._did(call, error)
            return None
        ran = call.take(_RAN) or {}
        if call.ran and call.attempt not in ran:
            # (An attempt recorded already was cancelled during its retry's wait, after its tool returned
            # or while it runs on: the cancel changes nothing the tool did, so its record stands.)
            ran[call.attempt] = self._did(call, error)
        if not ran:
            return self._release(call)  # refused before running, or no attempt's tool ran: nothing to keep
        if len(ran) == 1:
            [(lingering, kept)] = ran.values()
            if lingering is None:  # the common case: one attempt ran, and returned
                return self._release(call) if kept is None else self._finish(call, *kept)
        return self._settle(call, _Attempts(call, ran))

    def _did(self, call: Call, error: BaseException) -> tuple[Lingering | None, _Kept | None]:
        """What this attempt's tool did, as the key keeps it: ``(lingering, None)`` while it runs on in a
        thread, else ``(None, kept)`` (kept None: nothing to keep)."""
        lingering = call.lingering
        if lingering is not None and isinstance(error, (ToolTimeout, ToolCancelled)):
            # Its tool runs on in a thread (a thread-mode timeout, a cancelled acall): the key stays
            # held until it returns, then keeps what the tool did, not the caller's giving up.
            return lingering, None
        if isinstance(error, PluginError) and error.plugin is not None and error.call_id == call.call_id:
            # A plugin's hook failed after the tool returned (the tool's own exceptions arrive as
            # ToolExecutionError): the key keeps what the tool did, not the plugin's passing failure.
            return None, (True, call.result, None)
        if isinstance(error, ToolError) and not isinstance(error, _NOT_KEPT):
            return None, (False, None, _error_record(error))
        return None, None  # wrong arguments, or cancelled before its tool returned: nothing to keep

    def _settle(self, call: Call, attempts: _Attempts) -> Await | None:
        """Settle the key of a call some of whose attempts' tools run on: here if their outcomes decide it
        already (through the store's awaitable twin under acall), else from the thread of the tool whose
        return decides it; the key stays held, its lease renewed, until then."""
        held = call.peek(_OWNED)
        decided = attempts.arrived(None, None)
        for attempt, lingering in list(attempts.pending.items()):
            if decided is not None:
                break

            def later(attempt: int = attempt, lingering: Lingering = lingering) -> None:
                verdict = attempts.arrived(attempt, lingering.outcome)
                if verdict is not None:
                    self._finish_later(call, held, verdict[0])

            if not lingering.later(later):  # its tool returned already
                decided = attempts.arrived(attempt, lingering.outcome)
        if decided is None:
            call.take(_OWNED)  # finished by a tool's thread
            return None
        kept = decided[0]
        return self._release(call) if kept is None else self._finish(call, *kept)

    def _finish_later(self, call: Call, held: tuple[str, str, str | None], kept: _Kept | None) -> None:
        """The key of a call whose tool ran on after its caller stopped waiting, finished from the
        tool's thread as it returns: ``kept`` is stored (the key freed if None)."""
        self._leases.drop(id(call))
        name, (key, digest, owner) = call.tool.name, held
        if kept is None:
            self._release_key(name, key, owner)
            return
        now = self.clock.now()
        self._store(self.store, call, key, self._record(digest, now, *kept), owner, now)

    def _record(self, digest: str, now: float, ok: bool, value: Any, error: dict[str, Any] | None) -> Record:
        """The finished record of a key: its outcome (an error as :func:`_error_record` gives it), kept ``ttl`` from ``now``."""
        return Record(digest, "done", now + self.ttl, ok, value, error)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        lapsed = {"lapsed": self.lapsed} if self.lapsed else {}
        lost = {"not_replayable": self.not_replayable} if self.not_replayable else {}
        evicted = self.store.evicted if isinstance(self.store, MemoryStore) else 0  # finished records dropped
        dropped = {"evicted": evicted} if evicted else {}
        return {
            "replays": self.replays,
            "stored": self.stored,
            **lapsed,
            **lost,
            **dropped,
            **self._leases.stats(),
            **self.fail.stats(),
        }


def __getattr__(name: str) -> Any:
    if name == "SQLiteStore":  # kept importable from here; sqlite3 is imported on first use
        from harness_one.state import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
